//! An object's worker: takes its object's events out of its mailbox, has them observed in
//! order and the newest state processed, observes the events that come meanwhile, and gives
//! back what the events took of the budget (the queue's invariant 4). With nothing due, its
//! task ends and its mailbox rests.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::held::Held;
use super::mailbox::{Mailbox, Workers, weight_of};
use super::processor::{Next, ObjectProcessor, Observed};
use super::reaper::Rests;
use crate::aiokits::budget::Share;
use crate::aiokits::metrics::ResourceMetrics;
use crate::aiokits::tasks::Tasks;
use crate::clients::watching::Event;
use crate::helpers::sync::lock;

pub(super) struct Worker {
    pub(super) uid: String,
    pub(super) mailbox: Arc<Mailbox>,
    pub(super) workers: Workers,
    pub(super) rests: Arc<Rests>,
    pub(super) processor: Arc<dyn ObjectProcessor>,
    pub(super) limit: Option<Arc<Semaphore>>,
    /// The worker limit's permit: taken over from the mailbox's rest, or acquired.
    pub(super) permit: Option<OwnedSemaphorePermit>,
    /// It ended with its mailbox resting: the mailbox lives on.
    pub(super) rested: bool,
    pub(super) idle_timeout: Duration,
    pub(super) tasks: Tasks,
    pub(super) metrics: Option<ResourceMetrics>,
    /// The watcher's share of the budget of objects in flight.
    pub(super) share: Arc<Share>,
    /// What the events taken out of the mailbox hold of the budget: given back as the
    /// processings of their states end, or all when the worker ends (invariant 4).
    pub(super) holding: AtomicUsize,
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.share.give(*self.holding.get_mut());
        if self.rested {
            return;
        }
        let (left, weight) = self.mailbox.close();
        if let Some(metrics) = &self.metrics {
            metrics.workers.dec();
            metrics.queue_depth.dec_by(left as i64);
        }
        self.share.give(weight);
    }
}

/// Events being observed while their object is processed, and what they took of the budget.
type Observing<'a> = (Pin<Box<dyn Future<Output = Observed> + Send + 'a>>, usize);

/// What processing the object's newest state did, and what was observed meanwhile.
#[derive(Debug, Default)]
struct Processed {
    next: Next,
    /// Events came and were observed meanwhile: their newest state is processed next.
    observed: bool,
    /// What those events hold of the budget, until that next processing ends.
    weight: usize,
    /// One of them said the object is gone.
    gone: bool,
}

impl Worker {
    /// The worker's task. A plain function returning its future, not an `async fn`: one kept
    /// its `self` twice, as its argument and as its variable (the task of every object handled).
    #[allow(clippy::manual_async_fn)]
    pub(super) fn run(mut self) -> impl Future<Output = ()> + Send + 'static {
        async move { self.work().await }
    }

    /// Takes events out of the mailbox, keeping what they hold of the budget.
    fn take(&self) -> (Vec<Event>, usize) {
        let batch = self.mailbox.take();
        let weight = weight_of(&batch);
        self.holding.fetch_add(weight, Ordering::SeqCst);
        if let Some(metrics) = &self.metrics {
            metrics.queue_depth.dec_by(batch.len() as i64);
        }
        (batch, weight)
    }

    /// Gives back what the events of a state that is done with held.
    fn done(&self, weight: usize) {
        self.holding.fetch_sub(weight, Ordering::SeqCst);
        self.share.give(weight);
    }

    fn held(&self, weight: usize) -> Held<'_> {
        Held {
            share: Some(&self.share),
            weight,
        }
    }

    pub(super) async fn work(&mut self) {
        let token = self.tasks.token().clone();
        if let (Some(limit), None) = (&self.limit, &self.permit) {
            tokio::select! {
                _ = token.cancelled() => return,
                permit = limit.clone().acquire_owned() => self.permit = permit.ok(),
            }
        }
        let mut wakeup: Option<Instant> = None;
        // What the events of the state to process next hold of the budget.
        let mut weight = 0;
        // Events were observed while the object was processed: process their state at once.
        let mut again = false;
        loop {
            let (mut batch, mut taken) = self.take();
            if batch.is_empty() && !again {
                let Some(deadline) = wakeup else {
                    if token.is_cancelled() {
                        // Stopping (the queue, or the operator): nothing will reap a rest. A
                        // thousand handlers stopping at the exit grew the list of rests, a
                        // large reallocation amid a thousand frees, for nothing.
                        return;
                    }
                    // Nothing due, nothing arrived: the task ends, its mailbox rests (the
                    // object's newest state was let go after processing).
                    if self.mailbox.rest(&mut self.permit) {
                        self.rested = true;
                        let uid = std::mem::take(&mut self.uid);
                        // The time is taken under the lock: the list stays oldest first.
                        let mut due = lock(&self.rests.due);
                        due.push_back((Instant::now() + self.idle_timeout, uid));
                        drop(due);
                        self.rests.added.notify_one();
                        return;
                    }
                    continue;
                };
                // A retry is pending: the worker stays until it is due, or an event comes.
                // A notification may be left from an event already taken: only an event or
                // the deadline ends the wait.
                let due = tokio::select! {
                    _ = token.cancelled() => return,
                    _ = self.mailbox.arrived.notified() => false,
                    _ = tokio::time::sleep_until(deadline) => true,
                };
                (batch, taken) = self.take();
                if batch.is_empty() && !due {
                    continue;
                }
            }
            again = false;
            weight += taken;
            if !batch.is_empty() {
                // Boxed (by the processor), as the processing below.
                let observed = (self.processor.clone())
                    .observe(&self.uid, batch, self.held(weight), &self.tasks)
                    .await;
                if observed.gone {
                    self.done(std::mem::take(&mut weight));
                    if self.end() {
                        return;
                    }
                    wakeup = None;
                    continue;
                }
                // Observed, the events are one state to process: the newest.
                let keep = weight.min(1);
                self.done(weight - keep);
                weight = keep;
            }
            let processed = self.process(self.held(weight)).await;
            self.done(weight);
            weight = processed.weight;
            if processed.gone || processed.next.gone {
                self.done(std::mem::take(&mut weight));
                if self.end() {
                    return;
                }
                wakeup = None;
                continue;
            }
            again = processed.observed;
            wakeup = processed.next.wakeup.map(|delay| Instant::now() + delay);
            if wakeup.is_none() && !again && !token.is_cancelled() {
                // Nothing due: the next event brings the state again, so an object at rest
                // costs a few flags, not its body. Not when stopping: the bodies are then
                // freed with the memories, all together (and for many objects, apart from
                // the exit), not one by one by the workers as they stop.
                self.processor.release(&self.uid);
            }
        }
    }

    /// Processes the object's newest state; the events that come meanwhile are observed as
    /// they come (their event handlers and indexes do not wait for the processing's handlers),
    /// one batch at a time.
    async fn process(&self, held: Held<'_>) -> Processed {
        // Boxed (by the processor): the processing future is large, and a worker waits far
        // more than it works.
        let mut processing = (self.processor.clone()).process(&self.uid, held, &self.tasks);
        let mut observing: Option<Observing<'_>> = None;
        let mut processed = Processed::default();
        let next = loop {
            tokio::select! {
                biased;
                next = &mut processing => break next,
                observed = async { observing.as_mut().expect("observing").0.as_mut().await }, if observing.is_some() => {
                    let (_, weight) = observing.take().expect("observing");
                    self.observed(&mut processed, observed, weight);
                }
                _ = self.mailbox.arrived.notified(), if observing.is_none() && !processed.gone => {
                    let (batch, weight) = self.take();
                    if !batch.is_empty() {
                        processed.observed = true;
                        let held = self.held(weight);
                        let observe = (self.processor.clone()).observe(&self.uid, batch, held, &self.tasks);
                        observing = Some((observe, weight));
                    }
                }
            }
        };
        if let Some((observe, weight)) = observing {
            let observed = observe.await;
            self.observed(&mut processed, observed, weight);
        }
        processed.next = next;
        processed
    }

    /// Takes in what observing events while processing found. Their states are one state
    /// to process next (the newest): they keep one of what they took of the budget for it, and
    /// give back the rest.
    fn observed(&self, processed: &mut Processed, observed: Observed, weight: usize) {
        processed.gone |= observed.gone;
        let keep = weight.min(1 - processed.weight.min(1));
        self.done(weight - keep);
        processed.weight += keep;
    }

    /// The object is gone: forgets it. `true` when the worker ends (no event came since).
    fn end(&self) -> bool {
        self.processor.forget(&self.uid);
        let mut workers = lock(&self.workers);
        if self.mailbox.is_empty() {
            workers.remove(&self.uid);
            return true;
        }
        false
    }
}
