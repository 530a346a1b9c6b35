//! The operator's settings, grouped as Kopf groups them, with Kopf's defaults where they apply.
//!
//! Startup handlers may change them before anything is watched; tests set them directly:
//!
//! ```
//! let mut settings = kopf::Settings::default();
//! settings.queueing.idle_timeout = std::time::Duration::from_secs(1);
//! settings.process.grace_period = std::time::Duration::from_secs(5);
//! ```

use std::sync::Arc;
use std::time::Duration;

use crate::configs::lifecycles::Lifecycle;
use crate::configs::storage::{
    AnnotationsDiffBaseStorage, DiffBaseStorage, ProgressStorage, SmartProgressStorage,
};
use crate::configs::webhooks::WebhookServer;
use crate::structs::resources::Selector;

/// All settings of an operator.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Settings {
    /// How resources are discovered.
    pub scanning: ScanningSettings,
    /// How resources are watched.
    pub watching: WatchingSettings,
    /// How events are queued to per-object workers.
    pub queueing: QueueingSettings,
    /// How handlers are executed.
    pub execution: ExecutionSettings,
    /// Where state is kept on the objects.
    pub persistence: PersistenceSettings,
    /// How the API is called.
    pub networking: NetworkingSettings,
    /// How the process stops.
    pub process: ProcessSettings,
    /// What is posted as Kubernetes Events.
    pub posting: PostingSettings,
    /// How this operator coordinates with others serving the same resources.
    pub peering: PeeringSettings,
    /// How admission webhooks are served and announced to the cluster.
    pub admission: AdmissionSettings,
    /// Kopf's settings of daemons and timers in the background, which kopf-rs does not need.
    pub background: BackgroundSettings,
    /// How the operator's own servers (probes, metrics, webhooks) bound their clients.
    pub serving: ServingSettings,
}

/// The operator's own HTTP(S) servers: the liveness and readiness endpoints, the metrics, the
/// admission webhooks (beyond Kopf). Each bounds what a client may hold, so that a slow or
/// hostile one (any pod that reaches the port) cannot keep connections open until the
/// process runs out of file descriptors, and the Lease renewals and API calls fail with it.
///
/// - A client has `header_timeout` to finish its TLS handshake and to send each request's
///   line and headers; an idle keep-alive connection is closed after as long.
/// - A request has `request_timeout` from its headers to its answer: to send its body and
///   for the handlers to answer it. Past it, the answer is `503 Service Unavailable` and the
///   connection is closed. An answer that the client does not read for as long fails too.
/// - Each server keeps at most `max_connections` open. A connection beyond it takes the
///   place of the one that has waited longest for a request (a slow or idle client), or is
///   closed at once when every connection is busy with a request; the server goes on
///   accepting either way.
///
/// ```
/// let mut settings = kopf::Settings::default();
/// settings.serving.max_connections = 64;
/// settings.serving.request_timeout = std::time::Duration::from_secs(10);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServingSettings {
    /// How long a client has for its TLS handshake, and for each request's line and headers
    /// (10 s; a kubelet's probe or an API server's webhook call sends them at once).
    pub header_timeout: Duration,
    /// How long a request may take from its headers to its answer (30 s: the longest an API
    /// server waits for an admission webhook).
    pub request_timeout: Duration,
    /// The most connections each server keeps open (256).
    pub max_connections: usize,
}

impl Default for ServingSettings {
    fn default() -> Self {
        ServingSettings {
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_connections: 256,
        }
    }
}

// --- Kopf's aliases and settings without a use in kopf-rs (issue 51) -------------------------

impl Settings {
    /// Kopf's deprecated alias of [`queueing`](Settings::queueing) (`settings.batching`).
    #[deprecated(
        note = "Kopf renamed `settings.batching` to `settings.queueing`: write \
                         `settings.queueing` (the same settings)"
    )]
    pub fn batching(&mut self) -> &mut QueueingSettings {
        &mut self.queueing
    }
}

/// Kopf's `settings.background`: how Kopf polls daemons and timers that were asked to stop
/// and do not exit. kopf-rs needs none of it, and each field says so when it is used: an
/// object's worker is woken the moment its daemons end, so nothing polls them; and a stopped
/// daemon is given its [`cancellation_backoff`](crate::registry::DaemonHandler::cancellation_backoff)
/// (a brief moment by default) before its future is dropped, so no "instant exit" is awaited.
/// The fields keep Kopf's defaults, so that a port of a Kopf operator compiles (with a warning).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BackgroundSettings {
    /// Kopf: how often a stopping daemon without a cancellation timeout is checked (60 s).
    #[deprecated(
        note = "kopf-rs does not poll stopping daemons: an object's worker is woken \
                         when its daemons end; this setting has no effect"
    )]
    pub cancellation_polling: Duration,
    /// Kopf: how long to wait for a daemon to exit "instantly" before polling it (none).
    #[deprecated(
        note = "kopf-rs gives a stopped daemon its cancellation_backoff (a brief \
                         moment by default) and then drops it; this setting has no effect"
    )]
    pub instant_exit_timeout: Option<Duration>,
    /// Kopf: how many zero-time event-loop cycles a daemon gets to exit "instantly" (10).
    #[deprecated(
        note = "kopf-rs has no zero-time cycles to count: a stopped daemon gets its \
                         cancellation_backoff; this setting has no effect"
    )]
    pub instant_exit_zero_time_cycles: Option<u32>,
}

#[allow(
    deprecated,
    reason = "Kopf's defaults of the fields that exist only for ports"
)]
impl Default for BackgroundSettings {
    fn default() -> Self {
        BackgroundSettings {
            cancellation_polling: Duration::from_secs(60),
            instant_exit_timeout: None,
            instant_exit_zero_time_cycles: Some(10),
        }
    }
}

// ----------------------------------------------------------------------------------------------

/// Admission webhooks (Kopf's `settings.admission`): where the validating and mutating
/// handlers are served, and whether the operator keeps the cluster's webhook configurations
/// for them.
///
/// Operators with admission handlers need a `server`, or `run()` fails with
/// [`OperatorError::AdmissionServer`](crate::operator::OperatorError::AdmissionServer). With
/// `managed`, the operator creates a `ValidatingWebhookConfiguration` and a
/// `MutatingWebhookConfiguration` of that name, fills them with one webhook per handler
/// whenever the server's address or certificate changes (or someone else changed them), and
/// at a graceful stop leaves only the handlers marked `persistent` in them. Its RBAC needs
/// `create` and `patch` on both, and `get`, `list` and `watch` on those of that name (the
/// `rbac` subcommand's `--admission-managed`).
///
/// With several replicas, exactly one writes them: the Lease leader, the active peer (never
/// one paused in favour of another, nor one that has not yet heard its peers), or, when no
/// replica pauses (assigned shards, shard selectors), the holder of the [`lease`](Self::lease).
/// The others serve the webhooks too, with the same certificate when it is shared (a
/// [`WebhookServer::secret`] or files). When the writer stops gracefully while others live, it
/// hands the configurations over instead of shrinking them: another replica points them at
/// itself (or at the Service) before this one's server stops; when it dies, the next writer
/// repairs them within the Lease's duration (or the peering entry's lifetime). The last
/// replica's stop shrinks them.
///
/// ```
/// let mut settings = kopf::Settings::default();
/// settings.admission.server = Some(kopf::admission::WebhookServer::new().port(9443));
/// settings.admission.managed = Some("auto.kopf.dev".into());
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct AdmissionSettings {
    /// Where and how the webhooks are served (none by default).
    pub server: Option<WebhookServer>,
    /// The name of the webhook configurations the operator keeps, e.g. `auto.kopf.dev`
    /// (none by default: the configurations are left to the user).
    pub managed: Option<String>,
    /// The Lease that elects which replica writes the managed configurations when no replica
    /// pauses for another (with assigned shards or shard selectors). `None` (the default) is
    /// a Lease named as the configurations, in the shards' namespace (or the client's
    /// default), with the shards' timings (or client-go's). Unused with a leader Lease (the
    /// leader writes them) or peering alone (the active operator does).
    pub lease: Option<LeaseSettings>,
}

/// Watching (Kopf's `settings.watching`).
///
/// `shard_selectors` splits the objects of a resource among several operators (Kopf 1.45's
/// `settings.watching.shard_selectors`), with Kubernetes' sharded list and watch (1.36+,
/// alpha, behind a feature gate): each operator sees only the objects whose
/// `object.metadata.uid` (or `object.metadata.namespace`) hashes (64-bit FNV-1a) into its
/// ranges. Covering the whole hash space, without gaps or overlaps, is up to whoever
/// configures the operators. Set them in the settings or in a startup handler:
///
/// ```
/// let mut settings = kopf::Settings::default();
/// // This replica serves the lower half of the hash space; another one, the upper half:
/// // "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')".
/// settings.watching.shard_selectors.push((
///     kopf::resources::Selector::new("kopf.dev", "v1", "kopfexamples"),
///     "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')".into(),
/// ));
/// ```
///
/// The first entry whose resource selector matches a resource applies to it; the selector is
/// sent as `shardSelector` on the lists and watches of that resource. A server without the
/// feature ignores the parameter (its lists lack `metadata.shardInfo`): the operator then
/// filters the objects and events itself, with the same hash, and logs that it does. Only
/// the resources that handlers serve are sharded, never the namespaces, CRDs and peering
/// objects that the operator watches for itself. With peering, operators of the same
/// priority that have shard selectors keep running instead of pausing (higher priorities
/// still pause them). An invalid selector is an
/// [`OperatorError::ShardSelector`](crate::operator::OperatorError::ShardSelector) from `run()`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WatchingSettings {
    /// `timeoutSeconds` asked of the server for each watch request: the server ends the
    /// stream then, and the operator watches again from where it was (none by default: the
    /// operator asks for 290 s, the longest that kube-rs asks for, at most 295 s).
    pub server_timeout: Option<Duration>,
    /// A watch stream is ended by the operator after this long, and watched again from where
    /// it was, as when the server ends it (Kopf's `client_timeout`; none by default).
    pub client_timeout: Option<Duration>,
    /// A watch request must be answered (the stream begin) within this long, or it is sent
    /// again after a backoff (Kopf's `connect_timeout`; none by default: then
    /// `settings.networking.connect_timeout`, or else `request_timeout`). The inactivity
    /// timeout bounds the wait as well.
    pub connect_timeout: Option<Duration>,
    /// A watch stream silent for this long is reconnected (Kopf: 70 s). Bookmarks count as
    /// activity, so a healthy but quiet stream is not cut.
    pub inactivity_timeout: Duration,
    /// Delay before reconnecting a watch that ended (Kopf: 0.1 s); errors back off further.
    pub reconnect_backoff: Duration,
    /// Page size of the initial listing (Kopf's `chunk_size`): each list request asks for at
    /// most this many objects (`limit`), and the next page is read once the budget of
    /// objects in flight ([`QueueingSettings::in_flight_limit`]) has room for it, so that a
    /// huge listing is never all in memory. `None` lists in one request, as Kopf does by
    /// default; `Some(0)` is sent as is (the server takes it as no limit). Either way, a page
    /// is at most the in-flight limit. kopf-rs pages by 500 by default.
    pub chunk_size: Option<u32>,
    /// Stream the initial state instead of listing it (Kopf's `initial_streaming`, off by
    /// default): a watch with `sendInitialEvents=true&resourceVersionMatch=NotOlderThan`
    /// (Kubernetes 1.34+; alpha and behind a feature gate before), whose events up to the
    /// bookmark annotated `k8s.io/initial-events-end` are the listing. The API server sends
    /// them from its watch cache rather than building one list response. A server without
    /// the feature answers with an error, and the watcher backs off and tries again.
    pub initial_streaming: bool,
    /// Label selectors sent with the lists and watches of the resources they match (Kopf's
    /// `label_selectors`): the server sends only the matching objects, whatever the
    /// handlers' own filters. All the entries that match a resource apply, joined with `,`
    /// (sorted, without duplicates), as Kopf joins them; also to the namespaces and CRDs that
    /// the operator watches for itself, if an entry matches them.
    pub label_selectors: Vec<(Selector, String)>,
    /// Field selectors sent with the lists and watches of the resources they match (Kopf's
    /// `field_selectors`, e.g. `metadata.name!=kube-system`), joined as the label selectors
    /// are. The server rejects fields it cannot select by (`400`): the watcher logs it and
    /// tries again after a backoff.
    pub field_selectors: Vec<(Selector, String)>,
    /// Resources and the shard selectors of their lists and watches, e.g.
    /// `shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')`: the
    /// first entry that matches a resource applies (none by default: no sharding).
    pub shard_selectors: Vec<(Selector, String)>,
    /// Leave `metadata.managedFields` out of the objects as they are read from lists and
    /// watches (off by default: Kopf passes objects whole). Handlers, filters, daemons and
    /// indexes then see the objects without it (as controller-runtime's
    /// `TransformStripManagedFields`). Server-side apply's records of field ownership (an
    /// entry per manager and operation) are often the larger part of a small object. Even
    /// when it is on, the field is never built as it is read: it is kept as the text it came
    /// as, and built only for a handler that asks for the whole object (`body`, `meta`,
    /// `body_as`); stripping also saves that text's memory. Writes are not affected: the
    /// server keeps the field, and admission reviews carry it.
    pub strip_managed_fields: bool,
}

impl Default for WatchingSettings {
    fn default() -> Self {
        WatchingSettings {
            server_timeout: None,
            client_timeout: None,
            connect_timeout: None,
            inactivity_timeout: Duration::from_secs(70),
            reconnect_backoff: Duration::from_millis(100),
            chunk_size: Some(500),
            initial_streaming: false,
            label_selectors: Vec::new(),
            field_selectors: Vec::new(),
            shard_selectors: Vec::new(),
            strip_managed_fields: false,
        }
    }
}

/// Discovery of the resources that selectors match (Kopf's `settings.scanning`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ScanningSettings {
    /// Discover resources only at the start and when a served one disappears: no watching of
    /// CRDs, no periodic discovery (Kopf's `disabled`, e.g. without RBAC for CRDs).
    pub disabled: bool,
    /// Discover again this often (beyond Kopf, which relies on watching CRDs alone): for
    /// aggregated APIs, which no CRD announces, and for CRD changes that were missed.
    pub interval: Duration,
}

impl Default for ScanningSettings {
    fn default() -> Self {
        ScanningSettings {
            disabled: false,
            interval: Duration::from_secs(30),
        }
    }
}

/// Queueing (Kopf's `settings.queueing`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct QueueingSettings {
    /// At most this many per-object workers at once (unlimited by default).
    pub worker_limit: Option<usize>,
    /// A worker with no events for this long exits, leaving its place under `worker_limit`
    /// (Kopf: 5 s). While it waits, it costs its object a small mailbox, not a task.
    pub idle_timeout: Duration,
    /// Delays between retries of an object whose processing keeps failing (Kopf's
    /// `error_delays`, seconds).
    pub error_delays: Vec<Duration>,
    /// At most this many objects' states in flight: read from the watches (an event, a listed
    /// object) and not yet done with, whether they wait for a worker, are being processed, or
    /// wait for a write permit. Past it, the watches are read no further until some are done:
    /// the API server keeps what is not read yet, so a burst of objects, or a start with many,
    /// costs the operator's memory this many objects' states (a few KiB each), not the burst's.
    /// Not in Kopf, which reads its watches only as fast as it handles objects.
    ///
    /// An object's events that come while it is processed go to its event handlers and
    /// indexes as they come; for the cause, only its newest state waits. Handlers that run
    /// count too: an operator with this many handlers running at once reads its watches no
    /// further until one ends (raise the limit for long handlers, or use daemons). One
    /// exception: at the start, the objects that wait for the operator's indexes to be filled
    /// do not count (the filling needs every object listed). Default: 1,000.
    pub in_flight_limit: usize,
}

impl Default for QueueingSettings {
    fn default() -> Self {
        QueueingSettings {
            worker_limit: None,
            idle_timeout: Duration::from_secs(5),
            error_delays: [1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610]
                .into_iter()
                .map(Duration::from_secs)
                .collect(),
            in_flight_limit: 1000,
        }
    }
}

/// Handler execution (Kopf's `settings.execution`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ExecutionSettings {
    /// Delay before retrying a handler after an arbitrary error (Kopf: 60 s).
    pub default_backoff: Duration,
    /// Which due change handlers run in one processing cycle (Kopf's `kopf.run(lifecycle=)`;
    /// [`Lifecycle::Asap`] by default).
    pub lifecycle: Lifecycle,
    /// At most this many threads run [sync handlers](crate::registry::blocking) at once; more
    /// calls wait for a free thread (Kopf's `max_workers`; `None`, the default, is Python's
    /// executor's `min(32, cpus + 4)`). A startup handler may change it: the pool grows at
    /// once; if it shrinks, running threads are not stopped (as in Kopf), but no new ones
    /// start beyond the limit. Zero is an
    /// [`OperatorError::Settings`](crate::operator::OperatorError::Settings) from `run()`.
    pub max_workers: Option<usize>,
    /// At most this long: timers' intervals and idle times, daemons' and timers' initial
    /// delays. A test setting (none by default): with `Some(Duration::from_millis(100))`, a
    /// timer of `interval = "1h"` runs every 100 ms, with no change to the handler
    /// (`kopf_testing::HarnessBuilder::interval_cap`).
    ///
    /// ```
    /// let mut settings = kopf::Settings::default();
    /// settings.execution.interval_cap = Some(std::time::Duration::from_millis(100));
    /// ```
    pub interval_cap: Option<Duration>,
}

impl Default for ExecutionSettings {
    fn default() -> Self {
        ExecutionSettings {
            default_backoff: Duration::from_secs(60),
            lifecycle: Lifecycle::default(),
            max_workers: None,
            interval_cap: None,
        }
    }
}

impl ExecutionSettings {
    /// The number of threads for sync handlers: [`max_workers`](Self::max_workers), or
    /// `min(32, cpus + 4)`.
    pub fn workers(&self) -> usize {
        self.max_workers.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map_or(1, std::num::NonZero::get)
                .saturating_add(4)
                .min(32)
        })
    }
}

/// Persistence (Kopf's `settings.persistence`): where the operator keeps its state on the
/// objects.
///
/// By default, as Kopf 1.44+: progress records in annotations (legacy records in `status` are
/// still read) and the diff-base in an annotation, all under `kopf.zalando.org`. To keep the
/// state elsewhere, pick other storages (see [`crate::configs::storage`]); the prefix of annotations and
/// Kopf's V1 keys are options of the storages:
///
/// ```
/// use std::sync::Arc;
/// use kopf::storage::{
///     AnnotationsDiffBaseStorage, MultiDiffBaseStorage, SmartProgressStorage,
///     StatusDiffBaseStorage, StatusProgressStorage,
/// };
///
/// let mut settings = kopf::Settings::default();
/// // Progress only in `status.kopf.progress`, as Kopf before 0.27 kept it.
/// settings.persistence.progress_storage = Arc::new(StatusProgressStorage {
///     writable: true,
///     ..StatusProgressStorage::default()
/// });
/// // The diff-base in an annotation of our own prefix and in `status`; read from the first.
/// settings.persistence.diffbase_storage = Arc::new(MultiDiffBaseStorage {
///     storages: vec![
///         Box::new(AnnotationsDiffBaseStorage::new("my-operator.example.com")),
///         Box::new(StatusDiffBaseStorage::default()),
///     ],
/// });
/// // Or: the default progress storage under another prefix.
/// settings.persistence.progress_storage =
///     Arc::new(SmartProgressStorage::new("my-operator.example.com"));
/// ```
///
/// State kept in `status` of a resource with a status subresource costs an extra PATCH (to
/// `/status`) per write, and the CRD's schema must keep the fields (e.g.
/// `x-kubernetes-preserve-unknown-fields` on `status`), or they are silently dropped.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PersistenceSettings {
    /// The finalizer that blocks deletion until delete handlers ran.
    pub finalizer: String,
    /// Where handlers' progress is kept while a cause is being handled (Kopf's default,
    /// [`SmartProgressStorage`], by default).
    pub progress_storage: Arc<dyn ProgressStorage>,
    /// Where the essence of the object as last handled is kept (Kopf's default,
    /// [`AnnotationsDiffBaseStorage`], by default).
    pub diffbase_storage: Arc<dyn DiffBaseStorage>,
    /// After its own PATCH, a worker waits this long for the new resourceVersion to come back
    /// before running change handlers again (Kopf: 5 s; zero disables). Past it, where Kopf
    /// takes the state it has as consistent (older than the write, as the watch brings the
    /// versions in order), the worker reads the object from the server and handles that.
    pub consistency_timeout: Duration,
}

impl Default for PersistenceSettings {
    fn default() -> Self {
        PersistenceSettings {
            finalizer: "kopf.zalando.org/KopfFinalizerMarker".into(),
            progress_storage: Arc::new(SmartProgressStorage::default()),
            diffbase_storage: Arc::new(AnnotationsDiffBaseStorage::default()),
            consistency_timeout: Duration::from_secs(5),
        }
    }
}

/// API calls (Kopf's `settings.networking`).
///
/// Every request that the operator sends for itself (reads, writes, Leases, peering, Events,
/// discovery, lists) must be answered, its body included, within `request_timeout`; one that
/// is not is cut (its connection closed) and fails like a lost connection: a write is retried
/// after `error_backoffs`, a list or a Lease's renewal at its next round. Watch streams have
/// their own timeouts ([`WatchingSettings`]). The requests of handlers through their
/// `client` argument are bounded too, except watches and streams (logs followed, `exec`,
/// `attach`, port-forwarding).
///
/// ```
/// let mut settings = kopf::Settings::default();
/// settings.networking.request_timeout = Some(std::time::Duration::from_secs(30));
/// settings.networking.connect_timeout = Some(std::time::Duration::from_secs(5));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NetworkingSettings {
    /// How long a request may take in all, from sending it to the end of its answer (Kopf:
    /// 300 s; `None`: no bound). Set it in the settings given to the operator or in a
    /// startup handler; it applies to the requests sent from then on.
    pub request_timeout: Option<Duration>,
    /// How long connecting to the API server (TCP and TLS) may take (Kopf: `None`: only the
    /// request's own timeout bounds it). It applies to the connections of the clients that the
    /// operator makes (from the kubeconfig or the cluster, or from login handlers' credentials),
    /// as they are made; an embedder's client keeps its own.
    pub connect_timeout: Option<Duration>,
    /// Delays between retries of a failed write (connection errors, 5xx, 429); a
    /// `Retry-After` answer waits at least as long as it says (Kopf: 1, 1, 2, 3, 5, 8, 13, 21 s).
    pub error_backoffs: Vec<Duration>,
    /// At most this many of the operator's own writes (patches of handled objects) are in
    /// flight at once: a burst of objects reuses a few connections instead of opening one each.
    pub max_concurrent_writes: usize,
    /// Wait as long as a `429 Too Many Requests` answer's `Retry-After` says even when it is
    /// shorter than the backoff (Kopf's `enforce_retry_after`; off by default: the longer of
    /// the two is waited, so `Retry-After` is always a minimum).
    pub enforce_retry_after: bool,
    /// Use the proxy that the environment names (`HTTPS_PROXY`/`https_proxy`, or
    /// `HTTP_PROXY`/`http_proxy` for a plain-HTTP server; `NO_PROXY`/`no_proxy` exempts
    /// hosts) for the clients that the operator makes (Kopf's `trust_env`; off by default: the
    /// environment is ignored, and only a kubeconfig's `proxy-url` is used). Kopf's
    /// `~/.netrc` credentials are not read. Read when the clients are made, so set it in the
    /// settings given to the operator, not in a startup handler.
    pub trust_env: bool,
}

impl Default for NetworkingSettings {
    fn default() -> Self {
        NetworkingSettings {
            request_timeout: Some(Duration::from_secs(300)),
            connect_timeout: None,
            max_concurrent_writes: 16,
            enforce_retry_after: false,
            trust_env: false,
            error_backoffs: [1, 1, 2, 3, 5, 8, 13, 21]
                .into_iter()
                .map(Duration::from_secs)
                .collect(),
        }
    }
}

/// Stopping (beyond Kopf: its exit has no grace period).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProcessSettings {
    /// After a stop, work that ignores its cancellation gets this long before it is aborted.
    /// Below Kubernetes' 30 s pod grace period, so cleanups end before the SIGKILL.
    pub grace_period: Duration,
    /// The cleanup handlers, run after the grace period, get this long in all before they are
    /// aborted (beyond Kopf, which does not bound them). With the grace period, it stays below
    /// Kubernetes' 30 s pod grace period.
    pub cleanup_timeout: Duration,
}

impl Default for ProcessSettings {
    fn default() -> Self {
        ProcessSettings {
            grace_period: Duration::from_secs(20),
            cleanup_timeout: Duration::from_secs(5),
        }
    }
}

/// Kubernetes Events (Kopf's `settings.posting`): what handlers post through
/// [`Invocation::events`](crate::Invocation::events), and whether what they log through
/// [`Invocation::logger`](crate::Invocation::logger) is posted too.
///
/// ```
/// let mut settings = kopf::Settings::default();
/// settings.posting.loggers = true; // post handlers' log records too, as Kopf before 1.44
/// settings.posting.level = tracing::Level::WARN; // but only warnings and errors
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PostingSettings {
    /// Whether anything is posted at all (Kopf: on).
    pub enabled: bool,
    /// Whether handlers' log records are posted too (Kopf 1.44+: off).
    pub loggers: bool,
    /// Records and toolkit events less severe than this are not posted (Kopf: INFO).
    pub level: tracing::Level,
    /// `reportingComponent` and `source.component` of the events (Kopf: `kopf`).
    pub reporting_component: String,
    /// `reportingInstance` of the events (Kopf: `dev`).
    pub reporting_instance: String,
    /// The events' `metadata.generateName` (Kopf: `kopf-event-`).
    pub event_name_prefix: String,
    /// Delays between retries of a failed post of an event that handlers post explicitly
    /// ([`kopf::info`](crate::info) and the others, [`Events`](crate::Events)): connection
    /// errors, timeouts, `5xx`, `403` and `429` (at least its `Retry-After`) are retried, each
    /// object's events in order (Kopf: 1, 1, 2, 3, 5, 8, 13, 21 s); then the event is dropped
    /// with a warning.
    pub default_backoffs: Vec<Duration>,
    /// The same for events made of handlers' log records ([`loggers`](Self::loggers)), which
    /// are many (Kopf: 1, 1, 2, 3, 5 s).
    pub logging_backoffs: Vec<Duration>,
    /// At most this many objects' events are posted at once (Kopf's `worker_limit`; unlimited
    /// by default); one object's events are always posted one by one, in order, so a retried
    /// event holds back only its own object's.
    pub worker_limit: Option<usize>,
    /// An object's poster with nothing to post for this long ends (Kopf: 1 s).
    pub idle_timeout: Duration,
}

impl Default for PostingSettings {
    fn default() -> Self {
        PostingSettings {
            enabled: true,
            loggers: false,
            level: tracing::Level::INFO,
            reporting_component: "kopf".into(),
            reporting_instance: "dev".into(),
            event_name_prefix: "kopf-event-".into(),
            default_backoffs: [1, 1, 2, 3, 5, 8, 13, 21]
                .into_iter()
                .map(Duration::from_secs)
                .collect(),
            logging_backoffs: [1, 1, 2, 3, 5]
                .into_iter()
                .map(Duration::from_secs)
                .collect(),
            worker_limit: None,
            idle_timeout: Duration::from_secs(1),
        }
    }
}

/// Peering (Kopf's `settings.peering`): operators that serve the same resources tell each
/// other they are alive through a `KopfPeering` (in each served namespace) or a
/// `ClusterKopfPeering` (cluster-wide) object, and only the one of the highest priority works;
/// the others pause until it leaves or its entry expires.
///
/// Without `standalone` or `mandatory` (Kopf's default), peering is used if its CRD exists
/// (the `crd` subcommand prints it) and skipped with a warning if not. The wire format is
/// Kopf's, so Python Kopf operators and kopf-rs operators pause in favour of each other.
///
/// ```
/// let mut settings = kopf::Settings::default();
/// settings.peering.name = "my-operator".into(); // as `--peering my-operator`
/// settings.peering.mandatory = true;
/// settings.peering.priority = 100;              // as `--priority 100`
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PeeringSettings {
    /// The peering object's name: operators with different names do not see each other
    /// (Kopf: `default`).
    pub name: String,
    /// This operator's priority: it pauses while a live peer of a higher priority exists, and
    /// all pause while peers of the same priority do (Kopf: 0), unless they have
    /// [shard selectors](WatchingSettings::shard_selectors): then they keep running.
    pub priority: i64,
    /// How long this operator's entry stays valid without a keep-alive; keep-alives come
    /// 5 to 10 seconds before it ends (Kopf: 60 s, whole seconds on the wire).
    pub lifetime: Duration,
    /// Peering is required: the operator starts paused and stays paused until its peering
    /// object shows no conflict, or as long as the peering CRD or object is missing (Kopf's
    /// `--peering NAME`).
    pub mandatory: bool,
    /// No peering at all, even if peering objects exist (`--standalone`).
    pub standalone: bool,
    /// Do not log the keep-alives (a missing peering object is still logged).
    pub stealth: bool,
    /// `ClusterKopfPeering` (cluster-wide) rather than a `KopfPeering` in each served
    /// namespace. `None` (the default) follows the operator's scope, as Kopf derives it from
    /// `-A`/`-n`: cluster-wide unless namespaces are given.
    pub clusterwide: Option<bool>,
    /// Leader election with a `coordination.k8s.io/v1` Lease (client-go's algorithm, as
    /// controller-runtime uses it): only the holder of the Lease serves; the others wait,
    /// paused, until it is released or expires. Off by default. It combines with Kopf's
    /// peering: the operator is paused while either says so (use `standalone` for the Lease
    /// alone).
    pub lease: Option<LeaseSettings>,
    /// Assigned shards: the replicas split the objects among them, each handling the objects
    /// of the shards it owns (`--shards N`). Off by default.
    pub sharding: Option<ShardingSettings>,
}

/// Assigned shards ([`PeeringSettings::sharding`], `--shards N`): replicas of one operator
/// split the objects of every served resource among them, and hand them over live as
/// replicas come and go.
///
/// The hash space of the objects' uids is cut into `shards` virtual shards (contiguous
/// ranges, the same on every replica; a replica that sees a member with another number takes
/// no shard while that member lives). Each replica announces itself with a Lease of its own
/// (`<name>-member-<hash>`), renewed every `retry_period`; each shard's owner is recorded in
/// its Lease (`<name>-<k>`). The targets come from bounded-load rendezvous hashing over the
/// live members, so a join or a leave moves about `shards / members` shards. A replica lists
/// and watches only the objects of the shards it owns (one `shardSelector`, filtered on its
/// side when the server ignores it).
///
/// A hand-off is live: the owner stops dispatching the shard's objects, waits up to
/// `drain_timeout` for the handlers in flight (or keeps the shard and tries again after
/// another `drain_timeout`), then stops the objects' daemons and timers
/// ([`StopReason::ShardMoved`](crate::StopReason::ShardMoved)) and waits for them to end
/// (within their own cancellation timeouts), and only then writes the new owner into the
/// shard's Lease; the new owner starts only when it sees that. The operator's in-memory
/// indexes hold only the objects of the shards this replica owns.
/// A replica that cannot renew its own Lease within `renew_deadline` acts on nothing more; a
/// member not seen to renew for `lease_duration` (on the local monotonic clock) is fenced
/// (its Lease emptied, guarded by its resourceVersion) before its shards are taken. At a
/// graceful stop, after its handlers end, a replica releases its shards at once.
///
/// ```
/// let mut settings = kopf::Settings::default();
/// let mut sharding = kopf::settings::ShardingSettings::new(16);
/// sharding.namespace = Some("operators".into());
/// settings.peering.sharding = Some(sharding);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ShardingSettings {
    /// The number of virtual shards; the same on every replica (1 to 4096).
    pub shards: u32,
    /// The name of the ring: the prefix of its Leases (default `kopf-shards`); replicas with
    /// different names do not see each other.
    pub name: String,
    /// The Leases' namespace; `None` (the default) is the client's default namespace.
    pub namespace: Option<String>,
    /// This replica's identity in the Leases; `None` (the default) is `POD_ID` if set, else
    /// `<user>@<host>/<timestamp>/<random>`. A random suffix makes each start a new
    /// incarnation.
    pub identity: Option<String>,
    /// How long others wait, after a member's Lease was last seen to change, before they fence
    /// it and take its shards (15 s; the longer of this and what the member recorded; at most
    /// an int32 of seconds, as a Lease records it).
    pub lease_duration: Duration,
    /// How long a replica acts on its shards after its last successful renewal began (10 s).
    pub renew_deadline: Duration,
    /// How often members renew their Leases and look at the others' (2 s).
    pub retry_period: Duration,
    /// How long an owner waits for the handlers in flight of a shard it hands over before it
    /// gives up and keeps the shard for now (60 s).
    pub drain_timeout: Duration,
}

impl ShardingSettings {
    /// `shards` virtual shards, with client-go's Lease timings.
    pub fn new(shards: u32) -> ShardingSettings {
        ShardingSettings {
            shards,
            name: "kopf-shards".into(),
            namespace: None,
            identity: None,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            drain_timeout: Duration::from_secs(60),
        }
    }
}

/// Leader election with a `coordination.k8s.io/v1` Lease (client-go's `leaderelection`), as
/// [`PeeringSettings::lease`] selects it.
///
/// Candidates try to acquire the Lease every `retry_period` (with client-go's jitter of 1.2,
/// so 2 to 4.4 seconds by default); a Lease held by another is taken only when it is released
/// (an empty holder) or when its record has not been seen to change for `lease_duration` on
/// this operator's monotonic clock (the timestamps in the Lease are never compared with the
/// local clock). The leader renews it every `retry_period`; if it cannot renew within
/// `renew_deadline`, it loses the leadership and does what `on_lost` says. Every write is
/// guarded by the resourceVersion that was read. At a graceful stop, after everything else
/// has stopped (the cleanup handlers included), the leader releases the Lease (client-go's
/// `ReleaseOnCancel`), so that another candidate takes over at once.
///
/// The durations are validated as client-go validates them (`lease_duration >
/// renew_deadline > 1.2 × retry_period`, all above zero, a non-empty identity), and the lease
/// duration must fit the Lease's `leaseDurationSeconds` (an int32 of seconds): invalid ones
/// are an [`OperatorError::Lease`](crate::operator::OperatorError::Lease) from `run()`. A candidate
/// waits for the longer of its own lease duration and the one its holder recorded.
///
/// ```
/// let mut settings = kopf::Settings::default();
/// let mut lease = kopf::settings::LeaseSettings::new("my-operator");
/// lease.namespace = Some("operators".into());
/// lease.on_lost = kopf::settings::LostLeadership::Exit;
/// settings.peering.lease = Some(lease);
/// settings.peering.standalone = true; // the Lease alone, no Kopf peering
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LeaseSettings {
    /// The Lease's name: operators with the same name and namespace elect one leader.
    pub name: String,
    /// The Lease's namespace; `None` (the default) is the client's default namespace (the
    /// pod's own in a cluster, the kubeconfig context's otherwise).
    pub namespace: Option<String>,
    /// This candidate's identity, as the Lease's `holderIdentity` shows it; `None` (the
    /// default) is `POD_ID` if set, else `<user>@<host>/<timestamp>/<random>` (as Kopf's
    /// peering identity).
    pub identity: Option<String>,
    /// How long others wait, after the record was last seen to change, before they take the
    /// Lease from a leader that stopped renewing (client-go: 15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up the leadership
    /// (client-go: 10 s).
    pub renew_deadline: Duration,
    /// How often candidates try to acquire and the leader renews (client-go: 2 s).
    pub retry_period: Duration,
    /// What the operator does when it loses the leadership (default: pause).
    pub on_lost: LostLeadership,
}

impl LeaseSettings {
    /// Client-go's defaults for a Lease of this name, in the client's default namespace.
    pub fn new(name: impl Into<String>) -> LeaseSettings {
        LeaseSettings {
            name: name.into(),
            namespace: None,
            identity: None,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            on_lost: LostLeadership::Pause,
        }
    }
}

/// What an operator does when it loses the leadership of its Lease.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostLeadership {
    /// Stop serving (as paused: watchers and daemons stop, handlers in flight finish), and try
    /// to acquire the Lease again.
    #[default]
    Pause,
    /// Stop the operator: `run()` returns
    /// [`OperatorError::LostLeadership`](crate::operator::OperatorError::LostLeadership), and the
    /// process exits non-zero (as kube-controller-manager and controller-runtime do), so that a
    /// restart begins afresh.
    Exit,
}

impl PeeringSettings {
    /// Whether the peering is in `KopfPeering` objects of the served namespaces (Kopf's
    /// `namespaced`, the inverse of [`clusterwide`](Self::clusterwide)); `None` while it
    /// follows the operator's scope.
    pub fn namespaced(&self) -> Option<bool> {
        self.clusterwide.map(|clusterwide| !clusterwide)
    }

    /// Sets [`clusterwide`](Self::clusterwide) to the inverse (Kopf's `namespaced = ...`).
    pub fn set_namespaced(&mut self, namespaced: bool) {
        self.clusterwide = Some(!namespaced);
    }
}

impl Default for PeeringSettings {
    fn default() -> Self {
        PeeringSettings {
            name: "default".into(),
            priority: 0,
            lifetime: Duration::from_secs(60),
            mandatory: false,
            standalone: false,
            stealth: false,
            clusterwide: None,
            lease: None,
            sharding: None,
        }
    }
}
