//! Running an operator against a fake API server in a test, as Kopf's `KopfRunner` does: one
//! call starts a fresh server and the operator; helpers create objects, wait for conditions on
//! them with a deadline, show what the operator sent and logged; [`OperatorHarness::stop`]
//! stops the operator and checks that it left nothing behind.
//!
//! ```no_run
//! # async fn example(registry: kopf::Registry) {
//! use kopf_testing::OperatorHarness;
//! let harness = OperatorHarness::start(registry).await;
//! harness.apply(include_str!("../../examples/crd.yaml")).await; // waits until Established
//! harness.apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: kex}}").await;
//! let object = harness
//!     .wait_for("kopfexamples", "default", "kex", |o| !o["status"].is_null())
//!     .await;
//! assert!(!harness.patches_to("kex").is_empty()); // what the operator sent to it
//! harness.stop().await.expect("a clean stop");
//! # }
//! ```
//!
//! The `#[kopf_testing::test]` attribute does the starting and stopping around a test's body.

mod builder;
mod logs;
mod objects;
mod sent;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kopf::{Operator, OperatorError, Registry, Settings};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::FakeApiServer;

pub use builder::HarnessBuilder;
pub(crate) use logs::LogCapture;
pub use sent::SentRequest;

use objects::Resolutions;
use sent::OperatorClient;

/// How long [`OperatorHarness::wait_for`] and friends wait before failing the test.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// An operator under test with its own fake API server (on a runtime of its own, so the
/// server's tasks are never mistaken for the operator's).
pub struct OperatorHarness {
    /// The fake API server; taken by [`OperatorHarness::stop`].
    server: Option<FakeApiServer>,
    /// The test's own client, for the helpers and [`OperatorHarness::client`].
    client: kube::Client,
    stop: CancellationToken,
    /// The task running the operator; taken by [`OperatorHarness::stop`].
    running: Option<tokio::task::JoinHandle<Result<(), OperatorError>>>,
    /// What the operator's client sent, and whether its connections are closed.
    operator_client: Option<OperatorClient>,
    /// Resource names resolved through discovery.
    resolutions: Resolutions,
    /// Lines the operator logged, when the test's runtime captures them.
    logs: Option<LogCapture>,
    /// Where a dropped harness leaves its running parts for a [`Finisher`] to stop.
    leftovers: Option<Arc<Mutex<Option<Leftovers>>>>,
}

impl std::fmt::Debug for OperatorHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorHarness")
            .field("server", &self.server)
            .field("running", &self.running)
            .field("operator_client", &self.operator_client)
            .finish_non_exhaustive()
    }
}

/// What a harness dropped before [`OperatorHarness::stop`] still has running.
#[derive(Debug)]
struct Leftovers {
    server: FakeApiServer,
    running: tokio::task::JoinHandle<Result<(), OperatorError>>,
    operator_client: OperatorClient,
}

/// A harness dropped without [`OperatorHarness::stop`] (a failing test) still stops its
/// operator: the task ends on its own instead of outliving the test's interest in it. Under
/// `#[kopf_testing::test]`, the attribute then finishes the stop and its checks.
impl Drop for OperatorHarness {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(slot) = &self.leftovers
            && let (Some(server), Some(running), Some(operator_client)) = (
                self.server.take(),
                self.running.take(),
                self.operator_client.take(),
            )
        {
            *lock(slot) = Some(Leftovers {
                server,
                running,
                operator_client,
            });
        }
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
    ///
    /// To install CRDs or objects before the operator starts, or to change its settings,
    /// use [`OperatorHarness::builder`].
    pub async fn start(registry: Registry) -> OperatorHarness {
        Self::builder().start(registry).await
    }

    /// A harness with CRDs, objects, settings or a memo of the test's choosing.
    pub fn builder() -> HarnessBuilder {
        HarnessBuilder::default()
    }

    /// An operator of your own making against a server of your own, ready. The operator's
    /// client is replaced by one to this server that records what it sends.
    pub async fn start_on(server: FakeApiServer, operator: Operator) -> OperatorHarness {
        let mut harness = Self::without_operator(server, None);
        harness.launch(operator).await;
        harness
    }

    /// A harness whose operator has not started yet.
    fn without_operator(server: FakeApiServer, logs: Option<LogCapture>) -> OperatorHarness {
        OperatorHarness {
            client: server.client(),
            server: Some(server),
            stop: CancellationToken::new(),
            running: None,
            operator_client: None,
            resolutions: Resolutions::default(),
            logs,
            leftovers: None,
        }
    }

    /// Starts the operator and waits until it is ready.
    async fn launch(&mut self, operator: Operator) {
        let (operator_client, client) = OperatorClient::new(self.server()).await;
        let operator = operator.client(client);
        let ready = operator.ready();
        self.running = Some(tokio::spawn(operator.run(self.stop.clone())));
        self.operator_client = Some(operator_client);
        let running = self.running.as_mut().expect("just started");
        tokio::select! {
            _ = ready.wait() => {}
            result = running => panic!("the operator stopped before it got ready: {result:?}"),
            _ = tokio::time::sleep(DEADLINE) => panic!("the operator did not get ready within {DEADLINE:?}"),
        }
    }

    /// The fake API server.
    pub fn server(&self) -> &FakeApiServer {
        self.server.as_ref().expect("the server lives until stop()")
    }

    /// A client of the fake API server, for the test's own requests (a handle to the one
    /// the helpers use; drop it before [`OperatorHarness::stop`] checks the connections).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// Every request the operator sent so far, oldest first (the test's own requests are
    /// not among them).
    pub fn sent(&self) -> Vec<SentRequest> {
        self.operator_client
            .as_ref()
            .map(OperatorClient::sent)
            .unwrap_or_default()
    }

    /// The PATCH requests the operator sent to the object `name` (of any resource, its
    /// `/status` included), oldest first; each [`SentRequest::body`] is the patch.
    pub fn patches_to(&self, name: &str) -> Vec<SentRequest> {
        self.sent()
            .into_iter()
            .filter(|r| r.method == "PATCH" && r.name.as_deref() == Some(name))
            .collect()
    }

    /// The lines the operator and its handlers logged so far (what Kopf's `KopfRunner` shows
    /// as `output`). Captured in tests with `#[kopf_testing::test]`, whose runtime routes the
    /// operator's logs here (and to the test's output).
    ///
    /// # Panics
    ///
    /// Outside such a test: the operator's tasks log to whatever subscriber is installed.
    pub fn logs(&self) -> Vec<String> {
        self.logs
            .as_ref()
            .expect(
                "logs are captured only in #[kopf_testing::test] tests; elsewhere, \
                 install a tracing subscriber of your own",
            )
            .lines()
    }

    /// Waits until some logged line contains `text`; returns that line. Panics after
    /// [`DEADLINE`] with every line logged, and outside `#[kopf_testing::test]` tests (see
    /// [`OperatorHarness::logs`]).
    pub async fn wait_for_log(&self, text: &str) -> String {
        let found =
            wait_or_none(|| async { self.logs().into_iter().find(|line| line.contains(text)) })
                .await;
        found.unwrap_or_else(|| {
            panic!(
                "timed out after {DEADLINE:?} waiting for a log line with {text:?}; logged:\n{}",
                self.logs().join("\n")
            )
        })
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
    /// nothing behind: its kube client dropped, its connections closed, no watch open on the
    /// server. Returns what `run()` returned.
    ///
    /// # Panics
    ///
    /// When the operator does not stop within [`DEADLINE`], its task panicked, or something
    /// of it is still open after [`DEADLINE`].
    pub async fn stop(mut self) -> Result<(), OperatorError> {
        self.stop.cancel();
        let (Some(server), Some(running), Some(operator_client)) = (
            self.server.take(),
            self.running.take(),
            self.operator_client.take(),
        ) else {
            unreachable!("only stop() and drop take the operator's parts")
        };
        Leftovers {
            server,
            running,
            operator_client,
        }
        .stop()
        .await
    }

    /// A finisher that stops this harness's operator after the harness is dropped.
    pub(crate) fn finisher(&mut self) -> Finisher {
        let slot = Arc::new(Mutex::new(None));
        self.leftovers = Some(slot.clone());
        Finisher(slot)
    }
}

impl Leftovers {
    async fn stop(self) -> Result<(), OperatorError> {
        let Leftovers {
            server,
            running,
            operator_client,
        } = self;
        let result = tokio::time::timeout(DEADLINE, running)
            .await
            .unwrap_or_else(|_| panic!("the operator did not stop within {DEADLINE:?}"))
            .expect("the operator's task did not panic");
        operator_client.wait_closed().await;
        wait("the operator's watches to close", || async {
            (server.stats().open_watches == 0).then_some(())
        })
        .await;
        server.stop().await;
        result
    }
}

/// Stops the operator of a dropped harness and checks that it left nothing behind (what
/// `#[kopf_testing::test]` does after the test's body).
#[derive(Debug)]
pub(crate) struct Finisher(Arc<Mutex<Option<Leftovers>>>);

impl Finisher {
    /// Stops what the harness left, if it was not stopped already; panics if the operator
    /// failed or left something behind.
    pub(crate) async fn finish(self) {
        let leftovers = lock(&self.0).take();
        if let Some(leftovers) = leftovers
            && let Err(error) = leftovers.stop().await
        {
            panic!("the operator failed: {error}");
        }
    }
}

/// Polls `condition` until it returns `Some`; panics with `what` after [`DEADLINE`].
pub async fn wait<T, F, Fut>(what: &str, condition: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    wait_or_none(condition)
        .await
        .unwrap_or_else(|| panic!("timed out after {DEADLINE:?} waiting for {what}"))
}

/// Polls `condition` until it returns `Some`, or [`DEADLINE`] passes (then `None`).
async fn wait_or_none<T, F, Fut>(mut condition: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let until = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(value) = condition().await {
            return Some(value);
        }
        if tokio::time::Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Locks a mutex, recovering the data if a panicking test poisoned it.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
