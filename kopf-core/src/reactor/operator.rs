//! The operator: runs the registry's handlers against a cluster until stopped.
//!
//! ```no_run
//! use kopf::operator::Operator;
//!
//! # async fn example(registry: kopf::registry::Registry) -> kopf::Result<()> {
//! let stop = tokio_util::sync::CancellationToken::new();
//! let operator = Operator::new(registry);
//! let ready = operator.ready();
//! let running = tokio::spawn(operator.run(stop.clone()));
//! ready.wait().await; // every resource has been listed once
//! stop.cancel();
//! running.await.expect("the operator task")?;
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::actions::activity::Activity;
use crate::aiokits::budget::Budget;
use crate::aiokits::connections::Connections;
use crate::aiokits::tasks::{StopReason, Tasks};
use crate::aiokits::work::Work;
use crate::clients::auth::{self, Login};
use crate::clients::posting::Poster;
use crate::clients::timeouts::Timeouts;
use crate::configs::settings::Settings;
use crate::engines::activities::{Activities, ActivityError};
use crate::engines::authentication::{Authenticator, Given};
use crate::engines::leadership::{Elector, Ending, OnLeading};
use crate::engines::pausing::Fence;
use crate::engines::peering::Peering;
use crate::engines::probing::{self, LivenessError, Standby};
use crate::engines::sharding::Sharder;
use crate::intents::indexing::IndexHandler;
use crate::intents::login::LoginHandler;
use crate::intents::registry::{Registry, deduplicated};
use crate::reactor::admission::{AdmissionStartError, Admitting, Shared, Successors};
use crate::reactor::observation::Observer;
use crate::reactor::processing::Common;
use crate::structs::credentials::LoginError;
use crate::structs::indexes::Indexes;
use crate::structs::memos::{Memo, ObjectMemos};
use crate::structs::namespaces::NamespacePatterns;
use crate::structs::shards::ShardSelectors;

/// Why an operator could not run.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// No kube client could be made from the environment (kubeconfig or in-cluster).
    #[error("cannot configure the kubernetes client: {0}")]
    Client(#[source] kube::Error),
    /// The namespace patterns are invalid.
    #[error("invalid namespace patterns: {0}")]
    Namespaces(String),
    /// Some work ignored its cancellation past the grace period: async handlers were aborted,
    /// and [sync handlers](crate::registry::blocking), which cannot be interrupted, were abandoned
    /// to finish on their own threads.
    #[error(
        "the operator stopped, but some work had to be aborted after the grace period of {0:?}"
    )]
    Aborted(Duration),
    /// A second signal asked to stop at once; work in flight was aborted.
    #[error("stopped at once by a second signal")]
    Interrupted,
    /// The login handlers gave no usable credentials at the start.
    #[error("cannot log in: {0}")]
    Login(#[source] LoginError),
    /// The metrics endpoint cannot be served: a bad URL, or its address cannot be bound.
    #[error("cannot serve the metrics: {0}")]
    Metrics(#[source] crate::engines::metrics::MetricsError),
    /// An activity handler failed for good: a startup handler (the operator stopped before
    /// watching anything), or a cleanup handler (or it outlived the cleanup timeout).
    #[error("the {activity} handler {handler} failed: {message}")]
    Activity {
        /// The activity: startup or cleanup.
        activity: Activity,
        /// The handler's id.
        handler: String,
        /// What went wrong.
        message: String,
    },
    /// The Lease settings ([`LeaseSettings`](crate::settings::LeaseSettings)) are invalid, as
    /// client-go judges them: the lease duration must exceed the renew deadline, which must exceed
    /// 1.2 × the retry period, all above zero, and the identity must not be empty.
    #[error("invalid lease settings: {0}")]
    Lease(String),
    /// A shard selector of
    /// [`WatchingSettings::shard_selectors`](crate::settings::WatchingSettings::shard_selectors) is
    /// invalid: the message names its resource and what is wrong.
    #[error("invalid settings.watching.shard_selectors: {0}")]
    ShardSelector(String),
    /// The assigned shards' settings
    /// ([`PeeringSettings::sharding`](crate::settings::PeeringSettings::sharding), `--shards`) are
    /// invalid: the message says what is wrong.
    #[error("invalid sharding settings: {0}")]
    Sharding(String),
    /// The operator lost the leadership of its Lease, and the settings say to exit
    /// ([`LostLeadership::Exit`](crate::settings::LostLeadership::Exit)): it stopped as at a
    /// signal.
    #[error("lost the leadership of the lease {lease}")]
    LostLeadership {
        /// The Lease, as `namespace/name`.
        lease: String,
    },
    /// Admission handlers exist, but no webhook server is configured
    /// ([`AdmissionSettings::server`](crate::settings::AdmissionSettings::server)).
    #[error(
        "the admission handlers {handlers} need a webhook server: set \
         settings.admission.server (e.g. to kopf::admission::WebhookServer::new()) in the \
         operator's settings or in a startup handler"
    )]
    AdmissionServer {
        /// The admission handlers' ids.
        handlers: String,
    },
    /// The admission webhooks cannot be served: the address cannot be bound, or the
    /// certificate cannot be made or read.
    #[error("cannot serve the admission webhooks: {0}")]
    Webhooks(#[source] crate::engines::webhooks::WebhookError),
    /// The managed webhook configurations
    /// ([`AdmissionSettings::managed`](crate::settings::AdmissionSettings::managed)) cannot be
    /// kept: an invalid name, or no permission to create them.
    #[error("cannot manage the webhook configurations: {0}")]
    ManagedWebhooks(#[source] crate::engines::configurations::ConfigurationError),
    /// A setting has a value that cannot work: the message names it and what it takes (e.g.
    /// `settings.execution.max_workers` of zero).
    #[error("invalid settings: {0}")]
    Settings(String),
    /// The liveness endpoint cannot be served: a bad URL, or its address cannot be bound.
    #[error("cannot serve the liveness endpoint {url}: {message}")]
    Liveness {
        /// The URL as given.
        url: String,
        /// What went wrong.
        message: String,
    },
}

impl From<ActivityError> for OperatorError {
    fn from(error: ActivityError) -> Self {
        OperatorError::Activity {
            activity: error.activity,
            handler: error.handler,
            message: error.message,
        }
    }
}

impl From<AdmissionStartError> for OperatorError {
    fn from(error: AdmissionStartError) -> Self {
        match error {
            AdmissionStartError::NoServer(ids) => OperatorError::AdmissionServer {
                handlers: crate::reactor::admission::listed(&ids),
            },
            AdmissionStartError::Webhooks(error) => OperatorError::Webhooks(error),
            AdmissionStartError::Configurations(error) => OperatorError::ManagedWebhooks(error),
        }
    }
}

impl From<LivenessError> for OperatorError {
    fn from(error: LivenessError) -> Self {
        OperatorError::Liveness {
            url: error.url,
            message: error.message,
        }
    }
}

/// Which namespaces the operator serves.
#[derive(Debug, Clone, Default)]
enum Scope {
    /// Everything (`-A`).
    #[default]
    Cluster,
    /// Namespaces by name, glob or `!`-negation (`-n`).
    Namespaces(Vec<String>),
}

/// Resolves once the operator has listed every resource it serves and, with managed webhook
/// configurations, once they are in place.
#[derive(Debug, Clone)]
pub struct Ready(watch::Receiver<bool>);

impl Ready {
    /// Waits until the operator is ready (returns at once if it already is; never returns if
    /// the operator stops before).
    pub async fn wait(&self) {
        let mut receiver = self.0.clone();
        if receiver.wait_for(|ready| *ready).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Whether the operator is ready now.
    pub fn is_ready(&self) -> bool {
        *self.0.borrow()
    }
}

/// An operator: a registry of handlers, settings, and a client.
pub struct Operator {
    registry: Arc<Registry>,
    settings: Settings,
    client: Option<kube::Client>,
    scope: Scope,
    ready: watch::Sender<bool>,
    memo: Memo,
    liveness: Option<String>,
    metrics: Option<String>,
    metrics_endpoint: watch::Sender<Option<String>>,
    /// Handlers' outcomes, kept only once asked for.
    outcomes: std::sync::OnceLock<crate::structs::outcomes::Outcomes>,
}

impl std::fmt::Debug for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operator")
            .field("registry", &self.registry)
            .field("settings", &self.settings)
            .field("scope", &self.scope)
            .field("memo", &self.memo)
            .finish_non_exhaustive()
    }
}

impl Operator {
    /// An operator for these handlers, with default settings, serving all namespaces.
    pub fn new(registry: Registry) -> Operator {
        Operator {
            registry: Arc::new(registry),
            settings: Settings::default(),
            client: None,
            scope: Scope::Cluster,
            ready: watch::channel(false).0,
            memo: Memo::new(),
            liveness: None,
            metrics: None,
            metrics_endpoint: watch::channel(None).0,
            outcomes: std::sync::OnceLock::new(),
        }
    }

    /// Serves Prometheus metrics at this URL (`http://host:port/path`, HTTP only; off by
    /// default), as `--metrics` does, in the OpenMetrics text format:
    ///
    /// - `kopf_handler_invocations_total{handler, outcome}` (`success`, `retry`, `failure`),
    ///   `kopf_handler_errors_total{handler}`, `kopf_handler_retries_total{handler}`, and the
    ///   histogram `kopf_handler_duration_seconds{handler}`;
    /// - `kopf_watch_events_total{resource, type}` (`LISTED`, `ADDED`, `MODIFIED`,
    ///   `DELETED`), `kopf_watch_starts_total{resource}`, and the gauges
    ///   `kopf_workers{resource}` and `kopf_queue_depth{resource}`;
    /// - `kopf_api_requests_total{verb, code}`: every request to the API server, the
    ///   handlers' own included.
    ///
    /// A bad URL, or an address that cannot be bound, is an [`OperatorError::Metrics`] from
    /// `run()`. Port 0 picks a free port: see [`metrics_endpoint`](Self::metrics_endpoint).
    ///
    /// ```no_run
    /// # use kopf::operator::{Operator, OperatorError};
    /// # async fn example(registry: kopf::registry::Registry) -> Result<(), OperatorError> {
    /// let operator = Operator::new(registry).metrics("http://0.0.0.0:9090/metrics");
    /// operator.run_until_signalled().await
    /// # }
    /// ```
    pub fn metrics(mut self, url: impl Into<String>) -> Operator {
        self.metrics = Some(url.into());
        self
    }

    /// A handle that resolves to the URL of the metrics endpoint once it listens (with the
    /// real port when the URL asked for port 0).
    pub fn metrics_endpoint(&self) -> crate::engines::metrics::MetricsEndpoint {
        crate::engines::metrics::MetricsEndpoint(self.metrics_endpoint.subscribe())
    }

    /// The operator's memo (Kopf's `kopf.run(memo=)`): each object's memo starts as a shallow
    /// copy of it, so typed values put here (clients, channels, shared counters) reach every
    /// handler through [`Invocation::memo`](crate::Invocation::memo).
    ///
    /// ```
    /// # fn example(registry: kopf::registry::Registry) {
    /// use std::sync::atomic::AtomicUsize;
    /// let operator = kopf::operator::Operator::new(registry)
    ///     .memo(kopf::Memo::new().with(AtomicUsize::new(0)).with_value("region", "eu-1"));
    /// # }
    /// ```
    pub fn memo(mut self, memo: Memo) -> Operator {
        self.memo = memo;
        self
    }

    /// Use these settings.
    pub fn settings(mut self, settings: Settings) -> Operator {
        self.settings = settings;
        self
    }

    /// Use this client (default: from the kubeconfig or the in-cluster environment). With
    /// [login handlers](crate::registry::LoginHandler), their credentials are used instead.
    pub fn client(mut self, client: kube::Client) -> Operator {
        self.client = Some(client);
        self
    }

    /// Serve only these namespaces: names, globs (`*`, `?`), negations (`!name`), as Kopf's
    /// `--namespace`.
    pub fn namespaces<S: Into<String>>(
        mut self,
        patterns: impl IntoIterator<Item = S>,
    ) -> Operator {
        self.scope = Scope::Namespaces(patterns.into_iter().map(Into::into).collect());
        self
    }

    /// Serves the liveness endpoint at this URL, as Kopf's `--liveness`:
    /// `http://host:port/path` (HTTP only). Started after the startup handlers, it answers
    /// `GET /path` with 200 and the [probe handlers'](crate::registry::ActivityHandler::on_probe)
    /// results as JSON, `{"probe_id": result, ...}` (run at most once per 10 seconds, one run
    /// at a time), or with 500 when a probe fails. Beyond Kopf, `GET /readyz` on the same host
    /// and port answers 200 once the operator is [ready](Self::ready) (every resource listed
    /// once, the managed webhook configurations in place) and 503 before. A bad URL, or an
    /// address that cannot be bound, is an [`OperatorError::Liveness`] from `run()`.
    ///
    /// ```no_run
    /// # use kopf::operator::{Operator, OperatorError};
    /// # async fn example(registry: kopf::registry::Registry) -> Result<(), OperatorError> {
    /// let operator = Operator::new(registry).liveness("http://0.0.0.0:8080/healthz");
    /// operator.run_until_signalled().await
    /// # }
    /// ```
    pub fn liveness(mut self, url: impl Into<String>) -> Operator {
        self.liveness = Some(url.into());
        self
    }

    /// A handle that resolves once the operator has listed everything it serves and, with
    /// [managed webhook configurations](crate::settings::AdmissionSettings::managed), once they are in
    /// place (written by this replica if it owns them, else found with every webhook): a
    /// first request right after a start does not meet a webhook of a server gone. An
    /// operator paused in favour of a peer (see [`PeeringSettings`](crate::settings::PeeringSettings))
    /// lists nothing: it gets ready once it resumes.
    pub fn ready(&self) -> Ready {
        Ready(self.ready.subscribe())
    }

    /// The last outcome of each handler on each object, as this operator's attempts end
    /// (success, temporary or permanent failure, with the message and the attempts): what
    /// tests read after the progress records were purged from the objects. Kept in memory
    /// only once asked for, before [`Operator::run`]; every object adds its handlers'
    /// entries, so it is meant for tests (`kopf_testing::OperatorHarness::outcome`).
    pub fn outcomes(&self) -> crate::structs::outcomes::Outcomes {
        self.outcomes.get_or_init(Default::default).clone()
    }

    /// Runs until `stop` is cancelled. Then stops watching at once, asks handlers to stop,
    /// waits up to the grace period, aborts what is left, removes this operator's peering
    /// entry, runs the cleanup handlers, removes the non-persistent webhooks from the managed
    /// webhook configurations and stops the webhook server (after the reviews in flight),
    /// releases the Lease if it leads (each within
    /// `settings.process.cleanup_timeout`), and returns only when no task of
    /// the operator is alive and its clients are dropped. The connections of the clients
    /// that it made (not of one given with [`client`](Self::client)) are closed then, even
    /// where a handler kept a clone of its client. The one exception: a
    /// [sync handler](crate::registry::blocking) still running after the grace period is abandoned
    /// on its thread, which keeps what the handler holds until it returns.
    pub async fn run(self, stop: CancellationToken) -> Result<(), OperatorError> {
        self.run_until(stop, CancellationToken::new()).await
    }

    /// Runs until SIGINT or SIGTERM, then stops gracefully (as [`run`](Self::run)); a second
    /// signal during the graceful stop aborts everything at once
    /// ([`OperatorError::Interrupted`]).
    pub async fn run_until_signalled(self) -> Result<(), OperatorError> {
        let stop = CancellationToken::new();
        let abort = CancellationToken::new();
        let running = self.run_until(stop.clone(), abort.clone());
        let signals = async {
            signalled().await;
            tracing::info!(target: "kopf::operator", "signal received: stopping (a second signal stops at once)");
            stop.cancel();
            signalled().await;
            tracing::warn!(target: "kopf::operator", "second signal received: aborting");
            abort.cancel();
            std::future::pending::<()>().await;
        };
        tokio::select! {
            result = running => {
                if abort.is_cancelled() { Err(OperatorError::Interrupted) } else { result }
            }
            _ = signals => unreachable!("the signal listener never ends"),
        }
    }

    /// Runs until `stop`, aborting at `abort`; then closes what is left of the connections of
    /// the clients it made, once nothing of the run needs them.
    async fn run_until(
        self,
        stop: CancellationToken,
        abort: CancellationToken,
    ) -> Result<(), OperatorError> {
        let connections = Connections::default();
        let posting = Posting::default();
        let noticed = std::sync::OnceLock::new();
        // When the stop came: the poster drains within the grace period from then.
        let noticing = async {
            stop.cancelled().await;
            let _ = noticed.set(tokio::time::Instant::now());
            std::future::pending::<()>().await;
        };
        let operating = self.operate(stop.clone(), abort.clone(), &connections, &posting);
        let result = tokio::select! {
            result = operating => result,
            () = noticing => unreachable!("pending forever"),
        };
        let since = noticed
            .get()
            .copied()
            .unwrap_or_else(tokio::time::Instant::now);
        posting.finish(since, &abort).await;
        connections.close().await;
        result
    }

    async fn operate(
        mut self,
        stop: CancellationToken,
        abort: CancellationToken,
        connections: &Connections,
        posting: &Posting,
    ) -> Result<(), OperatorError> {
        let patterns = match &self.scope {
            Scope::Cluster => None,
            Scope::Namespaces(patterns) => Some(
                NamespacePatterns::parse(patterns)
                    .map_err(|e| OperatorError::Namespaces(e.to_string()))?,
            ),
        };
        crate::engines::leadership::check(&self.settings).map_err(OperatorError::Lease)?;
        crate::engines::sharding::check(&self.settings).map_err(OperatorError::Sharding)?;
        check(&self.settings)?;
        let tasks = Tasks::root(self.settings.execution.workers());
        if let Some(outcomes) = self.outcomes.get() {
            tasks.record_outcomes(outcomes.clone());
        }
        // What activities and login handlers share: the settings, which startup handlers
        // change; the indexes, empty until the resources are listed (as in Kopf, activities get
        // them as they are: startup handlers see them empty, probes see them live).
        let shared_settings = Arc::new(std::sync::Mutex::new(self.settings.clone()));
        // Set when every resource has been listed once: the indexes are filled then, and
        // handlers of objects wait for them.
        let listed = watch::Sender::new(false);
        let indexes = {
            let all: Vec<&IndexHandler> = self.registry.indexes.iter().collect();
            // A function stacked on several resources fills one index.
            let all = deduplicated(all, |handler| *handler);
            Indexes::new(
                all.into_iter().map(|h| (h.id.clone(), h.empty_index())),
                listed.subscribe(),
            )
        };
        // Metrics first, so that the login's requests are counted; the login before anything
        // else, since everything else needs the client.
        let explicit = self.client.take();
        // Read by the client as it sends each request: the startup handlers may change them.
        let timeouts = Timeouts::new(&self.settings);
        let connecting = async {
            if let Some(url) = &self.metrics {
                let metrics = crate::aiokits::metrics::Metrics::new();
                tasks.measure(metrics.clone());
                let url = crate::engines::metrics::MetricsUrl::parse(url)
                    .map_err(OperatorError::Metrics)?;
                let serving = &self.settings.serving;
                crate::engines::metrics::serve(
                    metrics,
                    &url,
                    serving,
                    &tasks,
                    &self.metrics_endpoint,
                )
                .await
                .map_err(OperatorError::Metrics)?;
            }
            connect(
                explicit,
                self.registry.logins.clone(),
                &tasks,
                connections,
                &timeouts,
                Given {
                    memo: self.memo.clone(),
                    settings: shared_settings.clone(),
                    indexes: indexes.clone(),
                },
            )
            .await
        };
        let connected = tokio::select! {
            connected = connecting => connected,
            _ = stop.cancelled() => {
                return shut_down(&tasks, self.settings.process.grace_period, &abort).await;
            }
        };
        let (client, cluster) = match connected {
            Ok(connected) => connected,
            Err(error) => {
                let _ = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
                return Err(error);
            }
        };
        // Before the startup handlers: what they post (or tasks they start) is posted too.
        let poster = posting.start(&client, &self.settings);
        let activities = Activities::new(
            self.registry.clone(),
            client.clone(),
            shared_settings,
            self.memo.clone(),
            indexes.clone(),
        );
        let standby = Standby::default();
        let started = match activities.start_up(&mut self.settings, &tasks, &stop).await {
            Ok(true) => match &self.liveness {
                Some(url) => {
                    let ready = self.ready.subscribe();
                    let serving = &self.settings.serving;
                    probing::serve(url, serving, &activities, ready, standby.clone(), &tasks)
                        .await
                        .map_err(OperatorError::from)
                }
                None => Ok(()),
            },
            Ok(false) => {
                return shut_down(&tasks, self.settings.process.grace_period, &abort).await;
            }
            Err(error) => Err(error.into()),
        };
        if let Err(error) = started {
            let _ = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
            return Err(error);
        }
        timeouts.set(&self.settings);
        // The startup handlers may have changed them (as in Kopf).
        if let Err(error) = check(&self.settings) {
            let _ = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
            return Err(error);
        }
        tasks.threads().set_limit(self.settings.execution.workers());
        posting.configure(&self.settings);
        // After the startup handlers, which may set them (as in Kopf).
        let shards = match ShardSelectors::parse(&self.settings.watching.shard_selectors) {
            Ok(shards) => Arc::new(shards),
            Err(error) => {
                let _ = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
                return Err(OperatorError::ShardSelector(error));
            }
        };
        if self.settings.peering.lease.is_none() {
            // Its own leader: the leader-only startup handlers run now, after the others.
            let started = tokio::select! {
                started = activities.start_leading(&tasks) => started,
                _ = stop.cancelled() => {
                    return shut_down(&tasks, self.settings.process.grace_period, &abort).await;
                }
            };
            if let Err(error) = started {
                let _ = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
                return Err(error.into());
            }
        }
        // The objects' memos, also for the admission handlers of existing objects.
        let memos = ObjectMemos::default();
        // After the startup handlers, which may set the server (as in Kopf).
        let shared = Shared {
            client: client.clone(),
            cluster,
            memo: self.memo.clone(),
            memos: memos.clone(),
            indexes: indexes.clone(),
        };
        let mut admitting =
            match Admitting::serve(&self.registry, &self.settings, shared, &tasks, &stop).await {
                Ok(admitting) => admitting,
                Err(error) => {
                    let _ = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
                    return Err(error.into());
                }
            };
        // After the startup handlers, which may change the peering settings (as in Kopf).
        let peering_started = Peering::start(&client, &self.settings, patterns.as_ref(), &tasks);
        let (pause, peering) = tokio::select! {
            started = peering_started => started,
            _ = stop.cancelled() => {
                let stopped = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
                let _ = stop_admission(admitting.as_ref(), &self.settings, &abort).await;
                return stopped;
            }
        };
        let on_leading: Option<OnLeading> = {
            let activities = activities.clone();
            Some(Arc::new(move |node| {
                let activities = activities.clone();
                Box::pin(async move { activities.start_leading(&node).await })
            }))
        };
        let elector = match Elector::start(&client, &self.settings, &tasks, on_leading) {
            Ok(elector) => elector,
            Err(error) => {
                let _ = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
                let _ = stop_admission(admitting.as_ref(), &self.settings, &abort).await;
                return Err(OperatorError::Lease(error));
            }
        };
        let pause = match &elector {
            Some(elector) => pause.or(elector.pause()),
            None => pause,
        };
        let sharder = match Sharder::start(&client, &self.settings, &tasks) {
            Ok(sharder) => sharder,
            Err(error) => {
                let _ = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
                let _ = stop_admission(admitting.as_ref(), &self.settings, &abort).await;
                if let Some(elector) = &elector {
                    elector.stop().await;
                }
                return Err(OperatorError::Sharding(error));
            }
        };
        let pause = match &sharder {
            Some(sharder) => pause.or(sharder.pause()),
            None => pause,
        };
        let fence = elector.as_ref().map_or_else(Fence::open, |e| e.fence());
        let fence = match &sharder {
            Some(sharder) => fence.and(sharder.fence()),
            None => fence,
        };
        // Set once: this is the only place.
        let _ = standby.set(pause.clone());
        let mut custody = None;
        if let Some(admitting) = &mut admitting
            && let Some(managed) = admitting.managed().map(String::from)
        {
            // Written by one replica at a time: see `reactor::admission::owner`.
            let owner = crate::reactor::admission::owner(
                &client,
                &self.settings,
                &managed,
                &pause,
                peering.as_ref(),
                &tasks,
            );
            let (owning, held) = match owner {
                Ok(owner) => owner,
                Err(error) => {
                    let _ = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
                    let _ = stop_admission(Some(admitting), &self.settings, &abort).await;
                    if let Some(elector) = &elector {
                        elector.stop().await;
                    }
                    if let Some(sharder) = &sharder {
                        sharder.stop().await;
                    }
                    return Err(OperatorError::Lease(error));
                }
            };
            custody = held;
            let successors = Successors {
                peering: peering.clone(),
                sharder: sharder.clone(),
                leader: elector.clone(),
                custody: custody.clone(),
                client: Some(client.clone()),
            };
            admitting.manage(owning, successors, &tasks);
        }
        // Ready once everything is listed and the webhook configurations are in place.
        let in_place = admitting.as_ref().map(Admitting::in_place);
        tasks.spawn(readiness(
            listed.subscribe(),
            in_place,
            self.ready,
            tasks.token().clone(),
        ));
        let observer = Observer {
            client: client.clone(),
            registry: self.registry.clone(),
            settings: self.settings.clone(),
            patterns,
            tasks: tasks.child(),
            ready: listed,
            pause,
            shards,
            common: Common {
                poster: poster.clone(),
                memo: self.memo.clone(),
                memos: memos.clone(),
                writes: Arc::new(tokio::sync::Semaphore::new(
                    self.settings.networking.max_concurrent_writes.max(1),
                )),
                indexes,
                fence,
                ownership: sharder.as_ref().map(|s| s.ownership()),
            },
            in_flight: Budget::new(self.settings.queueing.in_flight_limit, tasks.metrics()),
        };
        tasks.spawn(observer.run());
        drop(client);

        let ended = async {
            match &elector {
                Some(elector) => elector.ended().await,
                None => std::future::pending().await,
            }
        };
        let failed = async {
            match &admitting {
                Some(admitting) => admitting.failed().await,
                None => std::future::pending().await,
            }
        };
        let mut admission_failed = None;
        let ended = tokio::select! {
            _ = stop.cancelled() => None,
            ending = ended => Some(ending),
            error = failed => {
                admission_failed = Some(error);
                None
            }
        };
        let stopped = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
        if let Some(peering) = peering {
            // After the handlers stopped: peers take over at once, not when the entry expires.
            // A second signal skips it: the entry expires on its own.
            tokio::select! {
                _ = peering.disappear(self.settings.process.cleanup_timeout) => {}
                _ = abort.cancelled() => {}
            }
        }
        if let Some(sharder) = &sharder {
            // After the handlers stopped: peers take the shards over at once. Not when work
            // was abandoned at the grace period (it may still run), nor at a second signal:
            // the member's Lease then expires, and peers fence it first.
            if stopped.is_ok() {
                tokio::select! {
                    _ = sharder.release(self.settings.process.cleanup_timeout) => {}
                    _ = abort.cancelled() => {}
                }
            }
            sharder.stop().await;
        }
        let leading = elector.as_ref().is_none_or(|elector| elector.is_leading());
        let cleaned = activities.clean_up(&self.settings, &abort, leading).await;
        // After the cleanup handlers, whose writes may pass through the webhooks.
        let admission_stopped = stop_admission(admitting.as_ref(), &self.settings, &abort).await;
        if let Some(custody) = &custody {
            // Released at the hand-over already, unless that was cut short by a second signal:
            // then the Lease expires on its own.
            if !abort.is_cancelled() {
                custody.release(self.settings.process.cleanup_timeout).await;
            }
            custody.stop().await;
        }
        if let Some(elector) = &elector {
            // After everything else, the cleanup handlers included: the next leader must not
            // meet this one's work. Not when work was abandoned at the grace period (it may
            // still run), nor at a second signal: the Lease then expires on its own, after
            // this leader's term (as the shards above).
            if stopped.is_ok() {
                tokio::select! {
                    _ = elector.release(self.settings.process.cleanup_timeout) => {}
                    _ = abort.cancelled() => {}
                }
            }
            elector.stop().await;
        }
        match (ended, &elector) {
            (Some(Ending::Lost), Some(elector)) => {
                return Err(OperatorError::LostLeadership {
                    lease: elector.lease(),
                });
            }
            (Some(Ending::Failed(error)), _) => return Err(error.into()),
            _ => {}
        }
        if let Some(error) = admission_failed {
            return Err(OperatorError::ManagedWebhooks(error));
        }
        stopped
            .and(admission_stopped)
            .and(cleaned.map_err(OperatorError::from))
    }
}

/// The settings that no part of the operator checks by itself.
fn check(settings: &Settings) -> Result<(), OperatorError> {
    if settings.execution.max_workers == Some(0) {
        return Err(OperatorError::Settings(
            "settings.execution.max_workers is 0: sync handlers need at least 1 thread (or \
             None, for min(32, cpus + 4))"
                .into(),
        ));
    }
    Ok(())
}

/// The operator's poster of Kubernetes Events, in a tree of its own: it starts before the
/// startup handlers (what they and the tasks they start post is posted), and it is the last
/// to stop, after the cleanup handlers, draining what is queued within the grace period from
/// the stop (`clients/posting/poster.rs`, invariant 4). While it runs, `kopf::info` and the
/// others post through it from anywhere on the operator's runtime.
#[derive(Default)]
struct Posting {
    running: std::sync::Mutex<Option<RunningPoster>>,
}

struct RunningPoster {
    poster: Poster,
    tree: Tasks,
    grace: Duration,
    /// While it lives, events posted from anywhere on the runtime go to this poster.
    registration: Option<crate::clients::posting::poster::running::Registration>,
}

impl Posting {
    /// Starts the poster (once).
    fn start(&self, client: &kube::Client, settings: &Settings) -> Poster {
        let mut running = crate::helpers::sync::lock(&self.running);
        if let Some(running) = &*running {
            return running.poster.clone();
        }
        let tree = Tasks::root(1);
        let poster = Poster::start_for(client.clone(), settings, &tree);
        let registration = crate::clients::posting::poster::running::register(&poster);
        *running = Some(RunningPoster {
            poster: poster.clone(),
            tree,
            grace: settings.process.grace_period,
            registration,
        });
        poster
    }

    /// Takes the settings as the startup handlers left them.
    fn configure(&self, settings: &Settings) {
        if let Some(running) = &mut *crate::helpers::sync::lock(&self.running) {
            running.poster.configure(settings);
            running.grace = settings.process.grace_period;
        }
    }

    /// Stops the poster: it posts what is queued until the grace period after `since` (the
    /// stop) ends, or until `abort`; then it is dropped.
    async fn finish(&self, since: tokio::time::Instant, abort: &CancellationToken) {
        let Some(running) = crate::helpers::sync::lock(&self.running).take() else {
            return;
        };
        let RunningPoster {
            poster,
            tree,
            grace,
            registration,
        } = running;
        // No more events from anywhere go to this operator.
        drop(registration);
        poster.drain_until(since + grace);
        drop(poster);
        tree.cancel(StopReason::OperatorExiting);
        tokio::select! {
            () = tree.wait() => {}
            () = abort.cancelled() => {
                tree.abort();
                tree.wait().await;
            }
        }
    }
}

/// Marks the operator ready once it has listed everything it serves and its managed webhook
/// configurations are in place: a test's (or a Service's) first request after a start must
/// not meet a webhook that points at a server gone.
async fn readiness(
    mut listed: watch::Receiver<bool>,
    in_place: Option<watch::Receiver<bool>>,
    ready: watch::Sender<bool>,
    token: CancellationToken,
) {
    let both = async {
        if listed.wait_for(|listed| *listed).await.is_err() {
            return false;
        }
        match in_place {
            Some(mut in_place) => in_place.wait_for(|in_place| *in_place).await.is_ok(),
            None => true,
        }
    };
    tokio::select! {
        _ = token.cancelled() => {}
        done = both => {
            if done {
                ready.send_replace(true);
            }
        }
    }
}

/// The admission's stop step: the managed configurations are handed over (or shrink to the
/// persistent webhooks), then the server stops accepting and its reviews in flight finish.
async fn stop_admission(
    admitting: Option<&Admitting>,
    settings: &Settings,
    abort: &CancellationToken,
) -> Result<(), OperatorError> {
    let process = &settings.process;
    let graceful = match admitting {
        Some(admitting) => {
            admitting
                .stop(process.cleanup_timeout, process.grace_period, abort)
                .await
        }
        None => true,
    };
    if graceful {
        Ok(())
    } else {
        Err(OperatorError::Aborted(process.grace_period))
    }
}

/// The stop (the shutdown contract): asks everything to stop, waits up to the grace period for
/// the tasks and for sync handlers' threads, then aborts the tasks and abandons the threads
/// (they cannot be interrupted), naming the handlers that were still running.
async fn shut_down(
    tasks: &Tasks,
    grace: Duration,
    abort: &CancellationToken,
) -> Result<(), OperatorError> {
    let (first, running) = tasks.running_first(LISTED);
    let reason = StopReason::OperatorExiting;
    if running == 0 {
        tracing::info!(target: "kopf::operator", "stopping ({reason})");
    } else {
        tracing::info!(target: "kopf::operator", handlers = running, "stopping ({reason}); asking the handlers in flight to stop: {}", listed(&first, running));
    }
    tasks.cancel_on_runtime(reason).await;
    let threads = tasks.threads();
    let everything = async {
        tasks.wait().await;
        threads.idle().await;
    };
    let graceful = tokio::select! {
        finished = tokio::time::timeout(grace, everything) => finished.is_ok(),
        _ = abort.cancelled() => false,
    };
    if graceful {
        threads.close();
        threads.exited().await;
        return Ok(());
    }
    let when = if abort.is_cancelled() {
        "at once (a second signal)".to_string()
    } else {
        format!("after the grace period of {grace:?}")
    };
    let on_threads = threads.busy();
    for work in tasks.running() {
        if !on_threads.contains(&work) {
            tracing::warn!(target: "kopf::operator", handler = %work.handler(), object = %work.object(), "aborting the {work} {when}: it is still running");
        }
    }
    tracing::warn!(target: "kopf::operator", tasks = tasks.len(), "aborting the work left {when}");
    tasks.abort();
    tasks.wait().await;
    threads.close();
    threads.exited().await;
    for work in threads.busy() {
        tracing::warn!(target: "kopf::operator", handler = %work.handler(), object = %work.object(), "abandoning the sync {work} {when}: its thread cannot be interrupted and is left to finish on its own");
    }
    Err(OperatorError::Aborted(grace))
}

/// How many of the handlers in flight a stop's log line names.
const LISTED: usize = 5;

/// The first few of `total` works, for one log line.
fn listed(first: &[Work], total: usize) -> String {
    let mut names: Vec<String> = first.iter().map(Work::to_string).collect();
    if total > first.len() {
        names.push(format!("and {} more", total - first.len()));
    }
    names.join(", ")
}

/// The next SIGINT or SIGTERM.
async fn signalled() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// The operator's client at the start of `run()`: logged in with the login handlers if there
/// are any; else the embedder's client, or kube-client's default (kubeconfig or in-cluster).
/// Wrapped for the metrics when the tree counts them. With kube-client's default, also the API
/// server's URL (the cluster detection of `WebhookServer::auto` reads its certificate).
pub(crate) async fn connect(
    explicit: Option<kube::Client>,
    logins: Vec<LoginHandler>,
    tasks: &Tasks,
    connections: &Connections,
    timeouts: &Timeouts,
    given: Given,
) -> std::result::Result<(kube::Client, Option<http::Uri>), OperatorError> {
    let metrics = tasks.metrics().cloned();
    let mut url = None;
    let login = if !logins.is_empty() {
        let authenticator = Authenticator::new(
            logins,
            tasks.child(),
            connections.clone(),
            timeouts.clone(),
            given,
        );
        Login::Handlers(Arc::new(authenticator))
    } else {
        match explicit {
            Some(client) => Login::Fixed(client),
            None => {
                let (client, cluster) = crate::structs::credentials::default_client(
                    connections.clone(),
                    timeouts.connect(),
                    timeouts.trust_env(),
                )
                .await
                .map_err(OperatorError::Client)?;
                url = Some(cluster);
                Login::Fixed(client)
            }
        }
    };
    let client = auth::client(login, metrics, timeouts.clone())
        .await
        .map_err(OperatorError::Login)?;
    Ok((client, url))
}
