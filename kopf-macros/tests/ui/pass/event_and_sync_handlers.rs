//! Event handlers, and sync (`fn`) handlers, which run on the operator's own threads.

use kopf::Patch;
use serde_json::Value;

#[kopf::on_event("kopf.dev", "v1", "kopfexamples", labels(app = "web"), param = 42)]
async fn events(
    event_type: Option<&str>,
    body: &Value,
    param: Option<i64>,
    patch: &mut Patch,
    memo: &kopf::Memo,
) {
    if event_type == Some("MODIFIED") {
        patch.set("status.seen", body["metadata"]["resourceVersion"].clone());
    }
    let _ = (param, memo);
}

#[kopf::on_event("kopfexamples", id = "typed-event")]
async fn typed_event(
    event_type: Option<String>,
    name: String,
    events: &kopf::Events,
) -> Option<Value> {
    events.info("Seen", format_args!("{name}: {event_type:?}"));
    None
}

#[kopf::on_create("kopfexamples")]
fn sync_create(name: &str, patch: &mut Patch, logger: &tracing::Span) -> kopf::Result<String> {
    let _entered = logger.enter();
    patch.set("status.sync", true);
    Ok(name.to_uppercase())
}

#[kopf::on_delete("kopfexamples")]
fn sync_delete() {}

#[kopf::on_event(kopf::resources::EVERYTHING, id = "everything")]
async fn everything(resource: &kopf::resources::Resource, name: &str) {
    let _ = (resource, name);
}

#[kopf::on_event(category = "all", when = |invocation: &kopf::Invocation| invocation.namespace() == Some("default"))]
async fn all(uid: &str) {
    let _ = uid;
}

// Kopf's values of a first attempt: event handlers are called once per event.
#[kopf::on_event("kopfexamples", id = "attempt")]
fn attempt(retry: u32, started: std::time::SystemTime, runtime: std::time::Duration) {
    let _ = (retry, started, runtime);
}

fn main() {
    let _ = kopf::handlers![
        attempt,
        events,
        typed_event,
        sync_create,
        sync_delete,
        everything,
        all
    ];
}
