//! The writes of the per-object cycle and of its daemons and timers: what their handlers did
//! (results, progress records, the diff-base, the finalizer's change), sent to the object only
//! while this operator may act on it, a few at a time, and after a failure, tried again only
//! after Kopf's error delays. The requests themselves are `clients/patching.rs`'s. Under the
//! same gate, the read of an object whose own write has not come back on the watch in time.
//!
//! "May act" is asked right before each request leaves, not once per write: a write waits
//! for its permit (long, in a burst), and is up to four requests with retries. Each request
//! must be answered within the operator's term, and carries the resourceVersion it was made
//! for, so that none lands after the term over what the next leader (or shard owner) wrote.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::aiokits::tasks::Tasks;
use crate::clients::patching::{self, Closed, Gate, Target, WriteError, Written};
use crate::clients::reading::{Deferred, Unmanaged};
use crate::clients::retries::Backoffs;
use crate::configs::settings::Settings;
use crate::configs::storage::ProgressStorage;
use crate::engines::ownership::Ownership;
use crate::engines::pausing::Fence;
use crate::helpers::sync::lock;
use crate::structs::bodies::Body;
use crate::structs::errors;
use crate::structs::patch::Patch;
use crate::structs::resources::Resource;

/// A write that did not land: what was not written, and when to try again.
#[derive(Debug)]
pub(crate) struct Unwritten {
    /// The patch, to be merged into the next write.
    pub(crate) patch: Patch,
    /// The delay before trying again (Kopf's `error_delays`).
    pub(crate) delay: Duration,
    /// The server rejected the write for good (e.g. `422 Invalid`: annotations too long):
    /// trying it again would fail again. It was reported when rejected.
    pub(crate) rejected: bool,
    /// Not sent on purpose (the operator may not act): nothing is to be tried again.
    pub(crate) dropped: bool,
}

impl Unwritten {
    /// Nothing to try again: the patch is dropped on purpose (e.g. the operator may not
    /// act: the leader writes instead).
    pub(crate) fn dropped() -> Unwritten {
        Unwritten {
            patch: Patch::default(),
            delay: Duration::ZERO,
            rejected: false,
            dropped: true,
        }
    }

    /// Whether the write failed and is to be tried again (neither rejected for good nor
    /// dropped on purpose).
    pub(crate) fn failed(&self) -> bool {
        !self.rejected && !self.dropped
    }
}

/// Writes to the objects of one resource.
pub(crate) struct Writer {
    client: Arc<kube::Client>,
    resource: Arc<Resource>,
    /// Limits the writes in flight, so that a burst of objects does not open a connection each.
    permits: Arc<tokio::sync::Semaphore>,
    /// Open while the operator may act on objects: nothing is written while it is closed.
    fence: Fence,
    /// With assigned shards: an object whose shard is not held here is not written.
    ownership: Option<Arc<Ownership>>,
    /// Where progress is kept: every write removes a touch-dummy left there.
    progress: Arc<dyn ProgressStorage>,
    /// Delays between retries of one failed request (Kopf's `networking.error_backoffs`).
    backoffs: Vec<Duration>,
    /// A `429`'s `Retry-After` replaces a longer backoff (Kopf's `enforce_retry_after`).
    enforce_retry_after: bool,
    /// Delays before writing an object again after failed writes in a row (Kopf's
    /// `queueing.error_delays`).
    delays: Vec<Duration>,
    /// The fields of `status` that the server was seen to prune (warned about once).
    pruned: Mutex<BTreeSet<String>>,
    /// Objects read are kept without their managed fields, as the watchers read them
    /// (`settings.watching.strip_managed_fields`).
    strip_managed_fields: bool,
}

/// Why an object's newest state was not read.
#[derive(Debug)]
pub(crate) enum Unread {
    /// The operator may not act on the object: nothing is to be tried again.
    Closed,
    /// The request failed: try again after this delay (Kopf's `error_delays`).
    Failed(Duration),
}

impl Writer {
    pub(crate) fn new(
        client: Arc<kube::Client>,
        resource: Arc<Resource>,
        settings: &Settings,
        permits: Arc<tokio::sync::Semaphore>,
        fence: Fence,
        ownership: Option<Arc<Ownership>>,
    ) -> Writer {
        Writer {
            client,
            resource,
            permits,
            fence,
            ownership,
            progress: settings.persistence.progress_storage.clone(),
            backoffs: settings.networking.error_backoffs.clone(),
            enforce_retry_after: settings.networking.enforce_retry_after,
            delays: settings.queueing.error_delays.clone(),
            pruned: Mutex::default(),
            strip_managed_fields: settings.watching.strip_managed_fields,
        }
    }

    /// The requests' target: the object of `body`, sent through `gate` until `tasks` stop.
    fn target<'a>(&'a self, body: &'a Value, tasks: &'a Tasks, gate: &'a dyn Gate) -> Target<'a> {
        Target {
            client: &self.client,
            resource: &self.resource,
            namespace: body["metadata"]["namespace"].as_str(),
            name: body["metadata"]["name"].as_str().unwrap_or_default(),
            stop: tasks.token(),
            gate,
        }
    }

    /// Reads the object `uid` as stored now (`Ok(None)`: it is gone), whose newest state seen
    /// is `body`; only while this operator may act on it. A failure counts with the failed
    /// writes (`failed`, as for [`Writer::write`]) for the delay before trying again.
    pub(crate) async fn fetch(
        &self,
        uid: &str,
        body: &Value,
        tasks: &Tasks,
        failed: impl FnOnce() -> usize,
    ) -> Result<Option<Body>, Unread> {
        let gate = ObjectGate {
            fence: &self.fence,
            ownership: self.ownership.as_deref(),
            uid,
        };
        let target = self.target(body, tasks, &gate);
        let backoffs = Backoffs {
            delays: &self.backoffs,
            enforce_retry_after: self.enforce_retry_after,
        };
        let fetched = match self.strip_managed_fields {
            true => Box::pin(patching::fetch::<Unmanaged>(&target, backoffs)).await,
            false => Box::pin(patching::fetch::<Deferred>(&target, backoffs)).await,
        };
        match fetched {
            Ok(fetched) => Ok(fetched),
            Err(WriteError::Closed(closed)) => {
                tracing::warn!(target: "kopf::patching", uid, "not read: {closed}");
                Err(Unread::Closed)
            }
            Err(WriteError::Request(error)) => {
                let delay = self.delay(failed());
                tracing::error!(target: "kopf::patching", error = %errors::describe(&error), ?delay, "reading the object failed; retrying later");
                Err(Unread::Failed(delay))
            }
        }
    }

    /// The delay before trying an object again after this many failures in a row (Kopf's
    /// `error_delays`).
    fn delay(&self, failures: usize) -> Duration {
        self.delays
            .get(failures.saturating_sub(1))
            .or(self.delays.last())
            .copied()
            .unwrap_or(Duration::from_secs(1))
    }

    /// Sends a patch (and the framework's JSON-patch operation on the finalizers) to the
    /// object `uid`, whose newest state known is `body`. On failure, what was not written
    /// comes back with the delay before trying again, which grows with each failure in a row:
    /// `failed` counts this failure for the object and returns how many there were in a row
    /// (Kopf's `error_delays`).
    pub(crate) async fn write(
        &self,
        uid: &str,
        body: &Value,
        mut patch: Patch,
        finalizer: Option<Value>,
        tasks: &Tasks,
        failed: impl FnOnce() -> usize,
    ) -> Result<Written, Unwritten> {
        let gate = ObjectGate {
            fence: &self.fence,
            ownership: self.ownership.as_deref(),
            uid,
        };
        // Before waiting for a permit too: a write that may not go out does not queue.
        if let Err(closed) = gate.deadline() {
            not_sent(uid, closed);
            return Err(Unwritten::dropped());
        }
        // As Kopf's `apply`: any write also removes a touch-dummy left on the object (Kopf
        // writes one after sleeping for a delayed handler), so none stays once handled.
        let mut untouch = json!({});
        self.progress.touch(body, &mut untouch, None);
        if let Value::Object(untouch) = untouch {
            for (key, value) in untouch {
                patch.merge_raw(&key, value);
            }
        }
        // The patch's functions change the object as it is now: their changes are sent as
        // the handlers' JSON-patch operations are, for this version of it.
        patch.resolve_functions(body, self.resource.status_subresource);
        let target = self.target(body, tasks, &gate);
        let version = body["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default();
        // Writes during a stop still go out (a handler's last progress); only the abort at
        // the end of the grace period ends the wait for a permit.
        let permit = tokio::select! {
            permit = self.permits.acquire() => permit.ok(),
            _ = tasks.aborted() => None,
        };
        if permit.is_none() {
            return Err(Unwritten::dropped());
        }
        // Boxed: an object waits for its permit far longer than it writes (a burst has every
        // new object waiting here), and the request's future is most of a write's.
        match Box::pin(patching::apply(
            &target,
            &mut patch,
            finalizer,
            version,
            Backoffs {
                delays: &self.backoffs,
                enforce_retry_after: self.enforce_retry_after,
            },
        ))
        .await
        {
            Ok(written) => {
                self.warn_pruned(&written.pruned, body);
                Ok(written)
            }
            Err(WriteError::Closed(closed)) => {
                // The results of handlers that ran within the term, written after it: dropped,
                // so that the next leader (or owner) does them again rather than two operators
                // writing at once.
                not_sent(uid, closed);
                Err(Unwritten::dropped())
            }
            Err(WriteError::Request(error)) if patching::rejected_for_good(&error) => {
                let said = match &error {
                    kube::Error::Api(status) => {
                        format!("{} {}: {}", status.code, status.reason, status.message)
                    }
                    error => error.to_string(),
                };
                let name = target.name;
                let namespace = target.namespace;
                let path = namespace.map_or(name.to_string(), |ns| format!("{ns}/{name}"));
                let span = tracing::error_span!(target: "kopf::patching", "object", object.name = name, object.namespace = namespace);
                tracing::error!(target: "kopf::patching", parent: &span, "The server rejected the patch of {path} for good ({said}). What the handlers did is not stored on the object and is not tried again: the operator remembers it instead (until it restarts), so that the handlers that finished do not run again and a deletion still proceeds. If the annotations are too long (at most 262,144 bytes in all; Kopf issue #1087), keep the diff-base and the progress in `status` (settings.persistence.diffbase_storage and progress_storage), or keep the handled objects smaller.");
                Err(Unwritten {
                    patch,
                    delay: Duration::ZERO,
                    rejected: true,
                    dropped: false,
                })
            }
            Err(WriteError::Request(error)) => {
                let delay = self.delay(failed());
                tracing::error!(target: "kopf::patching", error = %errors::describe(&error), ?delay, "patching the object failed; retrying later");
                Err(Unwritten {
                    patch,
                    delay,
                    rejected: false,
                    dropped: false,
                })
            }
        }
    }

    /// Warns, once per field for this resource, that the server pruned results from `status`
    /// (a typed CRD whose schema does not declare them): the handlers succeeded, but what they
    /// returned is not stored.
    fn warn_pruned(&self, pruned: &[String], body: &Value) {
        if pruned.is_empty() {
            return;
        }
        let name = body["metadata"]["name"].as_str().unwrap_or_default();
        let namespace = body["metadata"]["namespace"].as_str().unwrap_or_default();
        let mut warned = lock(&self.pruned);
        for field in pruned {
            if warned.insert(field.clone()) {
                let resource = &self.resource;
                let message = format!(
                    "status.{field} was not stored: the schema of {resource} prunes it. Declare the field in the CRD's status schema (for a typed CRD, a field `{field}` in its status type), or mark the status `x-kubernetes-preserve-unknown-fields: true`."
                );
                let span = tracing::info_span!(target: "kopf::objects", "object", object.name = name, object.namespace = namespace);
                tracing::warn!(target: "kopf::patching", parent: &span, "{message}");
            }
        }
    }
}

/// Whether this operator may still write one object: within its term (a Lease leader's, a
/// member's of a ring of shards), and with assigned shards, while the object's shard is held
/// here. The decision of `Fence` and `Ownership`, asked before each request of a write.
struct ObjectGate<'a> {
    fence: &'a Fence,
    ownership: Option<&'a Ownership>,
    uid: &'a str,
}

/// Why a write is not sent: the term ended.
const TERM_ENDED: Closed = Closed(
    "the leadership's (or the ring membership's) term has ended; the owner handles the object again",
);

/// Why a write is not sent: the object's shard moved.
const HANDED_OVER: Closed =
    Closed("the object's shard was handed over; its new owner handles the object");

impl Gate for ObjectGate<'_> {
    fn deadline(&self) -> Result<Option<Instant>, Closed> {
        let closes = self.fence.closes_at().map_err(|_| TERM_ENDED)?;
        if self.ownership.is_some_and(|o| !o.holds(self.uid)) {
            return Err(HANDED_OVER);
        }
        Ok(closes)
    }
}

/// Says that a write of the object was not sent, or not whole, and why.
fn not_sent(uid: &str, closed: Closed) {
    tracing::warn!(target: "kopf::patching", uid, "not patched: {closed}");
}
