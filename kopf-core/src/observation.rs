//! The observer: which resources the handlers' selectors match, served once each with the
//! handlers of every selector that matched it, kept up to date as resources come and go
//! (Kopf's resource observer).
//!
//! Discovery runs at the start; again when a CRD changes (the observer watches
//! `customresourcedefinitions`, as Kopf does), when a served resource stops being served, and
//! every `settings.scanning.interval` for what CRDs do not reveal (aggregated APIs, missed
//! events, no permission to watch CRDs); never twice within [`MIN_GAP`]. Each discovery is
//! compared with what is served: a newly matched resource gets its watchers, a resource no
//! longer matched has its subtree of the task tree cancelled, and a resource whose description
//! or set of selectors changed is restarted.
//!
//! Invariants:
//! 1. At most one set of watchers (one per namespace) and one `Processor` per resource: two
//!    selectors matching one resource share them, so the object's state is written by one
//!    worker, with all the handlers.
//! 2. Readiness counts the watchers of the first discovery only: the operator is ready when
//!    each has listed once or ended.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::namespaces::NamespacePatterns;
use crate::processing::{Common, Processor};
use crate::queueing::Queue;
use crate::registry::Registry;
use crate::resources::{Resource, Selector};
use crate::scanning::{self, Groups};
use crate::settings::Settings;
use crate::tasks::{StopReason, Tasks};
use crate::watching::{self, Event};

/// Discoveries are at least this far apart, however many reasons come.
pub(crate) const MIN_GAP: Duration = Duration::from_secs(1);

/// A resource's identity: group, version, plural.
type Key = (String, String, String);

/// Watches what the handlers select, as long as its tasks' token allows.
pub(crate) struct Observer {
    pub(crate) client: kube::Client,
    pub(crate) registry: Arc<Registry>,
    pub(crate) settings: Settings,
    pub(crate) patterns: Option<NamespacePatterns>,
    pub(crate) tasks: Tasks,
    pub(crate) ready: watch::Sender<bool>,
    pub(crate) common: Common,
}

/// One served resource.
struct Served {
    resource: Resource,
    selectors: Vec<Selector>,
    node: Tasks,
    /// Set when a watcher found the resource gone: restart it if it is still discovered.
    gone: Arc<AtomicBool>,
}

/// What one discovery means: the resources to serve with their selectors, and what to warn of.
#[derive(Debug, Default)]
struct Plan {
    resources: BTreeMap<Key, (Resource, Vec<Selector>)>,
    warnings: BTreeSet<String>,
}

impl Observer {
    pub(crate) async fn run(self) {
        let token = self.tasks.token().clone();
        let selectors = self.registry.selectors();
        let ready = Arc::new(self.ready.clone());
        if selectors.is_empty() {
            ready.send_replace(true);
            return;
        }
        let rescan = Arc::new(Notify::new());
        if !self.settings.scanning.disabled {
            self.watch_crds(&rescan);
        }
        let groups: Groups = selectors
            .iter()
            .map(|s| s.group().map(String::from))
            .collect();
        let mut served: BTreeMap<Key, Served> = BTreeMap::new();
        let mut warned = BTreeSet::new();
        let mut first = Some(ready);
        let mut failures = 0u32;
        loop {
            let started = Instant::now();
            let scanned = tokio::select! {
                _ = token.cancelled() => return,
                scanned = scanning::scan(&self.client, &groups) => scanned,
            };
            match scanned {
                Ok(resources) => {
                    failures = 0;
                    let plan = plan(&selectors, &self.registry, &resources);
                    for warning in plan.warnings.difference(&warned) {
                        tracing::warn!(target: "kopf::observer", "{warning}");
                    }
                    warned = plan.warnings;
                    self.reconcile(&mut served, plan.resources, first.take(), &rescan);
                }
                Err(error) => {
                    failures += 1;
                    tracing::warn!(target: "kopf::observer", %error, "discovery failed; retrying");
                    let delay = Duration::from_millis(200)
                        .saturating_mul(2u32.saturating_pow(failures.min(8)))
                        .min(Duration::from_secs(30));
                    if !sleep(&token, delay).await {
                        return;
                    }
                    continue;
                }
            }
            let periodically = async {
                if self.settings.scanning.disabled {
                    std::future::pending::<()>().await;
                }
                tokio::time::sleep(self.settings.scanning.interval).await;
            };
            tokio::select! {
                _ = token.cancelled() => return,
                _ = rescan.notified() => {}
                _ = periodically => {}
            }
            if !sleep(
                &token,
                (started + MIN_GAP).saturating_duration_since(Instant::now()),
            )
            .await
            {
                return;
            }
        }
    }

    /// Watches CRDs: any change (not the listing) asks for a discovery.
    fn watch_crds(&self, rescan: &Arc<Notify>) {
        let crds = Resource {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            plural: "customresourcedefinitions".into(),
            kind: "CustomResourceDefinition".into(),
            ..Resource::default()
        };
        let client = self.client.clone();
        let settings = self.settings.watching.clone();
        let token = self.tasks.token().clone();
        let rescan = rescan.clone();
        self.tasks.spawn(async move {
            let watched = watching::watch(&client, &crds, None, None, &settings, &token, |event| {
                if let Event::Changed(..) = event {
                    rescan.notify_one();
                }
            })
            .await;
            if let Err(error) = watched {
                tracing::info!(target: "kopf::observer", %error, "CRDs are not watched; resources are rediscovered periodically");
            }
        });
    }

    /// Makes what is served what the plan says.
    fn reconcile(
        &self,
        served: &mut BTreeMap<Key, Served>,
        plan: BTreeMap<Key, (Resource, Vec<Selector>)>,
        first: Option<Arc<watch::Sender<bool>>>,
        rescan: &Arc<Notify>,
    ) {
        served.retain(|key, old| {
            let keep = plan.get(key).is_some_and(|(resource, selectors)| {
                old.resource == *resource
                    && old.selectors == *selectors
                    && !old.gone.load(Ordering::SeqCst)
            });
            if !keep {
                tracing::info!(target: "kopf::observer", resource = %old.resource, "stopped serving");
                old.node.cancel(StopReason::ResourceGone);
            }
            keep
        });
        let readiness = first.map(|ready| {
            let watchers = plan.values().map(|(r, _)| self.namespaces(r).len()).sum();
            if watchers == 0 {
                ready.send_replace(true);
            }
            Arc::new(Readiness {
                pending: AtomicUsize::new(watchers),
                ready,
            })
        });
        for (key, (resource, selectors)) in plan {
            if served.contains_key(&key) {
                continue;
            }
            tracing::info!(target: "kopf::observer", %resource, selectors = ?selectors.iter().map(ToString::to_string).collect::<Vec<_>>(), "serving");
            let started = self.serve(resource, selectors, readiness.as_ref(), rescan);
            served.insert(key, started);
        }
    }

    /// The namespaces to watch the resource in (`None`: all of them, cluster-wide).
    fn namespaces(&self, resource: &Resource) -> Vec<Option<String>> {
        match (&self.patterns, resource.namespaced) {
            (Some(patterns), true) => match patterns.is_exact() {
                Some(names) => names.into_iter().map(Some).collect(),
                None => vec![None],
            },
            _ => vec![None],
        }
    }

    /// Starts the watchers of a resource, feeding one processor.
    fn serve(
        &self,
        resource: Resource,
        selectors: Vec<Selector>,
        readiness: Option<&Arc<Readiness>>,
        rescan: &Arc<Notify>,
    ) -> Served {
        let processor = Arc::new(Processor::new(
            self.client.clone(),
            resource.clone(),
            &self.registry,
            &selectors,
            self.settings.clone(),
            self.common.clone(),
        ));
        let node = self.tasks.child();
        let gone = Arc::new(AtomicBool::new(false));
        for namespace in self.namespaces(&resource) {
            let queue = Queue::new(
                processor.clone(),
                node.child(),
                self.settings.queueing.worker_limit,
                self.settings.queueing.idle_timeout,
            );
            let client = self.client.clone();
            let resource = resource.clone();
            let settings = self.settings.watching.clone();
            let patterns = self.patterns.clone();
            let mut listing = Listing(readiness.cloned());
            let gone = gone.clone();
            let rescan = rescan.clone();
            let token = node.token().clone();
            let label_selector = processor.label_selector();
            node.spawn(async move {
                let watched = watching::watch(
                    &client,
                    &resource,
                    namespace.as_deref(),
                    label_selector.as_deref(),
                    &settings,
                    &token,
                    |event| {
                        if let Event::ListingDone = event {
                            listing.done();
                            return;
                        }
                        let in_scope = match (&event, &patterns) {
                            (Event::Listed(o) | Event::Changed(_, o), Some(patterns)) => {
                                o["metadata"]["namespace"]
                                    .as_str()
                                    .is_none_or(|ns| patterns.matches(ns))
                            }
                            _ => true,
                        };
                        if in_scope {
                            queue.push(event);
                        }
                    },
                )
                .await;
                listing.done();
                if let Err(error) = watched {
                    tracing::info!(target: "kopf::observer", %error, "stopped watching");
                    gone.store(true, Ordering::SeqCst);
                    rescan.notify_one();
                }
            });
        }
        Served {
            resource,
            selectors,
            node,
            gone,
        }
    }
}

/// What to serve: every resource that some selector selects, with those selectors (in the
/// registry's order). Not served, with a warning: a name matching several resources
/// (ambiguous), a selector matching nothing (yet), and resources that a named selector
/// matches but that cannot be listed and watched, or patched when change handlers need it.
/// Selectors of many resources skip unsuitable ones silently: they select what can be served.
fn plan(selectors: &[Selector], registry: &Registry, resources: &[Resource]) -> Plan {
    let mut plan = Plan::default();
    for selector in selectors {
        let selected = selector.select(resources);
        if selected.is_empty() {
            plan.warnings.insert(format!(
                "no resource matches {selector}; its handlers wait for one (a CRD, perhaps)"
            ));
            continue;
        }
        if selector.is_specific() && selected.len() > 1 {
            let names: Vec<String> = selected.iter().map(ToString::to_string).collect();
            plan.warnings.insert(format!(
                "{selector} is ambiguous and will not be served (name its group): {}",
                names.join(", ")
            ));
            continue;
        }
        let patches = registry
            .changes_for(std::slice::from_ref(selector))
            .next()
            .is_some();
        for resource in selected {
            let unsuitable = if !resource.supports("list") || !resource.supports("watch") {
                Some("cannot be listed and watched")
            } else if patches && !resource.supports("patch") {
                Some("cannot be patched, as its change handlers need")
            } else {
                None
            };
            if let Some(why) = unsuitable {
                if selector.is_specific() {
                    plan.warnings
                        .insert(format!("{resource} {why}: it will not be served"));
                }
                continue;
            }
            let key = (
                resource.group.clone(),
                resource.version.clone(),
                resource.plural.clone(),
            );
            plan.resources
                .entry(key)
                .or_insert_with(|| (resource.clone(), Vec::new()))
                .1
                .push(selector.clone());
        }
    }
    plan
}

/// Counts down the first discovery's watchers; the operator is ready at zero.
struct Readiness {
    pending: AtomicUsize,
    ready: Arc<watch::Sender<bool>>,
}

/// One watcher's share of readiness: given once, when it has listed or when it ends.
struct Listing(Option<Arc<Readiness>>);

impl Listing {
    fn done(&mut self) {
        if let Some(readiness) = self.0.take()
            && readiness.pending.fetch_sub(1, Ordering::SeqCst) == 1
        {
            readiness.ready.send_replace(true);
        }
    }
}

/// Sleeps unless cancelled; `false` when cancelled.
async fn sleep(token: &CancellationToken, delay: Duration) -> bool {
    tokio::select! {
        _ = token.cancelled() => false,
        _ = tokio::time::sleep(delay) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::{ChangeHandler, EventHandler};

    fn resource(group: &str, plural: &str, verbs: &[&str]) -> Resource {
        Resource {
            group: group.into(),
            version: "v1".into(),
            plural: plural.into(),
            kind: plural.trim_end_matches('s').into(),
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            categories: vec!["all".into()],
            preferred: true,
            ..Resource::default()
        }
    }

    fn keys(plan: &Plan) -> Vec<(String, Vec<String>)> {
        plan.resources
            .values()
            .map(|(r, s)| (r.to_string(), s.iter().map(ToString::to_string).collect()))
            .collect()
    }

    #[test]
    fn one_entry_per_resource_with_every_selector_that_matched_it() {
        let resources = [
            resource("kopf.dev", "kopfexamples", &["list", "watch", "patch"]),
            resource("", "pods", &["list", "watch", "patch"]),
            resource("", "bindings", &["create"]),
            resource("", "readonlies", &["list", "watch"]),
        ];
        let noop = |_| async { Ok(None) };
        let registry = Registry::new()
            .with(EventHandler::on_event(
                Selector::category("all"),
                "all",
                noop,
            ))
            .with(ChangeHandler::on_create(
                Selector::named("kopfexample"),
                "one",
                noop,
            ))
            .with(ChangeHandler::on_create(
                Selector::category("all"),
                "all-changes",
                noop,
            ))
            .with(EventHandler::on_event(
                Selector::named("bindings"),
                "bad",
                noop,
            ))
            .with(EventHandler::on_event(
                Selector::named("nothing"),
                "none",
                noop,
            ));
        let plan = plan(&registry.selectors(), &registry, &resources);
        assert_eq!(
            keys(&plan),
            [
                ("v1/pods".to_string(), vec!["category all".to_string()]),
                (
                    "kopfexamples.v1.kopf.dev".to_string(),
                    vec!["kopfexample".to_string(), "category all".to_string()]
                ),
            ]
        );
        assert_eq!(
            plan.warnings.into_iter().collect::<Vec<_>>(),
            [
                "no resource matches nothing; its handlers wait for one (a CRD, perhaps)",
                "v1/bindings cannot be listed and watched: it will not be served",
            ]
        );
    }
}
