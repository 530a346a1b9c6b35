//! Whether the operator may serve and act now: the [`Pause`] that peering and leadership
//! toggle, and the [`Fence`] of a Lease leader's term.
//!
//! A pause is obeyed by the observer: while paused, nothing is watched and no daemon runs.
//! A fence is obeyed at every step that acts on objects (a handler about to start, each
//! request of a write about to be sent, which must be answered by the term's end): a Lease
//! leader may act only within its term, which ends on its own monotonic clock a renew
//! deadline after its last successful renewal, whether or not its elector has run since. So
//! a leader that was stopped (SIGSTOP, a frozen VM) past its term acts on nothing when it
//! continues, even on the events that waited for it meanwhile.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// Whether the operator is paused in favour of a peer or of a leader: what the observer
/// obeys. Paused while any of the toggles it follows says so, or any of its fences is
/// closed.
#[derive(Debug, Clone)]
pub(crate) struct Pause {
    each: Vec<watch::Receiver<bool>>,
    fences: Vec<Fence>,
    /// The joined state that `changed` returned last.
    last: bool,
}

impl Pause {
    /// Never paused (standalone).
    pub(crate) fn never() -> Pause {
        Pause::following(watch::Sender::new(false).subscribe())
    }

    /// Paused while this toggle says so.
    pub(crate) fn following(toggle: watch::Receiver<bool>) -> Pause {
        let last = *toggle.borrow();
        Pause {
            each: vec![toggle],
            fences: Vec::new(),
            last,
        }
    }

    /// Paused also while this fence is closed.
    pub(crate) fn fenced(mut self, fence: Fence) -> Pause {
        self.fences.push(fence);
        self.last = self.is_paused();
        self
    }

    /// Paused while either this or the other says so.
    pub(crate) fn or(mut self, other: Pause) -> Pause {
        self.each.extend(other.each);
        self.fences.extend(other.fences);
        self.last = self.is_paused();
        self
    }

    /// Whether the operator is paused now.
    pub(crate) fn is_paused(&self) -> bool {
        self.each.iter().any(|toggle| *toggle.borrow()) || !self.fences.iter().all(Fence::is_open)
    }

    /// When the pause begins, if it is not paused now: the earliest end of its fences' terms
    /// (`Ok(None)`: no term ends it, only a toggle). What is written while not paused must be
    /// answered by then.
    pub(crate) fn closes_at(&self) -> Result<Option<Instant>, Closed> {
        if self.each.iter().any(|toggle| *toggle.borrow()) {
            return Err(Closed);
        }
        let mut closes = None;
        for fence in &self.fences {
            if let Some(ends) = fence.closes_at()? {
                closes = Some(closes.map_or(ends, |earliest: Instant| earliest.min(ends)));
            }
        }
        Ok(closes)
    }

    /// Waits for the next change of the joined state and returns it; never returns if there
    /// will be none.
    ///
    /// # Cancellation safety
    ///
    /// Safe: a change not returned is returned by the next call.
    pub(crate) async fn changed(&mut self) -> bool {
        loop {
            let now = self.is_paused();
            if now != self.last {
                self.last = now;
                return now;
            }
            let toggles = self.each.iter_mut().map(|toggle| {
                Box::pin(async move {
                    if toggle.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }) as futures::future::BoxFuture<'_, ()>
            });
            let fences = self
                .fences
                .iter_mut()
                .map(|fence| Box::pin(fence.changed()) as futures::future::BoxFuture<'_, ()>);
            let changes: Vec<_> = toggles.chain(fences).collect();
            if changes.is_empty() {
                std::future::pending::<()>().await;
            }
            futures::future::select_all(changes).await;
            for toggle in &mut self.each {
                toggle.borrow_and_update();
            }
        }
    }
}

/// Whether this operator may act on objects now: always without Leases; with them, only
/// within the current term of each (a leader's, an owner of shards').
#[derive(Debug, Clone, Default)]
pub(crate) struct Fence {
    /// When each current term ends; `None` while not holding that Lease. None: always open.
    terms: Vec<watch::Receiver<Option<Instant>>>,
}

impl Fence {
    /// Always open: no Lease to keep.
    pub(crate) fn open() -> Fence {
        Fence::default()
    }

    /// Open until the term this sender publishes ends.
    pub(crate) fn following(term: watch::Receiver<Option<Instant>>) -> Fence {
        Fence { terms: vec![term] }
    }

    /// Open while both this and the other are.
    pub(crate) fn and(mut self, other: Fence) -> Fence {
        self.terms.extend(other.terms);
        self
    }

    /// Whether the operator may act now: every term goes on on the monotonic clock.
    pub(crate) fn is_open(&self) -> bool {
        self.terms
            .iter()
            .all(|term| term.borrow().is_some_and(|ends| Instant::now() < ends))
    }

    /// When the fence closes, if it is open now: the earliest end of the current terms
    /// (`Ok(None)`: it never closes, without Leases). What the operator sends while it may
    /// act must be answered by then: a request answered later may land outside the term.
    pub(crate) fn closes_at(&self) -> Result<Option<Instant>, Closed> {
        let now = Instant::now();
        let mut closes = None;
        for term in &self.terms {
            match *term.borrow() {
                Some(ends) if now < ends => {
                    closes = Some(closes.map_or(ends, |earliest: Instant| earliest.min(ends)));
                }
                _ => return Err(Closed),
            }
        }
        Ok(closes)
    }

    /// Waits until the fence may have opened or closed: a new term, or the end of one. Never
    /// returns if neither can happen.
    async fn changed(&mut self) {
        if self.terms.is_empty() {
            return std::future::pending().await;
        }
        let each = self
            .terms
            .iter_mut()
            .map(|term| Box::pin(term_changed(term)) as futures::future::BoxFuture<'_, ()>);
        futures::future::select_all(each).await;
    }
}

/// A fence is closed: the term of a Lease has ended, or none has begun.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Closed;

/// Waits until a new term is published, or this one ends.
async fn term_changed(term: &mut watch::Receiver<Option<Instant>>) {
    let ends = *term.borrow_and_update();
    let expiry = async {
        match ends {
            Some(ends) if Instant::now() < ends => {
                // Past the end by a hair, so that `is_open` sees it ended.
                tokio::time::sleep_until(ends + Duration::from_millis(1)).await;
            }
            _ => std::future::pending().await,
        }
    };
    tokio::pin!(expiry);
    tokio::select! {
        changed = term.changed() => {
            if changed.is_err() {
                // The Lease's keeper is gone: its last term ends as it would have.
                (&mut expiry).await;
            }
        }
        _ = &mut expiry => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_fence_closes_at_the_end_of_its_term_without_its_elector() {
        let term = watch::Sender::new(Some(Instant::now() + Duration::from_millis(200)));
        let fence = Fence::following(term.subscribe());
        let mut pause = Pause::never().fenced(fence.clone());
        assert!(fence.is_open());
        assert!(!pause.is_paused());

        let started = Instant::now();
        assert!(pause.changed().await, "paused at the end of the term");
        assert!(started.elapsed() >= Duration::from_millis(150));
        assert!(!fence.is_open());

        term.send_replace(Some(Instant::now() + Duration::from_secs(60)));
        assert!(!pause.changed().await, "resumed by a new term");
        assert!(fence.is_open());
        term.send_replace(None);
        assert!(pause.changed().await, "paused when not leading");
        assert!(!fence.is_open());
    }

    #[tokio::test]
    async fn a_pause_follows_every_toggle_and_fence() {
        let toggle = watch::Sender::new(false);
        let term = watch::Sender::new(None);
        let mut pause =
            Pause::following(toggle.subscribe()).fenced(Fence::following(term.subscribe()));
        assert!(pause.is_paused(), "not leading");
        term.send_replace(Some(Instant::now() + Duration::from_secs(60)));
        assert!(!pause.changed().await);
        toggle.send_replace(true);
        assert!(pause.changed().await);
        assert!(Fence::open().is_open());
    }

    #[tokio::test]
    async fn a_pause_closes_at_the_earliest_term_and_is_closed_while_a_toggle_pauses() {
        let toggle = watch::Sender::new(false);
        let (early, late) = (
            Instant::now() + Duration::from_secs(30),
            Instant::now() + Duration::from_secs(60),
        );
        let (first, second) = (
            watch::Sender::new(Some(late)),
            watch::Sender::new(Some(early)),
        );
        let pause = Pause::following(toggle.subscribe())
            .fenced(Fence::following(first.subscribe()))
            .or(Pause::never().fenced(Fence::following(second.subscribe())));
        assert_eq!(pause.closes_at(), Ok(Some(early)));
        assert_eq!(Pause::never().closes_at(), Ok(None), "no term ends it");
        toggle.send_replace(true);
        assert_eq!(pause.closes_at(), Err(Closed), "paused by a toggle");
        toggle.send_replace(false);
        second.send_replace(None);
        assert_eq!(pause.closes_at(), Err(Closed), "a term ended");
    }

    #[tokio::test]
    async fn a_joined_fence_is_open_only_within_every_term() {
        let (leader, owner) = (watch::Sender::new(None), watch::Sender::new(None));
        let fence = Fence::following(leader.subscribe()).and(Fence::following(owner.subscribe()));
        let mut pause = Pause::never().fenced(fence.clone());
        assert!(!fence.is_open());
        leader.send_replace(Some(Instant::now() + Duration::from_secs(60)));
        assert!(!fence.is_open(), "not an owner yet");
        let owners = Instant::now() + Duration::from_millis(200);
        owner.send_replace(Some(owners));
        assert!(!pause.changed().await);
        assert!(fence.is_open());
        assert_eq!(fence.closes_at(), Ok(Some(owners)), "the earliest end");
        assert!(pause.changed().await, "the owner's term ended");
        assert!(!fence.is_open());
        assert_eq!(fence.closes_at(), Err(Closed));
        assert_eq!(Fence::open().closes_at(), Ok(None), "never closes");
    }

    #[tokio::test]
    async fn a_joined_pause_is_paused_while_either_says_so_and_reports_only_changes() {
        use futures::FutureExt as _;
        let (peering, lease) = (watch::Sender::new(false), watch::Sender::new(true));
        let mut pause =
            Pause::following(peering.subscribe()).or(Pause::following(lease.subscribe()));
        assert!(pause.is_paused(), "not leading yet");
        lease.send_replace(false);
        assert!(!pause.changed().await);
        peering.send_replace(true);
        assert!(pause.changed().await);
        lease.send_replace(true);
        assert_eq!(
            pause.changed().now_or_never(),
            None,
            "still paused: no change to report"
        );
        peering.send_replace(false);
        lease.send_replace(false);
        assert!(!pause.changed().await);
    }
}
