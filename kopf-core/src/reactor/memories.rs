//! What the operator remembers of each object between events (Kopf's memories).
//!
//! Invariant: the map's lock is held only for short, synchronous reads and changes of one
//! object's memory, never across an `.await`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use foldhash::HashMap;
use tokio::time::Instant;

use crate::engines::daemons::Daemons;
use crate::engines::indexing::IndexingState;
use crate::helpers::freeing::FreedApart;
use crate::helpers::sync::lock;
use crate::structs::bodies::Body;
use crate::structs::patch::Patch;

/// What the operator remembers of one object. Kept for every object, at rest or not: what is
/// rare (failed writes, awaited versions) is boxed, so that an object at rest costs little.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    /// Seen at least once (its newest state may have been let go since).
    pub(crate) seen: bool,
    /// First seen in a listing (not a watch event): resume handlers apply.
    pub(crate) listed: bool,
    /// A cause was completely handled since the operator started: no more resuming.
    pub(crate) handled_once: bool,
    /// The newest state seen, while the object's worker lives (and after a stop, until the
    /// memories are freed).
    pub(crate) latest: Option<Arc<Body>>,
    /// After our own PATCH: the versions to wait for, until when, and what it wrote over.
    pub(crate) awaited: Option<Box<Awaited>>,
    /// While writes of the object are in flight: how many, and the versions that came back
    /// meanwhile (observed while the object was processed), which they need not wait for.
    pub(crate) writing: Option<Box<(usize, Vec<String>)>>,
    /// What event handlers asked to write since the last processing: written with the next.
    pub(crate) observed_patch: Option<Box<Patch>>,
    /// Failed writes in a row, for throttling.
    pub(crate) failures: usize,
    /// What finished handlers (and event handlers) asked to write, when the write failed:
    /// written again, before any handler runs, until it lands or the object is gone, so that
    /// no handler that succeeded runs again because its record was not stored.
    pub(crate) unwritten: Option<Box<Patch>>,
    /// Whether the failed write also added (`true`) or removed (`false`) the finalizer: done
    /// again with it, on the object's newest state (a removal after the deletion handlers is
    /// not computed again once their records are purged by the same write).
    pub(crate) unwritten_finalizer: Option<bool>,
    /// What writes that the server rejected for good (e.g. annotations too long) would have
    /// stored: not tried again, but laid over the object's state as if written, so that the
    /// handlers that finished do not run again; dropped once a later cycle's write lands.
    pub(crate) rejected: Option<Box<Patch>>,
    /// The object's daemons and timers.
    pub(crate) daemons: Daemons,
    /// The object's failed indexing, per index.
    pub(crate) indexing: BTreeMap<String, IndexingState>,
}

/// Our own write of an object that has not come back yet (Kopf's consistency rule).
#[derive(Debug)]
pub(crate) struct Awaited {
    /// The versions it made that have not come back yet; or, once it was late and the object
    /// was read from the server, the version read (the newest known, which the watch has not
    /// brought yet).
    pub(crate) pending: Vec<String>,
    /// Until when the handlers wait for them; past it, the object is read from the server.
    pub(crate) until: Instant,
    /// The versions it replaced: the one it was made for, and those of its own requests but
    /// the last (the results in `status`, before the diff-base in the annotations). A state
    /// of one of them that comes while the write has not come back (events read late because
    /// the watch is read no faster than objects are handled, or a page of a listing that
    /// started before the write) is known to be older than the write: no handler runs on it,
    /// even past `until` (its creation handlers would run again); a newer state must come.
    pub(crate) replaced: Vec<String>,
}

impl Awaited {
    /// Whether `state` is one that this write replaced, while the write has not come back.
    pub(crate) fn outdates(&self, state: &Body) -> bool {
        let version = state["metadata"]["resourceVersion"].as_str();
        !self.pending.is_empty() && self.replaced.iter().any(|v| Some(v.as_str()) == version)
    }
}

/// The memories of the objects of one resource, by uid. A thousand objects' bodies and
/// daemons' states take a core about 15 ms to free, which the operator's exit need not wait
/// for: many are freed apart.
#[derive(Debug, Default)]
pub(crate) struct Memories(Mutex<FreedApart<HashMap<String, Memory>>>);

impl Memory {
    /// Takes in a state of the object from an event (`listed`: from a listing).
    pub(crate) fn saw(&mut self, object: &Arc<Body>, listed: bool) {
        if !self.seen {
            self.seen = true;
            self.listed = listed;
        }
        self.latest = Some(object.clone());
    }

    /// Stops waiting for our write whose version came back; while writes are in flight,
    /// remembers that it came, for them not to wait for it.
    pub(crate) fn came_back(&mut self, version: &str) {
        if let Some(awaited) = self.awaited.as_deref_mut() {
            awaited.pending.retain(|awaited| awaited != version);
        }
        if let Some((_, arrived)) = self.writing.as_deref_mut() {
            arrived.push(version.to_owned());
        }
    }

    /// A write of the object starts.
    pub(crate) fn writes(&mut self) {
        self.writing.get_or_insert_default().0 += 1;
    }

    /// A write of the object ended, having made these `versions` (none if it failed) over
    /// the version `replaced`: those not come back yet are awaited until `until`.
    pub(crate) fn written(
        &mut self,
        mut versions: Vec<String>,
        until: Option<Instant>,
        replaced: &str,
    ) {
        let replaced: Vec<String> = std::iter::once(replaced.to_owned())
            .chain(versions.iter().rev().skip(1).cloned())
            .collect();
        if let Some(writing) = self.writing.as_deref_mut() {
            versions.retain(|version| !writing.1.contains(version));
            writing.0 = writing.0.saturating_sub(1);
            if writing.0 == 0 {
                self.writing = None;
            }
        }
        if let Some(until) = until.filter(|_| !versions.is_empty()) {
            self.awaited = Some(Box::new(Awaited {
                pending: versions,
                until,
                replaced,
            }));
        }
    }
}

impl Memories {
    /// Calls `f` with the object's memory (an empty one on first sight).
    pub(crate) fn with<T>(&self, uid: &str, f: impl FnOnce(&mut Memory) -> T) -> T {
        let mut all = lock(&self.0);
        // Looked up by reference first: the uid is copied only for an object seen the first
        // time (this runs several times per event).
        if let Some(memory) = all.get_mut(uid) {
            return f(memory);
        }
        f(all.entry(uid.to_owned()).or_default())
    }

    /// Calls `f` with the object's memory, if it has one (`None`: forgotten, or never seen).
    pub(crate) fn with_existing<T>(
        &self,
        uid: &str,
        f: impl FnOnce(&mut Memory) -> T,
    ) -> Option<T> {
        lock(&self.0).get_mut(uid).map(f)
    }

    /// Calls `f` with every object's memory, keeping what it returns.
    pub(crate) fn each<T>(&self, mut f: impl FnMut(&mut Memory) -> Option<T>) -> Vec<T> {
        lock(&self.0).values_mut().filter_map(&mut f).collect()
    }

    /// Takes out the memories of the objects whose uid passes `which` (they are forgotten).
    pub(crate) fn take(&self, which: impl Fn(&str) -> bool) -> Vec<(String, Memory)> {
        let mut all = lock(&self.0);
        let uids: Vec<String> = all.keys().filter(|uid| which(uid)).cloned().collect();
        uids.into_iter()
            .filter_map(|uid| all.remove_entry(&uid))
            .collect()
    }

    /// Lets go of the object's newest state: the next event brings it again.
    pub(crate) fn release(&self, uid: &str) {
        if let Some(memory) = lock(&self.0).get_mut(uid) {
            memory.latest = None;
        }
    }

    /// Forgets the object: it is gone.
    pub(crate) fn forget(&self, uid: &str) {
        lock(&self.0).remove(uid);
    }
}
