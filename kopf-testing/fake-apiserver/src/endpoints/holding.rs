//! Writes held by an injected [`FaultAction::Hold`](super::control::FaultAction::Hold): each
//! waits in the pen until the test lets it go or cuts it, and the test is told when one
//! arrives.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::control::lock;

/// A write that an injected hold keeps waiting, as [`FakeApiServer::wait_held`] reports it.
///
/// [`FakeApiServer::wait_held`]: crate::FakeApiServer::wait_held
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldWrite {
    /// The Kubernetes verb (`create`, `patch`, ...).
    pub verb: String,
    /// The resource as counted in [`Stats::requests`](super::control::Stats::requests).
    pub resource: String,
    /// The namespace in the path, if any.
    pub namespace: Option<String>,
    /// The object's name in the path, if any.
    pub name: Option<String>,
    /// The request's body (as text; lossy for binary bodies).
    pub body: String,
    /// Whether the write was made before it was held (only its answer waits).
    pub committed: bool,
}

/// What becomes of a held write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Release {
    /// It goes on: made (if it was not yet) and answered.
    Answer,
    /// It ends without an answer; one that was not made yet never is.
    Cut,
}

/// The writes held now, and how many were ever held (for waiting on the next one).
#[derive(Debug)]
pub(crate) struct Pen {
    waiting: Mutex<Vec<(HeldWrite, oneshot::Sender<Release>)>>,
    arrivals: watch::Sender<u64>,
}

impl Pen {
    pub(crate) fn new() -> Self {
        Pen {
            waiting: Mutex::new(Vec::new()),
            arrivals: watch::channel(0).0,
        }
    }

    /// Holds a write until the test decides, or until the server stops (then it is cut).
    pub(crate) async fn hold(&self, write: HeldWrite, stopped: &CancellationToken) -> Release {
        let (decide, decision) = oneshot::channel();
        lock(&self.waiting).push((write, decide));
        self.arrivals.send_modify(|count| *count += 1);
        tokio::select! {
            release = decision => release.unwrap_or(Release::Cut),
            () = stopped.cancelled() => Release::Cut,
        }
    }

    /// Writes held since the test last released or cut them.
    pub(crate) fn held(&self) -> Vec<HeldWrite> {
        lock(&self.waiting).iter().map(|(w, _)| w.clone()).collect()
    }

    /// Decides for every write held now. Returns them.
    pub(crate) fn decide(&self, release: Release) -> Vec<HeldWrite> {
        let waiting = std::mem::take(&mut *lock(&self.waiting));
        waiting
            .into_iter()
            .map(|(write, decide)| {
                let _ = decide.send(release);
                write
            })
            .collect()
    }

    /// Notified whenever a write is held.
    pub(crate) fn arrivals(&self) -> watch::Receiver<u64> {
        self.arrivals.subscribe()
    }
}
