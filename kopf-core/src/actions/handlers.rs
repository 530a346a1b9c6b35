//! Handlers: what they react to, their options, and what they receive when called.
//!
//! This is the plain registration API; the attribute macros generate the same descriptors.
//!
//! ```
//! use kopf::{ChangeHandler, Registry, Selector};
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

use crate::structs::diff::Diff;
use crate::structs::errors::Result;
use crate::structs::filters::{MetaFilter, ValueFilter};
use crate::structs::memos::Memo;
use crate::structs::patch::Patch;
use crate::clients::posting::{Events, Logger};
use crate::structs::resources::{Resource, Selector};
use crate::aiokits::tasks::{StopReason, Tasks};

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

/// Which causes a change handler reacts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// `on_resume`; with `deleted`, also for objects already being deleted.
    Resume {
        /// Also resume objects marked for deletion.
        deleted: bool,
    },
    /// `on_create`.
    Create,
    /// `on_update`.
    Update,
    /// `on_delete`; an `optional` one does not add the finalizer.
    Delete {
        /// Do not block deletion for this handler.
        optional: bool,
    },
    /// `on_field`: any change of the handler's `field`.
    Field,
}

/// A handler of object changes: `on_resume`, `on_create`, `on_update`, `on_delete`, `on_field`.
#[derive(Clone)]
pub struct ChangeHandler {
    pub(crate) id: String,
    pub(crate) trigger: Trigger,
    pub(crate) selector: Selector,
    pub(crate) function: HandlerFn,
    pub(crate) options: Options,
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
}

pub(crate) fn boxed<F, Fut>(function: F) -> HandlerFn
where
    F: Fn(Invocation) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerResult> + Send + 'static,
{
    Arc::new(move |invocation| Box::pin(function(invocation)))
}

/// The setters of the options that pace and limit a handler's attempts, for every kind.
macro_rules! retry_setters {
    () => {
        /// What to do with arbitrary errors (default: retry after `backoff`).
        pub fn errors(mut self, mode: crate::actions::handlers::ErrorsMode) -> Self {
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
macro_rules! option_setters {
    () => {
        crate::actions::handlers::retry_setters!();

        /// Only for objects whose label `key` passes the filter.
        pub fn label(mut self, key: &str, filter: crate::structs::filters::MetaFilter) -> Self {
            self.options.labels.insert(key.into(), filter);
            self
        }

        /// Only for objects whose annotation `key` passes the filter.
        pub fn annotation(mut self, key: &str, filter: crate::structs::filters::MetaFilter) -> Self {
            self.options.annotations.insert(key.into(), filter);
            self
        }

        /// Only when the predicate holds.
        pub fn when(
            mut self,
            predicate: impl Fn(&crate::Invocation) -> bool + Send + Sync + 'static,
        ) -> Self {
            self.options.when = Some(std::sync::Arc::new(predicate));
            self
        }
    };
}

pub(crate) use {option_setters, retry_setters};

impl ChangeHandler {
    fn new<F, Fut>(trigger: Trigger, selector: Selector, id: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        ChangeHandler {
            id: id.into(),
            trigger,
            selector,
            function: boxed(function),
            options: Options::default(),
        }
    }

    /// Called for objects created since the operator last handled them.
    pub fn on_create<F, Fut>(selector: Selector, id: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        Self::new(Trigger::Create, selector, id, function)
    }

    /// Called when an object's essence (spec, labels, annotations) changed.
    pub fn on_update<F, Fut>(selector: Selector, id: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        Self::new(Trigger::Update, selector, id, function)
    }

    /// Called when an object is deleted; the operator's finalizer holds the object until this
    /// handler succeeds (unless [`optional`](Self::optional)).
    pub fn on_delete<F, Fut>(selector: Selector, id: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        Self::new(Trigger::Delete { optional: false }, selector, id, function)
    }

    /// Called for objects found when the operator starts, that it handled before.
    pub fn on_resume<F, Fut>(selector: Selector, id: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        Self::new(Trigger::Resume { deleted: false }, selector, id, function)
    }

    /// Called when the dotted `field` changes (`old`, `new`, `diff` narrowed to it). The
    /// handler id gets `/field` appended, as in Kopf.
    pub fn on_field<F, Fut>(selector: Selector, id: &str, field: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        Self::new(Trigger::Field, selector, id, function).field(field)
    }

    /// Narrows the handler to a field: it runs only when the field changed, and its `old`,
    /// `new` and `diff` are the field's. The id gets `/field` appended.
    pub fn field(mut self, field: &str) -> Self {
        let path = crate::structs::diff::parse_field(field);
        if self.options.field.is_none() {
            self.id = format!("{}/{}", self.id, path.join("."));
        }
        self.options.field = Some(path);
        self
    }

    /// For `on_field` and `on_update` with a field: run only when the old or new value passes.
    pub fn value(mut self, filter: ValueFilter) -> Self {
        self.options.value = Some(filter);
        self
    }

    /// Run only when the field's old value passes.
    pub fn old(mut self, filter: ValueFilter) -> Self {
        self.options.old = Some(filter);
        self
    }

    /// Run only when the field's new value passes.
    pub fn new_value(mut self, filter: ValueFilter) -> Self {
        self.options.new = Some(filter);
        self
    }

    /// For `on_delete`: do not add the finalizer for this handler.
    pub fn optional(mut self) -> Self {
        if let Trigger::Delete { .. } = self.trigger {
            self.trigger = Trigger::Delete { optional: true };
        }
        self
    }

    /// For `on_resume`: also resume objects already marked for deletion.
    pub fn deleted(mut self) -> Self {
        if let Trigger::Resume { .. } = self.trigger {
            self.trigger = Trigger::Resume { deleted: true };
        }
        self
    }

    /// The handler's id (the key of its progress record and of its result in `status`).
    pub fn id(&self) -> &str {
        &self.id
    }

    option_setters!();

    pub(crate) fn requires_finalizer(&self) -> bool {
        self.trigger == Trigger::Delete { optional: false }
    }
}

impl fmt::Debug for ChangeHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChangeHandler")
            .field("id", &self.id)
            .field("trigger", &self.trigger)
            .field("selector", &self.selector)
            .finish_non_exhaustive()
    }
}

/// A handler of raw watch events (`on_event`): called for every event, errors only logged.
#[derive(Clone)]
pub struct EventHandler {
    pub(crate) id: String,
    pub(crate) selector: Selector,
    pub(crate) function: HandlerFn,
    pub(crate) options: Options,
}

impl EventHandler {
    /// Called for every event of the selected resource, including the initial listing.
    pub fn on_event<F, Fut>(selector: Selector, id: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        EventHandler {
            id: id.into(),
            selector,
            function: boxed(function),
            options: Options::default(),
        }
    }

    option_setters!();
}

impl fmt::Debug for EventHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventHandler")
            .field("id", &self.id)
            .field("selector", &self.selector)
            .finish_non_exhaustive()
    }
}

/// Everything a handler may ask for, given to it when it is called (Kopf's kwargs).
#[derive(Clone)]
pub struct Invocation {
    pub(crate) body: Arc<Value>,
    pub(crate) resource: Resource,
    pub(crate) reason: Option<Reason>,
    pub(crate) event_type: Option<String>,
    pub(crate) diff: Diff,
    pub(crate) old: Option<Value>,
    pub(crate) new: Option<Value>,
    pub(crate) retry: u32,
    pub(crate) started: time::OffsetDateTime,
    pub(crate) param: Option<Value>,
    pub(crate) patch: Arc<Mutex<Patch>>,
    pub(crate) client: kube::Client,
    /// The invocation's node of the cancellation tree: its token is `stopped`.
    pub(crate) node: Tasks,
    pub(crate) logger: Logger,
    pub(crate) events: Events,
    pub(crate) memo: Memo,
    /// The operator's indexes (and, for index functions, where their entries go).
    pub(crate) indexes: crate::engines::indexing::Indexes,
    /// Sub-handlers registered by this call (change handlers).
    pub(crate) subhandlers: crate::actions::subhandlers::SubHandlers,
}

impl Invocation {
    /// The whole object.
    pub fn body(&self) -> &Value {
        &self.body
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
            crate::PermanentError::new(format!(
                "spec does not match {}: {error}",
                std::any::type_name::<T>()
            ))
            .into()
        })
    }

    /// The whole object deserialized into a typed resource (e.g. a `#[derive(CustomResource)]`
    /// type); a mismatch is a [`PermanentError`](crate::PermanentError).
    pub fn body_as<K: serde::de::DeserializeOwned>(&self) -> Result<K> {
        K::deserialize(&*self.body).map_err(|error| {
            crate::PermanentError::new(format!(
                "the object does not match {}: {error}",
                std::any::type_name::<K>()
            ))
            .into()
        })
    }

    /// `metadata`.
    pub fn meta(&self) -> &Value {
        &self.body["metadata"]
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

    /// For event handlers: `ADDED`, `MODIFIED`, `DELETED`, or `None` for the initial listing.
    pub fn event_type(&self) -> Option<&str> {
        self.event_type.as_deref()
    }

    /// What changed since the object was last handled (narrowed to the handler's field).
    pub fn diff(&self) -> &Diff {
        &self.diff
    }

    /// The old essence (or field value); `None` on creation.
    pub fn old(&self) -> Option<&Value> {
        self.old.as_ref()
    }

    /// The new essence (or field value).
    #[allow(
        clippy::new_ret_no_self,
        reason = "Kopf's handlers receive the new state as `new`"
    )]
    pub fn new(&self) -> Option<&Value> {
        self.new.as_ref()
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
        self.patch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A client for API calls of the handler's own.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Cancelled when the handler should stop: the operator is exiting, or its timeout passed
    /// ([`stop_reason`](Self::stop_reason) tells which). An async handler can `.await`
    /// `stopped().cancelled()`; a [sync](crate::blocking) one can poll
    /// `stopped().is_cancelled()`.
    pub fn stopped(&self) -> &CancellationToken {
        self.node.token()
    }

    /// Why [`stopped`](Self::stopped) was cancelled; `None` while it is not.
    ///
    /// ```
    /// # async fn handler(invocation: kopf::Invocation) -> kopf::HandlerResult {
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
    /// [`PostingSettings::loggers`](crate::PostingSettings::loggers) is on. Log with
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
    /// # fn handler(invocation: kopf::Invocation) -> kopf::HandlerResult {
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
    /// all have. See [`SubHandlers`](crate::SubHandlers).
    pub fn subhandlers(&self) -> &crate::actions::subhandlers::SubHandlers {
        &self.subhandlers
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
