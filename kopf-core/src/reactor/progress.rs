//! The progress of the handlers of one cause, as recorded on the object (Kopf's progress
//! records): which handlers are due, in the lifecycle's order; how an attempt's outcome
//! changes a handler's record; and what a cycle stores or purges when it ends.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::actions::delivery::deliver;
use crate::actions::execution::Outcome;
use crate::actions::invocation::Reason;
use crate::configs::lifecycles::{DueHandler, Lifecycle};
use crate::configs::storage::timestamps;
use crate::configs::storage::{HandlerId, ProgressRecord, ProgressStorage};
use crate::structs::patch::Patch;

/// The records of handlers by id, as one cycle sees and changes them.
pub(crate) type Records = BTreeMap<String, ProgressRecord>;

/// Whether the handler finished, successfully or not.
pub(crate) fn is_done(record: &ProgressRecord) -> bool {
    record.success || record.failure
}

/// The stored record of handler `id` for this reason: a record of another purpose is stale
/// (superseded) and starts afresh.
pub(crate) fn fetch(
    storage: &dyn ProgressStorage,
    id: &str,
    body: &Value,
    reason: Reason,
) -> ProgressRecord {
    storage
        .fetch(&HandlerId::new(id), body)
        .filter(|r| r.purpose.as_deref().is_none_or(|p| p == reason.as_str()))
        .unwrap_or_default()
}

/// Which of the handlers `ids` (in registration order) to call in this cycle: among those
/// unfinished and due now (the awakened), those the lifecycle picks; their positions in `ids`.
pub(crate) fn plan(lifecycle: &Lifecycle, ids: &[&str], records: &Records) -> Vec<usize> {
    let now = timestamps::now();
    let due = |r: &ProgressRecord| r.delayed.is_none_or(|d| d <= now);
    let awakened: Vec<usize> = (0..ids.len())
        .filter(|&i| records.get(ids[i]).is_some_and(|r| !is_done(r) && due(r)))
        .collect();
    let due: Vec<DueHandler<'_>> = awakened
        .iter()
        .map(|&i| {
            let record = records.get(ids[i]);
            DueHandler {
                id: ids[i],
                retries: record.map_or(0, |r| r.retries),
                started: record.and_then(|r| r.started),
            }
        })
        .collect();
    lifecycle
        .plan(&due)
        .into_iter()
        .map(|i| awakened[i])
        .collect()
}

/// A handler's progress record after an attempt (which `execute` logged), with its result
/// delivered to the patch; `None` when the attempt was aborted (nothing to record).
pub(crate) fn settle(
    id: &str,
    record: &ProgressRecord,
    started: time::OffsetDateTime,
    reason: Reason,
    outcome: Outcome,
    patch: &mut Patch,
) -> Option<ProgressRecord> {
    let finished = timestamps::now();
    let mut updated = record.clone();
    updated.started = Some(started);
    updated.purpose = Some(reason.as_str().to_string());
    // Saturating: the count comes from the object, where anything may be written.
    updated.retries = record.retries.saturating_add(1);
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
        Outcome::Failure(message, _) => {
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

/// How long until the first unfinished record is due (zero for one due now).
pub(crate) fn next_due<'a>(records: impl Iterator<Item = &'a ProgressRecord>) -> Option<Duration> {
    let now = timestamps::now();
    records
        .filter(|r| !is_done(r))
        .map(|r| {
            r.delayed.map_or(Duration::ZERO, |d| {
                (d - now).try_into().unwrap_or(Duration::ZERO)
            })
        })
        .min()
}

/// Stores the records that differ from those on the object, into `merge`.
pub(crate) fn store(
    storage: &dyn ProgressStorage,
    records: &Records,
    body: &Value,
    merge: &mut Value,
) {
    for (id, record) in records {
        let id = HandlerId::new(id.as_str());
        if storage.fetch(&id, body).as_ref() != Some(record) {
            storage.store(&id, record, body, merge);
        }
    }
}

/// Purges the records of a finished cause from the object, into `merge`: those of the
/// handlers `selected`, of every record's sub-handlers, and the records themselves.
pub(crate) fn purge(
    storage: &dyn ProgressStorage,
    records: &Records,
    selected: &[&str],
    body: &Value,
    merge: &mut Value,
) {
    let mut purged: Vec<HandlerId> = Vec::new();
    for (id, record) in records {
        purged.push(HandlerId::new(id.as_str()));
        purged.extend(record.subrefs.iter().cloned());
    }
    purged.extend(selected.iter().map(|id| HandlerId::new(*id)));
    purged.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    purged.dedup();
    for id in &purged {
        storage.purge(id, body, merge);
    }
}

/// Kopf's title of a cause, capitalized, for the log lines.
pub(crate) fn title(reason: Reason) -> &'static str {
    match reason {
        Reason::Create => "Creation",
        Reason::Update => "Updating",
        Reason::Delete => "Deletion",
        Reason::Resume => "Resuming",
    }
}
