//! Per-object workers: the events of one object are handled in order by one worker, created
//! on demand and ended after an idle timeout.
//!
//! A worker with nothing to do (no event, no retry due) ends its task at once and leaves its
//! mailbox *resting*: the object's next event starts its next task, and after the idle timeout
//! the queue's reaper forgets the mailbox (and the worker limit's permit that it kept). So a
//! burst of many objects costs a small mailbox per object while they idle out, not a task.
//!
//! Every event routed takes its part of the operator's budget of objects in flight (its
//! watcher's [`Share`]) until the processing of the state it brought ends; the watcher reads
//! no further while the budget is full. A worker *observes* its object's events in order (its
//! memory, the indexes, the event handlers: [`ObjectProcessor::observe`]), then *processes*
//! its newest state (the cause and its handlers, the write: [`ObjectProcessor::process`]);
//! events that come while it processes are observed as they come, and the newest state is
//! processed again afterwards. So an object whose handler runs long holds one state and the
//! events not observed yet, not every event since; when nothing wants every event (no event
//! handlers, no indexes), the events waiting in a mailbox are merged into the newest.
//!
//! Invariants:
//! 1. At most one worker per object uid runs: the map of mailboxes is the only way to reach
//!    one; a worker rests its mailbox, under the mailbox's lock, only when no event is in it,
//!    and an event put in a resting mailbox starts the next worker; a mailbox leaves the map
//!    (under its lock) only when it is empty, so no event is ever put where nobody takes it.
//! 2. Every raw event reaches the processor's `observe`, in order, unless the processor does
//!    not want every event; only the newest state is processed.
//! 3. A listing forgets nothing: an object the queue knew of (listed or changed, not deleted)
//!    that a completed new listing lacks reaches its worker as [`Event::Vanished`], so it
//!    leaves the indexes and the operator's memory as a deleted one does. The queue keeps
//!    only each known object's identity for this, not the object. After a pause, the queue
//!    that watches again knows what the one before it knew ([`KnownObjects`]), so an object
//!    deleted while paused vanishes too.
//! 4. What an event takes of the budget is given back exactly once: when the processing of
//!    its state ends, when it is merged into a newer event, or when its worker ends without
//!    processing it.
//!
//! The queue knows its processor only as an [`ObjectProcessor`]: what it needs of whatever
//! processes the events it routes.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use foldhash::{HashMap, HashSet};
use serde_json::{Value, json};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::aiokits::budget::Share;
use crate::aiokits::metrics::ResourceMetrics;
use crate::aiokits::tasks::Tasks;
use crate::clients::watching::Event;
use crate::helpers::freeing::FreedApart;
use crate::helpers::sync::lock;
use crate::structs::bodies::Body;
use crate::structs::resources::Resource;

/// The mailboxes by uid (freed apart: one may rest for each object).
type Workers = Arc<Mutex<FreedApart<HashMap<String, Arc<Mailbox>>>>>;

/// The events of one object on their way to its worker. Events are put in only under the
/// lock of the map of workers, so a worker that finds its mailbox empty under that lock may
/// leave (invariant 1). Small on purpose: a mailbox stays for the idle timeout after its last
/// event, so a burst of many objects has a mailbox each.
#[derive(Debug, Default)]
struct Mailbox {
    inbox: Mutex<Inbox>,
    arrived: Notify,
}

#[derive(Debug, Default)]
struct Inbox {
    events: Vec<Event>,
    /// Its worker has ended (stopped, or panicked): nothing more is put in. Under the same
    /// lock as the events, so that an event is either counted as left at the end or refused.
    closed: bool,
    /// No worker runs: the last one found nothing to do and ended.
    resting: Option<Resting>,
}

/// A mailbox whose worker ended with nothing to do.
#[derive(Debug)]
struct Resting {
    since: Instant,
    /// The worker limit's permit, kept until the mailbox is forgotten, as a worker that
    /// waits for its idle timeout would keep it.
    permit: Option<OwnedSemaphorePermit>,
}

/// Who takes an event put in a mailbox.
#[derive(Debug)]
enum Taker {
    /// The running worker.
    Running,
    /// Nobody yet: the mailbox rested; a new worker takes it, with the permit it kept.
    Resting(Option<OwnedSemaphorePermit>),
}

/// What an event takes of the budget of objects in flight: a state of the object, but for
/// a vanished object's, which carries only its identity.
fn weight(event: &Event) -> usize {
    match event {
        Event::Vanished(_) | Event::ListingDone => 0,
        Event::Listed(_) | Event::Changed(..) => 1,
    }
}

fn weight_of(events: &[Event]) -> usize {
    events.iter().map(weight).sum()
}

/// The one event that stands for `older` followed by `newer` when only the newest state
/// matters: the newer object, with what the older one told of the object's first sight (from
/// a listing or a watch; as an object's first sight decides whether resume handlers apply).
/// A deletion is final: nothing is merged into it. `Err` gives `newer` back, unmerged.
///
/// The states of the events merged away are never observed, but they came: the queue tells
/// the processor so ([`ObjectProcessor::passed`]), as one of them may be the version of the
/// object's own write that its worker awaits (Kopf's consistency rule).
fn merged(older: &Event, newer: Event) -> Result<Event, Event> {
    match (older, newer) {
        (Event::Changed("DELETED", _) | Event::Vanished(_) | Event::ListingDone, newer) => {
            Err(newer)
        }
        (_, newer @ (Event::Changed("DELETED", _) | Event::Vanished(_))) => Ok(newer),
        (Event::Listed(_), Event::Listed(object) | Event::Changed(_, object)) => {
            Ok(Event::Listed(object))
        }
        (Event::Changed(..), Event::Listed(object)) => Ok(Event::Changed("MODIFIED", object)),
        (Event::Changed(..), newer @ Event::Changed(..)) => Ok(newer),
        (_, newer) => Err(newer),
    }
}

/// What putting an event in a mailbox did.
#[derive(Debug)]
struct Put {
    taker: Taker,
    /// An older event was merged into it: what that one took of the budget, to give back.
    merged: Option<Event>,
}

impl Mailbox {
    /// Puts the event in (merged into the last one waiting, if `merge`), unless the worker
    /// has ended (`Err` gives it back).
    fn put(&self, event: Event, merge: bool) -> Result<Put, Event> {
        let mut inbox = lock(&self.inbox);
        if inbox.closed {
            return Err(event);
        }
        let mut replaced = None;
        let event = match inbox.events.last() {
            Some(last) if merge => match merged(last, event) {
                Ok(event) => {
                    replaced = inbox.events.pop();
                    event
                }
                Err(event) => event,
            },
            _ => event,
        };
        inbox.events.push(event);
        let taker = match inbox.resting.take() {
            Some(resting) => Taker::Resting(resting.permit),
            None => Taker::Running,
        };
        drop(inbox);
        if let Taker::Running = taker {
            self.arrived.notify_one();
        }
        Ok(Put {
            taker,
            merged: replaced,
        })
    }

    /// Lets the mailbox rest with the worker's permit, unless an event is in it (`false`).
    fn rest(&self, permit: &mut Option<OwnedSemaphorePermit>) -> bool {
        let mut inbox = lock(&self.inbox);
        if !inbox.events.is_empty() {
            return false;
        }
        inbox.resting = Some(Resting {
            since: Instant::now(),
            permit: permit.take(),
        });
        true
    }

    /// Whether it has rested (without an event since) for at least `timeout`.
    fn rested_for(&self, timeout: Duration, now: Instant) -> bool {
        lock(&self.inbox)
            .resting
            .as_ref()
            .is_some_and(|resting| now.saturating_duration_since(resting.since) >= timeout)
    }

    fn take(&self) -> Vec<Event> {
        std::mem::take(&mut lock(&self.inbox).events)
    }

    fn is_empty(&self) -> bool {
        lock(&self.inbox).events.is_empty()
    }

    /// Refuses every later event; returns how many were left untaken, and what they took of
    /// the budget.
    fn close(&self) -> (usize, usize) {
        let mut inbox = lock(&self.inbox);
        inbox.closed = true;
        (inbox.events.len(), weight_of(&inbox.events))
    }
}

/// What a worker should do after processing.
#[derive(Debug, Default)]
pub(crate) struct Next {
    /// Process the object again after this delay, even without new events (a retry is due).
    pub(crate) wakeup: Option<Duration>,
    /// The object is gone: the worker may end.
    pub(crate) gone: bool,
}

/// What observing some events of an object found.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    /// The object is gone (deleted, vanished, or let go of): nothing of it is processed.
    pub(crate) gone: bool,
}

/// What a processing (or an observing) holds of the operator's budget of objects in flight,
/// and a way to set it aside while it waits for what its own progress does not bring.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Held<'a> {
    share: Option<&'a Share>,
    weight: usize,
}

impl Held<'_> {
    /// Waits for `waiting` with what is held given back meanwhile (taken again after, even past
    /// the budget's limit): for the indexes' first filling, which needs every object listed, so
    /// the listing must not wait for room that only this wait's end would free.
    pub(crate) async fn aside<T>(self, waiting: impl Future<Output = T>) -> T {
        /// Takes the weight back when the wait ends, or is dropped (the worker gives it back
        /// once more when it ends).
        struct Back<'a>(&'a Share, usize);
        impl Drop for Back<'_> {
            fn drop(&mut self) {
                self.0.take(self.1);
            }
        }
        let _back = self.share.filter(|_| self.weight > 0).map(|share| {
            share.give(self.weight);
            Back(share, self.weight)
        });
        waiting.await
    }
}

/// What processes the events that a queue routes, one object at a time.
pub(crate) trait ObjectProcessor: Send + Sync + 'static {
    /// The resource whose objects it processes (for the metrics).
    fn resource(&self) -> &Resource;

    /// Counts an event as queued, before its worker gets it.
    fn expect(&self, event: &Event);

    /// Whether it wants every event of an object (for event handlers, indexes); if not, the
    /// events waiting for an object's worker are merged into the newest.
    fn wants_every_event(&self) -> bool;

    /// Observes a batch of events of the object `uid`, in order: remembers its newest state,
    /// and runs what every event is for (indexes, event handlers). It may run while the
    /// object's newest state is processed (the events that came meanwhile).
    fn observe<'a>(
        self: Arc<Self>,
        uid: &'a str,
        batch: Vec<Event>,
        held: Held<'a>,
        tasks: &'a Tasks,
    ) -> Pin<Box<dyn Future<Output = Observed> + Send + 'a>>;

    /// An event of the object `uid` was merged into a newer one before its worker took it:
    /// its state is never observed, but it came (its version may be that of a write of the
    /// processor's own, which it awaits).
    fn passed(&self, uid: &str, event: &Event);

    /// Processes the object's newest state observed (again, when a retry is due).
    fn process<'a>(
        self: Arc<Self>,
        uid: &'a str,
        held: Held<'a>,
        tasks: &'a Tasks,
    ) -> Pin<Box<dyn Future<Output = Next> + Send + 'a>>;

    /// Lets go of the object's newest state: nothing is due for it.
    fn release(&self, uid: &str);

    /// Forgets the object: it is gone, and nothing of it runs any more.
    fn forget(&self, uid: &str);
}

/// Routes the events of one watcher to per-object workers.
pub(crate) struct Queue {
    workers: Workers,
    /// The mailboxes that rested, for the reaper.
    rests: Arc<Rests>,
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

/// The mailboxes that rested, by when their idle timeout ends (oldest first: the timeout is
/// the same for all). A mailbox that rested again since is in it twice; only its last rest
/// can end it.
#[derive(Debug, Default)]
struct Rests {
    due: Mutex<VecDeque<(Instant, String)>>,
    added: Notify,
}

/// How late the reaper may forget a mailbox after its idle timeout.
const REAPING_SLACK: Duration = Duration::from_millis(100);

/// Forgets the mailboxes that rested for the idle timeout (their workers "idle out"), until
/// the queue stops.
async fn reap(
    workers: Workers,
    rests: Arc<Rests>,
    idle_timeout: Duration,
    metrics: Option<ResourceMetrics>,
    token: tokio_util::sync::CancellationToken,
) {
    loop {
        let first = lock(&rests.due).front().map(|(due, _)| *due);
        match first {
            None => tokio::select! {
                _ = token.cancelled() => return,
                _ = rests.added.notified() => continue,
            },
            // A little late, so that one wake-up ends the rests of a burst's many objects.
            Some(due) => tokio::select! {
                _ = token.cancelled() => return,
                _ = tokio::time::sleep_until(due + REAPING_SLACK) => {}
            },
        }
        let now = Instant::now();
        let due: Vec<String> = {
            let mut all = lock(&rests.due);
            let count = all.iter().take_while(|(due, _)| *due <= now).count();
            let due = all.drain(..count).map(|(_, uid)| uid).collect();
            let left = all.len();
            if left < all.capacity() / 4 {
                all.shrink_to(left * 2);
            }
            due
        };
        let mut workers = lock(&workers);
        for uid in due {
            if workers
                .get(&uid)
                .is_some_and(|mailbox| mailbox.rested_for(idle_timeout, now))
            {
                workers.remove(&uid);
                if let Some(metrics) = &metrics {
                    metrics.workers.dec();
                }
            }
        }
        // After a burst, the room for its objects goes back to the allocator as they idle out
        // (so does the room of its rests, above).
        let left = workers.len();
        if left < workers.capacity() / 4 {
            workers.shrink_to(left * 2);
        }
    }
}

/// The objects that a queue knows (invariant 3), shared with whoever hands them to a later
/// queue of the same watch.
#[derive(Debug, Clone, Default)]
pub(crate) struct KnownObjects(Arc<Mutex<Known>>);

impl KnownObjects {
    /// Takes what is known now, for a later queue (this one knows nothing more); a listing
    /// cut short is forgotten, the later queue lists anew.
    pub(crate) fn hand_over(&self) -> KnownObjects {
        let mut known = std::mem::take(&mut *lock(&self.0));
        known.listed.clear();
        KnownObjects(Arc::new(Mutex::new(known)))
    }

    /// The uids of the objects known.
    pub(crate) fn uids(&self) -> Vec<String> {
        lock(&self.0).objects.keys().cloned().collect()
    }
}

/// The identities of the objects that one watcher reported, and of those in its current
/// listing.
#[derive(Debug, Default)]
struct Known {
    /// By uid, what identifies each object that exists as far as the watcher knows: a few
    /// strings per object, as this is kept for every object, at rest or not.
    objects: FreedApart<HashMap<String, Identity>>,
    /// The uids listed since the last listing was done.
    listed: HashSet<String>,
    /// The `apiVersion`, `kind` and namespaces seen, shared by the identities.
    names: Names,
}

impl Known {
    /// Follows one event; at the end of a listing, returns the known objects it lacked (and
    /// forgets them), as what identifies them.
    fn see(&mut self, event: &Event) -> Vec<Arc<Body>> {
        match event {
            Event::Listed(object) => {
                let uid = uid_of(object);
                self.listed.insert(uid.clone());
                let identity = Identity::of(object, &mut self.names);
                self.objects.insert(uid, identity);
            }
            Event::Changed(kind, object) => {
                let uid = uid_of(object);
                if *kind == "DELETED" {
                    self.objects.remove(&uid);
                } else if !self.objects.contains_key(&uid) {
                    let identity = Identity::of(object, &mut self.names);
                    self.objects.insert(uid, identity);
                }
            }
            Event::Vanished(object) => {
                self.objects.remove(&uid_of(object));
            }
            Event::ListingDone => {
                let listed = std::mem::take(&mut self.listed);
                let gone: Vec<String> = self
                    .objects
                    .keys()
                    .filter(|uid| !listed.contains(*uid))
                    .cloned()
                    .collect();
                return gone
                    .into_iter()
                    .filter_map(|uid| {
                        let identity = self.objects.remove(&uid)?;
                        Some(identity.body(&uid))
                    })
                    .collect();
            }
        }
        Vec::new()
    }
}

fn uid_of(object: &Value) -> String {
    object["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// What identifies an object besides its uid, for [`Event::Vanished`].
#[derive(Debug)]
struct Identity {
    api_version: Option<Arc<str>>,
    kind: Option<Arc<str>>,
    name: Option<Box<str>>,
    namespace: Option<Arc<str>>,
}

/// Strings that many objects share, kept once.
#[derive(Debug, Default)]
struct Names(HashSet<Arc<str>>);

impl Names {
    fn shared(&mut self, value: &Value) -> Option<Arc<str>> {
        let text = value.as_str()?;
        if let Some(known) = self.0.get(text) {
            return Some(known.clone());
        }
        let new: Arc<str> = Arc::from(text);
        self.0.insert(new.clone());
        Some(new)
    }
}

impl Identity {
    fn of(object: &Value, names: &mut Names) -> Identity {
        let meta = &object["metadata"];
        Identity {
            api_version: names.shared(&object["apiVersion"]),
            kind: names.shared(&object["kind"]),
            name: meta["name"].as_str().map(Box::from),
            namespace: names.shared(&meta["namespace"]),
        }
    }

    /// The object as far as it is known: `apiVersion`, `kind`, and `metadata`'s `name`,
    /// `namespace` and `uid`.
    fn body(&self, uid: &str) -> Arc<Body> {
        Arc::new(Body::from(json!({
            "apiVersion": self.api_version.as_deref(),
            "kind": self.kind.as_deref(),
            "metadata": {
                "name": self.name.as_deref(),
                "namespace": self.namespace.as_deref(),
                "uid": uid,
            },
        })))
    }
}

struct Worker {
    uid: String,
    mailbox: Arc<Mailbox>,
    workers: Workers,
    rests: Arc<Rests>,
    processor: Arc<dyn ObjectProcessor>,
    limit: Option<Arc<Semaphore>>,
    /// The worker limit's permit: taken over from the mailbox's rest, or acquired.
    permit: Option<OwnedSemaphorePermit>,
    /// It ended with its mailbox resting: the mailbox lives on.
    rested: bool,
    idle_timeout: Duration,
    tasks: Tasks,
    metrics: Option<ResourceMetrics>,
    /// The watcher's share of the budget of objects in flight.
    share: Arc<Share>,
    /// What the events taken out of the mailbox hold of the budget: given back as the
    /// processings of their states end, or all when the worker ends (invariant 4).
    holding: AtomicUsize,
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
    fn run(mut self) -> impl Future<Output = ()> + Send + 'static {
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

    async fn work(&mut self) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aiokits::budget::Budget;
    use crate::aiokits::tasks::StopReason;

    fn object(uid: &str) -> Arc<Body> {
        version(uid, "1")
    }

    /// The object `uid` at a version.
    fn version(uid: &str, version: &str) -> Arc<Body> {
        Arc::new(Body::from(json!({"apiVersion": "v1", "kind": "Thing",
            "metadata": {"name": format!("n-{uid}"), "namespace": "ns", "uid": uid,
                "resourceVersion": version},
            "spec": {"large": "enough"}})))
    }

    fn uids(objects: Vec<Arc<Body>>) -> Vec<String> {
        let mut uids: Vec<String> = objects.iter().map(|o| uid_of(o)).collect();
        uids.sort();
        uids
    }

    /// What an event shows: its kind (`None` for a listing) and its object's version.
    fn shown(event: &Event) -> (Option<&'static str>, String) {
        match event {
            Event::Listed(o) => (None, o["metadata"]["resourceVersion"].to_string()),
            Event::Changed(kind, o) => (Some(*kind), o["metadata"]["resourceVersion"].to_string()),
            Event::Vanished(o) => (
                Some("VANISHED"),
                o["metadata"]["resourceVersion"].to_string(),
            ),
            Event::ListingDone => (None, String::new()),
        }
    }

    /// A budget that never makes anyone wait, for the tests of other things.
    fn share() -> Arc<Share> {
        Budget::new(usize::MAX, None).share()
    }

    #[test]
    fn a_mailbox_whose_worker_ended_takes_no_more_events() {
        let mailbox = Mailbox::default();
        assert!(mailbox.put(Event::Listed(object("a")), false).is_ok());
        assert_eq!(
            mailbox.close(),
            (1, 1),
            "counted as left when the worker ended"
        );
        // Given back, for a new worker to get: not lost in a mailbox nobody reads.
        assert!(mailbox.put(Event::Listed(object("a")), false).is_err());
        assert_eq!(mailbox.take().len(), 1);
        assert!(mailbox.is_empty());
    }

    /// When only the newest state matters, a mailbox keeps one event: the newest object,
    /// first seen in a listing or not as the first event said, and a deletion as it came.
    #[test]
    fn events_waiting_for_their_worker_are_merged_into_the_newest() {
        let mailbox = Mailbox::default();
        let put = |event| {
            mailbox
                .put(event, true)
                .expect("open")
                .merged
                .map(|e| shown(&e))
        };
        assert_eq!(put(Event::Listed(version("a", "1"))), None);
        assert_eq!(
            put(Event::Changed("MODIFIED", version("a", "2"))),
            Some((None, "\"1\"".into()))
        );
        assert_eq!(
            put(Event::Changed("ADDED", version("a", "3"))).map(|m| m.1),
            Some("\"2\"".into())
        );
        let events: Vec<_> = mailbox.take().iter().map(shown).collect();
        assert_eq!(events, [(None, "\"3\"".into())], "still a listed object");

        put(Event::Changed("ADDED", version("a", "4")));
        put(Event::Listed(version("a", "5")));
        put(Event::Changed("DELETED", version("a", "6")));
        put(Event::Vanished(version("a", "7")));
        let events: Vec<_> = mailbox.take().iter().map(shown).collect();
        assert_eq!(
            events,
            [
                (Some("DELETED"), "\"6\"".into()),
                (Some("VANISHED"), "\"7\"".into())
            ],
            "nothing is merged into a deletion"
        );
        assert_eq!(
            weight_of(&[Event::Vanished(object("a")), Event::Listed(object("b"))]),
            1
        );
    }

    #[test]
    fn a_listing_tells_which_known_objects_it_lacks() {
        let mut known = Known::default();
        assert!(known.see(&Event::Listed(object("a"))).is_empty());
        assert!(known.see(&Event::Listed(object("b"))).is_empty());
        assert!(known.see(&Event::ListingDone).is_empty());
        known.see(&Event::Changed("ADDED", object("c")));
        known.see(&Event::Changed("ADDED", object("d")));
        known.see(&Event::Changed("DELETED", object("d")));
        // A relisting: only `a` is left; `d` was seen deleted already.
        known.see(&Event::Listed(object("a")));
        let vanished = known.see(&Event::ListingDone);
        assert_eq!(
            *vanished[0],
            json!({"apiVersion": "v1", "kind": vanished[0]["kind"],
                "metadata": {"name": vanished[0]["metadata"]["name"], "namespace": "ns",
                    "uid": vanished[0]["metadata"]["uid"]}}),
            "only what identifies it is kept"
        );
        assert_eq!(uids(vanished), ["b", "c"]);
        // An empty listing: everything left has vanished.
        assert_eq!(uids(known.see(&Event::ListingDone)), ["a"]);
        assert!(known.see(&Event::ListingDone).is_empty());
    }

    /// Records the batches it observes and the states it processes; nothing is ever due.
    #[derive(Default)]
    struct Recorder {
        resource: Resource,
        /// The batches observed: the object's uid, and what each event showed.
        seen: Mutex<Vec<(String, usize)>>,
        /// The events observed, in order, as `shown` shows them.
        events: Mutex<Vec<(Option<&'static str>, String)>>,
        /// The newest version observed, and those processed.
        newest: Mutex<String>,
        processed: Mutex<Vec<String>>,
        /// The versions of the events merged away.
        passed: Mutex<Vec<String>>,
        released: Mutex<Vec<String>>,
        /// Stops the worker while processing, as the operator's exit would.
        stop: bool,
        /// Only the newest state matters: the queue merges waiting events.
        merges: bool,
        /// A processing waits for a permit of this (a long handler), if given.
        handler: Option<Arc<Semaphore>>,
        /// The budget, to see what a processing holds of it.
        budget: Option<Arc<Budget>>,
        held: Mutex<Vec<usize>>,
    }

    impl ObjectProcessor for Recorder {
        fn resource(&self) -> &Resource {
            &self.resource
        }

        fn expect(&self, _: &Event) {}

        fn wants_every_event(&self) -> bool {
            !self.merges
        }

        fn observe<'a>(
            self: Arc<Self>,
            uid: &'a str,
            batch: Vec<Event>,
            _: Held<'a>,
            _: &'a Tasks,
        ) -> Pin<Box<dyn Future<Output = Observed> + Send + 'a>> {
            lock(&self.seen).push((uid.to_owned(), batch.len()));
            for event in &batch {
                lock(&self.events).push(shown(event));
                *lock(&self.newest) = shown(event).1;
            }
            let gone = batch
                .iter()
                .any(|e| matches!(e, Event::Changed("DELETED", _) | Event::Vanished(_)));
            Box::pin(async move { Observed { gone } })
        }

        fn passed(&self, _: &str, event: &Event) {
            lock(&self.passed).push(shown(event).1);
        }

        fn process<'a>(
            self: Arc<Self>,
            _: &'a str,
            _: Held<'a>,
            tasks: &'a Tasks,
        ) -> Pin<Box<dyn Future<Output = Next> + Send + 'a>> {
            if self.stop {
                tasks.cancel(StopReason::OperatorExiting);
            }
            Box::pin(async move {
                if let Some(budget) = &self.budget {
                    lock(&self.held).push(budget.held());
                }
                // The state processed is the newest when the processing starts, as a
                // processor's body is.
                let newest = lock(&self.newest).clone();
                if let Some(handler) = &self.handler {
                    tokio::select! {
                        _ = handler.acquire() => {}
                        _ = tasks.token().cancelled() => return Next::default(),
                    }
                }
                lock(&self.processed).push(newest);
                Next::default()
            })
        }

        fn release(&self, uid: &str) {
            lock(&self.released).push(uid.to_owned());
        }

        fn forget(&self, _: &str) {}
    }

    impl Recorder {
        fn seen(&self) -> Vec<(String, usize)> {
            lock(&self.seen).clone()
        }
    }

    async fn until(what: &str, mut condition: impl FnMut() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !condition() {
            assert!(tokio::time::Instant::now() < deadline, "waited for {what}");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// An idle worker used to wait for its idle timeout as a task (about 1.6 KB each, so a
    /// burst of 10,000 objects held 16 MB for 5 s, which the allocator kept afterwards). Now
    /// its task ends as soon as nothing is due, and the object's next event starts another.
    #[tokio::test]
    async fn a_worker_with_nothing_to_do_ends_and_the_next_event_starts_another() {
        let tasks = Tasks::root(1);
        let recorder = Arc::new(Recorder::default());
        let queue = Queue::new(
            recorder.clone(),
            tasks.child(),
            None,
            Duration::from_secs(3600),
            share(),
        );
        let reaper_only = tasks.len();
        queue.push(Event::Listed(object("a")));
        until("the event processed", || recorder.seen().len() == 1).await;
        until("the worker's task to end", || tasks.len() == reaper_only).await;
        assert_eq!(*lock(&recorder.released), ["a"], "its body let go");
        assert!(lock(&queue.workers).contains_key("a"), "its mailbox rests");

        queue.push(Event::Changed("MODIFIED", object("a")));
        queue.push(Event::Changed("MODIFIED", object("b")));
        until("both processed", || recorder.seen().len() == 3).await;
        let seen = recorder.seen();
        assert_eq!(seen[0], ("a".to_owned(), 1));
        assert!(seen[1..].contains(&("a".to_owned(), 1)));
        assert!(seen[1..].contains(&("b".to_owned(), 1)));
        until("the workers' tasks to end", || tasks.len() == reaper_only).await;
        tasks.cancel(StopReason::OperatorExiting);
        tasks.wait().await;
    }

    /// Each stopping worker used to free its object's body (the exit with 1000 handlers in
    /// flight spent a quarter of its time there, on the runtime's threads); now the bodies
    /// stay with the memories, which are freed together. Nor does it rest its mailbox: the
    /// reaper stops too.
    #[tokio::test]
    async fn a_worker_stopped_while_processing_leaves_the_body_to_the_memories() {
        let tasks = Tasks::root(1);
        let recorder = Arc::new(Recorder {
            stop: true,
            ..Recorder::default()
        });
        let queue = Queue::new(
            recorder.clone(),
            tasks.child(),
            None,
            Duration::from_secs(3600),
            share(),
        );
        queue.push(Event::Listed(object("a")));
        until("the event processed", || recorder.seen().len() == 1).await;
        tasks.cancel(StopReason::OperatorExiting);
        tasks.wait().await;
        assert!(lock(&recorder.released).is_empty(), "no body let go");
        assert!(
            lock(&queue.rests.due).is_empty(),
            "no rest left for a reaper gone"
        );
    }

    /// A resting mailbox keeps its worker's permit for the idle timeout, as a worker waiting
    /// that long would (Kopf's worker limit counts idle workers), and is forgotten after it.
    #[tokio::test(start_paused = true)]
    async fn a_resting_mailbox_keeps_its_permit_until_the_idle_timeout() {
        let tasks = Tasks::root(1);
        let recorder = Arc::new(Recorder::default());
        let idle = Duration::from_secs(5);
        let queue = Queue::new(recorder.clone(), tasks.child(), Some(1), idle, share());
        let start = tokio::time::Instant::now();
        queue.push(Event::Listed(object("a")));
        queue.push(Event::Listed(object("b")));
        until("both processed", || recorder.seen().len() == 2).await;
        assert!(start.elapsed() >= idle, "b waited for a's idle timeout");
        assert_eq!(recorder.seen()[0].0, "a");
        assert!(!lock(&queue.workers).contains_key("a"), "a is forgotten");
        // An event for `b` within its idle timeout: the same mailbox, its permit kept.
        queue.push(Event::Changed("MODIFIED", object("b")));
        until("b's next event", || recorder.seen().len() == 3).await;
        until("b forgotten", || !lock(&queue.workers).contains_key("b")).await;
        queue.push(Event::Changed("MODIFIED", object("a")));
        until("a again", || recorder.seen().len() == 4).await;
        tasks.cancel(StopReason::OperatorExiting);
        tasks.wait().await;
    }

    /// While an object's handler runs long, the events that come are observed as they come
    /// (for event handlers and indexes: every one, in order), not kept until it ends; then its
    /// newest state is processed once. What the events took of the budget is given back as
    /// they are done with: the one being processed holds one state.
    #[tokio::test]
    async fn events_of_a_busy_object_are_observed_as_they_come() {
        let tasks = Tasks::root(1);
        let budget = Budget::new(100, None);
        let handler = Arc::new(Semaphore::new(0));
        let recorder = Arc::new(Recorder {
            handler: Some(handler.clone()),
            budget: Some(budget.clone()),
            ..Recorder::default()
        });
        let queue = Queue::new(
            recorder.clone(),
            tasks.child(),
            None,
            Duration::from_secs(3600),
            budget.share(),
        );
        queue.push(Event::Changed("ADDED", version("a", "1")));
        until("the handler runs", || lock(&recorder.held).len() == 1).await;
        for v in 2..=5 {
            queue.push(Event::Changed("MODIFIED", version("a", &v.to_string())));
            until("the event observed", || lock(&recorder.events).len() == v).await;
        }
        assert_eq!(
            budget.held(),
            2,
            "the state being processed, and the newest to process next"
        );
        assert!(
            lock(&recorder.processed).is_empty(),
            "the handler still runs"
        );
        handler.add_permits(1);
        until("processed again", || lock(&recorder.processed).len() == 2).await;
        handler.add_permits(1);
        assert_eq!(
            *lock(&recorder.processed),
            ["\"1\"", "\"5\""],
            "the newest, once"
        );
        let versions: Vec<String> = lock(&recorder.events).iter().map(|e| e.1.clone()).collect();
        assert_eq!(
            versions,
            ["\"1\"", "\"2\"", "\"3\"", "\"4\"", "\"5\""],
            "every event, in order"
        );
        until("all given back", || budget.held() == 0).await;
        assert_eq!(
            *lock(&recorder.held),
            [1, 1],
            "each processing held its state's"
        );
        tasks.cancel(StopReason::OperatorExiting);
        tasks.wait().await;
    }

    /// Events that wait for a worker (here: under the worker limit) are merged when only the
    /// newest state matters, and what the merged ones took of the budget is given back.
    #[tokio::test(start_paused = true)]
    async fn events_waiting_for_a_worker_take_one_state_of_the_budget() {
        let tasks = Tasks::root(1);
        let budget = Budget::new(100, None);
        let handler = Arc::new(Semaphore::new(0));
        let recorder = Arc::new(Recorder {
            handler: Some(handler.clone()),
            merges: true,
            ..Recorder::default()
        });
        let queue = Queue::new(
            recorder.clone(),
            tasks.child(),
            Some(1),
            Duration::from_secs(1),
            budget.share(),
        );
        queue.push(Event::Changed("ADDED", version("a", "1")));
        until("a's handler runs", || recorder.seen().len() == 1).await;
        for v in 1..=10 {
            queue.push(Event::Changed("MODIFIED", version("b", &v.to_string())));
        }
        assert_eq!(budget.held(), 2, "a's state, and b's newest");
        handler.add_permits(2);
        until("b processed", || lock(&recorder.processed).len() == 2).await;
        assert_eq!(recorder.seen()[1], ("b".to_owned(), 1), "one event");
        assert_eq!(lock(&recorder.processed)[1], "\"10\"");
        // The versions merged away came all the same: one may be the operator's own write,
        // which its worker awaits (it waited out the consistency timeout before).
        let passed: Vec<String> = (1..10).map(|v| format!("\"{v}\"")).collect();
        assert_eq!(*lock(&recorder.passed), passed);
        until("all given back", || budget.held() == 0).await;
        tasks.cancel(StopReason::OperatorExiting);
        tasks.wait().await;
    }

    /// A worker that stops gives back what its events took of the budget, those in its
    /// mailbox and those it was processing.
    #[tokio::test]
    async fn a_stopped_worker_gives_back_what_its_events_took() {
        let tasks = Tasks::root(1);
        let budget = Budget::new(100, None);
        let handler = Arc::new(Semaphore::new(0));
        let recorder = Arc::new(Recorder {
            handler: Some(handler.clone()),
            ..Recorder::default()
        });
        let queue = Queue::new(
            recorder.clone(),
            tasks.child(),
            None,
            Duration::from_secs(3600),
            budget.share(),
        );
        queue.push(Event::Changed("ADDED", version("a", "1")));
        until("the handler runs", || recorder.seen().len() == 1).await;
        queue.push(Event::Changed("MODIFIED", version("a", "2")));
        until("observed", || recorder.seen().len() == 2).await;
        assert_eq!(budget.held(), 2);
        tasks.cancel(StopReason::OperatorExiting);
        tasks.wait().await;
        assert_eq!(budget.held(), 0);
        drop(queue);
    }

    /// Every object handled has a worker's task, and every handler in flight one waiting for
    /// it. An `async fn run(self)` kept the worker twice: as its argument and its variable.
    #[test]
    fn a_workers_task_keeps_its_worker_once() {
        let mut worker = Worker {
            uid: "uid".into(),
            mailbox: Arc::default(),
            workers: Workers::default(),
            rests: Arc::default(),
            processor: Arc::new(Recorder::default()),
            limit: None,
            permit: None,
            rested: false,
            idle_timeout: Duration::ZERO,
            tasks: Tasks::root(1),
            metrics: None,
            share: share(),
            holding: AtomicUsize::new(0),
        };
        let (kept, working) = (
            std::mem::size_of::<Worker>(),
            std::mem::size_of_val(&worker.work()),
        );
        let size = std::mem::size_of_val(&worker.run());
        assert!(
            size <= kept + working + 16,
            "the worker's task takes {size} bytes: a worker of {kept}, its loop's {working}"
        );
    }
}
