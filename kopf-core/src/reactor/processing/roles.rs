//! The processor in the roles that others know it by: the queue's [`ObjectProcessor`], the
//! daemons' [`DaemonHost`], and, with assigned shards, a holder of the objects of shards
//! ([`ShardMembers`]) that lets go of them when their shard moves.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::Processor;
use crate::actions::invocation::Invocation;
use crate::actions::invocation::Options;
use crate::aiokits::tasks::{StopReason, Tasks};
use crate::clients::watching::Event;
use crate::engines::daemons::{DaemonHost, Retry};
use crate::engines::ownership::ShardMembers;
use crate::reactor::invocations::Change;
use crate::reactor::queueing::{Batch, Held, Next, ObjectProcessor, Observed};
use crate::structs::bodies::Body;
use crate::structs::patch::Patch;
use crate::structs::resources::Resource;

impl Processor {
    /// Forgets an object whose shard is not held here, or is leaving (it moves to another
    /// replica, or never was ours): it leaves the indexes, its daemons and timers stop, and no
    /// handler sees anything of it (its owner handles it). `indexed`: the batch went to the
    /// indexes already, while its shard drained.
    pub(super) async fn let_go(&self, uid: &str, batch: &[Event], indexed: bool, tasks: &Tasks) {
        // Also when its memory is gone already (the shard's drain forgot it): the indexes
        // still hold it until its identity comes by (the relisting that lacks it).
        if let Some((_, object, _)) = batch.iter().rev().find_map(super::seen) {
            self.index(uid, Some("DELETED"), object, tasks).await;
        }
        // Listed yet not indexed: the first filling of the indexes must not wait for it
        // (counted already if the batch was indexed while its shard drained).
        if !indexed {
            for event in batch {
                if let Event::Listed(_) = event {
                    self.filler.indexed(true);
                }
            }
        }
        tracing::debug!(target: "kopf::objects", uid, "let go of: its shard is not this replica's");
        self.memory(uid, |m| m.daemons.stop(StopReason::ShardMoved));
        self.memories.forget(uid);
        self.memos.forget(uid);
    }
}

impl ObjectProcessor for Processor {
    fn resource(&self) -> &Resource {
        &self.invocations.resource
    }

    /// Counts a queued event for the filling of the indexes (see `structs::indexes`,
    /// invariant 2).
    fn expect(&self, event: &Event) {
        if !self.indexers.is_empty() {
            self.filler.expect(matches!(event, Event::Listed(_)));
        }
    }

    /// Event handlers and index functions see every event; without them, only the newest
    /// state matters.
    fn wants_every_event(&self) -> bool {
        !self.events.is_empty() || !self.indexers.is_empty()
    }

    fn observe<'a>(
        self: Arc<Self>,
        uid: &'a str,
        batch: Batch,
        held: Held<'a>,
        tasks: &'a Tasks,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Observed> + Send + 'a>> {
        Box::pin(async move { Processor::observe(&self, uid, batch, held, tasks).await })
    }

    fn process<'a>(
        self: Arc<Self>,
        uid: &'a str,
        held: Held<'a>,
        tasks: &'a Tasks,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Next> + Send + 'a>> {
        Box::pin(async move { Processor::process(&self, uid, held, tasks).await })
    }

    /// An operator at rest keeps a few flags per object, not the objects (the next event
    /// brings the state again).
    fn release(&self, uid: &str) {
        self.memories.release(uid);
    }

    fn forget(&self, uid: &str) {
        self.memories.forget(uid);
        self.memos.forget(uid);
    }
}

impl ShardMembers for Processor {
    fn leave(
        &self,
        moved: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    ) -> futures::future::BoxFuture<'static, ()> {
        let leaving = self.memories.take(|uid| moved(uid));
        let mut ended = Vec::new();
        for (uid, mut memory) in leaving {
            memory.daemons.stop(StopReason::ShardMoved);
            ended.extend(memory.daemons.ended());
            self.memos.forget(&uid);
        }
        Box::pin(async move {
            futures::future::join_all(ended).await;
        })
    }
}

impl DaemonHost for Processor {
    fn invocation(&self, body: Arc<Body>, options: &Options, node: Tasks) -> Invocation {
        let memo = self.memo_of(&body);
        self.invocations
            .make(body, memo, Change::default(), options, node)
    }

    fn default_backoff(&self) -> Duration {
        self.settings.execution.default_backoff
    }

    fn paced(&self, delay: Duration) -> Duration {
        match self.settings.execution.interval_cap {
            Some(cap) => delay.min(cap),
            None => delay,
        }
    }

    fn may_act(&self) -> bool {
        self.fence.is_open()
    }

    fn write<'a>(
        &'a self,
        uid: &'a str,
        body: &'a Value,
        patch: Patch,
        node: &'a Tasks,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), Retry>> + Send + 'a>> {
        Box::pin(async move {
            match Processor::write(self, uid, body, patch, None, node).await {
                Ok(_) => Ok(()),
                // Reported when rejected: nothing to keep for a next write.
                Err(unwritten) if unwritten.rejected => Ok(()),
                Err(unwritten) => Err(Retry {
                    patch: unwritten.patch,
                    delay: unwritten.delay,
                }),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::posting::Poster;
    use crate::configs::settings::Settings;
    use crate::engines::ownership::{Ownership, Permit};
    use crate::intents::registry::Registry;
    use crate::reactor::memories::Awaited;
    use crate::reactor::processing::Common;
    use serde_json::json;
    use std::collections::BTreeSet;
    use std::future::Future;
    use tokio::sync::watch;
    use tokio::time::Instant;

    /// A client whose every call fails: nothing is sent here.
    fn client() -> kube::Client {
        let service = crate::clients::auth::tower_service_fn(|_| async {
            Err::<http::Response<kube::client::Body>, _>("no API server in this test".into())
        });
        kube::Client::new(service, "default")
    }

    /// A processor of no handlers, with these shards (if any).
    fn processor(ownership: Option<Arc<Ownership>>) -> Arc<Processor> {
        let common = Common {
            poster: Poster::disabled(),
            memo: Default::default(),
            memos: Default::default(),
            writes: Arc::new(tokio::sync::Semaphore::new(1)),
            indexes: Default::default(),
            fence: Default::default(),
            ownership,
        };
        Arc::new(Processor::new(
            client(),
            Resource::default(),
            &Registry::new(),
            &[],
            Settings::default(),
            common,
        ))
    }

    /// An object `uid` at this version.
    fn object(version: &str) -> Arc<Body> {
        Arc::new(Body::from(json!({
            "metadata": {"name": "x", "uid": "uid", "resourceVersion": version},
        })))
    }

    /// The newest state of the object, and the versions of its own writes still awaited.
    fn remembered(processor: &Processor) -> (Option<Value>, Option<Vec<String>>) {
        processor.memory("uid", |memory| {
            let latest = memory
                .latest
                .as_ref()
                .map(|body| body["metadata"]["resourceVersion"].clone());
            let awaited = memory
                .awaited
                .as_ref()
                .map(|awaited| awaited.pending.clone());
            (latest, awaited)
        })
    }

    /// One shard, open here and watched, with a processing in flight in it (a handler still
    /// running), which keeps a drain from ending until it is dropped.
    fn one_shard_in_flight() -> (Arc<Ownership>, watch::Receiver<BTreeSet<u32>>, Permit) {
        let ownership = Ownership::new(1);
        ownership.open(0);
        ownership.publish();
        let mut watched = ownership.subscribe();
        watched.borrow_and_update();
        let in_flight = ownership.enter("uid").expect("open");
        (ownership, watched, in_flight)
    }

    /// The object's observing and processing of a change to version 2, as its worker does.
    fn modified<'a>(
        processor: &'a Arc<Processor>,
        tasks: &'a Tasks,
    ) -> impl Future<Output = Next> + 'a {
        let modified = Batch {
            events: vec![Event::Changed("MODIFIED", object("2"))],
            passed: Vec::new(),
        };
        async move {
            let nothing = Held::default();
            if Processor::observe(processor, "uid", modified, nothing, tasks)
                .await
                .gone
            {
                return Next {
                    wakeup: None,
                    gone: true,
                };
            }
            Processor::process(processor, "uid", nothing, tasks).await
        }
    }

    /// Starts the shard's drain and the object's processing of a change (in `tasks`), each
    /// polled once: the drain waits for the processing in flight, the processing for the drain.
    macro_rules! waiting {
        ($ownership:ident, $processor:ident, $tasks:ident, $draining:ident, $processing:ident) => {
            let $draining = $ownership.drain(0, Duration::from_secs(60));
            tokio::pin!($draining);
            assert!(
                futures::poll!($draining.as_mut()).is_pending(),
                "the drain waits"
            );
            let $tasks = Tasks::root(1);
            let $processing = modified(&$processor, &$tasks);
            tokio::pin!($processing);
            assert!(
                futures::poll!($processing.as_mut()).is_pending(),
                "the processing waits while the shard drains"
            );
        };
    }

    /// A drain that times out keeps the shard here. The events that came while it was
    /// closed wait for it, and are processed in order once it opens again: none is dropped,
    /// so the object's own write coming back among them is not awaited again (else the
    /// handlers ran again on the state before it: a create handler called twice, in
    /// `assigned.rs`). The watchers list nothing again meanwhile.
    #[tokio::test(start_paused = true)]
    async fn events_of_an_object_whose_drain_times_out_are_processed_once_the_shard_opens() {
        let (ownership, watched, in_flight) = one_shard_in_flight();
        let processor = processor(Some(ownership.clone()));
        processor.memory("uid", |memory| {
            memory.seen = true;
            memory.latest = Some(object("1"));
            let until = Instant::now() + Duration::from_secs(600);
            memory.awaited = Some(Box::new(Awaited {
                pending: vec!["2".to_string(), "3".to_string()],
                until,
                replaced: vec!["1".to_string(), "2".to_string()],
            }));
        });
        waiting!(ownership, processor, tasks, draining, processing);
        assert_eq!(remembered(&processor).0, Some(json!("1")), "not seen yet");

        assert!(!draining.await, "the drain times out");
        let next = processing.await;
        assert!(!next.gone, "processed: the shard stays here");
        assert_eq!(
            remembered(&processor),
            (Some(json!("2")), Some(vec!["3".to_string()])),
            "the newest state is seen, and the write that came back is not awaited again"
        );
        assert!(!watched.has_changed().unwrap(), "nothing is listed again");
        drop(in_flight);
    }

    /// A drain that ends hands the shard over: the events that waited for it are let go of
    /// with the object (its new owner lists it), and the watchers leave the shard.
    #[tokio::test]
    async fn events_of_an_object_whose_shard_is_handed_over_are_let_go_of() {
        let (ownership, mut watched, in_flight) = one_shard_in_flight();
        let processor = processor(Some(ownership.clone()));
        let members: Arc<dyn ShardMembers> = processor.clone();
        ownership.register(Arc::downgrade(&members));
        processor.memory("uid", |memory| memory.latest = Some(object("1")));
        waiting!(ownership, processor, tasks, draining, processing);
        drop(in_flight);
        assert!(draining.await, "drained");
        let next = processing.await;
        assert!(next.gone, "let go of");
        assert!(processor.memories.take(|_| true).is_empty(), "forgotten");
        assert!(
            watched.has_changed().unwrap(),
            "the watchers leave the shard"
        );
        assert!(watched.borrow_and_update().is_empty());
    }

    /// What holds objects of the shard and takes its time to let go of them (daemons slow to
    /// stop): until a permit is added to its semaphore.
    struct Slow(Arc<tokio::sync::Semaphore>);

    impl ShardMembers for Slow {
        fn leave(
            &self,
            _moved: Arc<dyn Fn(&str) -> bool + Send + Sync>,
        ) -> futures::future::BoxFuture<'static, ()> {
            let released = self.0.clone();
            Box::pin(async move {
                let _ = released.acquire_owned().await;
            })
        }
    }

    /// A drain whose processings have ended hands the shard over, whatever its daemons take
    /// to stop: the events that waited are let go of at once, not after the daemons (a sync
    /// daemon that ignores its stop would keep their workers for ever).
    #[tokio::test]
    async fn events_of_an_object_whose_shard_leaves_do_not_wait_for_its_daemons() {
        let (ownership, _watched, in_flight) = one_shard_in_flight();
        let processor = processor(Some(ownership.clone()));
        let slow = Arc::new(Slow(Arc::new(tokio::sync::Semaphore::new(0))));
        let members: Arc<dyn ShardMembers> = slow.clone();
        ownership.register(Arc::downgrade(&members));
        waiting!(ownership, processor, tasks, draining, processing);

        drop(in_flight);
        assert!(
            futures::poll!(draining.as_mut()).is_pending(),
            "the daemons still stop"
        );
        let next = tokio::time::timeout(Duration::from_secs(30), processing)
            .await
            .expect("not waiting for the daemons");
        assert!(next.gone, "let go of before the daemons ended");
        assert!(ownership.holds("uid"), "their writes may still go out");
        slow.0.add_permits(1);
        assert!(draining.await);
        assert!(!ownership.holds("uid"));
    }

    /// An operator that stops does not wait for a drain's end to end an object's worker.
    #[tokio::test]
    async fn an_object_waiting_for_its_shard_ends_when_the_operator_stops() {
        let (ownership, _watched, _in_flight) = one_shard_in_flight();
        let processor = processor(Some(ownership.clone()));
        waiting!(ownership, processor, tasks, draining, processing);
        tasks.cancel(StopReason::OperatorExiting);
        let next = processing.await;
        assert!(!next.gone && next.wakeup.is_none());
    }

    /// In a create burst, every new object's processing future waits for a write permit
    /// long after its handlers ran: with 100,000 objects, each kilobyte of it is 100 MB at
    /// the peak. The handlers' and the request's futures are boxed while they run, so the
    /// processing future keeps only what a cycle holds across its steps (it was 7.3 KB).
    #[tokio::test]
    async fn an_object_waiting_to_write_holds_a_small_future() {
        let processor = processor(None);
        let tasks = Tasks::root(1);
        let processing = processor.process("uid", Held::default(), &tasks);
        let size = std::mem::size_of_val(&*processing);
        assert!(size <= 2048, "the processing future takes {size} bytes");
    }

    /// A write of our own whose version was merged away in the mailbox (into a newer state)
    /// came back all the same, but only once that newer state is seen: before, its worker
    /// waited out the consistency timeout and read the object again.
    #[tokio::test]
    async fn a_write_whose_version_was_merged_away_comes_back_with_the_newer_state() {
        let processor = processor(None);
        let tasks = Tasks::root(1);
        processor.memory("uid", |memory| {
            memory.seen = true;
            memory.latest = Some(object("1"));
            memory.awaited = Some(Box::new(Awaited {
                pending: vec!["2".to_string()],
                until: Instant::now() + Duration::from_secs(600),
                replaced: vec!["1".to_string()],
            }));
        });
        let observe = |events: Vec<Event>, passed: &[&str]| {
            let batch = Batch {
                events,
                passed: passed.iter().map(|v| v.to_string()).collect(),
            };
            Processor::observe(&processor, "uid", batch, Held::default(), &tasks)
        };

        observe(vec![Event::Changed("MODIFIED", object("3"))], &[]).await;
        assert_eq!(
            remembered(&processor),
            (Some(json!("3")), Some(vec!["2".to_string()])),
            "another state is not our write's"
        );
        observe(vec![Event::Changed("MODIFIED", object("5"))], &["2", "4"]).await;
        assert_eq!(
            remembered(&processor),
            (Some(json!("5")), Some(Vec::new())),
            "our write came, merged away into the newer state seen with it"
        );
    }
}
