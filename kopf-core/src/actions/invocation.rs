//! A handler as the framework calls it: its function, its options, and the [`Invocation`] it
//! receives (Kopf's kwargs), with the sub-handlers a call may register. These types refer to
//! one another (a function takes an invocation, which holds sub-handlers, which hold
//! functions), so they live together.
//!
//! ```
//! use kopf::registry::{ChangeHandler, Registry};
//! use kopf::resources::Selector;
//! let registry = Registry::new().with(
//!     ChangeHandler::on_create(Selector::new("kopf.dev", "v1", "kopfexamples"), "create_fn", |invocation| async move {
//!         let name = invocation.name().to_string();
//!         Ok(Some(serde_json::json!({"message": format!("created {name}")})))
//!     }),
//! );
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::aiokits::tasks::{StopReason, Tasks};
use crate::clients::posting::{Events, Logger};
use crate::helpers::sync::lock;
use crate::structs::bodies::Body;
use crate::structs::certificates::PeerCertificate;
use crate::structs::diff::Diff;
use crate::structs::errors::Result;
use crate::structs::filters::{MetaFilter, ValueFilter};
use crate::structs::memos::Memo;
use crate::structs::patch::Patch;
use crate::structs::resources::Resource;
use crate::structs::reviews::{Operation, Warnings};

/// What a handler function returns: a value to store in `status.<handler-id>`, or nothing.
pub type HandlerResult = Result<Option<Value>>;

/// A boxed handler future.
pub type HandlerFuture = Pin<Box<dyn Future<Output = HandlerResult> + Send + 'static>>;

/// A handler function as the framework stores it.
pub type HandlerFn = Arc<dyn Fn(Invocation) -> HandlerFuture + Send + Sync>;

/// A `when=` predicate.
pub type WhenFn = Arc<dyn Fn(&Invocation) -> bool + Send + Sync>;

/// Why change handlers are called (Kopf's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The object is new to the operator (no diff-base stored).
    Create,
    /// The object's essence changed since it was last handled.
    Update,
    /// The object is being deleted and holds the operator's finalizer.
    Delete,
    /// The operator found the object at startup, already handled before.
    Resume,
}

impl Reason {
    /// `create`, `update`, `delete`, `resume`: as stored in progress records' `purpose`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Create => "create",
            Reason::Update => "update",
            Reason::Delete => "delete",
            Reason::Resume => "resume",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the framework does with an arbitrary error (not a Temporary or Permanent one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorsMode {
    /// Retry after the handler's `backoff` (the default).
    #[default]
    Temporary,
    /// Fail the handler for good.
    Permanent,
    /// Treat as success.
    Ignored,
}
/// Options shared by handler kinds.
#[derive(Clone, Default)]
pub(crate) struct Options {
    pub(crate) errors: ErrorsMode,
    pub(crate) timeout: Option<Duration>,
    pub(crate) retries: Option<u32>,
    pub(crate) backoff: Option<Duration>,
    pub(crate) param: Option<Value>,
    pub(crate) labels: BTreeMap<String, MetaFilter>,
    pub(crate) annotations: BTreeMap<String, MetaFilter>,
    pub(crate) when: Option<WhenFn>,
    pub(crate) field: Option<Vec<String>>,
    pub(crate) value: Option<ValueFilter>,
    pub(crate) old: Option<ValueFilter>,
    pub(crate) new: Option<ValueFilter>,
    /// What the handler touches through its own API calls, for the `rbac` subcommand.
    pub(crate) rbac: crate::structs::rbac::RbacNeeds,
    /// The path of the attributed function behind the handler (see `intents::registry::
    /// Registered`); `None` when declared in code.
    pub(crate) origin: Option<&'static str>,
}

pub(crate) fn boxed<F, Fut>(function: F) -> HandlerFn
where
    F: Fn(Invocation) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerResult> + Send + 'static,
{
    Arc::new(move |invocation| boxed_future(function(invocation)))
}

/// `future` boxed, unless it is boxed already: the attribute macros' functions return their
/// futures boxed, and boxing them again cost every call an allocation (and every poll a
/// second indirection).
pub(crate) fn boxed_future<Fut, T>(future: Fut) -> Pin<Box<dyn Future<Output = T> + Send>>
where
    Fut: Future<Output = T> + Send + 'static,
    T: 'static,
{
    let mut future = Some(future);
    let already = (&mut future as &mut dyn std::any::Any)
        .downcast_mut::<Option<Pin<Box<dyn Future<Output = T> + Send>>>>()
        .and_then(Option::take);
    match (already, future) {
        (Some(boxed), _) => boxed,
        (None, Some(future)) => Box::pin(future),
        (None, None) => unreachable!("the future is taken only when it is boxed already"),
    }
}

/// The setters of the options that pace and limit a handler's attempts, for every kind.
macro_rules! retry_setters {
    () => {
        /// What to do with arbitrary errors (default: retry after `backoff`).
        pub fn errors(mut self, mode: crate::actions::invocation::ErrorsMode) -> Self {
            self.options.errors = mode;
            self
        }

        /// Give up when this long has passed since the first attempt; a running attempt is
        /// cancelled when the time is up.
        pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
            self.options.timeout = Some(timeout);
            self
        }

        /// Give up after this many attempts.
        pub fn retries(mut self, retries: u32) -> Self {
            self.options.retries = Some(retries);
            self
        }

        /// The delay before retrying after an arbitrary error (default: the settings' 60 s).
        pub fn backoff(mut self, backoff: std::time::Duration) -> Self {
            self.options.backoff = Some(backoff);
            self
        }

        /// A value passed to the handler as `param`.
        pub fn param(mut self, param: serde_json::Value) -> Self {
            self.options.param = Some(param);
            self
        }
    };
}

/// The setters of every option of resource handlers: [`retry_setters`] and the filters.
/// The setters of what a handler touches through its own API calls, for every kind.
macro_rules! rbac_setters {
    () => {
        /// Declares what the handler does through its own API calls, for the operator's
        /// `rbac` subcommand (`owns = [..]`, `reads = [..]` on the attributes).
        pub fn rbac_rule(mut self, rule: crate::structs::rbac::RbacRule) -> Self {
            self.options.rbac.rules.push(rule);
            self
        }

        /// Declares that the handler creates and changes objects of `K` (every verb but
        /// `deletecollection`): the attributes' `owns = [K]`.
        pub fn owns<K>(self) -> Self
        where
            K: kube::Resource<DynamicType = ()>,
            K::Scope: 'static,
        {
            self.rbac_rule(crate::structs::rbac::RbacRule::owns::<K>())
        }

        /// Declares that the handler reads objects of `K` (`get`, `list`, `watch`): the
        /// attributes' `reads = [K]`.
        pub fn reads<K>(self) -> Self
        where
            K: kube::Resource<DynamicType = ()>,
            K::Scope: 'static,
        {
            self.rbac_rule(crate::structs::rbac::RbacRule::reads::<K>())
        }

        /// Marks the handler as taking a `client` (set by the attributes): the `rbac`
        /// subcommand names it when it declares no rules.
        #[doc(hidden)]
        pub fn takes_client(mut self) -> Self {
            self.options.rbac.takes_client = true;
            self
        }

        /// Names the attributed function behind the handler (set by the attributes): one
        /// function stacked under several attributes is called once per cause, as Kopf
        /// deduplicates by function and id.
        #[doc(hidden)]
        pub fn origin(mut self, function: &'static str) -> Self {
            self.options.origin = Some(function);
            self
        }
    };
}

macro_rules! option_setters {
    () => {
        crate::actions::invocation::retry_setters!();
        crate::actions::invocation::rbac_setters!();

        /// Only for objects whose label `key` passes the filter.
        pub fn label(mut self, key: &str, filter: crate::structs::filters::MetaFilter) -> Self {
            self.options.labels.insert(key.into(), filter);
            self
        }

        /// Only for objects whose annotation `key` passes the filter.
        pub fn annotation(
            mut self,
            key: &str,
            filter: crate::structs::filters::MetaFilter,
        ) -> Self {
            self.options.annotations.insert(key.into(), filter);
            self
        }

        /// Only when the predicate holds.
        pub fn when(
            mut self,
            predicate: impl Fn(&crate::actions::invocation::Invocation) -> bool + Send + Sync + 'static,
        ) -> Self {
            self.options.when = Some(std::sync::Arc::new(predicate));
            self
        }
    };
}

/// The setters of a field filter (Kopf's `field=` and `value=`) for handlers that see one
/// state of the object: event handlers, index functions, daemons and timers. `suffixed`: the
/// field is appended to the id (`id/spec.field`), as Kopf does for every kind but index
/// functions (an index is asked for by its id) and sub-handlers.
macro_rules! field_setters {
    (suffixed) => {
        /// Only for objects whose dotted `field` is present (a `null` counts as present), or,
        /// with [`value`](Self::value), whose field passes the value filter. The id gets
        /// `/field` appended, as in Kopf.
        pub fn field(mut self, field: &str) -> Self {
            let path = crate::structs::diff::parse_field(field);
            if self.options.field.is_none() {
                self.id = format!("{}/{}", self.id, path.join("."));
            }
            self.options.field = Some(path);
            self
        }

        crate::actions::invocation::field_setters!(value);
    };
    (kept) => {
        /// Only for objects whose dotted `field` is present (a `null` counts as present), or,
        /// with [`value`](Self::value), whose field passes the value filter. The id stays as it
        /// is, as in Kopf.
        pub fn field(mut self, field: &str) -> Self {
            self.options.field = Some(crate::structs::diff::parse_field(field));
            self
        }

        crate::actions::invocation::field_setters!(value);
    };
    (value) => {
        /// With a [`field`](Self::field): only when its value passes the filter (a value,
        /// [`Present`](crate::filters::ValueFilter::Present),
        /// [`Absent`](crate::filters::ValueFilter::Absent) or a callable). Without a field, it
        /// is ignored, as Kopf refuses it.
        pub fn value(mut self, filter: crate::structs::filters::ValueFilter) -> Self {
            self.options.value = Some(filter);
            self
        }
    };
}

pub(crate) use {field_setters, option_setters, rbac_setters, retry_setters};

/// Everything a handler may ask for, given to it when it is called (Kopf's kwargs).
#[derive(Clone)]
pub struct Invocation {
    pub(crate) body: Arc<Body>,
    pub(crate) resource: Arc<Resource>,
    pub(crate) reason: Option<Reason>,
    pub(crate) event_type: Option<String>,
    /// Shared by the invocations of one cycle's handlers (and their clones), not copied;
    /// `None` for no change.
    pub(crate) diff: Option<Arc<Diff>>,
    pub(crate) old: Option<Arc<Value>>,
    pub(crate) new: Option<Arc<Value>>,
    pub(crate) retry: u32,
    pub(crate) started: time::OffsetDateTime,
    pub(crate) param: Option<Value>,
    /// Shared by the invocations of one resource (a `kube::Client` clone allocates).
    pub(crate) client: Arc<kube::Client>,
    /// The invocation's node of the cancellation tree: its token is `stopped`.
    pub(crate) node: Tasks,
    pub(crate) logger: Logger,
    pub(crate) events: Events,
    pub(crate) memo: Memo,
    /// The operator's indexes (and, for index functions, where their entries go).
    pub(crate) indexes: crate::structs::indexes::Indexes,
    /// What the call gathers for its caller: the sub-handlers it registers (change handlers),
    /// and the patch it fills ([`Invocation::patch`]), in one allocation.
    pub(crate) gathered: crate::actions::invocation::SubHandlers,
    /// For a sub-handler: the id of the handler that registered it (at the top), under which
    /// its attempts are counted in the metrics, so that sub-handlers' ids (often made from
    /// data) do not become label values without bound.
    pub(crate) counted_as: Option<String>,
    /// For admission handlers: what the review says besides the object.
    pub(crate) review: Option<Arc<crate::structs::reviews::Review>>,
    /// For daemons and timers: the newest state of the object, for live views.
    pub(crate) live: Option<Arc<crate::actions::newest::Newest>>,
    /// For login handlers: the operator's settings (Kopf gives them to activities, and login
    /// handlers are activities there).
    pub(crate) settings: Option<Arc<crate::configs::settings::Settings>>,
}

impl Invocation {
    /// The whole object (`metadata.managedFields` included, built on the first call).
    pub fn body(&self) -> &Value {
        self.body.whole()
    }

    /// `spec` (`null` when absent).
    pub fn spec(&self) -> &Value {
        &self.body["spec"]
    }

    /// `spec` deserialized into the handler's own type. A spec that does not fit is a
    /// [`PermanentError`](crate::PermanentError) naming the type and the problem: retrying
    /// would not help until the object changes.
    pub fn spec_as<T: serde::de::DeserializeOwned>(&self) -> Result<T> {
        T::deserialize(&self.body["spec"]).map_err(|error| {
            crate::structs::errors::PermanentError::new(format!(
                "spec does not match {}: {error}",
                std::any::type_name::<T>()
            ))
            .into()
        })
    }

    /// The whole object deserialized into a typed resource (e.g. a `#[derive(CustomResource)]`
    /// type); a mismatch is a [`PermanentError`](crate::PermanentError).
    pub fn body_as<K: serde::de::DeserializeOwned>(&self) -> Result<K> {
        K::deserialize(self.body.whole()).map_err(|error| {
            crate::structs::errors::PermanentError::new(format!(
                "the object does not match {}: {error}",
                std::any::type_name::<K>()
            ))
            .into()
        })
    }

    /// `metadata` (`managedFields` included, built on the first call).
    pub fn meta(&self) -> &Value {
        &self.body.whole()["metadata"]
    }

    /// `status` (`null` when absent).
    pub fn status(&self) -> &Value {
        &self.body["status"]
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.body["metadata"]["name"].as_str().unwrap_or_default()
    }

    /// `metadata.namespace`, `None` for cluster-scoped objects.
    pub fn namespace(&self) -> Option<&str> {
        self.body["metadata"]["namespace"].as_str()
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &str {
        self.body["metadata"]["uid"].as_str().unwrap_or_default()
    }

    /// `metadata.labels` (`null` when absent).
    pub fn labels(&self) -> &Value {
        &self.body["metadata"]["labels"]
    }

    /// `metadata.annotations` (`null` when absent).
    pub fn annotations(&self) -> &Value {
        &self.body["metadata"]["annotations"]
    }

    /// Why a change handler is called; `None` for event handlers.
    pub fn reason(&self) -> Option<Reason> {
        self.reason
    }

    /// For event handlers: `ADDED`, `MODIFIED`, `DELETED`, or `None` for the initial listing
    /// (Kopf's `type`).
    pub fn event_type(&self) -> Option<&str> {
        self.event_type.as_deref()
    }

    /// For event handlers: the raw watch event, as Kopf gives it (`event`):
    /// `{"type": "ADDED" | "MODIFIED" | "DELETED" | null, "object": {...}}`, the type `null`
    /// for the objects of the initial listing. Made anew on each call: the object is copied.
    pub fn event(&self) -> Value {
        serde_json::json!({"type": self.event_type, "object": self.body.whole()})
    }

    /// What changed since the object was last handled (narrowed to the handler's field).
    pub fn diff(&self) -> &Diff {
        self.diff
            .as_deref()
            .unwrap_or(&crate::structs::diff::NO_CHANGES)
    }

    /// The old essence (or field value); `None` on creation.
    pub fn old(&self) -> Option<&Value> {
        self.old.as_deref()
    }

    /// The new essence (or field value).
    #[allow(
        clippy::new_ret_no_self,
        reason = "Kopf's handlers receive the new state as `new`"
    )]
    pub fn new(&self) -> Option<&Value> {
        self.new.as_deref()
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

    /// The resource of the object.
    pub fn resource(&self) -> &Resource {
        &self.resource
    }

    /// The changes to apply after the handler. Do not hold the guard across an `.await`.
    pub fn patch(&self) -> MutexGuard<'_, Patch> {
        self.gathered.patch()
    }

    /// A client for API calls of the handler's own.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Cancelled when the handler should stop: the operator is exiting, or its timeout passed
    /// ([`stop_reason`](Self::stop_reason) tells which). An async handler can `.await`
    /// `stopped().cancelled()`; a [sync](crate::registry::blocking) one can poll
    /// `stopped().is_cancelled()`.
    pub fn stopped(&self) -> &CancellationToken {
        self.node.token()
    }

    /// Why [`stopped`](Self::stopped) was cancelled; `None` while it is not.
    ///
    /// ```
    /// # async fn handler(invocation: kopf::Invocation) -> kopf::registry::HandlerResult {
    /// invocation.stopped().cancelled().await;
    /// match invocation.stop_reason() {
    ///     Some(kopf::StopReason::Timeout) => Err(kopf::PermanentError::new("too slow").into()),
    ///     _ => Err(kopf::TemporaryError::new("interrupted; resuming later").into()),
    /// }
    /// # }
    /// ```
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.node.stop_reason()
    }

    /// The handler's logger: the object's tracing span (resource, namespace, name, handler
    /// id), whose records are also posted as Kubernetes Events when
    /// [`PostingSettings::loggers`](crate::settings::PostingSettings::loggers) is on. Log with
    /// `invocation.logger().info(...)`, or `tracing::info!(parent: invocation.logger(), ...)`
    /// for the logs alone.
    pub fn logger(&self) -> &Logger {
        &self.logger
    }

    /// Posts Kubernetes Events about the object (Kopf's `kopf.info`, `kopf.warn`,
    /// `kopf.exception`, `kopf.event`): `invocation.events().info("Reason", "message")`.
    pub fn events(&self) -> &Events {
        &self.events
    }

    /// The object's memo: kept while the object lives, shared by all its handlers, seeded
    /// from the operator's memo (see [`Memo`]).
    ///
    /// ```
    /// # fn handler(invocation: kopf::Invocation) -> kopf::registry::HandlerResult {
    /// let memo = invocation.memo();
    /// let seen = memo.update(|values| {
    ///     let seen = values.get("seen").and_then(|v| v.as_u64()).unwrap_or(0) + 1;
    ///     values.insert("seen".into(), seen.into());
    ///     seen
    /// });
    /// invocation.logger().info(format_args!("seen {seen} times"));
    /// # Ok(None)
    /// # }
    /// ```
    pub fn memo(&self) -> &Memo {
        &self.memo
    }

    /// Registers sub-handlers (Kopf's `@kopf.subhandler`): each gets a progress record of its
    /// own, under the id `<this handler's id>/<its id>`, and this handler finishes when they
    /// all have. See [`SubHandlers`](crate::registry::SubHandlers).
    pub fn subhandlers(&self) -> &crate::actions::invocation::SubHandlers {
        &self.gathered
    }

    /// For admission handlers: the operation under review; `None` for other handlers.
    pub fn operation(&self) -> Option<Operation> {
        self.review.as_ref().map(|review| review.operation)
    }

    /// For admission handlers: the subresource under review (`"status"`, `"scale"`…);
    /// `None` for the main object and for other handlers.
    pub fn subresource(&self) -> Option<&str> {
        self.review.as_ref()?.subresource.as_deref()
    }

    /// For admission handlers: whether the request is a dry run, so that the handler must not
    /// cause side effects (see
    /// [`AdmissionHandler::side_effects`](crate::registry::AdmissionHandler::side_effects)).
    pub fn dryrun(&self) -> bool {
        self.review.as_ref().is_some_and(|review| review.dryrun)
    }

    /// For admission handlers: who makes the request, the review's `userInfo` as sent
    /// (`username`, `uid`, `groups`, `extra`); `null` for other handlers.
    pub fn userinfo(&self) -> &Value {
        const NULL: Value = Value::Null;
        self.review
            .as_ref()
            .map_or(&NULL, |review| &review.userinfo)
    }

    /// For admission handlers: the HTTP headers of the webhook call, by lower-case name;
    /// empty for other handlers.
    pub fn headers(&self) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.review
            .as_ref()
            .map_or(&EMPTY, |review| &review.headers)
    }

    /// For admission handlers: the client certificate of the webhook's caller, if it sent
    /// one; `None` for other handlers.
    pub fn sslpeer(&self) -> Option<&PeerCertificate> {
        self.review.as_ref()?.sslpeer.as_ref()
    }

    /// For admission handlers: the warnings returned to the API client (`kubectl` prints
    /// them); push to them. For other handlers, a list that goes nowhere.
    pub fn warnings(&self) -> Warnings {
        self.review
            .as_ref()
            .map(|review| review.warnings.clone())
            .unwrap_or_default()
    }
}

impl fmt::Debug for Invocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Invocation")
            .field("resource", &self.resource)
            .field("name", &self.name())
            .field("namespace", &self.namespace())
            .field("reason", &self.reason)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// Sub-handlers: handlers that a change handler registers while it runs (Kopf's
/// `@kopf.subhandler`), each with a progress record of its own under the id `parent/child`.
///
/// ```
/// # use kopf::registry::{ChangeHandler, Registry};
/// # use kopf::resources::Selector;
/// let registry = Registry::new().with(ChangeHandler::on_create(
///     Selector::new("kopf.dev", "v1", "kopfexamples"),
///     "create_fn",
///     |invocation| async move {
///         for item in ["a", "b"] {
///             // Progress of `create_fn/item-a` and `create_fn/item-b` is kept on the object.
///             invocation.subhandlers().add(format!("item-{item}"), move |child| async move {
///                 child.logger().info(format_args!("handling {item}"));
///                 Ok(None)
///             });
///         }
///         Ok(None)
///     },
/// ));
/// ```
///
/// As in Kopf, the parent function runs again on every processing cycle until all of its
/// sub-handlers have finished, and registers them again each time: a sub-handler that finished
/// (its record says so) is not called again, the others run in the operator's lifecycle order,
/// each retried on its own. The parent's record lists them in `subrefs`; the parent finishes
/// when all of them have: successfully if they all succeeded, as a permanent failure naming
/// those that failed otherwise. Results of sub-handlers go to `status.<parent>/<child>`.
/// [`execute`](Self::execute) runs those registered so far within the call instead (Kopf's
/// `await kopf.execute()`).
///
/// The sub-handlers registered by one call of a handler:
/// [`Invocation::subhandlers`](crate::Invocation::subhandlers), or a `subhandlers:
/// &kopf::registry::SubHandlers` argument of an attributed handler.
///
/// It shares its allocation with the patch of the call (one allocation for both, made for
/// every call): the caller reads both after the call.
#[derive(Clone, Default)]
pub struct SubHandlers(Arc<Gathered>);

/// What one call of a handler gathers for its caller.
#[derive(Default)]
struct Gathered {
    subhandlers: Mutex<Registered>,
    patch: Mutex<Patch>,
    /// How [`execute`](crate::execute) runs sub-handlers in place, set by the caller before
    /// the call of a change handler.
    in_place: std::sync::OnceLock<Arc<dyn InPlace>>,
}

/// The sub-handlers that one call registered.
#[derive(Default)]
struct Registered {
    /// In registration order; taken when they run.
    handlers: Vec<SubHandler>,
    /// The call ran those registered so far in place ([`SubHandlers::execute`]): none runs
    /// after the call (Kopf's `subexecuted_var`).
    executed: bool,
}

/// Runs sub-handlers in place, within the call of the change handler that
/// [`execute`](crate::execute)s them (Kopf's `kopf.execute()`): the caller of a change handler
/// provides it (it knows the cause, the progress storage, the lifecycle), and gathers what it
/// did once the call has ended.
pub(crate) trait InPlace: Send + Sync {
    /// Runs the due ones among `handlers` (in `lifecycle`'s order, else the operator's), and
    /// tells how they stand: `Ok` once all have finished (some may have failed: as in Kopf,
    /// their records say so), a [children retry](crate::Error) while some are unfinished.
    fn run(
        self: Arc<Self>,
        handlers: Vec<SubHandler>,
        lifecycle: Option<crate::configs::lifecycles::Lifecycle>,
    ) -> Pin<Box<dyn Future<Output = Result<()>> + Send>>;
}

impl SubHandlers {
    /// Registers a sub-handler with default options; its id is `<parent id>/<id>`.
    pub fn add<F, Fut>(&self, id: impl Into<String>, function: F)
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        self.register(SubHandler::new(id, function));
    }

    /// Registers a sub-handler with options of its own (`retries`, `timeout`, `backoff`,
    /// `errors`, `param`, filters).
    ///
    /// Once the call has run those registered so far in place
    /// ([`execute`](Self::execute)), one registered later does not run, as in Kopf (a warning
    /// names it after the call).
    pub fn register(&self, handler: SubHandler) {
        let handlers = &mut lock(&self.0.subhandlers).handlers;
        match handlers.iter_mut().find(|h| h.id == handler.id) {
            Some(existing) => *existing = handler,
            None => handlers.push(handler),
        }
    }

    /// Whether none is to run after the call: none is registered, or the call ran them in
    /// place.
    pub(crate) fn none_after_the_call(&self) -> bool {
        let registered = lock(&self.0.subhandlers);
        registered.executed || registered.handlers.is_empty()
    }

    /// After the call: takes the registered sub-handlers, in registration order, to run them
    /// (`Ok`); or, where the call ran them in place, those registered since (`Err`), which do
    /// not run.
    pub(crate) fn take(&self) -> Result<Vec<SubHandler>, Vec<SubHandler>> {
        let mut registered = lock(&self.0.subhandlers);
        let handlers = std::mem::take(&mut registered.handlers);
        if registered.executed {
            Err(handlers)
        } else {
            Ok(handlers)
        }
    }

    /// For [`execute`](Self::execute): takes the sub-handlers registered so far and marks
    /// them run in place, so that none runs after the call; `None` where the call did so
    /// already (Kopf's "double implicit execution" prevented).
    pub(crate) fn take_to_execute(&self) -> Option<Vec<SubHandler>> {
        let mut registered = lock(&self.0.subhandlers);
        if std::mem::replace(&mut registered.executed, true) {
            return None;
        }
        Some(std::mem::take(&mut registered.handlers))
    }

    /// The patch of the call that registers these sub-handlers.
    pub(crate) fn patch(&self) -> MutexGuard<'_, Patch> {
        lock(&self.0.patch)
    }

    /// Sets how [`execute`](crate::execute) runs sub-handlers in place during this call.
    pub(crate) fn run_in_place(&self, in_place: Arc<dyn InPlace>) {
        let _ = self.0.in_place.set(in_place);
    }

    /// How [`execute`](crate::execute) runs sub-handlers in place during this call, if set.
    pub(crate) fn in_place(&self) -> Option<Arc<dyn InPlace>> {
        self.0.in_place.get().cloned()
    }

    /// Takes the patch of the call, leaving it empty.
    pub(crate) fn take_patch(&self) -> Patch {
        std::mem::take(&mut *self.patch())
    }
}

impl fmt::Debug for SubHandlers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<String> = lock(&self.0.subhandlers)
            .handlers
            .iter()
            .map(|h| h.id.clone())
            .collect();
        f.debug_tuple("SubHandlers").field(&ids).finish()
    }
}

/// A sub-handler with its options, for [`SubHandlers::register`].
#[derive(Clone)]
pub struct SubHandler {
    pub(crate) id: String,
    pub(crate) function: HandlerFn,
    pub(crate) options: Options,
}

impl SubHandler {
    /// A sub-handler; its id is relative to its parent's.
    pub fn new<F, Fut>(id: impl Into<String>, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        SubHandler {
            id: id.into(),
            function: boxed(function),
            options: Options::default(),
        }
    }

    option_setters!();

    /// Narrows the sub-handler to a field of what its parent sees (the parent's field, if it
    /// has one, else the object's essence): its `old`, `new` and `diff` are the field's, and
    /// under an `on_update` or `on_field` parent it runs only when that field changed. The id
    /// stays as it is, as in Kopf.
    pub fn field(mut self, field: &str) -> Self {
        self.options.field = Some(crate::structs::diff::parse_field(field));
        self
    }

    /// With a [`field`](Self::field): only when its old or new value passes the filter.
    pub fn value(mut self, filter: ValueFilter) -> Self {
        self.options.value = Some(filter);
        self
    }

    /// With a [`field`](Self::field): only when its old value passes the filter (Kopf allows
    /// it under `on_update` and `on_field` parents).
    pub fn old(mut self, filter: ValueFilter) -> Self {
        self.options.old = Some(filter);
        self
    }

    /// With a [`field`](Self::field): only when its new value passes the filter (Kopf allows
    /// it under `on_update` and `on_field` parents).
    pub fn new_value(mut self, filter: ValueFilter) -> Self {
        self.options.new = Some(filter);
        self
    }
}

impl fmt::Debug for SubHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubHandler")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where a boxed future lives.
    fn address(future: &HandlerFuture) -> *const () {
        std::ptr::from_ref::<dyn Future<Output = HandlerResult> + Send>(&**future).cast()
    }

    #[test]
    fn a_future_boxed_already_is_not_boxed_again() {
        let boxed: HandlerFuture = Box::pin(async { Ok(Some(Value::from(1))) });
        let first = address(&boxed);
        let again = boxed_future(boxed);
        assert_eq!(address(&again), first);
        assert_eq!(
            futures::executor::block_on(again).unwrap(),
            Some(Value::from(1))
        );
        let unboxed: HandlerFuture = boxed_future(async { Ok(Some(Value::from(2))) });
        assert_eq!(
            futures::executor::block_on(unboxed).unwrap(),
            Some(Value::from(2))
        );
    }
}
