//! Server-side apply, simplified.
//!
//! [`server_side_apply`] follows the structured-merge-diff algorithm that backs
//! `kubectl apply --server-side`, without OpenAPI schemas:
//!
//! 1. `applied` must be an object with `apiVersion` and `kind` (equal to `kind` when that is
//!    given), and `field_manager` must not be empty; its `metadata.managedFields`
//!    and the server-owned metadata (`resourceVersion`, `uid`, `creationTimestamp`,
//!    `generation`, `selfLink`, `deletionTimestamp`, `deletionGracePeriodSeconds`) are
//!    dropped. The result carries those fields, and `metadata.name`/`namespace`, from `live`.
//! 2. The applied field set is computed as Kubernetes does (`ToFieldSet`), minus `apiVersion`,
//!    `kind`, and the metadata fields above, and is encoded as FieldsV1 (`f:<field>`,
//!    `k:{"key":value}` for keyed list items, `v:<json>` for set items, `.` for an item or
//!    map that is owned itself).
//! 3. `applied` is merged into `live`: maps recursively, keyed and set lists item by item
//!    (same ordering rules as structured-merge-diff), every other list atomically. The list
//!    table is the strategic-merge table above, with the keys Kubernetes uses for apply:
//!    container ports and Service ports are keyed by `(port, protocol)` with `protocol`
//!    defaulting to `"TCP"`, `topologySpreadConstraints` by `(topologyKey,
//!    whenUnsatisfiable)`, `finalizers` are a set, and Pod `podIPs`/`hostIPs` are atomic.
//! 4. Fields that this manager applied last time (its `Apply` entry) and no longer applies
//!    are removed, unless some other manager's set (or the new applied set) still owns them
//!    or something below them.
//! 5. A field owned by another manager whose value changes, which is added, or which the
//!    applied object removes (by setting it or a parent to `null` or to a value of another
//!    type), is a conflict. Without `force` the whole apply fails
//!    with [`PatchError::Conflict`] and a Kubernetes-style message; with `force` those fields
//!    move to this manager. Other managers also lose fields that were removed. The message
//!    keeps Kubernetes' exact wording (`Apply failed with 1 conflict: conflict with
//!    "alice": .spec.replicas`; several conflicts are grouped by manager, one path a line),
//!    and [`PatchError::Conflict`] also lists each field for the Status `causes`.
//! 6. The switch from client-side to server-side apply (Kubernetes' `lastAppliedManager`):
//!    for the manager `kubectl` only, the conflicts on fields of the live object's
//!    `kubectl.kubernetes.io/last-applied-configuration` annotation are forgiven when the
//!    annotation is a JSON object with a `kind` and the applied `apiVersion`, and the field
//!    still has its last-applied value (fields the live object changed, added or removed
//!    since are not forgiven). When every conflict is forgiven, the apply goes on as forced;
//!    otherwise only the other conflicts are reported.
//! 7. After an apply by `kubectl` (`lastAppliedUpdater`), an existing non-empty annotation is
//!    rewritten to the applied object without that annotation, as Go's JSON encoder writes it
//!    (sorted keys, `<`, `>` and `&` escaped, a final newline); it is dropped if the
//!    annotations would exceed 256 KiB. Its ownership does not change.
//! 8. `metadata.managedFields` is rewritten: entries whose set became empty disappear, the
//!    manager's `Apply` entry gets `time: now` when the object changed (it keeps its old
//!    time on a no-op apply), and entries are sorted as Kubernetes sorts them.
//!
//! Simplifications, compared with a real API server:
//!
//! - There is no OpenAPI schema: every map is treated as a struct with granular fields
//!   (so `LabelSelector`s and other atomic structs are merged key by key), and every list
//!   not in the table is atomic, which is also the default for custom resources. `kind` is
//!   `None` for custom resources: then only the `metadata` lists are keyed.
//! - No defaulting, validation, or version conversion; `apiVersion` is not checked against
//!   the live object or the URL. Every managed-fields entry is compared at face value,
//!   whatever its `apiVersion`.
//! - A `null` in `applied` removes the field from the result (the manager still owns it),
//!   instead of being stored and later dropped by decoding into a Go struct.
//! - `status` is treated like any other field: subresource semantics (ignoring `status` on
//!   the main resource, or everything else on `/status`) are the caller's job, as are
//!   preconditions such as `metadata.resourceVersion` in the applied object.
//! - `metadata.managedFields` in `applied` is ignored (Kubernetes answers 400), and live
//!   entries that cannot be decoded are dropped instead of failing the request. When the
//!   live object has no managed fields at all, its current fields are given to a
//!   `before-first-apply` `Update` manager, as Kubernetes does, so changing them is a
//!   conflict (one that the last-applied exception above may forgive).
//! - Live list items that cannot be keyed (no key field) are never owned by anyone.
//! - An apply adds no `Update` entry besides `before-first-apply`, so the cap on `Update`
//!   entries (below) is applied by [`record_update`] only.

use serde_json::{Map, Value};

use super::error::{ApplyConflict, PatchError, bad};
use super::fields::{FieldPath, FieldSet, Pe, closure, display_path};
use super::managed_fields::{
    Entry, KUBECTL, LAST_APPLIED, MAX_ANNOTATIONS_SIZE, SERVER_OWNED_METADATA, decode_entries,
    is_ignored_path, is_trackable, sort_entries, store_entries,
};
use super::structured::{Comparison, Ssa};
use crate::semantics::go_format::go_json;

/// Server-side apply (simplified, documented in the module docs): see below.
///
/// `kind` selects the list table (`None` for custom resources), `live` is the stored
/// object (`None` to create it), `applied` the apply configuration, `now` the RFC 3339
/// time written into the manager's entry. Returns the object to store, with its
/// `metadata.managedFields`.
pub(crate) fn server_side_apply(
    kind: Option<&str>,
    live: Option<&Value>,
    applied: &Value,
    field_manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, PatchError> {
    if field_manager.is_empty() {
        return Err(bad("fieldManager is required for apply patches"));
    }
    let Value::Object(applied_map) = applied else {
        return Err(bad("apply patch must be a JSON object"));
    };
    let required = |key: &str| {
        applied_map
            .get(key)
            .and_then(Value::as_str)
            .filter(|value| !value.is_empty())
            .ok_or_else(|| bad(format!("apply patch must set {key}")))
    };
    let api_version = required("apiVersion")?;
    let applied_kind = required("kind")?;
    if let Some(kind) = kind
        && kind != applied_kind
    {
        return Err(bad(format!(
            "apply patch kind {applied_kind:?} does not match the object's kind {kind:?}"
        )));
    }
    let ssa = Ssa { kind };

    let mut config = applied.clone();
    strip_server_metadata(&mut config);
    let mut config_set = FieldSet::new();
    ssa.apply_set(&config, &mut Vec::new(), &mut Vec::new(), &mut config_set)
        .map_err(bad)?;
    config_set.retain(|path| !is_ignored_path(path));

    let live_object = live.filter(|value| value.is_object());
    let mut live_content = live_object
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    if let Some(Value::Object(meta)) = live_content.get_mut("metadata") {
        meta.shift_remove("managedFields");
    }
    let mut entries = live_object.map(decode_entries).unwrap_or_default();
    if live_object.is_some() && entries.is_empty() {
        let mut set = FieldSet::new();
        ssa.all_paths(&live_content, &mut Vec::new(), &mut Vec::new(), &mut set);
        set.retain(|path| is_trackable(path));
        if !set.is_empty() {
            let live_version = live_content.get("apiVersion").and_then(Value::as_str);
            entries.push(Entry {
                manager: "before-first-apply".into(),
                operation: "Update".into(),
                api_version: live_version.unwrap_or(api_version).to_string(),
                subresource: String::new(),
                time: Some(now.to_string()),
                set,
            });
        }
    }

    let me = Entry {
        manager: field_manager.to_string(),
        operation: "Apply".into(),
        api_version: api_version.to_string(),
        subresource: String::new(),
        time: None,
        set: config_set.clone(),
    };
    let previous = entries
        .iter()
        .position(|entry| entry.same_manager(&me))
        .map(|index| entries.remove(index));

    let mut result = ssa
        .merge(&live_content, &config, &mut Vec::new())
        .map_err(bad)?;

    if let Some(last) = previous
        .as_ref()
        .map(|entry| &entry.set)
        .filter(|set| !set.is_empty())
    {
        let owned = closure(entries.iter().map(|entry| &entry.set).chain([&config_set]));
        let candidates: Vec<FieldPath> = closure([last]).difference(&owned).cloned().collect();
        let mut removals: Vec<FieldPath> = Vec::new();
        for path in candidates {
            if removals.iter().any(|done| path.starts_with(done))
                || is_key_of_kept_item(&path, &owned)
            {
                continue;
            }
            removals.push(path);
        }
        for path in &removals {
            ssa.remove_path(&mut result, path, &mut Vec::new());
        }
    }

    let mut comparison = Comparison::default();
    ssa.compare(
        &live_content,
        &result,
        &mut Vec::new(),
        &mut Vec::new(),
        &mut comparison,
    );
    let mut changed: FieldSet = comparison
        .modified
        .union(&comparison.added)
        .cloned()
        .collect();
    // Fields removed because the applied object set them (or a parent) to something else,
    // such as `null`, count as modified.
    changed.extend(
        comparison
            .removed
            .iter()
            .filter(|path| {
                (1..=path.len()).any(|end| {
                    path.get(..end)
                        .is_some_and(|prefix| config_set.contains(prefix))
                })
            })
            .cloned(),
    );

    let mut conflicts: Vec<(usize, FieldSet)> = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let overlap: FieldSet = entry.set.intersection(&changed).cloned().collect();
        if !overlap.is_empty() {
            conflicts.push((index, overlap));
        }
    }
    if !conflicts.is_empty() && !force {
        // Kubernetes' `lastAppliedManager`: for `kubectl`, fields that the last client-side
        // apply set, and that still have those values, do not conflict; when nothing else
        // does, the apply is forced.
        let allowed = (field_manager == KUBECTL)
            .then(|| ssa.last_applied_fields(&live_content, api_version))
            .flatten()
            .unwrap_or_default();
        let remaining: Vec<(usize, FieldSet)> = conflicts
            .iter()
            .map(|(index, set)| (*index, set.difference(&allowed).cloned().collect()))
            .filter(|(_, set): &(usize, FieldSet)| !set.is_empty())
            .collect();
        if !remaining.is_empty() {
            return Err(conflict_error(&entries, &remaining));
        }
    }
    for (index, overlap) in &conflicts {
        if let Some(entry) = entries.get_mut(*index) {
            entry.set.retain(|path| !overlap.contains(path));
        }
    }
    for entry in &mut entries {
        entry.set.retain(|path| !comparison.removed.contains(path));
    }
    entries.retain(|entry| !entry.set.is_empty());

    if field_manager == KUBECTL {
        sync_last_applied(&mut result, applied);
    }

    let object_changed = live_object.is_none() || result != live_content;
    if !config_set.is_empty() {
        let time = match previous.and_then(|entry| entry.time) {
            Some(time) if !object_changed => time,
            _ => now.to_string(),
        };
        entries.push(Entry {
            time: Some(time),
            ..me
        });
    }
    sort_entries(&mut entries);

    finish_metadata(&mut result, live_object, &entries);
    Ok(result)
}

/// Removes `metadata.managedFields` and the server-owned metadata from an applied object.
fn strip_server_metadata(object: &mut Value) {
    if let Some(Value::Object(meta)) = object.get_mut("metadata") {
        meta.shift_remove("managedFields");
        for field in SERVER_OWNED_METADATA {
            meta.shift_remove(*field);
        }
    }
}

/// Kubernetes' `lastAppliedUpdater`: after an apply by `kubectl`, an existing
/// last-applied-configuration annotation is rewritten to the applied object (without the
/// annotation), as Go's JSON encoder writes it; it is dropped if the annotations grow
/// beyond their 256 KiB limit.
fn sync_last_applied(result: &mut Value, applied: &Value) {
    let Some(Value::Object(annotations)) = result.pointer_mut("/metadata/annotations") else {
        return;
    };
    if annotations
        .get(LAST_APPLIED)
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return;
    }
    let mut config = applied.clone();
    if let Some(Value::Object(own)) = config.pointer_mut("/metadata/annotations") {
        own.shift_remove(LAST_APPLIED);
    }
    let text = format!("{}\n", go_json(&config));
    annotations.insert(LAST_APPLIED.to_string(), Value::String(text));
    let size: usize = annotations
        .iter()
        .map(|(key, value)| key.len() + value.as_str().map_or(0, str::len))
        .sum();
    if size > MAX_ANNOTATIONS_SIZE {
        annotations.shift_remove(LAST_APPLIED);
    }
}

/// Copies the server-owned metadata (and name/namespace) from `live` and stores the
/// managed fields.
fn finish_metadata(result: &mut Value, live: Option<&Value>, entries: &[Entry]) {
    let Value::Object(object) = result else {
        return;
    };
    let meta_value = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta_value.is_object() {
        *meta_value = Value::Object(Map::new());
    }
    let Value::Object(meta) = meta_value else {
        return;
    };
    let live_meta = live.and_then(|live| live.get("metadata"));
    for field in SERVER_OWNED_METADATA {
        match live_meta.and_then(|live_meta| live_meta.get(*field)) {
            Some(value) => {
                meta.insert((*field).to_string(), value.clone());
            }
            None => {
                meta.shift_remove(*field);
            }
        }
    }
    if let Some(live_meta) = live_meta {
        for field in ["name", "namespace"] {
            if let Some(value) = live_meta.get(field) {
                meta.insert(field.to_string(), value.clone());
            }
        }
    }
    store_entries(result, entries);
}

/// Whether `path` is a key field of a keyed list item that stays owned: pruning must not
/// strip the key of an item that survives.
fn is_key_of_kept_item(path: &[Pe], owned: &FieldSet) -> bool {
    let [item_path @ .., last] = path else {
        return false;
    };
    let (Some(item), Some(name)) = (item_path.last(), last.field_name()) else {
        return false;
    };
    item.key_fields()
        .is_some_and(|fields| fields.contains_key(name))
        && owned.contains(item_path)
}

/// Builds the 409 error for apply conflicts, worded as Kubernetes words it.
fn conflict_error(entries: &[Entry], conflicts: &[(usize, FieldSet)]) -> PatchError {
    let mut groups: Vec<(&Entry, &FieldSet)> = conflicts
        .iter()
        .filter_map(|(index, set)| entries.get(*index).map(|entry| (entry, set)))
        .collect();
    groups.sort_by(|a, b| {
        (
            &a.0.manager,
            &a.0.operation,
            &a.0.api_version,
            &a.0.subresource,
        )
            .cmp(&(
                &b.0.manager,
                &b.0.operation,
                &b.0.api_version,
                &b.0.subresource,
            ))
    });
    let mut causes = Vec::new();
    let mut lines = Vec::new();
    for (entry, set) in &groups {
        let manager = entry.describe();
        lines.push(format!("conflicts with {manager}:"));
        for path in *set {
            let field = display_path(path);
            lines.push(format!("- {field}"));
            causes.push(ApplyConflict {
                manager: entry.manager.clone(),
                message: format!("conflict with {manager}"),
                field,
            });
        }
    }
    let message = match causes.as_slice() {
        [only] => format!(
            "Apply failed with 1 conflict: {}: {}",
            only.message, only.field
        ),
        _ => format!(
            "Apply failed with {} conflicts: {}",
            causes.len(),
            lines.join("\n")
        ),
    };
    PatchError::Conflict {
        message,
        conflicts: causes,
    }
}
