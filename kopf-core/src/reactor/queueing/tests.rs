//! The queue's unit tests: mailboxes and their merging, the known objects, and the workers of
//! a queue under a processor that records what it is given.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::sync::Semaphore;

use super::known::{Known, uid_of};
use super::mailbox::{Batch, Mailbox, Workers, weight_of};
use super::worker::Worker;
use super::{Held, Next, ObjectProcessor, Observed, Queue};
use crate::aiokits::budget::{Budget, Share};
use crate::aiokits::tasks::{StopReason, Tasks};
use crate::clients::watching::Event;
use crate::helpers::sync::lock;
use crate::structs::bodies::Body;
use crate::structs::resources::Resource;

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
    assert_eq!(mailbox.take().events.len(), 1);
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
    let events: Vec<_> = mailbox.take().events.iter().map(shown).collect();
    assert_eq!(events, [(None, "\"3\"".into())], "still a listed object");

    put(Event::Changed("ADDED", version("a", "4")));
    put(Event::Listed(version("a", "5")));
    put(Event::Changed("DELETED", version("a", "6")));
    put(Event::Vanished(version("a", "7")));
    let events: Vec<_> = mailbox.take().events.iter().map(shown).collect();
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
    /// The versions merged away, with the newest version of the batch they came with.
    passed: Mutex<Vec<(String, Vec<String>)>>,
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
        batch: Batch,
        _: Held<'a>,
        _: &'a Tasks,
    ) -> Pin<Box<dyn Future<Output = Observed> + Send + 'a>> {
        let Batch {
            events: batch,
            passed,
        } = batch;
        if let (false, Some(newest)) = (passed.is_empty(), batch.last()) {
            lock(&self.passed).push((shown(newest).1, passed));
        }
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
    // which its worker awaits (it waited out the consistency timeout before). They come
    // with the state they were merged into, never before it.
    let passed: Vec<String> = (1..10).map(|v| v.to_string()).collect();
    assert_eq!(*lock(&recorder.passed), [("\"10\"".to_owned(), passed)]);
    // However many wait, a mailbox keeps the newest few of them, as it keeps one event.
    for v in 11..=100 {
        queue.push(Event::Changed("MODIFIED", version("b", &v.to_string())));
    }
    handler.add_permits(1);
    until("b processed again", || lock(&recorder.processed).len() == 3).await;
    let passed = lock(&recorder.passed)[1].1.clone();
    assert_eq!(passed.len(), 16, "{passed:?}");
    assert_eq!(passed.last().map(String::as_str), Some("99"));
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
