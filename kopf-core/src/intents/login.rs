//! Login handlers (Kopf's `@kopf.on.login`): the declaration of a function that gives the
//! operator's credentials.

use std::future::Future;
use std::sync::Arc;

use crate::actions::invocation::{Invocation, Options};
use crate::actions::login::{LoginFn, LoginFuture};
use crate::structs::credentials::Credentials;
use crate::structs::errors::Result;

/// A login handler (`on_login`, Kopf's `@kopf.on.login`): gives the credentials of the
/// operator's client at the start, and again whenever the API server answers `401`.
///
/// ```
/// use kopf::login::ConnectionInfo;
/// use kopf::registry::{LoginHandler, Registry};
///
/// let registry = Registry::new().with(LoginHandler::on_login("login_fn", |_invocation| async {
///     let token = std::env::var("MY_TOKEN")?;
///     Ok(Some(ConnectionInfo::new("https://cluster.example:6443").token(token)))
/// }));
/// ```
///
/// The operator has one client, whose clones reach every part of it (watchers, workers, the
/// event poster, handlers' `client` argument). When a request is answered `401`, the login
/// handlers are called again, once for all the requests refused together, and the request is
/// sent once more with the new credentials: every clone sees them, including those handlers
/// keep. New credentials that are refused too are renewed again after a growing delay (up to
/// 30 seconds), never in a busy loop.
///
/// Login handlers are asked in registration order until one returns credentials. Their errors
/// are temporary by default (retried after `backoff`), as in Kopf; a handler that fails for
/// good is skipped. When none gives credentials at the start, the operator stops with
/// [`OperatorError::Login`](crate::operator::OperatorError::Login). Without login handlers, the
/// credentials are kube-client's own (the kubeconfig or the in-cluster service account), or
/// the [`Operator::client`](crate::operator::Operator::client) given, and are not renewed.
#[derive(Clone)]
pub struct LoginHandler {
    pub(crate) id: String,
    pub(crate) function: LoginFn,
    pub(crate) options: Options,
}

impl LoginHandler {
    /// A login handler. Its function gets the invocation's `logger`, `memo`, `param`,
    /// `retry`, `started` and `runtime` (it has no object).
    pub fn on_login<F, Fut, C>(id: &str, function: F) -> LoginHandler
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Option<C>>> + Send + 'static,
        C: Into<Credentials>,
    {
        let function = Arc::new(function);
        LoginHandler {
            id: id.into(),
            function: Arc::new(move |invocation| {
                let future = function(invocation);
                Box::pin(async move { Ok(future.await?.map(Into::into)) })
            }),
            options: Options::default(),
        }
    }

    /// A login handler from a function returning a boxed future (as `#[kopf::on_login]`
    /// generates).
    #[doc(hidden)]
    pub fn from_fn<F>(id: &str, function: F) -> LoginHandler
    where
        F: Fn(Invocation) -> LoginFuture + Send + Sync + 'static,
    {
        LoginHandler {
            id: id.into(),
            function: Arc::new(function),
            options: Options::default(),
        }
    }

    /// The handler's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    crate::actions::invocation::retry_setters!();
}

impl std::fmt::Debug for LoginHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginHandler")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
