//! Per-object workers: the events of one object are handled in order by one worker, created
//! on demand and ended after an idle timeout.
//!
//! A worker with nothing to do (no event, no retry due) ends its task at once and leaves its
//! mailbox *resting*: the object's next event starts its next task, and after the idle timeout
//! the queue's reaper forgets the mailbox (and the worker limit's permit that it kept). So a
//! burst of many objects costs a small mailbox per object while they idle out, not a task.
//!
//! Invariants:
//! 1. At most one worker per object uid runs: the map of mailboxes is the only way to reach
//!    one; a worker rests its mailbox, under the mailbox's lock, only when no event is in it,
//!    and an event put in a resting mailbox starts the next worker; a mailbox leaves the map
//!    (under its lock) only when it is empty, so no event is ever put where nobody takes it.
//! 2. Every raw event reaches the processor; only cause detection looks at the newest alone.
//! 3. A listing forgets nothing: an object the queue knew of (listed or changed, not deleted)
//!    that a completed new listing lacks reaches its worker as [`Event::Vanished`], so it
//!    leaves the indexes and the operator's memory as a deleted one does. The queue keeps
//!    only each known object's identity for this, not the object. After a pause, the queue
//!    that watches again knows what the one before it knew ([`KnownObjects`]), so an object
//!    deleted while paused vanishes too.
//!
//! The queue knows its processor only as an [`ObjectProcessor`]: what it needs of whatever
//! processes the events it routes.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use foldhash::{HashMap, HashSet};
use serde_json::{Value, json};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::aiokits::metrics::ResourceMetrics;
use crate::aiokits::tasks::Tasks;
use crate::clients::watching::{Backlog, Event};
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

impl Mailbox {
    /// Puts the event in, unless the worker has ended (`Err` gives it back).
    fn put(&self, event: Event) -> Result<Taker, Event> {
        let mut inbox = lock(&self.inbox);
        if inbox.closed {
            return Err(event);
        }
        inbox.events.push(event);
        if let Some(resting) = inbox.resting.take() {
            return Ok(Taker::Resting(resting.permit));
        }
        drop(inbox);
        self.arrived.notify_one();
        Ok(Taker::Running)
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

    /// Refuses every later event; returns how many were left untaken.
    fn close(&self) -> usize {
        let mut inbox = lock(&self.inbox);
        inbox.closed = true;
        inbox.events.len()
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

/// What processes the events that a queue routes, one object at a time.
pub(crate) trait ObjectProcessor: Send + Sync + 'static {
    /// The resource whose objects it processes (for the metrics).
    fn resource(&self) -> &Resource;

    /// Counts an event as queued, before its worker gets it.
    fn expect(&self, event: &Event);

    /// Processes a batch of events of the object `uid` (or, with an empty batch, its newest
    /// state again because a retry is due).
    fn process<'a>(
        self: Arc<Self>,
        uid: &'a str,
        batch: Vec<Event>,
        tasks: &'a Tasks,
    ) -> Pin<Box<dyn Future<Output = Next> + Send + 'a>>;

    /// Lets go of the object's newest state: nothing is due for it.
    fn release(&self, uid: &str);
}

/// Routes the events of one watcher to per-object workers.
pub(crate) struct Queue {
    workers: Workers,
    /// The mailboxes that rested, for the reaper.
    rests: Arc<Rests>,
    /// The objects of this watcher, to tell which ones a new listing lacks (invariant 3).
    known: KnownObjects,
    processor: Arc<dyn ObjectProcessor>,
    tasks: Tasks,
    limit: Option<Arc<Semaphore>>,
    idle_timeout: Duration,
    metrics: Option<ResourceMetrics>,
    /// The events routed that their workers have not processed yet.
    backlog: Arc<Backlog>,
}

impl Queue {
    pub(crate) fn new(
        processor: Arc<dyn ObjectProcessor>,
        tasks: Tasks,
        limit: Option<usize>,
        idle_timeout: Duration,
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
            processor,
            tasks,
            limit: limit.map(|n| Arc::new(Semaphore::new(n.max(1)))),
            idle_timeout,
            backlog: Arc::default(),
        }
    }

    /// The events routed that their workers have not processed yet, for the watcher to pace
    /// its listings by.
    pub(crate) fn backlog(&self) -> &Backlog {
        &self.backlog
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
        self.backlog.add();
        if let Some(metrics) = &self.metrics {
            metrics.received(match &event {
                Event::Changed(kind, _) => Some(*kind),
                _ => None,
            });
            metrics.queue_depth.inc();
        }
        let mut workers = lock(&self.workers);
        let (mailbox, permit) = match workers.get(&uid) {
            Some(mailbox) => match mailbox.put(event) {
                Ok(Taker::Running) => return,
                Ok(Taker::Resting(permit)) => (mailbox.clone(), permit),
                Err(event) => (self.open(&mut workers, &uid, event), None),
            },
            None => (self.open(&mut workers, &uid, event), None),
        };
        drop(workers);
        let worker = Worker {
            metrics: self.metrics.clone(),
            backlog: self.backlog.clone(),
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
        let _ = mailbox.put(event);
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
    backlog: Arc<Backlog>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.rested {
            return;
        }
        let left = self.mailbox.close();
        if let Some(metrics) = &self.metrics {
            metrics.workers.dec();
            metrics.queue_depth.dec_by(left as i64);
        }
        self.backlog.finished(left);
    }
}

impl Worker {
    /// The worker's task. A plain function returning its future, not an `async fn`: one kept
    /// its `self` twice, as its argument and as its variable (the task of every object handled).
    #[allow(clippy::manual_async_fn)]
    fn run(mut self) -> impl Future<Output = ()> + Send + 'static {
        async move { self.work().await }
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
        loop {
            let mut batch = self.mailbox.take();
            if batch.is_empty() {
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
                batch = self.mailbox.take();
                if batch.is_empty() && !due {
                    continue;
                }
            }
            if let Some(metrics) = &self.metrics {
                metrics.queue_depth.dec_by(batch.len() as i64);
            }
            // Boxed (by the processor): the processing future is large, and a worker waits far
            // more than it works.
            let count = batch.len();
            let next = (self.processor.clone())
                .process(&self.uid, batch, &self.tasks)
                .await;
            self.backlog.finished(count);
            if next.gone {
                let mut workers = lock(&self.workers);
                if self.mailbox.is_empty() {
                    workers.remove(&self.uid);
                    return;
                }
            }
            wakeup = next.wakeup.map(|delay| Instant::now() + delay);
            if wakeup.is_none() && !token.is_cancelled() {
                // Nothing due: the next event brings the state again, so an object at rest
                // costs a few flags, not its body. Not when stopping: the bodies are then
                // freed with the memories, all together (and for many objects, apart from
                // the exit), not one by one by the workers as they stop.
                self.processor.release(&self.uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aiokits::tasks::StopReason;

    fn object(uid: &str) -> Arc<Body> {
        Arc::new(Body::from(json!({"apiVersion": "v1", "kind": "Thing",
            "metadata": {"name": format!("n-{uid}"), "namespace": "ns", "uid": uid},
            "spec": {"large": "enough"}})))
    }

    fn uids(objects: Vec<Arc<Body>>) -> Vec<String> {
        let mut uids: Vec<String> = objects.iter().map(|o| uid_of(o)).collect();
        uids.sort();
        uids
    }

    #[test]
    fn a_mailbox_whose_worker_ended_takes_no_more_events() {
        let mailbox = Mailbox::default();
        assert!(mailbox.put(Event::Listed(object("a"))).is_ok());
        assert_eq!(mailbox.close(), 1, "counted as left when the worker ended");
        // Given back, for a new worker to get: not lost in a mailbox nobody reads.
        assert!(mailbox.put(Event::Listed(object("a"))).is_err());
        assert_eq!(mailbox.take().len(), 1);
        assert!(mailbox.is_empty());
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

    /// Records the batches it is given; nothing is ever due.
    #[derive(Default)]
    struct Recorder {
        resource: Resource,
        seen: Mutex<Vec<(String, usize)>>,
        released: Mutex<Vec<String>>,
        /// Stops the worker while processing, as the operator's exit would.
        stop: bool,
    }

    impl ObjectProcessor for Recorder {
        fn resource(&self) -> &Resource {
            &self.resource
        }

        fn expect(&self, _: &Event) {}

        fn process<'a>(
            self: Arc<Self>,
            uid: &'a str,
            batch: Vec<Event>,
            tasks: &'a Tasks,
        ) -> Pin<Box<dyn Future<Output = Next> + Send + 'a>> {
            lock(&self.seen).push((uid.to_owned(), batch.len()));
            if self.stop {
                tasks.cancel(StopReason::OperatorExiting);
            }
            Box::pin(async { Next::default() })
        }

        fn release(&self, uid: &str) {
            lock(&self.released).push(uid.to_owned());
        }
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
        let queue = Queue::new(recorder.clone(), tasks.child(), Some(1), idle);
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
            backlog: Arc::default(),
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
