//! `Patch`: the changes a handler asks for, applied by the framework after the handler.
//!
//! ```
//! # let mut patch = kopf::Patch::default();
//! patch.status().insert("phase".into(), "Running".into());
//! patch.labels().insert("app".into(), "web".into());
//! patch.set("spec.replicas", 3);
//! patch.remove("spec.obsolete");
//! ```
//!
//! Merge-patch changes go to the object (and, for a resource with a `status` subresource, the
//! `status` part to `/status`); [`Patch::operation`] adds JSON-patch operations.

use serde::Serialize;
use serde_json::{Map, Value, json};

/// Changes to an object, gathered while handlers run and sent in as few requests as possible.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Patch {
    merge: Map<String, Value>,
    operations: Vec<Value>,
}

impl Patch {
    /// Whether there is nothing to send.
    pub fn is_empty(&self) -> bool {
        self.merge.is_empty() && self.operations.is_empty()
    }

    /// The map at a top-level key (`status`, `spec`, ...), created when absent.
    pub fn section(&mut self, key: &str) -> &mut Map<String, Value> {
        object_at(&mut self.merge, &[key])
    }

    /// `status`, merged into the object's status.
    pub fn status(&mut self) -> &mut Map<String, Value> {
        self.section("status")
    }

    /// `spec`, merged into the object's spec.
    pub fn spec(&mut self) -> &mut Map<String, Value> {
        self.section("spec")
    }

    /// `metadata.labels`; a `null` value removes a label.
    pub fn labels(&mut self) -> &mut Map<String, Value> {
        object_at(&mut self.merge, &["metadata", "labels"])
    }

    /// `metadata.annotations`; a `null` value removes an annotation.
    pub fn annotations(&mut self) -> &mut Map<String, Value> {
        object_at(&mut self.merge, &["metadata", "annotations"])
    }

    /// Sets the value at a dotted path (`"spec.replicas"`). A value that does not serialize
    /// is stored as `null`.
    pub fn set(&mut self, path: &str, value: impl Serialize) {
        let parts: Vec<&str> = path.split('.').collect();
        let (last, parents) = parts.split_last().expect("split always yields one part");
        let value = serde_json::to_value(value).unwrap_or(Value::Null);
        object_at(&mut self.merge, parents).insert((*last).to_string(), value);
    }

    /// Removes the field at a dotted path (a `null` in the merge patch).
    pub fn remove(&mut self, path: &str) {
        self.set(path, Value::Null);
    }

    /// Adds a JSON-patch (RFC 6902) operation, e.g.
    /// `json!({"op": "add", "path": "/spec/items/-", "value": 1})`.
    pub fn operation(&mut self, operation: Value) {
        self.operations.push(operation);
    }

    /// Merges a value at a top-level key (as produced by the storages) into the patch.
    pub(crate) fn merge_raw(&mut self, key: &str, value: Value) {
        let mut single = Map::new();
        single.insert(key.to_string(), value);
        merge_into(&mut self.merge, single);
    }

    /// Merges another patch into this one (its values win).
    pub fn merge(&mut self, other: Patch) {
        merge_into(&mut self.merge, other.merge);
        self.operations.extend(other.operations);
    }

    /// The merge patch as JSON.
    pub fn as_merge(&self) -> &Map<String, Value> {
        &self.merge
    }

    /// The JSON-patch operations.
    pub fn operations(&self) -> &[Value] {
        &self.operations
    }

    /// Takes the `status` part out (its inner value), for resources whose status is a
    /// subresource; [`Patch::merge_raw`] with `"status"` puts it back.
    pub(crate) fn take_status(&mut self) -> Option<Value> {
        self.merge.remove("status")
    }

    /// Takes the whole merge patch out, status included (`None` when empty).
    pub(crate) fn take_merge(&mut self) -> Option<Map<String, Value>> {
        (!self.merge.is_empty()).then(|| std::mem::take(&mut self.merge))
    }

    /// The object as it would be once the merge patch is applied (RFC 7386: a `null`
    /// removes); the JSON-patch operations are left out.
    pub(crate) fn applied_to(&self, object: &Value) -> Value {
        let mut object = object.clone();
        apply_merge(&mut object, &self.merge);
        object
    }

    /// Takes the JSON-patch operations out.
    pub(crate) fn take_operations(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.operations)
    }
}

fn object_at<'a>(root: &'a mut Map<String, Value>, path: &[&str]) -> &'a mut Map<String, Value> {
    let mut node = root;
    for key in path {
        let entry = node.entry((*key).to_string()).or_insert_with(|| json!({}));
        if !entry.is_object() {
            *entry = json!({});
        }
        node = entry.as_object_mut().expect("made an object above");
    }
    node
}

fn apply_merge(target: &mut Value, patch: &Map<String, Value>) {
    if !target.is_object() {
        *target = json!({});
    }
    let target = target.as_object_mut().expect("made an object above");
    for (key, value) in patch {
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(inner) => {
                apply_merge(target.entry(key.clone()).or_insert(Value::Null), inner);
            }
            value => {
                target.insert(key.clone(), value.clone());
            }
        }
    }
}

fn merge_into(target: &mut Map<String, Value>, source: Map<String, Value>) {
    for (key, value) in source {
        match (target.get_mut(&key), value) {
            (Some(Value::Object(existing)), Value::Object(incoming)) => {
                merge_into(existing, incoming)
            }
            (_, value) => {
                target.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_a_merge_patch() {
        let mut patch = Patch::default();
        assert!(patch.is_empty());
        patch.status().insert("phase".into(), json!("Running"));
        patch.set("spec.replicas", 3);
        patch.remove("spec.obsolete");
        patch.labels().insert("app".into(), json!("web"));
        assert_eq!(
            Value::Object(patch.as_merge().clone()),
            json!({"status": {"phase": "Running"}, "spec": {"replicas": 3, "obsolete": null}, "metadata": {"labels": {"app": "web"}}})
        );
        assert_eq!(patch.take_status(), Some(json!({"phase": "Running"})));
        assert_eq!(patch.take_merge().unwrap()["spec"]["replicas"], 3);
        assert!(patch.take_operations().is_empty());
        assert!(patch.is_empty());
    }

    #[test]
    fn applies_the_merge_patch_to_an_object() {
        let mut patch = Patch::default();
        patch.set("spec.replicas", 3);
        patch.remove("spec.obsolete");
        patch.annotations().insert("a".into(), json!("x"));
        patch.operation(json!({"op": "remove", "path": "/spec/kept"}));
        let object =
            json!({"metadata": {"name": "n"}, "spec": {"obsolete": 1, "kept": 2, "replicas": 1}});
        assert_eq!(
            patch.applied_to(&object),
            json!({"metadata": {"name": "n", "annotations": {"a": "x"}}, "spec": {"kept": 2, "replicas": 3}})
        );
    }

    #[test]
    fn merges_patches() {
        let mut a = Patch::default();
        a.set("status.a", 1);
        a.set("status.nested.x", 1);
        let mut b = Patch::default();
        b.set("status.b", 2);
        b.set("status.nested.y", 2);
        b.operation(json!({"op": "remove", "path": "/spec/x"}));
        a.merge(b);
        assert_eq!(
            Value::Object(a.as_merge().clone()),
            json!({"status": {"a": 1, "nested": {"x": 1, "y": 2}, "b": 2}})
        );
        assert_eq!(a.operations().len(), 1);
    }
}
