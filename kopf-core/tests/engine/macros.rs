//! Handlers written with the attribute macros, registered with `kopf::handlers!`: their
//! arguments arrive converted to the types they ask for, their results and patches are
//! stored, and a spec that does not fit its type is a permanent error.

use kopf::diff::Diff;
use kopf::operator::Operator;
use kopf::{Memo, Patch, Reason};
use kopf_testing::OperatorHarness;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::support::{Calls, create, delete, patch, server_with_crd, wait_gone, wait_object};

#[derive(Debug, Serialize, Deserialize)]
struct Spec {
    replicas: i64,
    image: String,
}

/// The recorder the test puts into the operator's memo.
fn calls(memo: &Memo) -> std::sync::Arc<Calls> {
    memo.get::<Calls>()
        .expect("the test's recorder is in the memo")
}

#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn create_fn(
    memo: &Memo,
    spec: Spec,
    name: &str,
    namespace: Option<&str>,
    patch: &mut Patch,
    retry: u32,
    reason: Reason,
    old: Option<Value>,
) -> kopf::Result<Value> {
    calls(memo).record(json!({
        "handler": "create", "spec": spec, "name": name, "namespace": namespace,
        "retry": retry, "reason": reason.as_str(), "old": old,
    }));
    patch
        .status()
        .insert("replicas".into(), json!(spec.replicas));
    Ok(json!({"message": format!("created {name} with {}", spec.image)}))
}

#[kopf::on_field("kopfexamples", field = "spec.replicas")]
async fn replicas_fn(new: Option<i64>, old: Option<i64>, diff: &Diff, memo: Memo) -> Option<i64> {
    calls(&memo).record(json!({"handler": "replicas", "old": old, "new": new, "diff": diff.len()}));
    new
}

// A sync handler: it runs on one of the operator's threads.
#[kopf::on_update("kopf.dev", "v1", "kopfexamples", id = "update")]
fn update_fn(body: Value, memo: &Memo, reason: Option<Reason>) -> String {
    calls(memo).record(json!({"handler": "update", "generation": body["metadata"]["generation"], "reason": reason.map(Reason::as_str)}));
    "updated".to_string()
}

#[kopf::on_delete("kopfexamples")]
async fn delete_fn(_name: String, memo: &Memo) {
    calls(memo).record(json!({"handler": "delete"}));
}

#[kopf::on_create("kopfexamples", id = "typed", labels("case" = "typed"))]
async fn typed_fn(spec: Spec, memo: &Memo) -> kopf::Result<()> {
    calls(memo).record(json!({"handler": "typed", "replicas": spec.replicas}));
    Ok(())
}

#[kopf::on_create("kopfexamples", id = "sibling", labels("case" = "typed"))]
async fn sibling_fn(spec: &Value, memo: &Memo) -> Value {
    calls(memo).record(json!({"handler": "sibling"}));
    json!({"saw": spec})
}

async fn start(registry: kopf::registry::Registry, calls: &Calls) -> OperatorHarness {
    OperatorHarness::start_on(
        server_with_crd().await,
        Operator::new(registry)
            .settings(kopf_testing::test_settings())
            .memo(Memo::new().with(calls.clone())),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotated_handlers_get_converted_arguments_and_their_results_are_stored() {
    let calls = Calls::default();
    let registry = kopf::handlers![create_fn, replicas_fn, update_fn, delete_fn];
    let harness = start(registry, &calls).await;
    let client = harness.client();

    create(&client, "one", json!({"replicas": 2, "image": "nginx"})).await;
    let created = wait_object(&harness, "one", "the handlers' results", |o| {
        o["status"]["create_fn"]["message"] == "created one with nginx"
            && o["status"]["replicas_fn/spec.replicas"] == 2
    })
    .await;
    assert_eq!(
        created["status"]["replicas"], 2,
        "the handler's patch is applied"
    );
    let first = calls.all()[0].clone();
    assert_eq!(
        first,
        json!({
            "handler": "create", "spec": {"replicas": 2, "image": "nginx"}, "name": "one",
            "namespace": "default", "retry": 0, "reason": "create", "old": null,
        })
    );

    patch(&client, "one", json!({"spec": {"replicas": 3}})).await;
    wait_object(&harness, "one", "the update's results", |o| {
        o["status"]["update"] == "updated" && o["status"]["replicas_fn/spec.replicas"] == 3
    })
    .await;

    delete(&client, "one").await;
    wait_gone(&harness, "one").await;
    harness.stop().await.expect("a clean stop");

    let calls = calls.all();
    let replicas: Vec<&Value> = calls
        .iter()
        .filter(|c| c["handler"] == "replicas")
        .collect();
    assert_eq!(
        replicas,
        [
            &json!({"handler": "replicas", "old": null, "new": 2, "diff": 1}),
            &json!({"handler": "replicas", "old": 2, "new": 3, "diff": 1}),
        ],
        "{calls:?}"
    );
    let update = calls
        .iter()
        .find(|c| c["handler"] == "update")
        .expect("an update");
    assert_eq!(update["generation"], 2);
    assert_eq!(update["reason"], "update");
    assert_eq!(calls.iter().filter(|c| c["handler"] == "delete").count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_that_does_not_fit_the_argument_type_is_a_permanent_error() {
    let calls = Calls::default();
    let harness = start(kopf::handlers![typed_fn, sibling_fn], &calls).await;
    let client = harness.client();
    for (name, replicas) in [("bad", json!("many")), ("good", json!(3))] {
        harness
            .request(
                "POST",
                crate::support::COLLECTION,
                json!({
                    "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                    "metadata": {"name": name, "labels": {"case": "typed"}},
                    "spec": {"replicas": replicas, "image": "nginx"},
                }),
            )
            .await;
    }
    for name in ["bad", "good"] {
        wait_object(&harness, name, "handling to finish", |o| {
            !o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"].is_null()
        })
        .await;
    }
    let bad = crate::support::get(&client, "bad")
        .await
        .expect("the object");
    assert_eq!(
        bad["status"]["sibling"]["saw"]["replicas"], "many",
        "the sibling handler ran"
    );
    harness.stop().await.expect("a clean stop");

    // The typed handler's body never ran for the bad object, and was not retried: the
    // conversion failed for good before the call.
    let typed: Vec<Value> = calls
        .all()
        .into_iter()
        .filter(|c| c["handler"] == "typed")
        .collect();
    assert_eq!(typed, [json!({"handler": "typed", "replicas": 3})]);
}

/// A typed custom resource, borrowed whole by a handler.
#[derive(kube::CustomResource, Debug, Clone, Serialize, Deserialize)]
#[kube(
    group = "kopf.dev",
    version = "v1",
    kind = "KopfExample",
    namespaced,
    schema = "disabled"
)]
struct KopfExampleSpec {
    replicas: i64,
    image: String,
}

#[kopf::on_create(KopfExample, id = "borrowing", labels("case" = "borrowed"))]
async fn borrowing_fn(body: &KopfExample, spec: &Spec, meta: &Value, memo: &Memo) -> String {
    use kube::ResourceExt as _;
    calls(memo).record(json!({
        "handler": "borrowing", "name": body.name_any(), "replicas": body.spec.replicas,
        "image": spec.image, "uid": meta["uid"].is_string(),
    }));
    format!("{} replicas", body.spec.replicas)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_bodies_and_specs_are_lent_to_handlers() {
    let calls = Calls::default();
    let harness = start(kopf::handlers![borrowing_fn], &calls).await;
    let body = json!({
        "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
        "metadata": {"name": "lent", "labels": {"case": "borrowed"}},
        "spec": {"replicas": 4, "image": "nginx"},
    });
    harness
        .request("POST", crate::support::COLLECTION, body)
        .await;
    wait_object(&harness, "lent", "the borrowing handler's result", |o| {
        o["status"]["borrowing"] == "4 replicas"
    })
    .await;
    harness.stop().await.expect("a clean stop");
    assert_eq!(
        calls.all(),
        [
            json!({"handler": "borrowing", "name": "lent", "replicas": 4, "image": "nginx", "uid": true})
        ]
    );
}

#[derive(Debug, Deserialize)]
struct Counted {
    n: i64,
}

/// A daemon as a Kopf user writes it: it polls its `spec` in a loop and sees the changes.
#[kopf::daemon("kopfexamples", field = "spec.n", value = present, cancellation_backoff = 30)]
async fn polling_fn(
    spec: kopf::Live<Counted>,
    status: kopf::Live,
    memo: &Memo,
    stopped: kopf::Stopped,
) -> kopf::Result<()> {
    loop {
        calls(memo).record(json!({"n": spec.get()?.n, "status": status.get()?}));
        tokio::select! {
            _ = stopped.cancelled() => return Ok(()),
            _ = spec.changed() => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_annotated_daemon_polls_its_live_spec() {
    let calls = Calls::default();
    let harness = start(kopf::handlers![polling_fn], &calls).await;
    let client = harness.client();
    create(&client, "one", json!({"n": 1})).await;
    calls.wait_len(1).await;
    patch(&client, "one", json!({"spec": {"n": 2}})).await;
    let all = calls.wait_len(2).await;
    assert_eq!(
        all,
        [
            json!({"n": 1, "status": null}),
            json!({"n": 2, "status": null})
        ]
    );
    delete(&client, "one").await;
    wait_gone(&harness, "one").await;
    harness.stop().await.expect("a clean stop");
}

/// The raw watch event as Kopf gives it, borrowed, and its type under Kopf's name `type`.
#[kopf::on_event("kopf.dev", "v1", "kopfexamples", labels("case" = "raw"))]
async fn raw_event_fn(r#type: Option<&str>, event: &Value, memo: &Memo) {
    calls(memo).record(json!({
        "handler": "raw", "type": r#type, "event.type": event["type"],
        "event.object.name": event["object"]["metadata"]["name"],
        "event.object.size": event["object"]["spec"]["size"],
        // Sorted: serde_json keeps insertion order where a dependency enables `preserve_order`.
        "keys": event.as_object().map(|e| e.keys().cloned().collect::<std::collections::BTreeSet<_>>()),
    }));
}

#[derive(Debug, Deserialize)]
struct WatchEvent {
    r#type: Option<String>,
    object: Example,
}

#[derive(Debug, Deserialize)]
struct Example {
    spec: Spec,
}

/// The raw watch event deserialized into a type of the handler's own.
#[kopf::on_event("kopf.dev", "v1", "kopfexamples", id = "typed-event", labels("case" = "raw"))]
async fn typed_event_fn(
    event: WatchEvent,
    memo: &Memo,
    retry: u32,
    started: std::time::SystemTime,
    runtime: std::time::Duration,
) {
    // Kopf's values of a first attempt: each event is handled once, started now.
    let age = started.elapsed().unwrap_or_default();
    let fresh = age < std::time::Duration::from_secs(30) && runtime <= age;
    calls(memo).record(json!({
        "handler": "typed-event", "type": event.r#type, "replicas": event.object.spec.replicas,
        "retry": retry, "fresh": fresh,
    }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_handlers_get_the_raw_event_and_its_type_by_kopfs_names() {
    let server = server_with_crd().await;
    let client = server.client();
    let body = |replicas: i64| {
        json!({
            "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
            "metadata": {"name": "raw", "labels": {"case": "raw"}},
            "spec": {"replicas": replicas, "image": "nginx", "size": replicas},
        })
    };
    // Created before the operator starts: its first event is from the listing (type None).
    let (status, answer) = server
        .request("POST", crate::support::COLLECTION, body(1))
        .await;
    assert_eq!(status, 201, "{answer}");
    let calls = Calls::default();
    let operator = Operator::new(kopf::handlers![raw_event_fn, typed_event_fn])
        .settings(kopf_testing::test_settings())
        .memo(Memo::new().with(calls.clone()));
    let harness = OperatorHarness::start_on(server, operator).await;
    calls.wait_len(2).await;
    patch(&client, "raw", json!({"spec": {"replicas": 2, "size": 2}})).await;
    calls.wait_len(4).await;
    delete(&client, "raw").await;
    calls.wait_len(6).await;
    drop(client);
    harness.stop().await.expect("a clean stop");

    let all = calls.all();
    let raw: Vec<&Value> = all.iter().filter(|c| c["handler"] == "raw").collect();
    let seen = |kind: Value, size: i64| {
        json!({
            "handler": "raw", "type": kind, "event.type": kind, "event.object.name": "raw",
            "event.object.size": size, "keys": ["object", "type"],
        })
    };
    assert_eq!(
        raw,
        [
            &seen(Value::Null, 1),
            &seen(json!("MODIFIED"), 2),
            &seen(json!("DELETED"), 2),
        ]
    );
    let typed: Vec<&Value> = all
        .iter()
        .filter(|c| c["handler"] == "typed-event")
        .collect();
    assert_eq!(
        typed,
        [
            &json!({"handler": "typed-event", "type": null, "replicas": 1, "retry": 0, "fresh": true}),
            &json!({"handler": "typed-event", "type": "MODIFIED", "replicas": 2, "retry": 0, "fresh": true}),
            &json!({"handler": "typed-event", "type": "DELETED", "replicas": 2, "retry": 0, "fresh": true}),
        ]
    );
}
