//! The operator's indexes, as the object's events change them, and the wait for their first
//! filling after the start.

use std::sync::Arc;

use super::Processor;
use crate::actions::execution;
use crate::actions::invocation::Invocation;
use crate::aiokits::tasks::Tasks;
use crate::engines::indexing::{self, IndexedEvent};
use crate::reactor::invocations::Change;
use crate::reactor::queueing::Held;
use crate::structs::bodies::Body;

impl Processor {
    /// Updates the operator's indexes with one event of the object.
    pub(super) async fn index(
        &self,
        uid: &str,
        kind: Option<&str>,
        object: &Arc<Body>,
        tasks: &Tasks,
    ) {
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
    pub(super) async fn indexes_filled(&self, held: Held<'_>, tasks: &Tasks) -> bool {
        let handles =
            !self.changes.is_empty() || !self.events.is_empty() || !self.background.is_empty();
        let indexes = &self.invocations.indexes;
        !handles || indexes.is_filled() || held.aside(indexes.filled(tasks.token())).await
    }
}
