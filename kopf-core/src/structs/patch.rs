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
//! `status` part to `/status`); [`Patch::operation`] adds JSON-patch operations, and
//! [`Patch::function`] functions that change the object as it is when it is written.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value, json};

/// A function of a [`Patch`] (Kopf's `kopf.PatchFn`): it changes the object in place, and
/// what it changed is written. See [`Patch::function`].
pub type PatchFn = Arc<dyn Fn(&mut Value) + Send + Sync>;

/// Changes to an object, gathered while handlers run and sent in as few requests as possible.
#[derive(Clone, Default)]
pub struct Patch {
    merge: Map<String, Value>,
    /// The JSON-patch operations and the functions, boxed and `None` until one is added: most
    /// patches have neither, and a patch waits in every object's processing future during a
    /// burst (see `reactor::processing`), so it is kept to two words.
    more: Option<Box<More>>,
}

/// What few patches have: JSON-patch operations and functions.
#[derive(Clone, Default)]
struct More {
    operations: Vec<Value>,
    functions: Vec<PatchFn>,
}

impl fmt::Debug for Patch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Patch")
            .field("merge", &self.merge)
            .field("operations", &self.operations())
            .field("functions", &self.functions().len())
            .finish()
    }
}

/// Equal when the changes are, and the functions are the same ones.
impl PartialEq for Patch {
    fn eq(&self, other: &Self) -> bool {
        self.merge == other.merge
            && self.operations() == other.operations()
            && self.functions().len() == other.functions().len()
            && (self.functions().iter().zip(other.functions())).all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

impl Patch {
    /// Whether there is nothing to send.
    pub fn is_empty(&self) -> bool {
        self.merge.is_empty() && self.operations().is_empty() && self.functions().is_empty()
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
        self.more.get_or_insert_default().operations.push(operation);
    }

    /// Adds a function that changes the object when the patch is written (Kopf's
    /// `patch.fns.append(fn)`): for changes that depend on the object as it is then, such as
    /// an item added to or removed from a list. The function is given a copy of the object
    /// with the patch's merge changes applied (as in Kopf: merges first, then the functions,
    /// in the order added), and what it changes is written as JSON-patch operations, guarded
    /// by the object's version as [`operation`](Self::operation)s are: if the object changed
    /// meanwhile, nothing of them is written and the handlers run again on the newer version.
    /// For a resource with a `status` subresource, its changes to `status` are merged into
    /// the `status` written there. In a mutating admission handler, its changes are in the
    /// response's patch.
    ///
    /// A function may be called more than once (again when a write is tried again), so it
    /// should make the object right rather than count on its state: add an item only if it
    /// is missing.
    ///
    /// ```
    /// use serde_json::{Value, json};
    ///
    /// #[kopf::on_create("kopfexamples")]
    /// fn create_fn(patch: &mut kopf::Patch) {
    ///     patch.function(|body: &mut Value| {
    ///         let finalizers = &mut body["metadata"]["finalizers"];
    ///         if !finalizers.is_array() {
    ///             *finalizers = json!([]);
    ///         }
    ///         let list = finalizers.as_array_mut().expect("made a list above");
    ///         if !list.contains(&json!("example.com/cleanup")) {
    ///             list.push(json!("example.com/cleanup"));
    ///         }
    ///     });
    /// }
    /// ```
    pub fn function(&mut self, function: impl Fn(&mut Value) + Send + Sync + 'static) {
        self.more
            .get_or_insert_default()
            .functions
            .push(Arc::new(function));
    }

    /// The functions added (Kopf's `patch.fns`), in their order.
    pub fn functions(&self) -> &[PatchFn] {
        self.more.as_deref().map_or(&[], |more| &more.functions)
    }

    /// Applies the functions, in their order, to the object in place.
    pub(crate) fn apply_functions(&self, object: &mut Value) {
        for function in self.functions() {
            function(object);
        }
    }

    /// Turns the functions into what a write sends, for the object `body` as it is now: their
    /// changes (to the object with the merge patch applied) as JSON-patch operations, and, for
    /// a resource with a `status` subresource, their changes to `status` as a merge patch of
    /// it (the operations go to the object, whose `status` the server then ignores).
    pub(crate) fn resolve_functions(&mut self, body: &Value, status_subresource: bool) {
        if self.functions().is_empty() {
            return;
        }
        let before = self.applied_to(body);
        let mut after = before.clone();
        self.apply_functions(&mut after);
        if let Some(more) = self.more.as_mut() {
            more.functions.clear();
        }
        if status_subresource && before.get("status") != after.get("status") {
            let status = merge_diff(
                before.get("status").unwrap_or(&Value::Null),
                after.get("status").unwrap_or(&Value::Null),
            );
            self.merge_raw("status", status);
            match before.get("status") {
                Some(status) => after["status"] = status.clone(),
                None => {
                    after.as_object_mut().map(|object| object.remove("status"));
                }
            }
        }
        if let Ok(Value::Array(operations)) =
            serde_json::to_value(json_patch::diff(&before, &after))
        {
            self.more
                .get_or_insert_default()
                .operations
                .extend(operations);
        }
    }

    /// Merges a value at a top-level key (as produced by the storages) into the patch.
    pub(crate) fn merge_raw(&mut self, key: &str, value: Value) {
        let mut single = Map::new();
        single.insert(key.to_string(), value);
        merge_into(&mut self.merge, single);
    }

    /// Merges another patch into this one (its values win; its operations and functions
    /// come after this one's).
    pub fn merge(&mut self, other: Patch) {
        merge_into(&mut self.merge, other.merge);
        if let Some(more) = other.more {
            let mine = self.more.get_or_insert_default();
            mine.operations.extend(more.operations);
            mine.functions.extend(more.functions);
        }
    }

    /// The merge patch as JSON.
    pub fn as_merge(&self) -> &Map<String, Value> {
        &self.merge
    }

    /// The JSON-patch operations.
    pub fn operations(&self) -> &[Value] {
        self.more.as_deref().map_or(&[], |more| &more.operations)
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
        self.more
            .as_mut()
            .map(|more| std::mem::take(&mut more.operations))
            .unwrap_or_default()
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

/// The merge patch (RFC 7386) that makes `after` of `before`: changed keys with their new
/// values, removed keys as `null`, objects recursively; anything else replaced whole.
fn merge_diff(before: &Value, after: &Value) -> Value {
    match (before, after) {
        (Value::Object(before), Value::Object(after)) => {
            let mut diff = Map::new();
            for (key, old) in before {
                match after.get(key) {
                    None => {
                        diff.insert(key.clone(), Value::Null);
                    }
                    Some(new) if new != old => {
                        diff.insert(key.clone(), merge_diff(old, new));
                    }
                    Some(_) => {}
                }
            }
            for (key, new) in after {
                if !before.contains_key(key) {
                    diff.insert(key.clone(), new.clone());
                }
            }
            Value::Object(diff)
        }
        (_, after) => after.clone(),
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

    /// Kopf's `PatchFn`: applied after the merge changes, in order; what they change becomes
    /// JSON-patch operations (and, with a status subresource, a merge patch of `status`).
    #[test]
    fn functions_become_operations_of_what_they_changed() {
        let body = json!({
            "metadata": {"name": "n", "finalizers": ["a"]},
            "spec": {"size": 1},
            "status": {"phase": "Old", "gone": 1},
        });
        let mut patch = Patch::default();
        patch.set("spec.size", 2);
        patch.function(|body: &mut Value| {
            // Sees the merge changes.
            let size = body["spec"]["size"].clone();
            body["spec"]["copy"] = size;
        });
        patch.function(|body: &mut Value| {
            body["metadata"]["finalizers"]
                .as_array_mut()
                .unwrap()
                .push(json!("b"));
            body["status"]["phase"] = json!("New");
            body["status"].as_object_mut().unwrap().remove("gone");
        });
        assert!(!patch.is_empty());
        let mut with_subresource = patch.clone();
        with_subresource.resolve_functions(&body, true);
        assert!(with_subresource.functions().is_empty());
        assert_eq!(
            with_subresource.as_merge()["status"],
            json!({"phase": "New", "gone": null})
        );
        let mut operations = with_subresource.operations().to_vec();
        operations.sort_by_key(|op| op["path"].as_str().unwrap_or_default().to_owned());
        assert_eq!(
            operations,
            vec![
                json!({"op": "add", "path": "/metadata/finalizers/1", "value": "b"}),
                json!({"op": "add", "path": "/spec/copy", "value": 2}),
            ]
        );
        // Without the subresource, the status changes are operations too.
        let mut plain = patch.clone();
        plain.resolve_functions(&body, false);
        assert_eq!(plain.as_merge().get("status"), None);
        assert_eq!(plain.operations().len(), 4);
        // Applied, the operations make what the functions made.
        let mut written = plain.applied_to(&body);
        let operations: json_patch::Patch =
            serde_json::from_value(Value::Array(plain.operations().to_vec())).unwrap();
        json_patch::patch(&mut written, &operations).unwrap();
        assert_eq!(written["status"], json!({"phase": "New"}));
        assert_eq!(written["metadata"]["finalizers"], json!(["a", "b"]));
    }

    #[test]
    fn functions_that_change_nothing_write_nothing() {
        let mut patch = Patch::default();
        patch.function(|_: &mut Value| {});
        patch.resolve_functions(&json!({"spec": {}}), true);
        assert!(patch.is_empty());
    }

    #[test]
    fn merged_patches_keep_their_functions_in_order() {
        let mut a = Patch::default();
        a.function(|body: &mut Value| body["order"] = json!("a"));
        let mut b = Patch::default();
        b.function(|body: &mut Value| body["order"] = json!("b"));
        a.merge(b);
        let mut object = json!({});
        a.apply_functions(&mut object);
        assert_eq!(object["order"], "b");
        assert_eq!(a.clone(), a, "the same functions");
        assert_ne!(a, Patch::default());
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
