//! Logging in with the `on_login` handlers (see [`LoginHandler`](crate::registry::LoginHandler) for
//! the user's view): asked in order until one gives credentials, at the start and again when the
//! operator's client ([`clients::auth`](crate::clients::auth)) meets `401 Unauthorized`.
//!
//! Invariants:
//! 1. One login at a time: requests that meet a `401` together wait for one re-login, and a
//!    request that meets a `401` from credentials older than the current ones only retries.
//! 2. Re-logins whose credentials still get `401` back off (up to [`MAX_RELOGIN_DELAY`]), so a
//!    permanently bad login does not spin.
//! 3. A sync login handler runs on the operator's threads.
//!
//! Without login handlers, the credentials are kube-client's own (`Client::try_default`, from
//! the kubeconfig or the in-cluster service account), or the embedder's
//! [`Operator::client`](crate::operator::Operator::client) as given. Those are not renewed.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::actions::execution::{self, Outcome};
use crate::actions::invocation::{HandlerFn, Invocation};
use crate::aiokits::connections::Connections;
use crate::aiokits::tasks::Tasks;
use crate::clients::auth::{Relogin, unconnected};
use crate::clients::posting::{Logger, Poster};
use crate::clients::timeouts::Timeouts;
use crate::configs::settings::Settings;
use crate::helpers::sync::lock;
use crate::intents::login::LoginHandler;
use crate::structs::credentials::{Credentials, LoginError};
use crate::structs::indexes::Indexes;
use crate::structs::memos::Memo;
use crate::structs::resources::Resource;

/// Re-logins that keep getting `401` wait at most this long before the next one.
pub(crate) const MAX_RELOGIN_DELAY: Duration = Duration::from_secs(30);

/// The first wait before a re-login when the previous one did not help.
const FIRST_RELOGIN_DELAY: Duration = Duration::from_millis(500);

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
    /// Where the clients made from the credentials run their connections.
    connections: Connections,
    /// How long the clients made from the credentials may take to connect.
    timeouts: Timeouts,
    given: Given,
    /// What login handlers' `client` would be: no client exists before the login.
    unconnected: Arc<kube::Client>,
}

/// What the operator gives its login handlers besides the retry state: the same memo, settings
/// and indexes as its activities.
pub(crate) struct Given {
    pub(crate) memo: Memo,
    /// The operator's settings, as startup handlers leave them: login handlers read them.
    pub(crate) settings: Arc<Mutex<Settings>>,
    /// The operator's indexes, as they are at each login (empty at the first).
    pub(crate) indexes: Indexes,
}

impl Authenticator {
    pub(crate) fn new(
        logins: Vec<LoginHandler>,
        tasks: Tasks,
        connections: Connections,
        timeouts: Timeouts,
        given: Given,
    ) -> Authenticator {
        let unconnected =
            unconnected("login handlers have no client: the operator's client is what they log in");
        Authenticator {
            logins,
            current: Mutex::new(None),
            logging_in: tokio::sync::Mutex::new(()),
            futile: AtomicU32::new(0),
            tasks,
            connections,
            timeouts,
            given,
            unconnected: Arc::new(unconnected),
        }
    }

    fn current_client(&self) -> Option<(kube::Client, u64)> {
        lock(&self.current)
            .as_ref()
            .map(|c| (c.client.clone(), c.generation))
    }

    /// Logs in, unless credentials newer than `seen` exist already.
    async fn login_once(&self, seen: Option<u64>) -> std::result::Result<(), LoginError> {
        let _one_at_a_time = self.logging_in.lock().await;
        let generation = self.current_client().map(|(_, g)| g);
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
                let settings = Arc::new(lock(&self.given.settings).clone());
                let default_backoff = settings.execution.default_backoff;
                let invocation = self.invocation(handler, retry, started, settings);
                let logger = invocation.logger.clone();
                let outcome = execution::execute(
                    &handler.id,
                    &function,
                    &handler.options,
                    default_backoff,
                    invocation,
                )
                .await;
                match outcome {
                    Outcome::Success(_) => {
                        let credentials = lock(&slot).take();
                        match credentials {
                            Some(credentials) => {
                                let connections = self.connections.clone();
                                let connect_timeout = self.timeouts.connect();
                                let trust_env = self.timeouts.trust_env();
                                return credentials
                                    .into_client(connections, connect_timeout, trust_env)
                                    .await;
                            }
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
                    Outcome::Failure(message, _) => {
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
        settings: Arc<Settings>,
    ) -> Invocation {
        let resource = Resource::default();
        let events = Poster::disabled().events(&Value::Null, &resource);
        Invocation {
            body: Arc::default(),
            resource: Arc::new(resource),
            reason: None,
            event_type: None,
            diff: None,
            old: None,
            new: None,
            retry,
            started,
            param: handler.options.param.clone(),
            client: self.unconnected.clone(),
            node: self.tasks.child(),
            logger: Logger::new(
                tracing::info_span!(target: "kopf::handler", "login", handler.id = %handler.id),
                events.clone(),
            ),
            events,
            memo: self.given.memo.clone(),
            indexes: self.given.indexes.clone(),
            gathered: Default::default(),
            counted_as: None,
            review: None,
            live: None,
            settings: Some(settings),
        }
    }
}

impl Relogin for Authenticator {
    fn current(&self) -> Option<(kube::Client, u64)> {
        self.current_client()
    }

    fn login(
        &self,
        seen: Option<u64>,
    ) -> Pin<Box<dyn Future<Output = std::result::Result<(), LoginError>> + Send + '_>> {
        Box::pin(self.login_once(seen))
    }

    fn accepted(&self) {
        self.futile.store(0, Ordering::SeqCst);
    }
}
