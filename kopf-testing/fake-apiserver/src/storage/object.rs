//! Reading and writing the metadata of objects kept as JSON.

use serde_json::{Map, Value, json};

/// An object's place in its resource: `(namespace, name)`, namespace empty for cluster scope.
pub(crate) type ObjectKey = (String, String);

pub(crate) fn meta(object: &Value) -> &Value {
    &object["metadata"]
}

/// `metadata` as a mutable map, created if absent or not a map.
pub(crate) fn meta_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = json!({});
    }
    let map = object.as_object_mut().expect("made an object above");
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    meta.as_object_mut().expect("made an object above")
}

pub(crate) fn str_field<'a>(object: &'a Value, field: &str) -> &'a str {
    meta(object)[field].as_str().unwrap_or_default()
}

pub(crate) fn name(object: &Value) -> &str {
    str_field(object, "name")
}

pub(crate) fn namespace(object: &Value) -> &str {
    str_field(object, "namespace")
}

pub(crate) fn uid(object: &Value) -> &str {
    str_field(object, "uid")
}

pub(crate) fn resource_version(object: &Value) -> &str {
    str_field(object, "resourceVersion")
}

pub(crate) fn is_terminating(object: &Value) -> bool {
    !meta(object)["deletionTimestamp"].is_null()
}

pub(crate) fn finalizers(object: &Value) -> Vec<String> {
    meta(object)["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn set_finalizers(object: &mut Value, finalizers: Vec<String>) {
    let meta = meta_mut(object);
    if finalizers.is_empty() {
        meta.remove("finalizers");
    } else {
        meta.insert("finalizers".into(), json!(finalizers));
    }
}

pub(crate) fn owner_uids(object: &Value) -> Vec<String> {
    meta(object)["ownerReferences"]
        .as_array()
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r["uid"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn generation(object: &Value) -> i64 {
    meta(object)["generation"].as_i64().unwrap_or(0)
}

/// The current time as Kubernetes writes timestamps: RFC 3339, whole seconds, UTC.
pub(crate) fn now_timestamp() -> String {
    let now = time::OffsetDateTime::now_utc();
    format_timestamp(now)
}

pub(crate) fn format_timestamp(t: time::OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// The object without `status`, `metadata.resourceVersion`, `managedFields` and `generation`:
/// what decides whether `generation` changes.
pub(crate) fn spec_part(object: &Value, without_status: bool) -> Value {
    let mut copy = object.clone();
    if let Some(map) = copy.as_object_mut() {
        map.remove("metadata");
        if without_status {
            map.remove("status");
        }
    }
    copy
}
