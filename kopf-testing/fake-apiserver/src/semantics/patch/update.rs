//! The managed-fields bookkeeping of every write that is not an apply.
//!
//! Every write that is not an apply (create, update, any other patch, on the main resource or
//! a subresource) records its author in `metadata.managedFields`, as Kubernetes' field
//! manager does; [`record_update`] does it on the object as it will be stored:
//!
//! 1. The author ([`Updater`]) is the `fieldManager` parameter or, without one, the
//!    User-Agent up to its first `/` ([`manager_or_user_agent`]: `kubectl/v1.32 (...)`
//!    gives `kubectl`; kubectl itself sends `fieldManager=kubectl-client-side-apply` for
//!    `kubectl apply`, `kubectl-create`, `kubectl-edit` and so on), the request's apiVersion,
//!    and the subresource (`status`, `scale`, ...). An `Update` entry's identity is all three;
//!    an entry with an empty manager has no `manager` key.
//! 2. The starting entries are the live object's, except on the main resource when the
//!    written object carries `metadata.managedFields` itself (`decodeLiveOrNew`): an empty
//!    list, or a list of one empty entry, resets them to none; a non-empty list whose
//!    entries all decode replaces them (this is how kubectl migrates a client-side-applied
//!    object to server-side apply, with a JSON patch of `metadata.managedFields`); anything
//!    else is ignored.
//! 3. An existing object without entries stays untracked, until its first apply
//!    (`skipNonAppliedManager`); a new object is always tracked (Kubernetes tracks creations
//!    with probability 1).
//! 4. The old and new objects (an empty one for a creation) are compared as server-side
//!    apply compares them (structured-merge-diff `Updater.Update`): fields changed or added
//!    by the write leave every entry, the author's own included, and go to the author's
//!    entry; removed fields leave every entry. The author's new fields exclude `apiVersion`,
//!    `kind` and the server's metadata, as for apply. So a creation owns every field, maps
//!    themselves included (`f:data: {".": {}, ...}`).
//! 5. Only when the author got fields does its entry get `time: now`, merged with its
//!    previous set; a write that changes nothing changes no entry. Empty entries disappear.
//! 6. At most ten `Update` entries are kept (`capManagersManager`): beyond that, the oldest
//!    ones (by time, then identity) are merged per apiVersion into an `ancient-changes`
//!    `Update` entry, which takes the time of the last entry merged into it; the oldest entry
//!    of each apiVersion only moves into it when a second one of that apiVersion joins.
//!    `Apply` entries never count.
//! 7. Entries are sorted as for apply.
//!
//! The server's own controllers record their writes too: `kube-apiserver` for a CRD's
//! `status` (subresource `status`) and its cleanup finalizer, `kube-controller-manager` for
//! the garbage collector and namespace finalization (subresource `finalize`). Deletions mark
//! objects without recording anything, as in Kubernetes.
//!
//! Simplifications, compared with a real API server:
//!
//! - The bookkeeping runs on the object as it will be stored, after admission and the
//!   server's rules for updates (status copied from the live object, server-owned metadata
//!   restored), instead of before the registry's strategy with per-resource reset fields; the
//!   effect is the same for the fields the fake server resets. A namespace's creator owns its
//!   `kubernetes.io/metadata.name` label (set by defaulting in Kubernetes too), but not
//!   `spec.finalizers` and `status.phase`, which the create strategy sets.
//! - Given `metadata.managedFields` that do not decode are ignored rather than rejected
//!   with 422; `fieldManager` is not validated; the User-Agent's non-printable characters
//!   are approximated by control characters and whitespace other than spaces.
//! - No version conversion: entries of every apiVersion are compared at face value.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fields::FieldSet;
use super::managed_fields::{
    Entry, decode_entries, decode_entry_list, is_trackable, sort_entries, store_entries,
};
use super::structured::{Comparison, Ssa};

/// Kubernetes keeps at most this many `Update` entries (`DefaultMaxUpdateManagers`).
const MAX_UPDATE_MANAGERS: usize = 10;

/// The manager that the oldest `Update` entries are merged into beyond the cap.
const ANCIENT_CHANGES: &str = "ancient-changes";

/// The longest manager name Kubernetes accepts (`FieldManagerMaxLength`), in bytes.
const MAX_MANAGER_LENGTH: usize = 128;

/// The author of a create or update (any write but an apply): the identity of its `Update`
/// entry in `metadata.managedFields`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Updater {
    /// The manager name; may be empty (then the entry has no `manager`).
    pub(crate) manager: String,
    /// The apiVersion of the request (`group/version`).
    pub(crate) api_version: String,
    /// The subresource written (`status`, `scale`, ...), empty for the main resource.
    pub(crate) subresource: String,
}

/// Kubernetes' `managerOrUserAgent`: the `fieldManager` parameter if given, or else the
/// User-Agent up to its first `/`, without control and whitespace characters other than
/// spaces, cut to 128 bytes.
pub(crate) fn manager_or_user_agent(
    field_manager: Option<&str>,
    user_agent: Option<&str>,
) -> String {
    if let Some(manager) = field_manager.filter(|manager| !manager.is_empty()) {
        return manager.to_string();
    }
    let prefix = user_agent
        .unwrap_or_default()
        .split('/')
        .next()
        .unwrap_or_default();
    let mut out = String::new();
    for c in prefix.chars() {
        if c.is_control() || (c.is_whitespace() && c != ' ') {
            continue;
        }
        if out.len() + c.len_utf8() > MAX_MANAGER_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

/// Whether a `metadata.managedFields` value given by a client asks for a reset: an empty
/// list, or a list of one empty entry.
fn is_reset(value: &Value) -> bool {
    let empty = |item: &Value| match item {
        Value::Object(map) => map
            .values()
            .all(|value| value.is_null() || value.as_str() == Some("")),
        _ => false,
    };
    match value {
        Value::Array(items) => match items.as_slice() {
            [] => true,
            [only] => empty(only),
            _ => false,
        },
        _ => false,
    }
}

/// Records a create (`live` is `None`) or an update of `live` into `new` by `updater` in
/// `new`'s `metadata.managedFields`, as Kubernetes' field manager does for every write that
/// is not an apply (see the module docs). `kind` selects the list table, `now` is the RFC 3339
/// time of a changed entry.
pub(crate) fn record_update(
    kind: Option<&str>,
    live: Option<&Value>,
    new: &mut Value,
    updater: &Updater,
    now: &str,
) {
    if !new.is_object() {
        return;
    }
    let live = live.filter(|live| live.is_object());
    let live_entries = || live.map(decode_entries).unwrap_or_default();
    let given = new.pointer("/metadata/managedFields").cloned();
    let mut entries = match given {
        // Subresources never take managed fields from the request.
        _ if !updater.subresource.is_empty() => live_entries(),
        None | Some(Value::Null) => live_entries(),
        Some(value) if is_reset(&value) => Vec::new(),
        Some(Value::Array(items)) => match decode_entry_list(&items, true) {
            Some(entries) if !entries.is_empty() => entries,
            _ => live_entries(),
        },
        Some(_) => live_entries(),
    };
    let without_managed = |object: &Value| {
        let mut copy = object.clone();
        if let Some(Value::Object(meta)) = copy.get_mut("metadata") {
            meta.shift_remove("managedFields");
        }
        copy
    };
    let new_content = without_managed(new);
    // An existing object without managed fields stays untracked until its first apply
    // (`skipNonAppliedManager`); a new one is always tracked.
    if live.is_some() && entries.is_empty() {
        store_entries(new, &[]);
        return;
    }
    let live_content = live
        .map(without_managed)
        .unwrap_or_else(|| Value::Object(Map::new()));

    let ssa = Ssa { kind };
    let mut comparison = Comparison::default();
    ssa.compare(
        &live_content,
        &new_content,
        &mut Vec::new(),
        &mut Vec::new(),
        &mut comparison,
    );
    let changed: FieldSet = comparison
        .modified
        .union(&comparison.added)
        .cloned()
        .collect();
    for entry in &mut entries {
        entry
            .set
            .retain(|path| !changed.contains(path) && !comparison.removed.contains(path));
    }
    let mine: FieldSet = changed
        .into_iter()
        .filter(|path| is_trackable(path))
        .collect();
    if !mine.is_empty() {
        let me = Entry {
            manager: updater.manager.clone(),
            operation: "Update".into(),
            api_version: updater.api_version.clone(),
            subresource: updater.subresource.clone(),
            time: Some(now.to_string()),
            set: mine,
        };
        match entries.iter_mut().find(|entry| entry.same_manager(&me)) {
            Some(known) => {
                known.set.extend(me.set);
                known.time = me.time;
            }
            None => entries.push(me),
        }
    }
    entries.retain(|entry| !entry.set.is_empty());
    cap_update_managers(&mut entries);
    sort_entries(&mut entries);
    store_entries(new, &entries);
}

/// Kubernetes' `capManagersManager`: beyond [`MAX_UPDATE_MANAGERS`] `Update` entries, the
/// oldest ones (by time, then identity) are merged, per apiVersion, into an
/// `ancient-changes` entry that takes the time of the last one merged into it. The first
/// oldest entry of each apiVersion only moves into the bucket when a second one joins it.
fn cap_update_managers(entries: &mut Vec<Entry>) {
    let mut updaters: Vec<usize> = (0..entries.len())
        .filter(|&index| entries.get(index).is_some_and(|e| e.operation == "Update"))
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    let order = |entry: &Entry| {
        (
            entry.time.clone().unwrap_or_default(),
            entry.manager.clone(),
            entry.api_version.clone(),
            entry.subresource.clone(),
        )
    };
    updaters.sort_by_key(|&index| entries.get(index).map(order));
    let mut dropped = vec![false; entries.len()];
    let mut first_of_version: BTreeMap<String, usize> = BTreeMap::new();
    let mut length = updaters.len();
    for index in updaters {
        if length <= MAX_UPDATE_MANAGERS {
            break;
        }
        let Some(version) = entries.get(index).map(|e| e.api_version.clone()) else {
            continue;
        };
        let Some(&first) = first_of_version.get(&version) else {
            first_of_version.insert(version, index);
            continue;
        };
        let existing = (0..entries.len()).find(|&other| {
            !dropped.get(other).copied().unwrap_or(true)
                && entries.get(other).is_some_and(|e| {
                    e.manager == ANCIENT_CHANGES
                        && e.operation == "Update"
                        && e.api_version == version
                        && e.subresource.is_empty()
                })
        });
        let bucket = match existing {
            Some(bucket) if bucket == index => continue,
            Some(bucket) => bucket,
            None => {
                if let Some(entry) = entries.get_mut(first) {
                    entry.manager = ANCIENT_CHANGES.to_string();
                    entry.subresource = String::new();
                }
                first
            }
        };
        let Some((set, time)) = entries
            .get_mut(index)
            .map(|e| (std::mem::take(&mut e.set), e.time.clone()))
        else {
            continue;
        };
        if let Some(entry) = entries.get_mut(bucket) {
            entry.set.extend(set);
            entry.time = time;
        }
        if let Some(flag) = dropped.get_mut(index) {
            *flag = true;
        }
        length -= 1;
    }
    let mut index = 0;
    entries.retain(|_| {
        let keep = !dropped.get(index).copied().unwrap_or(false);
        index += 1;
        keep
    });
}
