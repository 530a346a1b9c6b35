//! The object's daemons and timers: which ones its state matches, their start and stop as it
//! changes, and the wait for their end when it is deleted.

use std::sync::Arc;
use std::time::Duration;

use super::Processor;
use crate::actions::execution;
use crate::aiokits::tasks::{StopReason, Tasks};
use crate::engines::daemons;
use crate::intents::daemons::Background;
use crate::reactor::invocations::Change;
use crate::structs::bodies::Body;

/// How long a deletion waits for the object's daemons and timers to end before checking again.
pub(super) const DAEMONS_POLLING: Duration = Duration::from_secs(1);

impl Processor {
    /// The daemons and timers whose filters the object passes.
    pub(super) fn matching_background(
        &self,
        body: &Arc<Body>,
        tasks: &Tasks,
    ) -> Vec<&Arc<Background>> {
        self.background
            .iter()
            .filter(|h| self.object_matches(h.id(), h.options(), body))
            .filter(|h| match &h.options().when {
                Some(when) => execution::filter(h.id(), body, || {
                    when(&self.invocation(body.clone(), Change::default(), h.options(), tasks))
                }),
                None => true,
            })
            .collect()
    }

    /// Starts the object's matching daemons and timers that do not run yet; stops the others.
    /// `true` when one must start once its previous run has ended: see again soon.
    pub(super) fn spawn(
        self: &Arc<Self>,
        uid: &str,
        body: &Arc<Body>,
        matching: &[&Arc<Background>],
        tasks: &Tasks,
    ) -> bool {
        if self.background.is_empty() {
            return false;
        }
        self.memory(uid, |m| {
            // Checked under the memories' lock: a shard dropped meanwhile lets go of its
            // objects' daemons under it too, so none starts after that.
            if self.ownership.as_ref().is_some_and(|o| !o.holds(uid)) {
                return false;
            }
            m.daemons.reconcile(
                matching,
                body,
                |handler, live, tasks| daemons::start(self.clone(), handler, live, tasks),
                tasks,
            )
        })
    }

    /// Resolves when every daemon and timer of every object, asked to stop, has ended (after
    /// a pause: their successors start only then, as in Kopf).
    pub(crate) fn all_daemons_ended(&self) -> impl std::future::Future<Output = ()> + use<> {
        let ended = futures::future::join_all(self.memories.each(|m| m.daemons.ended()));
        async move {
            ended.await;
        }
    }

    /// Asks the object's daemons and timers to stop because it is deleted, and waits a little
    /// for them to end; `true` when none runs any more.
    pub(super) async fn daemons_ended(&self, uid: &str) -> bool {
        let ended = self.memory(uid, |m| {
            m.daemons.stop(StopReason::ObjectDeleted);
            m.daemons.ended()
        });
        match ended {
            None => true,
            Some(ended) => tokio::time::timeout(DAEMONS_POLLING, ended).await.is_ok(),
        }
    }
}
