//! The queue of one watcher ([`Queue`]): routes each event to its object's mailbox, starting
//! the object's worker when none runs, and takes the event's part of the budget of objects in
//! flight; at the end of a listing, tells the workers of the known objects it lacked that they
//! vanished.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use foldhash::HashMap;
use tokio::sync::Semaphore;

use super::known::KnownObjects;
use super::mailbox::{Mailbox, Taker, Workers, weight};
use super::processor::ObjectProcessor;
use super::reaper::{Rests, reap};
use super::worker::Worker;
use crate::aiokits::budget::Share;
use crate::aiokits::metrics::ResourceMetrics;
use crate::aiokits::tasks::Tasks;
use crate::clients::watching::Event;
use crate::helpers::sync::lock;

/// Routes the events of one watcher to per-object workers.
pub(crate) struct Queue {
    pub(super) workers: Workers,
    /// The mailboxes that rested, for the reaper.
    pub(super) rests: Arc<Rests>,
    /// The objects of this watcher, to tell which ones a new listing lacks (invariant 3).
    known: KnownObjects,
    processor: Arc<dyn ObjectProcessor>,
    /// Whether events waiting for their worker are merged into the newest.
    merge: bool,
    tasks: Tasks,
    limit: Option<Arc<Semaphore>>,
    idle_timeout: Duration,
    metrics: Option<ResourceMetrics>,
    /// This watcher's share of the budget of objects in flight.
    share: Arc<Share>,
}

impl Queue {
    pub(crate) fn new(
        processor: Arc<dyn ObjectProcessor>,
        tasks: Tasks,
        limit: Option<usize>,
        idle_timeout: Duration,
        share: Arc<Share>,
    ) -> Queue {
        let metrics = tasks
            .metrics()
            .map(|m| m.resource(&processor.resource().to_string()));
        let workers = Workers::default();
        let rests = Arc::new(Rests::default());
        tasks.spawn(reap(
            workers.clone(),
            rests.clone(),
            idle_timeout,
            metrics.clone(),
            tasks.token().clone(),
        ));
        Queue {
            metrics,
            workers,
            rests,
            known: KnownObjects::default(),
            merge: !processor.wants_every_event(),
            processor,
            tasks,
            limit: limit.map(|n| Arc::new(Semaphore::new(n.max(1)))),
            idle_timeout,
            share,
        }
    }

    /// This watcher's share of the budget of objects in flight, which it waits for room in
    /// before it reads on.
    pub(crate) fn budget(&self) -> &Share {
        &self.share
    }

    /// This queue knowing the objects that an earlier queue of the same watch knew (one
    /// stopped by a pause): those that its first listing lacks were deleted meanwhile, and
    /// reach their workers as [`Event::Vanished`].
    pub(crate) fn knowing(mut self, known: KnownObjects) -> Queue {
        self.known = known;
        self
    }

    /// The objects this queue knows, as they change: for a later queue of the same watch.
    pub(crate) fn known(&self) -> KnownObjects {
        self.known.clone()
    }

    /// Hands an event to its object's worker, starting one if needed; at the end of a
    /// listing, tells the workers of the objects it lacked that they vanished.
    pub(crate) fn push(&self, event: Event) {
        let vanished = lock(&self.known.0).see(&event);
        for object in vanished {
            self.route(Event::Vanished(object));
        }
        self.route(event);
    }

    fn route(&self, event: Event) {
        let uid = match &event {
            Event::Listed(object) | Event::Changed(_, object) | Event::Vanished(object) => {
                object["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            }
            Event::ListingDone => return,
        };
        self.processor.expect(&event);
        self.share.take(weight(&event));
        if let Some(metrics) = &self.metrics {
            metrics.received(match &event {
                Event::Changed(kind, _) => Some(*kind),
                _ => None,
            });
            metrics.queue_depth.inc();
        }
        let mut workers = lock(&self.workers);
        let (mailbox, permit) = match workers.get(&uid) {
            Some(mailbox) => match mailbox.put(event, self.merge) {
                Ok(put) => {
                    if let Some(older) = &put.merged {
                        self.share.give(weight(older));
                        if let Some(metrics) = &self.metrics {
                            metrics.queue_depth.dec();
                        }
                        self.processor.passed(&uid, older);
                    }
                    match put.taker {
                        Taker::Running => return,
                        Taker::Resting(permit) => (mailbox.clone(), permit),
                    }
                }
                Err(event) => (self.open(&mut workers, &uid, event), None),
            },
            None => (self.open(&mut workers, &uid, event), None),
        };
        drop(workers);
        let worker = Worker {
            metrics: self.metrics.clone(),
            share: self.share.clone(),
            holding: AtomicUsize::new(0),
            uid,
            mailbox,
            workers: self.workers.clone(),
            rests: self.rests.clone(),
            processor: self.processor.clone(),
            limit: self.limit.clone(),
            permit,
            rested: false,
            idle_timeout: self.idle_timeout,
            tasks: self.tasks.child(),
        };
        self.tasks.spawn(worker.run());
    }

    /// A new mailbox for the object, with the event in it.
    fn open(
        &self,
        workers: &mut HashMap<String, Arc<Mailbox>>,
        uid: &str,
        event: Event,
    ) -> Arc<Mailbox> {
        let mailbox = Arc::new(Mailbox::default());
        let _ = mailbox.put(event, false);
        workers.insert(uid.to_owned(), mailbox.clone());
        if let Some(metrics) = &self.metrics {
            metrics.workers.inc();
        }
        mailbox
    }
}
