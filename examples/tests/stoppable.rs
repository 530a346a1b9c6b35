//! The `stoppable` example as a process, stopped by real signals: SIGTERM ends it cleanly with
//! exit code 0; a second SIGINT during a slow graceful stop ends it at once with 130; a sync
//! handler that never returns is abandoned after the grace period, and the process exits.
//!
//! The process under test runs the example's own code (`../stoppable.rs`, compiled into this
//! test as a module) in this very test binary, started again with [`CHILD`] set. Running the
//! example's binary instead would be fragile: cargo builds examples for a plain `cargo test`
//! but not for `cargo test --test stoppable`, and tells tests no path to them
//! (`CARGO_BIN_EXE_*` exists for `[[bin]]` targets only), so a test could run a missing or,
//! worse, a stale build. Re-executing the test binary always runs the current code.

#![cfg(unix)]

#[path = "../stoppable.rs"]
#[allow(
    dead_code,
    reason = "the example's `main` belongs to its binary; the child process calls `operate`"
)]
mod stoppable;

mod support;

use std::time::Duration;

use kopf_testing::{FakeApiServer, fixtures, wait};
use serde_json::json;
use support::{OperatorProcess, spawn_against};

/// Set in the environment of the child process: run the operator there.
const CHILD: &str = "KOPF_EXAMPLES_STOPPABLE_CHILD";

/// Not a scenario: the operator's process. Started by the scenarios (with [`CHILD`] set) to
/// run the example's operator and exit with its exit code; a no-op otherwise.
#[test]
fn operator_process() {
    if std::env::var_os(CHILD).is_some() {
        std::process::exit(stoppable::operate().into());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_operator_cleanly_with_exit_code_0() {
    let server = server_with_crd().await;
    let mut operator = start(&server, Duration::from_secs(60));
    operator.wait_until_watching(&server).await;
    server
        .apply_value(fixtures::kopfexample("busy", json!({"duration": 3600})))
        .await;
    operator.wait_for_log("working").await;

    operator.signal("TERM");

    // 0, not 1: the stop needed no grace period (an abort would exit with 1).
    assert_eq!(operator.exit_code().await, 0, "{}", operator.log());
    let object = server
        .get("kopfexamples", "default", "busy")
        .await
        .expect("the object exists");
    // Interrupted by the exit, the attempt is not counted (as Kopf records nothing of a
    // cancelled handler): no progress and no diff-base, so the next run handles it afresh.
    let annotations = &object["metadata"]["annotations"];
    assert!(
        annotations["kopf.zalando.org/create_fn"].is_null()
            && annotations["kopf.zalando.org/last-handled-configuration"].is_null(),
        "the handler stopped early and will run again on the next start: {object}"
    );
    assert!(
        operator.log().contains("reason=the operator is exiting"),
        "the handler was told why: {}",
        operator.log()
    );
    wait("the operator's watches to close", || async {
        (server.stats().open_watches == 0).then_some(())
    })
    .await;
    wait("every connection to close", || async {
        (server.stats().open_connections == 0).then_some(())
    })
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sigint_during_a_slow_stop_exits_at_once_with_130() {
    let server = server_with_crd().await;
    let mut operator = start(&server, Duration::from_secs(60));
    operator.wait_until_watching(&server).await;
    server
        .apply_value(fixtures::kopfexample(
            "stubborn",
            json!({"duration": 3600, "ignoreStop": true}),
        ))
        .await;
    operator.wait_for_log("working").await;

    operator.signal("INT");
    // Stopping: the watches are gone, but the handler keeps the process alive.
    wait("the operator's watches to close", || async {
        (server.stats().open_watches == 0).then_some(())
    })
    .await;
    assert!(operator.is_running(), "the stop waits for the grace period");
    operator.signal("INT");

    // Within the test's deadline, well before the grace period of 60 s.
    assert_eq!(operator.exit_code().await, 130, "{}", operator.log());
    wait("every connection to close", || async {
        (server.stats().open_connections == 0).then_some(())
    })
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_sync_handler_is_abandoned_after_the_grace_period_and_the_process_exits() {
    let server = server_with_crd().await;
    let mut operator = start(&server, Duration::from_secs(1));
    operator.wait_until_watching(&server).await;
    server
        .apply_value(fixtures::kopfexample(
            "stuck",
            json!({"duration": 3600, "blocking": true, "ignoreStop": true}),
        ))
        .await;
    operator.wait_for_log("working on a thread").await;

    operator.signal("TERM");

    // 1: the stop needed the grace period. The process exits though a thread is still blocked
    // (tokio's runtime would wait for its own blocking pool when dropped; this is not it).
    assert_eq!(operator.exit_code().await, 1, "{}", operator.log());
    let log = operator.log();
    assert!(
        log.contains("abandoning the sync handler create_sync_fn on default/stuck"),
        "the warning names the handler and the object:\n{log}"
    );
    assert!(
        log.contains("some work had to be aborted after the grace period"),
        "{log}"
    );
    wait("every connection to close", || async {
        (server.stats().open_connections == 0).then_some(())
    })
    .await;
    server.stop().await;
}

/// Starts the example's operator with this grace period, against `server`.
fn start(server: &FakeApiServer, grace_period: Duration) -> OperatorProcess {
    let args = ["operator_process", "--exact", "--nocapture", "--quiet"];
    spawn_against(server, CHILD, &args, |command| {
        command.env(
            "STOPPABLE_GRACE_PERIOD",
            grace_period.as_secs_f64().to_string(),
        );
    })
}

/// A server on a runtime of its own with the KopfExample CRD.
async fn server_with_crd() -> FakeApiServer {
    let server = kopf_testing::ApiServer::from_env()
        .start(FakeApiServer::builder())
        .await;
    server.apply(fixtures::KOPFEXAMPLE_CRD).await;
    server
}
