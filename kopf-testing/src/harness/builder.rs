//! What a harness starts with: CRDs and objects installed before the operator starts (so its
//! first listing already sees them), its settings, memo and namespaces.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use kopf::admission::WebhookServer;
use kopf::operator::Operator;
use kopf::registry::Registry;
use kopf::{Memo, Settings};
use serde_json::Value;

use super::apiserver::ApiServer;
use super::logs::LogCapture;
use super::operator::OperatorHarness;
use kopf_fake_apiserver::{FakeApiServer, FakeApiServerBuilder};

/// Starts an [`OperatorHarness`] with more than a registry; from [`OperatorHarness::builder`].
///
/// ```no_run
/// # #[derive(kube::CustomResource, Clone, Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
/// # #[kube(group = "kopf.dev", version = "v1", kind = "KopfExample", namespaced)]
/// # struct KopfExampleSpec {}
/// # async fn example(registry: kopf::registry::Registry) {
/// let harness = kopf_testing::OperatorHarness::builder()
///     .crd::<KopfExample>()
///     .apply("{apiVersion: v1, kind: ConfigMap, metadata: {name: config}}")
///     .start(registry)
///     .await;
/// # }
/// ```
#[derive(Debug)]
pub struct HarnessBuilder {
    /// JSON objects and YAML documents, applied in order.
    objects: Vec<Prepared>,
    settings: Settings,
    memo: Option<Memo>,
    namespaces: Option<Vec<String>>,
    logs: Option<LogCapture>,
    service_account: Option<(String, String)>,
    apiserver: ApiServer,
}

#[derive(Debug)]
enum Prepared {
    Value(Value),
    Yaml(String),
}

impl Default for HarnessBuilder {
    fn default() -> Self {
        HarnessBuilder {
            objects: Vec::new(),
            settings: test_settings(),
            memo: None,
            namespaces: None,
            logs: None,
            service_account: None,
            apiserver: ApiServer::from_env(),
        }
    }
}

impl HarnessBuilder {
    /// Installs the CRD of a typed custom resource before the operator starts.
    pub fn crd<K: kube::CustomResourceExt>(mut self) -> Self {
        let crd = serde_json::to_value(K::crd()).expect("CRDs serialize");
        self.objects.push(Prepared::Value(crd));
        self
    }

    /// Applies YAML documents (CRDs, objects) before the operator starts; see
    /// [`OperatorHarness::apply`].
    pub fn apply(mut self, yaml: impl Into<String>) -> Self {
        self.objects.push(Prepared::Yaml(yaml.into()));
        self
    }

    /// The operator's settings (default: [`test_settings`]). Without an admission server,
    /// the harness gives it one on 127.0.0.1 (a free port), so that admission handlers start
    /// in tests that never call their webhooks.
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// The operator's memo.
    pub fn memo(mut self, memo: Memo) -> Self {
        self.memo = Some(memo);
        self
    }

    /// Serve only these namespaces (as `kopf::operator::Operator::namespaces`).
    pub fn namespaces<S: Into<String>>(mut self, patterns: impl IntoIterator<Item = S>) -> Self {
        self.namespaces = Some(patterns.into_iter().map(Into::into).collect());
        self
    }

    /// Runs the operator as the ServiceAccount `namespace/name`, on a server that
    /// [enforces RBAC](crate::FakeApiServerBuilder::enforce_rbac): its requests are allowed
    /// only as far as the Roles and bindings applied (before or after the start) grant. The
    /// test's own client stays the admin. With the operator's `rbac` output applied, this
    /// shows that the output covers what the operator does.
    pub fn service_account(mut self, namespace: &str, name: &str) -> Self {
        self.service_account = Some((namespace.into(), name.into()));
        self
    }

    /// Caps timers' intervals and idle times, and daemons' and timers' initial delays, at
    /// `cap` ([`kopf::settings::ExecutionSettings::interval_cap`]): a timer of `interval = "1h"`
    /// runs every `cap` in the test, with no change to the handler.
    pub fn interval_cap(mut self, cap: Duration) -> Self {
        self.settings.execution.interval_cap = Some(cap);
        self
    }

    /// The API server to run on (default: the one `KOPF_TESTING_APISERVER` names, the fake
    /// one unless it says `real`); see [`ApiServer`].
    pub fn apiserver(mut self, apiserver: ApiServer) -> Self {
        self.apiserver = apiserver;
        self
    }

    /// Runs on a real kube-apiserver, started for this harness, with the fake server in front
    /// of it as a proxy: as [`apiserver`](Self::apiserver)`(ApiServer::Real)`.
    pub fn real_apiserver(self) -> Self {
        self.apiserver(ApiServer::Real)
    }

    /// Captures the operator's logs for [`OperatorHarness::logs`].
    pub(crate) fn logs(mut self, logs: LogCapture) -> Self {
        self.logs = Some(logs);
        self
    }

    /// Starts a fresh API server (the fake one, or a real one with the fake one in front:
    /// see [`apiserver`](Self::apiserver)), applies the CRDs and objects, then starts the
    /// operator with these handlers and waits until it is ready.
    ///
    /// # Panics
    ///
    /// When the server or the operator does not start, or an object is refused.
    pub async fn start(self, registry: Registry) -> OperatorHarness {
        let server = self.apiserver.start(self.server_builder()).await;
        self.start_on(server, registry).await
    }

    /// As [`start`](Self::start), but where the real API server is asked for and none can run
    /// on this machine, says so loudly (naming `test`) and gives `None` (under CI, panics).
    pub(crate) async fn start_or_skip(
        self,
        registry: Registry,
        test: &str,
    ) -> Option<OperatorHarness> {
        let server = self
            .apiserver
            .start_or_skip(self.server_builder(), test)
            .await?;
        Some(self.start_on(server, registry).await)
    }

    fn server_builder(&self) -> FakeApiServerBuilder {
        let mut server = FakeApiServer::builder();
        if self.service_account.is_some() {
            server = server.enforce_rbac();
        }
        server
    }

    async fn start_on(self, server: FakeApiServer, registry: Registry) -> OperatorHarness {
        let mut harness = OperatorHarness::without_operator(server, self.logs);
        harness.service_account = self.service_account;
        for prepared in self.objects {
            match prepared {
                Prepared::Value(object) => {
                    harness.apply_value(object).await;
                }
                Prepared::Yaml(yaml) => {
                    harness.apply(&yaml).await;
                }
            }
        }
        let mut settings = self.settings;
        if settings.admission.server.is_none() {
            // Admission handlers need a server to start; tests call their webhooks, if at
            // all, through the harness's own address (a startup handler may set another).
            settings.admission.server =
                Some(WebhookServer::new().addr(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        }
        let mut operator = Operator::new(registry).settings(settings);
        if let Some(memo) = self.memo {
            operator = operator.memo(memo);
        }
        if let Some(namespaces) = self.namespaces {
            operator = operator.namespaces(namespaces);
        }
        harness.launch(operator).await;
        harness
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
}
