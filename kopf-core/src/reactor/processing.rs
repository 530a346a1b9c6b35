//! One object's events, processed: event handlers and indexes for every event; then, for the
//! newest state, the finalizer, the daemons, the cause (`causes`), the due change handlers
//! that the lifecycle picks (`progress`; one by default: Kopf's `asap`) with their
//! sub-handlers (`subhandling`), and the patch that stores their records and results.
//!
//! The steps, each in a module of its own, all methods of the one [`Processor`] (this module
//! holds it, with what every step uses: its memory of each object, the handlers' filters, their
//! invocations): the gate that admits an object here (`gate`), the observing of its events
//! (`observing`) and the indexes they change (`indexing`); the processing of its newest state
//! (`state`), which waits for the object's own writes (`consistency`), runs the cycle of
//! change handlers (`cycle`) beside the daemons and timers (`background`), and writes what
//! they did (`writes`). The processor in the roles that others know it by is in `roles`.

use std::sync::Arc;

use serde_json::Value;

use crate::actions::execution;
use crate::actions::invocation::{Invocation, Options};
use crate::aiokits::tasks::Tasks;
use crate::clients::posting::Poster;
use crate::clients::watching::Event;
use crate::configs::settings::Settings;
use crate::configs::storage::{DiffBaseStorage, ProgressStorage};
use crate::engines::ownership::Ownership;
use crate::engines::pausing::Fence;
use crate::intents::daemons::Background;
use crate::intents::handlers::{ChangeHandler, EventHandler};
use crate::intents::indexing::IndexHandler;
use crate::intents::registry::Registry;
use crate::reactor::invocations::{Change, Invocations};
use crate::reactor::memories::{Memories, Memory};
use crate::reactor::subhandling::SubHandling;
use crate::reactor::writing::Writer;
use crate::structs::bodies::Body;
use crate::structs::filters;
use crate::structs::indexes::{Filler, Indexes};
use crate::structs::memos::{Memo, ObjectMemos};
use crate::structs::resources::{Resource, Selector};

mod background;
mod consistency;
mod cycle;
mod gate;
mod indexing;
mod observing;
mod roles;
mod state;
mod writes;

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
}
