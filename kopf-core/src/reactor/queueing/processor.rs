//! What the queue needs of whatever processes the events it routes ([`ObjectProcessor`]), and
//! what a worker learns from it: what observing some events found ([`Observed`]), and what to
//! do after processing ([`Next`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::held::Held;
use crate::aiokits::tasks::Tasks;
use crate::clients::watching::Event;
use crate::structs::resources::Resource;

/// What a worker should do after processing.
#[derive(Debug, Default)]
pub(crate) struct Next {
    /// Process the object again after this delay, even without new events (a retry is due).
    pub(crate) wakeup: Option<Duration>,
    /// The object is gone: the worker may end.
    pub(crate) gone: bool,
}

/// What observing some events of an object found.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    /// The object is gone (deleted, vanished, or let go of): nothing of it is processed.
    pub(crate) gone: bool,
}

/// What processes the events that a queue routes, one object at a time.
pub(crate) trait ObjectProcessor: Send + Sync + 'static {
    /// The resource whose objects it processes (for the metrics).
    fn resource(&self) -> &Resource;

    /// Counts an event as queued, before its worker gets it.
    fn expect(&self, event: &Event);

    /// Whether it wants every event of an object (for event handlers, indexes); if not, the
    /// events waiting for an object's worker are merged into the newest.
    fn wants_every_event(&self) -> bool;

    /// Observes a batch of events of the object `uid`, in order: remembers its newest state,
    /// and runs what every event is for (indexes, event handlers). It may run while the
    /// object's newest state is processed (the events that came meanwhile).
    fn observe<'a>(
        self: Arc<Self>,
        uid: &'a str,
        batch: Vec<Event>,
        held: Held<'a>,
        tasks: &'a Tasks,
    ) -> Pin<Box<dyn Future<Output = Observed> + Send + 'a>>;

    /// An event of the object `uid` was merged into a newer one before its worker took it:
    /// its state is never observed, but it came (its version may be that of a write of the
    /// processor's own, which it awaits).
    fn passed(&self, uid: &str, event: &Event);

    /// Processes the object's newest state observed (again, when a retry is due).
    fn process<'a>(
        self: Arc<Self>,
        uid: &'a str,
        held: Held<'a>,
        tasks: &'a Tasks,
    ) -> Pin<Box<dyn Future<Output = Next> + Send + 'a>>;

    /// Lets go of the object's newest state: nothing is due for it.
    fn release(&self, uid: &str);

    /// Forgets the object: it is gone, and nothing of it runs any more.
    fn forget(&self, uid: &str);
}
