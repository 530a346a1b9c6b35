//! An object's mailbox: the events on their way to its worker (merged into the newest when
//! only the newest state matters), the mailbox's rest once its worker has ended with nothing
//! to do, and what each event takes of the budget of objects in flight. The queue's invariant
//! 1 is kept here: a mailbox rests, and leaves the map of mailboxes, only when it is empty.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use foldhash::HashMap;
use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio::time::Instant;

use crate::clients::watching::Event;
use crate::helpers::freeing::FreedApart;
use crate::helpers::sync::lock;

/// The mailboxes by uid (freed apart: one may rest for each object).
pub(super) type Workers = Arc<Mutex<FreedApart<HashMap<String, Arc<Mailbox>>>>>;

/// The events of one object on their way to its worker. Events are put in only under the
/// lock of the map of workers, so a worker that finds its mailbox empty under that lock may
/// leave (invariant 1). Small on purpose: a mailbox stays for the idle timeout after its last
/// event, so a burst of many objects has a mailbox each.
#[derive(Debug, Default)]
pub(super) struct Mailbox {
    inbox: Mutex<Inbox>,
    pub(super) arrived: Notify,
}

#[derive(Debug, Default)]
struct Inbox {
    events: Vec<Event>,
    /// The versions of the states merged away into the events waiting (the newest
    /// [`PASSED_KEPT`] of them): they came on the watch before the newest.
    passed: Vec<String>,
    /// Its worker has ended (stopped, or panicked): nothing more is put in. Under the same
    /// lock as the events, so that an event is either counted as left at the end or refused.
    closed: bool,
    /// No worker runs: the last one found nothing to do and ended.
    resting: Option<Resting>,
}

/// A mailbox whose worker ended with nothing to do.
#[derive(Debug)]
struct Resting {
    since: Instant,
    /// The worker limit's permit, kept until the mailbox is forgotten, as a worker that
    /// waits for its idle timeout would keep it.
    permit: Option<OwnedSemaphorePermit>,
}

/// Who takes an event put in a mailbox.
#[derive(Debug)]
pub(super) enum Taker {
    /// The running worker.
    Running,
    /// Nobody yet: the mailbox rested; a new worker takes it, with the permit it kept.
    Resting(Option<OwnedSemaphorePermit>),
}

/// What an event takes of the budget of objects in flight: a state of the object, but for
/// a vanished object's, which carries only its identity.
pub(super) fn weight(event: &Event) -> usize {
    match event {
        Event::Vanished(_) | Event::ListingDone => 0,
        Event::Listed(_) | Event::Changed(..) => 1,
    }
}

pub(super) fn weight_of(events: &[Event]) -> usize {
    events.iter().map(weight).sum()
}

/// How many versions merged away a mailbox keeps for its worker, the newest: merging keeps a
/// mailbox small however many events wait, and so must this. A write of the worker's own
/// comes back while the worker runs and takes the events as they come, so it is among the
/// newest; an older one missed is read from the server past the consistency timeout.
const PASSED_KEPT: usize = 16;

/// The version of the object's state that an event brings, if it brings one.
fn version_of(event: &Event) -> Option<String> {
    match event {
        Event::Listed(object) | Event::Changed(_, object) => object["metadata"]["resourceVersion"]
            .as_str()
            .map(String::from),
        Event::Vanished(_) | Event::ListingDone => None,
    }
}

/// The one event that stands for `older` followed by `newer` when only the newest state
/// matters: the newer object, with what the older one told of the object's first sight (from
/// a listing or a watch; as an object's first sight decides whether resume handlers apply).
/// A deletion is final: nothing is merged into it. `Err` gives `newer` back, unmerged.
///
/// The states of the events merged away are never observed, but they came: their versions go
/// to the worker with the batch they were merged into ([`Batch::passed`]), as one of them may
/// be the version of the object's own write that its worker awaits (Kopf's consistency rule).
fn merged(older: &Event, newer: Event) -> Result<Event, Event> {
    match (older, newer) {
        (Event::Changed("DELETED", _) | Event::Vanished(_) | Event::ListingDone, newer) => {
            Err(newer)
        }
        (_, newer @ (Event::Changed("DELETED", _) | Event::Vanished(_))) => Ok(newer),
        (Event::Listed(_), Event::Listed(object) | Event::Changed(_, object)) => {
            Ok(Event::Listed(object))
        }
        (Event::Changed(..), Event::Listed(object)) => Ok(Event::Changed("MODIFIED", object)),
        (Event::Changed(..), newer @ Event::Changed(..)) => Ok(newer),
        (_, newer) => Err(newer),
    }
}

/// The events a worker takes from its mailbox at once, in order.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub(crate) events: Vec<Event>,
    /// The versions of the states merged away into `events` (never observed, but they came
    /// on the watch, before the newest of `events`).
    pub(crate) passed: Vec<String>,
}

impl Batch {
    pub(crate) fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

/// What putting an event in a mailbox did.
#[derive(Debug)]
pub(super) struct Put {
    pub(super) taker: Taker,
    /// An older event was merged into it: what that one took of the budget, to give back.
    pub(super) merged: Option<Event>,
}

impl Mailbox {
    /// Puts the event in (merged into the last one waiting, if `merge`), unless the worker
    /// has ended (`Err` gives it back).
    pub(super) fn put(&self, event: Event, merge: bool) -> Result<Put, Event> {
        let mut inbox = lock(&self.inbox);
        if inbox.closed {
            return Err(event);
        }
        let mut replaced = None;
        let event = match inbox.events.last() {
            Some(last) if merge => match merged(last, event) {
                Ok(event) => {
                    replaced = inbox.events.pop();
                    if let Some(version) = replaced.as_ref().and_then(version_of) {
                        if inbox.passed.len() == PASSED_KEPT {
                            inbox.passed.remove(0);
                        }
                        inbox.passed.push(version);
                    }
                    event
                }
                Err(event) => event,
            },
            _ => event,
        };
        inbox.events.push(event);
        let taker = match inbox.resting.take() {
            Some(resting) => Taker::Resting(resting.permit),
            None => Taker::Running,
        };
        drop(inbox);
        if let Taker::Running = taker {
            self.arrived.notify_one();
        }
        Ok(Put {
            taker,
            merged: replaced,
        })
    }

    /// Lets the mailbox rest with the worker's permit, unless an event is in it (`false`).
    pub(super) fn rest(&self, permit: &mut Option<OwnedSemaphorePermit>) -> bool {
        let mut inbox = lock(&self.inbox);
        if !inbox.events.is_empty() {
            return false;
        }
        inbox.resting = Some(Resting {
            since: Instant::now(),
            permit: permit.take(),
        });
        true
    }

    /// Whether it has rested (without an event since) for at least `timeout`.
    pub(super) fn rested_for(&self, timeout: Duration, now: Instant) -> bool {
        lock(&self.inbox)
            .resting
            .as_ref()
            .is_some_and(|resting| now.saturating_duration_since(resting.since) >= timeout)
    }

    /// Takes the events waiting, with the versions merged away into them: at once, so that a
    /// version passed on is never seen before the newer state it was merged into.
    pub(super) fn take(&self) -> Batch {
        let mut inbox = lock(&self.inbox);
        Batch {
            events: std::mem::take(&mut inbox.events),
            passed: std::mem::take(&mut inbox.passed),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        lock(&self.inbox).events.is_empty()
    }

    /// Refuses every later event; returns how many were left untaken, and what they took of
    /// the budget.
    pub(super) fn close(&self) -> (usize, usize) {
        let mut inbox = lock(&self.inbox);
        inbox.closed = true;
        (inbox.events.len(), weight_of(&inbox.events))
    }
}
