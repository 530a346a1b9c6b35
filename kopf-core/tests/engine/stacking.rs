//! Stacked attributes, as Kopf's stacked decorators: one function registered once per
//! attribute, each registration with its own options; each cause calls the registration of its
//! kind, all under the function's id and so one progress record, and a cause that selects
//! several registrations (an object changed while the operator was down is both resumed and
//! updated) calls the function once, as the registration that comes first.

use std::time::Duration;

use kopf::operator::Operator;
use kopf::{Memo, Reason, TemporaryError};
use serde_json::{Value, json};

use crate::stopping::Running;
use crate::support::{Calls, create, get, patch, server_with_crd, settle};

/// The progress record of the stacked function: one key for all its registrations.
const PROGRESS: &str = "kopf.zalando.org/reconcile";

fn calls(memo: &Memo) -> std::sync::Arc<Calls> {
    memo.get::<Calls>()
        .expect("the test's recorder is in the memo")
}

/// Records which registration runs (its `param`), for which reason, and the progress records
/// on the object; fails each cause's first attempt, so that each leaves a progress record.
#[kopf::on_resume("kopf.dev", "v1", "kopfexamples", param = "resume")]
#[kopf::on_create("kopf.dev", "v1", "kopfexamples", param = "create")]
#[kopf::on_update("kopf.dev", "v1", "kopfexamples", param = "update")]
async fn reconcile(
    memo: &Memo,
    name: &str,
    reason: Reason,
    param: String,
    retry: u32,
    annotations: &Value,
) -> kopf::Result<Value> {
    let records: Vec<(&String, Value)> = annotations
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, _)| {
            key.starts_with("kopf.zalando.org/") && !key.ends_with("/last-handled-configuration")
        })
        .map(|(key, record)| {
            let record: Value =
                serde_json::from_str(record.as_str().unwrap_or("null")).unwrap_or_default();
            (
                key,
                json!({"purpose": record["purpose"], "retries": record["retries"]}),
            )
        })
        .collect();
    calls(memo).record(json!({
        "name": name, "reason": reason.as_str(), "registration": param, "retry": retry,
        "progress": records,
    }));
    if retry == 0 {
        let again = TemporaryError::new("once more").delay(Duration::from_millis(100));
        return Err(again.into());
    }
    Ok(json!(reason.as_str()))
}

fn operator(calls: &Calls, server: &kopf_testing::FakeApiServer) -> Operator {
    Operator::new(kopf::handlers![reconcile])
        .settings(kopf_testing::test_settings())
        .memo(Memo::new().with(calls.clone()))
        .client(server.client())
}

/// Waits until the object's `status.reconcile` (the function's result) is `value`.
async fn wait_result(client: &kube::Client, name: &str, value: &str) {
    kopf_testing::wait(&format!("{name} handled as {value}"), || async {
        get(client, name)
            .await
            .filter(|o| o["status"]["reconcile"] == value)
    })
    .await;
}

/// The two calls of one cause: the first attempt, which finds no record, and the retry, which
/// finds the record of the first under the function's one key, with the cause's purpose.
fn attempts(name: &str, reason: &str, registration: &str) -> [Value; 2] {
    [
        json!({"name": name, "reason": reason, "registration": registration, "retry": 0,
               "progress": []}),
        json!({"name": name, "reason": reason, "registration": registration, "retry": 1,
               "progress": [[PROGRESS, {"purpose": reason, "retries": 1}]]}),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stacked_function_runs_as_each_causes_registration_under_one_progress_key() {
    let server = server_with_crd().await;
    let client = server.client();
    let calls = Calls::default();

    let first = Running::ready(operator(&calls, &server)).await;
    create(&client, "one", json!({"size": 1})).await;
    wait_result(&client, "one", "create").await;
    patch(&client, "one", json!({"spec": {"size": 2}})).await;
    wait_result(&client, "one", "update").await;
    settle(&server).await;
    first.stop().await.expect("a clean stop");

    // A restart: the object is resumed.
    let second = Running::ready(operator(&calls, &server)).await;
    wait_result(&client, "one", "resume").await;
    settle(&server).await;
    second.stop().await.expect("a clean stop");

    // Changed while the operator was down: resumed and updated at once, called once, as the
    // registration nearest the function (`on_update`, registered first, as in Kopf). Created
    // while it was down: created, not resumed (Kopf never mixes creation with resuming).
    patch(&client, "one", json!({"spec": {"size": 3}})).await;
    create(&client, "two", json!({"size": 1})).await;
    let third = Running::ready(operator(&calls, &server)).await;
    wait_result(&client, "one", "update").await;
    wait_result(&client, "two", "create").await;
    settle(&server).await;
    third.stop().await.expect("a clean stop");
    server.stop().await;

    let all = calls.all();
    let of = |name: &str| -> Vec<Value> {
        all.iter()
            .filter(|call| call["name"] == name)
            .cloned()
            .collect()
    };
    let expected: Vec<Value> = [
        attempts("one", "create", "create"),
        attempts("one", "update", "update"),
        attempts("one", "resume", "resume"),
        attempts("one", "update", "update"),
    ]
    .concat();
    assert_eq!(of("one"), expected, "{all:#?}");
    assert_eq!(of("two"), attempts("two", "create", "create"), "{all:#?}");
}

/// Calls of the event handler below, by label.
#[kopf::on_event(
    "kopf.dev",
    "v1",
    "kopfexamples",
    labels(tier = "gold"),
    param = "gold"
)]
#[kopf::on_event("kopf.dev", "v1", "kopfexamples", labels(app = present), param = "app")]
async fn seen(memo: &Memo, name: &str, r#type: Option<&str>, param: String) {
    calls(memo).record(json!({"name": name, "type": r#type, "registration": param}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stacked_event_handlers_are_called_once_per_event_when_several_match() {
    let server = server_with_crd().await;
    let calls = Calls::default();
    let operator = Operator::new(kopf::handlers![seen])
        .settings(kopf_testing::test_settings())
        .memo(Memo::new().with(calls.clone()))
        .client(server.client());
    let running = Running::ready(operator).await;
    for (name, labels) in [
        ("both", json!({"tier": "gold", "app": "web"})),
        ("gold", json!({"tier": "gold"})),
        ("app", json!({"app": "web"})),
        ("none", json!({})),
    ] {
        let body = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                          "metadata": {"name": name, "labels": labels}, "spec": {}});
        let (status, answer) = server
            .request("POST", crate::support::COLLECTION, body)
            .await;
        assert_eq!(status, 201, "{answer}");
    }
    calls.wait_len(3).await;
    settle(&server).await;
    running.stop().await.expect("a clean stop");
    server.stop().await;

    let mut all = calls.all();
    all.sort_by_key(|call| call["name"].to_string());
    // Registered bottom-up: the `app` registration comes first and is the one called for an
    // object that passes both.
    assert_eq!(
        all,
        [
            json!({"name": "app", "type": "ADDED", "registration": "app"}),
            json!({"name": "both", "type": "ADDED", "registration": "app"}),
            json!({"name": "gold", "type": "ADDED", "registration": "gold"}),
        ]
    );
}
