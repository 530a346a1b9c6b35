//! The operator's settings, grouped as Kopf groups them, with Kopf's defaults where they apply.
//!
//! Startup handlers may change them before anything is watched; tests set them directly:
//!
//! ```
//! let mut settings = kopf::Settings::default();
//! settings.queueing.idle_timeout = std::time::Duration::from_secs(1);
//! settings.process.grace_period = std::time::Duration::from_secs(5);
//! ```

use std::time::Duration;

/// All settings of an operator.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Settings {
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
}

/// Watching (Kopf's `settings.watching`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WatchingSettings {
    /// `timeoutSeconds` asked of the server for each watch request (none by default).
    pub server_timeout: Option<Duration>,
    /// A watch stream silent for this long is reconnected (Kopf: 70 s). Bookmarks count as
    /// activity, so a healthy but quiet stream is not cut.
    pub inactivity_timeout: Duration,
    /// Delay before reconnecting a watch that ended (Kopf: 0.1 s); errors back off further.
    pub reconnect_backoff: Duration,
    /// Page size of the initial listing.
    pub list_page_size: u32,
}

impl Default for WatchingSettings {
    fn default() -> Self {
        WatchingSettings {
            server_timeout: None,
            inactivity_timeout: Duration::from_secs(70),
            reconnect_backoff: Duration::from_millis(100),
            list_page_size: 500,
        }
    }
}

/// Queueing (Kopf's `settings.queueing`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct QueueingSettings {
    /// At most this many per-object workers at once (unlimited by default).
    pub worker_limit: Option<usize>,
    /// A worker with no events for this long exits (Kopf: 5 s).
    pub idle_timeout: Duration,
    /// Delays between retries of an object whose processing keeps failing (Kopf's
    /// `error_delays`, seconds).
    pub error_delays: Vec<Duration>,
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
        }
    }
}

/// Handler execution (Kopf's `settings.execution`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ExecutionSettings {
    /// Delay before retrying a handler after an arbitrary error (Kopf: 60 s).
    pub default_backoff: Duration,
}

impl Default for ExecutionSettings {
    fn default() -> Self {
        ExecutionSettings {
            default_backoff: Duration::from_secs(60),
        }
    }
}

/// Persistence (Kopf's `settings.persistence`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PersistenceSettings {
    /// The finalizer that blocks deletion until delete handlers ran.
    pub finalizer: String,
    /// The prefix of progress and diff-base annotations.
    pub prefix: String,
    /// Also write the V1 (63-character whole key) progress annotations, as Kopf does by default.
    pub v1_keys: bool,
    /// After its own PATCH, a worker waits this long for the new resourceVersion to come back
    /// before running change handlers again (Kopf: 5 s; zero disables).
    pub consistency_timeout: Duration,
}

impl Default for PersistenceSettings {
    fn default() -> Self {
        PersistenceSettings {
            finalizer: "kopf.zalando.org/KopfFinalizerMarker".into(),
            prefix: "kopf.zalando.org".into(),
            v1_keys: true,
            consistency_timeout: Duration::from_secs(5),
        }
    }
}

/// API calls (Kopf's `settings.networking`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NetworkingSettings {
    /// Delays between retries of a failed write (connection errors, 5xx, 429); a
    /// `Retry-After` answer waits at least as long as it says (Kopf: 1, 1, 2, 3, 5, 8, 13, 21 s).
    pub error_backoffs: Vec<Duration>,
}

impl Default for NetworkingSettings {
    fn default() -> Self {
        NetworkingSettings {
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
}

impl Default for ProcessSettings {
    fn default() -> Self {
        ProcessSettings {
            grace_period: Duration::from_secs(20),
        }
    }
}
