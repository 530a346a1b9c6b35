//! Sync handlers (`kopf::registry::blocking`): they run on the operator's own threads and their
//! results are stored as async handlers' are; a cooperative one stops early and is told why; one
//! that never returns is abandoned after the grace period, and `run()` returns all the same.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use kopf::operator::{Operator, OperatorError};
use kopf::registry::{ChangeHandler, Registry};
use kopf::{StopReason, TemporaryError};
use kopf_testing::{OperatorHarness, wait};
use serde_json::json;

use crate::stopping::{DropFlag, Running, alive_tasks, assert_nothing_left, settings};
use crate::support::{Calls, create, examples, server_with_crd, wait_object};

thread_local! {
    static ON_EXIT: RefCell<Vec<DropFlag>> = const { RefCell::new(Vec::new()) };
}

/// Sets `flag` when the current thread exits (thread-locals are dropped then).
fn flag_on_thread_exit(flag: &Arc<AtomicBool>) {
    ON_EXIT.with(|flags| flags.borrow_mut().push(DropFlag(flag.clone())));
}

async fn wait_thread_exit(flag: &AtomicBool) {
    wait("the handler's thread to exit", || async {
        flag.load(Ordering::SeqCst).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_handler_runs_on_an_operator_thread_and_its_result_is_stored() {
    let calls = Calls::default();
    let attempts = Arc::new(AtomicUsize::new(0));
    let exited = Arc::new(AtomicBool::new(false));
    let (recorder, counter, flag) = (calls.clone(), attempts.clone(), exited.clone());
    let handler = ChangeHandler::on_create(
        examples(),
        "create_fn",
        kopf::registry::blocking(move |inv| {
            flag_on_thread_exit(&flag);
            recorder.record(json!(std::thread::current().name()));
            // Blocking is what sync handlers are for.
            std::thread::sleep(Duration::from_millis(50));
            if counter.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("the first attempt panics");
            }
            Ok(Some(json!({"message": format!("hello, {}", inv.name())})))
        }),
    );
    let harness = OperatorHarness::start_on(
        server_with_crd().await,
        Operator::new(Registry::new().with(handler)).settings(kopf_testing::test_settings()),
    )
    .await;
    create(&harness.client(), "sync", json!({})).await;

    let object = wait_object(&harness, "sync", "the handler's result", |o| {
        !o["status"]["create_fn"].is_null()
    })
    .await;

    assert_eq!(
        object["status"]["create_fn"],
        json!({"message": "hello, sync"})
    );
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        2,
        "a panic is a failed attempt, retried"
    );
    assert_eq!(
        calls.all(),
        vec![json!("kopf-blocking"), json!("kopf-blocking")],
        "on the operator's own threads, not tokio's"
    );
    harness.stop().await.expect("a clean stop");
    wait_thread_exit(&exited).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cooperative_sync_handler_returns_early_on_stop_and_knows_why() {
    let tasks_before = alive_tasks();
    let server = server_with_crd().await;
    let steps = Calls::default();
    let exited = Arc::new(AtomicBool::new(false));
    let (recorder, flag) = (steps.clone(), exited.clone());
    let handler = ChangeHandler::on_create(
        examples(),
        "polling_fn",
        kopf::registry::blocking(move |inv| {
            flag_on_thread_exit(&flag);
            recorder.record(json!("started"));
            while !inv.stopped().is_cancelled() {
                std::thread::sleep(Duration::from_millis(10));
            }
            recorder.record(json!(format!("{:?}", inv.stop_reason())));
            Err(TemporaryError::new("interrupted by the operator's stop").into())
        }),
    );
    // Generous: an `Ok` below means the handler ended by itself, not by the abort.
    let operator = Operator::new(Registry::new().with(handler))
        .settings(settings(Duration::from_secs(60)))
        .client(server.client());
    let running = Running::ready(operator).await;
    create(&server.client(), "polling", json!({})).await;
    steps.wait_len(1).await;

    let result = running.stop().await;

    assert!(result.is_ok(), "no grace period was needed: {result:?}");
    assert_eq!(
        steps.all(),
        vec![json!("started"), json!("Some(OperatorExiting)")]
    );
    wait_thread_exit(&exited).await;
    assert_nothing_left(&server, tasks_before).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_handler_that_never_returns_is_abandoned_after_the_grace_period() {
    let tasks_before = alive_tasks();
    let server = server_with_crd().await;
    let steps = Calls::default();
    let exited = Arc::new(AtomicBool::new(false));
    let (release, released) = std::sync::mpsc::channel::<()>();
    let released = Arc::new(std::sync::Mutex::new(released));
    let (recorder, flag) = (steps.clone(), exited.clone());
    let handler = ChangeHandler::on_create(
        examples(),
        "stuck_fn",
        kopf::registry::blocking(move |_inv| {
            flag_on_thread_exit(&flag);
            recorder.record(json!("started"));
            // Blocks until the test lets it go: forever, as far as the operator knows.
            let _ = released.lock().unwrap().recv();
            recorder.record(json!("finished"));
            Ok(None)
        }),
    );
    let grace = Duration::from_secs(1);
    let operator = Operator::new(Registry::new().with(handler))
        .settings(settings(grace))
        .client(server.client());
    let running = Running::ready(operator).await;
    create(&server.client(), "stuck", json!({})).await;
    steps.wait_len(1).await;

    // Returns within the test's deadline, though the handler is still blocked.
    let result = running.stop().await;

    assert!(
        matches!(result, Err(OperatorError::Aborted(g)) if g == grace),
        "the stuck handler was abandoned: {result:?}"
    );
    assert_eq!(steps.all(), vec![json!("started")], "it is still running");
    assert!(!exited.load(Ordering::SeqCst), "its thread is left running");
    // The abandoned handler holds its invocation (and so a client) until it returns; then
    // nothing of the operator is left.
    release.send(()).expect("the handler still waits");
    steps.wait_len(2).await;
    wait_thread_exit(&exited).await;
    assert_nothing_left(&server, tasks_before).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_past_its_timeout_is_stopped_with_the_timeout_as_its_reason() {
    let steps = Calls::default();
    let exited = Arc::new(AtomicBool::new(false));
    let (recorder, flag) = (steps.clone(), exited.clone());
    let handler = ChangeHandler::on_create(
        examples(),
        "slow_fn",
        kopf::registry::blocking(move |inv| {
            flag_on_thread_exit(&flag);
            while !inv.stopped().is_cancelled() {
                std::thread::sleep(Duration::from_millis(10));
            }
            recorder.record(json!(format!("{:?}", inv.stop_reason())));
            Ok(None)
        }),
    )
    .timeout(Duration::from_millis(300));
    let harness = OperatorHarness::start_on(
        server_with_crd().await,
        Operator::new(Registry::new().with(handler)).settings(kopf_testing::test_settings()),
    )
    .await;
    create(&harness.client(), "slow", json!({})).await;

    let reasons = steps.wait_len(1).await;

    assert_eq!(
        reasons,
        vec![json!(format!("{:?}", Some(StopReason::Timeout)))]
    );
    wait_object(&harness, "slow", "the handler to have failed", |o| {
        o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"].is_string()
    })
    .await;
    harness.stop().await.expect("a clean stop");
    wait_thread_exit(&exited).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_handler_still_waiting_for_a_thread_at_the_stop_does_not_start() {
    let tasks_before = alive_tasks();
    let server = server_with_crd().await;
    let (calls, due) = (Calls::default(), Calls::default());
    let (recorder, considered) = (calls.clone(), due.clone());
    let handler = ChangeHandler::on_create(
        examples(),
        "polling_fn",
        kopf::registry::blocking(move |inv| {
            recorder.record(json!(inv.name()));
            while !inv.stopped().is_cancelled() {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(TemporaryError::new("interrupted by the operator's stop").into())
        }),
    )
    // Asked right before the handler is called: then it waits for a thread.
    .when(move |inv| {
        considered.record(json!(inv.name()));
        true
    });
    let mut settings = settings(Duration::from_secs(60));
    settings.execution.max_workers = Some(1);
    let operator = Operator::new(Registry::new().with(handler))
        .settings(settings)
        .client(server.client());
    let running = Running::ready(operator).await;
    let client = server.client();
    create(&client, "first", json!({})).await;
    calls.wait_len(1).await;
    create(&client, "second", json!({})).await;
    due.wait_len(2).await;

    let result = running.stop().await;

    assert!(result.is_ok(), "no grace period was needed: {result:?}");
    assert_eq!(
        calls.all(),
        vec![json!("first")],
        "the second never started"
    );
    let second = crate::support::get(&client, "second")
        .await
        .expect("it exists");
    assert!(
        second["metadata"]["annotations"]["kopf.zalando.org/polling_fn"].is_null(),
        "no attempt is recorded for it: {second:#}"
    );
    drop(client);
    assert_nothing_left(&server, tasks_before).await;
    server.stop().await;
}
