//! Delivery of a handler's results into the patch that stores them (Kopf's result delivery).

use serde_json::{Value, json};

use crate::structs::patch::Patch;

/// Kopf's result delivery: a map merges into `status.<id>`, anything else replaces it.
pub(crate) fn deliver(patch: &mut Patch, id: &str, result: Value) {
    match result {
        Value::Object(map) => {
            let status = patch.status();
            let entry = status.entry(id.to_string()).or_insert_with(|| json!({}));
            if !entry.is_object() {
                *entry = json!({});
            }
            if let Some(existing) = entry.as_object_mut() {
                existing.extend(map);
            }
        }
        Value::Null => {}
        other => {
            patch.status().insert(id.to_string(), other);
        }
    }
}
