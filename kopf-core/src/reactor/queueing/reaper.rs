//! The rests of the mailboxes whose workers ended with nothing to do, and their reaper: it
//! forgets each mailbox that rested (without an event since) for the idle timeout, and with it
//! the worker limit's permit that the mailbox kept.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::mailbox::Workers;
use crate::aiokits::metrics::ResourceMetrics;
use crate::helpers::sync::lock;

/// The mailboxes that rested, by when their idle timeout ends (oldest first: the timeout is
/// the same for all). A mailbox that rested again since is in it twice; only its last rest
/// can end it.
#[derive(Debug, Default)]
pub(super) struct Rests {
    pub(super) due: Mutex<VecDeque<(Instant, String)>>,
    pub(super) added: Notify,
}

/// How late the reaper may forget a mailbox after its idle timeout.
const REAPING_SLACK: Duration = Duration::from_millis(100);

/// Forgets the mailboxes that rested for the idle timeout (their workers "idle out"), until
/// the queue stops.
pub(super) async fn reap(
    workers: Workers,
    rests: Arc<Rests>,
    idle_timeout: Duration,
    metrics: Option<ResourceMetrics>,
    token: tokio_util::sync::CancellationToken,
) {
    loop {
        let first = lock(&rests.due).front().map(|(due, _)| *due);
        match first {
            None => tokio::select! {
                _ = token.cancelled() => return,
                _ = rests.added.notified() => continue,
            },
            // A little late, so that one wake-up ends the rests of a burst's many objects.
            Some(due) => tokio::select! {
                _ = token.cancelled() => return,
                _ = tokio::time::sleep_until(due + REAPING_SLACK) => {}
            },
        }
        let now = Instant::now();
        let due: Vec<String> = {
            let mut all = lock(&rests.due);
            let count = all.iter().take_while(|(due, _)| *due <= now).count();
            let due = all.drain(..count).map(|(_, uid)| uid).collect();
            let left = all.len();
            if left < all.capacity() / 4 {
                all.shrink_to(left * 2);
            }
            due
        };
        let mut workers = lock(&workers);
        for uid in due {
            if workers
                .get(&uid)
                .is_some_and(|mailbox| mailbox.rested_for(idle_timeout, now))
            {
                workers.remove(&uid);
                if let Some(metrics) = &metrics {
                    metrics.workers.dec();
                }
            }
        }
        // After a burst, the room for its objects goes back to the allocator as they idle out
        // (so does the room of its rests, above).
        let left = workers.len();
        if left < workers.capacity() / 4 {
            workers.shrink_to(left * 2);
        }
    }
}
