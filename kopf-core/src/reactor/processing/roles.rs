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
            return;
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
    use crate::intents::registry::Registry;
    use crate::reactor::processing::Common;

    /// A client whose every call fails: nothing is sent here.
    fn client() -> kube::Client {
        let service = crate::clients::auth::tower_service_fn(|_| async {
            Err::<http::Response<kube::client::Body>, _>("no API server in this test".into())
        });
        kube::Client::new(service, "default")
    }

    /// In a create burst, every new object's processing future waits for a write permit
    /// long after its handlers ran: with 100,000 objects, each kilobyte of it is 100 MB at
    /// the peak. The handlers' and the request's futures are boxed while they run, so the
    /// processing future keeps only what a cycle holds across its steps (it was 7.3 KB).
    #[tokio::test]
    async fn an_object_waiting_to_write_holds_a_small_future() {
        let common = Common {
            poster: Poster::disabled(),
            memo: Default::default(),
            memos: Default::default(),
            writes: Arc::new(tokio::sync::Semaphore::new(1)),
            indexes: Default::default(),
            fence: Default::default(),
            ownership: None,
        };
        let processor = Arc::new(Processor::new(
            client(),
            Resource::default(),
            &Registry::new(),
            &[],
            Settings::default(),
            common,
        ));
        let tasks = Tasks::root(1);
        let processing = processor.process("uid", Vec::new(), &tasks);
        let size = std::mem::size_of_val(&*processing);
        assert!(size <= 2048, "the processing future takes {size} bytes");
    }
}
