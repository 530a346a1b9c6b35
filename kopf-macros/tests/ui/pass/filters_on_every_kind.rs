//! Field filters on every kind of resource handler, callables that see the object, and Kopf's
//! deprecated singular `operation` of admission handlers.

#![allow(deprecated, reason = "the singular `operation` is accepted, with Kopf's deprecation")]

use serde_json::{Value, json};

#[kopf::on_event("kopfexamples", field = "spec.mode", value = "fast")]
async fn fast_events(event_type: Option<&str>) {
    let _ = event_type;
}

#[kopf::index("kopfexamples", field = "spec.owner", value = present)]
async fn by_owner(spec: &Value, name: &str) -> Option<(String, String)> {
    spec["owner"].as_str().map(|owner| (owner.to_string(), name.to_string()))
}

#[kopf::daemon("kopfexamples", field = "spec.enabled", value = true, cancellation_backoff = 1)]
async fn while_enabled(stopped: kopf::Stopped) {
    stopped.cancelled().await;
}

#[kopf::timer("kopfexamples", interval = 60, field = "status.phase", value = |phase: Option<&Value>| {
    phase.is_some_and(|phase| phase != "Done")
})]
async fn until_done(name: &str) -> Value {
    json!({"checked": name})
}

#[kopf::on_create(
    "kopfexamples",
    labels("owner" = |value: Option<&str>, body: &Value| value == body["spec"]["owner"].as_str()),
    annotations("note" = |value: Option<&str>| value.is_some()),
    field = "spec.size",
    value = |size: Option<&Value>, body: &Value| {
        let limit = body["spec"]["limit"].as_i64();
        size.and_then(Value::as_i64).zip(limit).is_some_and(|(size, limit)| size < limit)
    }
)]
async fn owned_and_small() {}

#[kopf::on_update("kopfexamples", field = "spec.size", old = absent, new = present)]
async fn size_set() {}

#[kopf::on_validate("kopfexamples", operation = CREATE)]
async fn on_creation() {}

#[kopf::on_mutate("kopfexamples", operations = [UPDATE], operation = "DELETE")]
async fn on_updates_and_deletions() {}

fn main() {
    let registry = kopf::handlers![
        fast_events,
        by_owner,
        while_enabled,
        until_done,
        owned_and_small,
        size_set,
        on_creation,
        on_updates_and_deletions,
    ];
    drop(registry);
}
