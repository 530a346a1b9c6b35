//! Sub-handlers (Kopf's `@kopf.subhandler`): after a handler's call, the sub-handlers it
//! registered run in the lifecycle's order, each with a progress record of its own under
//! `parent/child`, and the parent stands as they do (see
//! [`SubHandlers`](crate::registry::SubHandlers)). Those that a handler runs in place
//! ([`execute`](crate::execute)) run the same way, during its call ([`RunInPlace`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::actions::execution::{self, Outcome};
use crate::actions::invocation::{InPlace, Reason, SubHandler, SubHandlers};
use crate::aiokits::tasks::Tasks;
use crate::aiokits::work::Work;
use crate::clients::posting::Logger;
use crate::configs::lifecycles::Lifecycle;
use crate::configs::storage::timestamps;
use crate::configs::storage::{HandlerId, ProgressStorage};
use crate::helpers::sync::lock;
use crate::reactor::invocations::{Change, Invocations};
use crate::reactor::progress::{self, Records};
use crate::structs::bodies::Body;
use crate::structs::diff::{self, Diff};
use crate::structs::errors::{Error, Result};
use crate::structs::filters;
use crate::structs::memos::Memo;
use crate::structs::patch::Patch;

/// What the handlers of one cause see, and so their sub-handlers.
pub(crate) struct Cause<'a> {
    /// The id of the handler at the top, whose sub-handlers these are: their attempts are
    /// counted under it in the metrics.
    pub(crate) handler: &'a str,
    pub(crate) body: &'a Arc<Body>,
    pub(crate) memo: &'a Memo,
    pub(crate) reason: Reason,
    pub(crate) diff: &'a Arc<Diff>,
    pub(crate) old: &'a Option<Arc<Value>>,
    pub(crate) new: &'a Option<Arc<Value>>,
    /// Whether sub-handlers with a field run only when it changed (Kopf's
    /// `field_needs_change`, inherited from an `on_update` or `on_field` handler at the top).
    pub(crate) needs_change: bool,
    pub(crate) tasks: &'a Tasks,
    /// The order of the sub-handlers' attempts: the operator's, or the one that
    /// [`execute`](crate::execute) was given at a level above.
    pub(crate) lifecycle: &'a Lifecycle,
}

impl Cause<'_> {
    /// The cause, kept for sub-handlers run in place during a call.
    fn held(&self) -> HeldCause {
        HeldCause {
            handler: self.handler.to_string(),
            body: self.body.clone(),
            memo: self.memo.clone(),
            reason: self.reason,
            diff: self.diff.clone(),
            old: self.old.clone(),
            new: self.new.clone(),
            needs_change: self.needs_change,
            tasks: self.tasks.clone(),
            lifecycle: self.lifecycle.clone(),
        }
    }
}

/// A [`Cause`] owned, for as long as a call may run sub-handlers in place.
struct HeldCause {
    handler: String,
    body: Arc<Body>,
    memo: Memo,
    reason: Reason,
    diff: Arc<Diff>,
    old: Option<Arc<Value>>,
    new: Option<Arc<Value>>,
    needs_change: bool,
    tasks: Tasks,
    lifecycle: Lifecycle,
}

impl HeldCause {
    fn lend<'a>(&'a self, lifecycle: &'a Lifecycle) -> Cause<'a> {
        Cause {
            handler: &self.handler,
            body: &self.body,
            memo: &self.memo,
            reason: self.reason,
            diff: &self.diff,
            old: &self.old,
            new: &self.new,
            needs_change: self.needs_change,
            tasks: &self.tasks,
            lifecycle,
        }
    }
}

/// A sub-handler that its filters select, with the change it sees: narrowed to its field, if
/// it has one, within what its parent sees.
struct Chosen {
    handler: SubHandler,
    diff: Arc<Diff>,
    old: Option<Arc<Value>>,
    new: Option<Arc<Value>>,
}

/// What running sub-handlers needs: how to invoke them, where their progress is kept, and
/// the pace of their attempts. One for each resource's processor.
pub(crate) struct SubHandling {
    pub(crate) invocations: Invocations,
    pub(crate) progress: Arc<dyn ProgressStorage>,
    pub(crate) default_backoff: Duration,
}

/// How the sub-handlers of a parent stand after a cycle.
struct Settled {
    /// Their ids (`parent/child`), at any depth.
    ids: Vec<String>,
    /// `Success` when all finished (some may have failed for good, as in Kopf), `Retry`
    /// (with an empty message) while some are unfinished, `Aborted` when stopping.
    outcome: Outcome,
}

impl SubHandling {
    /// After a handler's call: runs the sub-handlers it registered, if any, adds their ids to
    /// `subrefs`, and tells how the handler stands (its own outcome when it registered none).
    #[allow(
        clippy::too_many_arguments,
        reason = "the parent's record and the cycle's state, lent for the call"
    )]
    pub(crate) async fn settle_parent(
        self: &Arc<Self>,
        id: &str,
        outcome: Outcome,
        registered: &SubHandlers,
        cause: &Cause<'_>,
        records: &mut Records,
        patch: &mut Patch,
        subrefs: &mut Vec<HandlerId>,
        logger: &Logger,
    ) -> Outcome {
        let Outcome::Success(result) = &outcome else {
            return outcome;
        };
        let children = match registered.take() {
            Ok(children) => children,
            Err(late) => {
                warn_late(id, &late, logger);
                return outcome;
            }
        };
        if children.is_empty() {
            return outcome;
        }
        let settled = self.run(id, children, cause, records, patch).await;
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
        record_parent(id, &outcome, cause);
        outcome
    }

    /// How the handler `parent` runs sub-handlers in place during its call on this cause;
    /// what they did is [`gather`](Self::gather)ed after the call.
    pub(crate) fn in_place(self: &Arc<Self>, parent: &str, cause: &Cause<'_>) -> Arc<RunInPlace> {
        Arc::new(RunInPlace {
            parent: parent.to_string(),
            live: std::sync::Mutex::new(Some(Arc::new(Live {
                subhandling: self.clone(),
                cause: cause.held(),
            }))),
            executed: tokio::sync::Mutex::new(Executed::default()),
        })
    }

    /// After a call: what the sub-handlers it ran in place did goes to the patch (their
    /// results) and to `records` (their records, stored or purged with the others when the
    /// cycle ends), and their ids to the parent's `subrefs`.
    pub(crate) fn gather(
        &self,
        executed: Executed,
        patch: &mut Patch,
        subrefs: &mut Vec<HandlerId>,
        records: &mut Records,
    ) {
        let Executed {
            records: made,
            patch: results,
            ids,
        } = executed;
        patch.merge(results);
        records.extend(made);
        for id in ids {
            let id = HandlerId::new(id.as_str());
            if !subrefs.contains(&id) {
                subrefs.push(id);
            }
        }
    }

    /// Runs the due sub-handlers that a parent registered (in the lifecycle's order), records
    /// their progress in `records`, and tells how they stand.
    fn run<'a>(
        self: &'a Arc<Self>,
        parent: &'a str,
        children: Vec<SubHandler>,
        cause: &'a Cause<'a>,
        records: &'a mut Records,
        patch: &'a mut Patch,
    ) -> Pin<Box<dyn Future<Output = Settled> + Send + 'a>> {
        Box::pin(async move {
            let (body, reason) = (cause.body, cause.reason);
            let now = timestamps::now();
            // As Kopf: those that their filters do not select this time are neither run nor
            // waited for.
            let children: Vec<Chosen> = children
                .into_iter()
                .filter_map(|child| self.choose(parent, child, cause))
                .collect();
            let ids: Vec<String> = children
                .iter()
                .map(|c| format!("{parent}/{}", c.handler.id))
                .collect();
            for id in &ids {
                if !records.contains_key(id) {
                    let record = progress::fetch(&*self.progress, id, body, reason);
                    records.insert(id.clone(), record);
                }
            }
            let mut all_ids = ids.clone();
            let names: Vec<&str> = ids.iter().map(String::as_str).collect();
            for i in progress::plan(cause.lifecycle, &names, records) {
                let (chosen, id) = (&children[i], &ids[i]);
                let child = &chosen.handler;
                let record = records.get(id).cloned().unwrap_or_default();
                let started = record.started.unwrap_or(now);
                let change = Change {
                    reason: Some(reason),
                    diff: Some(chosen.diff.clone()),
                    old: chosen.old.clone(),
                    new: chosen.new.clone(),
                };
                let mut invocation = self.invocations.make(
                    body.clone(),
                    cause.memo.clone(),
                    change,
                    &child.options,
                    cause.tasks.child(),
                );
                invocation.retry = record.retries;
                invocation.started = started;
                invocation.counted_as = Some(cause.handler.to_string());
                invocation
                    .logger
                    .set_span(tracing::info_span!(target: "kopf::handler", "handler", handler.id = %id, object.name = invocation.name(), object.namespace = invocation.namespace(), reason = %reason));
                let logger = invocation.logger.clone();
                let grandchildren = invocation.gathered.clone();
                // Its own sub-handlers see what it saw.
                let seen = Cause {
                    diff: &chosen.diff,
                    old: &chosen.old,
                    new: &chosen.new,
                    ..*cause
                };
                let in_place = self.in_place(id, &seen);
                grandchildren.run_in_place(in_place.clone());
                let outcome = execution::execute(
                    id,
                    &child.function,
                    &child.options,
                    self.default_backoff,
                    invocation,
                )
                .await;
                patch.merge(grandchildren.take_patch());
                let mut subrefs = record.subrefs.clone();
                self.gather(in_place.end(), patch, &mut subrefs, records);
                let outcome = self
                    .settle_parent(
                        id,
                        outcome,
                        &grandchildren,
                        &seen,
                        records,
                        patch,
                        &mut subrefs,
                        &logger,
                    )
                    .await;
                let Some(mut updated) =
                    progress::settle(id, &record, started, reason, outcome, patch)
                else {
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
            let outcome = match progress::next_due(ids.iter().filter_map(|id| records.get(id))) {
                Some(delay) => Outcome::Retry {
                    delay,
                    message: String::new(),
                },
                // As Kopf's `execute()`: done once all have finished, whether or not some
                // failed for good (their own records and log lines say so).
                None => Outcome::Success(None),
            };
            Settled {
                ids: all_ids,
                outcome,
            }
        })
    }
}

impl SubHandling {
    /// The sub-handler with the change it sees, if its filters select it for this cause (as
    /// Kopf's `registries.match`: labels, annotations, the field's values and change, `when`;
    /// a panicking filter does not select it).
    fn choose(&self, parent: &str, child: SubHandler, cause: &Cause<'_>) -> Option<Chosen> {
        let options = &child.options;
        let id = format!("{parent}/{}", child.id);
        let body: &Value = cause.body;
        let (diff, old, new) = match &options.field {
            None => (cause.diff.clone(), cause.old.clone(), cause.new.clone()),
            Some(field) => (
                Arc::new(cause.diff.reduce(field)),
                cause
                    .old
                    .as_deref()
                    .and_then(|old| diff::resolve(old, field))
                    .cloned()
                    .map(Arc::new),
                cause
                    .new
                    .as_deref()
                    .and_then(|new| diff::resolve(new, field))
                    .cloned()
                    .map(Arc::new),
            ),
        };
        let passes = execution::filter(&id, body, || {
            filters::match_metadata(&options.labels, &options.annotations, body)
                && options.field.as_ref().is_none_or(|_| {
                    let (old, new) = (old.as_deref(), new.as_deref());
                    (!cause.needs_change || filters::field_changed(old, new))
                        && filters::match_field_change(
                            options.value.as_ref(),
                            options.old.as_ref(),
                            options.new.as_ref(),
                            old,
                            new,
                            body,
                        )
                })
        });
        if !passes {
            return None;
        }
        if let Some(when) = &options.when {
            let change = Change {
                reason: Some(cause.reason),
                diff: Some(diff.clone()),
                old: old.clone(),
                new: new.clone(),
            };
            let invocation = self.invocations.make(
                cause.body.clone(),
                cause.memo.clone(),
                change,
                options,
                cause.tasks.child(),
            );
            if !execution::filter(&id, body, || when(&invocation)) {
                return None;
            }
        }
        Some(Chosen {
            handler: child,
            diff,
            old,
            new,
        })
    }
}

/// What the sub-handlers run in place during one call did, gathered after the call.
#[derive(Default)]
pub(crate) struct Executed {
    /// Their records (and their own sub-handlers'), to store.
    records: Records,
    /// Their results and the patches of their calls.
    patch: Patch,
    /// Their ids (`parent/child`), at any depth, for the parent's `subrefs`.
    ids: Vec<String>,
}

/// How a change handler's call runs sub-handlers in place ([`execute`](crate::execute)): as
/// those it registers run after the call, with this cause, each in a node of the cycle's
/// cancellation tree.
pub(crate) struct RunInPlace {
    parent: String,
    /// What runs them, while the call lasts; `None` once it has ended: what runs in place then
    /// would be gathered by no one. Let go of at the end, so that sub-handlers (or an
    /// `Execution`) that a user keeps past the call do not keep the operator's client.
    live: std::sync::Mutex<Option<Arc<Live>>>,
    /// Locked while sub-handlers run, so that concurrent calls of `execute` within one call
    /// take turns.
    executed: tokio::sync::Mutex<Executed>,
}

/// What runs sub-handlers in place during a call.
struct Live {
    subhandling: Arc<SubHandling>,
    cause: HeldCause,
}

impl RunInPlace {
    /// The call has ended: what its sub-handlers did, to [`SubHandling::gather`]. (Sub-handlers
    /// still running in place, in a task the handler left behind, are not waited for: they
    /// are retried with their parent.)
    pub(crate) fn end(&self) -> Executed {
        drop(lock(&self.live).take());
        match self.executed.try_lock() {
            Ok(mut executed) => std::mem::take(&mut *executed),
            Err(_) => Executed::default(),
        }
    }
}

impl InPlace for RunInPlace {
    fn run(
        self: Arc<Self>,
        handlers: Vec<SubHandler>,
        lifecycle: Option<Lifecycle>,
    ) -> Pin<Box<dyn Future<Output = Result<()>> + Send>> {
        Box::pin(async move {
            let mut executed = self.executed.lock().await;
            let Some(live) = lock(&self.live).clone() else {
                let parent = &self.parent;
                return Err(Error::msg(format_args!(
                    "kopf::execute() or subhandlers.execute() was awaited after the call of \
                     handler '{parent}' had ended: await it within the call"
                )));
            };
            let lifecycle = lifecycle.unwrap_or_else(|| live.cause.lifecycle.clone());
            let cause = live.cause.lend(&lifecycle);
            let Executed {
                records,
                patch,
                ids,
            } = &mut *executed;
            let settled = live
                .subhandling
                .run(&self.parent, handlers, &cause, records, patch)
                .await;
            for id in settled.ids {
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
            match settled.outcome {
                Outcome::Success(_) | Outcome::Failure(..) => Ok(()),
                Outcome::Retry { delay, .. } => Err(Error::children_retry(delay)),
                Outcome::Aborted => Err(Error::not_started(
                    "the sub-handlers run in place were aborted: the operator stops",
                )),
            }
        })
    }
}

/// Says which sub-handlers a handler registered after it ran those it had in place: as in
/// Kopf, they do not run (neither after the call nor on a second `execute`), which a user
/// would otherwise not see.
fn warn_late(id: &str, late: &[SubHandler], logger: &Logger) {
    if late.is_empty() {
        return;
    }
    let ids: Vec<String> = late.iter().map(|h| format!("'{id}/{}'", h.id)).collect();
    let ids = ids.join(", ");
    logger.warn(format_args!(
        "Sub-handlers {ids} were registered after handler '{id}' ran its sub-handlers in \
         place (subhandlers.execute()), and do not run: register them before it, or run them \
         with kopf::execute([...])."
    ));
}

/// Keeps how a parent stands once its sub-handlers settled, in place of its own attempt's
/// success, when the operator keeps outcomes.
fn record_parent(id: &str, outcome: &Outcome, cause: &Cause<'_>) {
    let Some(outcomes) = cause.tasks.outcomes() else {
        return;
    };
    let metadata = &cause.body["metadata"];
    let name = metadata["name"].as_str().unwrap_or_default();
    let work = Work::new(id, metadata["namespace"].as_str(), name);
    let retries = outcomes.retries(work.object(), id).max(1);
    if let Some(ended) = outcome.as_handler_outcome(retries) {
        outcomes.record(work.object(), id, ended);
    }
}

/// Logs how a parent stands once its sub-handlers settled, as Kopf's `execute` does for a
/// handler that registered some.
fn report_parent(id: &str, outcome: &Outcome, logger: &Logger) {
    match outcome {
        Outcome::Success(_) => logger.info(format_args!("Handler '{id}' succeeded.")),
        Outcome::Failure(message, _) => {
            logger.error(format_args!("Handler '{id}' failed permanently: {message}"));
        }
        Outcome::Retry { .. } => {
            tracing::debug!(target: "kopf::handler", parent: logger.span(), "Handler '{id}' has unfinished sub-handlers. Will retry soon.");
        }
        Outcome::Aborted => {}
    }
}
