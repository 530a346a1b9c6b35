//! Stopping (the shutdown contract): whatever the operator is doing (idle, handling, starting,
//! cut off from its server), `run()` returns promptly and leaves no task, watch or connection
//! behind; and an operator can run again, or next to another, in the same process.
//!
//! Timings are asserted loosely: a stop that needed no grace period returns `Ok`, one that did
//! returns `Aborted`, and every deadline is far above what a correct stop takes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kopf::login::ConnectionInfo;
use kopf::operator::{Operator, OperatorError, Ready};
use kopf::registry::{ChangeHandler, LoginHandler, Registry};
use kopf::{Settings, TemporaryError};
use kopf_testing::{DEADLINE, FakeApiServer, Fault, OperatorHarness, wait};
use serde_json::json;
use tokio::io::AsyncReadExt as _;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::support::{Calls, create, examples, metrics, metrics_url, server_with_crd, wait_object};

/// Longer than any test may take: work that lasts this long must have been cut off.
pub(crate) const HOUR: Duration = Duration::from_secs(3600);

/// An operator run by the test itself, on a server the test keeps (unlike the harness).
pub(crate) struct Running {
    stop: CancellationToken,
    task: JoinHandle<Result<(), OperatorError>>,
}

impl Running {
    pub(crate) fn start(operator: Operator) -> (Running, Ready) {
        let ready = operator.ready();
        let stop = CancellationToken::new();
        let task = tokio::spawn(operator.run(stop.clone()));
        (Running { stop, task }, ready)
    }

    pub(crate) async fn ready(operator: Operator) -> Running {
        let (running, ready) = Running::start(operator);
        tokio::time::timeout(DEADLINE, ready.wait())
            .await
            .expect("the operator gets ready in time");
        running
    }

    /// Waits, without stopping it, until the operator's `run()` returns on its own.
    pub(crate) async fn returned(self) -> Result<(), OperatorError> {
        tokio::time::timeout(DEADLINE, self.task)
            .await
            .expect("run() returns in time")
            .expect("run() does not panic")
    }

    /// Stops the operator; returns what `run()` returned.
    pub(crate) async fn stop(self) -> Result<(), OperatorError> {
        self.stop.cancel();
        tokio::time::timeout(DEADLINE, self.task)
            .await
            .expect("run() returns in time")
            .expect("run() does not panic")
    }
}

/// The tasks alive on the test's runtime (the fake servers run on runtimes of their own).
pub(crate) fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// Waits until nothing of the operator is left: no watch and no connection on the server, and
/// no more tasks on this runtime than `tasks_before`. Call after dropping the test's clients.
pub(crate) async fn assert_nothing_left(server: &FakeApiServer, tasks_before: usize) {
    wait("the operator's watches to close", || async {
        (server.stats().open_watches == 0).then_some(())
    })
    .await;
    wait("every connection to close", || async {
        (server.stats().open_connections == 0).then_some(())
    })
    .await;
    assert_no_task_left(tasks_before).await;
}

async fn assert_no_task_left(tasks_before: usize) {
    wait(
        &format!("the tasks to end (back to {tasks_before})"),
        || async { (alive_tasks() == tasks_before).then_some(()) },
    )
    .await;
}

pub(crate) fn settings(grace_period: Duration) -> Settings {
    let mut settings = kopf_testing::test_settings();
    settings.process.grace_period = grace_period;
    settings
}

/// An on-create handler that records the names it is called for.
fn recording(calls: &Calls) -> ChangeHandler {
    let calls = calls.clone();
    ChangeHandler::on_create(examples(), "create_fn", move |inv| {
        let calls = calls.clone();
        async move {
            calls.record(json!(inv.name()));
            Ok(None)
        }
    })
}

/// Sets its flag when dropped: shows that an aborted handler's future was really dropped.
pub(crate) struct DropFlag(pub(crate) Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_operator_stops_cleanly_and_runs_again() {
    let calls = Calls::default();
    let registry = Registry::new().with(recording(&calls));
    let server = server_with_crd().await;
    let client = server.client();
    let harness = OperatorHarness::start_on(
        server,
        Operator::new(registry.clone()).settings(kopf_testing::test_settings()),
    )
    .await;
    create(&client, "first", json!({})).await;
    calls.wait_len(1).await;
    // Stop and start again, against a second server.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_idle_stop_no_watch_connection_or_task_is_left() {
    let tasks_before = alive_tasks();
    let server = server_with_crd().await;
    let calls = Calls::default();
    let mut settings = kopf_testing::test_settings();
    // The object's worker is still there when the operator stops.
    settings.queueing.idle_timeout = HOUR;
    let operator = Operator::new(Registry::new().with(recording(&calls)))
        .settings(settings)
        .client(server.client());
    let running = Running::ready(operator).await;
    let client = server.client();
    create(&client, "idle", json!({})).await;
    calls.wait_len(1).await;
    assert!(
        alive_tasks() > tasks_before,
        "the runtime's metrics see the operator's tasks"
    );
    assert!(server.stats().open_watches > 0, "the operator watches");

    running
        .stop()
        .await
        .expect("an idle operator stops cleanly");

    wait("the operator's watches to close", || async {
        (server.stats().open_watches == 0).then_some(())
    })
    .await;
    drop(client);
    assert_nothing_left(&server, tasks_before).await;
    server.stop().await;
}

/// The connections of the clients that the operator makes (here from a login handler's
/// credentials) end with its run, even while a clone of its client outlives it: a handler kept
/// one, with idle connections in its pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_own_connections_end_with_its_run_though_its_client_is_kept() {
    let tasks_before = alive_tasks();
    let server = server_with_crd().await;
    let info = ConnectionInfo::new(server.url());
    let kept: Arc<Mutex<Option<kube::Client>>> = Arc::default();
    let keeping = kept.clone();
    let registry = Registry::new()
        .with(LoginHandler::on_login("login_fn", move |_invocation| {
            let info = info.clone();
            async move { Ok(Some(info)) }
        }))
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            move |invocation| {
                let keeping = keeping.clone();
                async move {
                    let client = invocation.client().clone();
                    let request = http::Request::get("/api/v1/namespaces/default")
                        .body(Vec::new())
                        .expect("a request");
                    let _: serde_json::Value = client.request(request).await?;
                    *keeping.lock().expect("the kept client") = Some(client);
                    Ok(None)
                }
            },
        ));
    let operator = Operator::new(registry).settings(kopf_testing::test_settings());
    let running = Running::ready(operator).await;
    let client = server.client();
    create(&client, "kept", json!({})).await;
    drop(client);
    wait("the handler to keep the operator's client", || async {
        kept.lock()
            .expect("the kept client")
            .is_some()
            .then_some(())
    })
    .await;

    running.stop().await.expect("a clean stop");

    // The kept client (and kube-client's buffer task that it keeps) is not the operator's;
    // its connections were.
    wait("the operator's connections to close", || async {
        (server.stats().open_connections == 0).then_some(())
    })
    .await;
    assert!(kept.lock().expect("the kept client").take().is_some());
    assert_nothing_left(&server, tasks_before).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_honours_its_stop_returns_early_and_cleans_up() {
    let tasks_before = alive_tasks();
    let server = server_with_crd().await;
    let steps = Calls::default();
    let recorder = steps.clone();
    let handler = ChangeHandler::on_create(examples(), "slow_fn", move |inv| {
        let steps = recorder.clone();
        async move {
            steps.record(json!("started"));
            tokio::select! {
                _ = inv.stopped().cancelled() => {
                    steps.record(json!("cleaned up"));
                    Err(TemporaryError::new("interrupted by the operator's stop").into())
                }
                _ = tokio::time::sleep(HOUR) => Ok(None),
            }
        }
    });
    // Generous: an `Ok` below means the handler ended by itself, not by the abort.
    let operator = Operator::new(Registry::new().with(handler))
        .settings(settings(Duration::from_secs(60)))
        .client(server.client());
    let running = Running::ready(operator).await;
    create(&server.client(), "slow", json!({})).await;
    steps.wait_len(1).await;

    let result = running.stop().await;

    assert!(result.is_ok(), "no grace period was needed: {result:?}");
    assert_eq!(steps.all(), vec![json!("started"), json!("cleaned up")]);
    let object = crate::support::get(&server.client(), "slow")
        .await
        .expect("the object");
    assert!(
        object["metadata"]["annotations"]["kopf.zalando.org/slow_fn"].is_null(),
        "a retry asked for because the operator exits is not an attempt: nothing is recorded \
         ({object})"
    );
    assert_nothing_left(&server, tasks_before).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_ignores_its_stop_is_aborted_after_the_grace_period() {
    let tasks_before = alive_tasks();
    let server = server_with_crd().await;
    let steps = Calls::default();
    let dropped = Arc::new(AtomicBool::new(false));
    let (recorder, flag) = (steps.clone(), dropped.clone());
    let handler = ChangeHandler::on_create(examples(), "stubborn_fn", move |_inv| {
        let steps = recorder.clone();
        let flag = DropFlag(flag.clone());
        async move {
            let _flag = flag;
            steps.record(json!("started"));
            tokio::time::sleep(HOUR).await;
            steps.record(json!("finished"));
            Ok(None)
        }
    });
    let grace = Duration::from_secs(1);
    let operator = Operator::new(Registry::new().with(handler))
        .settings(settings(grace))
        .client(server.client());
    let running = Running::ready(operator).await;
    create(&server.client(), "stubborn", json!({})).await;
    steps.wait_len(1).await;

    // Returns within the test's deadline: long after the grace period, well before the hour.
    let result = running.stop().await;

    assert!(
        matches!(result, Err(OperatorError::Aborted(g)) if g == grace),
        "the stubborn handler was aborted: {result:?}"
    );
    assert!(
        dropped.load(Ordering::SeqCst),
        "the handler's future was dropped"
    );
    assert_eq!(steps.all(), vec![json!("started")]);
    assert_nothing_left(&server, tasks_before).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_during_the_initial_listing_returns_at_once() {
    let tasks_before = alive_tasks();
    let server = server_with_crd().await;
    server.inject(Fault::delay(HOUR).verb("list"));
    let calls = Calls::default();
    let operator = Operator::new(Registry::new().with(recording(&calls)))
        .settings(settings(Duration::from_secs(60)))
        .client(server.client());
    let (running, ready) = Running::start(operator);
    wait("the operator to be listing", || async {
        (server.stats().count_verb("list") > 0).then_some(())
    })
    .await;
    assert!(!ready.is_ready(), "the listing has not finished");

    let result = running.stop().await;

    assert!(result.is_ok(), "no grace period was needed: {result:?}");
    assert!(calls.all().is_empty());
    assert_nothing_left(&server, tasks_before).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_the_server_is_gone_returns_at_once() {
    let tasks_before = alive_tasks();
    let server = server_with_crd().await;
    let calls = Calls::default();
    let operator = Operator::new(Registry::new().with(recording(&calls)))
        .settings(settings(Duration::from_secs(60)))
        .metrics("http://127.0.0.1:0/metrics")
        .client(server.client());
    let endpoint = operator.metrics_endpoint();
    let running = Running::ready(operator).await;
    let url = metrics_url(&endpoint).await;
    let before = unanswered(&url).await;
    server.stop().await;
    // The operator has noticed and is reconnecting: a request of its went unanswered since.
    wait("a request to the gone server to go unanswered", || async {
        (unanswered(&url).await > before).then_some(())
    })
    .await;

    let result = running.stop().await;

    assert!(result.is_ok(), "no grace period was needed: {result:?}");
    assert_no_task_left(tasks_before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_the_server_was_never_reachable_returns_at_once() {
    let tasks_before = alive_tasks();
    // A port where nothing listens: every connection is refused.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let calls = Calls::default();
    let operator = Operator::new(Registry::new().with(recording(&calls)))
        .settings(settings(Duration::from_secs(60)))
        .metrics("http://127.0.0.1:0/metrics")
        .client(client_of(&url));
    let endpoint = operator.metrics_endpoint();
    let (running, ready) = Running::start(operator);
    // The operator has tried to reach the server: a request of its went unanswered.
    let metrics_at = metrics_url(&endpoint).await;
    wait("a request to the closed port to go unanswered", || async {
        (unanswered(&metrics_at).await > 0.0).then_some(())
    })
    .await;
    assert!(!ready.is_ready());

    let result = running.stop().await;

    assert!(result.is_ok(), "no grace period was needed: {result:?}");
    assert_no_task_left(tasks_before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_the_server_never_answers_returns_at_once() {
    let tasks_before = alive_tasks();
    // Connections are accepted but no request is ever answered.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let calls = Calls::default();
    let operator = Operator::new(Registry::new().with(recording(&calls)))
        .settings(settings(Duration::from_secs(60)))
        .client(client_of(&url));
    let (running, ready) = Running::start(operator);
    // The operator has connected and sent its first request, which waits for an answer.
    let (mut connection, _) = tokio::time::timeout(DEADLINE, silent.accept())
        .await
        .expect("the operator connects in time")
        .expect("the connection is accepted");
    let mut first = [0; 1];
    let read = tokio::time::timeout(DEADLINE, connection.read(&mut first))
        .await
        .expect("the operator sends a request in time")
        .expect("the request is read");
    assert_eq!(read, 1, "the operator sent a request");
    assert!(!ready.is_ready());

    let result = running.stop().await;

    assert!(result.is_ok(), "no grace period was needed: {result:?}");
    assert_no_task_left(tasks_before).await;
    drop((connection, silent));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_runs_again_on_the_same_server() {
    let tasks_before = alive_tasks();
    let server = server_with_crd().await;
    let client = server.client();
    let calls = Calls::default();
    let registry = Registry::new().with(recording(&calls));

    let first = Operator::new(registry.clone())
        .settings(kopf_testing::test_settings())
        .client(server.client());
    let running = Running::ready(first).await;
    create(&client, "first", json!({})).await;
    calls.wait_len(1).await;
    running.stop().await.expect("a clean stop");
    wait("the first operator's watches to close", || async {
        (server.stats().open_watches == 0).then_some(())
    })
    .await;

    let second = Operator::new(registry)
        .settings(kopf_testing::test_settings())
        .client(server.client());
    let running = Running::ready(second).await;
    create(&client, "second", json!({})).await;
    calls.wait_len(2).await;
    running.stop().await.expect("a clean stop");

    // "first" was handled once: the second operator found it done and left it alone.
    assert_eq!(calls.all(), vec![json!("first"), json!("second")]);
    drop(client);
    assert_nothing_left(&server, tasks_before).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_one_of_two_operators_leaves_the_other_handling() {
    let (server_a, server_b) = (server_with_crd().await, server_with_crd().await);
    let (client_a, client_b) = (server_a.client(), server_b.client());
    let (calls_a, calls_b) = (Calls::default(), Calls::default());
    let operator_a = Operator::new(Registry::new().with(recording(&calls_a)))
        .settings(kopf_testing::test_settings())
        .client(server_a.client());
    let operator_b = Operator::new(Registry::new().with(recording(&calls_b)))
        .settings(kopf_testing::test_settings())
        .client(server_b.client());
    let running_a = Running::ready(operator_a).await;
    let running_b = Running::ready(operator_b).await;
    create(&client_a, "a1", json!({})).await;
    create(&client_b, "b1", json!({})).await;
    calls_a.wait_len(1).await;
    calls_b.wait_len(1).await;

    running_a.stop().await.expect("a clean stop");
    wait("A's watches to close", || async {
        (server_a.stats().open_watches == 0).then_some(())
    })
    .await;
    create(&client_b, "b2", json!({})).await;
    calls_b.wait_len(2).await;
    assert!(server_b.stats().open_watches > 0, "B still watches");
    running_b.stop().await.expect("a clean stop");

    assert_eq!(calls_a.all(), vec![json!("a1")]);
    assert_eq!(calls_b.all(), vec![json!("b1"), json!("b2")]);
    server_a.stop().await;
    server_b.stop().await;
}

/// How many requests of the operator went unanswered so far (no response came), as its
/// metrics endpoint at `url` counts them.
async fn unanswered(url: &str) -> f64 {
    metrics(url)
        .await
        .iter()
        .filter(|(series, _)| {
            series.starts_with("kopf_api_requests_total{") && series.contains(r#"code="error""#)
        })
        .map(|(_, count)| count)
        .sum()
}

/// A client of whatever listens at `url` (or does not).
fn client_of(url: &str) -> kube::Client {
    let config = kube::Config::new(url.parse().expect("a valid url"));
    kube::Client::try_from(config).expect("a plain-http client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_does_not_wait_for_the_retries_of_a_failed_write() {
    let tasks_before = alive_tasks();
    let server = server_with_crd().await;
    let steps = Calls::default();
    let recorder = steps.clone();
    let handler = ChangeHandler::on_create(examples(), "slow_fn", move |inv| {
        let steps = recorder.clone();
        async move {
            steps.record(json!("started"));
            inv.stopped().cancelled().await;
            Err(TemporaryError::new("interrupted by the operator's stop").into())
        }
    });
    let mut settings = settings(Duration::from_secs(60));
    // The handler's outcome cannot be written (the server is gone): retrying would take an hour.
    settings.networking.error_backoffs = vec![HOUR];
    let operator = Operator::new(Registry::new().with(handler))
        .settings(settings)
        .client(server.client());
    let running = Running::ready(operator).await;
    create(&server.client(), "slow", json!({})).await;
    steps.wait_len(1).await;
    server.stop().await;

    let result = running.stop().await;

    assert!(result.is_ok(), "no grace period was needed: {result:?}");
    assert_no_task_left(tasks_before).await;
}
