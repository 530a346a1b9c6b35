//! Persistence scheduling: the state file is saved periodically and once more when the server
//! stops.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::apiserver::endpoints::shared::Shared;
use crate::apiserver::storage::persist;
use crate::apiserver::storage::state::State;

/// Saves every `interval`, and once more when `stop` is cancelled.
pub(crate) async fn save_periodically(
    shared: Arc<Shared>,
    path: PathBuf,
    interval: Duration,
    stop: CancellationToken,
) {
    loop {
        let stopping = tokio::select! {
            _ = stop.cancelled() => true,
            _ = tokio::time::sleep(interval) => false,
        };
        if let Err(error) = persist::save(&shared.read(State::snapshot), &path).await {
            tracing::error!(%error, path = %path.display(), "saving the state file failed");
        }
        if stopping {
            return;
        }
    }
}
