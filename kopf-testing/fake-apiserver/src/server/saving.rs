//! Saving: one task takes the writes queued for the state file in groups (whatever queued
//! while the previous group was being written), has each group written and fsync'd off the
//! runtime, then lets the watches send it and the answers waiting for it go out.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::endpoints::shared::Shared;
use crate::storage::persist::{Backlog, LogFile};

/// Saves queued writes until `stop` is cancelled, then those queued by then, and ends. When
/// the file cannot be written, it says so to every write waiting and to come, and ends.
pub(crate) async fn save_continuously(
    shared: Arc<Shared>,
    mut log: LogFile,
    mut backlog: Backlog,
    tracker: TaskTracker,
    stop: CancellationToken,
) {
    let mut group = Vec::new();
    loop {
        let stopping = tokio::select! {
            taken = backlog.take(&mut group) => taken == 0,
            _ = stop.cancelled() => true,
        };
        if stopping {
            backlog.close(&mut group);
        }
        if let Some(last) = group.last() {
            let rv = last.resource_version;
            let written = tracker
                .spawn_blocking(move || {
                    let result = log.append(&group);
                    group.clear();
                    (log, group, result)
                })
                .await;
            match written {
                Ok((kept, emptied, Ok(()))) => {
                    (log, group) = (kept, emptied);
                    shared.published(rv);
                    backlog.saved(rv);
                }
                Ok((_, _, Err(error))) => {
                    tracing::error!(
                        %error,
                        "the state file cannot be written: writes are answered with \
                         500 Internal Server Error from now on; restart the server"
                    );
                    backlog.failed(error.to_string());
                    return;
                }
                Err(panic) => {
                    backlog.failed(format!("saving to the state file panicked: {panic}"));
                    return;
                }
            }
        }
        if stopping {
            return;
        }
    }
}
