//! Stopping: `run()` returns promptly, leaves no watch open, and can run again.

use kopf::{ChangeHandler, Operator, Registry};
use kopf_testing::OperatorHarness;
use serde_json::json;

use crate::support::{Calls, create, examples, server_with_crd, wait_object};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_operator_stops_cleanly_and_runs_again() {
    let calls = Calls::default();
    let recorder = calls.clone();
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        move |inv| {
            let calls = recorder.clone();
            async move {
                calls.record(json!(inv.name()));
                Ok(None)
            }
        },
    ));
    let server = server_with_crd().await;
    let client = server.client();
    let harness = OperatorHarness::start_on(
        server,
        Operator::new(registry.clone()).settings(kopf_testing::test_settings()),
    )
    .await;
    create(&client, "first", json!({})).await;
    calls.wait_len(1).await;
    // Stop and start again on the same server (moved out of the harness by stopping it
    // is not possible: a second server keeps the test simple and independent).
    harness.stop().await.expect("a clean stop");

    let server = server_with_crd().await;
    let client = server.client();
    let harness = OperatorHarness::start_on(
        server,
        Operator::new(registry).settings(kopf_testing::test_settings()),
    )
    .await;
    create(&client, "second", json!({})).await;
    wait_object(&harness, "second", "handled", |o| {
        !o["metadata"]["annotations"].is_null()
    })
    .await;
    assert_eq!(calls.all(), vec![json!("first"), json!("second")]);
    harness.stop().await.expect("a clean stop");
}
