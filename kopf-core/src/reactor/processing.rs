//! One object's events, processed: event handlers for every event; then, for the newest
//! state, the finalizer, the cause (Kopf's detection), the due change handlers that the
//! lifecycle picks (one by default: Kopf's `asap`), their progress records and results, and
//! the patch that stores all of it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::actions::delivery::deliver;
use crate::engines::daemons::{self, DaemonHost, Daemons};
use crate::intents::daemons::Background;
use crate::structs::diff::{self, Diff};
use crate::actions::execution::{self, Outcome};
use crate::structs::filters;
use crate::actions::invocation::{Invocation, Options, Reason};
use crate::intents::handlers::Trigger;
use crate::intents::handlers::EventHandler;
use crate::intents::handlers::ChangeHandler;
use crate::engines::indexing::{self, IndexedEvent, IndexingState};
use crate::intents::indexing::IndexHandler;
use crate::structs::indexes::{Filler, Indexes};
use crate::structs::memos::Memo;
use crate::structs::patch::Patch;
use crate::clients::patching::{self, Target};
use crate::clients::posting::{Logger, Poster};
use crate::intents::registry::Registry;
use crate::structs::resources::{Resource, Selector};
use crate::configs::settings::Settings;
use crate::configs::storage::{DiffBaseStorage, HandlerId, ProgressRecord, ProgressStorage};
use crate::actions::invocation::{SubHandler, SubHandlers};
use crate::aiokits::tasks::{StopReason, Tasks};
use crate::clients::watching::Event;
use crate::reactor::queueing::{Next, ObjectProcessor};

/// How long a deletion waits for the object's daemons and timers to end before checking again.
const DAEMONS_POLLING: Duration = Duration::from_secs(1);

/// What the operator remembers of an object between events (Kopf's memories).
#[derive(Debug, Default)]
struct Memory {
    /// Seen at least once (its newest state may have been let go since).
    seen: bool,
    /// First seen in a listing (not a watch event): resume handlers apply.
    listed: bool,
    /// A cause was completely handled since the operator started: no more resuming.
    handled_once: bool,
    /// The newest state seen, while the object's worker lives.
    latest: Option<Arc<Value>>,
    /// After our own PATCH: the version to wait for, and until when.
    awaited: Option<(Vec<String>, Instant)>,
    /// Failed writes in a row, for throttling.
    failures: usize,
    /// The object's memo: a shallow copy of the operator's, made on first sight.
    memo: Option<Memo>,
    /// The object's daemons and timers.
    daemons: Daemons,
    /// The object's failed indexing, per index.
    indexing: BTreeMap<String, IndexingState>,
}

/// What the processors of one operator share.
#[derive(Debug, Clone)]
pub(crate) struct Common {
    /// Posts Kubernetes Events.
    pub(crate) poster: Poster,
    /// The operator's memo, copied into each object's on first sight.
    pub(crate) memo: Memo,
    /// Permits for writes in flight.
    pub(crate) writes: Arc<tokio::sync::Semaphore>,
    /// The operator's indexes.
    pub(crate) indexes: Indexes,
}

/// Processes the objects of one resource.
pub(crate) struct Processor {
    client: kube::Client,
    resource: Resource,
    changes: Vec<ChangeHandler>,
    events: Vec<EventHandler>,
    background: Vec<Background>,
    indexers: Vec<IndexHandler>,
    indexes: Indexes,
    filler: Filler,
    /// Whether some timer waits for objects to be idle (so their essence is compared).
    idle_timers: bool,
    settings: Settings,
    progress: Arc<dyn ProgressStorage>,
    diffbase: Arc<dyn DiffBaseStorage>,
    extra_fields: Vec<Vec<String>>,
    memories: Mutex<HashMap<String, Memory>>,
    poster: Poster,
    memo: Memo,
    /// Limits the writes in flight, so that a burst of objects does not open a connection each.
    writes: Arc<tokio::sync::Semaphore>,
}

impl Processor {
    pub(crate) fn new(
        client: kube::Client,
        resource: Resource,
        registry: &Registry,
        selectors: &[Selector],
        settings: Settings,
        common: Common,
    ) -> Processor {
        let changes: Vec<ChangeHandler> = registry.changes_for(selectors).cloned().collect();
        let events: Vec<EventHandler> = registry.events_for(selectors).cloned().collect();
        let background: Vec<Background> = registry.background_for(selectors).cloned().collect();
        let extra_fields = changes
            .iter()
            .filter_map(|h| h.options.field.clone())
            .collect();
        Processor {
            progress: settings.persistence.progress_storage.clone(),
            diffbase: settings.persistence.diffbase_storage.clone(),
            client,
            resource,
            changes,
            events,
            idle_timers: background.iter().any(Background::waits_for_idle),
            background,
            settings,
            extra_fields,
            memories: Mutex::default(),
            poster: common.poster,
            memo: common.memo,
            writes: common.writes,
            indexers: registry.indexes_for(selectors).cloned().collect(),
            filler: common.indexes.filler(),
            indexes: common.indexes,
        }
    }

    /// A label selector to send to the server: when every handler of this resource filters
    /// on the same plain labels, objects without them need not be watched at all.
    pub(crate) fn label_selector(&self) -> Option<String> {
        let mut all = self
            .changes
            .iter()
            .map(|h| &h.options.labels)
            .chain(self.events.iter().map(|h| &h.options.labels))
            .chain(self.indexers.iter().map(|h| &h.options.labels));
        let first = all.next()?;
        let selector = filters::label_selector(first)?;
        all.all(|labels| filters::label_selector(labels).as_deref() == Some(&selector))
            .then_some(selector)
    }

    fn memory<T>(&self, uid: &str, f: impl FnOnce(&mut Memory) -> T) -> T {
        let mut memories = self
            .memories
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(memories.entry(uid.to_string()).or_default())
    }

    fn forget(&self, uid: &str) {
        self.memories
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(uid);
    }

    /// Processes a batch of events of one object (or, with an empty batch, its newest state
    /// again because a retry is due).
    pub(crate) async fn process(
        self: &Arc<Self>,
        uid: &str,
        batch: Vec<Event>,
        tasks: &Tasks,
    ) -> Next {
        let mut deleted = false;
        let mut versions = Vec::new();
        let mut patch = Patch::default();
        for event in &batch {
            let (kind, object) = match event {
                Event::Listed(object) => (None, object),
                Event::Changed(kind, object) => (Some(*kind), object),
                Event::ListingDone => continue,
            };
            self.memory(uid, |memory| {
                if !memory.seen {
                    memory.seen = true;
                    memory.listed = kind.is_none();
                }
                memory.latest = Some(object.clone());
            });
            versions.push(
                object["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
            deleted = kind == Some("DELETED");
            self.index(uid, kind, object, tasks).await;
            if !self.indexes_filled(tasks).await {
                return Next::default();
            }
            patch.merge(self.run_event_handlers(kind, object, tasks).await);
        }
        if deleted {
            self.memory(uid, |m| m.daemons.stop(StopReason::ObjectDeleted));
            self.forget(uid);
            return Next {
                wakeup: None,
                gone: true,
            };
        }
        let Some(body) = self.memory(uid, |memory| memory.latest.clone()) else {
            return Next::default();
        };
        // Kopf's consistency rule: after our own PATCH, wait (bounded) until its version comes
        // back before running change handlers on a state that may predate it.
        // Several writes (the object and its status) are waited for until each has come back.
        let waiting = self.memory(uid, |memory| {
            let (pending, until) = memory.awaited.as_mut()?;
            pending.retain(|version| !versions.contains(version));
            if !pending.is_empty() && *until > Instant::now() {
                return Some(*until - Instant::now());
            }
            memory.awaited = None;
            None
        });
        if let Some(remaining) = waiting {
            let wakeup = match self.write(uid, &body, patch, tasks).await {
                Ok(()) => remaining,
                Err(delay) => delay.min(remaining),
            };
            return Next {
                wakeup: Some(wakeup),
                gone: false,
            };
        }
        if !self.indexes_filled(tasks).await {
            return Next::default();
        }
        let (listed, handled_once) = self.memory(uid, |m| (m.listed, m.handled_once));
        let cycle = self
            .handle_changes(uid, &body, listed && !handled_once, tasks)
            .await;
        if cycle.handled {
            self.memory(uid, |m| m.handled_once = true);
        }
        patch.merge(cycle.patch);
        match self.write(uid, &body, patch, tasks).await {
            Ok(()) => Next {
                wakeup: cycle.wakeup,
                gone: false,
            },
            Err(delay) => Next {
                wakeup: Some(delay),
                gone: false,
            },
        }
    }

    /// Updates the operator's indexes with one event of the object.
    async fn index(&self, uid: &str, kind: Option<&str>, object: &Arc<Value>, tasks: &Tasks) {
        if self.indexers.is_empty() {
            return;
        }
        let mut states = self.memory(uid, |m| std::mem::take(&mut m.indexing));
        let event = IndexedEvent {
            object,
            listed: kind.is_none(),
            deleted: kind == Some("DELETED"),
        };
        let invocations: Vec<Option<Invocation>> = if event.deleted {
            Vec::new()
        } else {
            self.indexers
                .iter()
                .map(|handler| {
                    if !self.object_matches(&handler.options, object) {
                        return None;
                    }
                    let invocation = self.invocation(
                        object.clone(),
                        None,
                        Diff::default(),
                        None,
                        None,
                        &handler.options,
                        tasks,
                    );
                    match &handler.options.when {
                        Some(when) if !when(&invocation) => None,
                        _ => Some(invocation),
                    }
                })
                .collect()
        };
        let backoff = self.settings.execution.default_backoff;
        indexing::update(
            &self.indexes,
            &self.indexers,
            event,
            &mut states,
            backoff,
            invocations,
        )
        .await;
        self.filler.indexed(event.listed);
        self.memory(uid, |m| m.indexing = states);
    }

    /// Waits until the operator's indexes are filled after the start (at once when they are,
    /// or when this resource has only index functions); `false` when stopped first.
    async fn indexes_filled(&self, tasks: &Tasks) -> bool {
        let handles =
            !self.changes.is_empty() || !self.events.is_empty() || !self.background.is_empty();
        !handles || self.indexes.filled(tasks.token()).await
    }

    /// Sends a patch to the object and remembers the version to wait for. On failure, the
    /// delay before trying again grows with each failure in a row (Kopf's `error_delays`).
    pub(crate) async fn write(
        &self,
        uid: &str,
        body: &Value,
        mut patch: Patch,
        tasks: &Tasks,
    ) -> Result<(), Duration> {
        if patch.is_empty() {
            return Ok(());
        }
        // As Kopf's `apply`: any write also removes a touch-dummy left on the object (Kopf
        // writes one after sleeping for a delayed handler), so none stays once handled.
        let mut untouch = json!({});
        self.progress.touch(body, &mut untouch, None);
        if let Value::Object(untouch) = untouch {
            for (key, value) in untouch {
                patch.merge_raw(&key, value);
            }
        }
        let target = Target {
            client: &self.client,
            resource: &self.resource,
            namespace: body["metadata"]["namespace"].as_str(),
            name: body["metadata"]["name"].as_str().unwrap_or_default(),
            stop: tasks.token(),
        };
        let version = body["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default();
        // Writes during a stop still go out (a handler's last progress); only the abort at
        // the end of the grace period ends the wait for a permit.
        let permit = tokio::select! {
            permit = self.writes.acquire() => permit.ok(),
            _ = tasks.abort_token().cancelled() => None,
        };
        if permit.is_none() {
            return Err(Duration::ZERO);
        }
        match patching::apply(
            &target,
            patch,
            version,
            &self.settings.networking.error_backoffs,
        )
        .await
        {
            Ok(newest) => {
                let timeout = self.settings.persistence.consistency_timeout;
                self.memory(uid, |m| {
                    m.failures = 0;
                    if !newest.is_empty() && !timeout.is_zero() {
                        m.awaited = Some((newest, Instant::now() + timeout));
                    }
                });
                Ok(())
            }
            Err(error) => {
                let failures = self.memory(uid, |m| {
                    m.failures += 1;
                    m.failures
                });
                let delays = &self.settings.queueing.error_delays;
                let delay = delays
                    .get(failures - 1)
                    .or(delays.last())
                    .copied()
                    .unwrap_or(Duration::from_secs(1));
                tracing::error!(target: "kopf::patching", %error, ?delay, "patching the object failed; retrying later");
                Err(delay)
            }
        }
    }

    /// Runs the event handlers for one raw event; their errors are logged and ignored, their
    /// results and patches returned to be written.
    async fn run_event_handlers(
        &self,
        kind: Option<&'static str>,
        object: &Arc<Value>,
        tasks: &Tasks,
    ) -> Patch {
        let mut patch = Patch::default();
        for handler in &self.events {
            if !self.object_matches(&handler.options, object) {
                continue;
            }
            let mut invocation = self.invocation(
                object.clone(),
                None,
                Diff::default(),
                None,
                None,
                &handler.options,
                tasks,
            );
            invocation.event_type = kind.map(String::from);
            // As Kopf's local logger: event handlers' logs are never posted as Events.
            invocation.logger = Logger::new(
                tracing::info_span!(target: "kopf::handler", "handler", handler.id = %handler.id, object.name = invocation.name(), object.namespace = invocation.namespace()),
                Poster::disabled().events(object, &self.resource),
            );
            if handler
                .options
                .when
                .as_ref()
                .is_some_and(|when| !when(&invocation))
            {
                continue;
            }
            let written = invocation.patch.clone();
            // As Kopf: arbitrary errors are ignored, and no failure is retried (an event is not
            // seen twice); `execute` logs them.
            let options = Options {
                errors: crate::actions::invocation::ErrorsMode::Ignored,
                ..handler.options.clone()
            };
            let outcome = execution::execute(
                &handler.id,
                &handler.function,
                &options,
                Duration::ZERO,
                invocation,
            )
            .await;
            patch.merge(std::mem::take(
                &mut *written
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            ));
            if let Outcome::Success(Some(result)) = outcome {
                deliver(&mut patch, &handler.id, result);
            }
        }
        patch
    }

    /// Whether the object passes a handler's label and annotation filters.
    fn object_matches(&self, options: &Options, body: &Value) -> bool {
        filters::match_labels(&options.labels, body["metadata"]["labels"].as_object())
            && filters::match_labels(
                &options.annotations,
                body["metadata"]["annotations"].as_object(),
            )
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "an invocation has that many parts"
    )]
    pub(crate) fn invocation(
        &self,
        body: Arc<Value>,
        reason: Option<Reason>,
        diff: Diff,
        old: Option<Value>,
        new: Option<Value>,
        options: &Options,
        tasks: &Tasks,
    ) -> Invocation {
        let events = self.poster.events(&body, &self.resource);
        let uid = body["metadata"]["uid"].as_str().unwrap_or_default();
        let memo = self.memory(uid, |memory| {
            memory
                .memo
                .get_or_insert_with(|| self.memo.shallow_copy())
                .clone()
        });
        Invocation {
            body,
            resource: self.resource.clone(),
            reason,
            event_type: None,
            diff,
            old,
            new,
            retry: 0,
            started: time::OffsetDateTime::now_utc(),
            param: options.param.clone(),
            patch: Arc::default(),
            client: self.client.clone(),
            node: tasks.child(),
            logger: Logger::new(tracing::Span::none(), events.clone()),
            events,
            memo,
            indexes: self.indexes.clone(),
            subhandlers: Default::default(),
        }
    }

    /// The daemons and timers whose filters the object passes.
    fn matching_background(&self, body: &Arc<Value>, tasks: &Tasks) -> Vec<&Background> {
        self.background
            .iter()
            .filter(|h| self.object_matches(h.options(), body))
            .filter(|h| match &h.options().when {
                Some(when) => when(&self.invocation(
                    body.clone(),
                    None,
                    Diff::default(),
                    None,
                    None,
                    h.options(),
                    tasks,
                )),
                None => true,
            })
            .collect()
    }

    /// Starts the object's matching daemons and timers that do not run yet; stops the others.
    fn spawn(
        self: &Arc<Self>,
        uid: &str,
        body: &Arc<Value>,
        matching: &[&Background],
        tasks: &Tasks,
    ) {
        if self.background.is_empty() {
            return;
        }
        self.memory(uid, |m| {
            m.daemons.reconcile(
                matching,
                body,
                |handler, live, tasks| daemons::start(self.clone(), uid, handler, live, tasks),
                tasks,
            );
        });
    }

    /// Asks the object's daemons and timers to stop because it is deleted, and waits a little
    /// for them to end; `true` when none runs any more.
    async fn daemons_ended(&self, uid: &str) -> bool {
        let ended = self.memory(uid, |m| {
            m.daemons.stop(StopReason::ObjectDeleted);
            m.daemons.ended()
        });
        match ended {
            None => true,
            Some(ended) => tokio::time::timeout(DAEMONS_POLLING, ended).await.is_ok(),
        }
    }

    /// The essence of the object as Kopf defines it, without our own progress keys.
    fn essence(&self, body: &Value) -> Value {
        let mut essence = self.diffbase.build(body, &self.extra_fields);
        self.progress.clear(&mut essence);
        essence
    }

    async fn handle_changes(
        self: &Arc<Self>,
        uid: &str,
        body: &Arc<Value>,
        initial: bool,
        tasks: &Tasks,
    ) -> Cycle {
        let mut cycle = Cycle::default();
        let finalizer = &self.settings.persistence.finalizer;
        let finalizers = body["metadata"].get("finalizers");
        let has_finalizer = finalizers
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|x| x == finalizer.as_str()));
        let deleting = !body["metadata"]["deletionTimestamp"].is_null();
        let matching: Vec<&ChangeHandler> = self
            .changes
            .iter()
            .filter(|h| self.object_matches(&h.options, body))
            .collect();
        let background = self.matching_background(body, tasks);
        if !self.background.is_empty() {
            let essence = self.idle_timers.then(|| self.essence(body));
            self.memory(uid, |m| m.daemons.observe(body, essence));
        }
        if matching.is_empty() && background.is_empty() {
            // Kopf's prematch: nothing here concerns this object; leave it as it is (but stop
            // the daemons whose filters it no longer passes).
            self.spawn(uid, body, &[], tasks);
            return cycle;
        }
        let needs_finalizer =
            !background.is_empty() || matching.iter().any(|h| h.requires_finalizer());
        if !deleting && needs_finalizer && !has_finalizer {
            cycle
                .patch
                .operation(patching::add_finalizer(finalizers, finalizer));
            return cycle;
        }
        if !deleting && !needs_finalizer && has_finalizer {
            self.spawn(uid, body, &[], tasks);
            if let Some(operation) = patching::remove_finalizer(finalizers, finalizer) {
                cycle.patch.operation(operation);
            }
            return cycle;
        }
        if deleting && !has_finalizer {
            // Kopf's FREE: the object is going, nothing holds it for us.
            self.memory(uid, |m| m.daemons.stop(StopReason::ObjectDeleted));
            return cycle;
        }
        if !deleting {
            self.spawn(uid, body, &background, tasks);
        } else if !self.daemons_ended(uid).await {
            // The deletion handlers run once the daemons and timers have ended.
            cycle.wakeup = Some(DAEMONS_POLLING);
            return cycle;
        }
        if matching.is_empty() {
            // Only daemons and timers concern this object: no diff-base, no progress.
            if deleting && let Some(operation) = patching::remove_finalizer(finalizers, finalizer) {
                cycle.patch.operation(operation);
            }
            return cycle;
        }

        let old = self.diffbase.fetch(body).map(|mut old| {
            self.progress.clear(&mut old);
            old
        });
        let new = self.essence(body);
        let diff = diff::diff(old.as_ref(), Some(&new));
        let reason = if deleting {
            Reason::Delete
        } else if old.is_none() {
            Reason::Create
        } else if diff.is_empty() && initial {
            Reason::Resume
        } else if diff.is_empty() {
            return cycle; // NOOP
        } else {
            Reason::Update
        };
        let selected: Vec<(&ChangeHandler, Diff, Option<Value>, Option<Value>)> = matching
            .into_iter()
            .filter_map(|handler| {
                let runs = match handler.trigger {
                    Trigger::Create => reason == Reason::Create,
                    Trigger::Update => reason == Reason::Update,
                    Trigger::Delete { .. } => reason == Reason::Delete,
                    Trigger::Resume { deleted } => {
                        initial && (reason != Reason::Delete || deleted) && reason != Reason::Create
                    }
                    Trigger::Field => {
                        matches!(reason, Reason::Create | Reason::Update | Reason::Resume)
                    }
                };
                if !runs {
                    return None;
                }
                let (diff, old, new) = match &handler.options.field {
                    Some(field) => {
                        let narrowed = diff.reduce(field);
                        let old_value = old.as_ref().and_then(|o| diff::resolve(o, field)).cloned();
                        let new_value = diff::resolve(&new, field).cloned();
                        let needs_change =
                            matches!(handler.trigger, Trigger::Field | Trigger::Update);
                        if needs_change && reason != Reason::Resume && narrowed.is_empty() {
                            return None;
                        }
                        let o = &handler.options;
                        if !filters::match_field_change(
                            o.value.as_ref(),
                            o.old.as_ref(),
                            o.new.as_ref(),
                            old_value.as_ref(),
                            new_value.as_ref(),
                        ) {
                            return None;
                        }
                        (narrowed, old_value, new_value)
                    }
                    None => (diff.clone(), old.clone(), Some(new.clone())),
                };
                Some((handler, diff, old, new))
            })
            .collect();
        let selected: Vec<_> = selected
            .into_iter()
            .filter(|(handler, diff, old, new)| match &handler.options.when {
                Some(when) => when(&self.invocation(
                    body.clone(),
                    Some(reason),
                    diff.clone(),
                    old.clone(),
                    new.clone(),
                    &handler.options,
                    tasks,
                )),
                None => true,
            })
            .collect();

        // Progress: records of another purpose are stale (superseded) and start afresh.
        let now = crate::configs::storage::timestamps::now();
        let mut records: BTreeMap<String, ProgressRecord> = BTreeMap::new();
        for (handler, ..) in &selected {
            let id = HandlerId::new(handler.id.as_str());
            let record = self
                .progress
                .fetch(&id, body)
                .filter(|r| r.purpose.as_deref().is_none_or(|p| p == reason.as_str()))
                .unwrap_or_default();
            records.insert(handler.id.clone(), record);
        }
        let is_done = |r: &ProgressRecord| r.success || r.failure;
        let due = |r: &ProgressRecord| r.delayed.is_none_or(|d| d <= now);
        // As Kopf, the lifecycle plans among the awakened handlers, in registration order.
        let awakened: Vec<_> = selected
            .iter()
            .filter(|(h, ..)| records.get(&h.id).is_some_and(|r| !is_done(r) && due(r)))
            .collect();
        let retries: Vec<u32> = awakened
            .iter()
            .map(|(h, ..)| records.get(&h.id).map_or(0, |r| r.retries))
            .collect();
        let plan = self.settings.execution.lifecycle.plan(&retries);
        let mut merge = json!({});
        let mut finished_any = false;
        for (handler, narrowed, old_value, new_value) in plan.into_iter().map(|i| awakened[i]) {
            let record = records.get(&handler.id).cloned().unwrap_or_default();
            let started = record.started.unwrap_or(now);
            let mut invocation = self.invocation(
                body.clone(),
                Some(reason),
                narrowed.clone(),
                old_value.clone(),
                new_value.clone(),
                &handler.options,
                tasks,
            );
            invocation.retry = record.retries;
            invocation.started = started;
            invocation.logger.span = tracing::info_span!(target: "kopf::handler", "handler", handler.id = %handler.id, object.name = invocation.name(), object.namespace = invocation.namespace(), reason = %reason);
            let patch = invocation.patch.clone();
            let logger = invocation.logger.clone();
            let subhandlers = invocation.subhandlers.clone();
            let outcome = execution::execute(
                &handler.id,
                &handler.function,
                &handler.options,
                self.settings.execution.default_backoff,
                invocation,
            )
            .await;
            cycle.patch.merge(take(&patch));
            let mut subrefs = record.subrefs.clone();
            let context = Context {
                body,
                reason,
                diff: narrowed,
                old: old_value,
                new: new_value,
                tasks,
            };
            let outcome = self
                .with_subhandlers(
                    &handler.id,
                    outcome,
                    &subhandlers,
                    &context,
                    &mut records,
                    &mut cycle.patch,
                    &mut subrefs,
                    &logger,
                )
                .await;
            let Some(mut updated) = settle(
                &handler.id,
                &record,
                started,
                reason,
                outcome,
                &mut cycle.patch,
            ) else {
                // Stopping: no more handlers; keep what the finished ones did, if any.
                if finished_any {
                    break;
                }
                return cycle;
            };
            updated.subrefs = subrefs;
            records.insert(handler.id.clone(), updated);
            finished_any = true;
        }

        let all_done = records.values().all(is_done);
        if all_done {
            let mut purged: Vec<HandlerId> = Vec::new();
            for (id, record) in &records {
                purged.push(HandlerId::new(id.as_str()));
                purged.extend(record.subrefs.iter().cloned());
            }
            for (handler, ..) in &selected {
                purged.push(HandlerId::new(handler.id.as_str()));
            }
            purged.sort_by(|a, b| a.as_str().cmp(b.as_str()));
            purged.dedup();
            for id in &purged {
                self.progress.purge(id, body, &mut merge);
            }
            if reason == Reason::Delete {
                if let Some(operation) = patching::remove_finalizer(finalizers, finalizer) {
                    cycle.patch.operation(operation);
                }
            } else if old.as_ref() != Some(&new) {
                self.diffbase.store(body, &new, &mut merge);
            }
            cycle.handled = true;
            // Sub-handlers are counted in their parents.
            let top: Vec<&ProgressRecord> = records
                .iter()
                .filter(|(id, _)| selected.iter().any(|(h, ..)| h.id == **id))
                .map(|(_, record)| record)
                .collect();
            if !top.is_empty() {
                let succeeded = top.iter().filter(|r| r.success).count();
                let failed = top.iter().filter(|r| r.failure).count();
                let logger = Logger::new(
                    tracing::info_span!(target: "kopf::handler", "object", object.name = body["metadata"]["name"].as_str(), object.namespace = body["metadata"]["namespace"].as_str(), reason = %reason),
                    self.poster.events(body, &self.resource),
                );
                logger.info(format_args!(
                    "{} is processed: {succeeded} succeeded; {failed} failed.",
                    title(reason)
                ));
            }
        } else {
            for (id, record) in &records {
                let stored = self.progress.fetch(&HandlerId::new(id.as_str()), body);
                if stored.as_ref() != Some(record) {
                    self.progress
                        .store(&HandlerId::new(id.as_str()), record, body, &mut merge);
                }
            }
            let now = crate::configs::storage::timestamps::now();
            cycle.wakeup = records
                .values()
                .filter(|r| !is_done(r))
                .map(|r| {
                    r.delayed
                        .map(|d| (d - now).try_into().unwrap_or(Duration::ZERO))
                        .unwrap_or(Duration::ZERO)
                })
                .min();
        }
        if let Value::Object(merge) = merge {
            for (key, value) in merge {
                cycle.patch.merge_raw(&key, value);
            }
        }
        cycle
    }
}

impl ObjectProcessor for Processor {
    fn resource(&self) -> &Resource {
        &self.resource
    }

    /// Counts a queued event for the filling of the indexes (see `structs::indexes`,
    /// invariant 2).
    fn expect(&self, event: &Event) {
        if !self.indexers.is_empty() {
            self.filler.expect(matches!(event, Event::Listed(_)));
        }
    }

    fn process<'a>(
        self: Arc<Self>,
        uid: &'a str,
        batch: Vec<Event>,
        tasks: &'a Tasks,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Next> + Send + 'a>> {
        Box::pin(async move { Processor::process(&self, uid, batch, tasks).await })
    }

    /// An operator at rest keeps a few flags per object, not the objects (the next event
    /// brings the state again).
    fn release(&self, uid: &str) {
        if let Some(memory) = self
            .memories
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_mut(uid)
        {
            memory.latest = None;
        }
    }
}

impl DaemonHost for Processor {
    fn invocation(&self, body: Arc<Value>, options: &Options, node: &Tasks) -> Invocation {
        Processor::invocation(self, body, None, Diff::default(), None, None, options, node)
    }

    fn default_backoff(&self) -> Duration {
        self.settings.execution.default_backoff
    }

    fn write<'a>(
        &'a self,
        uid: &'a str,
        body: &'a Value,
        patch: Patch,
        node: &'a Tasks,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            // A failed write is logged and retried by the object's next cycle.
            let _ = Processor::write(self, uid, body, patch, node).await;
        })
    }
}

/// Kopf's title of a cause, capitalized, for the log lines.
fn title(reason: Reason) -> &'static str {
    match reason {
        Reason::Create => "Creation",
        Reason::Update => "Updating",
        Reason::Delete => "Deletion",
        Reason::Resume => "Resuming",
    }
}

/// What one processing cycle produced.
#[derive(Debug, Default)]
struct Cycle {
    patch: Patch,
    wakeup: Option<Duration>,
    handled: bool,
}

/// Takes what a handler put in its patch.
fn take(patch: &Mutex<Patch>) -> Patch {
    std::mem::take(
        &mut *patch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
}

/// A handler's progress record after an attempt (which `execute` logged), with its result
/// delivered to the patch; `None` when the attempt was aborted (nothing to record).
fn settle(
    id: &str,
    record: &ProgressRecord,
    started: time::OffsetDateTime,
    reason: Reason,
    outcome: Outcome,
    patch: &mut Patch,
) -> Option<ProgressRecord> {
    let finished = crate::configs::storage::timestamps::now();
    let mut updated = record.clone();
    updated.started = Some(started);
    updated.purpose = Some(reason.as_str().to_string());
    updated.retries = record.retries + 1;
    match outcome {
        Outcome::Success(result) => {
            updated.success = true;
            updated.stopped = Some(finished);
            updated.delayed = None;
            updated.message = None;
            if let Some(result) = result {
                deliver(patch, id, result);
            }
        }
        Outcome::Failure(message) => {
            updated.failure = true;
            updated.stopped = Some(finished);
            updated.delayed = None;
            updated.message = Some(message);
        }
        Outcome::Retry { delay, message } => {
            let at = finished + time::Duration::try_from(delay).unwrap_or(time::Duration::ZERO);
            updated.delayed = Some(at);
            updated.message = (!message.is_empty()).then_some(message);
        }
        Outcome::Aborted => return None,
    }
    Some(updated)
}

/// Logs how a parent stands once its sub-handlers settled, as Kopf's `execute` does for a
/// handler that registered some.
fn report_parent(id: &str, outcome: &Outcome, logger: &Logger) {
    match outcome {
        Outcome::Success(_) => logger.info(format_args!("Handler '{id}' succeeded.")),
        Outcome::Failure(message) => {
            logger.error(format_args!("Handler '{id}' failed permanently: {message}"));
        }
        Outcome::Retry { .. } => {
            tracing::debug!(target: "kopf::handler", parent: logger.span(), "Handler '{id}' has unfinished sub-handlers. Will retry soon.");
        }
        Outcome::Aborted => {}
    }
}

/// What the handlers of one cause see, for the sub-handlers of one of them.
struct Context<'a> {
    body: &'a Arc<Value>,
    reason: Reason,
    diff: &'a Diff,
    old: &'a Option<Value>,
    new: &'a Option<Value>,
    tasks: &'a Tasks,
}

/// How the sub-handlers of a parent stand after a cycle.
struct Settled {
    /// Their ids (`parent/child`), at any depth.
    ids: Vec<String>,
    /// `Success` when all succeeded, `Failure` when all finished and some failed, `Retry`
    /// (with an empty message) while some are unfinished, `Aborted` when stopping.
    outcome: Outcome,
}

impl Processor {
    /// After a handler's call: runs the sub-handlers it registered, if any, adds their ids to
    /// `subrefs`, and tells how the handler stands (its own outcome when it registered none).
    #[allow(
        clippy::too_many_arguments,
        reason = "the parent's record and the cycle's state, lent for the call"
    )]
    async fn with_subhandlers(
        self: &Arc<Self>,
        id: &str,
        outcome: Outcome,
        registered: &SubHandlers,
        context: &Context<'_>,
        records: &mut BTreeMap<String, ProgressRecord>,
        patch: &mut Patch,
        subrefs: &mut Vec<HandlerId>,
        logger: &Logger,
    ) -> Outcome {
        let Outcome::Success(result) = &outcome else {
            return outcome;
        };
        let children = registered.take();
        if children.is_empty() {
            return outcome;
        }
        let settled = self
            .run_subhandlers(id, children, context, records, patch)
            .await;
        for nested in settled.ids {
            let nested = HandlerId::new(nested.as_str());
            if !subrefs.contains(&nested) {
                subrefs.push(nested);
            }
        }
        let outcome = match settled.outcome {
            Outcome::Success(_) => Outcome::Success(result.clone()),
            other => other,
        };
        report_parent(id, &outcome, logger);
        outcome
    }

    /// Runs the due sub-handlers that a parent registered (in the lifecycle's order), records
    /// their progress in `records`, and tells how they stand.
    fn run_subhandlers<'a>(
        self: &'a Arc<Self>,
        parent: &'a str,
        children: Vec<SubHandler>,
        context: &'a Context<'a>,
        records: &'a mut BTreeMap<String, ProgressRecord>,
        patch: &'a mut Patch,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Settled> + Send + 'a>> {
        Box::pin(async move {
            let body = context.body;
            let reason = context.reason;
            let now = crate::configs::storage::timestamps::now();
            let ids: Vec<String> = children
                .iter()
                .map(|c| format!("{parent}/{}", c.id))
                .collect();
            for id in &ids {
                if !records.contains_key(id) {
                    let record = self
                        .progress
                        .fetch(&HandlerId::new(id.as_str()), body)
                        .filter(|r| r.purpose.as_deref().is_none_or(|p| p == reason.as_str()))
                        .unwrap_or_default();
                    records.insert(id.clone(), record);
                }
            }
            let is_done = |r: &ProgressRecord| r.success || r.failure;
            let due = |r: &ProgressRecord| r.delayed.is_none_or(|d| d <= now);
            let awakened: Vec<usize> = (0..children.len())
                .filter(|&i| records.get(&ids[i]).is_some_and(|r| !is_done(r) && due(r)))
                .collect();
            let retries: Vec<u32> = awakened
                .iter()
                .map(|&i| records.get(&ids[i]).map_or(0, |r| r.retries))
                .collect();
            let mut all_ids = ids.clone();
            for i in self
                .settings
                .execution
                .lifecycle
                .plan(&retries)
                .into_iter()
                .map(|i| awakened[i])
            {
                let (child, id) = (&children[i], &ids[i]);
                let record = records.get(id).cloned().unwrap_or_default();
                let started = record.started.unwrap_or(now);
                let mut invocation = self.invocation(
                    body.clone(),
                    Some(reason),
                    context.diff.clone(),
                    context.old.clone(),
                    context.new.clone(),
                    &child.options,
                    context.tasks,
                );
                invocation.retry = record.retries;
                invocation.started = started;
                invocation.logger.span = tracing::info_span!(target: "kopf::handler", "handler", handler.id = %id, object.name = invocation.name(), object.namespace = invocation.namespace(), reason = %reason);
                let written = invocation.patch.clone();
                let logger = invocation.logger.clone();
                let grandchildren = invocation.subhandlers.clone();
                let outcome = execution::execute(
                    id,
                    &child.function,
                    &child.options,
                    self.settings.execution.default_backoff,
                    invocation,
                )
                .await;
                patch.merge(take(&written));
                let mut subrefs = record.subrefs.clone();
                let outcome = self
                    .with_subhandlers(
                        id,
                        outcome,
                        &grandchildren,
                        context,
                        records,
                        patch,
                        &mut subrefs,
                        &logger,
                    )
                    .await;
                let Some(mut updated) = settle(id, &record, started, reason, outcome, patch) else {
                    return Settled {
                        ids: all_ids,
                        outcome: Outcome::Aborted,
                    };
                };
                updated.subrefs = subrefs;
                records.insert(id.clone(), updated);
            }
            for id in &ids {
                if let Some(record) = records.get(id) {
                    all_ids.extend(record.subrefs.iter().map(|s| s.as_str().to_string()));
                }
            }
            all_ids.sort();
            all_ids.dedup();
            let pending: Vec<&ProgressRecord> = ids
                .iter()
                .filter_map(|id| records.get(id))
                .filter(|r| !is_done(r))
                .collect();
            let outcome = if pending.is_empty() {
                let failed: Vec<&str> = ids
                    .iter()
                    .filter(|id| records.get(*id).is_some_and(|r| r.failure))
                    .map(String::as_str)
                    .collect();
                if failed.is_empty() {
                    Outcome::Success(None)
                } else {
                    Outcome::Failure(format!("sub-handlers failed: {}", failed.join(", ")))
                }
            } else {
                let now = crate::configs::storage::timestamps::now();
                let delay = pending
                    .iter()
                    .map(|r| {
                        r.delayed.map_or(Duration::ZERO, |d| {
                            (d - now).try_into().unwrap_or(Duration::ZERO)
                        })
                    })
                    .min()
                    .unwrap_or(Duration::ZERO);
                Outcome::Retry {
                    delay,
                    message: String::new(),
                }
            };
            Settled {
                ids: all_ids,
                outcome,
            }
        })
    }
}
