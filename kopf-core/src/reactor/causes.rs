//! Kopf's cause detection for change handlers: why the handlers are called now (the reason),
//! and which handlers that reason selects, each with the change it sees.

use std::sync::Arc;

use serde_json::Value;

use crate::actions::execution;
use crate::actions::invocation::Reason;
use crate::intents::handlers::{ChangeHandler, Trigger};
use crate::structs::diff::{self, Diff};
use crate::structs::filters;

/// The reason to call change handlers for an object that is `deleting` (or not), whose
/// diff-base is `old` and whose essence changed by `diff` since; `initial` when the operator
/// sees it for the first time since its start and has not handled it yet. `None`: nothing
/// happened (Kopf's NOOP).
pub(crate) fn detect(
    deleting: bool,
    old: Option<&Value>,
    diff: &Diff,
    initial: bool,
) -> Option<Reason> {
    if deleting {
        Some(Reason::Delete)
    } else if old.is_none() {
        Some(Reason::Create)
    } else if diff.is_empty() && initial {
        Some(Reason::Resume)
    } else if diff.is_empty() {
        None
    } else {
        Some(Reason::Update)
    }
}

/// A change handler selected for a reason, with the change it sees (narrowed to its field,
/// if it has one).
#[derive(Debug)]
pub(crate) struct Selected<'a> {
    pub(crate) handler: &'a ChangeHandler,
    pub(crate) diff: Arc<Diff>,
    pub(crate) old: Option<Arc<Value>>,
    pub(crate) new: Option<Arc<Value>>,
}

/// The handlers, of those whose filters the object passes, that this reason calls: by their
/// trigger, and for those with a field, only when that field changed and its values pass
/// the handler's value filters (a panicking filter does not pass; see `execution::filter`).
pub(crate) fn select<'a>(
    object: &Value,
    matching: Vec<&'a ChangeHandler>,
    reason: Reason,
    initial: bool,
    diff: &Arc<Diff>,
    old: Option<&Arc<Value>>,
    new: &Arc<Value>,
) -> Vec<Selected<'a>> {
    matching
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
            let Some(field) = &handler.options.field else {
                return Some(Selected {
                    handler,
                    diff: diff.clone(),
                    old: old.cloned(),
                    new: Some(new.clone()),
                });
            };
            let narrowed = Arc::new(diff.reduce(field));
            let old_value = old
                .and_then(|o| diff::resolve(o, field))
                .cloned()
                .map(Arc::new);
            let new_value = diff::resolve(new, field).cloned().map(Arc::new);
            // As Kopf: field and update handlers need their field to have changed, whatever
            // the reason (a resume with the field unchanged calls neither).
            let needs_change = matches!(handler.trigger, Trigger::Field | Trigger::Update);
            if needs_change && narrowed.is_empty() {
                return None;
            }
            let o = &handler.options;
            let passes = execution::filter(&handler.id, object, || {
                filters::match_field_change(
                    o.value.as_ref(),
                    o.old.as_ref(),
                    o.new.as_ref(),
                    old_value.as_deref(),
                    new_value.as_deref(),
                    object,
                )
            });
            if !passes {
                return None;
            }
            Some(Selected {
                handler,
                diff: narrowed,
                old: old_value,
                new: new_value,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reasons_follow_kopfs_detection() {
        let old = json!({"spec": {"a": 1}});
        let changed = diff::diff(Some(&old), Some(&json!({"spec": {"a": 2}})));
        let same = Diff::default();
        assert_eq!(detect(true, Some(&old), &same, false), Some(Reason::Delete));
        assert_eq!(detect(false, None, &same, true), Some(Reason::Create));
        assert_eq!(detect(false, Some(&old), &same, true), Some(Reason::Resume));
        assert_eq!(detect(false, Some(&old), &same, false), None);
        assert_eq!(
            detect(false, Some(&old), &changed, true),
            Some(Reason::Update)
        );
    }
}
