//! The connections that one server keeps open, at most so many: a connection beyond the cap
//! takes the place of the one that has waited longest for a request (a slow or idle client),
//! or is refused when every connection is busy answering one. So the accept loop never waits
//! for room, the server's file descriptors stay bounded, and a client that sends its request
//! at once is served however many slow ones there are.
//!
//! Invariants:
//! 1. At most `max` slots are held at any time: a slot is made only under the lock, after
//!    one has been taken away (its connection told to close) when there was no room.
//! 2. Only a slot waiting for a request (its handshake, its headers, an idle keep-alive) is
//!    ever taken away; a busy one keeps its place until its request is answered.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::helpers::sync::lock;

/// The slots of one server's connections.
#[derive(Debug)]
pub(crate) struct Slots {
    /// The server, for logs.
    name: &'static str,
    max: usize,
    open: Mutex<Open>,
    /// Warned that the cap was reached (until there is room again).
    crowded: AtomicBool,
}

#[derive(Debug, Default)]
struct Open {
    next: u64,
    slots: BTreeMap<u64, Held>,
}

#[derive(Debug)]
struct Held {
    /// Since when it waits for a request; `None` while busy with one.
    waiting_since: Option<Instant>,
    /// Cancelled when another connection takes its place.
    taken: CancellationToken,
}

/// One connection's place; given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    slots: Arc<Slots>,
    id: u64,
    taken: CancellationToken,
}

/// A slot busy with a request until this is dropped; then it waits for the next one.
#[derive(Debug)]
pub(crate) struct Busy {
    slots: Arc<Slots>,
    id: u64,
}

impl Slots {
    /// At most `max` (at least one) connections for the server `name`.
    pub(crate) fn new(name: &'static str, max: usize) -> Arc<Slots> {
        Arc::new(Slots {
            name,
            max: max.max(1),
            open: Mutex::default(),
            crowded: AtomicBool::new(false),
        })
    }

    /// A slot for a new connection, waiting for its request: made room for by taking the
    /// place of the connection that has waited longest; `None` when every one is busy.
    pub(crate) fn admit(self: &Arc<Self>) -> Option<Slot> {
        let mut open = lock(&self.open);
        if open.slots.len() >= self.max {
            if !self.crowded.swap(true, Ordering::Relaxed) {
                tracing::warn!(target: "kopf::serving", "{} has {} connections open, its most (settings.serving.max_connections): each new one takes the place of the one that waited longest for a request", self.name, self.max);
            }
            let longest = open
                .slots
                .iter()
                .filter_map(|(id, held)| Some((held.waiting_since?, *id)))
                .min();
            let (_, id) = longest?;
            if let Some(held) = open.slots.remove(&id) {
                held.taken.cancel();
            }
        }
        let id = open.next;
        open.next += 1;
        let taken = CancellationToken::new();
        open.slots.insert(
            id,
            Held {
                waiting_since: Some(Instant::now()),
                taken: taken.clone(),
            },
        );
        Some(Slot {
            slots: self.clone(),
            id,
            taken,
        })
    }

    fn wait(&self, id: u64, waiting: bool) {
        if let Some(held) = lock(&self.open).slots.get_mut(&id) {
            held.waiting_since = waiting.then(Instant::now);
        }
    }
}

impl Slot {
    /// Cancelled when another connection took this one's place: it closes at once.
    pub(crate) fn taken(&self) -> &CancellationToken {
        &self.taken
    }

    /// Whether it waits for a request (its handshake, its head, or the next one).
    pub(crate) fn is_waiting(&self) -> bool {
        lock(&self.slots.open)
            .slots
            .get(&self.id)
            .is_none_or(|held| held.waiting_since.is_some())
    }

    /// Marks the slot busy with a request until the guard is dropped: meanwhile, it is not
    /// taken away.
    pub(crate) fn busy(&self) -> Busy {
        self.slots.wait(self.id, false);
        Busy {
            slots: self.slots.clone(),
            id: self.id,
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.slots.wait(self.id, true);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = lock(&self.slots.open);
        open.slots.remove(&self.id);
        if open.slots.len() < self.slots.max {
            self.slots.crowded.store(false, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beyond_the_cap_the_longest_waiting_makes_room_and_busy_ones_keep_theirs() {
        let slots = Slots::new("the test server", 2);
        let first = slots.admit().unwrap();
        let second = slots.admit().unwrap();
        let third = slots.admit().expect("room made");
        assert!(first.taken().is_cancelled(), "the longest waiting");
        assert!(!second.taken().is_cancelled());
        let busy = (second.busy(), third.busy());
        assert!(slots.admit().is_none(), "every one is busy: refused");
        drop(busy.0);
        let fourth = slots.admit().expect("room made");
        assert!(second.taken().is_cancelled(), "waiting again, so taken");
        assert!(!third.taken().is_cancelled(), "still busy");
        drop((first, second));
        assert_eq!(lock(&slots.open).slots.len(), 2, "{fourth:?}");
        drop((third, fourth, busy.1));
        assert!(lock(&slots.open).slots.is_empty());
        assert!(slots.admit().is_some());
    }
}
