//! Running an operator against a fake API server in a test: start both, wait for conditions
//! on objects with a deadline, stop, and check that nothing was left behind.
//!
//! ```no_run
//! # async fn example(registry: kopf::Registry) {
//! use kopf_testing::OperatorHarness;
//! let harness = OperatorHarness::start(registry).await;
//! // create objects with harness.client(), then:
//! let examples = "/apis/kopf.dev/v1/namespaces/default/kopfexamples";
//! harness
//!     .wait_for_objects(examples, "a handler's result", |objects| objects.iter().any(|o| !o["status"].is_null()))
//!     .await;
//! harness.stop().await.expect("a clean stop");
//! # }
//! ```

use std::future::Future;
use std::time::Duration;

use kopf::{Operator, OperatorError, Registry, Settings};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::FakeApiServer;

/// How long [`OperatorHarness::wait_for`] and friends wait before failing the test.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// An operator under test with its own fake API server (on a runtime of its own, so the
/// server's tasks are never mistaken for the operator's).
#[derive(Debug)]
pub struct OperatorHarness {
    /// The fake API server; taken by [`OperatorHarness::stop`].
    server: Option<FakeApiServer>,
    stop: CancellationToken,
    /// The task running the operator; taken by [`OperatorHarness::stop`].
    running: Option<tokio::task::JoinHandle<Result<(), OperatorError>>>,
}

/// A harness dropped without [`OperatorHarness::stop`] (a failing test) still stops its
/// operator: the task ends on its own instead of outliving the test's interest in it.
impl Drop for OperatorHarness {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Settings that make tests quick: short idle and consistency timeouts, short backoffs.
pub fn test_settings() -> Settings {
    let mut settings = Settings::default();
    settings.queueing.idle_timeout = Duration::from_millis(500);
    settings.persistence.consistency_timeout = Duration::from_secs(2);
    settings.execution.default_backoff = Duration::from_millis(200);
    settings.networking.error_backoffs = vec![Duration::from_millis(50); 3];
    settings.process.grace_period = Duration::from_secs(10);
    settings
}

impl OperatorHarness {
    /// A fresh server and an operator with [`test_settings`], ready (everything listed).
    pub async fn start(registry: Registry) -> OperatorHarness {
        let server = FakeApiServer::builder()
            .start_on_own_runtime()
            .await
            .expect("the fake API server starts");
        Self::start_on(server, Operator::new(registry).settings(test_settings())).await
    }

    /// An operator of your own making against a server of your own, ready.
    pub async fn start_on(server: FakeApiServer, operator: Operator) -> OperatorHarness {
        let operator = operator.client(server.client());
        let ready = operator.ready();
        let stop = CancellationToken::new();
        let running = tokio::spawn(operator.run(stop.clone()));
        tokio::time::timeout(DEADLINE, ready.wait())
            .await
            .expect("the operator gets ready in time");
        OperatorHarness {
            server: Some(server),
            stop,
            running: Some(running),
        }
    }

    /// The fake API server.
    pub fn server(&self) -> &FakeApiServer {
        self.server.as_ref().expect("the server lives until stop()")
    }

    /// A client of the fake API server, for the test's own requests.
    pub fn client(&self) -> kube::Client {
        self.server().client()
    }

    /// Waits until `condition` holds for the objects of a collection (an API path such as
    /// `/apis/kopf.dev/v1/namespaces/default/kopfexamples`); panics after [`DEADLINE`].
    pub async fn wait_for_objects(
        &self,
        path: &str,
        what: &str,
        condition: impl Fn(&[Value]) -> bool,
    ) {
        let client = self.client();
        wait(what, || async {
            let request = http::Request::get(path)
                .body(Vec::new())
                .expect("a GET request");
            let list: Value = client.request(request).await.ok()?;
            let items = list["items"].as_array().cloned().unwrap_or_default();
            condition(&items).then_some(())
        })
        .await;
    }

    /// Stops the operator and waits for `run()` to return; then checks that the operator left
    /// no watch open on the server. Returns what `run()` returned.
    pub async fn stop(mut self) -> Result<(), OperatorError> {
        self.stop.cancel();
        let running = self.running.take().expect("only stop() takes the task");
        let result = tokio::time::timeout(DEADLINE, running)
            .await
            .expect("the operator stops in time")
            .expect("the operator's task did not panic");
        let server = self.server();
        wait("the operator's watches to close", || async {
            (server.stats().open_watches == 0).then_some(())
        })
        .await;
        if let Some(server) = self.server.take() {
            server.stop().await;
        }
        result
    }
}

/// Polls `condition` until it returns `Some`; panics with `what` after [`DEADLINE`].
pub async fn wait<T, F, Fut>(what: &str, mut condition: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let until = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(value) = condition().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "timed out after {DEADLINE:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
