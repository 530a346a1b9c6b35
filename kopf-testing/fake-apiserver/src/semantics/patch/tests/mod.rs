//! Patches against Kubernetes' behaviour: merge and JSON patches, strategic merge patches,
//! server-side apply, the bookkeeping of updates, and properties that hold for any input.

mod apply;
mod json;
mod json_limits;
mod last_applied;
mod properties;
mod strategic;
mod update;

use std::collections::BTreeSet;

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::error::*;
use super::fields::*;
use super::lists::*;
use super::managed_fields::*;
use super::structured::*;
use super::*;

/// The time of the first apply.
const NOW: &str = "2024-05-01T10:00:00Z";
/// The time of later applies.
const LATER: &str = "2024-05-01T11:00:00Z";

/// Applies a strategic merge patch that must succeed.
fn smp(kind: &str, target: Value, patch: Value) -> Value {
    let mut target = target;
    strategic_merge_patch(kind, &mut target, &patch).expect("patch applies");
    target
}

/// Applies a strategic merge patch that must fail, checking that the target is unchanged.
fn smp_err(kind: &str, target: Value, patch: Value) -> PatchError {
    let mut copy = target.clone();
    let error = strategic_merge_patch(kind, &mut copy, &patch).expect_err("patch fails");
    assert_eq!(copy, target, "target must be unchanged on error");
    error
}

/// The `name` of each item of a list (or the item itself for strings).
fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|item| match item.get("name") {
            Some(name) => name.as_str().unwrap_or_default().to_string(),
            None => item.as_str().unwrap_or_default().to_string(),
        })
        .collect()
}

/// The `metadata.managedFields` entries of an object.
fn managed(object: &Value) -> Vec<Value> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The managed-fields entry of `manager`.
fn entry_of<'a>(object: &'a Value, manager: &str) -> Option<&'a Value> {
    object
        .pointer("/metadata/managedFields")?
        .as_array()?
        .iter()
        .find(|entry| entry["manager"] == manager)
}

/// A Deployment apply configuration.
fn web(replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}
            }
        }
    })
}

/// Adds the metadata a server sets on stored objects.
fn stored(mut object: Value) -> Value {
    if let Some(Value::Object(meta)) = object.get_mut("metadata") {
        meta.insert("resourceVersion".into(), json!("7"));
        meta.insert("uid".into(), json!("u-1"));
        meta.insert("creationTimestamp".into(), json!("2024-01-01T00:00:00Z"));
        meta.insert("generation".into(), json!(1));
    }
    object
}

/// An `Update` author of the main resource in `v1`.
fn updater(manager: &str) -> Updater {
    Updater {
        manager: manager.into(),
        api_version: "v1".into(),
        subresource: String::new(),
    }
}
