//! The newest state of one object that its worker has processed, kept for its daemons and
//! timers: what their attempts start from, what their [`Live`](crate::Live) views read, and
//! when the object's essence last changed (for timers with `idle`).
//!
//! Invariants:
//! 1. One `Newest` per object with daemons or timers, made by its worker and shared with the
//!    invocations of its daemons and timers; objects without them keep none.
//! 2. Its lock is held only to swap or clone an `Arc` or to compare essences, never while
//!    user code or a deserialization runs.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::helpers::sync::lock;
use crate::structs::bodies::Body;

/// The newest state of one object that its worker has seen, and when its essence last
/// changed: what its daemons and timers see of it.
#[derive(Debug)]
pub(crate) struct Newest {
    /// One lock for all: kept for every object with daemons or timers, it stays small.
    state: Mutex<State>,
    /// Woken at each new state, for the views waiting for a change; made by the first view
    /// that waits (a `Notify` inline took 72 bytes more for every object with daemons).
    shown: OnceLock<Box<Notify>>,
}

#[derive(Debug)]
struct State {
    body: Arc<Body>,
    /// When the essence last changed (for timers with `idle`), and the last essence.
    changed: Instant,
    /// Boxed: only objects with idle timers have one.
    essence: Option<Box<Value>>,
}

impl Newest {
    pub(crate) fn new(body: Arc<Body>) -> Newest {
        Newest {
            state: Mutex::new(State {
                body,
                changed: Instant::now(),
                essence: None,
            }),
            shown: OnceLock::new(),
        }
    }

    /// The newest state.
    pub(crate) fn body(&self) -> Arc<Body> {
        lock(&self.state).body.clone()
    }

    /// Shows `body` from now on, and wakes the views waiting for a change. The state it
    /// replaces is dropped after the lock is let go of.
    pub(crate) fn show(&self, body: &Arc<Body>) {
        let previous = {
            let mut state = lock(&self.state);
            if Arc::ptr_eq(&state.body, body) {
                return;
            }
            std::mem::replace(&mut state.body, body.clone())
        };
        drop(previous);
        // A view that waits made it before it read the state: if it read the one replaced,
        // it is found here.
        if let Some(shown) = self.shown.get() {
            shown.notify_waiters();
        }
    }

    /// Remembers the essence of the newest state: when it differs from the last one, the
    /// object is not idle any more. The one it replaces is dropped after the lock is let go of.
    pub(crate) fn essence(&self, essence: Value) {
        let previous = {
            let mut state = lock(&self.state);
            if state
                .essence
                .as_deref()
                .is_some_and(|last| *last != essence)
            {
                state.changed = Instant::now();
            }
            state.essence.replace(Box::new(essence))
        };
        drop(previous);
    }

    /// How long since the essence last changed (or since the first sight).
    pub(crate) fn idle_for(&self) -> Duration {
        lock(&self.state).changed.elapsed()
    }

    /// What wakes the views waiting for a change, made at the first wait: a view registers
    /// with it before it reads the state, so a state shown after that read wakes it.
    pub(crate) fn shown(&self) -> &Notify {
        self.shown.get_or_init(Box::default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_objects_with_daemons_keep_stays_small() {
        // One per object with daemons or timers, for as long as the object is watched.
        let size = std::mem::size_of::<Newest>();
        assert!(size <= 64, "Newest takes {size} bytes");
    }
}
