//! Per-object workers: the events of one object are handled in order by one worker, created
//! on demand and ended after an idle timeout.
//!
//! Invariants:
//! 1. At most one worker per object uid exists: the map of workers is the only way to reach
//!    one, and a worker leaves the map (under its lock) only when its queue is empty, so no
//!    event is ever sent to a worker that is going away.
//! 2. Every raw event reaches the processor; only cause detection looks at the newest alone.
//! 3. A listing forgets nothing: an object the queue knew of (listed or changed, not deleted)
//!    that a completed new listing lacks reaches its worker as [`Event::Vanished`], so it
//!    leaves the indexes and the operator's memory as a deleted one does. The queue keeps
//!    only each known object's identity for this, not the object.
//!
//! The queue knows its processor only as an [`ObjectProcessor`]: what it needs of whatever
//! processes the events it routes.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{Notify, Semaphore};

use crate::aiokits::metrics::ResourceMetrics;
use crate::aiokits::tasks::Tasks;
use crate::clients::watching::{Backlog, Event};
use crate::helpers::sync::lock;
use crate::structs::resources::Resource;

type Workers = Arc<Mutex<HashMap<String, Arc<Mailbox>>>>;

/// The events of one object on their way to its worker. Events are put in only under the
/// lock of the map of workers, so a worker that finds its mailbox empty under that lock may
/// leave (invariant 1). Small on purpose: a worker lives on for the idle timeout after its
/// last event, so a burst of many objects has a mailbox each.
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
}

impl Mailbox {
    /// Puts the event in, unless the worker has ended (`Err` gives it back).
    fn put(&self, event: Event) -> Result<(), Event> {
        let mut inbox = lock(&self.inbox);
        if inbox.closed {
            return Err(event);
        }
        inbox.events.push(event);
        drop(inbox);
        self.arrived.notify_one();
        Ok(())
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
    /// The objects of this watcher, to tell which ones a new listing lacks (invariant 3).
    known: Mutex<Known>,
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
        Queue {
            metrics,
            workers: Arc::default(),
            known: Mutex::default(),
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

    /// Hands an event to its object's worker, starting one if needed; at the end of a
    /// listing, tells the workers of the objects it lacked that they vanished.
    pub(crate) fn push(&self, event: Event) {
        let vanished = lock(&self.known).see(&event);
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
        let event = match workers.get(&uid) {
            Some(mailbox) => match mailbox.put(event) {
                Ok(()) => return,
                Err(event) => event,
            },
            None => event,
        };
        let mailbox = Arc::new(Mailbox::default());
        let _ = mailbox.put(event);
        workers.insert(uid.clone(), mailbox.clone());
        if let Some(metrics) = &self.metrics {
            metrics.workers.inc();
        }
        let worker = Worker {
            metrics: self.metrics.clone(),
            backlog: self.backlog.clone(),
            uid,
            mailbox,
            workers: self.workers.clone(),
            processor: self.processor.clone(),
            limit: self.limit.clone(),
            idle_timeout: self.idle_timeout,
            tasks: self.tasks.child(),
        };
        self.tasks.spawn(worker.run());
    }
}

/// The identities of the objects that one watcher reported, and of those in its current
/// listing.
#[derive(Debug, Default)]
struct Known {
    /// By uid, what identifies each object that exists as far as the watcher knows: a few
    /// strings per object, as this is kept for every object, at rest or not.
    objects: HashMap<String, Identity>,
    /// The uids listed since the last listing was done.
    listed: HashSet<String>,
    /// The `apiVersion`, `kind` and namespaces seen, shared by the identities.
    names: Names,
}

impl Known {
    /// Follows one event; at the end of a listing, returns the known objects it lacked (and
    /// forgets them), as what identifies them.
    fn see(&mut self, event: &Event) -> Vec<Arc<Value>> {
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
    fn body(&self, uid: &str) -> Arc<Value> {
        Arc::new(json!({
            "apiVersion": self.api_version.as_deref(),
            "kind": self.kind.as_deref(),
            "metadata": {
                "name": self.name.as_deref(),
                "namespace": self.namespace.as_deref(),
                "uid": uid,
            },
        }))
    }
}

struct Worker {
    uid: String,
    mailbox: Arc<Mailbox>,
    workers: Workers,
    processor: Arc<dyn ObjectProcessor>,
    limit: Option<Arc<Semaphore>>,
    idle_timeout: Duration,
    tasks: Tasks,
    metrics: Option<ResourceMetrics>,
    backlog: Arc<Backlog>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let left = self.mailbox.close();
        if let Some(metrics) = &self.metrics {
            metrics.workers.dec();
            metrics.queue_depth.dec_by(left as i64);
        }
        self.backlog.finished(left);
    }
}

impl Worker {
    async fn run(self) {
        let token = self.tasks.token().clone();
        let _permit = match &self.limit {
            Some(limit) => tokio::select! {
                _ = token.cancelled() => return,
                permit = limit.clone().acquire_owned() => permit.ok(),
            },
            None => None,
        };
        let mut wakeup: Option<tokio::time::Instant> = None;
        loop {
            // A worker with a retry pending stays until it is due; otherwise it idles out.
            let deadline =
                wakeup.unwrap_or_else(|| tokio::time::Instant::now() + self.idle_timeout);
            // A notification may be left from an event already taken: only an event or the
            // deadline ends the wait.
            let mut batch = self.mailbox.take();
            while batch.is_empty() {
                let due = tokio::select! {
                    _ = token.cancelled() => return,
                    _ = self.mailbox.arrived.notified() => false,
                    _ = tokio::time::sleep_until(deadline) => true,
                };
                batch = self.mailbox.take();
                if due {
                    break;
                }
            }
            if let Some(metrics) = &self.metrics {
                metrics.queue_depth.dec_by(batch.len() as i64);
            }
            let woken =
                batch.is_empty() && wakeup.is_some_and(|w| w <= tokio::time::Instant::now());
            if batch.is_empty() && !woken {
                if wakeup.is_some() {
                    continue;
                }
                // Idle: leave the map, unless an event slipped in meanwhile. The object's newest
                // state is let go under the map's lock, before any new worker can start for it.
                let mut workers = lock(&self.workers);
                if self.mailbox.is_empty() {
                    self.processor.release(&self.uid);
                    workers.remove(&self.uid);
                    return;
                }
                continue;
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
            wakeup = next.wakeup.map(|delay| tokio::time::Instant::now() + delay);
            if wakeup.is_none() {
                // Nothing due: the next event brings the state again, so an object at rest
                // costs a few flags, not its body, even while its worker waits to idle out.
                self.processor.release(&self.uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(uid: &str) -> Arc<Value> {
        Arc::new(json!({"apiVersion": "v1", "kind": "Thing",
            "metadata": {"name": format!("n-{uid}"), "namespace": "ns", "uid": uid},
            "spec": {"large": "enough"}}))
    }

    fn uids(objects: Vec<Arc<Value>>) -> Vec<String> {
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
}
