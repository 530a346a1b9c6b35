//! In-memory indexes over objects (Kopf's `@kopf.index`): an index function runs for every
//! event of its resource, and what it returns is kept in an [`Index`] that every handler of
//! the operator can read by the index's name.
//!
//! ```
//! use std::collections::BTreeMap;
//!
//! /// Pod names by the value of their `app` label.
//! #[kopf::index("v1", "pods")]
//! async fn pods_by_app(labels: BTreeMap<String, String>, name: String) -> Option<(String, String)> {
//!     Some((labels.get("app")?.clone(), name))
//! }
//!
//! #[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
//! async fn create_fn(spec: &serde_json::Value, pods_by_app: &kopf::Index<String, String>) -> usize {
//!     let app = spec["app"].as_str().unwrap_or_default();
//!     pods_by_app.get(app).map_or(0, |pods| pods.len())
//! }
//!
//! let registry = kopf::handlers![pods_by_app, create_fn];
//! ```
//!
//! What index functions return, how errors and deletions change the indexes, and when
//! handlers wait for them: see [`IndexHandler`].
//!
//! The indexes themselves and their invariants are in `structs::indexes`; this is what runs
//! the index functions and keeps their entries.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::actions::execution::{self, Outcome};
use crate::actions::invocation::Invocation;
use crate::intents::indexing::IndexHandler;
use crate::intents::registry::Registered as _;
use crate::structs::indexes::{Indexes, ObjectRef, Output};

/// Updates the indexes with one event of an object: runs the index functions whose filters
/// the object passes (`invocations` has one per handler, in order: `None` for the others, whose
/// entries of the object are removed); a deletion removes the object's entries from all of them
/// (its invocations may be left out).
pub(crate) async fn update(
    indexes: &Indexes,
    handlers: &[IndexHandler],
    event: IndexedEvent<'_>,
    states: &mut BTreeMap<String, IndexingState>,
    default_backoff: Duration,
    invocations: Vec<Option<Invocation>>,
) {
    let object = ObjectRef::of(event.object);
    let mut invocations = invocations.into_iter();
    // As Kopf: one function stacked under several `index` attributes that all match the
    // object runs once for it (and one that does not match leaves its twin's entries alone).
    let mut called: Vec<&IndexHandler> = Vec::new();
    for handler in handlers {
        let invocation = invocations.next().flatten();
        if called.iter().any(|other| other.same_as(handler)) {
            continue;
        }
        let Some(index) = indexes.by_id(&handler.id) else {
            continue;
        };
        if event.deleted {
            index.discard(&object);
            continue;
        }
        let Some(mut invocation) = invocation else {
            index.discard(&object);
            states.remove(&handler.id);
            continue;
        };
        called.push(handler);
        let state = states.entry(handler.id.clone()).or_default();
        if state.excluded || state.delayed.is_some_and(|until| until > Instant::now()) {
            index.discard(&object);
            continue;
        }
        let now = time::OffsetDateTime::now_utc();
        invocation.retry = state.retries;
        invocation.started = state.started.unwrap_or(now);
        invocation
            .logger
            .set_span(tracing::info_span!(target: "kopf::handler", "handler", handler.id = %handler.id, object.name = invocation.name(), object.namespace = invocation.namespace()));
        let output: Output = Arc::default();
        invocation.indexes.output = Some(output.clone());
        let started = invocation.started;
        // `execute` logs the outcome in Kopf's words; an ignored error keeps the entries
        // as they were, since the function delivered none.
        let outcome = execution::execute_as(
            execution::Kind::Index,
            &handler.id,
            &handler.function,
            &handler.options,
            default_backoff,
            invocation,
        )
        .await;
        match outcome {
            Outcome::Success(_) => {
                states.remove(&handler.id);
                let entries = output.lock().unwrap_or_else(PoisonError::into_inner).take();
                if let Some(entries) = entries
                    && !index.replace(&object, entries)
                {
                    tracing::error!(target: "kopf::indexing", index = %handler.id, "the index function returned entries of other types than its index");
                }
            }
            Outcome::Retry { delay, .. } => {
                tracing::debug!(target: "kopf::indexing", index = %handler.id, object.name = %object.name, ?delay, "the object's entries are removed until it is indexed again");
                index.discard(&object);
                state.retries = state.retries.saturating_add(1);
                state.started = Some(started);
                state.delayed = Some(Instant::now() + delay);
            }
            Outcome::Failure(..) => {
                tracing::debug!(target: "kopf::indexing", index = %handler.id, object.name = %object.name, "the object is left out of the index");
                index.discard(&object);
                state.excluded = true;
            }
            Outcome::Aborted => {}
        }
    }
}

/// One event as the indexes see it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IndexedEvent<'a> {
    pub(crate) object: &'a Value,
    /// From a listing (counted for the filling, invariant 2).
    pub(crate) listed: bool,
    pub(crate) deleted: bool,
}

/// What the operator remembers of one object's failed indexing by one index (nothing once
/// it succeeds).
#[derive(Debug, Clone, Default)]
pub(crate) struct IndexingState {
    retries: u32,
    started: Option<time::OffsetDateTime>,
    /// A temporary error: not indexed again before this.
    delayed: Option<Instant>,
    /// A permanent error: not indexed again.
    excluded: bool,
}
