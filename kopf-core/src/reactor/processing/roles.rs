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
use crate::engines::daemons::{DaemonHost, Unwritten};
use crate::engines::ownership::ShardMembers;
use crate::reactor::invocations::Change;
use crate::reactor::queueing::{Next, ObjectProcessor};
use crate::structs::bodies::Body;
use crate::structs::patch::Patch;
use crate::structs::resources::Resource;

impl Processor {
    /// Forgets an object whose shard is not open here (it moved to another replica, or never
    /// was ours): it leaves the indexes, its daemons and timers stop, and no handler sees
    /// anything of it (its owner handles it).
    pub(super) async fn let_go(&self, uid: &str, batch: &[Event], tasks: &Tasks) {
        let last = batch.iter().rev().find_map(|event| match event {
            Event::Listed(object) | Event::Changed(_, object) | Event::Vanished(object) => {
                Some(object.clone())
            }
            Event::ListingDone => None,
        });
        // Also when its memory is gone already (the shard's drain forgot it): the indexes
        // still hold it until its identity comes by (the relisting that lacks it).
        if let Some(object) = last {
            self.index(uid, Some("DELETED"), &object, tasks).await;
        }
        // Listed yet not indexed: the first filling of the indexes must not wait for it.
        for event in batch {
            if let Event::Listed(_) = event {
                self.filler.indexed(true);
            }
        }
        if self.ownership.as_ref().is_some_and(|o| o.holds(uid)) {
            // Its shard is being drained: the drain stops its daemons and timers and waits for
            // their end before the hand-off (or keeps the shard). Stopped and forgotten here,
            // they would not be waited for, and would still run after the hand-off.
            // What the events show is remembered all the same: a drain that times out keeps
            // the shard here, and the object's next processing must see its newest state,
            // not run its handlers again on one older than their own write.
            self.seen_while_draining(uid, batch);
            return;
        }
        tracing::debug!(target: "kopf::objects", uid, "let go of: its shard is not this replica's");
        self.memory(uid, |m| m.daemons.stop(StopReason::ShardMoved));
        self.memories.forget(uid);
        self.memos.forget(uid);
    }

    /// Remembers the newest state of an object known here whose shard is being drained,
    /// without processing it: its latest body, and which of its own writes have come back
    /// (Kopf's consistency rule waits for those; the ones seen here are not waited for again).
    fn seen_while_draining(&self, uid: &str, batch: &[Event]) {
        let mut versions = Vec::new();
        let mut newest = None;
        for event in batch {
            let (kind, object) = match event {
                Event::Listed(object) => (None, object),
                Event::Changed(kind, object) if *kind != "DELETED" => (Some(*kind), object),
                // Gone: the relisting tells, once the shard is processed again (or its new
                // owner's does); no handler is to see this last state meanwhile.
                Event::Changed(..) | Event::Vanished(_) | Event::ListingDone => continue,
            };
            if let Some(version) = object["metadata"]["resourceVersion"].as_str() {
                versions.push(version);
            }
            newest = Some((kind, object));
        }
        let Some((kind, object)) = newest else {
            return;
        };
        // Only for an object known here: one first seen now is listed again if the shard
        // stays (the watchers follow the open shards), and one let go of by the drain stays
        // forgotten.
        self.memories.with_known(uid, |memory| {
            memory.saw(object, kind.is_none());
            memory.came_back(&versions);
        });
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

    fn process<'a>(
        self: Arc<Self>,
        uid: &'a str,
        batch: Vec<Event>,
        tasks: &'a Tasks,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Next> + Send + 'a>> {
        Box::pin(async move { Processor::process(&self, uid, batch, tasks).await })
    }

    /// An operator at rest keeps a few flags per object, not the objects (the next event
    /// brings the state again).
    fn release(&self, uid: &str) {
        self.memories.release(uid);
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
    fn invocation(&self, body: Arc<Body>, options: &Options, node: &Tasks) -> Invocation {
        Processor::invocation(self, body, Change::default(), options, node)
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
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), Unwritten>> + Send + 'a>>
    {
        Box::pin(async move {
            Processor::write(self, uid, body, patch, None, node)
                .await
                .map(|_| ())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::posting::Poster;
    use crate::configs::settings::Settings;
    use crate::engines::ownership::Ownership;
    use crate::intents::registry::Registry;
    use crate::reactor::processing::Common;
    use serde_json::json;
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

    /// A drain that times out keeps the shard here. The events that came while it was
    /// closed (the object's own write coming back, among them) must not be lost: else, once
    /// the consistency rule stopped waiting for that write, the handlers ran again on the
    /// state before it (a create handler called twice, in `assigned.rs`).
    #[tokio::test]
    async fn events_of_an_object_whose_shard_drains_are_remembered_though_not_processed() {
        let ownership = Ownership::new(1);
        ownership.open(0);
        let processor = processor(Some(ownership.clone()));
        processor.memory("uid", |memory| {
            memory.seen = true;
            memory.latest = Some(object("1"));
            let until = Instant::now() + Duration::from_secs(60);
            memory.awaited = Some(Box::new((vec!["2".to_string(), "3".to_string()], until)));
        });
        // A processing in flight (a handler still running) keeps the drain from ending.
        let in_flight = ownership.enter("uid").expect("open");
        let draining = ownership.drain(0, Duration::from_secs(60));
        tokio::pin!(draining);
        assert!(futures::poll!(draining.as_mut()).is_pending());

        let tasks = Tasks::root(1);
        let modified = vec![Event::Changed("MODIFIED", object("2"))];
        let next = Processor::process(&processor, "uid", modified, &tasks).await;
        assert!(next.gone, "not processed: the shard is closed");
        let (latest, awaited) = processor.memory("uid", |memory| {
            let latest = memory
                .latest
                .as_ref()
                .map(|body| body["metadata"]["resourceVersion"].clone());
            let awaited = memory.awaited.as_ref().map(|awaited| awaited.0.clone());
            (latest, awaited)
        });
        assert_eq!(latest, Some(json!("2")), "the newest state is remembered");
        assert_eq!(
            awaited,
            Some(vec!["3".to_string()]),
            "the write seen is not awaited again"
        );

        // A deletion seen meanwhile is left to the relisting: the last state stays.
        let deleted = vec![Event::Changed("DELETED", object("4"))];
        let next = Processor::process(&processor, "uid", deleted, &tasks).await;
        assert!(next.gone);
        let latest = processor.memory("uid", |m| {
            m.latest
                .as_ref()
                .map(|b| b["metadata"]["resourceVersion"].clone())
        });
        assert_eq!(latest, Some(json!("2")));

        // An object not known here is not remembered: it is listed again if the shard stays.
        let other = vec![Event::Changed("ADDED", object("5"))];
        Processor::process(&processor, "other", other, &tasks).await;
        assert!(processor.memories.with_known("other", |_| ()).is_none());
        drop(in_flight);
        assert!(draining.await);
    }

    /// In a create burst, every new object's processing future waits for a write permit
    /// long after its handlers ran: with 100,000 objects, each kilobyte of it is 100 MB at
    /// the peak. The handlers' and the request's futures are boxed while they run, so the
    /// processing future keeps only what a cycle holds across its steps (it was 7.3 KB).
    #[tokio::test]
    async fn an_object_waiting_to_write_holds_a_small_future() {
        let processor = processor(None);
        let tasks = Tasks::root(1);
        let processing = processor.process("uid", Vec::new(), &tasks);
        let size = std::mem::size_of_val(&*processing);
        assert!(size <= 2048, "the processing future takes {size} bytes");
    }
}
