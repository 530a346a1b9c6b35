//! Which API server a test runs on: the fake one, or a real kube-apiserver (Kubernetes 1.36
//! with etcd and the controller manager, started fresh for the test) with the fake one in
//! front of it as a proxy, so that the request log, the counters and the injected faults work
//! the same on both.
//!
//! A whole test binary moves onto the real server with `KOPF_TESTING_APISERVER=real`; one
//! test or harness with [`HarnessBuilder::apiserver`](super::HarnessBuilder::apiserver) or
//! `#[kopf_testing::test(apiserver = real)]`. A test that needs what only the fake server can
//! do (restart it from a state file, compact its history, re-create objects, lag its views)
//! says so with [`OperatorHarness::fake_only`](super::OperatorHarness::fake_only) or
//! [`fake_only`], and skips on the real server.

use kopf_fake_apiserver::{FakeApiServer, FakeApiServerBuilder, RealApiServer};

/// The environment variable that moves tests onto the real API server: `real`, or `fake`
/// (the default, also when unset or empty).
pub const APISERVER_VARIABLE: &str = "KOPF_TESTING_APISERVER";

/// The API server a test runs on.
///
/// ```no_run
/// # async fn example(registry: kopf::registry::Registry) {
/// use kopf_testing::{ApiServer, OperatorHarness};
/// let harness = OperatorHarness::builder()
///     .apiserver(ApiServer::Real)
///     .start(registry)
///     .await;
/// assert!(harness.server().is_proxy()); // the fake server in front of a real one
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApiServer {
    /// The fake API server (`kopf-fake-apiserver`), in memory: fast, and with every control
    /// and fault.
    #[default]
    Fake,
    /// A real kube-apiserver started for the test (`scripts/real-apiserver`: built once from
    /// Go modules, started in seconds), with a fake server in front as a proxy
    /// ([`FakeApiServerBuilder::upstream`]).
    Real,
}

impl ApiServer {
    /// The API server that [`APISERVER_VARIABLE`] names: [`ApiServer::Real`] for `real`,
    /// [`ApiServer::Fake`] for `fake`, or when it is unset or empty.
    ///
    /// # Panics
    ///
    /// For any other value: a typo must not quietly run the tests on the fake server.
    pub fn from_env() -> ApiServer {
        let value = std::env::var(APISERVER_VARIABLE).unwrap_or_default();
        match value.trim() {
            "" | "fake" => ApiServer::Fake,
            "real" => ApiServer::Real,
            other => panic!("{APISERVER_VARIABLE}={other:?}: say `real` or `fake`"),
        }
    }

    /// Starts an API server of this kind for a test, on a runtime of its own: a fake one
    /// set up by `builder`, or a fresh real one with a fake one of `builder` in front as a
    /// proxy (settings that only a fake server has, a journal say, fail its start).
    ///
    /// # Panics
    ///
    /// When it does not start, or no real server can run on this machine (no Go toolchain to
    /// build it once): use [`ApiServer::start_or_skip`] to skip instead.
    pub async fn start(self, builder: FakeApiServerBuilder) -> FakeApiServer {
        match self {
            ApiServer::Fake => builder
                .start_on_own_runtime()
                .await
                .expect("the fake API server starts on 127.0.0.1"),
            ApiServer::Real => {
                let real = RealApiServer::start().await.unwrap_or_else(|error| {
                    panic!("a real API server was asked for ({APISERVER_VARIABLE}=real or in the test), but: {error}")
                });
                real.proxy(builder)
                    .await
                    .expect("the proxy in front of the real API server starts")
            }
        }
    }

    /// As [`ApiServer::start`], but where no real server can run on this machine, says so
    /// loudly (naming `test`) and gives `None`: the test skips. Where the `CI` environment
    /// variable is set, that is a failure instead.
    ///
    /// # Panics
    ///
    /// When the server does not start, or cannot run here under CI.
    pub async fn start_or_skip(
        self,
        builder: FakeApiServerBuilder,
        test: &str,
    ) -> Option<FakeApiServer> {
        match self {
            ApiServer::Fake => Some(self.start(builder).await),
            ApiServer::Real => {
                let real = RealApiServer::for_test(test).await?;
                Some(
                    real.proxy(builder)
                        .await
                        .expect("the proxy in front of the real API server starts"),
                )
            }
        }
    }
}

impl ApiServer {
    /// Marks a test as needing the fake server before any server is started (for what a
    /// proxy in front of a real one refuses to start with, a state file say): for
    /// [`ApiServer::Real`], says loudly that the test skips because of `what` and returns
    /// `true`; the test then returns.
    ///
    /// ```no_run
    /// # async fn example() {
    /// use kopf_testing::ApiServer;
    /// if ApiServer::from_env().fake_only("a server restarted from its state file") {
    ///     return;
    /// }
    /// # }
    /// ```
    pub fn fake_only(self, what: &str) -> bool {
        if self == ApiServer::Fake {
            return false;
        }
        skipping(what);
        true
    }
}

/// Says loudly that the current test skips on the real server because of `what`.
fn skipping(what: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    eprintln!("\n!!! SKIPPED {test} on the real API server: {what} works only on the fake one\n");
}

/// Marks what follows in a test as needing the fake server: on a real one (a proxy in front of
/// it), says loudly that the test skips because of `what` and returns `true`; the test then
/// returns. On the fake server, returns `false`.
///
/// ```no_run
/// # async fn example(server: kopf_testing::FakeApiServer) {
/// if kopf_testing::fake_only(&server, "compacting the watch history") {
///     return;
/// }
/// server.compact();
/// # }
/// ```
pub fn fake_only(server: &FakeApiServer, what: &str) -> bool {
    if !server.is_proxy() {
        return false;
    }
    skipping(what);
    true
}

/// The kube-rs configuration of a client of `server` that acts as the ServiceAccount
/// `namespace/name`, with `namespace` as its default namespace. On the fake server, with
/// the token it makes up ([`FakeApiServer::service_account_config`]); on a real one, the
/// account is created if it does not exist and the real server issues its token (a
/// `TokenRequest`, valid for a day).
///
/// # Panics
///
/// When the real server refuses the account or its token.
pub async fn service_account_config(
    server: &FakeApiServer,
    namespace: &str,
    name: &str,
) -> kube::Config {
    if !server.is_proxy() {
        return server.service_account_config(namespace, name);
    }
    let client = server.client();
    let account = http::Request::post(format!("/api/v1/namespaces/{namespace}/serviceaccounts"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(
            serde_json::to_vec(&serde_json::json!({
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": name},
            }))
            .expect("JSON serializes"),
        )
        .expect("a ServiceAccount");
    match client.request::<serde_json::Value>(account).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("creating the ServiceAccount {namespace}/{name} failed: {error}"),
    }
    let request = http::Request::post(format!(
        "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
    ))
    .header(http::header::CONTENT_TYPE, "application/json")
    .body(
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 86_400},
        }))
        .expect("JSON serializes"),
    )
    .expect("a TokenRequest");
    let issued: serde_json::Value = client
        .request(request)
        .await
        .unwrap_or_else(|error| panic!("a token for {namespace}/{name} was refused: {error}"));
    let token = issued["status"]["token"]
        .as_str()
        .unwrap_or_else(|| panic!("a TokenRequest's answer without a token: {issued}"))
        .to_string();
    let mut config = server.config();
    config.default_namespace = namespace.into();
    config.auth_info.token = Some(token.into());
    config
}

/// A kube-rs client of `server` that acts as the ServiceAccount `namespace/name`; see
/// [`service_account_config`].
pub async fn service_account_client(
    server: &FakeApiServer,
    namespace: &str,
    name: &str,
) -> kube::Client {
    kube::Client::try_from(service_account_config(server, namespace, name).await)
        .expect("a client of the server builds")
}
