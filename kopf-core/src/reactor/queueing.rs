//! Per-object workers: the events of one object are handled in order by one worker, created
//! on demand and ended after an idle timeout.
//!
//! A worker with nothing to do (no event, no retry due) ends its task at once and leaves its
//! mailbox *resting*: the object's next event starts its next task, and after the idle timeout
//! the queue's reaper forgets the mailbox (and the worker limit's permit that it kept). So a
//! burst of many objects costs a small mailbox per object while they idle out, not a task.
//!
//! Every event routed takes its part of the operator's budget of objects in flight (its
//! watcher's [`Share`]) until the processing of the state it brought ends; the watcher reads
//! no further while the budget is full. A worker *observes* its object's events in order (its
//! memory, the indexes, the event handlers: [`ObjectProcessor::observe`]), then *processes*
//! its newest state (the cause and its handlers, the write: [`ObjectProcessor::process`]);
//! events that come while it processes are observed as they come, and the newest state is
//! processed again afterwards. So an object whose handler runs long holds one state and the
//! events not observed yet, not every event since; when nothing wants every event (no event
//! handlers, no indexes), the events waiting in a mailbox are merged into the newest.
//!
//! Invariants:
//! 1. At most one worker per object uid runs: the map of mailboxes is the only way to reach
//!    one; a worker rests its mailbox, under the mailbox's lock, only when no event is in it,
//!    and an event put in a resting mailbox starts the next worker; a mailbox leaves the map
//!    (under its lock) only when it is empty, so no event is ever put where nobody takes it.
//! 2. Every raw event reaches the processor's `observe`, in order, unless the processor does
//!    not want every event; only the newest state is processed.
//! 3. A listing forgets nothing: an object the queue knew of (listed or changed, not deleted)
//!    that a completed new listing lacks reaches its worker as [`Event::Vanished`], so it
//!    leaves the indexes and the operator's memory as a deleted one does. The queue keeps
//!    only each known object's identity for this, not the object. After a pause, the queue
//!    that watches again knows what the one before it knew ([`KnownObjects`]), so an object
//!    deleted while paused vanishes too.
//! 4. What an event takes of the budget is given back exactly once: when the processing of
//!    its state ends, when it is merged into a newer event, or when its worker ends without
//!    processing it.
//!
//! The queue knows its processor only as an [`ObjectProcessor`]: what it needs of whatever
//! processes the events it routes.
//!
//! The pieces, one concept each: the queue of one watcher routes the events (`routing`) to
//! the objects' mailboxes (`mailbox`: invariant 1, and the merging), which the objects'
//! workers empty (`worker`: invariants 2 and 4); the rests of the mailboxes are reaped after
//! the idle timeout (`reaper`); the known objects keep what identifies each (`known`:
//! invariant 3). What a processing holds of the budget is a [`Held`] (`held`), and the
//! processor's contract is in `processor`.
//!
//! [`Share`]: crate::aiokits::budget::Share
//! [`Event::Vanished`]: crate::clients::watching::Event::Vanished

mod held;
mod known;
mod mailbox;
mod processor;
mod reaper;
mod routing;
#[cfg(test)]
mod tests;
mod worker;

pub(crate) use self::held::Held;
pub(crate) use self::known::KnownObjects;
pub(crate) use self::processor::{Next, ObjectProcessor, Observed};
pub(crate) use self::routing::Queue;
