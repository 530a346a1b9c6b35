//! The cycle of change handlers on the object's state: Kopf's prematch and the finalizer, the
//! cause and the handlers it selects, their calls as the lifecycle plans them (with their
//! sub-handlers), and the records, results and diff-base they leave ([`Cycle`]).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};

use super::Processor;
use super::background::DAEMONS_POLLING;
use crate::actions::execution;
use crate::actions::invocation::Reason;
use crate::aiokits::tasks::{StopReason, Tasks};
use crate::clients::patching;
use crate::clients::posting::Logger;
use crate::configs::storage::ProgressRecord;
use crate::configs::storage::timestamps;
use crate::intents::handlers::{ChangeHandler, Trigger};
use crate::intents::registry::deduplicated;
use crate::reactor::causes::{self, Selected};
use crate::reactor::invocations::Change;
use crate::reactor::progress::{self, Records};
use crate::reactor::subhandling::Cause;
use crate::structs::bodies::Body;
use crate::structs::diff;
use crate::structs::filters;
use crate::structs::patch::Patch;

impl Processor {
    pub(super) async fn handle_changes(
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
}

/// What one processing cycle produced.
#[derive(Debug, Default)]
pub(super) struct Cycle {
    pub(super) patch: Patch,
    /// The framework's JSON-patch operation on the finalizers, written after the patch.
    pub(super) finalizer: Option<Value>,
    pub(super) wakeup: Option<Duration>,
    pub(super) handled: bool,
    /// A daemon or timer matches again but its previous run has not ended yet: it starts on
    /// a later look at the object.
    pub(super) respawn: bool,
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
