//! The operator's admission: the webhook server answering with the admission handlers, the
//! discovery of the resources they serve, and the managed webhook configurations; started and
//! stopped as steps of the operator.
//!
//! The order of the stop (the shutdown contract, DESIGN §5): the server answers while the
//! handlers finish and the cleanup handlers run (their own writes may pass through its
//! webhooks); then the managed configurations are handed over to another replica, or, on the
//! last one, shrink to the persistent webhooks; then the server stops accepting, the reviews
//! in flight finish, and nothing of it is left.
//!
//! Which replica writes the configurations ([`Successors`] for the stop): the Lease leader;
//! else, when no replica pauses for another (assigned shards, shard selectors), the holder of
//! the configurations' own Lease ([`Custody`]); else the peer that does not pause, once it has
//! heard its peers; a lone operator otherwise.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use futures::future::BoxFuture;

use crate::aiokits::tasks::Tasks;
use crate::clients::posting::Poster;
use crate::clients::scanning::{self, Groups};
use crate::configs::leadership::jittered;
use crate::configs::settings::Settings;
use crate::engines::admission::Admission;
use crate::engines::configurations::{
    self, ConfigurationError, Configurations, Managed, Succession,
};
use crate::engines::custody::{self, Custody};
use crate::engines::leadership::Elector;
use crate::engines::pausing::Pause;
use crate::engines::peering::Peering;
use crate::engines::sharding::Sharder;
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
    /// The API server's URL, where the operator knows it.
    pub(crate) cluster: Option<http::Uri>,
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
    /// Who may take the configurations over at the stop.
    successors: Option<Successors>,
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
        let replicated = !settings.peering.standalone
            || settings.peering.lease.is_some()
            || settings.peering.sharding.is_some();
        if let Some(service) = &server.service
            && replicated
            && server.certificate.is_none()
            && server.secret.is_none()
        {
            tracing::warn!(target: "kopf::admission", "the webhooks are served behind the Service {}/{} with a certificate made by this replica alone: other replicas behind it make their own, which the cluster does not trust; share one with WebhookServer::secret(..) or certificate files", service.namespace, service.name);
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
        let cluster = shared.cluster.as_ref();
        let webhooks = Webhooks::start(
            server,
            &settings.serving,
            threads,
            Some(&client),
            cluster,
            |tree| {
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
            },
        )
        .await
        .map_err(AdmissionStartError::Webhooks)?;
        let managed = settings.admission.managed.clone().map(|managed| Managed {
            client,
            handlers: registry.admissions.clone(),
            managed,
            pause: Pause::never(),
            backoffs: settings.networking.error_backoffs.clone(),
            watching: settings.watching.clone(),
        });
        Ok(Some(Admitting {
            webhooks,
            managed: managed.map(|managed| (managed, discovered)),
            configurations: None,
            successors: None,
        }))
    }

    /// The name of the managed configurations, if the settings ask for them.
    pub(crate) fn managed(&self) -> Option<&str> {
        self.managed
            .as_ref()
            .map(|(managed, _)| managed.managed.as_str())
    }

    /// Starts keeping the managed configurations (if the settings ask for them) in tasks of
    /// `tasks`, written only while `pause` says this replica owns them; `successors` may take
    /// them over at the stop.
    pub(crate) fn manage(&mut self, pause: Pause, successors: Successors, tasks: &Tasks) {
        let Some((mut managed, resources)) = self.managed.take() else {
            return;
        };
        managed.pause = pause;
        let config = self.webhooks.client_config();
        self.configurations = Some(Configurations::start(managed, config, resources, tasks));
        self.successors = Some(successors);
    }

    /// Whether the managed configurations are in place (always, when there are none), now
    /// and as it changes: a part of the operator's readiness.
    pub(crate) fn in_place(&self) -> watch::Receiver<bool> {
        match &self.configurations {
            Some(configurations) => configurations.in_place(),
            None => watch::Sender::new(true).subscribe(),
        }
    }

    /// Resolves when the managed configurations cannot be kept; never otherwise.
    pub(crate) async fn failed(&self) -> ConfigurationError {
        match &self.configurations {
            Some(configurations) => configurations.failed().await,
            None => std::future::pending().await,
        }
    }

    /// The stop step: the managed configurations are handed over to another replica or
    /// shrink to the persistent webhooks (within `timeout`), then the server stops accepting
    /// and the reviews in flight finish (within `grace`, or until `abort`): `false` if
    /// reviews had to be aborted.
    pub(crate) async fn stop(
        &self,
        timeout: Duration,
        grace: Duration,
        abort: &CancellationToken,
    ) -> bool {
        if let (Some(configurations), Some(successors)) = (&self.configurations, &self.successors) {
            tokio::select! {
                _ = configurations.hand_over(successors, timeout) => {}
                _ = abort.cancelled() => {}
            }
        }
        self.webhooks.stop(grace, abort).await
    }
}

/// Whether this replica owns the managed webhook configurations: the pause under which it
/// writes them (paused while it does not own them, or `pause`, the operator's, says so), and
/// the custody it campaigns for when no replica pauses for another. With a leader Lease, the
/// leader owns them (the operator's pause follows its term); with peering, the active peer
/// once it has heard its peers; with assigned shards or shard selectors, the holder of the
/// configurations' own Lease (`settings.admission.lease`, or one derived from the shards'); a
/// lone operator otherwise. An error when that Lease's settings are invalid.
pub(crate) fn owner(
    client: &kube::Client,
    settings: &Settings,
    managed: &str,
    pause: &Pause,
    peering: Option<&Arc<Peering>>,
    tasks: &Tasks,
) -> Result<(Pause, Option<Arc<Custody>>), String> {
    if settings.peering.lease.is_some() {
        return Ok((pause.clone(), None));
    }
    let mut owning = pause.clone();
    if let Some(peering) = peering {
        owning = owning.or(peering.settling());
    }
    let sharded =
        settings.peering.sharding.is_some() || !settings.watching.shard_selectors.is_empty();
    if !sharded {
        return Ok((owning, None));
    }
    let lease = settings
        .admission
        .lease
        .clone()
        .unwrap_or_else(|| derived_lease(settings, managed));
    let identity = lease
        .identity
        .clone()
        .or_else(|| settings.peering.sharding.as_ref()?.identity.clone())
        .unwrap_or_else(crate::engines::peering::identity);
    let what = format!("the webhook configurations {managed}");
    let custody = Custody::start(
        client,
        lease,
        identity,
        what,
        owning.clone(),
        tasks.token().clone(),
    )?;
    Ok((owning.or(custody.pause()), Some(custody)))
}

/// The configurations' own Lease when the settings give none: named as them, in the shards'
/// namespace, with the shards' timings when client-go accepts them (else its own).
fn derived_lease(settings: &Settings, managed: &str) -> crate::configs::settings::LeaseSettings {
    let mut lease = crate::configs::settings::LeaseSettings::new(managed);
    if let Some(sharding) = &settings.peering.sharding {
        lease.namespace = sharding.namespace.clone();
        let mut timed = lease.clone();
        timed.lease_duration = sharding.lease_duration;
        timed.renew_deadline = sharding.renew_deadline;
        timed.retry_period = sharding.retry_period;
        if crate::configs::leadership::validate(&timed, "-").is_ok() {
            lease = timed;
        }
    }
    lease
}

/// The replicas that may take the webhook configurations over from this one, as its peering,
/// assigned shards and Leases know them.
#[derive(Default)]
pub(crate) struct Successors {
    /// Kopf's peering, whose live entries are replicas.
    pub(crate) peering: Option<Arc<Peering>>,
    /// The ring of assigned shards, whose live members are replicas.
    pub(crate) sharder: Option<Arc<Sharder>>,
    /// The leader's Lease, when the leader owns the configurations.
    pub(crate) leader: Option<Arc<Elector>>,
    /// The configurations' own Lease, when no replica pauses for another.
    pub(crate) custody: Option<Arc<Custody>>,
    /// The operator's client.
    pub(crate) client: Option<kube::Client>,
}

impl Succession for Successors {
    fn others_alive(&self) -> Option<bool> {
        let known: Vec<bool> = [
            self.peering.as_ref().map(|p| p.others_alive()),
            self.sharder.as_ref().map(|s| s.others_alive()),
        ]
        .into_iter()
        .flatten()
        .collect();
        match (known.iter().any(|alive| *alive), known.is_empty()) {
            (true, _) => Some(true),
            (false, false) => Some(false),
            // A Lease's candidates are known to nobody; without any, this one is alone.
            (false, true) if self.leader.is_some() || self.custody.is_some() => None,
            (false, true) => Some(false),
        }
    }

    fn release(&self, timeout: Duration) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Some(custody) = &self.custody {
                custody.release(timeout).await;
            }
            if let Some(leader) = &self.leader {
                leader.release(timeout).await;
            }
        })
    }

    fn successor(&self) -> BoxFuture<'_, Option<bool>> {
        Box::pin(async move {
            if let Some(custody) = &self.custody {
                return Some(custody.taken_by_another().await);
            }
            let (Some(leader), Some(client)) = (&self.leader, &self.client) else {
                return None;
            };
            let lease = leader.lease();
            let (namespace, name) = lease.split_once('/').unwrap_or_default();
            Some(custody::holder_other_than(client, namespace, name, leader.identity()).await)
        })
    }

    fn takeover(&self) -> Duration {
        match (&self.custody, &self.leader) {
            (Some(custody), _) => custody.takeover(),
            (None, Some(leader)) => jittered(leader.retry_period(), 1.0) + Duration::from_secs(1),
            (None, None) => Duration::ZERO,
        }
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
