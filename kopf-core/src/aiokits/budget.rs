//! The operator's budget of objects in flight: the states of objects (watch events, listed
//! objects) that its watchers have read and that it has not finished with yet. Past the
//! budget, the watchers read no further: what they have not read waits in the API server's
//! streams (backpressure), so a burst of a hundred thousand objects costs the operator what
//! the budget allows, not what the burst holds.
//!
//! Each watcher has its [`Share`] of the one budget: it waits for [`Share::room`] before it
//! reads, adds what it read with [`Share::take`], and whoever finishes with a state gives it
//! back ([`Share::give`]).
//!
//! Invariants:
//! 1. Only watchers add, each only after `room` said there is room for what it reads next
//!    (one event, or a listing's page of at most the limit): with one watcher, the budget never
//!    holds more than its limit. With several, their checks may pass at once, so it may exceed
//!    the limit by what the others read meanwhile (an event, or a page, each).
//! 2. A watcher whose own share holds nothing may always read: the objects of one resource
//!    (waiting, say, for objects of another to be handled) never stop another resource's watch.
//! 3. The peak (the most held at once) only grows; it is what tests and the metrics read.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::aiokits::metrics::Metrics;

/// The budget of states in flight that all of an operator's watchers share.
#[derive(Debug)]
pub(crate) struct Budget {
    limit: usize,
    held: AtomicUsize,
    peak: AtomicUsize,
    /// Wakes the watchers waiting for room whenever states are given back.
    freed: Notify,
    /// `kopf_in_flight` and `kopf_in_flight_peak`, when the operator serves metrics.
    gauges: Option<(Gauge, Gauge)>,
}

impl Budget {
    /// A budget of `limit` states (at least one), counted in the metrics if given.
    pub(crate) fn new(limit: usize, metrics: Option<&Metrics>) -> Arc<Budget> {
        Arc::new(Budget {
            limit: limit.max(1),
            held: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            freed: Notify::new(),
            gauges: metrics.map(Metrics::in_flight),
        })
    }

    /// A new watcher's share.
    pub(crate) fn share(self: &Arc<Self>) -> Arc<Share> {
        Arc::new(Share {
            budget: self.clone(),
            held: AtomicUsize::new(0),
        })
    }

    /// The states in flight now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    /// The most states in flight at once so far.
    #[cfg(test)]
    pub(crate) fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    fn counted(&self, held: usize) {
        let peak = self.peak.fetch_max(held, Ordering::SeqCst).max(held);
        if let Some((in_flight, most)) = &self.gauges {
            in_flight.set(held as i64);
            most.set(peak as i64);
        }
    }
}

/// One watcher's share of the budget: what the states it read hold of it.
#[derive(Debug)]
pub(crate) struct Share {
    budget: Arc<Budget>,
    held: AtomicUsize,
}

impl Share {
    /// The budget's limit: a listing's pages are at most this long.
    pub(crate) fn limit(&self) -> usize {
        self.budget.limit
    }

    /// Counts `n` states read.
    pub(crate) fn take(&self, n: usize) {
        if n == 0 {
            return;
        }
        self.held.fetch_add(n, Ordering::SeqCst);
        let held = self.budget.held.fetch_add(n, Ordering::SeqCst) + n;
        self.budget.counted(held);
    }

    /// Gives back `n` states done with.
    pub(crate) fn give(&self, n: usize) {
        if n == 0 {
            return;
        }
        self.held.fetch_sub(n, Ordering::SeqCst);
        let held = self.budget.held.fetch_sub(n, Ordering::SeqCst) - n;
        self.budget.counted(held);
        self.budget.freed.notify_waiters();
    }

    /// Whether `n` more states fit (or this share holds nothing: invariant 2).
    fn fits(&self, n: usize) -> bool {
        self.held.load(Ordering::SeqCst) == 0
            || self.budget.held.load(Ordering::SeqCst) + n <= self.budget.limit
    }

    /// Waits until `n` more states fit in the budget; `false` if the token is cancelled first.
    ///
    /// # Cancellation safety
    ///
    /// Cancellation safe: it takes nothing; the caller takes what it reads.
    pub(crate) async fn room(&self, n: usize, token: &CancellationToken) -> bool {
        loop {
            let freed = self.budget.freed.notified();
            let mut freed = std::pin::pin!(freed);
            // Registered before looking, so that a give between the look and the wait wakes it.
            freed.as_mut().enable();
            if self.fits(n) {
                return true;
            }
            tokio::select! {
                _ = freed => {}
                _ = token.cancelled() => return false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_watcher_waits_for_room_until_states_are_given_back() {
        let budget = Budget::new(3, None);
        let (one, other) = (budget.share(), budget.share());
        let token = CancellationToken::new();
        assert!(one.room(3, &token).await);
        one.take(3);
        other.take(1);
        assert_eq!(
            (budget.held(), budget.peak()),
            (4, 4),
            "another watcher's own"
        );
        let waiting = one.room(1, &token);
        tokio::pin!(waiting);
        assert!(futures::poll!(waiting.as_mut()).is_pending(), "full");
        other.give(1);
        assert!(futures::poll!(waiting.as_mut()).is_pending(), "still full");
        one.give(1);
        assert!(waiting.await, "room for one");
        assert_eq!((budget.held(), budget.peak()), (2, 4));
    }

    /// One resource's objects that hold the whole budget do not stop another's watcher.
    #[tokio::test]
    async fn a_watcher_that_holds_nothing_may_always_read() {
        let budget = Budget::new(2, None);
        let (busy, idle) = (budget.share(), budget.share());
        busy.take(2);
        let token = CancellationToken::new();
        assert!(idle.room(1, &token).await);
        idle.take(1);
        let waiting = idle.room(1, &token);
        tokio::pin!(waiting);
        assert!(futures::poll!(waiting.as_mut()).is_pending());
        token.cancel();
        assert!(!waiting.await, "cancelled");
    }
}
