//! An operator's run, in its order: the settings checked, the metrics and the login, the
//! poster of Events, the startup handlers and the liveness endpoint, the admission webhooks,
//! peering, leader election and assigned shards, then the observer; and at the stop, the same
//! pieces stopped in the order that the shutdown contract asks.

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::connecting::connect;
use super::errors::OperatorError;
use super::posting::Posting;
use super::readiness::readiness;
use super::stopping::{shut_down, stop_admission};
use super::{Operator, Scope};
use crate::aiokits::budget::Budget;
use crate::aiokits::connections::Connections;
use crate::aiokits::tasks::Tasks;
use crate::clients::timeouts::Timeouts;
use crate::configs::settings::Settings;
use crate::engines::activities::Activities;
use crate::engines::authentication::Given;
use crate::engines::leadership::{Elector, Ending, OnLeading};
use crate::engines::pausing::Fence;
use crate::engines::peering::Peering;
use crate::engines::probing::{self, Standby};
use crate::engines::sharding::Sharder;
use crate::intents::indexing::IndexHandler;
use crate::intents::registry::deduplicated;
use crate::reactor::admission::{Admitting, Shared, Successors};
use crate::reactor::observation::Observer;
use crate::reactor::processing::Common;
use crate::structs::indexes::Indexes;
use crate::structs::memos::ObjectMemos;
use crate::structs::namespaces::NamespacePatterns;
use crate::structs::shards::ShardSelectors;

impl Operator {
    /// Runs until `stop`, aborting at `abort`; then closes what is left of the connections of
    /// the clients it made, once nothing of the run needs them.
    pub(super) async fn run_until(
        self,
        stop: CancellationToken,
        abort: CancellationToken,
    ) -> Result<(), OperatorError> {
        let connections = Connections::default();
        let posting = Posting::default();
        let noticed = std::sync::OnceLock::new();
        // When the stop came: the poster drains within the grace period from then.
        let noticing = async {
            stop.cancelled().await;
            let _ = noticed.set(tokio::time::Instant::now());
            std::future::pending::<()>().await;
        };
        let operating = self.operate(stop.clone(), abort.clone(), &connections, &posting);
        let result = tokio::select! {
            result = operating => result,
            () = noticing => unreachable!("pending forever"),
        };
        let since = noticed
            .get()
            .copied()
            .unwrap_or_else(tokio::time::Instant::now);
        posting.finish(since, &abort).await;
        connections.close().await;
        result
    }

    async fn operate(
        mut self,
        stop: CancellationToken,
        abort: CancellationToken,
        connections: &Connections,
        posting: &Posting,
    ) -> Result<(), OperatorError> {
        let patterns = match &self.scope {
            Scope::Cluster => None,
            Scope::Namespaces(patterns) => Some(
                NamespacePatterns::parse(patterns)
                    .map_err(|e| OperatorError::Namespaces(e.to_string()))?,
            ),
        };
        crate::engines::leadership::check(&self.settings).map_err(OperatorError::Lease)?;
        crate::engines::sharding::check(&self.settings).map_err(OperatorError::Sharding)?;
        check(&self.settings)?;
        let tasks = Tasks::root(self.settings.execution.workers());
        if let Some(outcomes) = self.outcomes.get() {
            tasks.record_outcomes(outcomes.clone());
        }
        // What activities and login handlers share: the settings, which startup handlers
        // change; the indexes, empty until the resources are listed (as in Kopf, activities get
        // them as they are: startup handlers see them empty, probes see them live).
        let shared_settings = Arc::new(std::sync::Mutex::new(self.settings.clone()));
        // Set when every resource has been listed once: the indexes are filled then, and
        // handlers of objects wait for them.
        let listed = watch::Sender::new(false);
        let indexes = {
            let all: Vec<&IndexHandler> = self.registry.indexes.iter().collect();
            // A function stacked on several resources fills one index.
            let all = deduplicated(all, |handler| *handler);
            Indexes::new(
                all.into_iter().map(|h| (h.id.clone(), h.empty_index())),
                listed.subscribe(),
            )
        };
        // Metrics first, so that the login's requests are counted; the login before anything
        // else, since everything else needs the client.
        let explicit = self.client.take();
        // Read by the client as it sends each request: the startup handlers may change them.
        let timeouts = Timeouts::new(&self.settings);
        let connecting = async {
            if let Some(url) = &self.metrics {
                let metrics = crate::aiokits::metrics::Metrics::new();
                tasks.measure(metrics.clone());
                let url = crate::engines::metrics::MetricsUrl::parse(url)
                    .map_err(OperatorError::Metrics)?;
                let serving = &self.settings.serving;
                crate::engines::metrics::serve(
                    metrics,
                    &url,
                    serving,
                    &tasks,
                    &self.metrics_endpoint,
                )
                .await
                .map_err(OperatorError::Metrics)?;
            }
            connect(
                explicit,
                self.registry.logins.clone(),
                &tasks,
                connections,
                &timeouts,
                Given {
                    memo: self.memo.clone(),
                    settings: shared_settings.clone(),
                    indexes: indexes.clone(),
                },
            )
            .await
        };
        let connected = tokio::select! {
            connected = connecting => connected,
            _ = stop.cancelled() => {
                return shut_down(&tasks, self.settings.process.grace_period, &abort).await;
            }
        };
        let (client, cluster) = match connected {
            Ok(connected) => connected,
            Err(error) => {
                let _ = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
                return Err(error);
            }
        };
        // Before the startup handlers: what they post (or tasks they start) is posted too.
        let poster = posting.start(&client, &self.settings);
        let activities = Activities::new(
            self.registry.clone(),
            client.clone(),
            shared_settings,
            self.memo.clone(),
            indexes.clone(),
        );
        let standby = Standby::default();
        let started = match activities.start_up(&mut self.settings, &tasks, &stop).await {
            Ok(true) => match &self.liveness {
                Some(url) => {
                    let ready = self.ready.subscribe();
                    let serving = &self.settings.serving;
                    probing::serve(url, serving, &activities, ready, standby.clone(), &tasks)
                        .await
                        .map_err(OperatorError::from)
                }
                None => Ok(()),
            },
            Ok(false) => {
                return shut_down(&tasks, self.settings.process.grace_period, &abort).await;
            }
            Err(error) => Err(error.into()),
        };
        if let Err(error) = started {
            let _ = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
            return Err(error);
        }
        timeouts.set(&self.settings);
        // The startup handlers may have changed them (as in Kopf).
        if let Err(error) = check(&self.settings) {
            let _ = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
            return Err(error);
        }
        tasks.threads().set_limit(self.settings.execution.workers());
        posting.configure(&self.settings);
        // After the startup handlers, which may set them (as in Kopf).
        let shards = match ShardSelectors::parse(&self.settings.watching.shard_selectors) {
            Ok(shards) => Arc::new(shards),
            Err(error) => {
                let _ = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
                return Err(OperatorError::ShardSelector(error));
            }
        };
        if self.settings.peering.lease.is_none() {
            // Its own leader: the leader-only startup handlers run now, after the others.
            let started = tokio::select! {
                started = activities.start_leading(&tasks) => started,
                _ = stop.cancelled() => {
                    return shut_down(&tasks, self.settings.process.grace_period, &abort).await;
                }
            };
            if let Err(error) = started {
                let _ = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
                return Err(error.into());
            }
        }
        // The objects' memos, also for the admission handlers of existing objects.
        let memos = ObjectMemos::default();
        // After the startup handlers, which may set the server (as in Kopf).
        let shared = Shared {
            client: client.clone(),
            cluster,
            memo: self.memo.clone(),
            memos: memos.clone(),
            indexes: indexes.clone(),
        };
        let mut admitting =
            match Admitting::serve(&self.registry, &self.settings, shared, &tasks, &stop).await {
                Ok(admitting) => admitting,
                Err(error) => {
                    let _ = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
                    return Err(error.into());
                }
            };
        // After the startup handlers, which may change the peering settings (as in Kopf).
        let peering_started = Peering::start(&client, &self.settings, patterns.as_ref(), &tasks);
        let (pause, peering) = tokio::select! {
            started = peering_started => started,
            _ = stop.cancelled() => {
                let stopped = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
                let _ = stop_admission(admitting.as_ref(), &self.settings, &abort).await;
                return stopped;
            }
        };
        let on_leading: Option<OnLeading> = {
            let activities = activities.clone();
            Some(Arc::new(move |node| {
                let activities = activities.clone();
                Box::pin(async move { activities.start_leading(&node).await })
            }))
        };
        let elector = match Elector::start(&client, &self.settings, &tasks, on_leading) {
            Ok(elector) => elector,
            Err(error) => {
                let _ = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
                let _ = stop_admission(admitting.as_ref(), &self.settings, &abort).await;
                return Err(OperatorError::Lease(error));
            }
        };
        let pause = match &elector {
            Some(elector) => pause.or(elector.pause()),
            None => pause,
        };
        let sharder = match Sharder::start(&client, &self.settings, &tasks) {
            Ok(sharder) => sharder,
            Err(error) => {
                let _ = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
                let _ = stop_admission(admitting.as_ref(), &self.settings, &abort).await;
                if let Some(elector) = &elector {
                    elector.stop().await;
                }
                return Err(OperatorError::Sharding(error));
            }
        };
        let pause = match &sharder {
            Some(sharder) => pause.or(sharder.pause()),
            None => pause,
        };
        let fence = elector.as_ref().map_or_else(Fence::open, |e| e.fence());
        let fence = match &sharder {
            Some(sharder) => fence.and(sharder.fence()),
            None => fence,
        };
        // Set once: this is the only place.
        let _ = standby.set(pause.clone());
        let mut custody = None;
        if let Some(admitting) = &mut admitting
            && let Some(managed) = admitting.managed().map(String::from)
        {
            // Written by one replica at a time: see `reactor::admission::owner`.
            let owner = crate::reactor::admission::owner(
                &client,
                &self.settings,
                &managed,
                &pause,
                peering.as_ref(),
                &tasks,
            );
            let (owning, held) = match owner {
                Ok(owner) => owner,
                Err(error) => {
                    let _ = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
                    let _ = stop_admission(Some(admitting), &self.settings, &abort).await;
                    if let Some(elector) = &elector {
                        elector.stop().await;
                    }
                    if let Some(sharder) = &sharder {
                        sharder.stop().await;
                    }
                    return Err(OperatorError::Lease(error));
                }
            };
            custody = held;
            let successors = Successors {
                peering: peering.clone(),
                sharder: sharder.clone(),
                leader: elector.clone(),
                custody: custody.clone(),
                client: Some(client.clone()),
            };
            admitting.manage(owning, successors, &tasks);
        }
        // Ready once everything is listed and the webhook configurations are in place.
        let in_place = admitting.as_ref().map(Admitting::in_place);
        tasks.spawn(readiness(
            listed.subscribe(),
            in_place,
            self.ready,
            tasks.token().clone(),
        ));
        let observer = Observer {
            client: client.clone(),
            registry: self.registry.clone(),
            settings: self.settings.clone(),
            patterns,
            tasks: tasks.child(),
            ready: listed,
            pause,
            shards,
            common: Common {
                poster: poster.clone(),
                memo: self.memo.clone(),
                memos: memos.clone(),
                writes: Arc::new(tokio::sync::Semaphore::new(
                    self.settings.networking.max_concurrent_writes.max(1),
                )),
                indexes,
                fence,
                ownership: sharder.as_ref().map(|s| s.ownership()),
            },
            in_flight: Budget::new(self.settings.queueing.in_flight_limit, tasks.metrics()),
        };
        tasks.spawn(observer.run());
        drop(client);

        let ended = async {
            match &elector {
                Some(elector) => elector.ended().await,
                None => std::future::pending().await,
            }
        };
        let failed = async {
            match &admitting {
                Some(admitting) => admitting.failed().await,
                None => std::future::pending().await,
            }
        };
        let mut admission_failed = None;
        let ended = tokio::select! {
            _ = stop.cancelled() => None,
            ending = ended => Some(ending),
            error = failed => {
                admission_failed = Some(error);
                None
            }
        };
        let stopped = shut_down(&tasks, self.settings.process.grace_period, &abort).await;
        if let Some(peering) = peering {
            // After the handlers stopped: peers take over at once, not when the entry expires.
            // A second signal skips it: the entry expires on its own.
            tokio::select! {
                _ = peering.disappear(self.settings.process.cleanup_timeout) => {}
                _ = abort.cancelled() => {}
            }
        }
        if let Some(sharder) = &sharder {
            // After the handlers stopped: peers take the shards over at once. Not when work
            // was abandoned at the grace period (it may still run), nor at a second signal:
            // the member's Lease then expires, and peers fence it first.
            if stopped.is_ok() {
                tokio::select! {
                    _ = sharder.release(self.settings.process.cleanup_timeout) => {}
                    _ = abort.cancelled() => {}
                }
            }
            sharder.stop().await;
        }
        let leading = elector.as_ref().is_none_or(|elector| elector.is_leading());
        let cleaned = activities.clean_up(&self.settings, &abort, leading).await;
        // After the cleanup handlers, whose writes may pass through the webhooks.
        let admission_stopped = stop_admission(admitting.as_ref(), &self.settings, &abort).await;
        if let Some(custody) = &custody {
            // Released at the hand-over already, unless that was cut short by a second signal:
            // then the Lease expires on its own.
            if !abort.is_cancelled() {
                custody.release(self.settings.process.cleanup_timeout).await;
            }
            custody.stop().await;
        }
        if let Some(elector) = &elector {
            // After everything else, the cleanup handlers included: the next leader must not
            // meet this one's work. Not when work was abandoned at the grace period (it may
            // still run), nor at a second signal: the Lease then expires on its own, after
            // this leader's term (as the shards above).
            if stopped.is_ok() {
                tokio::select! {
                    _ = elector.release(self.settings.process.cleanup_timeout) => {}
                    _ = abort.cancelled() => {}
                }
            }
            elector.stop().await;
        }
        match (ended, &elector) {
            (Some(Ending::Lost), Some(elector)) => {
                return Err(OperatorError::LostLeadership {
                    lease: elector.lease(),
                });
            }
            (Some(Ending::Failed(error)), _) => return Err(error.into()),
            _ => {}
        }
        if let Some(error) = admission_failed {
            return Err(OperatorError::ManagedWebhooks(error));
        }
        stopped
            .and(admission_stopped)
            .and(cleaned.map_err(OperatorError::from))
    }
}

/// The settings that no part of the operator checks by itself.
fn check(settings: &Settings) -> Result<(), OperatorError> {
    if settings.execution.max_workers == Some(0) {
        return Err(OperatorError::Settings(
            "settings.execution.max_workers is 0: sync handlers need at least 1 thread (or \
             None, for min(32, cpus + 4))"
                .into(),
        ));
    }
    Ok(())
}
