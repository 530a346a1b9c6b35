//! Why an operator could not run ([`OperatorError`]): one variant for each thing that can
//! stop it, and the errors of the layers below mapped into them.

use std::time::Duration;

use crate::actions::activity::Activity;
use crate::engines::activities::ActivityError;
use crate::engines::probing::LivenessError;
use crate::reactor::admission::AdmissionStartError;
use crate::structs::credentials::LoginError;

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
