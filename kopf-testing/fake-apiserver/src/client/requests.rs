//! Requests as tests make them: a method, a path and a JSON body, answered with the status and
//! the answer's JSON; patch types, headers and raw bodies for the tests that need them.

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use http::{HeaderMap, Method, StatusCode};
use http_body_util::BodyExt as _;
use serde_json::Value;

use super::test_client::TestClient;

impl TestClient {
    /// Sends `method path` with a JSON body (or none: `None`, `null`) and returns the answer's status and
    /// JSON, whatever the status: an error's `Status` object comes back as any answer does.
    /// A PATCH body is a merge patch (as `kubectl patch --type=merge`); [`TestClient::send`]
    /// sends the other patch types, headers and raw bodies.
    ///
    /// The answer's body is JSON as parsed, a JSON string when it is not JSON, `null` when
    /// it is empty.
    ///
    /// ```no_run
    /// # async fn example(client: kopf_fake_apiserver::TestClient) {
    /// use serde_json::json;
    ///
    /// let path = "/api/v1/namespaces/default/configmaps";
    /// let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    /// let (status, created) = client.request("POST", path, config).await;
    /// assert_eq!(status, 201, "{created}");
    /// let (status, _) = client.request("PATCH", &format!("{path}/c"), json!({"data": {"k": "v"}})).await;
    /// assert_eq!(status, 200);
    /// let (status, error) = client.request("GET", &format!("{path}/missing"), None).await;
    /// assert_eq!(status, 404);
    /// assert_eq!(error["reason"], "NotFound");
    /// # }
    /// ```
    ///
    /// # Panics
    ///
    /// When no answer comes (the connection fails or drops), naming the request; also when
    /// `method` is not an HTTP method.
    pub async fn request(
        &self,
        method: impl AsRef<str>,
        path: &str,
        body: impl Into<Option<Value>>,
    ) -> (StatusCode, Value) {
        let answer = self.send(ApiRequest::new(method, path).json(body)).await;
        (answer.status, answer.json())
    }

    /// As [`TestClient::request`], but a request that got no answer is an error: for code
    /// that goes on while the server is away (restarting, say).
    ///
    /// # Errors
    ///
    /// [`RequestError::Unanswered`] when the connection fails or drops.
    pub async fn try_request(
        &self,
        method: impl AsRef<str>,
        path: &str,
        body: impl Into<Option<Value>>,
    ) -> Result<(StatusCode, Value), RequestError> {
        let answer = self
            .try_send(ApiRequest::new(method, path).json(body))
            .await?;
        Ok((answer.status, answer.json()))
    }

    /// Sends a request with more to it than [`TestClient::request`]'s: another patch type,
    /// headers, a body that is not JSON. Returns the whole answer, its headers included.
    ///
    /// ```no_run
    /// # async fn example(client: kopf_fake_apiserver::TestClient) {
    /// use kopf_fake_apiserver::{ApiRequest, PatchType};
    /// use serde_json::json;
    ///
    /// let request = ApiRequest::new("PATCH", "/api/v1/namespaces/default")
    ///     .json(json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]))
    ///     .patch_type(PatchType::Json)
    ///     .header(http::header::USER_AGENT, "my-test/1.0");
    /// let answer = client.send(request).await;
    /// assert_eq!(answer.status, 200, "{}", answer.json());
    /// # }
    /// ```
    ///
    /// # Panics
    ///
    /// When no answer comes (the connection fails or drops), naming the request.
    pub async fn send(&self, request: ApiRequest) -> Answer {
        self.try_send(request)
            .await
            .unwrap_or_else(|error| panic!("{error}"))
    }

    /// As [`TestClient::send`], but a request that got no answer is an error.
    ///
    /// # Errors
    ///
    /// [`RequestError::Unanswered`] when the connection fails or drops.
    pub async fn try_send(&self, request: ApiRequest) -> Result<Answer, RequestError> {
        let what = request.to_string();
        let unanswered = |error| RequestError::Unanswered {
            request: what.clone(),
            error,
        };
        let response = self
            .client
            .send(request.into_http())
            .await
            .map_err(unanswered)?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.map_err(unanswered)?.to_bytes();
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body,
            request: what,
        })
    }
}

/// A request for [`TestClient::send`]: a method and a path, and optionally a body, its patch
/// type and more headers.
///
/// The body's `Content-Type` follows from the method, unless a header sets it: the patch
/// type's for a PATCH (a merge patch unless [`ApiRequest::patch_type`] says otherwise),
/// `application/json` for the others.
#[derive(Debug, Clone)]
pub struct ApiRequest {
    method: Method,
    path: String,
    patch_type: PatchType,
    headers: HeaderMap,
    body: Option<Vec<u8>>,
}

impl ApiRequest {
    /// `method path` (`"GET"`, `"POST"`, ... or an [`http::Method`]), with no body yet. The
    /// path may carry a query (`?fieldManager=test`).
    ///
    /// # Panics
    ///
    /// When `method` is not an HTTP method.
    pub fn new(method: impl AsRef<str>, path: impl Into<String>) -> ApiRequest {
        let method = method.as_ref();
        ApiRequest {
            method: Method::from_bytes(method.as_bytes())
                .unwrap_or_else(|_| panic!("{method:?} is not an HTTP method")),
            path: path.into(),
            patch_type: PatchType::default(),
            headers: HeaderMap::new(),
            body: None,
        }
    }

    /// This JSON as the body (`None` or `null`: no body).
    pub fn json(mut self, body: impl Into<Option<Value>>) -> ApiRequest {
        self.body = body
            .into()
            .filter(|body| !body.is_null())
            .map(|body| serde_json::to_vec(&body).expect("JSON values serialize"));
        self
    }

    /// These bytes as the body, as they are: YAML (as kubectl sends an apply), or something
    /// broken on purpose.
    pub fn bytes(mut self, body: impl Into<Vec<u8>>) -> ApiRequest {
        self.body = Some(body.into());
        self
    }

    /// How the server is to read a PATCH body (a merge patch by default).
    pub fn patch_type(mut self, patch_type: PatchType) -> ApiRequest {
        self.patch_type = patch_type;
        self
    }

    /// One more header, e.g. a `User-Agent` (which faults can aim at), an `Accept`, or a
    /// `Content-Type` of the test's own.
    ///
    /// # Panics
    ///
    /// When the name or the value is not valid in a header.
    pub fn header<K, V>(mut self, name: K, value: V) -> ApiRequest
    where
        K: TryInto<HeaderName>,
        K::Error: std::fmt::Debug,
        V: TryInto<HeaderValue>,
        V::Error: std::fmt::Debug,
    {
        let name = name.try_into().expect("a valid header name");
        let value = value.try_into().expect("a valid header value");
        self.headers.append(name, value);
        self
    }

    /// The request as kube's client sends it.
    fn into_http(self) -> http::Request<kube::client::Body> {
        let mut request = http::Request::builder()
            .method(self.method.clone())
            .uri(&self.path);
        let headers = request.headers_mut().expect("the builder has no error yet");
        if self.body.is_some() && !self.headers.contains_key(CONTENT_TYPE) {
            let content_type = match self.method {
                Method::PATCH => self.patch_type.content_type(),
                _ => "application/json",
            };
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        }
        headers.extend(self.headers);
        request
            .body(self.body.unwrap_or_default().into())
            .unwrap_or_else(|error| {
                panic!("{} {} is not a request: {error}", self.method, self.path)
            })
    }
}

/// `METHOD path`, as messages name a request.
impl std::fmt::Display for ApiRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

/// How the server is to read a PATCH body: its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PatchType {
    /// A JSON merge patch (RFC 7386), as `kubectl patch --type=merge`.
    #[default]
    Merge,
    /// A JSON patch (RFC 6902): a list of operations, as `kubectl patch --type=json`.
    Json,
    /// A strategic merge patch, as `kubectl patch` sends by default (built-in kinds only).
    StrategicMerge,
    /// Server-side apply, as `kubectl apply --server-side` (the path needs a
    /// `?fieldManager=`); the body may be YAML, sent with [`ApiRequest::bytes`].
    Apply,
}

impl PatchType {
    /// The `Content-Type` of a PATCH body of this type.
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Json => "application/json-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// What the server answered: its status, headers and body.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The status: `200`, `201`, `404`, ... (it compares with numbers: `answer.status == 404`).
    pub status: StatusCode,
    /// The headers: `Warning`, `Retry-After`, `Content-Type`, ...
    pub headers: HeaderMap,
    /// The body, as it came (read it with [`Answer::json`]).
    pub body: Bytes,
    /// `METHOD path` of the request, for messages.
    request: String,
}

impl Answer {
    /// The body as JSON: as parsed, a JSON string when it is not JSON, `null` when empty.
    pub fn json(&self) -> Value {
        if self.body.is_empty() {
            return Value::Null;
        }
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&self.body).into_owned()))
    }

    /// This answer if it is a success (`2xx`), else the error it is.
    ///
    /// ```no_run
    /// # async fn example(client: kopf_fake_apiserver::TestClient) -> Result<(), kopf_fake_apiserver::RequestError> {
    /// use kopf_fake_apiserver::ApiRequest;
    ///
    /// let request = ApiRequest::new("DELETE", "/api/v1/namespaces/default/configmaps/c");
    /// let deleted = client.try_send(request).await?.success()?.json();
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`RequestError::Refused`], with the status and the body, when it is not a success.
    pub fn success(self) -> Result<Answer, RequestError> {
        if self.status.is_success() {
            Ok(self)
        } else {
            Err(RequestError::Refused {
                body: self.json(),
                request: self.request,
                status: self.status,
            })
        }
    }
}

/// A request that failed, named as `METHOD path`.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// No answer came: the server is not there (stopped, restarting) or the connection
    /// dropped.
    #[error("{request} got no answer: {error}")]
    Unanswered {
        /// `METHOD path`.
        request: String,
        /// What the client saw instead of an answer.
        error: kube::Error,
    },
    /// The answer was an error ([`Answer::success`]).
    #[error("{request} was answered {status}: {body}")]
    Refused {
        /// `METHOD path`.
        request: String,
        /// The answer's status.
        status: StatusCode,
        /// The answer's body: usually a `Status` object with the reason and the message.
        body: Value,
    },
}
