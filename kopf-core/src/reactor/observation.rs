//! The observer: which resources the handlers' selectors match, served once each with the
//! handlers of every selector that matched it, in the namespaces that the operator serves, kept
//! up to date as resources and namespaces come and go (Kopf's resource and namespace
//! observers).
//!
//! Discovery runs at the start; again when a CRD changes (the observer watches
//! `customresourcedefinitions`, as Kopf does), when a served resource stops being served, and
//! every `settings.scanning.interval` for what CRDs do not reveal (aggregated APIs, missed
//! events, no permission to watch CRDs); never twice within [`MIN_GAP`]. Each discovery is
//! compared with what is served: a newly matched resource gets its watchers, a resource no
//! longer matched has its subtree of the task tree cancelled, and a resource whose description
//! or set of selectors changed is restarted.
//!
//! Where a namespaced resource is watched depends on the operator's [`Scope`]: cluster-wide
//! (`-A`); in each namespace named (`-n ns1 -n ns2`); or, for globs and negations, in each
//! existing namespace that the patterns match: the observer lists `namespaces` before the first
//! discovery and then watches them, starting a watcher in a matching namespace when it appears
//! and cancelling that watcher's subtree when the namespace is deleted. Without permission to
//! list namespaces (or with scanning disabled), patterns fall back to one cluster-wide watcher
//! whose events are filtered by the patterns (Kopf serves only the patterns' plain names then,
//! which serves nothing for globs). Cluster-scoped resources are always watched cluster-wide.
//!
//! Invariants:
//! 1. At most one set of watchers (one per namespace) and one `Processor` per resource: two
//!    selectors matching one resource share them, so the object's state is written by one
//!    worker, with all the handlers.
//! 2. At most one watcher per (resource, namespace): each in its own node of the task tree,
//!    under its resource's node.
//! 3. Readiness counts the watchers of the first discovery only (with the namespaces of the
//!    first namespace listing): the operator is ready when each has listed once or ended.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::aiokits::budget::Budget;
use crate::aiokits::tasks::{StopReason, Tasks};
use crate::clients::scanning::{self, Groups};
use crate::clients::watching::{self, Event, Selection};
use crate::configs::settings::Settings;
use crate::engines::ownership::ShardMembers;
use crate::engines::pausing::Pause;
use crate::intents::registry::Registry;
use crate::reactor::processing::{Common, Processor};
use crate::reactor::queueing::{KnownObjects, Queue};
use crate::structs::namespaces::{NamespacePatterns, ObservedNamespaces};
use crate::structs::resources::{Resource, Selector};
use crate::structs::shards::ShardSelectors;

/// Discoveries are at least this far apart, however many reasons come.
pub(crate) const MIN_GAP: Duration = Duration::from_secs(1);

/// A resource's identity: group, version, plural.
type Key = (String, String, String);

/// The objects that the watchers knew before a pause, by resource and namespace.
type Stash = BTreeMap<(Key, Option<String>), KnownObjects>;

/// Watches what the handlers select, as long as its tasks' token allows.
pub(crate) struct Observer {
    pub(crate) client: kube::Client,
    pub(crate) registry: Arc<Registry>,
    pub(crate) settings: Settings,
    pub(crate) patterns: Option<NamespacePatterns>,
    pub(crate) tasks: Tasks,
    pub(crate) ready: watch::Sender<bool>,
    /// Whether the operator is paused in favour of a peer: then nothing is served (its
    /// resources' subtrees are cancelled), and everything is discovered and listed again on
    /// resuming.
    pub(crate) pause: Pause,
    /// The shard selectors of the served resources' lists and watches.
    pub(crate) shards: Arc<ShardSelectors>,
    pub(crate) common: Common,
    /// The budget of objects in flight that every watcher's share is of.
    pub(crate) in_flight: Arc<Budget>,
}

/// Where namespaced resources are watched.
enum Scope {
    /// All namespaces: one cluster-wide watcher per resource.
    Cluster,
    /// Plain names: one watcher per name, whether the namespace exists or not.
    Named(Vec<String>),
    /// Globs and negations: one watcher per matching namespace, as the namespace watcher sees
    /// them come and go.
    Observed(watch::Receiver<BTreeSet<String>>),
    /// Globs and negations without namespace observation: one cluster-wide watcher, its
    /// events filtered by the patterns.
    Filtered,
}

impl Scope {
    /// The namespaces to watch the resource in (`None`: cluster-wide).
    fn namespaces(&self, resource: &Resource) -> BTreeSet<Option<String>> {
        match self {
            _ if !resource.namespaced => BTreeSet::from([None]),
            Scope::Cluster | Scope::Filtered => BTreeSet::from([None]),
            Scope::Named(names) => names.iter().cloned().map(Some).collect(),
            Scope::Observed(served) => served.borrow().iter().cloned().map(Some).collect(),
        }
    }
}

/// One served resource.
struct Served {
    resource: Resource,
    selectors: Vec<Selector>,
    processor: Arc<Processor>,
    node: Tasks,
    /// The watchers by namespace (`None`: cluster-wide), each its own node under `node`.
    watchers: BTreeMap<Option<String>, Tasks>,
    /// The objects that each watcher's queue knows, by namespace: handed to the queues that
    /// watch again after a pause.
    known: BTreeMap<Option<String>, KnownObjects>,
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
        let Some(scope) = self.scope().await else {
            return;
        };
        let mut namespace_changes = match &scope {
            Scope::Observed(served) => Some(served.clone()),
            _ => None,
        };
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
        // The next discovery, when one is due; none starts before `earliest`.
        let mut due = Some(Instant::now());
        let mut earliest = Instant::now();
        let mut pause = self.pause.clone();
        // What was served before a pause, until its daemons and timers have ended.
        let mut paused: Vec<Arc<Processor>> = Vec::new();
        // The objects known before a pause, by resource and namespace, until served again.
        let mut stashed: Stash = BTreeMap::new();
        loop {
            let discovery_due = async {
                match due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let namespaces_changed = async {
                let changed = match namespace_changes.as_mut() {
                    Some(changes) => changes.changed().await.is_ok(),
                    None => false,
                };
                if !changed {
                    // No namespaces to follow, or their watcher has ended (a stop).
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                _ = token.cancelled() => return,
                _ = namespaces_changed => self.follow_namespaces(&mut served, &scope, &rescan),
                _ = rescan.notified() => {
                    due = Some(due.map_or(earliest, |at| at.min(earliest)));
                }
                now_paused = pause.changed() => {
                    if now_paused {
                        for (key, old) in std::mem::take(&mut served) {
                            tracing::info!(target: "kopf::observer", resource = %old.resource, "stopped serving while paused");
                            old.node.cancel(StopReason::OperatorPaused);
                            for (namespace, known) in old.known {
                                stashed.insert((key.clone(), namespace), known.hand_over());
                            }
                            paused.push(old.processor);
                        }
                        due = None;
                    } else {
                        // Daemons and timers start again only after their stopped instances ended.
                        let ended = futures::future::join_all(paused.drain(..).map(|p| p.all_daemons_ended()));
                        tokio::select! {
                            _ = token.cancelled() => return,
                            _ = ended => {}
                        }
                        // At once, not after the gap since the last discovery: a resume is
                        // rare (paced by peering), and a peer's exit should be taken over
                        // without a delay.
                        due = Some(Instant::now());
                    }
                }
                _ = discovery_due, if !pause.is_paused() => {
                    let started = Instant::now();
                    earliest = started + MIN_GAP;
                    let scanned = tokio::select! {
                        _ = token.cancelled() => return,
                        scanned = scanning::scan(&self.client, &groups) => scanned,
                    };
                    due = match scanned {
                        Ok(resources) => {
                            failures = 0;
                            let plan = plan(&selectors, &self.registry, &resources);
                            for warning in plan.warnings.difference(&warned) {
                                tracing::warn!(target: "kopf::observer", "{warning}");
                            }
                            warned = plan.warnings;
                            self.reconcile(&mut served, plan.resources, &scope, first.take(), &rescan, &mut stashed);
                            self.forget_unserved(&mut stashed);
                            (!self.settings.scanning.disabled)
                                .then(|| (started + self.settings.scanning.interval).max(earliest))
                        }
                        Err(error) => {
                            failures += 1;
                            tracing::warn!(target: "kopf::observer", %error, "discovery failed; retrying");
                            Some(Instant::now() + scanning::retry_delay(failures))
                        }
                    };
                }
            }
        }
    }

    /// Where namespaced resources are watched; for patterns, after listing the namespaces.
    /// `None` if the operator stopped meanwhile.
    async fn scope(&self) -> Option<Scope> {
        let Some(patterns) = &self.patterns else {
            return Some(Scope::Cluster);
        };
        if let Some(names) = patterns.is_exact() {
            return Some(Scope::Named(names));
        }
        if self.settings.scanning.disabled {
            return Some(Scope::Filtered);
        }
        let token = self.tasks.token();
        let mut failures = 0u32;
        loop {
            let listed = tokio::select! {
                _ = token.cancelled() => return None,
                listed = scanning::list_namespaces(&self.client, &self.settings.watching) => listed,
            };
            match listed {
                Ok(namespaces) => {
                    let mut observed = ObservedNamespaces::new(patterns.clone());
                    for namespace in &namespaces {
                        observed.listed(namespace);
                    }
                    observed.listing_done();
                    tracing::info!(target: "kopf::observer", namespaces = ?observed.served(), "serving the namespaces that the patterns match");
                    let (sender, receiver) = watch::channel(observed.served().clone());
                    self.watch_namespaces(observed, sender);
                    return Some(Scope::Observed(receiver));
                }
                Err(kube::Error::Api(status)) if status.code == 403 => {
                    tracing::warn!(target: "kopf::observer", message = %status.message, "Not enough permissions to list namespaces: watching cluster-wide and filtering by the namespace patterns instead; grant `list` and `watch` on namespaces to watch only the matching ones");
                    return Some(Scope::Filtered);
                }
                Err(error) => {
                    failures += 1;
                    tracing::warn!(target: "kopf::observer", %error, "listing namespaces failed; retrying");
                    if !sleep(token, scanning::retry_delay(failures)).await {
                        return None;
                    }
                }
            }
        }
    }

    /// Watches namespaces: the ones served now go to `served` whenever they change.
    fn watch_namespaces(
        &self,
        observed: ObservedNamespaces,
        served: watch::Sender<BTreeSet<String>>,
    ) {
        let client = self.client.clone();
        let settings = self.settings.watching.clone();
        let token = self.tasks.token().clone();
        self.tasks.spawn(async move {
            let watched =
                watching::watch_namespaces(&client, observed, &settings, &token, |namespaces| {
                    served.send_replace(namespaces.clone());
                })
                .await;
            if let Err(error) = watched {
                tracing::warn!(target: "kopf::observer", %error, "namespaces are not watched: namespaces created or deleted from now on are not noticed");
                // Keeps the last known namespaces served until the operator stops.
                token.cancelled().await;
            }
        });
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
            let all = Selection::default();
            let watched = watching::watch(&client, &crds, None, all, &settings, &token, |event| {
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

    /// Forgets the memos of the objects known before a pause whose resource or namespace is
    /// not served again: nothing will tell that they are gone.
    fn forget_unserved(&self, stashed: &mut Stash) {
        for (_, known) in std::mem::take(stashed) {
            for uid in known.uids() {
                self.common.memos.forget(&uid);
            }
        }
    }

    /// Makes what is served what the plan says; the watchers of a resource served again after
    /// a pause know what was known before it (`stashed`).
    fn reconcile(
        &self,
        served: &mut BTreeMap<Key, Served>,
        plan: BTreeMap<Key, (Resource, Vec<Selector>)>,
        scope: &Scope,
        first: Option<Arc<watch::Sender<bool>>>,
        rescan: &Arc<Notify>,
        stashed: &mut Stash,
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
            let watchers = plan.values().map(|(r, _)| scope.namespaces(r).len()).sum();
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
            let mut started = self.serve(resource, selectors);
            for namespace in scope.namespaces(&started.resource) {
                let listing = Listing(readiness.clone());
                let known = stashed.remove(&(key.clone(), namespace.clone()));
                self.start_watcher(&mut started, namespace, listing, rescan, known);
            }
            served.insert(key, started);
        }
    }

    /// Makes the watchers of every served resource those of the namespaces served now.
    fn follow_namespaces(
        &self,
        served: &mut BTreeMap<Key, Served>,
        scope: &Scope,
        rescan: &Arc<Notify>,
    ) {
        for resource in served.values_mut() {
            let wanted = scope.namespaces(&resource.resource);
            resource.watchers.retain(|namespace, node| {
                let keep = wanted.contains(namespace);
                if !keep {
                    tracing::info!(target: "kopf::observer", resource = %resource.resource, namespace = namespace.as_deref(), "stopped watching in a deleted namespace");
                    node.cancel(StopReason::NamespaceDeleted);
                }
                keep
            });
            resource
                .known
                .retain(|namespace, _| wanted.contains(namespace));
            for namespace in wanted {
                if !resource.watchers.contains_key(&namespace) {
                    tracing::info!(target: "kopf::observer", resource = %resource.resource, namespace = namespace.as_deref(), "watching in a new namespace");
                    self.start_watcher(resource, namespace, Listing(None), rescan, None);
                }
            }
        }
    }

    /// A served resource without watchers yet: its processor and its node of the task tree.
    fn serve(&self, resource: Resource, selectors: Vec<Selector>) -> Served {
        let processor = Arc::new(Processor::new(
            self.client.clone(),
            resource.clone(),
            &self.registry,
            &selectors,
            self.settings.clone(),
            self.common.clone(),
        ));
        if let Some(ownership) = &self.common.ownership {
            let members: Arc<dyn ShardMembers> = processor.clone();
            ownership.register(Arc::downgrade(&members));
        }
        Served {
            resource,
            selectors,
            processor,
            node: self.tasks.child(),
            watchers: BTreeMap::new(),
            known: BTreeMap::new(),
            gone: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Starts the resource's watcher in one namespace (`None`: cluster-wide), feeding the
    /// resource's processor through a queue of its own, which knows the objects `known`
    /// (those of the watcher stopped by a pause).
    fn start_watcher(
        &self,
        served: &mut Served,
        namespace: Option<String>,
        mut listing: Listing,
        rescan: &Arc<Notify>,
        known: Option<KnownObjects>,
    ) {
        let node = served.node.child();
        let mut queue = Queue::new(
            served.processor.clone(),
            node.child(),
            self.settings.queueing.worker_limit,
            self.settings.queueing.idle_timeout,
            self.in_flight.share(),
        );
        if let Some(known) = known {
            queue = queue.knowing(known);
        }
        served.known.insert(namespace.clone(), queue.known());
        let client = self.client.clone();
        let resource = served.resource.clone();
        let settings = self.settings.watching.clone();
        let patterns = self.patterns.clone();
        let gone = served.gone.clone();
        let rescan = rescan.clone();
        let token = node.token().clone();
        let label_selector = served.processor.label_selector();
        let shard = self.shards.of(&served.resource).cloned();
        let ownership = self.common.ownership.clone();
        let watched_in = namespace.clone();
        let pause = self.pause.clone();
        node.spawn(async move {
            let mut report = |event: Event| {
                if let Event::ListingDone = event {
                    listing.done();
                }
                if pause.is_paused() {
                    // Paused meanwhile: this watcher is about to be cancelled.
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
            };
            let budget = queue.budget();
            // With assigned shards, the held shards' objects: listed again each time the held
            // shards change. Otherwise, the resource's static shard selector, if any.
            let mut held = ownership.as_ref().map(|o| o.subscribe());
            let watched = loop {
                if let Some(held) = &mut held {
                    held.borrow_and_update();
                }
                let shard = match &ownership {
                    None => shard.clone(),
                    Some(ownership) => ownership.selector(),
                };
                let changed = async {
                    let changed = match &mut held {
                        Some(held) => held.changed().await.is_ok(),
                        None => false,
                    };
                    if !changed {
                        std::future::pending::<()>().await;
                    }
                };
                if ownership.is_some() && shard.is_none() {
                    // No shard here (yet): nothing to list, nothing to wait for.
                    report(Event::ListingDone);
                    tokio::select! {
                        _ = token.cancelled() => break Ok(()),
                        _ = changed => continue,
                    }
                }
                let selection = Selection {
                    labels: label_selector.as_deref(),
                    shard: shard.as_ref(),
                    budget: Some(budget),
                    ..Selection::default()
                };
                let watched = watching::watch(
                    &client,
                    &resource,
                    watched_in.as_deref(),
                    selection,
                    &settings,
                    &token,
                    &mut report,
                );
                tokio::select! {
                    watched = watched => break watched,
                    _ = changed => {}
                }
            };
            listing.done();
            if let Err(error) = watched {
                tracing::info!(target: "kopf::observer", %error, "stopped watching");
                gone.store(true, Ordering::SeqCst);
                rescan.notify_one();
            }
        });
        served.watchers.insert(namespace, node);
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
    use crate::intents::handlers::ChangeHandler;
    use crate::intents::handlers::EventHandler;

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
