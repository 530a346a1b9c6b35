//! What every request handler shares: the state behind its lock, the queue to the state file,
//! the counters and fault rules tests see and steer, and the tokens that end connections and
//! watches.

use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::access::Access;
use super::control::{Counters, Faults, Stats, fake_only_message, lock};
use super::holding::Pen;
use super::journal::Journal;
use super::recording::Recorder;
use super::upstream::Upstream;
use crate::semantics::controllers;
use crate::semantics::status::{ApiError, ApiResult};
use crate::storage::persist::Durability;
use crate::storage::state::State;

/// What every request handler shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    /// The latest resourceVersion watches may send: the latest one, or with a state file,
    /// the latest one the file holds.
    pub(crate) changes: watch::Sender<u64>,
    /// The queue to the state file, when there is one.
    pub(crate) durability: Option<Durability>,
    pub(crate) counters: Counters,
    /// Where every request is recorded, in the recording mode.
    pub(crate) recorder: Option<Recorder>,
    pub(crate) faults: Faults,
    /// Writes held by injected faults.
    pub(crate) pen: Pen,
    /// Who may do what: the admin's token, ServiceAccounts' tokens, RBAC enforcement.
    pub(crate) access: Access,
    pub(crate) bookmark_interval: Mutex<Duration>,
    /// Lists, watches and deletecollections honour `shardSelector` (the `ShardedListAndWatch`
    /// feature gate); without it the parameter is ignored.
    pub(crate) sharded_watches: bool,
    /// Cancelled on restart: every connection ends.
    pub(crate) connections: Mutex<CancellationToken>,
    /// Cancelled to end all watch streams now.
    pub(crate) watches: Mutex<CancellationToken>,
    /// `host:port`, for discovery's server addresses.
    pub(crate) host: String,
    /// `https://host:port` (or `http://`), for documents that link to the server.
    pub(crate) url: String,
    /// How long a request's body may take to arrive.
    pub(crate) body_timeout: Duration,
    /// Cancelled when the server stops.
    pub(crate) root: CancellationToken,
    /// The real API server this one is a proxy in front of, if it is one: it then serves no
    /// objects of its own.
    pub(crate) upstream: Option<Upstream>,
    /// The journal of a proxy built with one.
    pub(crate) journal: Option<Journal>,
}

impl Shared {
    /// Runs `f` on the state, then the cluster's controllers, then wakes the watches; with a
    /// state file, queues what changed for it instead (the watches wake once it is saved).
    /// Answers must wait for [`saved`](Self::saved) before they go out.
    pub(crate) fn write<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let (result, rv) = {
            let mut state = lock(&self.state);
            let result = f(&mut state);
            controllers::settle(&mut state);
            let rv = state.resource_version();
            if let Some(durability) = &self.durability {
                durability.queue(state.take_unsaved(), rv);
            }
            (result, rv)
        };
        if self.durability.is_none() {
            self.published(rv);
        }
        result
    }

    /// Lets the watches send the changes up to `rv`.
    pub(crate) fn published(&self, rv: u64) {
        self.changes.send_if_modified(|latest| {
            let changed = *latest < rv;
            *latest = (*latest).max(rv);
            changed
        });
    }

    /// Waits until the state file (if any) holds every write made so far, so that an answer
    /// shows nothing a crash could take back; fails when it never will.
    ///
    /// # Cancellation safety
    ///
    /// Cancel-safe: dropping it only stops waiting.
    pub(crate) async fn saved(&self) -> ApiResult<()> {
        let Some(durability) = &self.durability else {
            return Ok(());
        };
        durability
            .saved()
            .await
            .map_err(|why| ApiError::internal(format!("Internal error occurred: {why}")))
    }

    pub(crate) fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&lock(&self.state))
    }

    /// Swaps a token for a fresh child of the root and cancels the old one.
    fn renew(&self, slot: &Mutex<CancellationToken>) {
        let old = std::mem::replace(&mut *lock(slot), self.root.child_token());
        old.cancel();
    }

    /// Fails when the server is a proxy in front of a real API server, where `what` cannot be
    /// done; the error says so.
    pub(crate) fn fake_only(&self, what: &str) -> Result<(), String> {
        match &self.upstream {
            None => Ok(()),
            Some(upstream) => Err(fake_only_message(what, upstream.url())),
        }
    }

    /// Ends every open watch stream now.
    pub(crate) fn close_watches(&self) {
        self.renew(&self.watches);
    }

    /// Drops every connection, keeping the data.
    pub(crate) fn restart(&self) {
        self.renew(&self.connections);
        self.renew(&self.watches);
    }
}

pub(crate) fn stats(shared: &Shared) -> Stats {
    let (objects, history, resource_version) =
        shared.read(|s| (s.object_count(), s.history_len(), s.resource_version()));
    Stats {
        open_connections: shared.counters.open_connections.load(Ordering::SeqCst),
        open_watches: shared.counters.open_watches.load(Ordering::SeqCst),
        requests: shared.counters.requests(),
        faults: shared.counters.faults(),
        objects,
        history,
        resource_version,
    }
}
