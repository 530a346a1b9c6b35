//! Logging in: the credentials of the operator's one client, from `on_login` handlers (or
//! kube-client's own configuration), renewed when the API server answers `401 Unauthorized`
//! (see [`LoginHandler`] for the user's view).
//!
//! The operator makes one [`kube::Client`] whose clones reach every part of it (watchers,
//! workers, the event poster, handlers' `client` argument). Each request goes to the client
//! built from the current credentials. When the answer is `401`, the login handlers are
//! called again (Kopf's re-authentication) and the request is sent once more with the new
//! credentials; so every clone, including those that handlers keep, sees the new credentials.
//!
//! Invariants:
//! 1. One login at a time: requests that meet a `401` together wait for one re-login, and a
//!    request that meets a `401` from credentials older than the current ones only retries.
//! 2. Re-logins whose credentials still get `401` back off (up to [`MAX_RELOGIN_DELAY`]), so a
//!    permanently bad login does not spin; a request is retried at most once.
//! 3. A login runs in the task of the request that needed it, as a node of the operator's task
//!    tree: no task is spawned for it (a sync login handler runs on the operator's threads),
//!    and a stop cancels it with that request.
//! 4. Request bodies are kept in memory to be sent again; watch requests have none.
//!
//! Without login handlers, the credentials are kube-client's own (`Client::try_default`, from
//! the kubeconfig or the in-cluster service account), or the embedder's
//! [`Operator::client`](crate::Operator::client) as given. Those are not renewed.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use kube::client::Body;
use serde_json::Value;

use crate::structs::diff::Diff;
use crate::structs::errors::Result;
use crate::actions::execution::{self, Outcome};
use crate::actions::invocation::{HandlerFn, Invocation, Options};
use crate::structs::memos::Memo;
use crate::aiokits::metrics::{Metrics, RequestKind};
use crate::clients::posting::{Logger, Poster};
use crate::structs::resources::Resource;
use crate::aiokits::tasks::Tasks;
use crate::helpers::sync::lock;

/// Re-logins that keep getting `401` wait at most this long before the next one.
pub(crate) const MAX_RELOGIN_DELAY: Duration = Duration::from_secs(30);

/// The first wait before a re-login when the previous one did not help.
const FIRST_RELOGIN_DELAY: Duration = Duration::from_millis(500);

/// How to reach and authenticate to the API server: what an `on_login` handler returns (Kopf's
/// `kopf.ConnectionInfo`). PEM data is given as text; paths name files read at login.
///
/// ```
/// let info = kopf::ConnectionInfo::new("https://10.0.0.1:6443")
///     .token("secret-token")
///     .ca_data("-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n")
///     .default_namespace("operators");
/// ```
///
/// A handler that already has a whole [`kube::Config`] returns that instead (see
/// [`Credentials`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionInfo {
    /// The API server's URL, e.g. `https://10.0.0.1:6443`.
    pub server: String,
    /// The CA certificate(s) to trust, in PEM.
    pub ca_data: Option<String>,
    /// A file with the CA certificate(s) to trust, in PEM.
    pub ca_path: Option<String>,
    /// Skip verifying the server's certificate (for development only).
    pub insecure: bool,
    /// A bearer token.
    pub token: Option<String>,
    /// A user name for basic authentication.
    pub username: Option<String>,
    /// A password for basic authentication.
    pub password: Option<String>,
    /// A client certificate, in PEM.
    pub certificate_data: Option<String>,
    /// A file with a client certificate, in PEM.
    pub certificate_path: Option<String>,
    /// The client certificate's private key, in PEM.
    pub private_key_data: Option<String>,
    /// A file with the client certificate's private key, in PEM.
    pub private_key_path: Option<String>,
    /// The namespace of requests that name none (default `default`).
    pub default_namespace: Option<String>,
}

impl ConnectionInfo {
    /// The server's URL; add credentials with the other methods.
    pub fn new(server: impl Into<String>) -> ConnectionInfo {
        ConnectionInfo {
            server: server.into(),
            ..ConnectionInfo::default()
        }
    }

    /// Authenticate with a bearer token.
    pub fn token(mut self, token: impl Into<String>) -> ConnectionInfo {
        self.token = Some(token.into());
        self
    }

    /// Authenticate with a user name and a password (basic authentication).
    pub fn basic(
        mut self,
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> ConnectionInfo {
        self.username = Some(username.into());
        self.password = Some(password.into());
        self
    }

    /// Authenticate with a client certificate and its private key, both in PEM.
    pub fn client_certificate(
        mut self,
        certificate: impl Into<String>,
        private_key: impl Into<String>,
    ) -> ConnectionInfo {
        self.certificate_data = Some(certificate.into());
        self.private_key_data = Some(private_key.into());
        self
    }

    /// Trust these CA certificates (PEM).
    pub fn ca_data(mut self, pem: impl Into<String>) -> ConnectionInfo {
        self.ca_data = Some(pem.into());
        self
    }

    /// Do not verify the server's certificate (for development only).
    pub fn insecure(mut self) -> ConnectionInfo {
        self.insecure = true;
        self
    }

    /// The namespace of requests that name none.
    pub fn default_namespace(mut self, namespace: impl Into<String>) -> ConnectionInfo {
        self.default_namespace = Some(namespace.into());
        self
    }

    /// The kube-client configuration for these credentials.
    pub async fn into_config(self) -> std::result::Result<kube::Config, LoginError> {
        use base64::Engine as _;
        let encode = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
        let mut cluster = serde_json::Map::new();
        cluster.insert("server".into(), self.server.clone().into());
        if let Some(pem) = &self.ca_data {
            cluster.insert("certificate-authority-data".into(), encode(pem).into());
        }
        if let Some(path) = &self.ca_path {
            cluster.insert("certificate-authority".into(), path.clone().into());
        }
        if self.insecure {
            cluster.insert("insecure-skip-tls-verify".into(), true.into());
        }
        let mut user = serde_json::Map::new();
        let mut put = |key: &str, value: Option<String>| {
            if let Some(value) = value {
                user.insert(key.into(), value.into());
            }
        };
        put("token", self.token);
        put("username", self.username);
        put("password", self.password);
        put(
            "client-certificate-data",
            self.certificate_data.as_deref().map(encode),
        );
        put("client-certificate", self.certificate_path);
        put(
            "client-key-data",
            self.private_key_data.as_deref().map(encode),
        );
        put("client-key", self.private_key_path);
        let mut context = serde_json::json!({"cluster": "login", "user": "login"});
        if let Some(namespace) = self.default_namespace {
            context["namespace"] = namespace.into();
        }
        let kubeconfig = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "login", "cluster": cluster}],
            "users": [{"name": "login", "user": user}],
            "contexts": [{"name": "login", "context": context}],
            "current-context": "login",
        });
        let invalid = |reason: String| LoginError::Invalid {
            server: self.server.clone(),
            reason,
        };
        let kubeconfig: kube::config::Kubeconfig =
            serde_json::from_value(kubeconfig).map_err(|e| invalid(e.to_string()))?;
        kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .map_err(|e| invalid(e.to_string()))
    }
}

/// What a login handler returns: Kopf-style [`ConnectionInfo`], or a whole [`kube::Config`].
#[derive(Debug, Clone)]
pub enum Credentials {
    /// Kopf's connection info.
    Info(Box<ConnectionInfo>),
    /// A kube-client configuration, used as it is.
    Config(Box<kube::Config>),
}

impl From<ConnectionInfo> for Credentials {
    fn from(info: ConnectionInfo) -> Self {
        Credentials::Info(Box::new(info))
    }
}

impl From<kube::Config> for Credentials {
    fn from(config: kube::Config) -> Self {
        Credentials::Config(Box::new(config))
    }
}

impl Credentials {
    async fn into_client(self) -> std::result::Result<kube::Client, LoginError> {
        let config = match self {
            Credentials::Info(info) => info.into_config().await?,
            Credentials::Config(config) => *config,
        };
        let server = config.cluster_url.to_string();
        kube::Client::try_from(config).map_err(|e| LoginError::Invalid {
            server,
            reason: e.to_string(),
        })
    }
}

/// What a login handler's function returns: credentials, or `None` when it has none to give
/// (the next login handler is asked).
pub type LoginResult = Result<Option<Credentials>>;

/// A boxed login future.
pub type LoginFuture = Pin<Box<dyn Future<Output = LoginResult> + Send + 'static>>;

/// A login function as the framework stores it.
pub type LoginFn = Arc<dyn Fn(Invocation) -> LoginFuture + Send + Sync>;

/// Why the operator could not log in.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// No login handler gave credentials: each failed for good or returned none.
    #[error("no credentials: every login handler failed or returned none ({0}); check their logs")]
    NoCredentials(String),
    /// The credentials cannot make a client.
    #[error("the credentials for {server} are invalid: {reason}")]
    Invalid {
        /// The server the credentials are for.
        server: String,
        /// What is wrong.
        reason: String,
    },
    /// The operator stopped during the login.
    #[error("the operator stopped during the login")]
    Stopped,
}

/// A login handler (`on_login`, Kopf's `@kopf.on.login`): gives the credentials of the
/// operator's client at the start, and again whenever the API server answers `401`.
///
/// ```
/// use kopf::{ConnectionInfo, LoginHandler, Registry};
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
/// [`OperatorError::Login`](crate::OperatorError::Login). Without login handlers, the
/// credentials are kube-client's own (the kubeconfig or the in-cluster service account), or
/// the [`Operator::client`](crate::Operator::client) given, and are not renewed.
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

/// A sync login function, run on the operator's threads (as [`crate::blocking`] does for
/// other handlers). Used by `#[kopf::on_login]` on a plain `fn`.
#[doc(hidden)]
pub fn blocking_login<F>(function: F) -> impl Fn(Invocation) -> LoginFuture + Send + Sync + 'static
where
    F: Fn(Invocation) -> LoginResult + Send + Sync + 'static,
{
    let function = Arc::new(function);
    move |invocation| -> LoginFuture {
        let slot: Arc<Mutex<Option<Credentials>>> = Arc::default();
        let (function, given) = (function.clone(), slot.clone());
        let handler = crate::actions::blocking::blocking(move |invocation| {
            *lock(&given) = function(invocation)?;
            Ok(None)
        });
        let attempt = handler(invocation);
        Box::pin(async move {
            attempt.await?;
            Ok(lock(&slot).take())
        })
    }
}

/// What `#[kopf::on_login]` functions may return: credentials, optional credentials, or a
/// `Result` of either.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a login handler returns credentials, not `{Self}`",
    label = "not credentials",
    note = "return `kopf::ConnectionInfo` or `kube::Config`, an `Option` of either (`None`: no credentials from this handler), or a `kopf::Result` of those"
)]
pub trait LoginOutput {
    /// The credentials, as the framework stores them.
    fn into_login_result(self) -> LoginResult;
}

impl LoginOutput for ConnectionInfo {
    fn into_login_result(self) -> LoginResult {
        Ok(Some(self.into()))
    }
}

impl LoginOutput for kube::Config {
    fn into_login_result(self) -> LoginResult {
        Ok(Some(self.into()))
    }
}

impl LoginOutput for Credentials {
    fn into_login_result(self) -> LoginResult {
        Ok(Some(self))
    }
}

impl<T: Into<Credentials>> LoginOutput for Option<T> {
    fn into_login_result(self) -> LoginResult {
        Ok(self.map(Into::into))
    }
}

impl<T: LoginOutput, E: Into<crate::Error>> LoginOutput for std::result::Result<T, E> {
    fn into_login_result(self) -> LoginResult {
        self.map_err(Into::into)?.into_login_result()
    }
}

/// The credentials in use, and how many logins made them.
struct Current {
    client: kube::Client,
    generation: u64,
}

/// Logs in with the login handlers, and again when asked.
pub(crate) struct Authenticator {
    logins: Vec<LoginHandler>,
    current: Mutex<Option<Current>>,
    /// Held while logging in: one login at a time.
    logging_in: tokio::sync::Mutex<()>,
    /// Re-logins in a row that did not stop the `401`s.
    futile: AtomicU32,
    tasks: Tasks,
    memo: Memo,
    default_backoff: Duration,
    /// What login handlers' `client` would be: no client exists before the login.
    unconnected: kube::Client,
}

impl Authenticator {
    pub(crate) fn new(
        logins: Vec<LoginHandler>,
        tasks: Tasks,
        memo: Memo,
        default_backoff: Duration,
    ) -> Authenticator {
        let unconnected = kube::Client::new(
            tower_service_fn(|_request: Request<Body>| async {
                Err::<Response<Body>, _>(tower_error(
                    "login handlers have no client: the operator's client is what they log in",
                ))
            }),
            "default",
        );
        Authenticator {
            logins,
            current: Mutex::new(None),
            logging_in: tokio::sync::Mutex::new(()),
            futile: AtomicU32::new(0),
            tasks,
            memo,
            default_backoff,
            unconnected,
        }
    }

    fn current(&self) -> Option<(kube::Client, u64)> {
        lock(&self.current)
            .as_ref()
            .map(|c| (c.client.clone(), c.generation))
    }

    /// Logs in, unless credentials newer than `seen` exist already.
    pub(crate) async fn login(&self, seen: Option<u64>) -> std::result::Result<(), LoginError> {
        let _one_at_a_time = self.logging_in.lock().await;
        let generation = self.current().map(|(_, g)| g);
        if generation != seen {
            return Ok(());
        }
        let futile = self.futile.fetch_add(1, Ordering::SeqCst);
        if generation.is_some() && futile > 0 {
            let delay = FIRST_RELOGIN_DELAY
                .saturating_mul(2u32.saturating_pow(futile - 1))
                .min(MAX_RELOGIN_DELAY);
            tracing::warn!(target: "kopf::login", ?delay, "the new credentials were refused too; logging in again after a delay");
            tokio::select! {
                _ = self.tasks.token().cancelled() => return Err(LoginError::Stopped),
                _ = tokio::time::sleep(delay) => {}
            }
        }
        let client = self.credentials().await?;
        let mut current = lock(&self.current);
        let generation = current.as_ref().map_or(0, |c| c.generation + 1);
        *current = Some(Current { client, generation });
        Ok(())
    }

    /// Asks the login handlers, in order, until one gives credentials.
    async fn credentials(&self) -> std::result::Result<kube::Client, LoginError> {
        let mut failed = Vec::new();
        for handler in &self.logins {
            let started = time::OffsetDateTime::now_utc();
            let mut retry = 0;
            loop {
                let slot: Arc<Mutex<Option<Credentials>>> = Arc::default();
                let given = slot.clone();
                let login = handler.function.clone();
                let function: HandlerFn = Arc::new(move |invocation| {
                    let attempt = login(invocation);
                    let given = given.clone();
                    Box::pin(async move {
                        *lock(&given) = attempt.await?;
                        Ok(None)
                    })
                });
                let invocation = self.invocation(handler, retry, started);
                let logger = invocation.logger.clone();
                let outcome = execution::execute(
                    &handler.id,
                    &function,
                    &handler.options,
                    self.default_backoff,
                    invocation,
                )
                .await;
                match outcome {
                    Outcome::Success(_) => {
                        let credentials = lock(&slot).take();
                        match credentials {
                            Some(credentials) => return credentials.into_client().await,
                            None => {
                                logger.info(format_args!(
                                    "Handler '{}' gave no credentials.",
                                    handler.id
                                ));
                                failed.push(format!("{}: no credentials", handler.id));
                                break;
                            }
                        }
                    }
                    Outcome::Retry { delay, .. } => {
                        tokio::select! {
                            _ = self.tasks.token().cancelled() => return Err(LoginError::Stopped),
                            _ = tokio::time::sleep(delay) => {}
                        }
                        retry += 1;
                    }
                    Outcome::Failure(message) => {
                        failed.push(format!("{}: {message}", handler.id));
                        break;
                    }
                    Outcome::Aborted => return Err(LoginError::Stopped),
                }
            }
        }
        Err(LoginError::NoCredentials(failed.join("; ")))
    }

    fn invocation(
        &self,
        handler: &LoginHandler,
        retry: u32,
        started: time::OffsetDateTime,
    ) -> Invocation {
        let resource = Resource::default();
        let events = Poster::disabled().events(&Value::Null, &resource);
        Invocation {
            body: Arc::new(Value::Null),
            resource,
            reason: None,
            event_type: None,
            diff: Diff::default(),
            old: None,
            new: None,
            retry,
            started,
            param: handler.options.param.clone(),
            patch: Arc::default(),
            client: self.unconnected.clone(),
            node: self.tasks.child(),
            logger: Logger::new(
                tracing::info_span!(target: "kopf::handler", "login", handler.id = %handler.id),
                events.clone(),
            ),
            events,
            memo: self.memo.clone(),
            indexes: Default::default(),
            subhandlers: Default::default(),
        }
    }
}

/// How the operator's client gets its credentials.
pub(crate) enum Login {
    /// From the login handlers, renewed on `401`.
    Handlers(Arc<Authenticator>),
    /// Fixed: kube-client's default, or the embedder's client.
    Fixed(kube::Client),
}

/// The operator's one client: every request goes through [`Connection`], which sends it
/// with the current credentials, counts it, and logs in again on `401`. Without login
/// handlers and without metrics, the fixed client is returned as it is.
pub(crate) async fn client(
    login: Login,
    metrics: Option<Metrics>,
) -> std::result::Result<kube::Client, LoginError> {
    let (authenticator, namespace) = match login {
        Login::Fixed(client) if metrics.is_none() => return Ok(client),
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
    };
    Ok(kube::Client::new(connection, namespace))
}

enum Source {
    Fixed(kube::Client),
    Login(Arc<Authenticator>),
}

/// The service behind the operator's client.
#[derive(Clone)]
struct Connection {
    source: Arc<Source>,
    metrics: Option<Metrics>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<Request<Body>> for Connection {
    type Response = Response<Body>;
    type Error = BoxError;
    type Future =
        Pin<Box<dyn Future<Output = std::result::Result<Response<Body>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::result::Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let connection = self.clone();
        Box::pin(async move { connection.send(request).await })
    }
}

impl Connection {
    async fn send(self, request: Request<Body>) -> std::result::Result<Response<Body>, BoxError> {
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
            authenticator.futile.store(0, Ordering::SeqCst);
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
            authenticator.futile.store(0, Ordering::SeqCst);
        }
        Ok(retried)
    }

    fn count(
        &self,
        kind: Option<&RequestKind>,
        response: &std::result::Result<Response<Body>, kube::Error>,
    ) {
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

/// A service from an async function (what `tower::service_fn` does).
fn tower_service_fn<F, Fut>(function: F) -> ServiceFn<F>
where
    F: FnMut(Request<Body>) -> Fut,
    Fut: Future<Output = std::result::Result<Response<Body>, BoxError>> + Send + 'static,
{
    ServiceFn(function)
}

struct ServiceFn<F>(F);

impl<F, Fut> tower_service::Service<Request<Body>> for ServiceFn<F>
where
    F: FnMut(Request<Body>) -> Fut,
    Fut: Future<Output = std::result::Result<Response<Body>, BoxError>> + Send + 'static,
{
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = Fut;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::result::Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Fut {
        (self.0)(request)
    }
}

/// The operator's client at the start of `run()`: logged in with the login handlers if there
/// are any; else the embedder's client, or kube-client's default (kubeconfig or in-cluster).
/// Wrapped for the metrics when the tree counts them.
pub(crate) async fn connect(
    explicit: Option<kube::Client>,
    logins: Vec<LoginHandler>,
    tasks: &Tasks,
    memo: Memo,
    default_backoff: Duration,
) -> std::result::Result<kube::Client, crate::OperatorError> {
    let metrics = tasks.metrics().cloned();
    let login = if !logins.is_empty() {
        let authenticator = Authenticator::new(logins, tasks.child(), memo, default_backoff);
        Login::Handlers(Arc::new(authenticator))
    } else {
        match explicit {
            Some(client) => Login::Fixed(client),
            None => Login::Fixed(
                kube::Client::try_default()
                    .await
                    .map_err(crate::OperatorError::Client)?,
            ),
        }
    };
    client(login, metrics)
        .await
        .map_err(crate::OperatorError::Login)
}
