//! Activities: handlers of the operator itself rather than of objects (Kopf's
//! `@kopf.on.startup`, `@kopf.on.cleanup` and `@kopf.on.probe`).
//!
//! See [`ActivityHandler`] for what each activity does.
//!
//! Invariants:
//! 1. Every attempt runs in its own node of the operator's cancellation tree: its `stopped`
//!    token fires when the operator stops or the attempt's timeout passes, and the abort drops
//!    it. Startup and probes run in the operator's tree; cleanup runs in a tree of its own,
//!    since the operator's is already stopped when cleanup starts.
//! 2. The startup handlers share one `Settings` behind a lock that is held only inside
//!    [`ActivityInvocation::settings`]'s guard or while a [`SettingsSlot`] copies in and out,
//!    never while a handler awaits.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::structs::errors::{Error, PermanentError, Result};
use crate::actions::execution::{Attempt, Outcome, Retrying};
use crate::actions::extract::args;
use crate::actions::invocation::{ErrorsMode, HandlerFuture, HandlerResult};
use crate::structs::memos::Memo;
use crate::reactor::operator::OperatorError;
use crate::clients::posting::{Logger, Poster};
use crate::intents::registry::Registry;
use crate::structs::resources::Resource;
use crate::configs::settings::Settings;
use crate::aiokits::tasks::{StopReason, Tasks};
use crate::aiokits::work::Work;

/// Which activity a handler serves (Kopf's `activity` argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Activity {
    /// Before anything is watched (`on_startup`).
    Startup,
    /// When the operator stops (`on_cleanup`).
    Cleanup,
    /// When the liveness endpoint is asked (`on_probe`).
    Probe,
}

impl Activity {
    /// `startup`, `cleanup`, `probe`: as Kopf names them.
    pub fn as_str(self) -> &'static str {
        match self {
            Activity::Startup => "startup",
            Activity::Cleanup => "cleanup",
            Activity::Probe => "probe",
        }
    }
}

impl fmt::Display for Activity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An activity handler function as the framework stores it.
pub(crate) type ActivityFn = Arc<dyn Fn(ActivityInvocation) -> HandlerFuture + Send + Sync>;

/// A handler of the operator's own activities: `on_startup`, `on_cleanup`, `on_probe`.
///
/// - **Startup** handlers run before anything is watched, one after another in registration
///   order, each retried in memory until it succeeds (errors are temporary by default, as in
///   Kopf). They may change the operator's [`Settings`] and its [`Memo`]: what they leave is
///   what the operator then runs with. A startup handler that fails for good (a permanent
///   error, or its `retries` or `timeout` exhausted) stops the operator before it watched
///   anything: `run()` returns [`OperatorError::Activity`] naming the handler. The one
///   setting they cannot change is
///   [`ExecutionSettings::max_blocking_threads`](crate::ExecutionSettings::max_blocking_threads):
///   the threads that sync startup handlers run on exist before them. A stop during the startup
///   interrupts it (the handlers' `stopped` fires), and cleanup handlers then do not run.
/// - **Cleanup** handlers run once when the operator stops: after the handlers' grace period,
///   one after another, all of them within
///   [`ProcessSettings::cleanup_timeout`](crate::ProcessSettings::cleanup_timeout). A second
///   signal aborts them. They do not run if the operator never finished its startup.
/// - **Probe** handlers run when the [liveness endpoint](crate::Operator::liveness) is asked
///   (at most once per 10 seconds): their results are its answer.
///
/// ```
/// use kopf::{ActivityHandler, Registry};
///
/// let registry = Registry::new()
///     .with(ActivityHandler::on_startup("configure", |invocation| async move {
///         invocation.settings().queueing.idle_timeout = std::time::Duration::from_secs(30);
///         invocation.memo().set("region", "eu-1");
///         Ok(None)
///     }))
///     .with(ActivityHandler::on_probe("connections", |_invocation| async move {
///         Ok(Some(serde_json::json!(3)))
///     }))
///     .with(ActivityHandler::on_cleanup("farewell", |invocation| async move {
///         invocation.logger().info("bye");
///         Ok(None)
///     }));
/// ```
///
/// With the attributes: `#[kopf::on_startup]`, `#[kopf::on_cleanup]`, `#[kopf::on_probe]`.
#[derive(Clone)]
pub struct ActivityHandler {
    pub(crate) id: String,
    pub(crate) activity: Activity,
    pub(crate) function: ActivityFn,
    pub(crate) options: ActivityOptions,
}

/// The options of activity handlers.
#[derive(Debug, Clone, Default)]
pub(crate) struct ActivityOptions {
    pub(crate) errors: ErrorsMode,
    pub(crate) timeout: Option<Duration>,
    pub(crate) retries: Option<u32>,
    pub(crate) backoff: Option<Duration>,
    pub(crate) param: Option<Value>,
}

impl ActivityHandler {
    fn new<F, Fut>(activity: Activity, id: &str, function: F) -> Self
    where
        F: Fn(ActivityInvocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        ActivityHandler {
            id: id.into(),
            activity,
            function: Arc::new(move |invocation| Box::pin(function(invocation))),
            options: ActivityOptions::default(),
        }
    }

    /// Runs before anything is watched; retried until it succeeds, and its failure stops the
    /// operator. It may change the settings ([`ActivityInvocation::settings`]) and the memo.
    pub fn on_startup<F, Fut>(id: &str, function: F) -> Self
    where
        F: Fn(ActivityInvocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        Self::new(Activity::Startup, id, function)
    }

    /// Runs once when the operator stops, within the cleanup timeout.
    pub fn on_cleanup<F, Fut>(id: &str, function: F) -> Self
    where
        F: Fn(ActivityInvocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        Self::new(Activity::Cleanup, id, function)
    }

    /// Runs when the liveness endpoint is asked (at most once per 10 seconds); its result is
    /// shown there under its id.
    pub fn on_probe<F, Fut>(id: &str, function: F) -> Self
    where
        F: Fn(ActivityInvocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        Self::new(Activity::Probe, id, function)
    }

    /// The handler's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The activity it serves.
    pub fn activity(&self) -> Activity {
        self.activity
    }

    crate::actions::invocation::retry_setters!();
}

impl fmt::Debug for ActivityHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActivityHandler")
            .field("id", &self.id)
            .field("activity", &self.activity)
            .finish_non_exhaustive()
    }
}

/// Everything an activity handler may ask for (Kopf's kwargs of activities).
#[derive(Clone)]
pub struct ActivityInvocation {
    pub(crate) activity: Activity,
    pub(crate) settings: Arc<Mutex<Settings>>,
    pub(crate) memo: Memo,
    pub(crate) logger: Logger,
    pub(crate) retry: u32,
    pub(crate) started: time::OffsetDateTime,
    pub(crate) param: Option<Value>,
    pub(crate) client: kube::Client,
    /// The attempt's node of the cancellation tree: its token is `stopped`.
    pub(crate) node: Tasks,
}

impl ActivityInvocation {
    /// The activity being run.
    pub fn activity(&self) -> Activity {
        self.activity
    }

    /// The operator's settings. A startup handler's changes are what the operator runs with;
    /// for other activities this is a copy, and changes have no effect. Do not hold the guard
    /// across an `.await`.
    pub fn settings(&self) -> MutexGuard<'_, Settings> {
        crate::helpers::sync::lock(&self.settings)
    }

    /// The operator's memo: what a startup handler puts here, every object's memo starts with
    /// (see [`Memo`]).
    pub fn memo(&self) -> &Memo {
        &self.memo
    }

    /// The handler's logger (a `tracing` span with the handler's id and the activity).
    pub fn logger(&self) -> &Logger {
        &self.logger
    }

    /// How many attempts failed before this one (0 on the first).
    pub fn retry(&self) -> u32 {
        self.retry
    }

    /// When the first attempt started.
    pub fn started(&self) -> time::OffsetDateTime {
        self.started
    }

    /// How long since the first attempt started.
    pub fn runtime(&self) -> Duration {
        let elapsed = time::OffsetDateTime::now_utc() - self.started;
        elapsed.try_into().unwrap_or_default()
    }

    /// The handler's `param`.
    pub fn param(&self) -> Option<&Value> {
        self.param.as_ref()
    }

    /// The operator's client, for API calls of the handler's own.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Cancelled when the handler should stop: the operator is stopping, or the handler's
    /// timeout passed ([`stop_reason`](Self::stop_reason) tells which).
    pub fn stopped(&self) -> &CancellationToken {
        self.node.token()
    }

    /// Why [`stopped`](Self::stopped) was cancelled; `None` while it is not.
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.node.stop_reason()
    }
}

impl fmt::Debug for ActivityInvocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActivityInvocation")
            .field("activity", &self.activity)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// Turns a blocking function into an activity handler function, run on the operator's own
/// threads (as [`blocking`](crate::blocking) does for resource handlers).
pub fn blocking_activity<F>(
    function: F,
) -> impl Fn(ActivityInvocation) -> HandlerFuture + Clone + Send + Sync + 'static
where
    F: Fn(ActivityInvocation) -> HandlerResult + Send + Sync + 'static,
{
    let function = Arc::new(function);
    move |invocation: ActivityInvocation| -> HandlerFuture {
        let function = function.clone();
        let node = invocation.node.clone();
        crate::actions::blocking::on_thread(node, move || function(invocation))
    }
}

/// What every activity of one run shares: the registry's activity handlers, the client, the
/// settings (changed by startup handlers) and the operator's memo.
#[derive(Clone)]
pub(crate) struct Activities {
    registry: Arc<Registry>,
    client: kube::Client,
    settings: Arc<Mutex<Settings>>,
    memo: Memo,
}

/// An activity handler that failed for good.
#[derive(Debug)]
pub(crate) struct Failed {
    pub(crate) handler: String,
    pub(crate) message: String,
}

impl Activities {
    pub(crate) fn new(
        registry: Arc<Registry>,
        client: kube::Client,
        settings: &Settings,
        memo: Memo,
    ) -> Activities {
        Activities {
            registry,
            client,
            settings: Arc::new(Mutex::new(settings.clone())),
            memo,
        }
    }

    fn handlers(&self, activity: Activity) -> impl Iterator<Item = &ActivityHandler> {
        self.registry
            .activities
            .iter()
            .filter(move |h| h.activity == activity)
    }

    /// Whether any handler serves this activity.
    pub(crate) fn any(&self, activity: Activity) -> bool {
        self.handlers(activity).next().is_some()
    }

    /// Runs the startup handlers in a task of the tree, and puts what they left in `settings`.
    /// Returns `Ok(false)` if `stop` fired first (the operator then stops as usual), and the
    /// error of a handler that failed for good.
    ///
    /// # Cancellation safety
    ///
    /// Dropping the future leaves the startup task to the tree's stop.
    pub(crate) async fn start_up(
        &self,
        settings: &mut Settings,
        tasks: &Tasks,
        stop: &CancellationToken,
    ) -> std::result::Result<bool, OperatorError> {
        if !self.any(Activity::Startup) {
            return Ok(true);
        }
        *crate::helpers::sync::lock(&self.settings) = settings.clone();
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let node = tasks.child();
        let this = self.clone();
        tasks.spawn(async move {
            let _ = sender.send(this.run(Activity::Startup, &node).await);
        });
        let result = tokio::select! {
            result = receiver => result,
            _ = stop.cancelled() => {
                tracing::warn!(target: "kopf::activity", "the operator is stopping during its startup: the startup handlers are interrupted, and cleanup handlers do not run");
                return Ok(false);
            }
        };
        match result {
            Ok(Ok(_)) => {
                *settings = crate::helpers::sync::lock(&self.settings).clone();
                Ok(true)
            }
            Ok(Err(failed)) => Err(OperatorError::Activity {
                activity: Activity::Startup,
                handler: failed.handler,
                message: failed.message,
            }),
            // The task was aborted: only a stop does that.
            Err(_) => Ok(false),
        }
    }

    /// Runs the cleanup handlers once, in a tree of their own, within `settings`'
    /// `cleanup_timeout`; `abort` (a second signal) drops them at once. A handler that fails,
    /// or the timeout, is an [`OperatorError::Activity`].
    pub(crate) async fn clean_up(
        &self,
        settings: &Settings,
        abort: &CancellationToken,
    ) -> std::result::Result<(), OperatorError> {
        if !self.any(Activity::Cleanup) {
            return Ok(());
        }
        if abort.is_cancelled() {
            tracing::warn!(target: "kopf::activity", "the cleanup handlers do not run: the operator was stopped at once");
            return Ok(());
        }
        *crate::helpers::sync::lock(&self.settings) = settings.clone();
        let timeout = settings.process.cleanup_timeout;
        let tree = Tasks::root(settings.execution.max_blocking_threads);
        let node = tree.child();
        let run = self.run(Activity::Cleanup, &node);
        let result = bounded(run, &tree, timeout, abort).await;
        if let Err(error) = &result {
            tracing::error!(target: "kopf::activity", "{error}");
        }
        tree.abort();
        tree.wait().await;
        let threads = tree.threads();
        threads.close();
        threads.exited().await;
        for work in threads.busy() {
            tracing::warn!(target: "kopf::activity", handler = %work.handler, "abandoning the sync cleanup handler {}: its thread cannot be interrupted", work.handler);
        }
        result
    }

    /// Runs the probe handlers once each, at the same time; their results by id, or the
    /// first that failed.
    pub(crate) async fn probe(
        &self,
        node: &Tasks,
    ) -> std::result::Result<Map<String, Value>, Failed> {
        let default_backoff = crate::helpers::sync::lock(&self.settings).execution.default_backoff;
        let attempts = self.handlers(Activity::Probe).map(|handler| async move {
            let invocation = self.invocation(handler, node, 0, time::OffsetDateTime::now_utc());
            let outcome = attempt(handler, invocation, default_backoff).await;
            (handler, outcome)
        });
        let mut results = Map::new();
        for (handler, outcome) in futures::future::join_all(attempts).await {
            match outcome {
                Outcome::Success(value) => {
                    results.insert(handler.id.clone(), value.unwrap_or(Value::Null));
                }
                Outcome::Retry { message, .. } | Outcome::Failure(message) => {
                    return Err(Failed {
                        handler: handler.id.clone(),
                        message,
                    });
                }
                Outcome::Aborted => {
                    return Err(Failed {
                        handler: handler.id.clone(),
                        message: "the operator is stopping".into(),
                    });
                }
            }
        }
        Ok(results)
    }

    /// Runs the activity's handlers one after another, each retried until it succeeds or
    /// fails for good; their results by id.
    async fn run(
        &self,
        activity: Activity,
        node: &Tasks,
    ) -> std::result::Result<Map<String, Value>, Failed> {
        let mut results = Map::new();
        for handler in self.handlers(activity) {
            let started = time::OffsetDateTime::now_utc();
            let mut retry = 0;
            loop {
                let default_backoff = crate::helpers::sync::lock(&self.settings).execution.default_backoff;
                let invocation = self.invocation(handler, node, retry, started);
                match attempt(handler, invocation, default_backoff).await {
                    Outcome::Success(value) => {
                        results.insert(handler.id.clone(), value.unwrap_or(Value::Null));
                        break;
                    }
                    Outcome::Failure(message) => {
                        return Err(Failed {
                            handler: handler.id.clone(),
                            message,
                        });
                    }
                    Outcome::Retry { delay, .. } => {
                        tokio::select! {
                            _ = tokio::time::sleep(delay) => {}
                            _ = node.token().cancelled() => return Err(interrupted(handler, node)),
                        }
                        retry += 1;
                    }
                    Outcome::Aborted => return Err(interrupted(handler, node)),
                }
            }
        }
        Ok(results)
    }

    fn invocation(
        &self,
        handler: &ActivityHandler,
        node: &Tasks,
        retry: u32,
        started: time::OffsetDateTime,
    ) -> ActivityInvocation {
        let span = tracing::info_span!(target: "kopf::activity", "activity", handler.id = %handler.id, activity = %handler.activity);
        // Activities concern no object: nothing they log is posted as a Kubernetes Event.
        let events = Poster::disabled().events(&Value::Null, &Resource::default());
        let settings = match handler.activity {
            Activity::Startup => self.settings.clone(),
            _ => Arc::new(Mutex::new(crate::helpers::sync::lock(&self.settings).clone())),
        };
        let object = format!("the operator's {}", handler.activity);
        ActivityInvocation {
            activity: handler.activity,
            settings,
            memo: self.memo.clone(),
            logger: Logger::new(span, events),
            retry,
            started,
            param: handler.options.param.clone(),
            client: self.client.clone(),
            node: node.child().doing(Work::new(&handler.id, None, &object)),
        }
    }
}

/// Races the cleanup handlers against their timeout and the abort; they are dropped when
/// this returns, however it ends.
async fn bounded(
    run: impl Future<Output = std::result::Result<Map<String, Value>, Failed>>,
    tree: &Tasks,
    timeout: Duration,
    abort: &CancellationToken,
) -> std::result::Result<(), OperatorError> {
    let failed = |handler: String, message: String| OperatorError::Activity {
        activity: Activity::Cleanup,
        handler,
        message,
    };
    // Pinned here rather than in `select!`, which drops its futures before running the
    // branch: the timeout's branch still sees the handlers in flight.
    tokio::pin!(run);
    tokio::select! {
        finished = &mut run => finished.map(drop).map_err(|f| failed(f.handler, f.message)),
        _ = tokio::time::sleep(timeout) => {
            let running: Vec<String> = tree.running().iter().map(|w| w.handler.to_string()).collect();
            let handler = if running.is_empty() {
                "(waiting to retry)".to_string()
            } else {
                running.join(", ")
            };
            Err(failed(handler, format!("it did not finish within the cleanup timeout of {timeout:?} and was aborted")))
        }
        _ = abort.cancelled() => {
            tracing::warn!(target: "kopf::activity", "the cleanup handlers are aborted: the operator was stopped at once");
            Ok(())
        }
    }
}

/// One attempt of an activity handler, run and reported as resource handlers' are.
async fn attempt(
    handler: &ActivityHandler,
    invocation: ActivityInvocation,
    default_backoff: Duration,
) -> Outcome {
    let attempt = Attempt {
        label: "Activity",
        id: &handler.id,
        options: Retrying {
            errors: handler.options.errors,
            timeout: handler.options.timeout,
            retries: handler.options.retries,
            backoff: handler.options.backoff,
        },
        default_backoff,
        retry: invocation.retry,
        runtime: invocation.runtime(),
        node: invocation.node.clone(),
        logger: invocation.logger.clone(),
        subhandlers: None,
    };
    attempt.run(|| (handler.function)(invocation)).await
}

fn interrupted(handler: &ActivityHandler, node: &Tasks) -> Failed {
    let reason = node.stop_reason().unwrap_or(StopReason::OperatorExiting);
    Failed {
        handler: handler.id.clone(),
        message: format!("interrupted: {reason}"),
    }
}

// Arguments of `#[kopf::on_startup]`, `#[kopf::on_cleanup]` and `#[kopf::on_probe]`
// functions, by name and type (as `extract` does for resource handlers).

/// What borrowed arguments of an activity handler borrow from: the invocation, and the
/// handler's own copy of the settings.
#[doc(hidden)]
#[derive(Debug)]
pub struct ActivityScope<'a> {
    invocation: &'a ActivityInvocation,
    settings: Option<&'a mut Option<Settings>>,
}

/// Holds the copy of the settings that a startup handler changes through
/// `settings: &mut kopf::Settings`, and puts it back when dropped (after the call, and also
/// when the attempt is cancelled or panics).
#[doc(hidden)]
#[derive(Debug)]
pub struct SettingsSlot<'a> {
    invocation: &'a ActivityInvocation,
    settings: Option<Settings>,
}

impl<'a> SettingsSlot<'a> {
    /// A slot for one call of the handler; the settings are copied only if asked for.
    pub fn new(invocation: &'a ActivityInvocation) -> Self {
        SettingsSlot {
            invocation,
            settings: None,
        }
    }

    /// The scope that the call's borrowed arguments come from.
    pub fn scope(&mut self) -> ActivityScope<'_> {
        ActivityScope {
            invocation: self.invocation,
            settings: Some(&mut self.settings),
        }
    }
}

impl Drop for SettingsSlot<'_> {
    fn drop(&mut self) {
        if let Some(settings) = self.settings.take() {
            *self.invocation.settings() = settings;
        }
    }
}

/// An argument of an activity handler, borrowed from its invocation.
#[diagnostic::on_unimplemented(
    message = "this activity handler argument cannot be borrowed as `{Self}`",
    label = "not a type this argument is borrowed as",
    note = "borrowed forms: `&mut kopf::Settings` for settings (startup handlers); `&kopf::Memo` for memo; `&kopf::Logger` or `&tracing::Span` for logger; `Option<&serde_json::Value>` for param; `&kube::Client` for client",
    note = "or take the argument by value: `retry: u32`, `runtime: std::time::Duration`, `activity: kopf::Activity`, `param: MyParam`"
)]
pub trait BorrowedActivityArgument<'a, Name>: Sized {
    /// Borrows the argument.
    fn borrow(scope: &mut ActivityScope<'a>) -> Result<Self>;
}

/// An argument of an activity handler, converted into a value of the handler's own.
#[diagnostic::on_unimplemented(
    message = "this activity handler argument cannot be converted into `{Self}`",
    label = "not a type this argument converts to",
    note = "owned forms: `kopf::Activity` for activity; `kopf::Settings` for settings (a copy); `kopf::Memo` for memo (a handle to the same memo); `kopf::Logger` or `tracing::Span` for logger; `u32`, `u64` or `usize` for retry; `time::OffsetDateTime` or `std::time::SystemTime` for started; `std::time::Duration` for runtime; any `serde::de::DeserializeOwned` type for param; `kube::Client` for client"
)]
pub trait OwnedActivityArgument<Name>: Sized {
    /// Produces the argument; a value that does not fit the type is a permanent error.
    fn extract(invocation: &ActivityInvocation) -> Result<Self>;
}

#[diagnostic::do_not_recommend]
impl<'a> BorrowedActivityArgument<'a, args::settings> for &'a mut Settings {
    fn borrow(scope: &mut ActivityScope<'a>) -> Result<Self> {
        let slot = scope
            .settings
            .take()
            .ok_or_else(|| Error::msg("the settings were given to two arguments"))?;
        let invocation = scope.invocation;
        Ok(slot.get_or_insert_with(|| invocation.settings().clone()))
    }
}

macro_rules! borrowed {
    ($($name:ident: $type:ty => |$invocation:ident| $value:expr;)*) => {$(
        #[diagnostic::do_not_recommend]
        impl<'a> BorrowedActivityArgument<'a, args::$name> for $type {
            fn borrow(scope: &mut ActivityScope<'a>) -> Result<Self> {
                let $invocation = scope.invocation;
                Ok($value)
            }
        }
    )*};
}

borrowed! {
    memo: &'a Memo => |invocation| invocation.memo();
    logger: &'a Logger => |invocation| invocation.logger();
    logger: &'a tracing::Span => |invocation| invocation.logger().span();
    param: Option<&'a Value> => |invocation| invocation.param();
    client: &'a kube::Client => |invocation| invocation.client();
}

macro_rules! owned {
    ($($name:ident: $type:ty => |$invocation:ident| $value:expr;)*) => {$(
        #[diagnostic::do_not_recommend]
        impl OwnedActivityArgument<args::$name> for $type {
            fn extract($invocation: &ActivityInvocation) -> Result<Self> {
                Ok($value)
            }
        }
    )*};
}

owned! {
    activity: Activity => |invocation| invocation.activity();
    settings: Settings => |invocation| invocation.settings().clone();
    memo: Memo => |invocation| invocation.memo().clone();
    logger: Logger => |invocation| invocation.logger().clone();
    logger: tracing::Span => |invocation| invocation.logger().span().clone();
    retry: u32 => |invocation| invocation.retry();
    retry: u64 => |invocation| invocation.retry().into();
    retry: usize => |invocation| invocation.retry() as usize;
    started: time::OffsetDateTime => |invocation| invocation.started();
    started: SystemTime => |invocation| invocation.started().into();
    runtime: Duration => |invocation| invocation.runtime();
    client: kube::Client => |invocation| invocation.client().clone();
}

impl<T: DeserializeOwned> OwnedActivityArgument<args::param> for T {
    fn extract(invocation: &ActivityInvocation) -> Result<Self> {
        let param = invocation.param().unwrap_or(&Value::Null);
        T::deserialize(param).map_err(|error| {
            PermanentError::new(format!(
                "the `param` argument does not fit {}: {error}",
                std::any::type_name::<T>()
            ))
            .into()
        })
    }
}
