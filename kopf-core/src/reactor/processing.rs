//! One object's events, processed: event handlers and indexes for every event; then, for the
//! newest state, the finalizer, the daemons, the cause (`causes`), the due change handlers
//! that the lifecycle picks (`progress`; one by default: Kopf's `asap`) with their
//! sub-handlers (`subhandling`), and the patch that stores their records and results.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

mod roles;

use crate::actions::delivery::deliver;
use crate::actions::execution::{self, Outcome};
use crate::actions::invocation::{ErrorsMode, Invocation, Options, Reason};
use crate::aiokits::tasks::{StopReason, Tasks};
use crate::clients::patching;
use crate::clients::posting::{Logger, Poster};
use crate::clients::watching::Event;
use crate::configs::settings::Settings;
use crate::configs::storage::timestamps;
use crate::configs::storage::{DiffBaseStorage, ProgressRecord, ProgressStorage};
use crate::engines::daemons;
use crate::engines::indexing::{self, IndexedEvent};
use crate::engines::ownership::{Ownership, Permit};
use crate::engines::pausing::Fence;
use crate::intents::daemons::Background;
use crate::intents::handlers::{ChangeHandler, EventHandler, Trigger};
use crate::intents::indexing::IndexHandler;
use crate::intents::registry::{Registered as _, Registry, deduplicated};
use crate::reactor::causes::{self, Selected};
use crate::reactor::invocations::{Change, Invocations};
use crate::reactor::memories::{Memories, Memory};
use crate::reactor::progress::{self, Records};
use crate::reactor::queueing::{Held, Next, Observed};
use crate::reactor::subhandling::{Cause, SubHandling};
use crate::reactor::writing::{Unread, Unwritten, Writer};
use crate::structs::bodies::Body;
use crate::structs::diff;
use crate::structs::filters;
use crate::structs::indexes::{Filler, Indexes};
use crate::structs::memos::{Memo, ObjectMemos};
use crate::structs::patch::Patch;
use crate::structs::resources::{Resource, Selector};

/// How long a deletion waits for the object's daemons and timers to end before checking again.
const DAEMONS_POLLING: Duration = Duration::from_secs(1);

/// What the processors of one operator share.
#[derive(Debug, Clone)]
pub(crate) struct Common {
    /// Posts Kubernetes Events.
    pub(crate) poster: Poster,
    /// The operator's memo, copied into each object's on first sight.
    pub(crate) memo: Memo,
    /// The objects' memos, shared with admission reviews.
    pub(crate) memos: ObjectMemos,
    /// Permits for writes in flight.
    pub(crate) writes: Arc<tokio::sync::Semaphore>,
    /// The operator's indexes.
    pub(crate) indexes: Indexes,
    /// Open while the operator may act on objects (always, but for a Lease leader past its
    /// term, or an owner of shards past its member's): no handler starts and nothing is
    /// written while it is closed.
    pub(crate) fence: Fence,
    /// With assigned shards: which shards are open here. An object whose shard is not is let
    /// go of; one whose shard is not held is not written.
    pub(crate) ownership: Option<Arc<Ownership>>,
}

/// Processes the objects of one resource.
pub(crate) struct Processor {
    /// What every invocation of this resource's handlers carries.
    invocations: Invocations,
    changes: Vec<ChangeHandler>,
    events: Vec<EventHandler>,
    background: Vec<Arc<Background>>,
    indexers: Vec<IndexHandler>,
    filler: Filler,
    /// Whether some timer waits for objects to be idle (so their essence is compared).
    idle_timers: bool,
    settings: Settings,
    progress: Arc<dyn ProgressStorage>,
    diffbase: Arc<dyn DiffBaseStorage>,
    extra_fields: Vec<Vec<String>>,
    memories: Memories,
    /// The operator's memo, copied into each object's on first sight.
    memo: Memo,
    memos: ObjectMemos,
    /// Open while the operator may act on objects: no handler starts while it is closed.
    fence: Fence,
    /// With assigned shards: which shards are open here.
    ownership: Option<Arc<Ownership>>,
    /// Writes what the handlers did.
    writer: Writer,
    /// Runs the sub-handlers of change handlers.
    subhandling: Arc<SubHandling>,
}

/// What an event shows of its object: its kind (`None` for a listing), the object, and
/// whether it is a raw event for event handlers. A vanished object is forgotten as a deleted
/// one is; but it is no raw event (only its identity is known): event handlers do not see it.
fn seen(event: &Event) -> Option<(Option<&'static str>, &Arc<Body>, bool)> {
    match event {
        Event::Listed(object) => Some((None, object, true)),
        Event::Changed(kind, object) => Some((Some(*kind), object, true)),
        Event::Vanished(object) => Some((Some("DELETED"), object, false)),
        Event::ListingDone => None,
    }
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
        let background: Vec<Arc<Background>> = registry
            .background_for(selectors)
            .map(|handler| Arc::new(handler.clone()))
            .collect();
        // As Kopf: the fields of change and event handlers, daemons and timers (not of index
        // functions) are compared between states, wherever they are (`status.phase`).
        let mut extra_fields: Vec<Vec<String>> = Vec::new();
        let fields = changes
            .iter()
            .map(|h| &h.options)
            .chain(events.iter().map(|h| &h.options))
            .chain(background.iter().map(|h| h.options()))
            .filter_map(|options| options.field.as_ref());
        for field in fields {
            if !extra_fields.contains(field) {
                extra_fields.push(field.clone());
            }
        }
        let client = Arc::new(client);
        let resource = Arc::new(resource);
        let writer = Writer::new(
            client.clone(),
            resource.clone(),
            &settings,
            common.writes,
            common.fence.clone(),
            common.ownership.clone(),
        );
        let invocations = Invocations {
            client,
            resource,
            poster: common.poster,
            indexes: common.indexes.clone(),
        };
        let subhandling = Arc::new(SubHandling {
            invocations: invocations.clone(),
            progress: settings.persistence.progress_storage.clone(),
            default_backoff: settings.execution.default_backoff,
        });
        Processor {
            progress: settings.persistence.progress_storage.clone(),
            diffbase: settings.persistence.diffbase_storage.clone(),
            invocations,
            subhandling,
            changes,
            events,
            idle_timers: background.iter().any(|handler| handler.waits_for_idle()),
            background,
            settings,
            extra_fields,
            memories: Memories::default(),
            memo: common.memo,
            memos: common.memos,
            fence: common.fence,
            ownership: common.ownership,
            writer,
            indexers: registry.indexes_for(selectors).cloned().collect(),
            filler: common.indexes.filler(),
        }
    }

    /// A label selector to send to the server: when every handler of this resource filters
    /// on the same plain labels, objects without them need not be watched at all.
    ///
    /// Never with daemons or timers, nor with deletion handlers that need a finalizer: an
    /// object whose labels stop matching leaves such a watch as if deleted, and is forgotten.
    /// Its daemons would be stopped as for a deletion, and one that returned for good would
    /// start again when the object comes back, where Kopf stops them for the filters' mismatch
    /// and remembers; the finalizer would stay on it, where Kopf takes it off, and its
    /// deletion would wait for an operator that no longer sees it.
    pub(crate) fn label_selector(&self) -> Option<String> {
        if !self.background.is_empty() || self.changes.iter().any(|h| h.requires_finalizer()) {
            return None;
        }
        let mut all = self
            .changes
            .iter()
            .map(|h| &h.options.labels)
            .chain(self.events.iter().map(|h| &h.options.labels))
            .chain(self.indexers.iter().map(|h| &h.options.labels))
            .chain(self.background.iter().map(|h| &h.options().labels));
        let first = all.next()?;
        let selector = filters::label_selector(first)?;
        all.all(|labels| filters::label_selector(labels).as_deref() == Some(&selector))
            .then_some(selector)
    }

    fn memory<T>(&self, uid: &str, f: impl FnOnce(&mut Memory) -> T) -> T {
        self.memories.with(uid, f)
    }

    /// Waits until the object may be processed here: while the operator may act on objects,
    /// and with assigned shards, while its shard is open here (the permit, held until the end
    /// of the processing, keeps the shard from being handed over meanwhile). While its shard
    /// drains, the `batch` waits for the drain's outcome, indexed first (`indexed`): the
    /// indexes' first filling must not wait for the drain, which may wait for a processing in
    /// flight that waits for that filling. An object whose shard is not held here is let go of.
    async fn admit(
        &self,
        uid: &str,
        batch: &[Event],
        indexed: &mut bool,
        tasks: &Tasks,
    ) -> Admission {
        loop {
            if !self.fence.is_open() {
                // Not the leader (any more): the operator is about to pause; what is left here
                // is listed again when it resumes, or handled by the leader meanwhile.
                tracing::debug!(target: "kopf::objects", uid, "not processed: not the leader (or not a member of the ring of shards now)");
                return Admission::Refused;
            }
            let Some(ownership) = &self.ownership else {
                return Admission::Admitted(None);
            };
            if let Some(permit) = ownership.enter(uid) {
                return Admission::Admitted(Some(permit));
            }
            if !ownership.drains(uid) {
                self.let_go(uid, batch, *indexed, tasks).await;
                return Admission::LetGo;
            }
            if !*indexed {
                *indexed = true;
                for (kind, object, _) in batch.iter().filter_map(seen) {
                    self.index(uid, kind, object, tasks).await;
                }
            }
            tokio::select! {
                _ = ownership.settled(uid) => {}
                _ = tasks.token().cancelled() => return Admission::Refused,
            }
        }
    }

    /// Observes a batch of events of one object, in order: remembers its newest state, stops
    /// waiting for those of its own writes that came back, updates the indexes and runs the
    /// event handlers for each raw event (what they ask to write goes with the next
    /// processing's write). It may run while the object's newest state is processed.
    pub(crate) async fn observe(
        self: &Arc<Self>,
        uid: &str,
        batch: Vec<Event>,
        held: Held<'_>,
        tasks: &Tasks,
    ) -> Observed {
        // Whether the batch went to the indexes before a wait for its shard's drain.
        let mut indexed = false;
        let _permit = match self.admit(uid, &batch, &mut indexed, tasks).await {
            Admission::Admitted(permit) => permit,
            Admission::Refused => return Observed::default(),
            Admission::LetGo => return Observed { gone: true },
        };
        let mut deleted = false;
        let mut patch = Patch::default();
        for (kind, object, raw) in batch.iter().filter_map(seen) {
            self.memory(uid, |memory| {
                memory.saw(object, kind.is_none());
                let version = object["metadata"]["resourceVersion"].as_str();
                memory.came_back(version.unwrap_or_default());
            });
            deleted = kind == Some("DELETED");
            if !indexed {
                self.index(uid, kind, object, tasks).await;
            }
            if !self.indexes_filled(held, tasks).await {
                return Observed::default();
            }
            if raw {
                // Boxed, as the index handlers are.
                patch.merge(Box::pin(self.run_event_handlers(kind, object, tasks)).await);
            }
        }
        if deleted {
            // Forgotten by the worker once nothing of the object runs.
            self.memory(uid, |m| m.daemons.stop(StopReason::ObjectDeleted));
            return Observed { gone: true };
        }
        if !patch.is_empty() {
            self.memory(uid, |m| {
                m.observed_patch.get_or_insert_default().merge(patch)
            });
        }
        Observed::default()
    }

    /// Processes the object's newest state observed (again, when a retry is due): the
    /// consistency wait for its own writes, the finalizer, the daemons, the cause and its
    /// handlers, and the write of what they (and the event handlers since the last write) did.
    pub(crate) async fn process(
        self: &Arc<Self>,
        uid: &str,
        held: Held<'_>,
        tasks: &Tasks,
    ) -> Next {
        let _permit = match self.admit(uid, &[], &mut true, tasks).await {
            Admission::Admitted(permit) => permit,
            Admission::Refused => return Next::default(),
            Admission::LetGo => {
                return Next {
                    wakeup: None,
                    gone: true,
                };
            }
        };
        let Some((body, patch)) = self.memory(uid, |memory| {
            let body = memory.latest.clone()?;
            Some((
                body,
                memory.observed_patch.take().map(|p| *p).unwrap_or_default(),
            ))
        }) else {
            return Next::default();
        };
        let mut patch = patch;
        // A failed write of finished handlers (or of the finalizer's change after them) goes
        // first, alone: no handler runs until it lands (the object shows what they did only
        // then).
        let (unwritten, adding) =
            self.memory(uid, |m| (m.unwritten.take(), m.unwritten_finalizer.take()));
        if unwritten.is_some() || adding.is_some() {
            let mut unwritten = unwritten.map(|boxed| *boxed).unwrap_or_default();
            unwritten.merge(patch);
            let finalizer = adding.and_then(|adding| self.finalizer_change(&body, adding));
            let written = self.write(uid, &body, unwritten, finalizer, tasks).await;
            if matches!(&written, Err(unwritten) if unwritten.failed()) {
                self.memory(uid, |m| m.unwritten_finalizer = adding);
            }
            let wakeup = match self.remember(uid, written, true) {
                // Landed: the consistency rule waits for its versions, then handlers run.
                Ok(_) => Duration::ZERO,
                Err(delay) => delay,
            };
            return Next {
                wakeup: Some(wakeup),
                gone: false,
            };
        }
        // Kopf's consistency rule: after our own PATCH, wait (bounded) until its version comes
        // back before running change handlers on a state that may predate it.
        // Several writes (the object and its status) are waited for until each has come back.
        // A state that our write replaced is never handled: a newer one must come.
        let consistency = self.memory(uid, |memory| {
            let Some(awaited) = memory.awaited.as_deref() else {
                return Consistency::Reached;
            };
            let now = Instant::now();
            if awaited.outdates(&body) {
                Consistency::Waits(None)
            } else if awaited.pending.is_empty() {
                memory.awaited = None;
                Consistency::Reached
            } else if awaited.until > now {
                Consistency::Waits(Some(awaited.until - now))
            } else {
                Consistency::Late
            }
        });
        // Past the wait, Kopf takes the state seen as consistent. But the watch delivers the
        // versions in order: while our write has not come back, every state it brought is
        // older than that write, and one without the diff-base that the write stored would be
        // handled as a creation again. It comes late when the watch is read late (read no
        // faster than the budget of objects in flight lets it): the newest state is read
        // from the server instead.
        let body = match consistency {
            Consistency::Reached => body,
            Consistency::Waits(remaining) => {
                return self
                    .wait_for_writes(uid, &body, patch, remaining, tasks)
                    .await;
            }
            Consistency::Late => match self.newest(uid, body, tasks).await {
                Ok(Some(newest)) => newest,
                Ok(None) => return Next::default(),
                Err(wakeup) => {
                    self.memory(uid, |m| {
                        let newer = m.observed_patch.take();
                        let mut all = patch;
                        all.merge(newer.map(|p| *p).unwrap_or_default());
                        m.observed_patch = (!all.is_empty()).then(|| Box::new(all));
                    });
                    return Next {
                        wakeup,
                        gone: false,
                    };
                }
            },
        };
        if !self.indexes_filled(held, tasks).await {
            return Next::default();
        }
        let (listed, handled_once) = self.memory(uid, |m| (m.listed, m.handled_once));
        // After a write rejected for good: the object as if it had landed.
        let body = match self.memory(uid, |m| m.rejected.clone()) {
            Some(rejected) => Arc::new(body.replaced(rejected.applied_to(&body))),
            None => body,
        };
        // Boxed: the handlers' futures are large, and needed only while they run, not while
        // the object waits to write what they did.
        let cycle = Box::pin(self.handle_changes(uid, &body, listed && !handled_once, tasks)).await;
        if cycle.handled {
            self.memory(uid, |m| m.handled_once = true);
        }
        patch.merge(cycle.patch);
        let writes = !patch.is_empty();
        let adding = cycle.finalizer.as_ref().map(|_| !self.has_finalizer(&body));
        let written = self.write(uid, &body, patch, cycle.finalizer, tasks).await;
        if writes && written.is_ok() {
            // Made on the state with the rejected writes laid over: it supersedes them.
            self.memory(uid, |m| m.rejected = None);
        }
        if matches!(&written, Err(unwritten) if unwritten.failed()) {
            // The finalizer's change goes again with the records it was sent with.
            self.memory(uid, |m| m.unwritten_finalizer = adding);
        }
        let respawn = cycle.respawn.then_some(DAEMONS_POLLING);
        match self.remember(uid, written, true) {
            Ok(again) => Next {
                wakeup: [cycle.wakeup, again, respawn].into_iter().flatten().min(),
                gone: false,
            },
            Err(delay) => Next {
                wakeup: Some(delay),
                gone: false,
            },
        }
    }

    /// While the object's own writes have not come back: writes only what the event handlers
    /// asked for, and looks again when the wait ends (`remaining`), or when an event comes.
    async fn wait_for_writes(
        &self,
        uid: &str,
        body: &Value,
        patch: Patch,
        remaining: Option<Duration>,
        tasks: &Tasks,
    ) -> Next {
        let written = self.write(uid, body, patch, None, tasks).await;
        let wakeup = match (self.remember(uid, written, false), remaining) {
            (Ok(again), Some(remaining)) => {
                Some(again.map_or(remaining, |again| again.min(remaining)))
            }
            (Ok(again), None) => again,
            (Err(delay), remaining) => Some(remaining.map_or(delay, |r| delay.min(r))),
        };
        Next {
            wakeup,
            gone: false,
        }
    }

    /// The object's newest state, read from the server when its own write has not come back
    /// on the watch within the consistency timeout, instead of the older state `seen`:
    /// `Ok(None)` when it is gone (its deletion is on its way), `Err` with when to look again
    /// when it could not be read.
    ///
    /// The version read is awaited from then on, as a write's is: the watch still brings the
    /// states before it, all older than the one handled now, and none of them is handled
    /// until it comes back (or the wait ends again, and the object is read again). A state
    /// seen that is the newest already needs no wait: the write came back unseen (merged
    /// into a newer event, or listed anew).
    async fn newest(
        &self,
        uid: &str,
        seen: Arc<Body>,
        tasks: &Tasks,
    ) -> Result<Option<Arc<Body>>, Option<Duration>> {
        tracing::debug!(target: "kopf::objects", uid, "the object's own write has not come back on the watch in time; reading its newest state");
        let failed = || {
            self.memory(uid, |m| {
                m.failures += 1;
                m.failures
            })
        };
        let newest = match self.writer.fetch(uid, &seen, tasks, failed).await {
            // Another object of the same name is not this one: this one is gone.
            Ok(Some(newest)) if newest["metadata"]["uid"].as_str() != Some(uid) => return Ok(None),
            Ok(Some(newest)) => Arc::new(newest),
            Ok(None) => return Ok(None),
            Err(Unread::Closed) => return Err(None),
            Err(Unread::Failed(delay)) => return Err(Some(delay)),
        };
        let version = newest["metadata"]["resourceVersion"].as_str();
        if version == seen["metadata"]["resourceVersion"].as_str() {
            self.memory(uid, |m| m.awaited = None);
            return Ok(Some(seen));
        }
        let timeout = self.settings.persistence.consistency_timeout;
        self.memory(uid, |m| {
            if let Some(awaited) = m.awaited.as_deref_mut() {
                awaited.pending = version.map(str::to_owned).into_iter().collect();
                awaited.until = Instant::now() + timeout;
            }
            m.latest = Some(newest.clone());
        });
        Ok(Some(newest))
    }

    /// Whether the object carries the operator's finalizer.
    fn has_finalizer(&self, body: &Value) -> bool {
        let finalizer = &self.settings.persistence.finalizer;
        body["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|x| x == finalizer.as_str()))
    }

    /// The JSON-patch operation that adds (or removes) the finalizer on the object's newest
    /// state, when it is still needed (not on an object in deletion for an addition).
    fn finalizer_change(&self, body: &Value, adding: bool) -> Option<Value> {
        let finalizer = &self.settings.persistence.finalizer;
        let finalizers = body["metadata"].get("finalizers");
        let has = self.has_finalizer(body);
        let deleting = !body["metadata"]["deletionTimestamp"].is_null();
        match (adding, has) {
            (true, false) if !deleting => Some(patching::add_finalizer(finalizers, finalizer)),
            (false, true) => patching::remove_finalizer(finalizers, finalizer),
            _ => None,
        }
    }

    /// Keeps what a write of the object's worker could not write: to write it again before
    /// any handler runs (a failure), or, for what handlers finished (`handled`), to lay it
    /// over the object's state as if written (a rejection for good, which is not tried
    /// again and was reported). `Err` with the delay before the worker goes on.
    fn remember(
        &self,
        uid: &str,
        written: Result<Option<Duration>, Unwritten>,
        handled: bool,
    ) -> Result<Option<Duration>, Duration> {
        let unwritten = match written {
            Ok(again) => return Ok(again),
            Err(unwritten) => unwritten,
        };
        if unwritten.patch.is_empty() {
            return Err(unwritten.delay);
        }
        self.memory(uid, |m| {
            let kept = if !unwritten.rejected {
                &mut m.unwritten
            } else if handled {
                &mut m.rejected
            } else {
                return;
            };
            let mut all = kept.take().unwrap_or_default();
            all.merge(unwritten.patch);
            *kept = Some(all);
        });
        Err(unwritten.delay)
    }

    /// Updates the operator's indexes with one event of the object.
    async fn index(&self, uid: &str, kind: Option<&str>, object: &Arc<Body>, tasks: &Tasks) {
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
                    if !self.object_matches(&handler.id, &handler.options, object) {
                        return None;
                    }
                    let invocation =
                        self.invocation(object.clone(), Change::default(), &handler.options, tasks);
                    match &handler.options.when {
                        Some(when)
                            if !execution::filter(&handler.id, object, || when(&invocation)) =>
                        {
                            None
                        }
                        _ => Some(invocation),
                    }
                })
                .collect()
        };
        let backoff = self.settings.execution.default_backoff;
        // Boxed: the index handlers' futures are large, and the processing future that awaits
        // them waits, in a burst, far longer to write than they run.
        Box::pin(indexing::update(
            &self.invocations.indexes,
            &self.indexers,
            event,
            &mut states,
            backoff,
            invocations,
        ))
        .await;
        self.filler.indexed(event.listed);
        self.memory(uid, |m| m.indexing = states);
    }

    /// Waits until the operator's indexes are filled after the start (at once when they are,
    /// or when this resource has only index functions); `false` when stopped first. Meanwhile
    /// what the object holds of the budget of objects in flight is set aside: the filling
    /// needs every object listed, and the listing waits for room in that budget.
    async fn indexes_filled(&self, held: Held<'_>, tasks: &Tasks) -> bool {
        let handles =
            !self.changes.is_empty() || !self.events.is_empty() || !self.background.is_empty();
        let indexes = &self.invocations.indexes;
        !handles || indexes.is_filled() || held.aside(indexes.filled(tasks.token())).await
    }

    /// Sends a patch (and the framework's JSON-patch operation on the finalizers) to the
    /// object and remembers the versions to wait for; `Ok(Some(delay))` when the object must
    /// be processed again within that delay even without a new event (the handlers' JSON-patch
    /// operations met a newer version: they run again once it comes). On failure, what was
    /// not written comes back with the delay before trying again (see [`Writer::write`]).
    pub(crate) async fn write(
        &self,
        uid: &str,
        body: &Value,
        patch: Patch,
        finalizer: Option<Value>,
        tasks: &Tasks,
    ) -> Result<Option<Duration>, Unwritten> {
        if patch.is_empty() && finalizer.is_none() {
            return Ok(None);
        }
        let failed = || {
            self.memory(uid, |m| {
                m.failures += 1;
                m.failures
            })
        };
        // The object's events may be observed while it writes: the versions that come back
        // meanwhile are not awaited after it.
        self.memory(uid, Memory::writes);
        let writing = Writing {
            processor: self,
            uid,
            ended: false,
        };
        let written = self
            .writer
            .write(uid, body, patch, finalizer, tasks, failed)
            .await;
        let timeout = self.settings.persistence.consistency_timeout;
        let written = written.inspect(|_| self.memory(uid, |m| m.failures = 0))?;
        let until = (!timeout.is_zero()).then(|| Instant::now() + timeout);
        let replaced = body["metadata"]["resourceVersion"].as_str();
        writing.end(written.versions, until, replaced.unwrap_or_default());
        Ok(written.outdated.then_some(timeout))
    }

    /// Runs the event handlers for one raw event; their errors are logged and ignored, their
    /// results and patches returned to be written.
    async fn run_event_handlers(
        &self,
        kind: Option<&'static str>,
        object: &Arc<Body>,
        tasks: &Tasks,
    ) -> Patch {
        let mut patch = Patch::default();
        // As Kopf: a function stacked under several `on_event` attributes that all match is
        // called once per event.
        let mut called: Vec<&EventHandler> = Vec::new();
        for handler in &self.events {
            if !self.object_matches(&handler.id, &handler.options, object)
                || called.iter().any(|other| other.same_as(handler))
            {
                continue;
            }
            let mut invocation =
                self.invocation(object.clone(), Change::default(), &handler.options, tasks);
            invocation.event_type = kind.map(String::from);
            // As Kopf's local logger: event handlers' logs are never posted as Events.
            invocation.logger = Logger::new(
                tracing::info_span!(target: "kopf::handler", "handler", handler.id = %handler.id, object.name = invocation.name(), object.namespace = invocation.namespace()),
                Poster::disabled().events(object, &self.invocations.resource),
            );
            if let Some(when) = &handler.options.when
                && !execution::filter(&handler.id, object, || when(&invocation))
            {
                continue;
            }
            called.push(handler);
            let gathered = invocation.gathered.clone();
            // As Kopf: arbitrary errors are ignored, and no failure is retried (an event is not
            // seen twice); `execute` logs them.
            let retrying = execution::Retrying {
                errors: ErrorsMode::Ignored,
                ..execution::Retrying::from(&handler.options)
            };
            let outcome = execution::execute(
                &handler.id,
                &handler.function,
                retrying,
                Duration::ZERO,
                invocation,
            )
            .await;
            patch.merge(gathered.take_patch());
            if let Outcome::Success(Some(result)) = outcome {
                deliver(&mut patch, &handler.id, result);
            }
        }
        patch
    }

    /// Whether the object passes the label and annotation filters of the handler `id`, and,
    /// for a handler that sees one state of the object (event handlers, index functions,
    /// daemons, timers), its field filter (Kopf's `_matches_field_values` on the body). A
    /// panicking callable does not pass; see `execution::filter`.
    fn object_matches(&self, id: &str, options: &Options, body: &Value) -> bool {
        execution::filter(id, body, || {
            filters::match_metadata(&options.labels, &options.annotations, body)
                && options.field.as_ref().is_none_or(|field| {
                    filters::match_field_value(field, options.value.as_ref(), body)
                })
        })
    }

    /// Whether the object passes the label and annotation filters of the change handler `id`,
    /// and its field filter on the field's old or new value in the essences (Kopf's prematch:
    /// whether the handler could run at all, so whether the object needs its finalizer).
    fn change_could_match(
        &self,
        handler: &ChangeHandler,
        body: &Value,
        essences: &Essences<'_>,
    ) -> bool {
        let options = &handler.options;
        execution::filter(&handler.id, body, || {
            filters::match_metadata(&options.labels, &options.annotations, body)
                && options.field.as_ref().is_none_or(|field| {
                    let (old, new) = essences.get();
                    filters::match_field_change(
                        options.value.as_ref(),
                        None,
                        None,
                        old.and_then(|old| diff::resolve(old, field)),
                        diff::resolve(new, field),
                        body,
                    )
                })
        })
    }

    /// The object's memo: a shallow copy of the operator's, made on first sight.
    fn memo_of(&self, body: &Value) -> Memo {
        let uid = body["metadata"]["uid"].as_str().unwrap_or_default();
        self.memos.get_or_copy(uid, &self.memo)
    }

    /// An invocation of a handler with these options on the object, for this change, in a
    /// child node of `tasks`.
    fn invocation(
        &self,
        body: Arc<Body>,
        change: Change,
        options: &Options,
        tasks: &Tasks,
    ) -> Invocation {
        let memo = self.memo_of(&body);
        self.invocations
            .make(body, memo, change, options, tasks.child())
    }

    /// The daemons and timers whose filters the object passes.
    fn matching_background(&self, body: &Arc<Body>, tasks: &Tasks) -> Vec<&Arc<Background>> {
        self.background
            .iter()
            .filter(|h| self.object_matches(h.id(), h.options(), body))
            .filter(|h| match &h.options().when {
                Some(when) => execution::filter(h.id(), body, || {
                    when(&self.invocation(body.clone(), Change::default(), h.options(), tasks))
                }),
                None => true,
            })
            .collect()
    }

    /// Starts the object's matching daemons and timers that do not run yet; stops the others.
    /// `true` when one must start once its previous run has ended: see again soon.
    fn spawn(
        self: &Arc<Self>,
        uid: &str,
        body: &Arc<Body>,
        matching: &[&Arc<Background>],
        tasks: &Tasks,
    ) -> bool {
        if self.background.is_empty() {
            return false;
        }
        self.memory(uid, |m| {
            // Checked under the memories' lock: a shard dropped meanwhile lets go of its
            // objects' daemons under it too, so none starts after that.
            if self.ownership.as_ref().is_some_and(|o| !o.holds(uid)) {
                return false;
            }
            m.daemons.reconcile(
                matching,
                body,
                |handler, live, tasks| daemons::start(self.clone(), handler, live, tasks),
                tasks,
            )
        })
    }

    /// Resolves when every daemon and timer of every object, asked to stop, has ended (after
    /// a pause: their successors start only then, as in Kopf).
    pub(crate) fn all_daemons_ended(&self) -> impl std::future::Future<Output = ()> + use<> {
        let ended = futures::future::join_all(self.memories.each(|m| m.daemons.ended()));
        async move {
            ended.await;
        }
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

    /// The object's last handled essence (its diff-base, if any) and its essence now, without
    /// our own progress keys.
    fn essences(&self, body: &Value) -> (Option<Arc<Value>>, Arc<Value>) {
        let old = self.diffbase.fetch(body).map(|mut old| {
            self.progress.clear(&mut old);
            Arc::new(old)
        });
        (old, Arc::new(self.essence(body)))
    }

    async fn handle_changes(
        self: &Arc<Self>,
        uid: &str,
        body: &Arc<Body>,
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
        let essences = Essences {
            processor: self,
            body,
            made: OnceLock::new(),
        };
        let matching: Vec<&ChangeHandler> = self
            .changes
            .iter()
            .filter(|h| self.change_could_match(h, body, &essences))
            .collect();
        let background = self.matching_background(body, tasks);
        if !self.background.is_empty() || self.changes.iter().any(|h| h.requires_finalizer()) {
            let essence = self.idle_timers.then(|| self.essence(body));
            self.memory(uid, |m| m.daemons.observe(body, essence, &background));
        }
        if matching.is_empty() && background.is_empty() && !has_finalizer {
            // Kopf's prematch: nothing here concerns this object; leave it as it is (but stop
            // the daemons whose filters it no longer passes). With our finalizer, it concerns
            // us: the finalizer goes below, as in Kopf, once nothing needs it.
            self.spawn(uid, body, &[], tasks);
            return cycle;
        }
        let needs_finalizer =
            !background.is_empty() || matching.iter().any(|h| h.requires_finalizer());
        if !deleting && needs_finalizer && !has_finalizer {
            cycle.finalizer = Some(patching::add_finalizer(finalizers, finalizer));
            return cycle;
        }
        if !deleting && !needs_finalizer && has_finalizer {
            self.spawn(uid, body, &[], tasks);
            cycle.finalizer = patching::remove_finalizer(finalizers, finalizer);
            return cycle;
        }
        if deleting && !has_finalizer {
            // Kopf's FREE: the object is going, nothing holds it for us.
            self.memory(uid, |m| m.daemons.stop(StopReason::ObjectDeleted));
            return cycle;
        }
        if !deleting {
            cycle.respawn = self.spawn(uid, body, &background, tasks);
        } else if !self.daemons_ended(uid).await {
            // The deletion handlers run once the daemons and timers have ended.
            cycle.wakeup = Some(DAEMONS_POLLING);
            return cycle;
        }
        if matching.is_empty() {
            // Only daemons and timers concern this object: no diff-base, no progress.
            if deleting {
                cycle.finalizer = patching::remove_finalizer(finalizers, finalizer);
            }
            return cycle;
        }

        // Shared by the handlers' invocations, not copied for each.
        let (old, new) = essences.into_parts();
        let diff = Arc::new(diff::diff(old.as_deref(), Some(&new)));
        let Some(reason) = causes::detect(deleting, old.as_deref(), &diff, initial) else {
            return cycle; // NOOP
        };
        let selected = causes::select(body, matching, reason, initial, &diff, old.as_ref(), &new);
        let selected: Vec<Selected<'_>> = selected
            .into_iter()
            .filter(|s| match &s.handler.options.when {
                Some(when) => execution::filter(&s.handler.id, body, || {
                    when(&self.invocation(
                        body.clone(),
                        Change {
                            reason: Some(reason),
                            diff: Some(s.diff.clone()),
                            old: s.old.clone(),
                            new: s.new.clone(),
                        },
                        &s.handler.options,
                        tasks,
                    ))
                }),
                None => true,
            })
            .collect();
        // As Kopf: one function stacked under attributes that this cause all selects
        // (`on_resume` and `on_update`, for an object changed while the operator was down) is
        // called once, as the one registered first.
        let selected = deduplicated(selected, |s| s.handler);

        let now = timestamps::now();
        let mut records: Records = selected
            .iter()
            .map(|s| {
                let id = s.handler.id.as_str();
                (
                    id.to_string(),
                    progress::fetch(&*self.progress, id, body, reason),
                )
            })
            .collect();
        let ids: Vec<&str> = selected.iter().map(|s| s.handler.id.as_str()).collect();
        // As Kopf, the lifecycle plans among the awakened handlers, in registration order.
        let plan = progress::plan(&self.settings.execution.lifecycle, &ids, &records);
        let memo = self.memo_of(body);
        let subhandling = &self.subhandling;
        let mut merge = json!({});
        let mut finished_any = false;
        // The records of sub-handlers run in place (`kopf::execute`): stored while the cause
        // is unfinished, purged with the others (through the parents' `subrefs`) once it is;
        // they do not hold the cause back, as in Kopf (a parent that went on without them
        // is done).
        let mut executed = Records::new();
        for Selected {
            handler,
            diff,
            old,
            new,
        } in plan.into_iter().map(|i| &selected[i])
        {
            let record = records.get(&handler.id).cloned().unwrap_or_default();
            let started = record.started.unwrap_or(now);
            let change = Change {
                reason: Some(reason),
                diff: Some(diff.clone()),
                old: old.clone(),
                new: new.clone(),
            };
            let mut invocation = self.invocations.make(
                body.clone(),
                memo.clone(),
                change,
                &handler.options,
                tasks.child(),
            );
            invocation.retry = record.retries;
            invocation.started = started;
            invocation
                .logger
                .set_span(tracing::info_span!(target: "kopf::handler", "handler", handler.id = %handler.id, object.name = invocation.name(), object.namespace = invocation.namespace(), reason = %reason));
            let logger = invocation.logger.clone();
            let gathered = invocation.gathered.clone();
            let cause = Cause {
                handler: &handler.id,
                body,
                memo: &memo,
                reason,
                diff,
                old,
                new,
                needs_change: matches!(handler.trigger, Trigger::Update | Trigger::Field),
                tasks,
                lifecycle: &self.settings.execution.lifecycle,
            };
            let in_place = subhandling.in_place(&handler.id, &cause);
            gathered.run_in_place(in_place.clone());
            let outcome = execution::execute(
                &handler.id,
                &handler.function,
                &handler.options,
                self.settings.execution.default_backoff,
                invocation,
            )
            .await;
            cycle.patch.merge(gathered.take_patch());
            let mut subrefs = record.subrefs.clone();
            subhandling.gather(
                in_place.end(),
                &mut cycle.patch,
                &mut subrefs,
                &mut executed,
            );
            let outcome = subhandling
                .settle_parent(
                    &handler.id,
                    outcome,
                    &gathered,
                    &cause,
                    &mut records,
                    &mut cycle.patch,
                    &mut subrefs,
                    &logger,
                )
                .await;
            let Some(mut updated) = progress::settle(
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

        if records.values().all(progress::is_done) {
            progress::purge(&*self.progress, &records, &ids, body, &mut merge);
            if reason == Reason::Delete {
                cycle.finalizer = patching::remove_finalizer(finalizers, finalizer);
            } else if old.as_deref() != Some(&*new) {
                self.diffbase.store(body, &new, &mut merge);
            }
            cycle.handled = true;
            // Sub-handlers are counted in their parents.
            let top: Vec<&ProgressRecord> = records
                .iter()
                .filter(|(id, _)| ids.contains(&id.as_str()))
                .map(|(_, record)| record)
                .collect();
            if !top.is_empty() {
                let succeeded = top.iter().filter(|r| r.success).count();
                let failed = top.iter().filter(|r| r.failure).count();
                let logger = Logger::new(
                    tracing::info_span!(target: "kopf::handler", "object", object.name = body["metadata"]["name"].as_str(), object.namespace = body["metadata"]["namespace"].as_str(), reason = %reason),
                    self.invocations
                        .poster
                        .events_of(body, &self.invocations.resource),
                );
                logger.info(format_args!(
                    "{} is processed: {succeeded} succeeded; {failed} failed.",
                    progress::title(reason)
                ));
            }
        } else {
            progress::store(&*self.progress, &records, body, &mut merge);
            progress::store(&*self.progress, &executed, body, &mut merge);
            cycle.wakeup = progress::next_due(records.values());
        }
        if let Value::Object(merge) = merge {
            for (key, value) in merge {
                cycle.patch.merge_raw(&key, value);
            }
        }
        cycle
    }
}

/// The old and new essences of an object, made when first needed: only change handlers with
/// a field filter need them before the cause is detected.
struct Essences<'a> {
    processor: &'a Processor,
    body: &'a Value,
    made: OnceLock<(Option<Arc<Value>>, Arc<Value>)>,
}

impl Essences<'_> {
    fn get(&self) -> (Option<&Value>, &Value) {
        let (old, new) = self.made.get_or_init(|| self.processor.essences(self.body));
        (old.as_deref(), new)
    }

    fn into_parts(self) -> (Option<Arc<Value>>, Arc<Value>) {
        match self.made.into_inner() {
            Some(made) => made,
            None => self.processor.essences(self.body),
        }
    }
}

/// A write of an object in flight, until it ends in the object's memory (also when dropped:
/// then it made no version to wait for).
struct Writing<'a> {
    processor: &'a Processor,
    uid: &'a str,
    ended: bool,
}

impl Writing<'_> {
    /// The write made these versions: those not come back yet are awaited until `until`.
    fn end(mut self, versions: Vec<String>, until: Option<Instant>, replaced: &str) {
        self.ended = true;
        let memories = &self.processor.memories;
        memories.with_existing(self.uid, |m| m.written(versions, until, replaced));
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        if !self.ended {
            let memories = &self.processor.memories;
            memories.with_existing(self.uid, |m| m.written(Vec::new(), None, ""));
        }
    }
}

/// Where the object's newest state stands with the object's own writes (Kopf's consistency).
enum Consistency {
    /// No write of its own is awaited: the state may be handled.
    Reached,
    /// A write of its own has not come back: wait until then, or for this long at most (or
    /// for a newer state, when the state is one that the write replaced).
    Waits(Option<Duration>),
    /// A write of its own has not come back within the consistency timeout.
    Late,
}

/// Whether an object's events may be observed, and its state processed, here.
enum Admission {
    /// Yes, with its shard's permit when shards are assigned.
    Admitted(Option<Permit>),
    /// Not now: the operator may not act on objects (it is about to pause), or it stops.
    Refused,
    /// Its shard is not held here: it was let go of.
    LetGo,
}

/// What one processing cycle produced.
#[derive(Debug, Default)]
struct Cycle {
    patch: Patch,
    /// The framework's JSON-patch operation on the finalizers, written after the patch.
    finalizer: Option<Value>,
    wakeup: Option<Duration>,
    handled: bool,
    /// A daemon or timer matches again but its previous run has not ended yet: it starts on
    /// a later look at the object.
    respawn: bool,
}
