//! `metadata.managedFields` entries: decoding, identity, ordering, and writing them back.

use serde_json::{Map, Value};

use super::fields::{FieldSet, Pe, decode_fields, encode_fields};

/// The annotation of client-side `kubectl apply`.
pub(super) const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The manager of `kubectl apply --server-side`, the only one that Kubernetes lets take
/// over client-side-applied fields and that keeps [`LAST_APPLIED`] up to date.
pub(super) const KUBECTL: &str = "kubectl";

/// The limit on the total size of an object's annotations (keys and values), in bytes.
pub(super) const MAX_ANNOTATIONS_SIZE: usize = 256 * 1024;

/// Metadata fields set by the server: dropped from applied objects, copied from live.
pub(super) const SERVER_OWNED_METADATA: &[&str] = &[
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Metadata fields that are never in a manager's set (Kubernetes' `stripMetaManager`).
const IGNORED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "clusterName",
    "generation",
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Whether a path is never tracked in managed fields.
pub(super) fn is_ignored_path(path: &[Pe]) -> bool {
    let names: Vec<Option<&str>> = path.iter().take(2).map(Pe::field_name).collect();
    match names.as_slice() {
        [Some("apiVersion" | "kind" | "metadata")] => true,
        [Some("metadata"), Some("managedFields")] => true,
        [Some("metadata"), Some(field)] => path.len() == 2 && IGNORED_METADATA.contains(field),
        _ => false,
    }
}

/// Whether a path can be owned: not an ignored one, and with no live list item that has no
/// key (such an item has no FieldsV1 name).
pub(super) fn is_trackable(path: &[Pe]) -> bool {
    !is_ignored_path(path) && path.iter().all(|pe| pe.rank != 4)
}

/// One entry of `metadata.managedFields`.
#[derive(Clone, Debug)]
pub(super) struct Entry {
    /// The manager name.
    pub(super) manager: String,
    /// `Apply` or `Update`.
    pub(super) operation: String,
    /// The apiVersion the fields were recorded with.
    pub(super) api_version: String,
    /// The subresource, empty for the main resource.
    pub(super) subresource: String,
    /// When the entry last changed the object.
    pub(super) time: Option<String>,
    /// The owned fields.
    pub(super) set: FieldSet,
}

/// Decoding, identity, display and encoding of entries.
impl Entry {
    /// Decodes an entry; `None` when it is malformed.
    fn decode(value: &Value) -> Option<Entry> {
        let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
        let operation = text("operation")?;
        if operation != "Apply" && operation != "Update" {
            return None;
        }
        if value.get("fieldsType").and_then(Value::as_str) != Some("FieldsV1") {
            return None;
        }
        let mut set = FieldSet::new();
        match value.get("fieldsV1") {
            None | Some(Value::Null) => {}
            Some(fields) => decode_fields(fields, &mut Vec::new(), &mut set)?,
        }
        Some(Entry {
            manager: text("manager").unwrap_or_default(),
            operation,
            api_version: text("apiVersion").filter(|v| !v.is_empty())?,
            subresource: text("subresource").unwrap_or_default(),
            time: text("time"),
            set,
        })
    }

    /// Kubernetes' `BuildManagerIdentifier`: the apiVersion counts only for updates.
    pub(super) fn same_manager(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == "Apply" || self.api_version == other.api_version)
    }

    /// Kubernetes' `printManager`.
    pub(super) fn describe(&self) -> String {
        let mut out = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            out.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == "Update" {
            out.push_str(&format!(" using {}", self.api_version));
            if let Some(time) = &self.time {
                out.push_str(&format!(" at {time}"));
            }
        }
        out
    }

    /// Encodes the entry in the field order of `metav1.ManagedFieldsEntry` (an empty
    /// manager is left out, as Go's `omitempty` does).
    fn encode(&self) -> Value {
        let mut map = Map::new();
        if !self.manager.is_empty() {
            map.insert("manager".into(), Value::String(self.manager.clone()));
        }
        map.insert("operation".into(), Value::String(self.operation.clone()));
        map.insert("apiVersion".into(), Value::String(self.api_version.clone()));
        if let Some(time) = &self.time {
            map.insert("time".into(), Value::String(time.clone()));
        }
        map.insert("fieldsType".into(), Value::String("FieldsV1".into()));
        map.insert("fieldsV1".into(), encode_fields(&self.set));
        if !self.subresource.is_empty() {
            map.insert(
                "subresource".into(),
                Value::String(self.subresource.clone()),
            );
        }
        Value::Object(map)
    }
}

/// Decodes `metadata.managedFields`, dropping malformed entries and merging duplicates.
pub(super) fn decode_entries(object: &Value) -> Vec<Entry> {
    match object.pointer("/metadata/managedFields") {
        Some(Value::Array(items)) => decode_entry_list(items, false).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Decodes a list of managed-fields entries, merging duplicates; a malformed entry is
/// dropped, or makes the whole list `None` when `strict`.
pub(super) fn decode_entry_list(items: &[Value], strict: bool) -> Option<Vec<Entry>> {
    let mut entries: Vec<Entry> = Vec::new();
    for item in items {
        let Some(entry) = Entry::decode(item) else {
            if strict {
                return None;
            }
            continue;
        };
        match entries.iter_mut().find(|known| known.same_manager(&entry)) {
            Some(known) => known.set.extend(entry.set),
            None => entries.push(entry),
        }
    }
    Some(entries)
}

/// Sorts entries as Kubernetes sorts `metadata.managedFields`: by operation (`Apply` first),
/// time, manager, apiVersion and subresource.
pub(super) fn sort_entries(entries: &mut [Entry]) {
    entries.sort_by(|a, b| {
        (
            &a.operation,
            a.time.as_deref().unwrap_or_default(),
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                b.time.as_deref().unwrap_or_default(),
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
}

/// Stores `entries` as `metadata.managedFields` (removed when there are none).
pub(super) fn store_entries(object: &mut Value, entries: &[Entry]) {
    let Value::Object(map) = object else {
        return;
    };
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(meta) = meta else {
        return;
    };
    if entries.is_empty() {
        meta.shift_remove("managedFields");
    } else {
        meta.insert(
            "managedFields".to_string(),
            Value::Array(entries.iter().map(Entry::encode).collect()),
        );
    }
}
