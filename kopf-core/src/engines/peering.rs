//! Kopf's peering: operators serving the same resources keep entries in a shared
//! `KopfPeering` (one per served namespace) or `ClusterKopfPeering` object, and each pauses
//! while a live peer of a higher priority exists (all pause while peers of the same priority
//! do, unless this operator has shard selectors: sharded operators of the same priority split
//! the objects and keep running, as in Kopf 1.45). The entries' format and the decision are
//! in [`crate::configs::peering`].
//!
//! For each peering object (both API groups, `kopf.dev` and the legacy `zalando.org`, when
//! both CRDs exist), two tasks run in the operator's tree, never paused themselves:
//! - a watcher, which hands every new state of the object to the keeper;
//! - a keeper, which touches this operator's entry at once and then every
//!   `lifetime - rand(5..=10)` seconds, judges each new state of the object (pausing,
//!   resuming, nulling the entries of dead peers), and, while paused, touches again when the
//!   earliest of its blockers expires, so that the object's next state unpauses it; an
//!   object not found at a touch is touched again as soon as it appears.
//!
//! A namespaced peering in the namespaces that patterns match (not plain names) follows the
//! namespaces as they come and go: a watch of `namespaces` adds and removes the pairs of tasks.
//!
//! Invariants:
//! 1. The operator is paused while any peering object says so: one toggle per object, joined
//!    into the one [`Pause`] that the observer obeys.
//! 2. With `mandatory`, each toggle starts paused and stays so until its object shows no
//!    conflict: a missing CRD or object keeps the operator paused.
//! 3. The operator's own entry is removed ([`Peering::disappear`]) only after its tasks have
//!    ended, at a graceful stop.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng as _;
use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::aiokits::tasks::{StopReason, Tasks};
use crate::clients::patching::{self, Target};
use crate::clients::scanning;
use crate::clients::watching::{self, Event, Selection};
use crate::configs::peering::{self, Judgement, Peer};
use crate::configs::settings::{PeeringSettings, Settings, WatchingSettings};
use crate::engines::pausing::Pause;
use crate::helpers::deadlines;
use crate::helpers::sync::lock;
use crate::structs::bodies::Body;
use crate::structs::namespaces::{NamespacePatterns, ObservedNamespaces};
use crate::structs::patch::Patch;
use crate::structs::resources::Resource;

/// The API groups of Kopf's peering CRDs: the current one and the legacy one (before 1.29).
const GROUPS: [&str; 2] = ["kopf.dev", "zalando.org"];

/// The pause toggles of the peering objects (by [`Place::key`]), joined with any(); while
/// there are none (a mandatory peering whose CRD is missing), the initial state.
#[derive(Debug)]
struct Toggles {
    initial: bool,
    each: Mutex<BTreeMap<String, bool>>,
    paused: watch::Sender<bool>,
}

impl Toggles {
    fn new(paused: bool) -> Toggles {
        Toggles {
            initial: paused,
            each: Mutex::new(BTreeMap::new()),
            paused: watch::Sender::new(paused),
        }
    }

    /// Adds the toggle of a peering object, in this state.
    fn add(&self, key: &str, paused: bool) {
        self.update(|each| {
            each.insert(key.to_string(), paused);
        });
    }

    /// Removes the toggle of a peering object no longer kept (its namespace is gone).
    fn remove(&self, key: &str) {
        self.update(|each| {
            each.remove(key);
        });
    }

    fn get(&self, key: &str) -> bool {
        lock(&self.each).get(key).copied().unwrap_or(self.initial)
    }

    fn set(&self, key: &str, paused: bool) {
        self.update(|each| {
            if let Some(toggle) = each.get_mut(key) {
                *toggle = paused;
            }
        });
    }

    fn update(&self, change: impl FnOnce(&mut BTreeMap<String, bool>)) {
        let mut each = lock(&self.each);
        change(&mut each);
        let any = if each.is_empty() {
            self.initial
        } else {
            each.values().any(|p| *p)
        };
        self.paused.send_if_modified(|current| {
            let changed = *current != any;
            *current = any;
            changed
        });
    }
}

/// One peering object: its resource, and its namespace when namespaced.
#[derive(Debug, Clone)]
struct Place {
    resource: Resource,
    namespace: Option<String>,
}

impl Place {
    /// What tells this peering object from the others of the operator.
    fn key(&self) -> String {
        format!(
            "{}/{}",
            self.resource,
            self.namespace.as_deref().unwrap_or_default()
        )
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "in {namespace:?}"),
            None => f.write_str("cluster-wide"),
        }
    }
}

/// This operator's peering: its identity and the peering objects it keeps its entry in.
pub(crate) struct Peering {
    client: kube::Client,
    identity: String,
    settings: PeeringSettings,
    watching: WatchingSettings,
    /// With shard selectors or assigned shards: peers of the same priority keep running.
    sharded: bool,
    backoffs: Vec<Duration>,
    /// The served namespaces' patterns: followed as namespaces come and go, when the peering
    /// is namespaced and they are not plain names.
    patterns: Option<NamespacePatterns>,
    /// Whether the peering objects were found (at the start, or later for a mandatory peering
    /// whose CRD was missing).
    begun: AtomicBool,
    /// The peering objects kept now, by [`Place::key`].
    places: Mutex<BTreeMap<String, Kept>>,
    toggles: Toggles,
    /// What each peering object said last, by [`Place::key`]: `None` until it was judged
    /// once (or found missing), else whether another operator lives in it.
    heard: Mutex<BTreeMap<String, Option<bool>>>,
    /// Paused while a peering object has not been judged yet.
    unsettled: watch::Sender<bool>,
    /// The peers with unreadable entries warned of, by [`Place::key`].
    unreadable: Mutex<BTreeMap<String, BTreeSet<String>>>,
}

/// A peering object kept: its watcher and keeper run in `node`.
struct Kept {
    place: Place,
    node: Tasks,
}

impl Peering {
    /// Starts the peering that the settings ask for, in the operator's tree; `None` (and a
    /// pause that never comes) when standalone, as asked or for lack of a CRD. Each namespace
    /// that the patterns serve (cluster-wide without patterns) gets its own `KopfPeering`
    /// unless the peering is cluster-wide. A mandatory peering whose CRD is missing stays
    /// paused and looks for the CRD again every `settings.scanning.interval`.
    pub(crate) async fn start(
        client: &kube::Client,
        settings: &Settings,
        patterns: Option<&NamespacePatterns>,
        tasks: &Tasks,
    ) -> (Pause, Option<Arc<Peering>>) {
        let peering = &settings.peering;
        if peering.standalone {
            return (Pause::never(), None);
        }
        let engine = Arc::new(Peering {
            client: client.clone(),
            identity: identity(),
            settings: peering.clone(),
            watching: settings.watching.clone(),
            sharded: !settings.watching.shard_selectors.is_empty() || peering.sharding.is_some(),
            backoffs: settings.networking.error_backoffs.clone(),
            patterns: patterns.cloned(),
            begun: AtomicBool::new(false),
            places: Mutex::new(BTreeMap::new()),
            toggles: Toggles::new(peering.mandatory),
            heard: Mutex::new(BTreeMap::new()),
            unsettled: watch::Sender::new(false),
            unreadable: Mutex::new(BTreeMap::new()),
        });
        let pause = Pause::following(engine.toggles.paused.subscribe());
        let token = tasks.token().clone();
        let found = tokio::select! {
            _ = token.cancelled() => return (Pause::never(), None),
            found = places(client, settings, patterns) => found,
        };
        if !found.resources.is_empty() {
            engine.begin(found, tasks);
            return (pause, Some(engine));
        }
        let name = &peering.name;
        if !peering.mandatory {
            tracing::warn!(target: "kopf::peering", peering = ?name, "Default peering object is not found, falling back to the standalone mode.");
            return (Pause::never(), None);
        }
        tracing::error!(target: "kopf::peering", peering = ?name, "The peering CRD ({}) is not found: staying paused, as the mandatory peering {name:?} asks, until it appears; create it (see the `crd` subcommand) or run with --standalone.", plural(settings, patterns));
        let (settings, patterns) = (settings.clone(), patterns.cloned());
        let (late, node) = (engine.clone(), tasks.clone());
        tasks.spawn(async move {
            loop {
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = tokio::time::sleep(settings.scanning.interval) => {}
                }
                let found = tokio::select! {
                    _ = token.cancelled() => return,
                    found = places(&late.client, &settings, patterns.as_ref()) => found,
                };
                if !found.resources.is_empty() {
                    tracing::info!(target: "kopf::peering", peering = ?late.settings.name, "The peering CRD has appeared: peering.");
                    late.begin(found, &node);
                    return;
                }
            }
        });
        (pause, Some(engine))
    }

    /// Starts keeping the entry in these peering objects, and watching them; and, for a
    /// namespaced peering in the namespaces that patterns match, in those of the namespaces
    /// that come later (and no more in those that go), as Kopf does.
    fn begin(self: &Arc<Self>, found: Found, tasks: &Tasks) {
        if self.begun.swap(true, Ordering::SeqCst) {
            return;
        }
        tracing::debug!(target: "kopf::peering", peering = ?self.settings.name, identity = %self.identity, "peering as {}", self.identity);
        for place in found.places {
            self.keep_in(place, tasks);
        }
        let followed = found.resources.iter().any(|r| r.namespaced)
            && self
                .patterns
                .as_ref()
                .is_none_or(|patterns| patterns.is_exact().is_none());
        if followed {
            self.follow_namespaces(found.resources, tasks);
        }
    }

    /// Starts keeping the entry in this peering object (unless it is kept already).
    fn keep_in(self: &Arc<Self>, place: Place, tasks: &Tasks) {
        let key = place.key();
        let mut places = lock(&self.places);
        if places.contains_key(&key) {
            return;
        }
        self.toggles.add(&key, self.settings.mandatory);
        self.hear(&key, None);
        let node = tasks.child();
        let (states, receiver) = watch::channel(None);
        let token = node.token();
        node.spawn(self.clone().watch(place.clone(), states, token.clone()));
        node.spawn(self.clone().keep(place.clone(), receiver, token.clone()));
        places.insert(key, Kept { place, node });
    }

    /// Keeps the entry in the peering objects of the namespaces served now, and no more in
    /// the others (whose namespaces are gone or no longer match).
    fn follow(self: &Arc<Self>, resources: &[Resource], served: &BTreeSet<String>, tasks: &Tasks) {
        let gone: Vec<Kept> = {
            let mut places = lock(&self.places);
            let keys: Vec<String> = places
                .iter()
                .filter(|(_, kept)| {
                    kept.place
                        .namespace
                        .as_ref()
                        .is_some_and(|namespace| !served.contains(namespace))
                })
                .map(|(key, _)| key.clone())
                .collect();
            keys.iter().filter_map(|key| places.remove(key)).collect()
        };
        for kept in gone {
            let name = &self.settings.name;
            tracing::debug!(target: "kopf::peering", peering = ?name, "no more peering {}: the namespace is gone or not served", kept.place);
            kept.node.cancel(StopReason::NamespaceDeleted);
            let was_paused = *self.toggles.paused.borrow();
            self.toggles.remove(&kept.place.key());
            self.forget(&kept.place.key());
            if was_paused && !*self.toggles.paused.borrow() {
                tracing::info!(target: "kopf::peering", peering = ?name, "Resuming operations after the pause: the peering {} is gone.", kept.place);
            }
        }
        for namespace in served {
            for resource in resources {
                let place = Place {
                    resource: resource.clone(),
                    namespace: Some(namespace.clone()),
                };
                self.keep_in(place, tasks);
            }
        }
    }

    /// Watches the namespaces, and follows those that the patterns match.
    fn follow_namespaces(self: &Arc<Self>, resources: Vec<Resource>, tasks: &Tasks) {
        let patterns = match &self.patterns {
            Some(patterns) => patterns.clone(),
            None => NamespacePatterns::parse(&["*".to_string()])
                .expect("a lone glob is a valid pattern"),
        };
        let observed = ObservedNamespaces::new(patterns);
        let (peering, node) = (self.clone(), tasks.clone());
        let token = tasks.token().clone();
        tasks.spawn(async move {
            let client = peering.client.clone();
            let watched =
                watching::watch_namespaces(&client, observed, &peering.watching, &token, |served| {
                    peering.follow(&resources, served, &node);
                })
                .await;
            if let Err(error) = watched {
                tracing::warn!(target: "kopf::peering", peering = ?peering.settings.name, %error, "the namespaces are not followed any more: the peering stays in those found so far");
                token.cancelled().await;
            }
        });
    }

    /// The peering objects kept now.
    fn places(&self) -> Vec<Place> {
        lock(&self.places)
            .values()
            .map(|kept| kept.place.clone())
            .collect()
    }

    /// Paused until every peering object has been judged once (or found missing): until then
    /// this operator cannot know whether a peer of a higher priority lives, so it must not
    /// write what only the active operator writes (the webhook configurations), even though
    /// a peering that is not mandatory lets it serve meanwhile, as in Kopf.
    pub(crate) fn settling(&self) -> Pause {
        Pause::following(self.unsettled.subscribe())
    }

    /// Whether another operator lived in any peering object when it was last judged (a peer
    /// killed recently lives until its entry expires); `false` before any judgement.
    pub(crate) fn others_alive(&self) -> bool {
        lock(&self.heard).values().any(|alive| *alive == Some(true))
    }

    /// Records what a peering object said (`None`: nothing yet).
    fn hear(&self, key: &str, alive: Option<bool>) {
        let mut heard = lock(&self.heard);
        heard.insert(key.to_string(), alive);
        self.settle(&heard);
    }

    /// Says whether a peering object is still unheard, if that changed.
    fn settle(&self, heard: &BTreeMap<String, Option<bool>>) {
        let unsettled = heard.values().any(Option::is_none);
        self.unsettled.send_if_modified(|current| {
            let changed = *current != unsettled;
            *current = unsettled;
            changed
        });
    }

    /// Forgets a peering object no longer kept.
    fn forget(&self, key: &str) {
        let mut heard = lock(&self.heard);
        heard.remove(key);
        self.settle(&heard);
    }

    /// Marks a peering object as judged with no peers, unless it was judged already: it is
    /// missing, or it will not be watched any more.
    fn hear_nothing(&self, key: &str) {
        let judged = lock(&self.heard).get(key).copied().flatten().is_some();
        if !judged {
            self.hear(key, Some(false));
        }
    }

    /// Removes this operator's entry from every peering object (a `null` merge patch), within
    /// `timeout`: at a graceful stop, after the operator's tasks have ended, so that peers
    /// take over at once. Failures are logged and ignored.
    pub(crate) async fn disappear(&self, timeout: Duration) {
        let never = CancellationToken::new();
        let places = self.places();
        let removals = places
            .iter()
            .map(|place| self.write(place, peering::removal([self.identity.as_str()]), &never));
        if tokio::time::timeout(timeout, futures::future::join_all(removals))
            .await
            .is_err()
        {
            tracing::warn!(target: "kopf::peering", peering = ?self.settings.name, "the peering entry was not removed within {timeout:?}: peers take over when it expires");
        }
    }

    /// Hands every new state of the peering object to the keeper (an empty one when it is
    /// deleted).
    async fn watch(
        self: Arc<Self>,
        place: Place,
        states: watch::Sender<Option<Arc<Body>>>,
        token: CancellationToken,
    ) {
        let place = &place;
        let name = self.settings.name.as_str();
        let watched = watching::watch(
            &self.client,
            &place.resource,
            place.namespace.as_deref(),
            Selection::default(),
            &self.watching,
            &token,
            |event| {
                let (object, deleted) = match &event {
                    Event::Listed(object) => (object, false),
                    Event::Changed(kind, object) => (object, *kind == "DELETED"),
                    Event::Vanished(object) => (object, true),
                    Event::ListingDone => return,
                };
                if object["metadata"]["name"].as_str() != Some(name) {
                    return;
                }
                let state = if deleted {
                    Arc::new(Body::from(json!({})))
                } else {
                    object.clone()
                };
                states.send_replace(Some(state));
            },
        )
        .await;
        if let Err(error) = watched {
            tracing::warn!(target: "kopf::peering", peering = ?name, %error, "the peering object {place} is not watched any more");
            // Nothing more will be heard of it: as far as this operator knows, no peers.
            self.hear_nothing(&place.key());
            token.cancelled().await;
        }
    }

    /// Touches this operator's entry, judges the object's states, and touches again when due.
    async fn keep(
        self: Arc<Self>,
        place: Place,
        mut states: watch::Receiver<Option<Arc<Body>>>,
        token: CancellationToken,
    ) {
        let place = &place;
        let mut keepalive = Instant::now();
        let mut recheck: Option<Instant> = None;
        // The object was not found at the last touch: touched again as soon as it appears.
        let mut missing = false;
        loop {
            let due = recheck.map_or(keepalive, |at| at.min(keepalive));
            tokio::select! {
                _ = token.cancelled() => return,
                changed = states.changed() => {
                    if changed.is_err() {
                        token.cancelled().await;
                        return;
                    }
                    let state = states.borrow_and_update().clone();
                    if let Some(state) = state {
                        if missing && state.get("metadata").is_some() {
                            keepalive = Instant::now();
                        }
                        recheck = self.judge(place, &state, &token).await;
                    }
                }
                _ = tokio::time::sleep_until(due) => {
                    let now = Instant::now();
                    if recheck.is_some_and(|at| at <= now) {
                        recheck = None;
                    }
                    let touch = peering::touch(
                        &self.identity,
                        self.settings.priority,
                        self.settings.lifetime,
                        OffsetDateTime::now_utc(),
                    );
                    let found = self.write(place, touch, &token).await;
                    missing = !found;
                    if missing {
                        self.hear_nothing(&place.key());
                    }
                    if !self.settings.stealth || !found {
                        let result = if found { "ok" } else { "not found" };
                        tracing::debug!(target: "kopf::peering", peering = ?self.settings.name, "Keep-alive in {:?} {place}: {result}.", self.settings.name);
                    }
                    if keepalive <= now {
                        let jitter = rand::rng().random_range(5..=10);
                        keepalive = deadlines::after(peering::keepalive_interval(
                            self.settings.lifetime,
                            jitter,
                        ));
                    }
                }
            }
        }
    }

    /// Kopf's `process_peering_event`: pauses or resumes for this object's state, removes the
    /// dead peers' entries; returns when to look again while paused.
    async fn judge(
        &self,
        place: &Place,
        state: &Value,
        token: &CancellationToken,
    ) -> Option<Instant> {
        let now = OffsetDateTime::now_utc();
        let judgement = Judgement::of(
            &state["status"],
            &self.identity,
            self.settings.priority,
            now,
        );
        let name = &self.settings.name;
        self.warn_of_unreadable(place, &judgement.unreadable);
        if !judgement.dead.is_empty() {
            let dead = judgement.dead.iter().map(|peer| peer.id.as_str());
            tracing::debug!(target: "kopf::peering", peering = ?name, "Cleaning up the dead peers: {}", listed(&judgement.dead));
            self.write(place, peering::removal(dead), token).await;
        }
        let key = place.key();
        self.hear(&key, Some(judgement.others_alive()));
        let was_paused = self.toggles.get(&key);
        if !judgement.higher.is_empty() {
            self.toggles.set(&key, true);
            if !was_paused {
                tracing::info!(target: "kopf::peering", peering = ?name, "Pausing operations in favour of {}.", listed(&judgement.higher));
            }
        } else if !judgement.same.is_empty() && !self.sharded {
            self.toggles.set(&key, true);
            tracing::warn!(target: "kopf::peering", peering = ?name, "Possibly conflicting operators with the same priority: {}.", listed(&judgement.same));
            if !was_paused {
                tracing::info!(target: "kopf::peering", peering = ?name, "Pausing all operators, including self: {}.", listed(&judgement.same));
            }
        } else {
            self.toggles.set(&key, false);
            if was_paused {
                tracing::info!(target: "kopf::peering", peering = ?name, "Resuming operations after the pause. Conflicting operators with the same priority are gone.");
            }
        }
        let left = judgement.recheck_at()? - now;
        Some(deadlines::after(
            Duration::try_from(left).unwrap_or_default(),
        ))
    }

    /// Warns once of each peer's entry that has unreadable fields (until the entry changes):
    /// they are read as missing, which Kopf's peers cannot do (their peering stops).
    fn warn_of_unreadable(&self, place: &Place, peers: &[Peer]) {
        let shown: BTreeSet<String> = peers
            .iter()
            .map(|peer| format!("{} ({})", peer.id, peer.unreadable.join(", ")))
            .collect();
        let mut warned = lock(&self.unreadable);
        let warned = warned.entry(place.key()).or_default();
        for entry in shown.difference(warned) {
            tracing::warn!(target: "kopf::peering", peering = ?self.settings.name, "the peering entry of {entry} in {place} cannot be read: read as missing (Kopf's defaults: priority 0, lifetime 60, lastseen now); Python Kopf's peers stop peering on it, so fix or remove it (`resume -i ID` removes an entry)");
        }
        *warned = shown;
    }

    /// Sends a merge patch to the peering object; `false` if the object is not found.
    async fn write(&self, place: &Place, merge: Value, stop: &CancellationToken) -> bool {
        write(
            &self.client,
            &self.settings.name,
            place,
            merge,
            &self.backoffs,
            stop,
        )
        .await
    }
}

/// Sends a merge patch to the peering object `name` at `place`; `false` if the object is not
/// found (which is not an error: peering without its object is standalone). Other failures
/// are logged.
async fn write(
    client: &kube::Client,
    name: &str,
    place: &Place,
    mut merge: Value,
    backoffs: &[Duration],
    stop: &CancellationToken,
) -> bool {
    let mut patch = Patch::default();
    patch.merge_raw("status", merge["status"].take());
    let target = Target {
        client,
        resource: &place.resource,
        namespace: place.namespace.as_deref(),
        name,
        stop,
        // Peering decides who may act; its own entries are written whatever it decided.
        gate: &patching::Ungated,
    };
    match patching::apply(&target, &mut patch, None, "", backoffs).await {
        Ok(written) => !written.versions.is_empty(),
        Err(error) => {
            tracing::warn!(target: "kopf::peering", peering = ?name, %error, "cannot write to the peering object {place}");
            true
        }
    }
}

/// What `freeze` and `resume` write for an identity: an entry of this priority and lifetime,
/// or its removal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// Kopf's `freeze`: an entry that pauses the peers of lower priorities until it expires.
    Freeze { priority: i64, lifetime: Duration },
    /// Kopf's `resume`: the entry is removed, so those peers resume at once.
    Resume,
}

/// Kopf's `freeze` and `resume` subcommands: writes (or removes) the entry of `identity` in
/// every peering object named `settings.peering.name` that the settings and patterns select,
/// as a running operator keeps its own. Returns the places written, as `namespace` or
/// `cluster-wide`; an error when there is no peering object to write to.
pub(crate) async fn mark(
    client: &kube::Client,
    settings: &Settings,
    patterns: Option<&NamespacePatterns>,
    identity: &str,
    mark: Mark,
) -> Result<Vec<String>, String> {
    let name = &settings.peering.name;
    let found = places(client, settings, patterns).await;
    if found.resources.is_empty() {
        return Err(format!(
            "no {} resource is served: create Kopf's peering CRDs first (the `crd` subcommand prints them)",
            plural(settings, patterns)
        ));
    }
    let merge = match mark {
        Mark::Freeze { priority, lifetime } => {
            peering::touch(identity, priority, lifetime, OffsetDateTime::now_utc())
        }
        Mark::Resume => peering::removal([identity]),
    };
    let never = CancellationToken::new();
    let mut written = Vec::new();
    for place in &found.places {
        let backoffs = &settings.networking.error_backoffs;
        if write(client, name, place, merge.clone(), backoffs, &never).await {
            written.push(place.to_string());
        }
    }
    if written.is_empty() {
        return Err(format!(
            "no peering object {name:?} exists {}: create it (Kopf's peering.yaml creates `default`)",
            found
                .places
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(written)
}

/// `clusterkopfpeerings` or `kopfpeerings`: cluster-wide unless namespaces are served (or
/// the settings say otherwise).
fn plural(settings: &Settings, patterns: Option<&NamespacePatterns>) -> &'static str {
    if settings.peering.clusterwide.unwrap_or(patterns.is_none()) {
        "clusterkopfpeerings"
    } else {
        "kopfpeerings"
    }
}

/// The peering objects to keep the entry in: in each group whose CRD exists, the
/// cluster-wide one, or one in each served namespace. None when no CRD exists (or discovery
/// fails, which is logged).
async fn places(
    client: &kube::Client,
    settings: &Settings,
    patterns: Option<&NamespacePatterns>,
) -> Found {
    let plural = plural(settings, patterns);
    let resources = match discover(client, plural).await {
        Ok(resources) => resources,
        Err(error) => {
            tracing::warn!(target: "kopf::peering", %error, "cannot discover the peering resources");
            return Found::default();
        }
    };
    let namespaces = if plural == "clusterkopfpeerings" || resources.is_empty() {
        vec![None]
    } else {
        match served_namespaces(client, settings, patterns).await {
            Ok(namespaces) => namespaces.into_iter().map(Some).collect(),
            Err(error) => {
                tracing::warn!(target: "kopf::peering", %error, "cannot list the namespaces to keep the peering in");
                Vec::new()
            }
        }
    };
    let places = resources
        .iter()
        .flat_map(|resource| {
            namespaces.iter().map(|namespace| Place {
                resource: resource.clone(),
                namespace: namespace.clone(),
            })
        })
        .collect();
    Found { resources, places }
}

/// The peering resources served (none: no CRD), and their objects to keep the entry in.
#[derive(Debug, Default)]
struct Found {
    resources: Vec<Resource>,
    places: Vec<Place>,
}

/// The peering resources of this plural in both groups, as the API serves them now.
async fn discover(client: &kube::Client, plural: &str) -> Result<Vec<Resource>, kube::Error> {
    let groups: BTreeSet<String> = GROUPS.iter().map(|g| g.to_string()).collect();
    let resources = scanning::scan(client, &Some(groups)).await?;
    Ok(resources
        .into_iter()
        .filter(|r| r.plural == plural && r.preferred)
        .collect())
}

/// The namespaces that a namespaced peering is kept in: the plain names given, or the
/// existing namespaces that the patterns match (all without patterns) as listed at the start.
async fn served_namespaces(
    client: &kube::Client,
    settings: &Settings,
    patterns: Option<&NamespacePatterns>,
) -> Result<Vec<String>, kube::Error> {
    if let Some(names) = patterns.and_then(NamespacePatterns::is_exact) {
        return Ok(names);
    }
    let listed = scanning::list_namespaces(client, &settings.watching).await?;
    Ok(listed
        .iter()
        .filter_map(|namespace| namespace["metadata"]["name"].as_str())
        .filter(|name| patterns.is_none_or(|patterns| patterns.matches(name)))
        .map(String::from)
        .collect())
}

/// Peers as Kopf lists them in its log lines.
fn listed(peers: &[Peer]) -> String {
    let shown: Vec<String> = peers.iter().map(ToString::to_string).collect();
    format!("[{}]", shown.join(", "))
}

/// The identity of `freeze` and `resume` (Kopf's `detect_own_id(manual=True)`): `POD_ID` if
/// set, else `<user>@<host>`, so that a `resume` from the same user and host removes that
/// `freeze`'s entry.
pub(crate) fn manual_identity() -> String {
    if let Some(id) = std::env::var("POD_ID").ok().filter(|id| !id.is_empty()) {
        return id;
    }
    let (user, host) = user_and_host();
    format!("{user}@{host}")
}

/// The user and host names, for identities.
fn user_and_host() -> (String, String) {
    let user = ["USER", "LOGNAME", "USERNAME"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "unknown".into());
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|host| host.trim().to_string())
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "localhost".into());
    (user, host)
}

/// This operator's identity (Kopf's `detect_own_id`): `POD_ID` if set, else
/// `<user>@<host>/<YYYYmmddHHMMSS>/<3 random chars>`, never one already taken in this process.
pub(crate) fn identity() -> String {
    if let Some(id) = std::env::var("POD_ID").ok().filter(|id| !id.is_empty()) {
        return id;
    }
    static TAKEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let (user, host) = user_and_host();
    let now = OffsetDateTime::now_utc();
    let stamp = format!(
        "{:04}{:02}{:02}{:02}{:02}{:02}",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    );
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut taken = lock(&TAKEN);
    loop {
        let mut rng = rand::rng();
        let suffix: String = (0..3)
            .map(|_| char::from(CHARS[rng.random_range(0..CHARS.len())]))
            .collect();
        let id = format!("{user}@{host}/{stamp}/{suffix}");
        if taken.insert(id.clone()) {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_kopfs_and_never_repeat_in_one_process() {
        if std::env::var_os("POD_ID").is_some() {
            return;
        }
        let (a, b) = (identity(), identity());
        assert_ne!(a, b);
        let parts: Vec<&str> = a.split('/').collect();
        assert_eq!(parts.len(), 3, "{a}");
        assert!(parts[0].contains('@'), "{a}");
        assert_eq!(parts[1].len(), 14, "{a}");
        assert!(parts[1].bytes().all(|b| b.is_ascii_digit()), "{a}");
        assert_eq!(parts[2].len(), 3, "{a}");
    }

    #[test]
    fn the_peering_is_clusterwide_unless_namespaces_are_served_or_the_settings_say() {
        let mut settings = Settings::default();
        let patterns = NamespacePatterns::parse(&["default".to_string()]).unwrap();
        assert_eq!(plural(&settings, None), "clusterkopfpeerings");
        assert_eq!(plural(&settings, Some(&patterns)), "kopfpeerings");
        settings.peering.clusterwide = Some(true);
        assert_eq!(plural(&settings, Some(&patterns)), "clusterkopfpeerings");
        settings.peering.clusterwide = Some(false);
        assert_eq!(plural(&settings, None), "kopfpeerings");
    }

    #[test]
    fn the_toggles_pause_while_any_peering_object_says_so() {
        let toggles = Toggles::new(false);
        toggles.add("a", false);
        toggles.add("b", false);
        let pause = Pause::following(toggles.paused.subscribe());
        toggles.set("a", true);
        toggles.set("b", true);
        toggles.set("a", false);
        assert!(pause.is_paused());
        toggles.set("b", false);
        assert!(!pause.is_paused());
        toggles.set("b", true);
        toggles.remove("b");
        assert!(!pause.is_paused(), "a namespace gone pauses no more");
        let mandatory = Toggles::new(true);
        assert!(
            Pause::following(mandatory.paused.subscribe()).is_paused(),
            "paused before any peering object is found"
        );
    }
}
