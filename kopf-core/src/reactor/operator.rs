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
//!
//! Here is the [`Operator`] as its users build it (its settings, client, namespaces and
//! endpoints) and run it. The pieces of a run are modules of their own: the run in its order
//! (`operating`), the client it logs in with (`connecting`), its poster of Events (`posting`),
//! its readiness ([`Ready`], `readiness`), its stop (`stopping`: the signals, the grace period,
//! what is aborted after it), and what ends a run early ([`OperatorError`], `errors`).

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::configs::settings::Settings;
use crate::intents::registry::Registry;
use crate::structs::memos::Memo;

mod connecting;
mod errors;
mod operating;
mod posting;
mod readiness;
mod stopping;

pub use self::errors::OperatorError;
pub use self::readiness::Ready;
use self::stopping::signalled;

/// Which namespaces the operator serves.
#[derive(Debug, Clone, Default)]
enum Scope {
    /// Everything (`-A`).
    #[default]
    Cluster,
    /// Namespaces by name, glob or `!`-negation (`-n`).
    Namespaces(Vec<String>),
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
}
