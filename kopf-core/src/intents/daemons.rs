//! Daemons and timers: one long-running task, or one periodic task, per (object, handler),
//! alive while the object exists and passes the handler's filters (Kopf's spawning handlers).
//!
//! ```
//! use std::time::Duration;
//! use kopf::registry::{DaemonHandler, Registry, TimerHandler};
//! use kopf::resources::Selector;
//!
//! let examples = Selector::new("kopf.dev", "v1", "kopfexamples");
//! let registry = Registry::new()
//!     .with(DaemonHandler::new(examples.clone(), "monitor", |invocation| async move {
//!         while !invocation.stopped().is_cancelled() {
//!             // ... watch something external for this object ...
//!             tokio::select! {
//!                 _ = invocation.stopped().cancelled() => {}
//!                 _ = tokio::time::sleep(Duration::from_secs(10)) => {}
//!             }
//!         }
//!         Ok(None)
//!     }).cancellation_backoff(Duration::from_secs(5)))
//!     .with(TimerHandler::new(examples, "check", Duration::from_secs(60), |invocation| async move {
//!         Ok(Some(serde_json::json!({"checked": invocation.name()})))
//!     }).idle(Duration::from_secs(30)));
//! ```

use std::fmt;
use std::future::Future;
use std::time::Duration;

use crate::actions::invocation::{
    HandlerFn, HandlerResult, Invocation, Options, boxed, field_setters, option_setters,
};
use crate::structs::resources::Selector;

/// A daemon (Kopf's `@kopf.daemon`): one long-running task per object, started when the
/// object is first seen (after the operator's finalizer is on it) and stopped when the object
/// is deleted, stops passing the filters, or the operator exits.
///
/// The function gets the usual resource arguments, plus
/// [`stopped`](crate::Invocation::stopped): a token cancelled when the daemon should return,
/// with its [`stop_reason`](crate::Invocation::stop_reason). A daemon that returns (or fails
/// permanently) is not started again for that object; a temporary error restarts it after the
/// error's delay (an arbitrary error: after `backoff`). Its result goes to
/// `status.<handler-id>` and its `patch` to the object, as for change handlers.
///
/// Stopping: `stopped` is cancelled; the daemon has `cancellation_backoff` (default: a brief
/// moment) to return on its own; then its future is dropped at its next `.await`. A
/// [sync daemon](crate::registry::blocking), which cannot be dropped, gets `cancellation_timeout`
/// more (default: no limit) and is then abandoned with a warning. Deletion waits for all of it:
/// the finalizer stays until the daemon ended or was abandoned.
#[derive(Clone)]
pub struct DaemonHandler {
    pub(crate) id: String,
    pub(crate) selector: Selector,
    pub(crate) function: HandlerFn,
    pub(crate) options: Options,
    pub(crate) initial_delay: Option<Duration>,
    pub(crate) cancellation_backoff: Option<Duration>,
    pub(crate) cancellation_timeout: Option<Duration>,
}

impl DaemonHandler {
    /// A daemon for the objects of the selected resource.
    pub fn new<F, Fut>(selector: Selector, id: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        DaemonHandler {
            id: id.into(),
            selector,
            function: boxed(function),
            options: Options::default(),
            initial_delay: None,
            cancellation_backoff: None,
            cancellation_timeout: None,
        }
    }

    /// Wait this long after the object is first seen before starting the daemon.
    pub fn initial_delay(mut self, delay: Duration) -> Self {
        self.initial_delay = Some(delay);
        self
    }

    /// After `stopped` is cancelled, give the daemon this long to return on its own before its
    /// future is dropped (default: a brief moment). Set it when the daemon cleans up after
    /// `stopped` with `.await`s of its own.
    pub fn cancellation_backoff(mut self, backoff: Duration) -> Self {
        self.cancellation_backoff = Some(backoff);
        self
    }

    /// For a sync daemon, whose thread cannot be interrupted: how long to wait for it after the
    /// backoff before abandoning it with a warning (and releasing the object's finalizer).
    /// Default: no limit, so a deleted object waits for its sync daemons to return.
    pub fn cancellation_timeout(mut self, timeout: Duration) -> Self {
        self.cancellation_timeout = Some(timeout);
        self
    }

    /// The handler's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    option_setters!();
    field_setters!(suffixed);
}

impl fmt::Debug for DaemonHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DaemonHandler")
            .field("id", &self.id)
            .field("selector", &self.selector)
            .finish_non_exhaustive()
    }
}

/// A timer (Kopf's `@kopf.timer`): called every `interval` for each object, never two runs at
/// once for one object.
///
/// After a run that succeeded or failed for good, the next one comes `interval` later (with
/// [`sharp`](Self::sharp): on the next tick of a fixed grid); after a temporary error, after
/// the error's delay. With [`idle`](Self::idle), a run waits until the object has not changed
/// (its essence: spec, labels, annotations) for that long. Timers get
/// [`stopped`](crate::Invocation::stopped) too, and stop as daemons do.
#[derive(Clone)]
pub struct TimerHandler {
    pub(crate) id: String,
    pub(crate) selector: Selector,
    pub(crate) function: HandlerFn,
    pub(crate) options: Options,
    pub(crate) initial_delay: Option<Duration>,
    pub(crate) interval: Duration,
    pub(crate) idle: Option<Duration>,
    pub(crate) sharp: bool,
}

impl TimerHandler {
    /// A timer for the objects of the selected resource, called every `interval`.
    pub fn new<F, Fut>(selector: Selector, id: &str, interval: Duration, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        TimerHandler {
            id: id.into(),
            selector,
            function: boxed(function),
            options: Options::default(),
            initial_delay: None,
            interval,
            idle: None,
            sharp: false,
        }
    }

    /// Wait this long after the object is first seen before the first run.
    pub fn initial_delay(mut self, delay: Duration) -> Self {
        self.initial_delay = Some(delay);
        self
    }

    /// Run only once the object has not changed for this long.
    pub fn idle(mut self, idle: Duration) -> Self {
        self.idle = Some(idle);
        self
    }

    /// Run on a fixed grid of `interval`s from the timer's start, however long runs take.
    pub fn sharp(mut self) -> Self {
        self.sharp = true;
        self
    }

    /// The handler's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    option_setters!();
    field_setters!(suffixed);
}

impl fmt::Debug for TimerHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerHandler")
            .field("id", &self.id)
            .field("selector", &self.selector)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

/// A daemon or a timer, as the registry keeps them.
#[derive(Debug, Clone)]
pub(crate) enum Background {
    Daemon(DaemonHandler),
    Timer(TimerHandler),
}

impl Background {
    pub(crate) fn id(&self) -> &str {
        match self {
            Background::Daemon(d) => &d.id,
            Background::Timer(t) => &t.id,
        }
    }

    pub(crate) fn selector(&self) -> &Selector {
        match self {
            Background::Daemon(d) => &d.selector,
            Background::Timer(t) => &t.selector,
        }
    }

    pub(crate) fn options(&self) -> &Options {
        match self {
            Background::Daemon(d) => &d.options,
            Background::Timer(t) => &t.options,
        }
    }

    pub(crate) fn function(&self) -> &HandlerFn {
        match self {
            Background::Daemon(d) => &d.function,
            Background::Timer(t) => &t.function,
        }
    }

    pub(crate) fn initial_delay(&self) -> Option<Duration> {
        match self {
            Background::Daemon(d) => d.initial_delay,
            Background::Timer(t) => t.initial_delay,
        }
    }

    /// Whether this is a timer waiting for the object to be idle.
    pub(crate) fn waits_for_idle(&self) -> bool {
        matches!(self, Background::Timer(TimerHandler { idle: Some(_), .. }))
    }

    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Background::Daemon(_) => "Daemon",
            Background::Timer(_) => "Timer",
        }
    }

    pub(crate) fn cancellation(&self) -> (Option<Duration>, Option<Duration>) {
        match self {
            Background::Daemon(d) => (d.cancellation_backoff, d.cancellation_timeout),
            Background::Timer(_) => (None, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::structs::filters::MetaFilter;

    #[test]
    fn filters_are_set_on_daemons_and_timers_as_on_other_handlers() {
        let selector = Selector::new("kopf.dev", "v1", "kopfexamples");
        let daemon = DaemonHandler::new(selector.clone(), "d", |_| async { Ok(None) })
            .label("app", MetaFilter::Present)
            .cancellation_backoff(Duration::from_secs(1));
        assert!(daemon.options.labels.contains_key("app"));
        let timer = TimerHandler::new(selector, "t", Duration::from_secs(5), |_| async {
            Ok(None)
        })
        .idle(Duration::from_secs(2))
        .sharp();
        assert!(Background::Timer(timer).waits_for_idle());
    }
}
