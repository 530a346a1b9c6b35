//! Kubernetes `Status` error objects: every failed request answers with one.

use http::StatusCode;
use serde_json::{Value, json};

/// A failed request, as the API server reports it: an HTTP code, a `reason` and a message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiError {
    pub(crate) code: StatusCode,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
    pub(crate) details: Option<Box<Value>>,
    /// Seconds for the `Retry-After` header and `details.retryAfterSeconds`.
    pub(crate) retry_after: Option<u64>,
    /// `Warning` headers to send along (fieldValidation=Warn and friends).
    pub(crate) warnings: Vec<String>,
}

/// The result of a request handler.
pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// Identifies the object an error is about, for `Status.details`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Subject<'a> {
    pub(crate) group: &'a str,
    pub(crate) plural: &'a str,
    pub(crate) name: &'a str,
}

impl Subject<'_> {
    /// `plural.group` as the API server names a resource in messages (`plural` alone for core).
    pub(crate) fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `StatusDetails` in the real server's order: `name` (not when empty, as for an invalid
    /// `TokenRequest`), `group` (not for core), `kind`.
    fn details(&self) -> Value {
        let mut details = serde_json::Map::new();
        if !self.name.is_empty() {
            details.insert("name".into(), json!(self.name));
        }
        if !self.group.is_empty() {
            details.insert("group".into(), json!(self.group));
        }
        details.insert("kind".into(), json!(self.plural));
        Value::Object(details)
    }
}

impl ApiError {
    pub(crate) fn new(code: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
            warnings: Vec::new(),
        }
    }

    pub(crate) fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    pub(crate) fn not_found(subject: Subject<'_>) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("{} \"{}\" not found", subject.qualified(), subject.name),
        )
        .with_details(subject.details())
    }

    /// A path that names no served resource at all.
    pub(crate) fn no_route(path: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
        .with_details(json!({"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]}))
    }

    pub(crate) fn already_exists(subject: Subject<'_>) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "AlreadyExists",
            format!(
                "{} \"{}\" already exists",
                subject.qualified(),
                subject.name
            ),
        )
        .with_details(subject.details())
    }

    pub(crate) fn conflict(subject: Subject<'_>, why: &str) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": {why}",
                subject.qualified(),
                subject.name
            ),
        )
        .with_details(subject.details())
    }

    pub(crate) fn stale(subject: Subject<'_>) -> Self {
        Self::conflict(
            subject,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid with one cause per field.
    pub(crate) fn invalid(
        subject: Subject<'_>,
        kind: &str,
        message: String,
        causes: Vec<(String, String, String)>,
    ) -> Self {
        let mut details = subject.details();
        details["kind"] = json!(kind);
        details["causes"] = causes
            .into_iter()
            .map(|(reason, message, field)| json!({"reason": reason, "message": message, "field": field}))
            .collect();
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", message).with_details(details)
    }

    /// 422 Invalid with the field errors `(reason, field, detail)`, worded as Go's
    /// `NewInvalid`: one error as it is, several (each once) in brackets.
    pub(crate) fn invalid_fields(
        subject: Subject<'_>,
        kind: &str,
        errors: Vec<(&str, String, String)>,
    ) -> Self {
        let mut texts: Vec<String> = Vec::new();
        for (_, field, detail) in &errors {
            let text = format!("{field}: {detail}");
            if !texts.contains(&text) {
                texts.push(text);
            }
        }
        let joined = match texts.len() {
            1 => texts.remove(0),
            _ => format!("[{}]", texts.join(", ")),
        };
        let message = format!(
            "{kind}.{} \"{}\" is invalid: {joined}",
            subject.group, subject.name
        )
        .replace(". \"", " \"");
        let causes = errors
            .into_iter()
            .map(|(reason, field, detail)| (reason.to_string(), detail, field))
            .collect();
        Self::invalid(subject, kind, message, causes)
    }

    /// 422 Invalid for a single field.
    pub(crate) fn invalid_field(
        subject: Subject<'_>,
        kind: &str,
        reason: &str,
        field: &str,
        detail: &str,
    ) -> Self {
        let message = format!(
            "{kind}.{} \"{}\" is invalid: {field}: {detail}",
            subject.group, subject.name
        )
        .replace(". \"", " \"");
        Self::invalid(
            subject,
            kind,
            message,
            vec![(reason.to_string(), detail.to_string(), field.to_string())],
        )
    }

    /// 422 Invalid for a request's options (`CreateOptions`, `ListOptions`, ...), as
    /// kube-apiserver validates its query parameters: an object of `meta.k8s.io` with no name.
    pub(crate) fn invalid_options(options: &str, reason: &str, field: &str, detail: &str) -> Self {
        let message = format!("{options}.meta.k8s.io \"\" is invalid: {field}: {detail}");
        let details = json!({
            "group": "meta.k8s.io",
            "kind": options,
            "causes": [{"reason": reason, "message": detail, "field": field}],
        });
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", message).with_details(details)
    }

    pub(crate) fn method_not_allowed(message: impl Into<String>) -> Self {
        // Go's `NewMethodNotSupported` gives details with nothing in them.
        Self::new(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", message)
            .with_details(json!({}))
    }

    /// 415 for a body of a media type the endpoint does not take, listing those it takes.
    pub(crate) fn unsupported_media_type(accepted: &str) -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {accepted}"
            ),
        )
    }

    pub(crate) fn expired(message: impl Into<String>) -> Self {
        Self::new(StatusCode::GONE, "Expired", message)
    }

    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "Forbidden", message)
    }

    pub(crate) fn unauthorized() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized")
    }

    pub(crate) fn too_large() -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
            "Request entity too large: limit is 3145728",
        )
    }

    /// A request whose body did not arrive within `timeout`.
    pub(crate) fn body_timeout(timeout: std::time::Duration) -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            "Timeout",
            format!("the request's body did not arrive within {timeout:?}"),
        )
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", message)
    }

    /// A response chosen by an injected fault: the status code picks the reason.
    pub(crate) fn injected(code: StatusCode, retry_after: Option<u64>) -> Self {
        let reason = match code.as_u16() {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            409 => "Conflict",
            410 => "Expired",
            413 => "RequestEntityTooLarge",
            415 => "UnsupportedMediaType",
            422 => "Invalid",
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "Unknown",
        };
        let mut error = Self::new(code, reason, format!("injected fault: {reason}"));
        if let Some(seconds) = retry_after {
            error.retry_after = Some(seconds);
            error.details = Some(Box::new(json!({"retryAfterSeconds": seconds})));
            if code == StatusCode::TOO_MANY_REQUESTS {
                error.message = "Too many requests, please try again later.".into();
            }
        }
        error
    }

    /// The `kind: Status` body.
    pub(crate) fn to_status(&self) -> Value {
        status_object(
            "Failure",
            self.code.as_u16(),
            self.reason,
            &self.message,
            self.details.as_deref().cloned(),
        )
    }
}

/// The `Status` a deletion that removed the object answers, for resources whose storage does
/// not answer the object itself (most: custom resources, ConfigMaps, ...), as the generic
/// store's `finalizeDelete` makes it: `details.kind` is the resource's plural (Kubernetes
/// says so too: "Yes we set Kind field to resource"), and no `code`.
pub(crate) fn deleted(subject: Subject<'_>, uid: &str) -> Value {
    let mut details = subject.details();
    details["uid"] = json!(uid);
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}

/// A `kind: Status` object.
pub(crate) fn status_object(
    status: &str,
    code: u16,
    reason: &str,
    message: &str,
    details: Option<Value>,
) -> Value {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": status,
    });
    if !message.is_empty() {
        body["message"] = json!(message);
    }
    if !reason.is_empty() {
        body["reason"] = json!(reason);
    }
    if let Some(details) = details {
        body["details"] = details;
    }
    body["code"] = json!(code);
    body
}
