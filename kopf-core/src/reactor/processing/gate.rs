//! The gate of the processing: whether an object's events may be observed, and its state
//! processed, here ([`Admission`]): while the operator may act on objects (its fence), and with
//! assigned shards, while the object's shard is open here.

use super::{Processor, seen};
use crate::aiokits::tasks::Tasks;
use crate::clients::watching::Event;
use crate::engines::ownership::Permit;

/// Whether an object's events may be observed, and its state processed, here.
pub(super) enum Admission {
    /// Yes, with its shard's permit when shards are assigned.
    Admitted(Option<Permit>),
    /// Not now: the operator may not act on objects (it is about to pause), or it stops.
    Refused,
    /// Its shard is not held here: it was let go of.
    LetGo,
}

impl Processor {
    /// Waits until the object may be processed here: while the operator may act on objects,
    /// and with assigned shards, while its shard is open here (the permit, held until the end
    /// of the processing, keeps the shard from being handed over meanwhile). While its shard
    /// drains, the `batch` waits for the drain's outcome, indexed first (`indexed`): the
    /// indexes' first filling must not wait for the drain, which may wait for a processing in
    /// flight that waits for that filling. An object whose shard is not held here is let go of.
    pub(super) async fn admit(
        &self,
        uid: &str,
        batch: &[Event],
        indexed: &mut bool,
        tasks: &Tasks,
    ) -> Admission {
        loop {
            if !self.fence.is_open() {
                // Not the leader (any more): the operator is about to pause; what is left here
                // is listed again when it resumes, or handled by the leader meanwhile.
                tracing::debug!(target: "kopf::objects", uid, "not processed: not the leader (or not a member of the ring of shards now)");
                return Admission::Refused;
            }
            let Some(ownership) = &self.ownership else {
                return Admission::Admitted(None);
            };
            if let Some(permit) = ownership.enter(uid) {
                return Admission::Admitted(Some(permit));
            }
            if !ownership.drains(uid) {
                self.let_go(uid, batch, *indexed, tasks).await;
                return Admission::LetGo;
            }
            if !*indexed {
                *indexed = true;
                for (kind, object, _) in batch.iter().filter_map(seen) {
                    self.index(uid, kind, object, tasks).await;
                }
            }
            tokio::select! {
                _ = ownership.settled(uid) => {}
                _ = tasks.token().cancelled() => return Admission::Refused,
            }
        }
    }
}
