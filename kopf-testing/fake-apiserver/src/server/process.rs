//! The server process: how it is set up and started (on the current runtime or one of its own),
//! and the handle tests hold to look inside, steer, restart and stop it.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::listener::{Limits, accept};
use super::saving::save_continuously;
use super::tls::Tls;
use crate::endpoints::access::Access;
use crate::endpoints::control::{
    Counters, Fault, Faults, LoggedRequest, Stats, fake_only_message, lock,
};
use crate::endpoints::holding::{HeldWrite, Pen, Release};
use crate::endpoints::journal::Journal;
use crate::endpoints::recording::Recorder;
use crate::endpoints::resources::{recreate, service_account_token};
use crate::endpoints::shared::{Shared, stats};
use crate::endpoints::upstream::Upstream;
use crate::semantics::cluster;
use crate::storage::persist::{self, LogFile, StateFileError};
use crate::storage::private_files;
use crate::storage::state::{ChangeKind, State};

/// How a [`FakeApiServer`] is set up; made with [`FakeApiServer::builder`].
#[derive(Debug, Clone)]
pub struct FakeApiServerBuilder {
    bind: SocketAddr,
    tls: bool,
    token: Option<String>,
    history_limit: usize,
    bookmark_interval: Duration,
    state_file: Option<PathBuf>,
    fault_seed: u64,
    log_limit: usize,
    journal: bool,
    contract_breaking: bool,
    enforce_rbac: bool,
    sharded_watches: bool,
    header_timeout: Duration,
    body_timeout: Duration,
    max_connections: usize,
    /// Who started the server (a test's thread), for the recording mode's log.
    session: Option<String>,
    upstream: Option<kube::Config>,
}

impl Default for FakeApiServerBuilder {
    fn default() -> Self {
        FakeApiServerBuilder {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: false,
            token: None,
            history_limit: 10_000,
            bookmark_interval: Duration::from_secs(30),
            state_file: None,
            fault_seed: 0,
            log_limit: 100_000,
            journal: false,
            contract_breaking: false,
            enforce_rbac: false,
            sharded_watches: true,
            header_timeout: Duration::from_secs(32),
            body_timeout: Duration::from_secs(60),
            max_connections: 1024,
            session: None,
            upstream: None,
        }
    }
}

impl FakeApiServerBuilder {
    /// The address to listen on (default `127.0.0.1:0`, an ephemeral port).
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.bind = addr;
        self
    }

    /// Serve HTTPS (plain HTTP by default) with a certificate authority made for this server
    /// at start ([`FakeApiServer::ca_pem`]) and a certificate it signs for `localhost`,
    /// `127.0.0.1`, `::1` and the in-cluster names (`kubernetes.default.svc`, ...). The URL
    /// becomes `https://127.0.0.1:PORT`; [`FakeApiServer::client`], [`FakeApiServer::config`]
    /// and the kubeconfig trust the CA. A plain HTTP request to it gets what Go's servers
    /// answer: `400 Bad Request`, `Client sent an HTTP request to an HTTPS server.`
    ///
    /// ```no_run
    /// # async fn example() -> std::io::Result<()> {
    /// let server = kopf_fake_apiserver::FakeApiServer::builder().tls().start().await?;
    /// assert!(server.url().starts_with("https://"));
    /// std::fs::write("/tmp/fake-ca.pem", server.ca_pem().expect("it serves TLS"))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn tls(mut self) -> Self {
        self.tls = true;
        self
    }

    /// Require credentials, with this bearer token as the admin's: a request with another
    /// token is `401 Unauthorized`, and one without credentials is `system:anonymous`, whom
    /// Kubernetes' bootstrap roles let read the health checks (`/healthz`, `/livez`,
    /// `/readyz`) and `/version` only: `403 Forbidden` elsewhere, the control API under
    /// `/_fake/` included. Without it, the admin's token is made at start, and credentials are
    /// not required (unless [RBAC is enforced](Self::enforce_rbac)): a request without any
    /// acts as the admin.
    ///
    /// It turns [TLS](Self::tls) on: kubectl (client-go) sends no credentials to a server
    /// over plain HTTP, so a token there would lock it out.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self.tls = true;
        self
    }

    /// Check the requests made with ServiceAccounts' tokens
    /// ([`FakeApiServer::service_account_token`]) against the stored Roles, ClusterRoles,
    /// RoleBindings and ClusterRoleBindings, as Kubernetes' RBAC authorizer does: what no rule
    /// grants is `403 Forbidden`, with the API server's message. Credentials are required
    /// then: a request without any is `system:anonymous`, judged by the roles too. The admin's
    /// token ([`FakeApiServer::client`] sends it) keeps full access.
    ///
    /// ```no_run
    /// # async fn example() -> std::io::Result<()> {
    /// let server = kopf_fake_apiserver::FakeApiServer::builder().enforce_rbac().start().await?;
    /// let operator = server.client_as_service_account("default", "my-operator");
    /// // 403 until a Role bound to default/my-operator allows listing ConfigMaps:
    /// let configmaps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::default_namespaced(operator);
    /// assert!(configmaps.list(&Default::default()).await.is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn enforce_rbac(mut self) -> Self {
        self.enforce_rbac = true;
        self
    }

    /// How many changes the watch history keeps (default 10,000); older resourceVersions get
    /// `410 Expired`.
    pub fn history_limit(mut self, limit: usize) -> Self {
        self.history_limit = limit;
        self
    }

    /// How often watches with `allowWatchBookmarks` get a BOOKMARK (default 30 s).
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }

    /// Keep the objects in this file: loaded at start (a missing file is an empty cluster),
    /// and every write saved in it (fsync'd) before it is answered, so that neither a restart
    /// nor a crash takes back a write a client saw answered. Writes from many clients at once
    /// share their fsyncs. Without it, the server is in memory only, and pays nothing for this.
    ///
    /// Files saved by earlier versions (one JSON document, saved every few seconds) load and
    /// are turned into the current format.
    pub fn state_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.state_file = Some(path.into());
        self
    }

    /// The seed of the generator behind faults with a probability, so runs can be replayed.
    pub fn fault_seed(mut self, seed: u64) -> Self {
        self.fault_seed = seed;
        self
    }

    /// How many requests the request log keeps (default 100,000).
    pub fn log_limit(mut self, limit: usize) -> Self {
        self.log_limit = limit;
        self
    }

    /// Whether lists, watches and deletecollections honour `shardSelector`, Kubernetes 1.36's
    /// server-side sharding (alpha, KEP-5866; on by default here, so that sharding can be
    /// tested): only the objects whose `metadata.uid` or `metadata.namespace` hashes (64-bit
    /// FNV-1a) into the selector's ranges are listed and watched, and lists tell so in
    /// `metadata.shardInfo`. With `false`, the server behaves as real ones do without the
    /// `ShardedListAndWatch` feature gate (off by default in 1.36) and as older ones: the
    /// parameter is ignored, unread, and lists carry no `shardInfo`.
    ///
    /// ```no_run
    /// # async fn example() -> std::io::Result<()> {
    /// let unsharded = kopf_fake_apiserver::FakeApiServer::builder().sharded_watches(false).start().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn sharded_watches(mut self, enabled: bool) -> Self {
        self.sharded_watches = enabled;
        self
    }

    /// Allow faults that break guarantees real API servers give (events dropped, duplicated
    /// or reordered within one watch stream: [`FaultAction::BreakStream`]). Off by default:
    /// a test that passes only because the server misbehaves proves nothing about a cluster.
    ///
    /// [`FaultAction::BreakStream`]: crate::FaultAction::BreakStream
    pub fn contract_breaking_faults(mut self) -> Self {
        self.contract_breaking = true;
        self
    }

    /// Serve as a proxy in front of the API server of `config` (its URL, the CA it trusts, and
    /// an admin's client certificate) instead of serving objects of its own: every request is
    /// forwarded to it and its answer streams back, while the request log, the counters, the
    /// open connections and watches, and the injected faults work as on the fake server
    /// (see [`Fault`](crate::Fault) for how each fault acts in front of a real server). Requests
    /// go with the admin's certificate, or with their own token when they carry one (a
    /// ServiceAccount's), so the real server authorizes them as itself.
    ///
    /// Without [sharded watches](Self::sharded_watches), the proxy leaves the `shardSelector`
    /// out of the requests it forwards, as a server without the feature gate ignores it.
    ///
    /// With a [journal](Self::journal), the proxy follows the real server's changes of each
    /// resource from the first request for it on (those only the real server's controllers
    /// touch are not journaled).
    ///
    /// What only an API server of its own can do fails at once, saying so: a state file,
    /// another history limit or bookmark interval (at start);
    /// [`FakeApiServer::compact`], [`FakeApiServer::recreate`],
    /// [`FakeApiServer::set_bookmark_interval`], [`FakeApiServer::service_account_token`],
    /// and the [`stale_view`](crate::Fault::stale_view) fault. [`RealApiServer::proxy`] puts a
    /// fake server in front of a real one started for a test.
    ///
    /// [`RealApiServer::proxy`]: crate::RealApiServer::proxy
    pub fn upstream(mut self, config: kube::Config) -> Self {
        self.upstream = Some(config);
        self
    }

    /// Keep a journal of every change made, for [`FakeApiServer::journal`] (off by default: it
    /// holds every version of every object for as long as the server runs).
    pub fn journal(mut self) -> Self {
        self.journal = true;
        self
    }

    /// How long a client has for its TLS handshake and for each request's line and headers;
    /// an idle keep-alive connection is closed after as long (default 32 s, kube-apiserver's
    /// `ReadHeaderTimeout`).
    pub fn header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = timeout;
        self
    }

    /// How long a client has to send a request's body once its headers came; then the
    /// request fails with `408 Timeout` (default 60 s, kube-apiserver's request timeout).
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    /// The most connections kept open (default 1024). A connection beyond it takes the place
    /// of the one that has waited longest for a request (a slow or idle client), or is closed
    /// at once when every connection is busy with one (a watch, say).
    pub fn max_connections(mut self, max: usize) -> Self {
        self.max_connections = max;
        self
    }

    /// Starts serving on a runtime of its own, on a thread of its own: the server's tasks and
    /// connections are then not counted among the caller's runtime's tasks (useful when a test
    /// asserts that an operator left no task behind). [`FakeApiServer::stop`] ends the thread.
    pub async fn start_on_own_runtime(mut self) -> std::io::Result<FakeApiServer> {
        // The server's thread is its own: the recording names the caller's.
        self.session = std::thread::current().name().map(String::from);
        let (started_tx, started_rx) = oneshot::channel();
        let (done_tx, done_rx) = oneshot::channel();
        std::thread::Builder::new()
            .name("kopf-fake-apiserver".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        let _ = started_tx.send(Err(error));
                        return;
                    }
                };
                runtime.block_on(async move {
                    match self.start().await {
                        Ok(server) => {
                            let (root, tracker) = (server.root.clone(), server.tracker.clone());
                            if started_tx.send(Ok(server)).is_ok() {
                                root.cancelled().await;
                            }
                            tracker.close();
                            tracker.wait().await;
                        }
                        Err(error) => {
                            let _ = started_tx.send(Err(error));
                        }
                    }
                });
                drop(runtime);
                let _ = done_tx.send(());
            })?;
        let mut server = started_rx.await.map_err(|_| {
            std::io::Error::other("the fake API server's thread ended before it started")
        })??;
        server.own_runtime = Some(done_rx);
        Ok(server)
    }

    /// Refuses what only a server of its own can do when it is to be a proxy.
    fn check_upstream(&self) -> std::io::Result<()> {
        let Some(config) = &self.upstream else {
            return Ok(());
        };
        let defaults = FakeApiServerBuilder::default();
        let refused = [
            (self.state_file.is_some(), "a state file"),
            (
                self.history_limit != defaults.history_limit,
                "a history limit",
            ),
            (
                self.bookmark_interval != defaults.bookmark_interval,
                "a bookmark interval",
            ),
        ];
        match refused.iter().find(|(asked, _)| *asked) {
            Some((_, what)) => Err(std::io::Error::other(fake_only_message(
                what,
                &config.cluster_url.to_string(),
            ))),
            None => Ok(()),
        }
    }

    /// Starts serving on the current tokio runtime.
    pub async fn start(self) -> std::io::Result<FakeApiServer> {
        self.check_upstream()?;
        let listener = TcpListener::bind(self.bind).await?;
        let addr = listener.local_addr()?;
        let tls = if self.tls {
            Some(Tls::generate(addr.ip())?)
        } else {
            None
        };
        let tracker = TaskTracker::new();
        let mut state = State::new(self.history_limit);
        if self.journal {
            state.keep_journal();
        }
        state.root_ca = tls
            .as_ref()
            .map(|tls| tls.ca_pem.clone())
            .unwrap_or_default();
        let (state, log) = match self.state_file.clone() {
            // A proxy's objects are the upstream's.
            None if self.upstream.is_some() => (state, None),
            None => {
                cluster::bootstrap(&mut state);
                (state, None)
            }
            Some(path) => {
                let opened = tracker.spawn_blocking(move || open_state_file(state, &path));
                let (state, log) = opened.await.map_err(std::io::Error::other)??;
                (state, Some(log))
            }
        };
        let (durability, saving) = match log {
            Some(log) => {
                let (durability, backlog) = persist::channel(state.resource_version());
                (Some(durability), Some((log, backlog)))
            }
            None => (None, None),
        };
        let (changes, _) = watch::channel(state.resource_version());
        let root = CancellationToken::new();
        let upstream = match &self.upstream {
            Some(config) => Some(
                Upstream::new(config, tracker.clone(), root.clone())
                    .map_err(std::io::Error::other)?,
            ),
            None => None,
        };
        let journal = upstream
            .as_ref()
            .filter(|_| self.journal)
            .map(|upstream| Journal::new(upstream.clone(), tracker.clone(), root.clone()));
        let url = match tls {
            Some(_) => format!("https://{addr}"),
            None => format!("http://{addr}"),
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            changes,
            durability,
            counters: Counters::new(self.log_limit),
            recorder: Recorder::from_env(self.session.as_deref()),
            faults: Faults::new(self.fault_seed, self.contract_breaking),
            pen: Pen::new(),
            access: Access::new(self.token, self.enforce_rbac),
            bookmark_interval: Mutex::new(self.bookmark_interval),
            sharded_watches: self.sharded_watches,
            connections: Mutex::new(root.child_token()),
            watches: Mutex::new(root.child_token()),
            host: addr.to_string(),
            url: url.clone(),
            body_timeout: self.body_timeout,
            root: root.clone(),
            upstream,
            journal,
        });
        let limits = Limits {
            header_timeout: self.header_timeout,
            max_connections: self.max_connections,
        };
        tracker.spawn(accept(
            listener,
            tls.clone(),
            shared.clone(),
            limits,
            tracker.clone(),
            root.clone(),
        ));
        if let Some((log, backlog)) = saving {
            tracker.spawn(save_continuously(
                shared.clone(),
                log,
                backlog,
                tracker.clone(),
                root.clone(),
            ));
        }
        Ok(FakeApiServer {
            shared,
            addr,
            url,
            tls,
            root,
            tracker,
            own_runtime: None,
            behind: None,
        })
    }
}

/// Loads the state file into a fresh `state`, adds the namespaces every cluster has, and
/// rewrites the file with all of it (a compaction), open for the writes to come. Blocking.
fn open_state_file(mut state: State, path: &Path) -> Result<(State, LogFile), StateFileError> {
    persist::restore(&mut state, persist::read(path)?);
    cluster::bootstrap(&mut state);
    let log = LogFile::create(path, state.stored(), state.resource_version())?;
    state.keep_unsaved();
    Ok((state, log))
}

/// How long the tokens of [`FakeApiServer::service_account_token`] live: a year, as
/// kube-apiserver extends projected tokens (`ExpirationExtensionSeconds`).
const HELPER_TOKEN_SECONDS: i64 = 365 * 24 * 3600;

/// A fake Kubernetes API server on 127.0.0.1, in memory, for tests and local development.
///
/// Unmodified clients (kubectl, kube-rs, the Python `kubernetes` client, Python Kopf) work
/// against it. Stop it with [`FakeApiServer::stop`]; dropping it also stops serving, but only
/// `stop` waits until every connection is closed.
///
/// ```no_run
/// # async fn example() -> std::io::Result<()> {
/// let server = kopf_fake_apiserver::FakeApiServer::start().await?;
/// let client = server.client();
/// // ... use the client ...
/// server.stop().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct FakeApiServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    url: String,
    /// The certificates, when it serves TLS.
    tls: Option<Tls>,
    root: CancellationToken,
    tracker: TaskTracker,
    /// Resolves when the server's own runtime (if it has one) is gone.
    own_runtime: Option<oneshot::Receiver<()>>,
    /// The real API server this one is a proxy in front of, when it runs for this one only.
    behind: Option<Box<dyn Behind>>,
}

/// A server that a proxy stands in front of and owns: it stops with the proxy.
pub(crate) trait Behind: std::fmt::Debug + Send + Sync {
    /// Stops it and waits until it is gone.
    fn stop(self: Box<Self>) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

impl FakeApiServer {
    /// Starts a server with the default settings on the current tokio runtime.
    pub async fn start() -> std::io::Result<FakeApiServer> {
        Self::builder().start().await
    }

    /// A builder for servers with other settings.
    pub fn builder() -> FakeApiServerBuilder {
        FakeApiServerBuilder::default()
    }

    /// `http://127.0.0.1:PORT`, or `https://127.0.0.1:PORT` when it serves
    /// [TLS](FakeApiServerBuilder::tls).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL of the API server this one is a proxy in front of
    /// ([`FakeApiServerBuilder::upstream`]), or `None` for a fake server of its own.
    pub fn upstream_url(&self) -> Option<&str> {
        self.shared.upstream.as_ref().map(|upstream| upstream.url())
    }

    /// Whether this server is a proxy in front of a real API server.
    pub fn is_proxy(&self) -> bool {
        self.shared.upstream.is_some()
    }

    /// Owns the server behind this proxy, to stop it with this one.
    pub(crate) fn keep(&mut self, behind: Box<dyn Behind>) {
        self.behind = Some(behind);
    }

    /// Panics, saying so, when this server is a proxy and `what` works only on a fake one.
    fn fake_only(&self, what: &str) {
        if let Err(refusal) = self.shared.fake_only(what) {
            panic!("{refusal}");
        }
    }

    /// The certificate (PEM) of the authority that signed the server's certificate, when it
    /// serves [TLS](FakeApiServerBuilder::tls): what clients trust to talk to it
    /// (`certificate-authority-data` in its kubeconfig, `curl --cacert`, Python's
    /// `ssl_ca_cert`).
    pub fn ca_pem(&self) -> Option<&str> {
        self.tls.as_ref().map(|tls| tls.ca_pem.as_str())
    }

    /// A kubeconfig pointing at this server: with its CA when it serves TLS, and with the
    /// admin's bearer token ([`FakeApiServerBuilder::token`], or the one made at start).
    pub fn kubeconfig(&self) -> kube::config::Kubeconfig {
        let yaml = self.kubeconfig_yaml();
        kube::config::Kubeconfig::from_yaml(&yaml).expect("the generated kubeconfig is valid")
    }

    fn kubeconfig_yaml(&self) -> String {
        let mut cluster = json!({"server": self.url});
        if let Some(ca) = self.ca_pem() {
            cluster["certificate-authority-data"] =
                base64::engine::general_purpose::STANDARD.encode(ca).into();
        }
        let user = json!({"token": self.shared.access.admin_token()});
        let config = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kopf-fake", "cluster": cluster}],
            "contexts": [{
                "name": "kopf-fake",
                "context": {"cluster": "kopf-fake", "user": "kopf-fake", "namespace": "default"},
            }],
            "current-context": "kopf-fake",
            "users": [{"name": "kopf-fake", "user": user}],
            "preferences": {},
        });
        serde_norway::to_string(&config).expect("a kubeconfig serializes")
    }

    /// Writes a kubeconfig for this server, for kubectl (`KUBECONFIG=path`) and other clients,
    /// readable by its owner only (mode `0600`): it holds the admin's token.
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        private_files::write(path.as_ref(), self.kubeconfig_yaml())
    }

    /// Writes the certificate of the server's authority ([`FakeApiServer::ca_pem`]) for
    /// clients given a CA file (`curl --cacert`), readable by its owner only (mode `0600`).
    /// Fails for a server that does not serve TLS.
    pub fn write_ca_file(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        let ca = self.ca_pem().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the server serves plain HTTP: it has no certificate authority",
            )
        })?;
        private_files::write(path.as_ref(), ca)
    }

    /// The kube-rs configuration of [`FakeApiServer::client`]: the server's URL, its CA when it
    /// serves TLS, the admin's bearer token, and `default` as the namespace. Change it for
    /// clients of other kinds (no retries, other headers) to this server.
    pub fn config(&self) -> kube::Config {
        let mut config =
            kube::Config::new(self.url.parse().expect("the server's url is a valid uri"));
        config.default_namespace = "default".into();
        config.root_cert = self.tls.as_ref().map(|tls| vec![tls.ca_der.clone()]);
        config.auth_info.token = Some(self.shared.access.admin_token().to_string().into());
        config
    }

    /// A kube-rs client for this server (of [`FakeApiServer::config`]).
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config()).expect("a client of the fake server always builds")
    }

    /// A bearer token that acts as the ServiceAccount `namespace/name`: a JWT signed by the
    /// server, as a `TokenRequest` for the API server's audience gives, valid for a year
    /// (kube-apiserver's longest extension of a projected token). Its requests are checked
    /// against RBAC when the server [enforces it](FakeApiServerBuilder::enforce_rbac).
    ///
    /// The account is created when it does not exist (and its namespace too), so the token
    /// works at once; as on a cluster, it stops working when the account is deleted (or
    /// deleted and created again), and when the server's process ends (the signing key is
    /// made at start).
    ///
    /// # Panics
    ///
    /// When the account cannot be created: its namespace is being deleted, say. In front of a
    /// real API server, which issues its own tokens (ask it with a `TokenRequest`:
    /// `POST .../serviceaccounts/NAME/token`, or use `kopf_testing::service_account_client`).
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        self.fake_only("a token signed by the fake server");
        service_account_token(&self.shared, namespace, name, HELPER_TOKEN_SECONDS).unwrap_or_else(
            |error| {
                panic!(
                    "no token for the ServiceAccount {namespace}/{name}: {}",
                    error.message
                )
            },
        )
    }

    /// A kube-rs client that acts as the ServiceAccount `namespace/name`, with its token
    /// ([`FakeApiServer::service_account_token`]); its default namespace is `namespace`.
    pub fn client_as_service_account(&self, namespace: &str, name: &str) -> kube::Client {
        kube::Client::try_from(self.service_account_config(namespace, name))
            .expect("a client of the fake server always builds")
    }

    /// The kube-rs config of [`FakeApiServer::client_as_service_account`].
    pub fn service_account_config(&self, namespace: &str, name: &str) -> kube::Config {
        let mut config = self.config();
        config.default_namespace = namespace.into();
        config.auth_info.token = Some(self.service_account_token(namespace, name).into());
        config
    }

    /// Counters: open connections and watches, requests by verb and resource, objects.
    pub fn stats(&self) -> Stats {
        stats(&self.shared)
    }

    /// Waits until the server has been quiet for `period`: no request arrived and no object
    /// changed. Tests use it to show that an operator does nothing more, instead of sleeping
    /// a fixed time. Returns `false` if the server was not quiet for that long within
    /// `deadline` (a busy operator: a retry loop, say).
    ///
    /// ```no_run
    /// # async fn example(server: kopf_fake_apiserver::FakeApiServer) {
    /// use std::time::Duration;
    /// assert!(server.wait_quiet(Duration::from_millis(500), Duration::from_secs(30)).await);
    /// # }
    /// ```
    pub async fn wait_quiet(&self, period: Duration, deadline: Duration) -> bool {
        self.wait_quiet_but(&[], period, deadline).await
    }

    /// As [`wait_quiet`](Self::wait_quiet), except that requests to these resources (named
    /// as [`Stats::requests`] names them, `leases.coordination.k8s.io` say) do not count, nor
    /// do the changes they make: for operators that keep renewing a Lease while idle.
    pub async fn wait_quiet_but(
        &self,
        resources: &[&str],
        period: Duration,
        deadline: Duration,
    ) -> bool {
        let activity = || {
            let stats = self.stats();
            let requests: u64 = stats
                .requests
                .values()
                .flat_map(|by_resource| by_resource.iter())
                .filter(|(resource, _)| !resources.contains(&resource.as_str()))
                .map(|(_, count)| count)
                .sum();
            // Every change but those made by the requests ignored comes with a request; the
            // server's own (a deletion completed, say) only moves the resourceVersion.
            let version = if resources.is_empty() {
                stats.resource_version
            } else {
                0
            };
            (requests, version)
        };
        let give_up = tokio::time::Instant::now() + deadline;
        let mut last = activity();
        let mut since = tokio::time::Instant::now();
        loop {
            let now = tokio::time::Instant::now();
            if now.duration_since(since) >= period {
                return true;
            }
            if now >= give_up {
                return false;
            }
            tokio::time::sleep(period / 10).await;
            let seen = activity();
            if seen != last {
                last = seen;
                since = tokio::time::Instant::now();
            }
        }
    }

    /// Every request so far (up to the log limit), oldest first.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.shared.counters.logged()
    }

    /// Forgets the request counters and the log.
    pub fn reset_requests(&self) {
        self.shared.counters.reset();
    }

    /// Adds a fault rule; see [`Fault`].
    ///
    /// # Panics
    ///
    /// For a contract-breaking fault ([`FaultAction::breaks_contract`]) on a server not built
    /// with [`FakeApiServerBuilder::contract_breaking_faults`].
    ///
    /// [`FaultAction::breaks_contract`]: crate::FaultAction::breaks_contract
    pub fn inject(&self, fault: Fault) {
        if let Err(refusal) = self.shared.faults.add(fault, self.upstream_url()) {
            panic!("{refusal}");
        }
    }

    /// Removes all fault rules.
    pub fn clear_faults(&self) {
        self.shared.faults.clear();
    }

    /// Seeds the generator behind probabilistic faults.
    pub fn seed_faults(&self, seed: u64) {
        self.shared.faults.reseed(seed);
    }

    /// Every change made since the server started, oldest first, when it was built with
    /// [`FakeApiServerBuilder::journal`] (empty otherwise): the write log that checks of what
    /// an operator did (and in what order) read.
    ///
    /// In front of a real API server, the changes it made to the resources that requests
    /// through this proxy touched, from the first such request on, as its watches told them
    /// (see [`FakeApiServerBuilder::upstream`]).
    pub fn journal(&self) -> Vec<Committed> {
        if let Some(journal) = &self.shared.journal {
            return journal
                .changes()
                .into_iter()
                .map(|change| Committed {
                    resource_version: change.resource_version,
                    event: change.event,
                    resource: change.resource,
                    object: change.object,
                    at: change.at,
                })
                .collect();
        }
        self.shared.read(|state| {
            state
                .journal()
                .iter()
                .map(|change| Committed {
                    resource_version: change.rv,
                    event: match change.kind {
                        ChangeKind::Added => "ADDED",
                        ChangeKind::Modified => "MODIFIED",
                        ChangeKind::Deleted => "DELETED",
                    },
                    resource: match &change.resource {
                        (group, plural) if group.is_empty() => plural.clone(),
                        (group, plural) => format!("{plural}.{group}"),
                    },
                    object: (*change.object).clone(),
                    at: change.at,
                })
                .collect()
        })
    }

    /// Waits until a write is held by an injected [`Fault::hold_after_commit`] or
    /// [`Fault::hold_before_commit`] (one held already counts), and returns it; `None` when
    /// none was held within `deadline`.
    pub async fn wait_held(&self, deadline: Duration) -> Option<HeldWrite> {
        let mut arrivals = self.shared.pen.arrivals();
        let wait = async {
            loop {
                if let Some(write) = self.shared.pen.held().into_iter().next() {
                    return write;
                }
                if arrivals.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(deadline, wait).await.ok()
    }

    /// The writes held now.
    pub fn held(&self) -> Vec<HeldWrite> {
        self.shared.pen.held()
    }

    /// Lets every held write go on: it is made (if it was held before that) and answered.
    /// Returns them.
    pub fn release_held(&self) -> Vec<HeldWrite> {
        self.shared.pen.decide(Release::Answer)
    }

    /// Ends every held write without an answer, as if its client had died; those held before
    /// they were made are never made. Returns them.
    pub fn cut_held(&self) -> Vec<HeldWrite> {
        self.shared.pen.decide(Release::Cut)
    }

    /// Ends every open watch stream now (cleanly, as a server-side timeout would).
    pub fn close_watches(&self) {
        self.shared.close_watches();
    }

    /// Forgets the watch history: a watch or list from any earlier resourceVersion gets `410`.
    ///
    /// # Panics
    ///
    /// In front of a real API server (its history is its own).
    pub fn compact(&self) {
        self.fake_only("compacting the watch history");
        lock(&self.shared.state).compact();
    }

    /// Changes how often bookmarks are sent to watches that allow them.
    ///
    /// # Panics
    ///
    /// In front of a real API server (it sends its bookmarks when it will).
    pub fn set_bookmark_interval(&self, interval: Duration) {
        self.fake_only("changing the bookmark interval");
        *lock(&self.shared.bookmark_interval) = interval;
    }

    /// Re-creates an object under the same name with a new uid, as someone who deleted it and
    /// created it again would: the stored object is removed for good (its finalizers are
    /// ignored) and `object` is created in its place. Both happen at once, so watchers see a
    /// DELETED event and then an ADDED one, and none is lost. `apiVersion`, `kind`,
    /// `metadata.name` (and `metadata.namespace` for namespaced kinds) say which object; what
    /// the server sets (uid, resourceVersion, creationTimestamp, managedFields, ...) is ignored,
    /// so an object as served can be given back. Returns the new object as served.
    ///
    /// When the object does not exist, or the new one is refused (invalid, say), nothing
    /// changes and the error says why. With a state file, the change is saved as every write
    /// is, but this call returns without waiting for it.
    ///
    /// ```no_run
    /// # fn example(server: &kopf_fake_apiserver::FakeApiServer) {
    /// let created = server
    ///     .recreate(serde_json::json!({
    ///         "apiVersion": "v1",
    ///         "kind": "ConfigMap",
    ///         "metadata": {"name": "cm", "namespace": "default"},
    ///         "data": {"incarnation": "2"},
    ///     }))
    ///     .expect("cm existed");
    /// println!("the new uid: {}", created["metadata"]["uid"]);
    /// # }
    /// ```
    pub fn recreate(&self, object: serde_json::Value) -> Result<serde_json::Value, RecreateError> {
        if let Err(refusal) = self.shared.fake_only("re-creating an object at once") {
            return Err(RecreateError {
                code: 400,
                reason: "BadRequest".into(),
                message: refusal,
            });
        }
        recreate(&self.shared, object).map_err(|error| RecreateError {
            code: error.code.as_u16(),
            reason: error.reason.to_string(),
            message: error.message,
        })
    }

    /// Drops every connection (as a restarted API server would) and keeps the data.
    pub fn restart(&self) {
        self.shared.restart();
    }

    /// Stops serving, closes every connection, and waits until no task of the server is
    /// left (the state file, if one was given, holds every write answered).
    pub async fn stop(mut self) {
        self.root.cancel();
        self.tracker.close();
        self.tracker.wait().await;
        if let Some(runtime) = self.own_runtime.take() {
            let _ = runtime.await;
        }
        if let Some(behind) = self.behind.take() {
            behind.stop().await;
        }
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.root.cancel();
    }
}

/// One change the server made, as [`FakeApiServer::journal`] lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Committed {
    /// The resourceVersion the change got.
    pub resource_version: u64,
    /// `ADDED`, `MODIFIED` or `DELETED`, as a watch would say it.
    pub event: &'static str,
    /// The resource: `plural` or `plural.group`.
    pub resource: String,
    /// The object after the change (for deletions: its last state).
    pub object: serde_json::Value,
    /// When the change was made.
    pub at: std::time::SystemTime,
}

/// Why [`FakeApiServer::recreate`] changed nothing: the error the API would answer, as its
/// `Status` object would say it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("re-creating the object failed with {code} {reason}: {message}")]
pub struct RecreateError {
    /// The HTTP status code (`404` when there is no such object).
    pub code: u16,
    /// The `Status` reason (`NotFound`, `Invalid`, ...).
    pub reason: String,
    /// What went wrong.
    pub message: String,
}
