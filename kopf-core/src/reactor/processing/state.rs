//! Processing an object's newest state, step by step: a failed write goes first, then the
//! consistency wait for the object's own writes, the indexes' first filling, the cycle of
//! handlers, and the write of what they (and the event handlers since the last write) did.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Processor;
use super::background::DAEMONS_POLLING;
use super::consistency::Consistency;
use super::gate::Admission;
use crate::aiokits::tasks::Tasks;
use crate::reactor::queueing::{Held, Next};

impl Processor {
    /// Processes the object's newest state observed (again, when a retry is due): the
    /// consistency wait for its own writes, the finalizer, the daemons, the cause and its
    /// handlers, and the write of what they (and the event handlers since the last write) did.
    pub(crate) async fn process(
        self: &Arc<Self>,
        uid: &str,
        held: Held<'_>,
        tasks: &Tasks,
    ) -> Next {
        let _permit = match self.admit(uid, &[], &mut true, tasks).await {
            Admission::Admitted(permit) => permit,
            Admission::Refused => return Next::default(),
            Admission::LetGo => {
                return Next {
                    wakeup: None,
                    gone: true,
                };
            }
        };
        let Some((body, patch)) = self.memory(uid, |memory| {
            let body = memory.latest.clone()?;
            Some((
                body,
                memory.observed_patch.take().map(|p| *p).unwrap_or_default(),
            ))
        }) else {
            return Next::default();
        };
        let mut patch = patch;
        // A failed write of finished handlers (or of the finalizer's change after them) goes
        // first, alone: no handler runs until it lands (the object shows what they did only
        // then).
        let (unwritten, adding) =
            self.memory(uid, |m| (m.unwritten.take(), m.unwritten_finalizer.take()));
        if unwritten.is_some() || adding.is_some() {
            let mut unwritten = unwritten.map(|boxed| *boxed).unwrap_or_default();
            unwritten.merge(patch);
            let finalizer = adding.and_then(|adding| self.finalizer_change(&body, adding));
            let written = self.write(uid, &body, unwritten, finalizer, tasks).await;
            if matches!(&written, Err(unwritten) if unwritten.failed()) {
                self.memory(uid, |m| m.unwritten_finalizer = adding);
            }
            let wakeup = match self.remember(uid, written, true) {
                // Landed: the consistency rule waits for its versions, then handlers run.
                Ok(_) => Duration::ZERO,
                Err(delay) => delay,
            };
            return Next {
                wakeup: Some(wakeup),
                gone: false,
            };
        }
        // Kopf's consistency rule: after our own PATCH, wait (bounded) until its version comes
        // back before running change handlers on a state that may predate it.
        // Several writes (the object and its status) are waited for until each has come back.
        // A state that our write replaced is never handled: a newer one must come.
        let consistency = self.memory(uid, |memory| {
            let Some(awaited) = memory.awaited.as_deref() else {
                return Consistency::Reached;
            };
            let now = Instant::now();
            if awaited.outdates(&body) {
                Consistency::Waits(None)
            } else if awaited.pending.is_empty() {
                memory.awaited = None;
                Consistency::Reached
            } else if awaited.until > now {
                Consistency::Waits(Some(awaited.until - now))
            } else {
                Consistency::Late
            }
        });
        // Past the wait, Kopf takes the state seen as consistent. But the watch delivers the
        // versions in order: while our write has not come back, every state it brought is
        // older than that write, and one without the diff-base that the write stored would be
        // handled as a creation again. It comes late when the watch is read late (read no
        // faster than the budget of objects in flight lets it): the newest state is read
        // from the server instead.
        let body = match consistency {
            Consistency::Reached => body,
            Consistency::Waits(remaining) => {
                return self
                    .wait_for_writes(uid, &body, patch, remaining, tasks)
                    .await;
            }
            Consistency::Late => match self.newest(uid, body, tasks).await {
                Ok(Some(newest)) => newest,
                Ok(None) => return Next::default(),
                Err(wakeup) => {
                    self.memory(uid, |m| {
                        let newer = m.observed_patch.take();
                        let mut all = patch;
                        all.merge(newer.map(|p| *p).unwrap_or_default());
                        m.observed_patch = (!all.is_empty()).then(|| Box::new(all));
                    });
                    return Next {
                        wakeup,
                        gone: false,
                    };
                }
            },
        };
        if !self.indexes_filled(held, tasks).await {
            return Next::default();
        }
        let (listed, handled_once) = self.memory(uid, |m| (m.listed, m.handled_once));
        // After a write rejected for good: the object as if it had landed.
        let body = match self.memory(uid, |m| m.rejected.clone()) {
            Some(rejected) => Arc::new(body.replaced(rejected.applied_to(&body))),
            None => body,
        };
        // Boxed: the handlers' futures are large, and needed only while they run, not while
        // the object waits to write what they did.
        let cycle = Box::pin(self.handle_changes(uid, &body, listed && !handled_once, tasks)).await;
        if cycle.handled {
            self.memory(uid, |m| m.handled_once = true);
        }
        patch.merge(cycle.patch);
        let writes = !patch.is_empty();
        let adding = cycle.finalizer.as_ref().map(|_| !self.has_finalizer(&body));
        let written = self.write(uid, &body, patch, cycle.finalizer, tasks).await;
        if writes && written.is_ok() {
            // Made on the state with the rejected writes laid over: it supersedes them.
            self.memory(uid, |m| m.rejected = None);
        }
        if matches!(&written, Err(unwritten) if unwritten.failed()) {
            // The finalizer's change goes again with the records it was sent with.
            self.memory(uid, |m| m.unwritten_finalizer = adding);
        }
        let respawn = cycle.respawn.then_some(DAEMONS_POLLING);
        match self.remember(uid, written, true) {
            Ok(again) => Next {
                wakeup: [cycle.wakeup, again, respawn].into_iter().flatten().min(),
                gone: false,
            },
            Err(delay) => Next {
                wakeup: Some(delay),
                gone: false,
            },
        }
    }
}
