//! Handlers' last outcomes per object, kept in memory when asked for
//! ([`Operator::outcomes`](crate::operator::Operator::outcomes)): what tests read after the
//! progress records are purged from the objects at the end of their handling.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::helpers::sync::lock;
use crate::structs::errors::{HandlerRetriesError, HandlerTimeoutError};

/// How a handler's last attempt on an object ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandlerOutcome {
    /// It succeeded.
    Succeeded {
        /// Attempts made.
        retries: u32,
    },
    /// It failed temporarily and will be retried after a delay.
    Retrying {
        /// The error's message.
        message: String,
        /// Attempts made so far.
        retries: u32,
    },
    /// It failed for good (a `PermanentError`, or out of retries or time): no more attempts.
    Failed {
        /// The error's message.
        message: String,
        /// Attempts made.
        retries: u32,
        /// Why: the handler's own error, or the framework giving up on it.
        error: Failure,
    },
}

/// Why a handler failed for good (what Kopf's outcome holds as its `exception`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// The handler's own error: a [`PermanentError`](crate::PermanentError), any error of a
    /// handler with `errors = "permanent"`, a panic there, or failed sub-handlers.
    Permanent,
    /// Out of retries: its `retries` are used up, or the next attempt would exceed them.
    Retries(HandlerRetriesError),
    /// Out of time: its `timeout` passed, or the next attempt would come after it.
    Timeout(HandlerTimeoutError),
}

impl HandlerOutcome {
    /// Attempts made.
    pub fn retries(&self) -> u32 {
        match self {
            HandlerOutcome::Succeeded { retries }
            | HandlerOutcome::Retrying { retries, .. }
            | HandlerOutcome::Failed { retries, .. } => *retries,
        }
    }

    /// Whether the handler is done with the object: succeeded or failed for good.
    pub fn is_final(&self) -> bool {
        !matches!(self, HandlerOutcome::Retrying { .. })
    }

    /// Why the handler failed for good; `None` unless it did.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            HandlerOutcome::Failed { error, .. } => Some(error),
            _ => None,
        }
    }

    /// The error's message, if the attempt failed.
    pub fn message(&self) -> Option<&str> {
        match self {
            HandlerOutcome::Succeeded { .. } => None,
            HandlerOutcome::Retrying { message, .. } | HandlerOutcome::Failed { message, .. } => {
                Some(message)
            }
        }
    }
}

/// The last outcome of each handler on each object, as the operator's attempts end: a handle
/// from [`Operator::outcomes`](crate::operator::Operator::outcomes), shared with the running
/// operator.
///
/// ```no_run
/// # async fn example(operator: kopf::operator::Operator) {
/// let outcomes = operator.outcomes();
/// // ... run the operator, create `default/kex` ...
/// if let Some(outcome) = outcomes.get(Some("default"), "kex", "create_fn") {
///     println!("create_fn on kex: {outcome:?}");
/// }
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Outcomes(Arc<Mutex<HashMap<(String, String), HandlerOutcome>>>);

impl Outcomes {
    /// The last outcome of the handler `handler_id` (the function's name, or e.g.
    /// `scale_fn/spec.size` for a field handler) on the object `namespace/name`.
    pub fn get(
        &self,
        namespace: Option<&str>,
        name: &str,
        handler_id: &str,
    ) -> Option<HandlerOutcome> {
        let object = object(namespace, name);
        lock(&self.0)
            .get(&(object, handler_id.to_string()))
            .cloned()
    }

    /// Every handler's last outcome on the object `namespace/name`, by handler id, sorted.
    pub fn of(&self, namespace: Option<&str>, name: &str) -> Vec<(String, HandlerOutcome)> {
        let object = object(namespace, name);
        let mut outcomes: Vec<(String, HandlerOutcome)> = lock(&self.0)
            .iter()
            .filter(|((o, _), _)| *o == object)
            .map(|((_, handler), outcome)| (handler.clone(), outcome.clone()))
            .collect();
        outcomes.sort_by(|a, b| a.0.cmp(&b.0));
        outcomes
    }

    /// Records an attempt's end; `object` is `namespace/name`, or `name` if cluster-scoped.
    pub(crate) fn record(&self, object: &str, handler_id: &str, outcome: HandlerOutcome) {
        lock(&self.0).insert((object.to_string(), handler_id.to_string()), outcome);
    }

    /// The attempts recorded for a handler on an object (0 if none).
    pub(crate) fn retries(&self, object: &str, handler_id: &str) -> u32 {
        lock(&self.0)
            .get(&(object.to_string(), handler_id.to_string()))
            .map_or(0, HandlerOutcome::retries)
    }
}

fn object(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_string(),
    }
}
