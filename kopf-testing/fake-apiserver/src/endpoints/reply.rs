//! What a request handler answers, and how an answer or an error becomes an HTTP response
//! (a `Status` object for errors, `Warning` and `Retry-After` headers).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body::{Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, Full};
use serde_json::Value;

use crate::semantics::status::ApiError;

/// Response bodies: whole JSON documents or watch streams.
pub(crate) type Body = UnsyncBoxBody<Bytes, Cut>;

/// An injected fault cuts the connection: returned by a request handler (no answer at all) or
/// by a response body (the answer stops in the middle), it makes hyper drop the connection
/// without ending the response cleanly.
#[derive(Debug, thiserror::Error)]
#[error("the connection was cut by an injected fault")]
pub(crate) struct Cut;

/// A body that sends a prefix of a document under a `Content-Length` of the whole, then cuts
/// the connection: the client sees a truncated body.
pub(crate) struct CutBody {
    prefix: Option<Bytes>,
    length: u64,
    /// Whether the body has once said it was not ready after the prefix: hyper flushes what it
    /// buffered then, so that the prefix reaches the client before the cut.
    flushed: bool,
}

impl CutBody {
    /// The first `sent` bytes of `whole` (at most all but the last one), then the cut.
    pub(crate) fn new(whole: &Bytes, sent: usize) -> CutBody {
        let sent = sent.min(whole.len().saturating_sub(1));
        CutBody {
            prefix: Some(whole.slice(..sent)),
            length: whole.len() as u64,
            flushed: false,
        }
    }
}

impl http_body::Body for CutBody {
    type Data = Bytes;
    type Error = Cut;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Cut>>> {
        if let Some(prefix) = self.prefix.take()
            && !prefix.is_empty()
        {
            return Poll::Ready(Some(Ok(Frame::data(prefix))));
        }
        if !self.flushed {
            self.flushed = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Poll::Ready(Some(Err(Cut)))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.length)
    }
}

/// What a request handler answers.
pub(crate) struct Reply {
    pub(crate) code: StatusCode,
    pub(crate) body: Body,
    pub(crate) content_type: &'static str,
    pub(crate) warnings: Vec<String>,
}

impl Reply {
    pub(crate) fn json(code: StatusCode, value: &Value) -> Reply {
        Reply::json_as(code, value, "application/json")
    }

    /// A JSON body, ended by a newline as the real server's encoder ends it.
    pub(crate) fn json_as(code: StatusCode, value: &Value, content_type: &'static str) -> Reply {
        let mut bytes = serde_json::to_vec(value).unwrap_or_default();
        bytes.push(b'\n');
        Reply {
            code,
            body: full(bytes),
            content_type,
            warnings: Vec::new(),
        }
    }

    pub(crate) fn with_warnings(mut self, warnings: Vec<String>) -> Reply {
        self.warnings = warnings;
        self
    }
}

pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

pub(crate) fn respond(reply: Reply) -> Response<Body> {
    let mut response = Response::new(reply.body);
    *response.status_mut() = reply.code;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(reply.content_type),
    );
    add_warnings(&mut response, &reply.warnings);
    add_audit_id(&mut response);
    response
}

/// Every answer of kube-apiserver names its request for the audit log (`Audit-Id`, a uuid),
/// which clients print when they log the answer.
fn add_audit_id(response: &mut Response<Body>) {
    if let Ok(value) = HeaderValue::from_str(&uuid::Uuid::new_v4().to_string()) {
        response.headers_mut().insert("audit-id", value);
    }
}

fn add_warnings(response: &mut Response<Body>, warnings: &[String]) {
    for warning in warnings {
        let text = format!("299 - \"{}\"", warning.replace('"', "\\\""));
        if let Ok(value) = HeaderValue::from_str(&text) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
}

/// The `Status` answer for an error, with `Retry-After` and `Warning` headers where due.
pub(crate) fn error_response(error: &ApiError) -> Response<Body> {
    let mut bytes = serde_json::to_vec(&error.to_status()).unwrap_or_default();
    bytes.push(b'\n');
    let mut response = Response::new(full(bytes));
    *response.status_mut() = error.code;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(seconds) = error.retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    add_warnings(&mut response, &error.warnings);
    add_audit_id(&mut response);
    response
}
