//! Kopf's consistency rule: while the object's own writes have not come back on the watch, no
//! change handler runs on a state that may predate them ([`Consistency`]); past the timeout,
//! the object's newest state is read from the server.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::Processor;
use crate::aiokits::tasks::Tasks;
use crate::reactor::queueing::Next;
use crate::reactor::writing::Unread;
use crate::structs::bodies::Body;
use crate::structs::patch::Patch;

/// Where the object's newest state stands with the object's own writes (Kopf's consistency).
pub(super) enum Consistency {
    /// No write of its own is awaited: the state may be handled.
    Reached,
    /// A write of its own has not come back: wait until then, or for this long at most (or
    /// for a newer state, when the state is one that the write replaced).
    Waits(Option<Duration>),
    /// A write of its own has not come back within the consistency timeout.
    Late,
}

impl Processor {
    /// While the object's own writes have not come back: writes only what the event handlers
    /// asked for, and looks again when the wait ends (`remaining`), or when an event comes.
    pub(super) async fn wait_for_writes(
        &self,
        uid: &str,
        body: &Value,
        patch: Patch,
        remaining: Option<Duration>,
        tasks: &Tasks,
    ) -> Next {
        let written = self.write(uid, body, patch, None, tasks).await;
        let wakeup = match (self.remember(uid, written, false), remaining) {
            (Ok(again), Some(remaining)) => {
                Some(again.map_or(remaining, |again| again.min(remaining)))
            }
            (Ok(again), None) => again,
            (Err(delay), remaining) => Some(remaining.map_or(delay, |r| delay.min(r))),
        };
        Next {
            wakeup,
            gone: false,
        }
    }

    /// The object's newest state, read from the server when its own write has not come back
    /// on the watch within the consistency timeout, instead of the older state `seen`:
    /// `Ok(None)` when it is gone (its deletion is on its way), `Err` with when to look again
    /// when it could not be read.
    ///
    /// The version read is awaited from then on, as a write's is: the watch still brings the
    /// states before it, all older than the one handled now, and none of them is handled
    /// until it comes back (or the wait ends again, and the object is read again). A state
    /// seen that is the newest already needs no wait: the write came back unseen (merged
    /// into a newer event, or listed anew).
    pub(super) async fn newest(
        &self,
        uid: &str,
        seen: Arc<Body>,
        tasks: &Tasks,
    ) -> Result<Option<Arc<Body>>, Option<Duration>> {
        tracing::debug!(target: "kopf::objects", uid, "the object's own write has not come back on the watch in time; reading its newest state");
        let failed = || {
            self.memory(uid, |m| {
                m.failures += 1;
                m.failures
            })
        };
        let newest = match self.writer.fetch(uid, &seen, tasks, failed).await {
            // Another object of the same name is not this one: this one is gone.
            Ok(Some(newest)) if newest["metadata"]["uid"].as_str() != Some(uid) => return Ok(None),
            Ok(Some(newest)) => Arc::new(newest),
            Ok(None) => return Ok(None),
            Err(Unread::Closed) => return Err(None),
            Err(Unread::Failed(delay)) => return Err(Some(delay)),
        };
        let version = newest["metadata"]["resourceVersion"].as_str();
        if version == seen["metadata"]["resourceVersion"].as_str() {
            self.memory(uid, |m| m.awaited = None);
            return Ok(Some(seen));
        }
        let timeout = self.settings.persistence.consistency_timeout;
        self.memory(uid, |m| {
            if let Some(awaited) = m.awaited.as_deref_mut() {
                awaited.pending = version.map(str::to_owned).into_iter().collect();
                awaited.until = Instant::now() + timeout;
            }
            m.latest = Some(newest.clone());
        });
        Ok(Some(newest))
    }
}
