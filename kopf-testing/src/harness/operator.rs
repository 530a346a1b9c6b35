//! The harness itself: an operator under test with its own API server, the test's client,
//! what the operator sent and logged, and the stop with its checks (also after a drop).

use std::sync::{Arc, Mutex};

use kopf::operator::{Operator, OperatorError};
use kopf::outcomes::Outcomes;
use kopf_fake_apiserver::{DEADLINE, FakeApiServer, TestClient, try_wait, wait};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::locks::lock;
use super::logs::LogCapture;
use super::sent::{OperatorClient, SentRequest};

/// An operator under test with its own fake API server (on a runtime of its own, so the
/// server's tasks are never mistaken for the operator's).
pub struct OperatorHarness {
    /// The fake API server; taken by [`OperatorHarness::stop`].
    server: Option<FakeApiServer>,
    /// The test's own client, for the helpers and [`OperatorHarness::client`].
    pub(super) test_client: TestClient,
    stop: CancellationToken,
    /// The task running the operator; taken by [`OperatorHarness::stop`].
    running: Option<tokio::task::JoinHandle<Result<(), OperatorError>>>,
    /// What the operator's client sent, and whether its connections are closed.
    operator_client: Option<OperatorClient>,
    /// Lines the operator logged, when the test's runtime captures them.
    logs: Option<LogCapture>,
    /// Where a dropped harness leaves its running parts for a [`Finisher`] to stop.
    leftovers: Option<Arc<Mutex<Option<Leftovers>>>>,
    /// The ServiceAccount `(namespace, name)` the operator acts as, if not the admin.
    pub(super) service_account: Option<(String, String)>,
    /// The operator's handlers' outcomes.
    pub(super) outcomes: Outcomes,
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

impl OperatorHarness {
    /// An operator of your own making against a server of your own, ready. The operator's
    /// client is replaced by one to this server that records what it sends.
    pub async fn start_on(server: FakeApiServer, operator: Operator) -> OperatorHarness {
        let mut harness = Self::without_operator(server, None);
        harness.launch(operator).await;
        harness
    }

    /// A harness whose operator has not started yet.
    pub(super) fn without_operator(
        server: FakeApiServer,
        logs: Option<LogCapture>,
    ) -> OperatorHarness {
        OperatorHarness {
            test_client: TestClient::new(server.client()),
            server: Some(server),
            stop: CancellationToken::new(),
            running: None,
            operator_client: None,
            logs,
            leftovers: None,
            service_account: None,
            outcomes: Outcomes::default(),
        }
    }

    /// Starts the operator and waits until it is ready.
    pub(super) async fn launch(&mut self, operator: Operator) {
        let (operator_client, client) =
            OperatorClient::new(self.server(), self.service_account.as_ref()).await;
        let operator = operator.client(client);
        self.outcomes = operator.outcomes();
        let ready = operator.ready();
        self.running = Some(tokio::spawn(operator.run(self.stop.clone())));
        self.operator_client = Some(operator_client);
        let running = self.running.as_mut().expect("just started");
        tokio::select! {
            _ = ready.wait() => {}
            result = running => match result {
                Ok(Err(error)) => panic!("the operator stopped before it got ready: {error}"),
                result => panic!("the operator stopped before it got ready: {result:?}"),
            },
            _ = tokio::time::sleep(DEADLINE) => panic!("the operator did not get ready within {DEADLINE:?}"),
        }
    }

    /// Marks what follows in the test as needing the fake server (what `what` does cannot be
    /// done in front of a real one): on the real server, says loudly that the test skips and
    /// returns `true`, and the test returns; on the fake server, returns `false`.
    ///
    /// ```no_run
    /// # async fn example(harness: kopf_testing::OperatorHarness) {
    /// if harness.fake_only("re-creating an object under its name at once") {
    ///     return;
    /// }
    /// # }
    /// ```
    pub fn fake_only(&self, what: &str) -> bool {
        super::apiserver::fake_only(self.server(), what)
    }

    /// The fake API server, or the proxy in front of the real one
    /// ([`FakeApiServer::is_proxy`]): its request log, counters and faults work the same.
    pub fn server(&self) -> &FakeApiServer {
        self.server.as_ref().expect("the server lives until stop()")
    }

    /// A client of the fake API server, for the test's own requests (a handle to the one
    /// the helpers use; drop it before [`OperatorHarness::stop`] checks the connections).
    pub fn client(&self) -> kube::Client {
        self.test_client.client().clone()
    }

    /// The test's client of the fake API server, which the harness's helpers (`apply`,
    /// `request`, `wait_for`, ...) use.
    pub fn test_client(&self) -> &TestClient {
        &self.test_client
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
            try_wait(|| async { self.logs().into_iter().find(|line| line.contains(text)) }).await;
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
        wait(what, || async {
            let (status, list) = self.test_client.try_request("GET", path, None).await.ok()?;
            let items = list["items"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default();
            (status.is_success() && condition(items)).then_some(())
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
