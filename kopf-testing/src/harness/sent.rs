//! The operator's own client to the fake server: it records every request the operator sends
//! (bodies included, which the server's log leaves out), and counts its TCP connections, so a
//! stop can check that the operator closed them all, whatever clients the test still holds.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};

use futures::FutureExt as _;
use http_body_util::BodyExt as _;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioExecutor;
use kopf_fake_apiserver::{FakeApiServer, wait};
use kube::client::{Body, ConfigExt as _};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::locks::lock;

/// One request the operator sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SentRequest {
    /// The HTTP method (`GET`, `PATCH`, ...).
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The raw query string (empty when none).
    pub query: String,
    /// The resource's plural name (`kopfexamples`, `configmaps`), if the path names one.
    pub resource: Option<String>,
    /// The namespace in the path, if any.
    pub namespace: Option<String>,
    /// The object's name in the path, if any.
    pub name: Option<String>,
    /// The subresource (`status`, `scale`), if any.
    pub subresource: Option<String>,
    /// The `Content-Type` of the body, if any.
    pub content_type: Option<String>,
    /// The body as JSON (`null` when empty or not JSON).
    pub body: Value,
    /// The status code of the answer (`None` while unanswered, or when no answer came: the
    /// connection failed or the operator dropped the request).
    #[serde(default)]
    pub code: Option<u16>,
}

impl SentRequest {
    fn new(request: &http::Request<Body>) -> SentRequest {
        let uri = request.uri();
        let body = request
            .body()
            .try_clone()
            .and_then(|body| body.collect().now_or_never())
            .and_then(Result::ok)
            .map(|collected| collected.to_bytes())
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or(Value::Null);
        let mut sent = SentRequest {
            method: request.method().to_string(),
            path: uri.path().to_string(),
            query: uri.query().unwrap_or_default().to_string(),
            resource: None,
            namespace: None,
            name: None,
            subresource: None,
            content_type: request
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(String::from),
            body,
            code: None,
        };
        sent.parse_path();
        sent
    }

    /// Reads the resource, namespace, name and subresource from a path of the Kubernetes
    /// API: `/api/v1/...` or `/apis/GROUP/VERSION/...`, then `[namespaces/NS/]PLURAL[/NAME[/SUB]]`.
    fn parse_path(&mut self) {
        let segments: Vec<&str> = self.path.split('/').filter(|s| !s.is_empty()).collect();
        let rest = match segments.first() {
            Some(&"api") if segments.len() >= 2 => &segments[2..],
            Some(&"apis") if segments.len() >= 3 => &segments[3..],
            _ => return,
        };
        let rest = match rest {
            ["namespaces", namespace, rest @ ..] if !rest.is_empty() => {
                self.namespace = Some((*namespace).to_string());
                rest
            }
            rest => rest,
        };
        let mut parts = rest.iter().map(|s| (*s).to_string());
        self.resource = parts.next();
        self.name = parts.next();
        self.subresource = parts.next();
    }
}

/// The `User-Agent` of a kopf-rs operator's own client (`kopf-rs/VERSION`), which the
/// harness gives the operator's client too, so that `Fault::user_agent("kopf-rs/")` aims at
/// the operator's requests and not at the test's.
pub(super) const AGENT: &str = concat!("kopf-rs/", env!("CARGO_PKG_VERSION"));

/// Names a client of this configuration as a kopf-rs operator's own client names itself
/// ([`AGENT`]), unless the configuration names it already.
pub(super) fn named_as_kopf_rs(config: &mut kube::Config) {
    let named = config
        .headers
        .iter()
        .any(|(name, _)| name == http::header::USER_AGENT);
    if !named {
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static(AGENT),
        ));
    }
}

/// Records each request, then its answer's status code.
struct Recording<S> {
    inner: S,
    sent: Arc<Mutex<Vec<SentRequest>>>,
    /// Alive while the operator's client is.
    _alive: Arc<()>,
}

impl<S, B> tower::Service<http::Request<Body>> for Recording<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let index = {
            let mut sent = lock(&self.sent);
            sent.push(SentRequest::new(&request));
            sent.len() - 1
        };
        let answered = self.inner.call(request);
        let sent = self.sent.clone();
        Box::pin(async move {
            let answer = answered.await;
            if let Ok(response) = &answer
                && let Some(record) = lock(&sent).get_mut(index)
            {
                record.code = Some(response.status().as_u16());
            }
            answer
        })
    }
}

/// The operator's client's records; the client itself goes to the operator.
#[derive(Debug)]
pub(crate) struct OperatorClient {
    sent: Arc<Mutex<Vec<SentRequest>>>,
    connections: Arc<AtomicUsize>,
    /// Gone when the operator dropped every clone of its client.
    alive: Weak<()>,
}

impl OperatorClient {
    /// A recording, counting client to `server` (as the admin, or as a ServiceAccount
    /// `(namespace, name)`), and its records.
    pub(crate) async fn new(
        server: &FakeApiServer,
        account: Option<&(String, String)>,
    ) -> (OperatorClient, kube::Client) {
        let mut config = match account {
            Some((namespace, name)) => {
                super::apiserver::service_account_config(server, namespace, name).await
            }
            None => kube::Config::from_custom_kubeconfig(
                server.kubeconfig(),
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .expect("the fake server's kubeconfig is valid"),
        };
        // Faults may aim at the operator's requests by their `User-Agent`.
        named_as_kopf_rs(&mut config);
        let sent = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let alive = Arc::new(());
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        let counting = CountingConnector {
            inner: tcp,
            open: connections.clone(),
        };
        // HTTPS when the server serves TLS, plain HTTP otherwise; TCP connections are counted
        // either way.
        let connector = config
            .rustls_https_connector_with_connector(counting)
            .expect("the fake server's CA makes a TLS configuration");
        let http = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .build::<_, Body>(connector);
        let recorder = sent.clone();
        let owner = alive.clone();
        let service = tower::ServiceBuilder::new()
            .layer_fn(move |inner| Recording {
                inner,
                sent: recorder.clone(),
                _alive: owner.clone(),
            })
            .layer(config.base_uri_layer())
            .option_layer(
                config
                    .auth_layer()
                    .expect("the fake server's auth is a token"),
            )
            .layer(
                config
                    .extra_headers_layer()
                    .expect("the User-Agent and the kubeconfig's headers are valid"),
            )
            .map_err(tower::BoxError::from)
            .service(http);
        let client = kube::Client::new(service, config.default_namespace);
        let records = OperatorClient {
            sent,
            connections,
            alive: Arc::downgrade(&alive),
        };
        (records, client)
    }

    pub(crate) fn sent(&self) -> Vec<SentRequest> {
        lock(&self.sent).clone()
    }

    /// Waits until the operator dropped its client and every connection of it closed.
    pub(crate) async fn wait_closed(&self) {
        wait("the operator to drop its kube client", || async {
            (self.alive.strong_count() == 0).then_some(())
        })
        .await;
        wait("the operator's connections to close", || async {
            (self.connections.load(Ordering::SeqCst) == 0).then_some(())
        })
        .await;
    }
}

/// TCP connections that count themselves while open.
#[derive(Debug, Clone)]
struct CountingConnector {
    inner: HttpConnector,
    open: Arc<AtomicUsize>,
}

impl tower::Service<http::Uri> for CountingConnector {
    type Response = Counted<<HttpConnector as tower::Service<http::Uri>>::Response>;
    type Error = <HttpConnector as tower::Service<http::Uri>>::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let open = self.open.clone();
        Box::pin(async move {
            let stream = connecting.await?;
            open.fetch_add(1, Ordering::SeqCst);
            Ok(Counted { stream, open })
        })
    }
}

/// A connection, counted until dropped.
#[derive(Debug)]
struct Counted<S> {
    stream: S,
    open: Arc<AtomicUsize>,
}

impl<S> Drop for Counted<S> {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<S: Connection> Connection for Counted<S> {
    fn connected(&self) -> Connected {
        self.stream.connected()
    }
}

impl<S: hyper::rt::Read + Unpin> hyper::rt::Read for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: hyper::rt::Write + Unpin> hyper::rt::Write for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(path: &str) -> SentRequest {
        let request = http::Request::patch(path).body(Body::empty()).unwrap();
        SentRequest::new(&request)
    }

    #[test]
    fn paths_name_the_resource_namespace_object_and_subresource() {
        let sent = parsed("/apis/kopf.dev/v1/namespaces/default/kopfexamples/kex/status?x=1");
        assert_eq!(sent.resource.as_deref(), Some("kopfexamples"));
        assert_eq!(sent.namespace.as_deref(), Some("default"));
        assert_eq!(sent.name.as_deref(), Some("kex"));
        assert_eq!(sent.subresource.as_deref(), Some("status"));
        assert_eq!(sent.query, "x=1");

        let namespace = parsed("/api/v1/namespaces/default");
        assert_eq!(namespace.resource.as_deref(), Some("namespaces"));
        assert_eq!(namespace.name.as_deref(), Some("default"));
        assert_eq!(namespace.namespace, None);

        let cluster = parsed("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x.y");
        assert_eq!(cluster.name.as_deref(), Some("x.y"));
        assert_eq!(parsed("/version").resource, None);
    }

    #[test]
    fn json_bodies_are_kept() {
        let request = http::Request::patch("/api/v1/namespaces/ns/configmaps/cm")
            .header("content-type", "application/merge-patch+json")
            .body(Body::from(br#"{"data":{"a":"b"}}"#.to_vec()))
            .unwrap();
        let sent = SentRequest::new(&request);
        assert_eq!(sent.body, serde_json::json!({"data": {"a": "b"}}));
        assert_eq!(
            sent.content_type.as_deref(),
            Some("application/merge-patch+json")
        );
    }
}
