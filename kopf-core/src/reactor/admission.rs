//! The operator's admission: the webhook server answering with the admission handlers, the
//! discovery of the resources they serve, and the managed webhook configurations; started and
//! stopped as steps of the operator.
//!
//! The order of the stop (the shutdown contract, DESIGN §5): the server answers while the
//! handlers finish and the cleanup handlers run (their own writes may pass through its
//! webhooks); then the managed configurations shrink to the persistent webhooks; then the
//! server stops accepting, the reviews in flight finish, and nothing of it is left.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::aiokits::tasks::Tasks;
use crate::clients::posting::Poster;
use crate::clients::scanning::{self, Groups};
use crate::configs::settings::Settings;
use crate::engines::admission::Admission;
use crate::engines::configurations::{self, ConfigurationError, Configurations, Managed};
use crate::engines::pausing::Pause;
use crate::engines::webhooks::{Review, WebhookError, Webhooks};
use crate::intents::registry::Registry;
use crate::structs::indexes::Indexes;
use crate::structs::memos::{Memo, ObjectMemos};
use crate::structs::resources::{Resource, Selector};

/// Why admission could not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AdmissionStartError {
    /// Admission handlers (these ids) exist, but no server is configured.
    #[error("the admission handlers {0:?} have no webhook server")]
    NoServer(Vec<String>),
    /// The server cannot serve.
    #[error(transparent)]
    Webhooks(WebhookError),
    /// The managed configurations cannot be kept.
    #[error(transparent)]
    Configurations(ConfigurationError),
}

/// What the admission reviews get from the operator.
pub(crate) struct Shared {
    /// The operator's client (for the handlers, discovery and the configurations).
    pub(crate) client: kube::Client,
    /// The operator's memo.
    pub(crate) memo: Memo,
    /// The memos of the objects the operator watches.
    pub(crate) memos: ObjectMemos,
    /// The operator's indexes.
    pub(crate) indexes: Indexes,
}

/// The operator's running admission.
pub(crate) struct Admitting {
    webhooks: Webhooks,
    /// What the managed configurations are made of, until they are kept.
    managed: Option<(Managed, watch::Receiver<Vec<Resource>>)>,
    configurations: Option<Configurations>,
}

impl std::fmt::Debug for Admitting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admitting")
            .field("webhooks", &self.webhooks)
            .field("configurations", &self.configurations)
            .finish_non_exhaustive()
    }
}

impl Admitting {
    /// Starts the server, if the registry has admission handlers; `None` if it has none, or
    /// if `stop` is cancelled before the server could start. The server runs in a tree of its
    /// own, stopped by [`stop`](Self::stop), which shares the metrics and outcomes of the
    /// operator's tree `tasks`.
    pub(crate) async fn serve(
        registry: &Registry,
        settings: &Settings,
        shared: Shared,
        tasks: &Tasks,
        stop: &CancellationToken,
    ) -> Result<Option<Admitting>, AdmissionStartError> {
        if registry.admissions.is_empty() {
            return Ok(None);
        }
        let Some(server) = &settings.admission.server else {
            let ids = registry.admissions.iter().map(|h| h.id().to_string());
            return Err(AdmissionStartError::NoServer(ids.collect()));
        };
        if let Some(managed) = &settings.admission.managed {
            configurations::check_name(managed).map_err(AdmissionStartError::Configurations)?;
        }
        let selectors: Vec<Selector> = registry
            .admissions
            .iter()
            .map(|h| h.selector().clone())
            .collect();
        let resources = watch::Sender::new(Vec::new());
        let discovered = resources.subscribe();
        let client = shared.client;
        // The first discovery before the server answers, so that early reviews find their
        // resource (Kopf serves only after the resources are scanned).
        let groups: Groups = selectors
            .iter()
            .map(|s| s.group().map(String::from))
            .collect();
        let scanned = tokio::select! {
            scanned = scanning::scan(&client, &groups) => scanned,
            // A stop before the server answers: there is nothing to serve, nor to stop.
            _ = stop.cancelled() => return Ok(None),
        };
        match scanned {
            Ok(found) => {
                resources.send_replace(found);
            }
            Err(error) => {
                tracing::warn!(target: "kopf::admission", %error, "cannot discover the resources of the admission handlers yet; retrying");
            }
        }
        let discovery = Discovery {
            client: client.clone(),
            groups,
            interval: (!settings.scanning.disabled).then_some(settings.scanning.interval),
            resources,
        };
        let posting = settings.posting.clone();
        let (memo, memos, indexes) = (shared.memo, shared.memos, shared.indexes);
        let reviewed = discovered.clone();
        let reviewing = client.clone();
        let threads = settings.execution.workers();
        let (metrics, outcomes) = (tasks.metrics().cloned(), tasks.outcomes().cloned());
        let webhooks = Webhooks::start(server, threads, |tree| {
            // The reviews' handlers are counted and recorded as the operator's others are.
            if let Some(metrics) = metrics {
                tree.measure(metrics);
            }
            if let Some(outcomes) = outcomes {
                tree.record_outcomes(outcomes);
            }
            tree.spawn(discovery.run(tree.token().clone()));
            let poster = Poster::start(reviewing.clone(), &posting, &tree);
            let admission = Admission::new(registry, reviewing, tree)
                .memo(memo)
                .memos(memos)
                .indexes(indexes)
                .poster(poster)
                .resources(reviewed);
            let review: Review = Arc::new(move |request| {
                let admission = admission.clone();
                Box::pin(async move { admission.review(request).await })
            });
            review
        })
        .await
        .map_err(AdmissionStartError::Webhooks)?;
        let managed = settings.admission.managed.clone().map(|managed| Managed {
            client,
            handlers: registry.admissions.clone(),
            managed,
            pause: Pause::never(),
            backoffs: settings.networking.error_backoffs.clone(),
        });
        Ok(Some(Admitting {
            webhooks,
            managed: managed.map(|managed| (managed, discovered)),
            configurations: None,
        }))
    }

    /// Starts keeping the managed configurations (if the settings ask for them) in a task of
    /// `tasks`, written only while the operator is not paused.
    pub(crate) fn manage(&mut self, pause: Pause, tasks: &Tasks) {
        let Some((mut managed, resources)) = self.managed.take() else {
            return;
        };
        managed.pause = pause;
        let config = self.webhooks.client_config();
        self.configurations = Some(Configurations::start(managed, config, resources, tasks));
    }

    /// Resolves when the managed configurations cannot be kept; never otherwise.
    pub(crate) async fn failed(&self) -> ConfigurationError {
        match &self.configurations {
            Some(configurations) => configurations.failed().await,
            None => std::future::pending().await,
        }
    }

    /// The stop step: the managed configurations shrink to the persistent webhooks (each
    /// write within `timeout`), then the server stops accepting and the reviews in flight
    /// finish (within `grace`, or until `abort`): `false` if reviews had to be aborted.
    pub(crate) async fn stop(
        &self,
        timeout: Duration,
        grace: Duration,
        abort: &CancellationToken,
    ) -> bool {
        if let Some(configurations) = &self.configurations {
            tokio::select! {
                _ = configurations.shrink(timeout) => {}
                _ = abort.cancelled() => {}
            }
        }
        self.webhooks.stop(grace, abort).await
    }
}

/// Discovers the admission handlers' resources again every interval (none: never again), for
/// the reviews and the rules of the managed webhooks.
struct Discovery {
    client: kube::Client,
    groups: Groups,
    interval: Option<Duration>,
    resources: watch::Sender<Vec<Resource>>,
}

impl Discovery {
    async fn run(self, token: CancellationToken) {
        let mut failures = 0u32;
        let mut delay = if self.resources.borrow().is_empty() {
            Some(Duration::ZERO)
        } else {
            self.interval
        };
        loop {
            let Some(pause) = delay else { return };
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = token.cancelled() => return,
            }
            let scanned = tokio::select! {
                scanned = scanning::scan(&self.client, &self.groups) => scanned,
                _ = token.cancelled() => return,
            };
            delay = match scanned {
                Ok(found) => {
                    failures = 0;
                    self.resources.send_if_modified(|resources| {
                        let changed = *resources != found;
                        *resources = found;
                        changed
                    });
                    self.interval
                }
                Err(error) => {
                    failures += 1;
                    tracing::warn!(target: "kopf::admission", %error, "cannot discover the resources of the admission handlers; retrying");
                    Some(scanning::retry_delay(failures))
                }
            };
        }
    }
}

/// The ids, for an error message.
pub(crate) fn listed(ids: &[String]) -> String {
    let unique: BTreeSet<&String> = ids.iter().collect();
    unique
        .into_iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}
