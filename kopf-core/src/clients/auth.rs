//! The operator's one client: every request goes through [`Connection`], which sends it with
//! the current credentials, counts it in the metrics, bounds it in time (`clients/timeouts.rs`),
//! and logs in again on `401` through a [`Relogin`] (the login handlers' engine).
//!
//! The operator makes one [`kube::Client`] whose clones reach every part of it (watchers,
//! workers, the event poster, handlers' `client` argument). Each request goes to the client
//! built from the current credentials. When the answer is `401`, the login handlers are
//! called again (Kopf's re-authentication) and the request is sent once more with the new
//! credentials; so every clone, including those that handlers keep, sees the new credentials.
//!
//! Invariants:
//! 1. A request is retried at most once after a re-login; a request that meets a `401` from
//!    credentials older than the current ones only retries (the [`Relogin`] sees to that).
//! 2. A login runs in the task of the request that needed it, as a node of the operator's task
//!    tree: no task is spawned for it, and a stop cancels it with that request.
//! 3. Request bodies are kept in memory to be sent again; watch requests have none.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response, StatusCode};
use kube::client::Body;

use crate::aiokits::metrics::{Metrics, RequestKind};
use crate::clients::timeouts::{Timed, Timeouts};
use crate::structs::credentials::LoginError;

/// What logs the operator in, and again when the API server answers `401`.
pub(crate) trait Relogin: Send + Sync {
    /// The client of the current credentials, and how many logins made them; `None` before
    /// the first login.
    fn current(&self) -> Option<(kube::Client, u64)>;

    /// Logs in, unless credentials newer than `seen` exist already.
    fn login(
        &self,
        seen: Option<u64>,
    ) -> Pin<Box<dyn Future<Output = Result<(), LoginError>> + Send + '_>>;

    /// The current credentials were accepted: re-logins are no longer futile.
    fn accepted(&self);
}

/// How the operator's client gets its credentials.
pub(crate) enum Login {
    /// From the login handlers, renewed on `401`.
    Handlers(Arc<dyn Relogin>),
    /// Fixed: kube-client's default, or the embedder's client.
    Fixed(kube::Client),
}

/// The operator's one client: every request goes through [`Connection`], which sends it
/// with the current credentials, counts it, bounds it in time as `timeouts` say, and logs in
/// again on `401`.
pub(crate) async fn client(
    login: Login,
    metrics: Option<Metrics>,
    timeouts: Timeouts,
) -> Result<kube::Client, LoginError> {
    let (authenticator, namespace) = match login {
        Login::Fixed(client) => {
            let namespace = client.default_namespace().to_string();
            (Source::Fixed(client), namespace)
        }
        Login::Handlers(authenticator) => {
            authenticator.login(None).await?;
            let namespace = authenticator
                .current()
                .map(|(client, _)| client.default_namespace().to_string())
                .unwrap_or_else(|| "default".into());
            (Source::Login(authenticator), namespace)
        }
    };
    let connection = Connection {
        source: Arc::new(authenticator),
        metrics,
        timeouts,
    };
    Ok(kube::Client::new(connection, namespace))
}

enum Source {
    Fixed(kube::Client),
    Login(Arc<dyn Relogin>),
}

/// The service behind the operator's client.
#[derive(Clone)]
struct Connection {
    source: Arc<Source>,
    metrics: Option<Metrics>,
    timeouts: Timeouts,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<Request<Body>> for Connection {
    type Response = Response<Timed>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Timed>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let bounds = self.timeouts.bounds(&request);
        let connection = self.clone();
        Box::pin(bounds.apply(async move { connection.send(request).await }))
    }
}

impl Connection {
    async fn send(self, request: Request<Body>) -> Result<Response<Body>, BoxError> {
        let kind = self.metrics.as_ref().map(|_| {
            RequestKind::of(
                request.method(),
                request.uri().path(),
                request.uri().query(),
            )
        });
        let authenticator = match &*self.source {
            Source::Fixed(client) => {
                let response = client.send(request).await;
                self.count(kind.as_ref(), &response);
                return Ok(response?);
            }
            Source::Login(authenticator) => authenticator,
        };
        let (parts, body) = request.into_parts();
        let body = match body.try_clone() {
            Some(_) => body,
            None => Body::from(body.collect_bytes().await?),
        };
        let replay = body
            .try_clone()
            .map(|body| Request::from_parts(copy(&parts), body));
        let request = Request::from_parts(parts, body);
        let (client, generation) = authenticator
            .current()
            .ok_or_else(|| tower_error("the operator is not logged in yet"))?;
        let response = client.send(request).await;
        self.count(kind.as_ref(), &response);
        let response = response?;
        if response.status() != StatusCode::UNAUTHORIZED {
            authenticator.accepted();
            return Ok(response);
        }
        let Some(replay) = replay else {
            return Ok(response);
        };
        tracing::info!(target: "kopf::login", "the API server answered 401 Unauthorized: logging in again");
        if let Err(error) = authenticator.login(Some(generation)).await {
            tracing::error!(target: "kopf::login", %error, "logging in again failed; the request stays unauthorized");
            return Ok(response);
        }
        let Some((client, _)) = authenticator.current() else {
            return Ok(response);
        };
        let retried = client.send(replay).await;
        self.count(kind.as_ref(), &retried);
        let retried = retried?;
        if retried.status() != StatusCode::UNAUTHORIZED {
            authenticator.accepted();
        }
        Ok(retried)
    }

    fn count(&self, kind: Option<&RequestKind>, response: &Result<Response<Body>, kube::Error>) {
        if let (Some(metrics), Some(kind)) = (&self.metrics, kind) {
            metrics.requested(kind, response.as_ref().ok().map(Response::status));
        }
    }
}

/// A copy of a request's head, to send its body again.
fn copy(parts: &http::request::Parts) -> http::request::Parts {
    let mut request = Request::new(());
    *request.method_mut() = parts.method.clone();
    *request.uri_mut() = parts.uri.clone();
    *request.version_mut() = parts.version;
    *request.headers_mut() = parts.headers.clone();
    *request.extensions_mut() = parts.extensions.clone();
    request.into_parts().0
}

fn tower_error(message: &str) -> BoxError {
    message.to_string().into()
}

/// A client whose every request fails with this message: what code that runs before the
/// operator has credentials (the login handlers themselves) gets as its `client`.
pub(crate) fn unconnected(message: &'static str) -> kube::Client {
    kube::Client::new(
        tower_service_fn(move |_request: Request<Body>| async move {
            Err::<Response<Body>, _>(tower_error(message))
        }),
        "default",
    )
}

/// A service from an async function (what `tower::service_fn` does).
pub(crate) fn tower_service_fn<F, Fut>(function: F) -> ServiceFn<F>
where
    F: FnMut(Request<Body>) -> Fut,
    Fut: Future<Output = Result<Response<Body>, BoxError>> + Send + 'static,
{
    ServiceFn(function)
}

pub(crate) struct ServiceFn<F>(F);

impl<F, Fut> tower_service::Service<Request<Body>> for ServiceFn<F>
where
    F: FnMut(Request<Body>) -> Fut,
    Fut: Future<Output = Result<Response<Body>, BoxError>> + Send + 'static,
{
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = Fut;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Fut {
        (self.0)(request)
    }
}
