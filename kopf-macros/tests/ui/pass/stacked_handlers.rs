//! Stacked attributes: one function registered once per attribute, as Kopf's stacked
//! decorators do, each registration with the options written on its own attribute.

use std::collections::BTreeMap;

use kopf::activities::Activity;
use kopf::admission::Warnings;
use kopf::{Index, Patch, Reason};
use kopf::{on_create, on_update};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

// Kopf's most common stack: one function for objects found at the start, created, updated.
#[kopf::on_resume("kopf.dev", "v1", "kopfexamples")]
#[kopf::on_create("kopf.dev", "v1", "kopfexamples", timeout = "1m")]
#[kopf::on_update("kopf.dev", "v1", "kopfexamples", field = "spec.replicas", old = present)]
async fn reconcile(spec: &Value, reason: Reason, patch: &mut Patch) -> kopf::Result<Value> {
    patch.set("status.replicas", spec["replicas"].clone());
    Ok(Value::from(reason.as_str()))
}

// The attributes' short names, another attribute in between, and a field handler with an
// update handler of another field.
#[on_create("kopfexamples", id = "created")]
#[allow(unused_variables)]
#[on_update("kopfexamples")]
#[kopf::on_field("kopfexamples", field = "spec.size", value = 3)]
fn sync_one(name: &str, old: Option<&Value>, new: Option<&Value>) {}

// Several resources; the raw event and its type under Kopf's names.
#[kopf::on_event("v1", "pods")]
#[kopf::on_event("v1", "services", labels(app = present))]
async fn seen(r#type: Option<&str>, event: &Value, name: &str) -> Option<String> {
    let _ = event["object"]["metadata"]["name"].as_str();
    Some(format!("{name}: {}", r#type.unwrap_or("listed")))
}

#[derive(Debug, serde::Deserialize)]
struct RawEvent {
    r#type: Option<String>,
    object: Value,
}

#[kopf::on_event("kopfexamples")]
async fn typed_event(event: RawEvent, _type: Option<String>) {
    let _ = (event.r#type, event.object);
}

#[kopf::on_event("kopfexamples", id = "borrowed-event")]
fn borrowed_event(event: &RawEvent) {
    let _ = &event.object;
}

// Daemons and timers share their arguments.
#[kopf::daemon("kopfexamples", cancellation_backoff = 1)]
#[kopf::timer("kopfexamples", interval = 10, id = "tick")]
async fn watch(stopped: &CancellationToken, name: String) {
    let _ = (stopped.is_cancelled(), name);
}

// Validating and mutating admission: no `patch` then, since a validating handler gets none.
#[kopf::on_validate("kopfexamples", operations = [CREATE, UPDATE])]
#[kopf::on_mutate("kopfexamples", operations = [CREATE])]
fn admit(spec: &Value, warnings: &Warnings) -> Result<(), kopf::AdmissionError> {
    if spec["size"].is_null() {
        warnings.push("no size");
    }
    Ok(())
}

// One index over two resources: one id, one type.
#[kopf::index("v1", "pods")]
#[kopf::index("v1", "services")]
fn by_app(labels: BTreeMap<String, String>, name: String) -> Option<(String, String)> {
    Some((labels.get("app")?.clone(), name))
}

// Activities, with indexes and the settings to read.
#[kopf::on_startup(id = "both", timeout = 5)]
#[kopf::on_cleanup(id = "both")]
async fn both(activity: Activity, settings: &kopf::Settings, by_app: &Index<String, String>) {
    let _ = (activity, settings.posting.enabled, by_app.len());
}

#[kopf::on_probe]
fn apps(by_app: Index<String, String>, settings: kopf::Settings) -> usize {
    let _ = settings;
    by_app.len()
}

#[kopf::on_cleanup]
async fn farewell(settings: &kopf::Settings, logger: &kopf::Logger) {
    logger.info(format_args!("leaving after {:?}", settings.process.grace_period));
}

#[kopf::on_login]
fn login(settings: &kopf::Settings, by_app: &Index<String, String>) -> Option<kopf::login::ConnectionInfo> {
    let _ = (settings.networking.max_concurrent_writes, by_app.len());
    None
}

#[kopf::on_startup]
async fn configure(settings: &mut kopf::Settings, by_app: &Index<String, String>) {
    // Empty: startup handlers run before anything is watched.
    settings.posting.enabled = by_app.is_empty();
}

fn main() {
    use kopf::__private::Descriptor as _;
    assert_eq!(reconcile::handlers().len(), 3);
    assert_eq!(sync_one::handlers().len(), 3);
    assert_eq!(seen::handlers().len(), 2);
    assert_eq!(both::handlers().len(), 2);
    // As Kopf's decorators, the attribute nearest the function registers first.
    let ids: Vec<String> = reconcile::handlers()
        .into_iter()
        .map(|handler| match handler {
            kopf::registry::AnyHandler::Change(change) => change.id().to_string(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ids, ["reconcile/spec.replicas", "reconcile", "reconcile"]);
    let _ = kopf::handlers![
        reconcile,
        sync_one,
        seen,
        typed_event,
        borrowed_event,
        watch,
        admit,
        by_app,
        both,
        apps,
        farewell,
        login,
        configure,
    ];
}
