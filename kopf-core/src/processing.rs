//! One object's events, processed: event handlers for every event; then, for the newest
//! state, the finalizer, the cause (Kopf's detection), the due change handlers that the
//! lifecycle picks (one by default: Kopf's `asap`), their progress records and results, and
//! the patch that stores all of it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::diff::{self, Diff};
use crate::execution::{self, Outcome};
use crate::filters;
use crate::handlers::{ChangeHandler, EventHandler, Invocation, Options, Reason, Trigger};
use crate::memos::Memo;
use crate::patch::Patch;
use crate::patching::{self, Target};
use crate::posting::{Logger, Poster};
use crate::registry::Registry;
use crate::resources::{Resource, Selector};
use crate::settings::Settings;
use crate::storage::{DiffBaseStorage, HandlerId, ProgressRecord, ProgressStorage};
use crate::tasks::Tasks;
use crate::watching::Event;

/// What a worker should do after processing.
#[derive(Debug, Default)]
pub(crate) struct Next {
    /// Process the object again after this delay, even without new events (a retry is due).
    pub(crate) wakeup: Option<Duration>,
    /// The object is gone: the worker may end.
    pub(crate) gone: bool,
}

/// What the operator remembers of an object between events (Kopf's memories).
#[derive(Debug, Default)]
struct Memory {
    /// First seen in a listing (not a watch event): resume handlers apply.
    listed: bool,
    /// A cause was completely handled since the operator started: no more resuming.
    handled_once: bool,
    /// The newest state seen.
    latest: Option<Arc<Value>>,
    /// After our own PATCH: the version to wait for, and until when.
    awaited: Option<(String, Instant)>,
    /// Failed writes in a row, for throttling.
    failures: usize,
    /// The object's memo: a shallow copy of the operator's, made on first sight.
    memo: Option<Memo>,
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
}

/// Processes the objects of one resource.
pub(crate) struct Processor {
    client: kube::Client,
    resource: Resource,
    changes: Vec<ChangeHandler>,
    events: Vec<EventHandler>,
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
            settings,
            extra_fields,
            memories: Mutex::default(),
            poster: common.poster,
            memo: common.memo,
            writes: common.writes,
        }
    }

    /// A label selector to send to the server: when every handler of this resource filters
    /// on the same plain labels, objects without them need not be watched at all.
    pub(crate) fn label_selector(&self) -> Option<String> {
        let mut all = self
            .changes
            .iter()
            .map(|h| &h.options.labels)
            .chain(self.events.iter().map(|h| &h.options.labels));
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
    pub(crate) async fn process(&self, uid: &str, batch: Vec<Event>, tasks: &Tasks) -> Next {
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
                if memory.latest.is_none() && kind.is_none() {
                    memory.listed = true;
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
            patch.merge(self.run_event_handlers(kind, object, tasks).await);
        }
        if deleted {
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
        let waiting = self.memory(uid, |memory| match &memory.awaited {
            Some((version, _)) if versions.contains(version) => {
                memory.awaited = None;
                None
            }
            Some((_, until)) if *until > Instant::now() => Some(*until - Instant::now()),
            Some(_) => {
                memory.awaited = None;
                None
            }
            None => None,
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
        let (listed, handled_once) = self.memory(uid, |m| (m.listed, m.handled_once));
        let cycle = self
            .handle_changes(&body, listed && !handled_once, tasks)
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

    /// Sends a patch to the object and remembers the version to wait for. On failure, the
    /// delay before trying again grows with each failure in a row (Kopf's `error_delays`).
    async fn write(
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
                    if let Some(newest) = newest.filter(|_| !timeout.is_zero()) {
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
            invocation.logger.span = tracing::info_span!(target: "kopf::handler", "handler", handler.id = %handler.id, object.name = invocation.name(), object.namespace = invocation.namespace());
            if handler
                .options
                .when
                .as_ref()
                .is_some_and(|when| !when(&invocation))
            {
                continue;
            }
            let written = invocation.patch.clone();
            let span = invocation.logger.span.clone();
            // Failures are reported, never retried: an event is not seen twice.
            let options = Options {
                errors: crate::handlers::ErrorsMode::Permanent,
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
            if let Outcome::Success(_) = outcome {
                // Logged as Kopf does, but never posted: event handlers are silent.
                tracing::info!(target: "kopf::objects", parent: &span, "Handler '{}' succeeded.", handler.id);
            }
            match outcome {
                Outcome::Success(Some(result)) => deliver(&mut patch, &handler.id, result),
                Outcome::Failure(message) | Outcome::Retry { message, .. } => {
                    tracing::warn!(target: "kopf::handler", handler = %handler.id, %message, "an event handler failed (ignored)");
                }
                Outcome::Success(None) | Outcome::Aborted => {}
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
    fn invocation(
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
        }
    }

    /// The essence of the object as Kopf defines it, without our own progress keys.
    fn essence(&self, body: &Value) -> Value {
        let mut essence = self.diffbase.build(body, &self.extra_fields);
        self.progress.clear(&mut essence);
        essence
    }

    async fn handle_changes(&self, body: &Arc<Value>, initial: bool, tasks: &Tasks) -> Cycle {
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
        if matching.is_empty() {
            // Kopf's prematch: nothing here concerns this object; leave it as it is.
            return cycle;
        }
        let needs_finalizer = matching.iter().any(|h| h.requires_finalizer());
        if !deleting && needs_finalizer && !has_finalizer {
            cycle
                .patch
                .operation(patching::add_finalizer(finalizers, finalizer));
            return cycle;
        }
        if !deleting && !needs_finalizer && has_finalizer {
            if let Some(operation) = patching::remove_finalizer(finalizers, finalizer) {
                cycle.patch.operation(operation);
            }
            return cycle;
        }
        if deleting && !has_finalizer {
            return cycle; // Kopf's FREE: the object is going, nothing holds it for us.
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
        let now = crate::storage::timestamps::now();
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
            let outcome = execution::execute(
                &handler.id,
                &handler.function,
                &handler.options,
                self.settings.execution.default_backoff,
                invocation,
            )
            .await;
            let user_patch = std::mem::take(
                &mut *patch
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            cycle.patch.merge(user_patch);
            let finished = crate::storage::timestamps::now();
            let mut updated = record.clone();
            updated.started = Some(started);
            updated.purpose = Some(reason.as_str().to_string());
            updated.retries = record.retries + 1;
            match outcome {
                Outcome::Success(result) => {
                    logger.info(format_args!("Handler '{}' succeeded.", handler.id));
                    updated.success = true;
                    updated.stopped = Some(finished);
                    updated.delayed = None;
                    updated.message = None;
                    if let Some(result) = result {
                        deliver(&mut cycle.patch, &handler.id, result);
                    }
                }
                Outcome::Failure(message) => {
                    logger.error(format_args!(
                        "Handler '{}' failed permanently: {message}",
                        handler.id
                    ));
                    updated.failure = true;
                    updated.stopped = Some(finished);
                    updated.delayed = None;
                    updated.message = Some(message);
                }
                Outcome::Retry { delay, message } => {
                    // As Kopf, at ERROR; the delay goes to a DEBUG line.
                    logger.error(format_args!(
                        "Handler '{}' failed temporarily: {message}",
                        handler.id
                    ));
                    tracing::debug!(target: "kopf::handler", parent: logger.span(), ?delay, "retrying after the delay");
                    let at =
                        finished + time::Duration::try_from(delay).unwrap_or(time::Duration::ZERO);
                    updated.delayed = Some(at);
                    updated.message = Some(message);
                }
                // Stopping: no more handlers; keep what the finished ones did, if any.
                Outcome::Aborted if finished_any => break,
                Outcome::Aborted => return cycle,
            }
            records.insert(handler.id.clone(), updated);
            finished_any = true;
        }

        let all_done = records.values().all(is_done);
        if all_done {
            for (handler, ..) in &selected {
                self.progress
                    .purge(&HandlerId::new(handler.id.as_str()), body, &mut merge);
            }
            if reason == Reason::Delete {
                if let Some(operation) = patching::remove_finalizer(finalizers, finalizer) {
                    cycle.patch.operation(operation);
                }
            } else if old.as_ref() != Some(&new) {
                self.diffbase.store(body, &new, &mut merge);
            }
            cycle.handled = true;
            if !records.is_empty() {
                let succeeded = records.values().filter(|r| r.success).count();
                let failed = records.values().filter(|r| r.failure).count();
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
            let now = crate::storage::timestamps::now();
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

/// Kopf's result delivery: a map merges into `status.<id>`, anything else replaces it.
fn deliver(patch: &mut Patch, id: &str, result: Value) {
    match result {
        Value::Object(map) => {
            let status = patch.status();
            let entry = status.entry(id.to_string()).or_insert_with(|| json!({}));
            if !entry.is_object() {
                *entry = json!({});
            }
            if let Some(existing) = entry.as_object_mut() {
                existing.extend(map);
            }
        }
        Value::Null => {}
        other => {
            patch.status().insert(id.to_string(), other);
        }
    }
}
