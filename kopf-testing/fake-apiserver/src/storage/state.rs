//! The server's memory: objects, the global resourceVersion, and the bounded change history
//! that watches replay from.
//!
//! Invariants:
//! 1. Every stored change bumps the global resourceVersion by exactly one, so the history is
//!    contiguous: the change with version `v` sits at index `v - history[0].rv`.
//! 2. Every change with a version above `compacted_rv` is in the history; a watch or list from an
//!    older version is answered with `410 Expired`.
//! 3. The state is only touched under its one mutex, never held across an `.await`.
//! 4. When the server keeps a state file, every change to the stored objects (each change in
//!    the history, and each resource dropped with its CRD) is also queued as a [`Mutation`],
//!    in order, until the server takes it to the file (`take_unsaved`) under the same lock.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use serde_json::{Value, json};

use super::builtins;
use super::catalog::{Catalog, ResourceDef, ResourceKey};
use super::object::{self, ObjectKey};

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One entry of the history.
#[derive(Debug)]
pub(crate) struct Change {
    pub(crate) rv: u64,
    pub(crate) resource: ResourceKey,
    pub(crate) kind: ChangeKind,
    /// The object after the change (for deletions: its last state, with the deletion's version).
    pub(crate) object: Arc<Value>,
    /// The object before the change; `None` for additions.
    pub(crate) previous: Option<Arc<Value>>,
    /// When the change was made.
    pub(crate) at: std::time::SystemTime,
}

/// A change to the stored objects, as the state file records it.
#[derive(Debug, Clone)]
pub(crate) enum Mutation {
    /// An object was added, modified or deleted (with the resourceVersion that change got).
    Changed(Arc<Change>),
    /// All objects of a resource were dropped without events (its CRD is gone).
    Dropped(ResourceKey),
}

/// Objects of one resource, ordered by `(namespace, name)` as the real server lists them.
pub(crate) type Objects = BTreeMap<ObjectKey, Arc<Value>>;

/// Everything the server knows.
#[derive(Debug, Clone)]
pub(crate) struct State {
    pub(crate) catalog: Catalog,
    // The stored objects and their indexes are shared (copied on write), so that a scratch
    // copy for a dry run costs a pointer per resource, not a copy of every object.
    objects: HashMap<ResourceKey, Arc<Objects>>,
    uids: Arc<HashMap<String, StoredKey>>,
    /// The objects that name each uid as an owner (the garbage collector's index).
    dependents: Arc<HashMap<String, BTreeSet<StoredKey>>>,
    rv: u64,
    history: VecDeque<Arc<Change>>,
    history_limit: usize,
    compacted_rv: u64,
    /// Every change ever made, when the server keeps a journal (never trimmed nor compacted).
    journal: Option<Vec<Arc<Change>>>,
    /// Mutations not yet taken to the state file, when the server keeps one.
    unsaved: Option<Vec<Mutation>>,
    /// What the cluster's controllers must look at again (see `controllers::settle`).
    pub(crate) pending: Pending,
    /// The CA bundle (PEM) that every namespace's `kube-root-ca.crt` ConfigMap carries.
    pub(crate) root_ca: String,
}

/// Flags set by writes so that the controllers skip work when nothing concerns them.
#[derive(Debug, Default, Clone)]
pub(crate) struct Pending {
    pub(crate) crds: bool,
    pub(crate) namespaces: bool,
    pub(crate) garbage: GarbageWork,
    /// Namespaces created since the controllers last looked (they get their ServiceAccount
    /// and CA bundle).
    pub(crate) created_namespaces: Vec<String>,
}

/// Where an object is stored: its resource and its key.
pub(crate) type StoredKey = (ResourceKey, ObjectKey);

/// What the garbage collector must look at since it last ran.
#[derive(Debug, Default, Clone)]
pub(crate) struct GarbageWork {
    /// Uids of owners that were removed (their dependents may be orphans now), are being
    /// deleted with finalizers, or whose dependents changed.
    pub(crate) owners: BTreeSet<String>,
    /// Objects written with owner references (their owners may be gone already).
    pub(crate) dependents: BTreeSet<StoredKey>,
}

impl GarbageWork {
    pub(crate) fn is_empty(&self) -> bool {
        self.owners.is_empty() && self.dependents.is_empty()
    }
}

impl State {
    pub(crate) fn new(history_limit: usize) -> Self {
        State {
            catalog: builtins::catalog(),
            objects: HashMap::new(),
            uids: Arc::default(),
            dependents: Arc::default(),
            rv: 0,
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            compacted_rv: 0,
            journal: None,
            unsaved: None,
            pending: Pending::default(),
            root_ca: String::new(),
        }
    }

    /// A copy to try writes on and throw away (a dry run): it shares the stored objects until
    /// it changes them, and starts with no history, journal or unsaved mutations, so making
    /// it costs a pointer per resource however many objects there are.
    pub(crate) fn scratch(&self) -> State {
        State {
            catalog: self.catalog.clone(),
            objects: self.objects.clone(),
            uids: self.uids.clone(),
            dependents: self.dependents.clone(),
            rv: self.rv,
            history: VecDeque::new(),
            history_limit: self.history_limit,
            compacted_rv: self.rv,
            journal: None,
            unsaved: None,
            pending: Pending::default(),
            root_ca: self.root_ca.clone(),
        }
    }

    /// Keeps every change from now on, for [`journal`](Self::journal).
    pub(crate) fn keep_journal(&mut self) {
        self.journal.get_or_insert_with(Vec::new);
    }

    /// Every change made since the journal was started (empty when it was not).
    pub(crate) fn journal(&self) -> &[Arc<Change>] {
        self.journal.as_deref().unwrap_or_default()
    }

    /// Queues every mutation from now on, for [`take_unsaved`](Self::take_unsaved).
    pub(crate) fn keep_unsaved(&mut self) {
        self.unsaved.get_or_insert_with(Vec::new);
    }

    /// The mutations made since the last call, oldest first (none when they are not kept).
    pub(crate) fn take_unsaved(&mut self) -> Vec<Mutation> {
        self.unsaved
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    pub(crate) fn resource_version(&self) -> u64 {
        self.rv
    }

    pub(crate) fn compacted_rv(&self) -> u64 {
        self.compacted_rv
    }

    pub(crate) fn object_count(&self) -> usize {
        self.objects.values().map(|objects| objects.len()).sum()
    }

    pub(crate) fn history_len(&self) -> usize {
        self.history.len()
    }

    /// Forgets the whole history: watches and lists from any earlier version get `410`.
    pub(crate) fn compact(&mut self) {
        self.history.clear();
        self.compacted_rv = self.rv;
    }

    fn trim_history(&mut self) {
        while self.history.len() > self.history_limit {
            if let Some(change) = self.history.pop_front() {
                self.compacted_rv = change.rv;
            }
        }
    }

    pub(crate) fn objects(&self, resource: &ResourceKey) -> Option<&Objects> {
        self.objects.get(resource).map(|objects| &**objects)
    }

    pub(crate) fn get(&self, resource: &ResourceKey, key: &ObjectKey) -> Option<&Arc<Value>> {
        self.objects.get(resource)?.get(key)
    }

    pub(crate) fn uid_exists(&self, uid: &str) -> bool {
        self.uids.contains_key(uid)
    }

    /// Where the object with this uid is stored.
    pub(crate) fn locate(&self, uid: &str) -> Option<StoredKey> {
        self.uids.get(uid).cloned()
    }

    /// The objects that name `uid` as an owner.
    pub(crate) fn dependents_of(&self, uid: &str) -> Vec<StoredKey> {
        self.dependents
            .get(uid)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Keeps the owners' index right as `stored` changes from `old` to `new`.
    fn index_owners(&mut self, stored: &StoredKey, old: Option<&Value>, new: Option<&Value>) {
        let before = old.map(object::owner_uids).unwrap_or_default();
        let after = new.map(object::owner_uids).unwrap_or_default();
        if before == after {
            return;
        }
        for uid in before.iter().filter(|uid| !after.contains(uid)) {
            let dependents = Arc::make_mut(&mut self.dependents);
            if let Some(set) = dependents.get_mut(uid) {
                set.remove(stored);
                if set.is_empty() {
                    dependents.remove(uid);
                }
            }
        }
        for uid in after {
            Arc::make_mut(&mut self.dependents)
                .entry(uid)
                .or_default()
                .insert(stored.clone());
        }
    }

    /// Changes after `rv`, or `None` when some of them were compacted away.
    pub(crate) fn changes_since(&self, rv: u64) -> Option<Vec<Arc<Change>>> {
        if rv < self.compacted_rv {
            return None;
        }
        let Some(first) = self.history.front().map(|c| c.rv) else {
            return Some(Vec::new());
        };
        let start = (rv.saturating_add(1).saturating_sub(first) as usize).min(self.history.len());
        Some(self.history.range(start..).cloned().collect())
    }

    /// The objects of a resource as they were at version `rv`, or `None` when that version
    /// was compacted away. Nothing is copied but the objects changed since: the view reads the
    /// stored objects through the changes made after `rv`, undone.
    pub(crate) fn objects_at(&self, resource: &ResourceKey, rv: u64) -> Option<Snapshot<'_>> {
        let mut undone = BTreeMap::new();
        if rv < self.rv {
            let changes = self.changes_since(rv)?;
            // The earliest change of an object after `rv` tells what it was at `rv`.
            for change in changes.iter().filter(|c| &c.resource == resource) {
                let before = match change.kind {
                    ChangeKind::Added => None,
                    ChangeKind::Modified | ChangeKind::Deleted => change.previous.clone(),
                };
                undone.entry(key_of(&change.object)).or_insert(before);
            }
        }
        Some(Snapshot {
            stored: self.objects(resource),
            undone,
        })
    }

    /// The objects of a resource as they are now.
    pub(crate) fn snapshot(&self, resource: &ResourceKey) -> Snapshot<'_> {
        Snapshot {
            stored: self.objects(resource),
            undone: BTreeMap::new(),
        }
    }

    /// Stores a new version of an object (added when absent), with the next resourceVersion.
    /// Returns the stored object.
    pub(crate) fn put(&mut self, def: &ResourceDef, mut object: Value) -> Arc<Value> {
        self.rv += 1;
        let rv = self.rv;
        object::meta_mut(&mut object).insert("resourceVersion".into(), json!(rv.to_string()));
        let key = key_of(&object);
        let resource = def.key();
        let stored = Arc::new(object);
        let uid = object::uid(&stored).to_string();
        let previous = Arc::make_mut(self.objects.entry(resource.clone()).or_default())
            .insert(key.clone(), stored.clone());
        let at = (resource.clone(), key);
        self.index_owners(&at, previous.as_deref(), Some(&stored));
        if !uid.is_empty() {
            Arc::make_mut(&mut self.uids).insert(uid, at);
        }
        self.mark_pending(def, &stored, false);
        if previous.is_none() && def.group.is_empty() && def.plural == "namespaces" {
            self.pending
                .created_namespaces
                .push(object::name(&stored).to_string());
        }
        let kind = if previous.is_some() {
            ChangeKind::Modified
        } else {
            ChangeKind::Added
        };
        self.record(Change {
            rv,
            resource,
            kind,
            object: stored.clone(),
            previous,
            at: std::time::SystemTime::now(),
        });
        stored
    }

    /// Removes an object for good, with a DELETED change carrying its last state.
    pub(crate) fn remove(&mut self, def: &ResourceDef, key: &ObjectKey) -> Option<Arc<Value>> {
        self.remove_as(def, key, None)
    }

    /// Removes an object for good as an update made it (`last`: the last finalizer removed
    /// from an object in deletion), with a DELETED change carrying that state; without
    /// `last`, the stored state.
    pub(crate) fn remove_as(
        &mut self,
        def: &ResourceDef,
        key: &ObjectKey,
        last: Option<Value>,
    ) -> Option<Arc<Value>> {
        let resource = def.key();
        let previous = Arc::make_mut(self.objects.get_mut(&resource)?).remove(key)?;
        Arc::make_mut(&mut self.uids).remove(object::uid(&previous));
        self.index_owners(&(resource.clone(), key.clone()), Some(&previous), None);
        self.mark_pending(def, &previous, true);
        self.rv += 1;
        let rv = self.rv;
        let mut last = last.unwrap_or_else(|| (*previous).clone());
        object::meta_mut(&mut last).insert("resourceVersion".into(), json!(rv.to_string()));
        let last = Arc::new(last);
        self.record(Change {
            rv,
            resource,
            kind: ChangeKind::Deleted,
            object: last.clone(),
            previous: Some(previous),
            at: std::time::SystemTime::now(),
        });
        Some(last)
    }

    /// Drops all objects of a resource without events (its CRD is gone; watches end).
    pub(crate) fn drop_resource(&mut self, resource: &ResourceKey) {
        if let Some(objects) = self.objects.remove(resource) {
            for (key, object) in objects.iter() {
                Arc::make_mut(&mut self.uids).remove(object::uid(object));
                self.index_owners(&(resource.clone(), key.clone()), Some(object), None);
            }
            if let Some(unsaved) = &mut self.unsaved {
                unsaved.push(Mutation::Dropped(resource.clone()));
            }
        }
    }

    fn mark_pending(&mut self, def: &ResourceDef, object: &Value, removed: bool) {
        let is_crd = def.group == "apiextensions.k8s.io";
        let is_namespace = def.group.is_empty() && def.plural == "namespaces";
        self.pending.crds |= is_crd || removed;
        self.pending.namespaces |= is_namespace || removed;
        let garbage = &mut self.pending.garbage;
        let owners = object::owner_uids(object);
        if !owners.is_empty() {
            if !removed {
                garbage.dependents.insert((def.key(), key_of(object)));
            }
            // An owner deleted in the foreground waits for its dependents.
            garbage.owners.extend(owners);
        }
        let uid = object::uid(object);
        let deleting = object::is_terminating(object) && !object::finalizers(object).is_empty();
        if !uid.is_empty() && (removed || deleting) {
            garbage.owners.insert(uid.to_string());
        }
    }

    fn record(&mut self, change: Change) {
        let change = Arc::new(change);
        if let Some(journal) = &mut self.journal {
            journal.push(change.clone());
        }
        if let Some(unsaved) = &mut self.unsaved {
            unsaved.push(Mutation::Changed(change.clone()));
        }
        self.history.push_back(change);
        self.trim_history();
    }

    /// Every stored object with its resource, for the state file.
    pub(crate) fn stored(&self) -> impl Iterator<Item = (&ResourceKey, &Arc<Value>)> {
        self.objects
            .iter()
            .flat_map(|(resource, objects)| objects.values().map(move |object| (resource, object)))
    }

    /// Loads an object from the state file: it comes back with its version, history starts
    /// empty. CRDs must be loaded first so their resources are served; the caller orders them.
    pub(crate) fn restore_object(&mut self, def: &ResourceDef, object: Value) {
        let key = key_of(&object);
        let uid = object::uid(&object).to_string();
        let rv = object::resource_version(&object).parse().unwrap_or(0);
        self.rv = self.rv.max(rv);
        self.compacted_rv = self.rv;
        Arc::make_mut(self.objects.entry(def.key()).or_default())
            .insert(key.clone(), Arc::new(object.clone()));
        let at = (def.key(), key);
        self.index_owners(&at, None, Some(&object));
        if !uid.is_empty() {
            Arc::make_mut(&mut self.uids).insert(uid, at);
        }
    }

    pub(crate) fn restore_resource_version(&mut self, rv: u64) {
        self.rv = self.rv.max(rv);
        self.compacted_rv = self.rv;
    }
}

/// The objects of one resource as they were at some version: the stored ones, read through
/// what the changes since then undo.
#[derive(Debug, Default)]
pub(crate) struct Snapshot<'a> {
    stored: Option<&'a Objects>,
    /// The objects changed since, as they were then (`None`: absent then).
    undone: BTreeMap<ObjectKey, Option<Arc<Value>>>,
}

impl<'a> Snapshot<'a> {
    /// The object under `key`, as it was.
    pub(crate) fn get(&self, key: &ObjectKey) -> Option<&Arc<Value>> {
        match self.undone.get(key) {
            Some(before) => before.as_ref(),
            None => self.stored?.get(key),
        }
    }

    /// The objects from `from` on, in the order of their keys.
    pub(crate) fn range<'s>(
        &'s self,
        from: Bound<&'s ObjectKey>,
    ) -> impl Iterator<Item = (&'s ObjectKey, &'s Arc<Value>)> + 's {
        let bounds = (from, Bound::Unbounded);
        let stored = self
            .stored
            .into_iter()
            .flat_map(move |objects| objects.range::<ObjectKey, _>(bounds))
            .filter(|(key, _)| !self.undone.contains_key(*key));
        let undone = self
            .undone
            .range::<ObjectKey, _>(bounds)
            .filter_map(|(key, before)| Some((key, before.as_ref()?)));
        Merged {
            left: stored.peekable(),
            right: undone.peekable(),
        }
    }

    /// Every object, in the order of their keys.
    pub(crate) fn iter<'s>(&'s self) -> impl Iterator<Item = (&'s ObjectKey, &'s Arc<Value>)> + 's {
        self.range(Bound::Unbounded)
    }
}

/// Two iterators ordered by key, with no key in both, merged in that order.
struct Merged<L: Iterator, R: Iterator> {
    left: std::iter::Peekable<L>,
    right: std::iter::Peekable<R>,
}

impl<'a, L, R> Iterator for Merged<L, R>
where
    L: Iterator<Item = (&'a ObjectKey, &'a Arc<Value>)>,
    R: Iterator<Item = (&'a ObjectKey, &'a Arc<Value>)>,
{
    type Item = (&'a ObjectKey, &'a Arc<Value>);

    fn next(&mut self) -> Option<Self::Item> {
        match (self.left.peek(), self.right.peek()) {
            (Some((left, _)), Some((right, _))) if right < left => self.right.next(),
            (Some(_), _) => self.left.next(),
            (None, _) => self.right.next(),
        }
    }
}

/// The `(namespace, name)` an object is stored under.
pub(crate) fn key_of(object: &Value) -> ObjectKey {
    (
        object::namespace(object).to_string(),
        object::name(object).to_string(),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_scratch_copy_shares_the_objects_until_it_writes_and_never_leaks_back() {
        let mut state = State::new(100);
        let def = state.catalog.get("", "configmaps").unwrap().clone();
        let configmap = |name: &str, uid: &str| json!({"metadata": {"name": name, "namespace": "default", "uid": uid}});
        state.put(&def, configmap("kept", "uid-kept"));
        let mut scratch = state.scratch();
        assert!(Arc::ptr_eq(
            &state.objects[&def.key()],
            &scratch.objects[&def.key()]
        ));
        scratch.put(&def, configmap("tried", "uid-tried"));
        scratch.remove(&def, &("default".into(), "kept".into()));
        assert_eq!(scratch.object_count(), 1);
        assert!(scratch.uid_exists("uid-tried") && !scratch.uid_exists("uid-kept"));
        assert_eq!(state.object_count(), 1);
        assert!(state.uid_exists("uid-kept") && !state.uid_exists("uid-tried"));
        assert_eq!(state.history_len(), 1, "the scratch's changes are its own");
    }

    /// The names (and `data.v`) that a snapshot reads from `from` on.
    fn read(snapshot: &Snapshot<'_>, from: Bound<&ObjectKey>) -> Vec<(String, String)> {
        snapshot
            .range(from)
            .map(|(key, object)| {
                let v = object["data"]["v"].as_str().unwrap_or_default();
                (key.1.clone(), v.to_string())
            })
            .collect()
    }

    #[test]
    fn a_snapshot_reads_the_objects_as_they_were_whatever_changed_since() {
        let mut state = State::new(100);
        let def = state.catalog.get("", "configmaps").unwrap().clone();
        let configmap = |name: &str, v: &str| {
            json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
                   "data": {"v": v}})
        };
        for name in ["b", "d", "f"] {
            state.put(&def, configmap(name, "old"));
        }
        let then = state.resource_version();
        state.put(&def, configmap("a", "new"));
        state.put(&def, configmap("d", "new"));
        state.put(&def, configmap("d", "newer"));
        state.remove(&def, &("default".into(), "f".into()));
        state.put(&def, configmap("e", "new"));
        state.remove(&def, &("default".into(), "e".into()));
        state.remove(&def, &("default".into(), "b".into()));
        state.put(&def, configmap("b", "again"));

        let snapshot = state.objects_at(&def.key(), then).unwrap();
        let old = |names: &[&str]| -> Vec<(String, String)> {
            names
                .iter()
                .map(|n| (n.to_string(), "old".to_string()))
                .collect()
        };
        assert_eq!(read(&snapshot, Bound::Unbounded), old(&["b", "d", "f"]));
        let after_b = ("default".to_string(), "b".to_string());
        assert_eq!(read(&snapshot, Bound::Excluded(&after_b)), old(&["d", "f"]));
        let at_c = ("default".to_string(), "c".to_string());
        assert_eq!(read(&snapshot, Bound::Included(&at_c)), old(&["d", "f"]));
        assert!(snapshot.get(&("default".into(), "a".into())).is_none());
        assert!(snapshot.get(&("default".into(), "e".into())).is_none());
        assert_eq!(snapshot.get(&after_b).unwrap()["data"]["v"], "old");

        let now = state.snapshot(&def.key());
        let expected: Vec<(String, String)> = [("a", "new"), ("b", "again"), ("d", "newer")]
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        assert_eq!(read(&now, Bound::Unbounded), expected);
        assert!(state.objects_at(&def.key(), 0).is_some());
        state.compact();
        assert!(state.objects_at(&def.key(), then).is_none());
    }
}
