//! Which shards this replica owns now, and the gate that every dispatch, daemon and write of
//! an object passes: the object's shard must be open here.
//!
//! The sharder (`engines/sharding.rs`) opens a shard once it sees this replica recorded as
//! its owner, and drains one before it records another owner: [`Ownership::drain`] closes the
//! shard (no new dispatch), waits for the dispatches in flight ([`Permit`]s) to end, asks
//! every processor to let go of the shard's objects ([`ShardMembers::leave`]: their daemons
//! and timers stop with [`StopReason::ShardMoved`](crate::aiokits::tasks::StopReason::ShardMoved) and end), and only then marks the shard as
//! not held, so that the hand-off can be written. A drain whose processings in flight do not
//! end within its timeout gives up before stopping anything: the shard opens again and stays
//! here.
//!
//! Invariants:
//! 1. An object is processed only while its shard is open, and a shard is handed over only
//!    after every processing that began while it was open has ended.
//! 2. The held set is published ([`Ownership::subscribe`]) each time it changes, so that the
//!    watchers list and watch exactly the held shards' objects. A drain changes it only once
//!    it hands the shard over: a drain that times out lists nothing again, so no listing
//!    taken before the object's own writes can come after them.
//! 3. The events of a draining shard's objects wait ([`Ownership::settled`]) until the shard
//!    opens again (they are processed then, in order) or is known to leave (they are dropped:
//!    the new owner lists the objects). A shard is known to leave once its processings in
//!    flight have ended, before its daemons have: waiting on those (unbounded for a sync
//!    daemon that ignores its stop) would keep the waiting events' workers for nothing.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::FutureExt as _;
use tokio::sync::{Notify, watch};

use crate::configs::sharding;
use crate::helpers::sync::lock;
use crate::structs::shards::ShardSelector;

/// What holds objects of shards: lets go of those of one shard when it moves.
pub(crate) trait ShardMembers: Send + Sync {
    /// Stops the daemons and timers of the objects for which `moved(uid)` holds (with
    /// [`StopReason::ShardMoved`](crate::aiokits::tasks::StopReason::ShardMoved)) and forgets those objects; resolves when they have ended.
    fn leave(
        &self,
        moved: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    ) -> futures::future::BoxFuture<'static, ()>;
}

/// The state of one shard here.
#[derive(Debug, Default, Clone, Copy)]
struct Shard {
    /// Recorded as ours and not being drained: its objects are dispatched.
    open: bool,
    /// Recorded as ours: until the drain is done (or the shard was taken from us).
    held: bool,
    /// Drained of its processings, its daemons stopping: it is handed over once they end.
    leaving: bool,
    /// Processings of its objects in flight.
    in_flight: usize,
}

impl Shard {
    /// Closed for a drain whose outcome is not known yet.
    fn drains(&self) -> bool {
        self.held && !self.open && !self.leaving
    }
}

/// The shards that this replica owns, and the processings in flight in each.
pub(crate) struct Ownership {
    count: u32,
    shards: Mutex<Vec<Shard>>,
    /// Notified whenever a shard's processings in flight reach none.
    idle: Notify,
    /// Notified whenever a drain's outcome is known, or a shard opens or is dropped: what
    /// [`settled`](Self::settled) waits for.
    settled: Notify,
    /// The held shards, published on every change.
    held: watch::Sender<BTreeSet<u32>>,
    members: Mutex<Vec<Weak<dyn ShardMembers>>>,
}

impl std::fmt::Debug for Ownership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ownership")
            .field("count", &self.count)
            .field("held", &*self.held.borrow())
            .finish_non_exhaustive()
    }
}

/// A processing of an object in flight in its shard: the shard is not handed over until the
/// permit is dropped.
#[derive(Debug)]
pub(crate) struct Permit {
    ownership: Arc<Ownership>,
    shard: u32,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut shards = lock(&self.ownership.shards);
        let shard = &mut shards[self.shard as usize];
        shard.in_flight -= 1;
        if shard.in_flight == 0 {
            self.ownership.idle.notify_waiters();
        }
    }
}

impl Ownership {
    /// No shard owned yet, of `count` virtual shards.
    pub(crate) fn new(count: u32) -> Arc<Ownership> {
        Arc::new(Ownership {
            count,
            shards: Mutex::new(vec![Shard::default(); count as usize]),
            idle: Notify::new(),
            settled: Notify::new(),
            held: watch::Sender::new(BTreeSet::new()),
            members: Mutex::default(),
        })
    }

    /// The shard of the object with this uid.
    pub(crate) fn shard_of(&self, uid: &str) -> u32 {
        sharding::shard_of(uid, self.count)
    }

    /// A permit to process the object with this uid, if its shard is open here.
    pub(crate) fn enter(self: &Arc<Self>, uid: &str) -> Option<Permit> {
        let shard = self.shard_of(uid);
        let mut shards = lock(&self.shards);
        let state = &mut shards[shard as usize];
        if !state.open {
            return None;
        }
        state.in_flight += 1;
        Some(Permit {
            ownership: self.clone(),
            shard,
        })
    }

    /// Whether the object's shard is still recorded as ours (open, or being drained): its
    /// writes may go out.
    pub(crate) fn holds(&self, uid: &str) -> bool {
        lock(&self.shards)[self.shard_of(uid) as usize].held
    }

    /// Whether this shard is held here.
    pub(crate) fn is_held(&self, shard: u32) -> bool {
        lock(&self.shards)[shard as usize].held
    }

    /// The shards held here.
    pub(crate) fn held(&self) -> BTreeSet<u32> {
        let shards = lock(&self.shards);
        (0..self.count)
            .filter(|k| shards[*k as usize].held)
            .collect()
    }

    /// The selector of the held shards' objects; `None` when none is held.
    pub(crate) fn selector(&self) -> Option<ShardSelector> {
        sharding::selector(&self.held.borrow(), self.count)
    }

    /// The held shards, as they change.
    pub(crate) fn subscribe(&self) -> watch::Receiver<BTreeSet<u32>> {
        self.held.subscribe()
    }

    /// Whether the object's shard is being drained here, its outcome not known yet: it may
    /// open again (its events wait), or leave.
    pub(crate) fn drains(&self, uid: &str) -> bool {
        lock(&self.shards)[self.shard_of(uid) as usize].drains()
    }

    /// Waits while the object's shard [`drains`](Self::drains): until it opens again (the
    /// drain timed out) or is known to leave.
    pub(crate) async fn settled(&self, uid: &str) {
        let shard = self.shard_of(uid) as usize;
        loop {
            let settled = self.settled.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            if !lock(&self.shards)[shard].drains() {
                return;
            }
            settled.await;
        }
    }

    /// Registers what holds objects, to let go of them when their shard moves.
    pub(crate) fn register(&self, members: Weak<dyn ShardMembers>) {
        let mut all = lock(&self.members);
        all.retain(|m| m.strong_count() > 0);
        all.push(members);
    }

    /// Opens a shard recorded as ours: its objects are dispatched at once; the watchers
    /// follow at the next [`publish`](Self::publish).
    pub(crate) fn open(&self, shard: u32) {
        {
            let mut shards = lock(&self.shards);
            let state = &mut shards[shard as usize];
            state.open = true;
            state.held = true;
            state.leaving = false;
        }
        self.settled.notify_waiters();
    }

    /// Drops a shard at once, without waiting: it was taken from this replica (which was seen
    /// as dead), or this replica rejoins. The future resolves when its objects are let go of.
    pub(crate) fn drop_shard(&self, shard: u32) -> impl Future<Output = ()> + use<> {
        {
            let mut shards = lock(&self.shards);
            let state = &mut shards[shard as usize];
            state.open = false;
            state.held = false;
            state.leaving = false;
        }
        self.settled.notify_waiters();
        self.publish();
        self.let_go(shard)
    }

    /// Closes the shard, waits for its processings in flight, then stops its objects' daemons
    /// and timers and waits for their end, and marks it as not held: `true` when the
    /// processings in flight ended within `timeout`; otherwise it opens again and `false`.
    /// The watchers go on meanwhile: the events of the shard's objects wait for its outcome.
    pub(crate) async fn drain(&self, shard: u32, timeout: Duration) -> bool {
        {
            let mut shards = lock(&self.shards);
            shards[shard as usize].open = false;
        }
        let drained = tokio::time::timeout(timeout, async {
            loop {
                let idle = self.idle.notified();
                tokio::pin!(idle);
                idle.as_mut().enable();
                if lock(&self.shards)[shard as usize].in_flight == 0 {
                    break;
                }
                idle.await;
            }
        })
        .await
        .is_ok();
        if drained {
            // Outside the timeout: once asked to stop, the daemons and timers are forgotten
            // here, so the shard is handed over only after they have ended (within their
            // cancellation backoff or timeout). Given up halfway, the shard would open again
            // with new daemons next to the old ones still ending.
            // The objects are taken from their holders first: the waiting events, let go of
            // once the shard is known to leave, find nothing of them to stop unwaited.
            let ending = self.let_go(shard);
            lock(&self.shards)[shard as usize].leaving = true;
            self.settled.notify_waiters();
            ending.await;
        }
        {
            let mut shards = lock(&self.shards);
            let state = &mut shards[shard as usize];
            if drained {
                state.held = false;
                state.leaving = false;
            } else {
                state.open = state.held;
            }
        }
        self.settled.notify_waiters();
        if drained {
            self.publish();
        }
        drained
    }

    /// Asks every holder of objects to let go of the shard's; resolves when they have.
    fn let_go(&self, shard: u32) -> impl Future<Output = ()> + use<> {
        let count = self.count;
        let moved: Arc<dyn Fn(&str) -> bool + Send + Sync> =
            Arc::new(move |uid: &str| sharding::shard_of(uid, count) == shard);
        let leaving: Vec<_> = lock(&self.members)
            .iter()
            .filter_map(Weak::upgrade)
            .map(|members| members.leave(moved.clone()))
            .collect();
        futures::future::join_all(leaving).map(|_| ())
    }

    /// Publishes the held shards to the watchers, if they changed.
    pub(crate) fn publish(&self) {
        let held = self.held();
        self.held.send_if_modified(|current| {
            let changed = *current != held;
            *current = held;
            changed
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Recorded(Mutex<Vec<String>>);

    impl ShardMembers for Recorded {
        fn leave(
            &self,
            moved: Arc<dyn Fn(&str) -> bool + Send + Sync>,
        ) -> futures::future::BoxFuture<'static, ()> {
            lock(&self.0).retain(|uid| !moved(uid));
            Box::pin(async {})
        }
    }

    #[tokio::test]
    async fn a_drain_waits_for_the_processings_in_flight_and_lets_go_of_the_objects() {
        let ownership = Ownership::new(4);
        let uids: Vec<String> = (0..40).map(|i| format!("uid-{i}")).collect();
        let recorded = Arc::new(Recorded(Mutex::new(uids.clone())));
        let weak: Weak<dyn ShardMembers> = Arc::downgrade(&(recorded.clone() as Arc<_>));
        ownership.register(weak);
        let uid = uids[0].clone();
        let shard = ownership.shard_of(&uid);
        assert!(ownership.enter(&uid).is_none(), "not owned yet");
        let mut open = ownership.subscribe();
        ownership.open(shard);
        ownership.publish();
        assert!(open.has_changed().unwrap());
        assert_eq!(*open.borrow_and_update(), BTreeSet::from([shard]));
        let permit = ownership.enter(&uid).expect("open");

        let draining = ownership.drain(shard, Duration::from_secs(60));
        tokio::pin!(draining);
        assert!(
            futures::poll!(draining.as_mut()).is_pending(),
            "waits for the permit"
        );
        assert!(ownership.enter(&uid).is_none(), "closed while draining");
        assert!(ownership.holds(&uid), "still held: writes may go out");
        drop(permit);
        assert!(draining.await);
        assert!(!ownership.holds(&uid));
        assert!(
            lock(&recorded.0)
                .iter()
                .all(|u| ownership.shard_of(u) != shard),
            "the shard's objects are let go of"
        );
        assert!(ownership.selector().is_none());
    }

    #[tokio::test]
    async fn a_drain_that_times_out_keeps_the_shard() {
        let ownership = Ownership::new(2);
        ownership.open(1);
        ownership.publish();
        let uid = (0..)
            .map(|i| format!("uid-{i}"))
            .find(|u| ownership.shard_of(u) == 1)
            .unwrap();
        let mut watched = ownership.subscribe();
        watched.borrow_and_update();
        let _permit = ownership.enter(&uid).unwrap();
        assert!(!ownership.drain(1, Duration::from_millis(50)).await);
        assert!(
            !watched.has_changed().unwrap(),
            "the watchers list nothing again"
        );
        assert!(ownership.holds(&uid));
        assert!(ownership.enter(&uid).is_some(), "open again");
        assert_eq!(ownership.held(), BTreeSet::from([1]));
    }
}
