//! Each change-handler kind, with arguments borrowed, owned and deserialized, in any order.

use std::collections::BTreeMap;
use std::time::Duration;

use kopf::{Patch, Reason};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
struct Spec {
    replicas: i64,
}

#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn create_fn(
    spec: &Value,
    name: &str,
    namespace: Option<&str>,
    patch: &mut Patch,
) -> kopf::Result<Value> {
    patch.status().insert("seen".into(), json!(spec));
    Ok(json!({"message": format!("hello {name} in {namespace:?}")}))
}

#[kopf::on_update("kopfexamples", field = "spec.replicas", old = 1, new = present, timeout = "10s", retries = 3, backoff = 1.5)]
async fn scale(
    new: Option<i64>,
    old: Option<i64>,
    diff: &kopf::diff::Diff,
    reason: Reason,
) -> Option<i64> {
    let _ = (diff, reason);
    new.or(old)
}

#[kopf::on_delete("kex", optional, errors = "ignored")]
async fn delete_fn(_name: String, uid: String, retry: u32, runtime: Duration) {
    let _ = (uid, retry, runtime);
}

#[kopf::on_resume("kopf.dev", "v1", "kopfexamples", deleted, labels("app" = "web", tier = present, "old" = absent))]
async fn resume_fn(
    spec: Spec,
    labels: BTreeMap<String, String>,
    logger: &kopf::Logger,
) -> kopf::Result<()> {
    logger.info(format_args!(
        "{} replicas, {} labels",
        spec.replicas,
        labels.len()
    ));
    Ok(())
}

#[kopf::on_field("kopf.dev/v1", "kopfexamples", field = "spec.field", value = {"a": [1, 2]}, id = "custom")]
async fn field_fn(
    old: Option<Value>,
    new: Option<Value>,
    param: Option<&Value>,
    started: std::time::SystemTime,
) -> Result<(), std::io::Error> {
    let _ = (old, new, param, started);
    Ok(())
}

fn is_ready(invocation: &kopf::Invocation) -> bool {
    invocation.status()["ready"] == true
}

#[kopf::on_create("v1", "pods", when = is_ready, param = {"tier": "web"}, annotations("kopf.dev/skip" = absent, "x" = |v: Option<&str>| v.is_some()))]
async fn pods(
    body: Value,
    meta: &Value,
    status: Option<Value>,
    client: kube::Client,
    resource: &kopf::resources::Resource,
) {
    let _ = (body, meta, status, client, resource);
}

fn main() {
    let registry = kopf::handlers![create_fn, scale, delete_fn, resume_fn, field_fn, pods];
    let _ = registry;
}
