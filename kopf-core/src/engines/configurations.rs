//! The managed webhook configurations (Kopf's `settings.admission.managed`): one
//! `ValidatingWebhookConfiguration` and one `MutatingWebhookConfiguration`, both named as the
//! setting says, whose webhooks the operator derives from its admission handlers.
//!
//! Invariants:
//! 1. The configurations are written only while this replica owns them (its [`Pause`] says
//!    so): the Lease leader within its term, the active peer once it has heard its peers, or
//!    the holder of the configurations' own Lease. It writes them again whenever it comes to
//!    own them, since the previous owner's server may be gone.
//! 2. Each write creates the objects if they are missing (`409` ignored), then merge-patches
//!    `{"webhooks": [...]}`, which replaces the whole list: foreign entries are lost, as in
//!    Kopf. A `403` of either ends the operator with an error naming the RBAC it needs:
//!    retrying would not grant it. Like the writes to objects (`reactor/writing.rs`), every
//!    request is sent only while this replica owns them, asked right before it leaves, must be
//!    answered within the owner's term, and patches the version this replica last knew: a
//!    patch held by a slow server past the term cannot land over the next owner's lists.
//! 3. Every replica watches both objects (by name). The owner writes a list again when it
//!    differs from what it would write: its server's client config changed (a new
//!    certificate), the discovered resources changed (the rules name them), or someone else
//!    changed or deleted the object (a repair). A state older than the owner's own last write
//!    is not a change.
//! 4. They are in place ([`Configurations::in_place`], a part of the operator's readiness)
//!    once the owner finds them as it would write them, or a replica that does not own them
//!    finds every webhook in them.
//! 5. At a graceful stop ([`Configurations::hand_over`]), an owner that wrote them (or began
//!    to: a write cut short counts) hands them over when other replicas may live: it gives up
//!    its Lease, if any, and serves until a successor has pointed them elsewhere (or, behind a
//!    Service, has taken the Lease), within the cleanup timeout. When it knows it is alone, or
//!    no successor comes, it patches them down to the handlers marked `persistent`; the
//!    objects themselves stay.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::aiokits::tasks::Tasks;
use crate::clients::patching::{self, Gate, WriteError};
use crate::clients::watching::{self, Event, Selection};
use crate::configs::settings::WatchingSettings;
use crate::configs::webhooks::{ClientConfig, Target};
use crate::engines::pausing::Pause;
use crate::helpers::sync::lock;
use crate::intents::admission::AdmissionHandler;
use crate::structs::resources::Resource;

mod contents;

use contents::{KINDS, Kind, contains, holds, webhooks};

/// The shortest time between two repairs, should another writer insist.
const REPAIR_INTERVAL: Duration = Duration::from_secs(1);

/// How often a stopping owner looks whether a successor has taken over.
const HANDOVER_POLL: Duration = Duration::from_millis(200);

/// Why the managed configurations cannot be kept.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ConfigurationError {
    /// The API refused to read, create or patch a configuration for lack of permissions.
    #[error(
        "cannot {verb} the {kind} {name:?}: forbidden; the operator's RBAC needs `create` and \
         `patch` on validatingwebhookconfigurations and mutatingwebhookconfigurations \
         (admissionregistration.k8s.io), and `get`, `list` and `watch` on those named {name:?}: \
         see the `rbac` subcommand's --admission-managed"
    )]
    Forbidden {
        /// What was refused: `get`, `create` or `patch`.
        verb: &'static str,
        /// The configuration's kind.
        kind: &'static str,
        /// The managed name.
        name: String,
    },
    /// The managed name cannot make webhook names.
    #[error(
        "invalid managed webhook configuration name {0:?}: it must be a DNS subdomain of at \
         least two segments, e.g. auto.kopf.dev (webhook names need three)"
    )]
    Name(String),
}

/// Checks the managed name: a lowercase DNS subdomain of at least two segments, so that
/// every webhook name (`<id>.<managed>`) has the three that Kubernetes requires.
pub(crate) fn check_name(name: &str) -> Result<(), ConfigurationError> {
    let segment_ok = |segment: &str| {
        !segment.is_empty()
            && segment.len() <= 63
            && segment
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !segment.starts_with('-')
            && !segment.ends_with('-')
    };
    let segments: Vec<&str> = name.split('.').collect();
    if name.len() > 253 || segments.len() < 2 || !segments.iter().all(|s| segment_ok(s)) {
        return Err(ConfigurationError::Name(name.to_string()));
    }
    Ok(())
}

/// What this replica knows of one configuration object from its watch.
#[derive(Debug, Clone, Default, PartialEq)]
enum Seen {
    /// Not listed yet (or not watchable: no RBAC to watch).
    #[default]
    Unknown,
    /// Missing.
    Missing,
    /// As stored, with its resourceVersion when it is a number.
    Stored(Value),
}

impl Seen {
    /// Its resourceVersion, when it is a number (as etcd's are).
    fn version(&self) -> Option<u64> {
        match self {
            Seen::Stored(object) => object["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|v| v.parse().ok()),
            _ => None,
        }
    }
}

/// A list as this replica last wrote it, and the resourceVersion the write got (when it is a
/// number).
type Written = (Vec<Value>, Option<u64>);

/// What a stopping owner asks about the replicas around it, to hand the configurations over.
pub(crate) trait Succession: Send + Sync {
    /// Whether other replicas lived when last seen; `None` when this one cannot know.
    fn others_alive(&self) -> Option<bool>;
    /// Gives up the Lease that made this replica the owner, if any, so that a successor
    /// may take it (within `timeout`).
    fn release(&self, timeout: Duration) -> BoxFuture<'_, ()>;
    /// Whether a successor holds that Lease now; `None` when ownership is no Lease's.
    fn successor(&self) -> BoxFuture<'_, Option<bool>>;
    /// How long a live successor takes at most to take a released Lease.
    fn takeover(&self) -> Duration;
}

/// The managed configurations of a running operator.
#[derive(Debug)]
pub(crate) struct Configurations {
    inner: Arc<Inner>,
}

struct Inner {
    client: kube::Client,
    handlers: Vec<AdmissionHandler>,
    managed: String,
    config: watch::Receiver<ClientConfig>,
    resources: watch::Receiver<Vec<Resource>>,
    /// The lists as last written, validating then mutating, with the resourceVersions the
    /// writes got; `None` until written since this replica last came to own them.
    written: Mutex<[Option<Written>; 2]>,
    /// The objects as the watches last saw them, validating then mutating.
    seen: watch::Sender<[Seen; 2]>,
    /// Whether a list may have been written since this operator last resumed, even if the
    /// write did not finish (one kind patched, the other failed or cancelled): then the stop
    /// hands them over or shrinks them, so that no webhook is left pointing at a server that
    /// is gone.
    touched: AtomicBool,
    /// Whether this replica owned them when the task that keeps them last looked (at the
    /// stop: when that task ended; the pause may close later, as a term ends unrenewed).
    owning: AtomicBool,
    /// Whether they are in place (see the invariants); once true, it stays so.
    in_place: watch::Sender<bool>,
    backoffs: Vec<Duration>,
    /// Set when the operator must stop (for lack of RBAC).
    failure: watch::Sender<Option<ConfigurationError>>,
    /// Paused while this replica does not own them: asked before each request.
    owner: Pause,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Configurations")
            .field("managed", &self.managed)
            .finish_non_exhaustive()
    }
}

/// What the configurations are made of, before they are kept.
pub(crate) struct Managed {
    /// The operator's client.
    pub(crate) client: kube::Client,
    /// The admission handlers, in registration order.
    pub(crate) handlers: Vec<AdmissionHandler>,
    /// The configurations' name.
    pub(crate) managed: String,
    /// Paused while this replica does not own them (then it writes nothing).
    pub(crate) pause: Pause,
    /// Delays between retries of failed writes.
    pub(crate) backoffs: Vec<Duration>,
    /// How the objects are watched.
    pub(crate) watching: WatchingSettings,
}

impl Configurations {
    /// Starts keeping the configurations, for the server's client config and the discovered
    /// resources, and watching them, in tasks of `tasks`.
    pub(crate) fn start(
        managed: Managed,
        config: watch::Receiver<ClientConfig>,
        resources: watch::Receiver<Vec<Resource>>,
        tasks: &Tasks,
    ) -> Configurations {
        let inner = Arc::new(Inner {
            client: managed.client,
            handlers: managed.handlers,
            managed: managed.managed,
            config,
            resources,
            written: Mutex::new([None, None]),
            seen: watch::Sender::new([Seen::Unknown, Seen::Unknown]),
            touched: AtomicBool::new(false),
            owning: AtomicBool::new(false),
            in_place: watch::Sender::new(false),
            backoffs: managed.backoffs,
            failure: watch::Sender::new(None),
            owner: managed.pause.clone(),
        });
        for (index, kind) in KINDS.into_iter().enumerate() {
            let watching = managed.watching.clone();
            tasks.spawn(
                inner
                    .clone()
                    .watch(index, kind, watching, tasks.token().clone()),
            );
        }
        tasks.spawn(inner.clone().keep(managed.pause, tasks.token().clone()));
        Configurations { inner }
    }

    /// Resolves when the configurations cannot be kept and the operator must stop; never
    /// otherwise.
    pub(crate) async fn failed(&self) -> ConfigurationError {
        let mut failure = self.inner.failure.subscribe();
        let error = match failure.wait_for(Option::is_some).await {
            Ok(error) => error.clone(),
            Err(_) => None,
        };
        match error {
            Some(error) => error,
            None => std::future::pending().await,
        }
    }

    /// Whether the configurations are in place, now and as it changes (see the invariants).
    pub(crate) fn in_place(&self) -> watch::Receiver<bool> {
        self.inner.in_place.subscribe()
    }

    /// A step of the graceful stop, before the server stops (the tasks that keep them must
    /// have been stopped): if this replica owns the configurations and wrote them (or began
    /// to), it hands them over to a successor when other replicas may live, else (or when no
    /// successor comes within `timeout`) patches them down to the persistent handlers'
    /// webhooks. Each request within `timeout`.
    pub(crate) async fn hand_over(&self, succession: &dyn Succession, timeout: Duration) {
        let inner = &self.inner;
        if !inner.touched.load(Ordering::SeqCst) || !inner.owning.load(Ordering::SeqCst) {
            succession.release(timeout).await;
            return;
        }
        let others = succession.others_alive();
        if others == Some(false) {
            // No other replica lives to write them. The operator's stop may have ended the
            // term already (its pause, the shards' release): the shrink is guarded by the
            // version this replica last knew instead.
            inner.shrink(timeout, &patching::Ungated).await;
            succession.release(timeout).await;
            return;
        }
        succession.release(timeout).await;
        tracing::info!(target: "kopf::admission", "handing the webhook configurations {} over to another replica", inner.managed);
        let started = Instant::now();
        // A successor that takes a released Lease does so within its retry period; a peer
        // known to live may take longer (it resumes, then writes).
        let arrival = match others {
            Some(true) => timeout,
            _ => succession.takeover().min(timeout),
        };
        let service = matches!(inner.config.borrow().target, Target::Service { .. });
        let mut succeeded = false;
        loop {
            let successor = succession.successor().await;
            succeeded |= successor == Some(true);
            // Behind a Service, every replica writes the same: a successor is enough. With a
            // URL of its own, it must have pointed them at itself.
            let handed = if service {
                succeeded || (successor.is_none() && others == Some(true))
            } else {
                inner.elsewhere(timeout).await
            };
            if handed {
                tracing::info!(target: "kopf::admission", "another replica keeps the webhook configurations {} now", inner.managed);
                return;
            }
            let waited = started.elapsed();
            if waited >= timeout || (!succeeded && others != Some(true) && waited >= arrival) {
                break;
            }
            tokio::time::sleep(HANDOVER_POLL).await;
        }
        if succeeded {
            // It writes them soon: shrinking them now would only switch validation off.
            tracing::warn!(target: "kopf::admission", "another replica took the webhook configurations {} over but has not written them within {timeout:?}: left as they are", inner.managed);
            return;
        }
        tracing::info!(target: "kopf::admission", "no other replica took the webhook configurations {} over", inner.managed);
        // The Lease is released, so the term has ended; but nobody took the configurations,
        // and they point at a server that stops now. The shrink is guarded by the version this
        // replica last wrote or saw: a successor that wrote them since makes it fail, and
        // they stay as the successor wrote them.
        inner.shrink(timeout, &patching::Ungated).await;
    }
}

impl Inner {
    /// The lists this replica would write now.
    fn desired(&self, persistent_only: bool) -> [Vec<Value>; 2] {
        let config = self.config.borrow().clone();
        let resources = self.resources.borrow().clone();
        KINDS.map(|kind| {
            webhooks(
                &self.handlers,
                kind.admission,
                &resources,
                &self.managed,
                &config,
                persistent_only,
            )
        })
    }

    /// Patches the lists down to the persistent handlers' webhooks, each request through
    /// `gate`.
    async fn shrink(&self, timeout: Duration, gate: &dyn Gate) {
        tracing::info!(target: "kopf::admission", "removing the non-persistent webhooks from {}", self.managed);
        for (index, (kind, webhooks)) in KINDS.into_iter().zip(self.desired(true)).enumerate() {
            let shrunk = async {
                let version = self.version(index, kind, gate).await?;
                self.patch(kind, webhooks, version.as_deref(), gate).await
            };
            match tokio::time::timeout(timeout, shrunk).await {
                Ok(Ok(_)) => {}
                Ok(Err(WriteError::Closed(closed))) => {
                    tracing::warn!(target: "kopf::admission", "the non-persistent webhooks stay in the {} {}: {closed}", kind.name, self.managed);
                }
                Ok(Err(error)) => {
                    tracing::warn!(target: "kopf::admission", %error, "cannot remove the non-persistent webhooks from the {} {}", kind.name, self.managed);
                }
                Err(_) => {
                    tracing::warn!(target: "kopf::admission", "removing the non-persistent webhooks from the {} {} took over {timeout:?}: left as they are", kind.name, self.managed);
                }
            }
        }
    }

    /// Whether the configurations (as a GET finds them) point elsewhere than this replica's
    /// server, both of them: a successor has written them.
    async fn elsewhere(&self, timeout: Duration) -> bool {
        let config = self.config.borrow().clone();
        let ours: Vec<Value> = self
            .handlers
            .iter()
            .map(|handler| config.for_handler(handler.id()))
            .collect();
        let mut found = 0;
        for kind in KINDS {
            let request = http::Request::get(kind.path(Some(&self.managed))).body(Vec::new());
            let Ok(request) = request else { return false };
            let read = tokio::time::timeout(timeout, self.client.request::<Value>(request)).await;
            let Ok(Ok(object)) = read else { return false };
            let webhooks = object["webhooks"].as_array().map_or(&[][..], Vec::as_slice);
            let at_us = webhooks.iter().any(|webhook| {
                ours.iter()
                    .any(|our| contains(&webhook["clientConfig"], our))
            });
            if at_us {
                return false;
            }
            found += webhooks.len();
        }
        found > 0
    }

    /// Watches one configuration object by name, until cancelled.
    async fn watch(
        self: Arc<Self>,
        index: usize,
        kind: Kind,
        settings: WatchingSettings,
        token: CancellationToken,
    ) {
        let resource = kind.resource();
        let fields = format!("metadata.name={}", self.managed);
        let selection = Selection {
            fields: Some(&fields),
            ..Selection::default()
        };
        let mut listed: Option<Value> = None;
        let watched = watching::watch(
            &self.client,
            &resource,
            None,
            selection,
            &settings,
            &token,
            |event| {
                let seen = match event {
                    Event::Listed(object) => {
                        listed = Some(object.value().clone());
                        return;
                    }
                    Event::ListingDone => match listed.take() {
                        Some(object) => Seen::Stored(object),
                        None => Seen::Missing,
                    },
                    Event::Changed("DELETED", _) | Event::Vanished(_) => Seen::Missing,
                    Event::Changed(_, object) => Seen::Stored(object.value().clone()),
                };
                self.seen.send_modify(|all| all[index] = seen);
            },
        )
        .await;
        if let Err(error) = watched {
            tracing::warn!(target: "kopf::admission", %error, "the {} {} is not watched any more: changes by others are not repaired", kind.name, self.managed);
            self.seen.send_modify(|all| all[index] = Seen::Unknown);
            token.cancelled().await;
        }
    }

    /// Writes the lists whenever they differ from what this replica would write and it owns
    /// them; tells when they are in place; until cancelled.
    async fn keep(self: Arc<Self>, mut pause: Pause, token: CancellationToken) {
        let mut config = self.config.clone();
        let mut resources = self.resources.clone();
        let mut seen = self.seen.subscribe();
        let mut failures = 0usize;
        let mut created = false;
        let mut last_repair: Option<Instant> = None;
        let (mut config_open, mut resources_open) = (true, true);
        loop {
            let desired = self.desired(false);
            let state = seen.borrow_and_update().clone();
            self.owning.store(!pause.is_paused(), Ordering::SeqCst);
            if !pause.is_paused() {
                // Its owner now: the stop hands them over or shrinks them, whoever wrote them.
                self.touched.store(true, Ordering::SeqCst);
                let stale = self.stale(&desired, &state);
                if stale.iter().any(|s| *s) {
                    if self.repairs(&desired, stale, &state) {
                        // Not faster than once a second, should another writer insist.
                        if let Some(last) = last_repair
                            && last.elapsed() < REPAIR_INTERVAL
                        {
                            tokio::select! {
                                _ = tokio::time::sleep_until(last + REPAIR_INTERVAL) => continue,
                                _ = token.cancelled() => return,
                            }
                        }
                        last_repair = Some(Instant::now());
                    }
                    match self.write(&desired, stale, &state, &mut created).await {
                        Ok(()) => failures = 0,
                        Err(Failure::Fatal(error)) => {
                            tracing::error!(target: "kopf::admission", "{error}");
                            self.failure.send_replace(Some(error));
                            return;
                        }
                        Err(Failure::NotOwner(closed)) => {
                            // The pause says so too (the same clock): the loop waits for it.
                            tracing::info!(target: "kopf::admission", "the webhook configurations {} were not written whole: {closed}", self.managed);
                            continue;
                        }
                        Err(Failure::Transient(error)) => {
                            let delay = self
                                .backoffs
                                .get(failures)
                                .or(self.backoffs.last())
                                .copied()
                                .unwrap_or(Duration::from_secs(1));
                            failures += 1;
                            tracing::warn!(target: "kopf::admission", %error, "cannot write the webhook configurations {}; retrying in {delay:?}", self.managed);
                            tokio::select! {
                                _ = tokio::time::sleep(delay) => continue,
                                _ = token.cancelled() => return,
                            }
                        }
                    }
                }
                self.in_place
                    .send_if_modified(|in_place| !std::mem::replace(in_place, true));
            } else if state
                .iter()
                .zip(&desired)
                .all(|(seen, desired)| complete(seen, desired))
            {
                self.in_place
                    .send_if_modified(|in_place| !std::mem::replace(in_place, true));
            }
            // A sender gone (a server whose certificate never changes, a discovery that is
            // done) means no more changes from it, not the end.
            tokio::select! {
                _ = token.cancelled() => return,
                changed = config.changed(), if config_open => config_open = changed.is_ok(),
                changed = resources.changed(), if resources_open => {
                    resources_open = changed.is_ok();
                }
                _ = seen.changed() => {}
                now_paused = pause.changed() => {
                    self.owning.store(!now_paused, Ordering::SeqCst);
                    if !now_paused {
                        // Another owner may have written its own server's address meanwhile.
                        *lock(&self.written) = [None, None];
                        self.touched.store(false, Ordering::SeqCst);
                        created = false;
                    }
                }
            }
        }
    }

    /// Which lists differ from what this replica would write: as the watch saw them, unless
    /// that state is older than this replica's own last write (then as written).
    fn stale(&self, desired: &[Vec<Value>; 2], state: &[Seen; 2]) -> [bool; 2] {
        let written = lock(&self.written);
        [0, 1].map(|index| {
            let ours = written[index].as_ref();
            let older = match (
                state[index].version(),
                ours.and_then(|(_, version)| *version),
            ) {
                (Some(seen), Some(wrote)) => seen < wrote,
                _ => false,
            };
            match &state[index] {
                Seen::Stored(object) if !older => !holds(&object["webhooks"], &desired[index]),
                Seen::Missing if !older => true,
                _ => ours.is_none_or(|(lists, _)| *lists != desired[index]),
            }
        })
    }

    /// Whether writing the stale lists repairs what someone else changed: this replica wrote
    /// them as it would now, and the watch saw them otherwise since.
    fn repairs(&self, desired: &[Vec<Value>; 2], stale: [bool; 2], state: &[Seen; 2]) -> bool {
        let ours = lock(&self.written);
        (0..2).any(|index| {
            stale[index]
                && matches!(&state[index], Seen::Stored(_) | Seen::Missing)
                && ours[index]
                    .as_ref()
                    .is_some_and(|(lists, _)| *lists == desired[index])
        })
    }

    /// Creates the configurations if needed and patches the lists that differ.
    async fn write(
        &self,
        desired: &[Vec<Value>; 2],
        stale: [bool; 2],
        state: &[Seen; 2],
        created: &mut bool,
    ) -> Result<(), Failure> {
        if state.contains(&Seen::Missing) {
            *created = false;
        }
        if !*created {
            for kind in KINDS {
                self.create(kind).await?;
            }
            *created = true;
        }
        if self.repairs(desired, stale, state) {
            tracing::info!(target: "kopf::admission", "the webhook configurations {} were changed by someone else: writing them again", self.managed);
        } else {
            tracing::info!(target: "kopf::admission", "configuring the webhooks of {}", self.managed);
        }
        self.touched.store(true, Ordering::SeqCst);
        for (index, kind) in KINDS.into_iter().enumerate() {
            if !stale[index] {
                continue;
            }
            let version = match self.version(index, kind, &self.gate()).await {
                Ok(version) => version,
                Err(error) => return Err(Failure::of(error, "get", kind, &self.managed)),
            };
            let patched = self
                .patch(
                    kind,
                    desired[index].clone(),
                    version.as_deref(),
                    &self.gate(),
                )
                .await;
            match patched {
                Ok(written) => {
                    let version = written["metadata"]["resourceVersion"]
                        .as_str()
                        .and_then(|v| v.parse().ok());
                    lock(&self.written)[index] = Some((desired[index].clone(), version));
                }
                Err(WriteError::Request(kube::Error::Api(status))) if status.code == 404 => {
                    // Deleted by someone: created again at the retry.
                    *created = false;
                    return Err(Failure::Transient(kube::Error::Api(status)));
                }
                Err(error) => return Err(Failure::of(error, "patch", kind, &self.managed)),
            }
        }
        Ok(())
    }

    /// Creates one configuration, empty; one that exists already is fine.
    async fn create(&self, kind: Kind) -> Result<(), Failure> {
        let body = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind.name,
            "metadata": {"name": self.managed},
        });
        let request = http::Request::post(kind.path(None))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(&body).unwrap_or_default())
            .map_err(|error| Failure::Transient(kube::Error::HttpError(error)))?;
        let created = patching::within_gate(&self.gate(), self.client.request::<Value>(request))
            .await
            .map_err(|error| Failure::of(error, "create", kind, &self.managed))?;
        match created {
            Ok(_) => {
                tracing::info!(target: "kopf::admission", "created the {} {}", kind.name, self.managed);
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 403 => {
                Err(Failure::Fatal(ConfigurationError::Forbidden {
                    verb: "create",
                    kind: kind.name,
                    name: self.managed.clone(),
                }))
            }
            Err(error) => Err(Failure::Transient(error)),
        }
    }

    /// Replaces one configuration's webhooks, if it is still at `version` (any version when
    /// none is known); the object as stored after.
    async fn patch(
        &self,
        kind: Kind,
        webhooks: Vec<Value>,
        version: Option<&str>,
        gate: &dyn Gate,
    ) -> Result<Value, WriteError> {
        let mut body = json!({"webhooks": webhooks});
        if let Some(version) = version {
            body["metadata"] = json!({"resourceVersion": version});
        }
        let request = http::Request::patch(kind.path(Some(&self.managed)))
            .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
            .body(serde_json::to_vec(&body).unwrap_or_default())
            .map_err(kube::Error::HttpError)?;
        let patched = patching::within_gate(gate, self.client.request::<Value>(request)).await?;
        Ok(patched?)
    }

    /// The version of one configuration that this replica last knew: the newer of what its
    /// watch saw and what its own last write got, else as a GET finds it now (`None`: missing,
    /// not readable, or a version that is no number: no guard).
    async fn version(
        &self,
        index: usize,
        kind: Kind,
        gate: &dyn Gate,
    ) -> Result<Option<String>, WriteError> {
        let seen = self.seen.borrow()[index].version();
        let wrote = lock(&self.written)[index]
            .as_ref()
            .and_then(|(_, version)| *version);
        if let Some(known) = seen.max(wrote) {
            return Ok(Some(known.to_string()));
        }
        let request = http::Request::get(kind.path(Some(&self.managed)))
            .body(Vec::new())
            .map_err(kube::Error::HttpError)?;
        let read = patching::within_gate(gate, self.client.request::<Value>(request)).await?;
        match read {
            Ok(object) => Ok(object["metadata"]["resourceVersion"]
                .as_str()
                .map(String::from)),
            // Missing; or not to be read (RBAC): the patch says what it lacks.
            Err(kube::Error::Api(status)) if matches!(status.code, 403 | 404) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// Whether this replica may still write them: asked right before each request.
    fn gate(&self) -> OwnerGate<'_> {
        OwnerGate(&self.owner)
    }
}

/// Whether a configuration, as seen, has a webhook of every name of the list (whoever wrote
/// them, wherever they point).
fn complete(seen: &Seen, desired: &[Value]) -> bool {
    let Seen::Stored(object) = seen else {
        return false;
    };
    let stored = object["webhooks"].as_array().map_or(&[][..], Vec::as_slice);
    desired
        .iter()
        .all(|webhook| stored.iter().any(|s| s["name"] == webhook["name"]))
}

/// Why a write failed.
#[derive(Debug)]
enum Failure {
    /// Retried after a backoff.
    Transient(kube::Error),
    /// Ends the operator.
    Fatal(ConfigurationError),
    /// Not sent on: this replica does not own them any more.
    NotOwner(patching::Closed),
}

impl Failure {
    /// The failure of a request to `verb` a configuration: a `403` ends the operator.
    fn of(error: WriteError, verb: &'static str, kind: Kind, managed: &str) -> Failure {
        match error {
            WriteError::Closed(closed) => Failure::NotOwner(closed),
            WriteError::Request(kube::Error::Api(status)) if status.code == 403 => {
                Failure::Fatal(ConfigurationError::Forbidden {
                    verb,
                    kind: kind.name,
                    name: managed.to_string(),
                })
            }
            WriteError::Request(error) => Failure::Transient(error),
        }
    }
}

/// The gate of the configurations' writes: open while this replica owns them, until the end
/// of the term that makes it their owner (a Lease's), if any.
struct OwnerGate<'a>(&'a Pause);

impl Gate for OwnerGate<'_> {
    fn deadline(&self) -> Result<Option<Instant>, patching::Closed> {
        self.0.closes_at().map_err(|_| {
            patching::Closed(
                "this replica does not own the webhook configurations any more (its term ended, \
                 or it paused); their next owner writes them",
            )
        })
    }
}

#[cfg(test)]
mod tests;
