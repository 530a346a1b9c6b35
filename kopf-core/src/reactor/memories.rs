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
    /// After our own PATCH: the versions to wait for, and until when.
    pub(crate) awaited: Option<Box<(Vec<String>, Instant)>>,
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

    /// Stops waiting for those of our writes whose versions came back.
    pub(crate) fn came_back(&mut self, versions: &[String]) {
        if let Some((pending, _)) = self.awaited.as_deref_mut() {
            pending.retain(|version| !versions.contains(version));
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
