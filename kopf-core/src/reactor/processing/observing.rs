//! Observing an object's events, every one in order: its memory, the indexes, and the event
//! handlers, whose patches wait for the next processing's write.

use std::sync::Arc;
use std::time::Duration;

use super::gate::Admission;
use super::{Processor, seen};
use crate::actions::delivery::deliver;
use crate::actions::execution::{self, Outcome};
use crate::actions::invocation::ErrorsMode;
use crate::aiokits::tasks::{StopReason, Tasks};
use crate::clients::posting::{Logger, Poster};
use crate::clients::watching::Event;
use crate::intents::handlers::EventHandler;
use crate::intents::registry::Registered as _;
use crate::reactor::invocations::Change;
use crate::reactor::queueing::{Held, Observed};
use crate::structs::bodies::Body;
use crate::structs::patch::Patch;

impl Processor {
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
}
