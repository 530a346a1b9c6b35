//! What an operator of the suite does, as data: both interpreters (`parity-operator` for
//! kopf-rs, `python/parity_operator.py` for Kopf) build the same handlers from one
//! [`OperatorSpec`], given to them as a JSON file (`PARITY_SPEC`).
//!
//! Every handler records each call as one JSON line in the file `PARITY_CALLS`:
//! `{"handler", "name", "reason", "retry", "old", "new", "diff"}` for change handlers,
//! `{"handler", "name", "type"}` for event handlers, `{"handler", "name", "retry", "timer"}`
//! for timers (with `value`, the value of their field at the call, if they have one),
//! `{"handler", "name", "daemon": "started" | "deleted" | "filters" | "exiting"}` for
//! daemons (at the start, and when stopped, with why; a daemon with [`HandlerSpec::poll`] also
//! `{"daemon": "polled", "value"}` for each value it sees), plus `index` for those that read
//! one.
//! Then it fails as its [`HandlerSpec::fail`] says for that attempt, or runs the sub-handlers
//! it executes in place, registers its sub-handlers (and runs them in place, if it
//! [executes the registered ones](HandlerSpec::executes_registered)) and returns
//! `{"retry": n}` (event handlers, daemons and timers return nothing: see
//! `outcome::ALLOWED`'s `no-op-writes`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The handlers of one operator, on `kopfexamples.kopf.dev/v1`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OperatorSpec {
    /// In the order of registration (which is the order of their calls).
    pub handlers: Vec<HandlerSpec>,
    /// Objects that a task started by a startup handler posts Events about, outside of any
    /// handler (Kopf's `kopf.info`/`kopf.event` from a task of one's own): once a change
    /// handler has seen the object (it is given the body that handler saw), an `info` with
    /// the reason `Startup` and an `event` of type `Warning` with the reason `Noticed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_posts: Vec<String>,
}

/// What kind of handler: Kopf's `@kopf.on.<kind>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `on.create`.
    Create,
    /// `on.update`.
    Update,
    /// `on.delete`.
    Delete,
    /// `on.resume`.
    Resume,
    /// `on.field` (with [`HandlerSpec::field`]).
    Field,
    /// `on.event`.
    Event,
    /// `daemon`: records its start, waits until it is stopped, records why.
    Daemon,
    /// `timer` (with [`HandlerSpec::interval`]).
    Timer,
    /// `index`: the object's name under the key `str(value)` of [`HandlerSpec::field`].
    Index,
}

/// One handler, its filters, its options and what it does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandlerSpec {
    /// Its kind.
    pub kind: Kind,
    /// Its id.
    pub id: String,
    /// `labels=`: key → a [`Match`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<(String, Match)>,
    /// `annotations=`: key → a [`Match`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub annotations: Vec<(String, Match)>,
    /// `when=`: a callable that holds when the field (a dotted path) equals the value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<(String, Value)>,
    /// `field=`, a dotted path: a filter of change handlers, event handlers, daemons and
    /// timers; for index functions, the path whose value is the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// `value=` (with `field`; not for index functions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Match>,
    /// `old=`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old: Option<Match>,
    /// `new=`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<Match>,
    /// `optional=True` (delete handlers).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
    /// `deleted=True` (update and field handlers: also while the object is being deleted).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
    /// `errors=`: `temporary` (Kopf's default), `permanent` or `ignored`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<String>,
    /// `retries=`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// `backoff=`, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<f64>,
    /// `timeout=`, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// How each attempt fails, by its retry number; attempts past the list succeed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fail: Vec<Failure>,
    /// Sub-handlers that the handler registers on each call (Kopf's `@kopf.subhandler`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subhandlers: Vec<HandlerSpec>,
    /// The handler starts a task of its own on each call, which posts an Event about the
    /// object after the call (`kopf.info` with the reason `FromTask`), outside of the call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub posts_from_task: bool,
    /// Sub-handlers that the handler runs in place on each call, after its failures and
    /// before it returns (Kopf's `await kopf.execute(fns={id: fn})`, `kopf::execute` in
    /// kopf-rs); their own options are not given (Kopf's `fns=` takes none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub executes: Vec<HandlerSpec>,
    /// The handler runs its [`subhandlers`](Self::subhandlers) in place once it has registered
    /// them, before it returns (Kopf's `await kopf.execute()` without arguments,
    /// `subhandlers.execute()` in kopf-rs), twice: the second runs none.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub executes_registered: bool,
    /// A timer's `interval=`, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<f64>,
    /// A daemon's or timer's `initial_delay=`, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_delay: Option<f64>,
    /// A timer's `idle=`, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<f64>,
    /// For daemons: a dotted path that the daemon reads in its loop from its live body (Kopf's
    /// `body`, a `kopf::Live` in kopf-rs), recording each new value it sees; it sees the
    /// object's changes without a new attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll: Option<String>,
    /// The id of an index that the handler reads: its call records the index's content
    /// (key → the sorted names under it) as `index`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<String>,
    /// The same function registered again, once for each of these (their kinds, ids, filters
    /// and options; their behaviour is this handler's): Kopf's stacked decorators, registered
    /// after this one, as the decorators above the one nearest the function. Change kinds only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stacked: Vec<HandlerSpec>,
}

impl HandlerSpec {
    /// A handler of this kind and id, without filters, options or failures.
    pub fn new(kind: Kind, id: &str) -> HandlerSpec {
        HandlerSpec {
            kind,
            id: id.to_string(),
            labels: Vec::new(),
            annotations: Vec::new(),
            when: None,
            field: None,
            value: None,
            old: None,
            new: None,
            optional: false,
            deleted: false,
            errors: None,
            retries: None,
            backoff: None,
            timeout: None,
            fail: Vec::new(),
            subhandlers: Vec::new(),
            posts_from_task: false,
            executes: Vec::new(),
            executes_registered: false,
            interval: None,
            initial_delay: None,
            idle: None,
            poll: None,
            reads: None,
            stacked: Vec::new(),
        }
    }
}

/// A filter on a label, an annotation or a field's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Match {
    /// Exactly this value.
    Equals(Value),
    /// Present, with any value (`kopf.PRESENT`).
    Present,
    /// Absent (`kopf.ABSENT`).
    Absent,
    /// A callable that holds when the value (`None` if absent) equals this.
    Callable(Value),
}

/// How one attempt of a handler fails.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// `kopf.TemporaryError("failed", delay=<seconds>)`.
    Temporary(f64),
    /// `kopf.PermanentError("failed")`.
    Permanent,
    /// An arbitrary error, `errors=` decides.
    Arbitrary,
    /// Sleeps this long (for `timeout=`), then succeeds.
    Sleep(f64),
}
