//! Activity handlers (Kopf's `@kopf.on.startup`, `@kopf.on.cleanup`, `@kopf.on.probe`):
//! handlers of the operator itself rather than of objects.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::actions::activity::{Activity, ActivityInvocation};
use crate::actions::invocation::{ErrorsMode, HandlerFuture, HandlerResult};

/// An activity handler function as the framework stores it.
pub(crate) type ActivityFn = Arc<dyn Fn(ActivityInvocation) -> HandlerFuture + Send + Sync>;

/// A handler of the operator's own activities: `on_startup`, `on_cleanup`, `on_probe`.
///
/// - **Startup** handlers run before anything is watched, one after another in registration
///   order, each retried in memory until it succeeds (errors are temporary by default, as in
///   Kopf). They may change the operator's [`Settings`](crate::Settings) and its [`Memo`](crate::Memo): what they leave is
///   what the operator then runs with. A startup handler that fails for good (a permanent
///   error, or its `retries` or `timeout` exhausted) stops the operator before it watched
///   anything: `run()` returns
///   [`OperatorError::Activity`](crate::operator::OperatorError::Activity) naming the handler. The
///   one setting they cannot change is
///   [`ExecutionSettings::max_workers`](crate::settings::ExecutionSettings::max_workers):
///   the threads that sync startup handlers run on exist before them. A stop during the startup
///   interrupts it (the handlers' `stopped` fires), and cleanup handlers then do not run.
/// - **Cleanup** handlers run once when the operator stops: after the handlers' grace period,
///   one after another, all of them within
///   [`ProcessSettings::cleanup_timeout`](crate::settings::ProcessSettings::cleanup_timeout). A
///   second signal aborts them. They do not run if the operator never finished its startup.
/// - **Probe** handlers run when the [liveness endpoint](crate::operator::Operator::liveness) is
///   asked (at most once per 10 seconds): their results are its answer.
///
/// ```
/// use kopf::registry::{ActivityHandler, Registry};
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
    pub(crate) leader_only: bool,
    /// What the handler touches through its own API calls, for the `rbac` subcommand.
    pub(crate) rbac: crate::structs::rbac::RbacNeeds,
    /// The path of the attributed function behind the handler; `None` when declared in code.
    pub(crate) origin: Option<&'static str>,
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
            function: Arc::new(move |invocation| {
                crate::actions::invocation::boxed_future(function(invocation))
            }),
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

    /// Runs only on the leader, when a Lease is selected
    /// ([`PeeringSettings::lease`](crate::settings::PeeringSettings::lease)); for startup and
    /// cleanup handlers (probes ignore it).
    ///
    /// A leader-only startup handler runs after the other startup handlers, each time this
    /// operator acquires the Lease, before it starts serving (client-go's
    /// `OnStartedLeading`); its failure stops the operator as a startup handler's does, and
    /// the settings it changes are not used (the operator has started by then). A leader-only
    /// cleanup handler runs at the stop only if this operator leads then, before it releases
    /// the Lease. Without a Lease, every operator is its own leader: they run as the others
    /// do, the startup ones after the others.
    ///
    /// ```
    /// let handler = kopf::registry::ActivityHandler::on_startup("migrate", |_invocation| async {
    ///     Ok(None) // one-off work that only one replica may do
    /// })
    /// .leader_only();
    /// # let _ = handler;
    /// ```
    pub fn leader_only(mut self) -> Self {
        self.options.leader_only = true;
        self
    }

    /// Whether it runs only on the leader ([`leader_only`](Self::leader_only)).
    pub fn is_leader_only(&self) -> bool {
        self.options.leader_only
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
    crate::actions::invocation::rbac_setters!();
}

impl fmt::Debug for ActivityHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActivityHandler")
            .field("id", &self.id)
            .field("activity", &self.activity)
            .finish_non_exhaustive()
    }
}
