//! Assigned shards: replicas split the objects of the served resources among them, with
//! `coordination.k8s.io/v1` Leases for membership and ownership, and hand shards over live.
//! The rules without I/O are in [`crate::configs::sharding`]; which shards are open here, and
//! the drain, in [`crate::engines::ownership`].
//!
//! Two tasks run in a tree of their own (so that they go on until the very end of a graceful
//! stop) and are never paused:
//! - the keep-alive renews this member's Lease every retry period; each success starts a term
//!   of a renew deadline, dated from the attempt's start ([`Fence`]). A renewal that finds the
//!   Lease emptied or gone means that peers fenced this replica: it drops its shards and joins
//!   again as a new incarnation.
//! - the reconciler, every retry period and whenever a watch of the ring's Leases shows a
//!   shard's Lease change or a member come or go, lists the ring's Leases, judges the members (alive
//!   while their Lease is seen to change within the lease duration, on the local monotonic
//!   clock), fences the expired ones (their Lease emptied with a PUT guarded by the
//!   resourceVersion that was seen, then deleted), computes the targets, and for each shard:
//!   creates or takes it when it is free, or its holder is gone, and this replica is its
//!   target; opens it when it is recorded as ours; drains it and writes the target as its
//!   holder when another replica is its target; drops it when another live replica holds it.
//!
//! Invariants:
//! 1. This replica acts on the objects of a shard only while the shard's Lease names it and its
//!    own term goes on (the [`Fence`] and the [`Ownership`] gate).
//! 2. A shard is handed over only after its drain; a drain that times out keeps the shard.
//! 3. A replica's shards are taken only after its member Lease was emptied by a write guarded
//!    by the version seen unchanged for the lease duration, which is longer than its term: by
//!    then it acts on nothing, and it cannot renew (it finds itself fenced and rejoins).
//! 4. Every write of a Lease carries the resourceVersion last read, so that of two concurrent
//!    writers one gets `409 Conflict`.
//! 5. Once the operator stops, nothing is taken or drained; after its tasks have ended, the
//!    shards are released and the member Lease deleted, so that peers take over at once.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng as _;
use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::aiokits::tasks::{StopReason, Tasks};
use crate::clients::leases;
use crate::clients::watching::{self, Event, Selection};
use crate::configs::leadership;
use crate::configs::settings::{Settings, ShardingSettings, WatchingSettings};
use crate::configs::sharding::{self, MAX_SHARDS, RING_LABEL, ROLE_LABEL, Ring};
use crate::engines::ownership::Ownership;
use crate::engines::pausing::{Fence, Pause};
use crate::engines::peering;
use crate::helpers::sync::lock;
use crate::structs::resources::Resource;

/// A member's Lease as last listed, and when its `spec` was seen to change.
#[derive(Debug)]
struct Observed {
    lease: Value,
    changed_at: Instant,
}

/// What one renewal of this member's Lease found.
enum Renewal {
    Renewed,
    /// The Lease was emptied or deleted by peers: this replica was fenced.
    Fenced,
    Failed,
}

/// This replica's part in a ring of replicas that split the objects.
pub(crate) struct Sharder {
    client: kube::Client,
    ring: Ring,
    settings: ShardingSettings,
    identity: String,
    /// This start's name in the Leases; a new one after being fenced.
    incarnation: Mutex<String>,
    ownership: Arc<Ownership>,
    /// When the current term ends; `None` before the first renewal and after being fenced.
    term: watch::Sender<Option<Instant>>,
    /// This member's Lease as last written; `None`: to be created.
    member: Mutex<Option<Value>>,
    /// The members' Leases by name.
    observed: Mutex<HashMap<String, Observed>>,
    /// The shards' Leases as last read or written.
    shards: Mutex<BTreeMap<u32, Value>>,
    /// The operator's tree: once it is cancelled, nothing is taken or drained.
    stopping: CancellationToken,
    /// The shards being drained and handed over (or waiting after a drain that timed out).
    handing: Mutex<BTreeSet<u32>>,
    /// Notified when a shard's Lease changes or a member comes or goes: look at the ring now.
    changed: Notify,
    /// Warned of members with another number of shards (once until they go).
    warned: AtomicBool,
    /// The sharder's own tree: stopped only after everything else ([`Sharder::release`]).
    campaign: Tasks,
}

/// Why the sharding settings cannot be used.
pub(crate) fn check(settings: &Settings) -> Result<(), String> {
    let Some(sharding) = &settings.peering.sharding else {
        return Ok(());
    };
    if sharding.shards == 0 {
        return Err("the number of shards must be at least 1".into());
    }
    if sharding.shards > MAX_SHARDS {
        return Err(format!(
            "the number of shards ({}) must be at most {MAX_SHARDS}: each is a Lease that every replica looks at",
            sharding.shards
        ));
    }
    if !settings.watching.shard_selectors.is_empty() {
        return Err("assigned shards (peering.sharding) and static shard selectors (watching.shard_selectors) cannot be combined: use one of them".into());
    }
    if sharding.lease_duration <= sharding.renew_deadline
        || sharding.renew_deadline <= sharding.retry_period
        || sharding.retry_period.is_zero()
    {
        return Err(format!(
            "the shards' lease duration ({:?}) must be greater than the renew deadline ({:?}), and that greater than the retry period ({:?}), above zero",
            sharding.lease_duration, sharding.renew_deadline, sharding.retry_period
        ));
    }
    // The others are shorter: nothing added to a clock overflows.
    leadership::check_recordable("shards' lease duration", sharding.lease_duration)?;
    if sharding.name.is_empty() {
        return Err("the shards' ring name must not be empty".into());
    }
    Ok(())
}

impl Sharder {
    /// Starts this replica's membership if the settings ask for assigned shards, in a tree
    /// of its own; `tasks` is the operator's (its stop ends the taking of shards).
    pub(crate) fn start(
        client: &kube::Client,
        settings: &Settings,
        tasks: &Tasks,
    ) -> Result<Option<Arc<Sharder>>, String> {
        let Some(sharding) = &settings.peering.sharding else {
            return Ok(None);
        };
        check(settings)?;
        let identity = sharding.identity.clone().unwrap_or_else(peering::identity);
        let namespace = sharding
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        let sharder = Arc::new(Sharder {
            client: client.clone(),
            ring: Ring {
                name: sharding.name.clone(),
                namespace,
                count: sharding.shards,
            },
            settings: sharding.clone(),
            incarnation: Mutex::new(incarnation(&identity)),
            identity,
            ownership: Ownership::new(sharding.shards),
            term: watch::Sender::new(None),
            member: Mutex::new(None),
            observed: Mutex::default(),
            shards: Mutex::default(),
            stopping: tasks.token().clone(),
            handing: Mutex::default(),
            changed: Notify::new(),
            warned: AtomicBool::new(false),
            campaign: Tasks::root(1),
        });
        let token = sharder.campaign.token().clone();
        sharder
            .campaign
            .spawn(sharder.clone().keep_alive(token.clone()));
        sharder.campaign.spawn(
            sharder
                .clone()
                .watch_ring(settings.watching.clone(), token.clone()),
        );
        sharder.campaign.spawn(sharder.clone().reconcile(token));
        Ok(Some(sharder))
    }

    /// Which shards are open here: the gate of every object.
    pub(crate) fn ownership(&self) -> Arc<Ownership> {
        self.ownership.clone()
    }

    /// Open within this member's term: what every step that acts on objects obeys.
    pub(crate) fn fence(&self) -> Fence {
        Fence::following(self.term.subscribe())
    }

    /// Paused while this member's term is not going on (before joining, after a failed
    /// renewal): nothing is served, and everything is listed again after.
    pub(crate) fn pause(&self) -> Pause {
        Pause::never().fenced(self.fence())
    }

    /// Whether another member of the ring lived when its Leases were last looked at.
    pub(crate) fn others_alive(&self) -> bool {
        let now = Instant::now();
        lock(&self.observed).values().any(|seen| {
            sharding::holder(&seen.lease).is_some()
                && now - seen.changed_at < self.settings.lease_duration
        })
    }

    /// The ring's Leases, for logs.
    fn place(&self) -> String {
        format!("{}/{}", self.ring.namespace, self.ring.name)
    }

    /// The lease duration as the Leases record it, in whole seconds rounded up: peers that
    /// judge this member by its record never wait less than it acts.
    fn duration(&self) -> Duration {
        Duration::from_secs(self.settings.lease_duration.as_secs_f64().ceil() as u64)
    }

    fn me(&self) -> String {
        lock(&self.incarnation).clone()
    }

    /// Renews this member's Lease every retry period, until cancelled.
    async fn keep_alive(self: Arc<Self>, token: CancellationToken) {
        loop {
            let began = Instant::now();
            let deadline = began + self.settings.renew_deadline;
            let renewal = tokio::select! {
                _ = token.cancelled() => return,
                renewal = tokio::time::timeout_at(deadline, self.renew()) => renewal.unwrap_or(Renewal::Failed),
            };
            match renewal {
                Renewal::Renewed => {
                    self.term.send_replace(Some(deadline));
                }
                Renewal::Fenced => self.rejoin().await,
                Renewal::Failed => {}
            }
            let delay = self.settings.retry_period;
            tokio::select! {
                _ = token.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// One renewal (or the creation) of this member's Lease.
    async fn renew(&self) -> Renewal {
        let me = self.me();
        let name = self.ring.member_lease_name(&me);
        let now = OffsetDateTime::now_utc();
        let current = lock(&self.member).clone();
        let written = match current {
            None => {
                let lease = self.ring.lease(&name, "member", &me, self.duration(), now);
                self.send(http::Method::POST, None, Some(lease)).await
            }
            Some(lease) => {
                let renewed = sharding::renewed(&lease, self.duration(), now);
                self.send(http::Method::PUT, Some(&name), Some(renewed))
                    .await
            }
        };
        match written {
            Ok(lease) => {
                if lock(&self.member).is_none() {
                    tracing::info!(target: "kopf::sharding", ring = %self.place(), member = %me, "joined the ring of {} shards", self.ring.count);
                }
                *lock(&self.member) = Some(lease);
                Renewal::Renewed
            }
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
                match self.send(http::Method::GET, Some(&name), None).await {
                    Ok(lease) if sharding::holder(&lease) == Some(me.as_str()) => {
                        *lock(&self.member) = Some(lease);
                        Renewal::Failed
                    }
                    Ok(_) => Renewal::Fenced,
                    Err(kube::Error::Api(status)) if status.code == 404 => {
                        match lock(&self.member).is_some() {
                            true => Renewal::Fenced,
                            false => Renewal::Failed,
                        }
                    }
                    Err(_) => Renewal::Failed,
                }
            }
            Err(error) => {
                tracing::warn!(target: "kopf::sharding", ring = %self.place(), %error, "failed to renew this member's lease; retrying");
                Renewal::Failed
            }
        }
    }

    /// Lets go of every shard and joins again as a new member: peers fenced this one.
    async fn rejoin(&self) {
        self.term.send_replace(None);
        let old = self.me();
        tracing::warn!(target: "kopf::sharding", ring = %self.place(), member = %old, "this member was fenced by its peers (not seen to renew in time): it lets go of its shards and joins again as a new member");
        for shard in self.ownership.held() {
            self.ownership.drop_shard(shard).await;
        }
        lock(&self.shards).clear();
        *lock(&self.incarnation) = incarnation(&self.identity);
        *lock(&self.member) = None;
    }

    /// Watches the ring's Leases, until cancelled: a shard's Lease that changes (a hand-off,
    /// a release) or a member that comes or goes wakes the reconciler at once; members'
    /// renewals do not.
    async fn watch_ring(self: Arc<Self>, settings: WatchingSettings, token: CancellationToken) {
        let labels = format!("{RING_LABEL}={}", self.ring.name);
        let selection = Selection {
            labels: Some(&labels),
            ..Selection::default()
        };
        let leases = Resource::leases();
        let namespace = Some(self.ring.namespace.as_str());
        let watched = watching::watch(
            &self.client,
            &leases,
            namespace,
            selection,
            &settings,
            &token,
            |event| {
                let wakes = match &event {
                    Event::Changed(kind, lease) => {
                        *kind != "MODIFIED" || lease["metadata"]["labels"][ROLE_LABEL] == "shard"
                    }
                    Event::Listed(_) | Event::Vanished(_) | Event::ListingDone => false,
                };
                if wakes {
                    self.changed.notify_one();
                }
            },
        )
        .await;
        if let Err(error) = watched {
            tracing::warn!(target: "kopf::sharding", ring = %self.place(), %error, "cannot watch the ring's leases: looking at them every retry period only");
        }
    }

    /// Looks at the ring every retry period (and when the watch wakes it) and moves the
    /// shards, until cancelled or the operator stops.
    async fn reconcile(self: Arc<Self>, token: CancellationToken) {
        let mut term = self.term.subscribe();
        loop {
            tokio::select! {
                _ = token.cancelled() => return,
                _ = self.stopping.cancelled() => return,
                _ = term.wait_for(Option::is_some) => {}
            }
            tokio::select! {
                _ = token.cancelled() => return,
                _ = self.stopping.cancelled() => return,
                _ = self.round() => {}
            }
            let delay = self
                .settings
                .retry_period
                .mul_f64(1.0 + 0.2 * rand::rng().random::<f64>());
            tokio::select! {
                _ = token.cancelled() => return,
                _ = self.stopping.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
                _ = self.changed.notified() => {}
            }
        }
    }

    /// One look at the ring: judge, fence, assign, take, open, drop, hand over.
    async fn round(self: &Arc<Self>) {
        if !self.fence().is_open() {
            return;
        }
        let me = self.me();
        let own_name = self.ring.member_lease_name(&me);
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("labelSelector", &format!("{RING_LABEL}={}", self.ring.name))
            .finish();
        let url = format!("{}?{query}", leases::path(&self.ring.namespace, None));
        let listed = match leases::send(&self.client, http::Method::GET, &url, None).await {
            Ok(list) => list,
            Err(error) => {
                tracing::warn!(target: "kopf::sharding", ring = %self.place(), %error, "failed to list the ring's leases; retrying");
                return;
            }
        };
        let items = listed["items"].as_array().cloned().unwrap_or_default();
        let (members, shards): (Vec<Value>, Vec<Value>) = items
            .into_iter()
            .partition(|lease| lease["metadata"]["labels"][ROLE_LABEL] == "member");

        // Judge the members on the local monotonic clock.
        let now = Instant::now();
        let mut live = vec![me.clone()];
        let mut present: HashSet<String> = HashSet::new();
        let mut expired = Vec::new();
        let mut conflicting = Vec::new();
        {
            let mut observed = lock(&self.observed);
            observed.retain(|name, _| members.iter().any(|m| m["metadata"]["name"] == **name));
            for member in &members {
                let name = member["metadata"]["name"].as_str().unwrap_or_default();
                if name == own_name {
                    continue;
                }
                let seen = observed
                    .entry(name.to_string())
                    .or_insert_with(|| Observed {
                        lease: member.clone(),
                        changed_at: now,
                    });
                if seen.lease["spec"] != member["spec"] {
                    seen.changed_at = now;
                }
                seen.lease = member.clone();
                let Some(holder) = sharding::holder(member) else {
                    continue;
                };
                // The longer of the two: a member with a longer lease acts longer on its term.
                let theirs = Duration::from_secs(
                    member["spec"]["leaseDurationSeconds"].as_u64().unwrap_or(0),
                );
                if now - seen.changed_at >= self.settings.lease_duration.max(theirs) {
                    expired.push(member.clone());
                    continue;
                }
                present.insert(holder.to_string());
                if sharding::count_of(member) == Some(self.ring.count) {
                    live.push(holder.to_string());
                } else {
                    let count = sharding::count_of(member).map_or("?".into(), |c| c.to_string());
                    conflicting.push(format!("{holder} ({count} shards)"));
                }
            }
        }
        for member in expired {
            if !self.fence_member(&member).await
                && let Some(holder) = sharding::holder(&member)
            {
                present.insert(holder.to_string());
            }
        }
        if !conflicting.is_empty() {
            if !self.warned.swap(true, Ordering::SeqCst) {
                tracing::error!(target: "kopf::sharding", ring = %self.place(), "members with another number of shards than this one's {} are alive: {}; this replica takes no shard until they go (give every replica the same --shards)", self.ring.count, conflicting.join(", "));
            }
            return;
        }
        self.warned.store(false, Ordering::SeqCst);
        live.sort();
        live.dedup();
        let targets = sharding::assign(&live, self.ring.count);

        let by_shard: BTreeMap<u32, Value> = shards
            .into_iter()
            .filter_map(|lease| Some((self.ring.shard_of_lease(&lease)?, lease)))
            .collect();
        *lock(&self.shards) = by_shard.clone();
        for k in 0..self.ring.count {
            if lock(&self.handing).contains(&k) {
                continue;
            }
            let target = live[targets[k as usize]].as_str();
            let Some(lease) = by_shard.get(&k) else {
                if target == me {
                    self.create_shard(k, &me).await;
                }
                continue;
            };
            match sharding::holder(lease) {
                Some(holder) if holder == me => {
                    if target != me {
                        self.hand_off(k, lease.clone(), target.to_string());
                    } else if !self.ownership.is_held(k) {
                        self.open(k, lease);
                    }
                }
                Some(holder) if present.contains(holder) => {
                    if self.ownership.is_held(k) {
                        tracing::warn!(target: "kopf::sharding", ring = %self.place(), shard = k, %holder, "shard {k} is recorded as another member's: dropped at once");
                        self.ownership.drop_shard(k).await;
                    }
                }
                holder => {
                    if target == me {
                        self.take_shard(k, lease, holder, &me).await;
                    }
                }
            }
        }
        // Once for all the shards opened: the watchers list again once.
        self.ownership.publish();
    }

    /// Empties an expired member's Lease (guarded by the version seen unchanged), then deletes
    /// it: `true` when it is gone.
    async fn fence_member(&self, member: &Value) -> bool {
        let name = member["metadata"]["name"].as_str().unwrap_or_default();
        let holder = sharding::holder(member).unwrap_or_default().to_string();
        let emptied = sharding::released(member, OffsetDateTime::now_utc());
        if let Err(error) = self
            .send(http::Method::PUT, Some(name), Some(emptied))
            .await
        {
            tracing::info!(target: "kopf::sharding", ring = %self.place(), member = %holder, %error, "could not fence an expired member (it may have renewed); its shards are not taken");
            return false;
        }
        tracing::warn!(target: "kopf::sharding", ring = %self.place(), member = %holder, "fenced a member not seen to renew for {:?}: its shards are taken over", self.settings.lease_duration);
        let _ = self.send(http::Method::DELETE, Some(name), None).await;
        true
    }

    /// Creates a shard's Lease, held by this member, and opens the shard.
    async fn create_shard(&self, k: u32, me: &str) {
        let name = self.ring.shard_lease_name(k);
        let lease = self.ring.lease(
            &name,
            "shard",
            me,
            self.duration(),
            OffsetDateTime::now_utc(),
        );
        match self.send(http::Method::POST, None, Some(lease)).await {
            Ok(created) => {
                tracing::info!(target: "kopf::sharding", ring = %self.place(), shard = k, "took shard {k} (new)");
                self.open(k, &created);
            }
            Err(error) => {
                tracing::debug!(target: "kopf::sharding", ring = %self.place(), shard = k, %error, "could not create the shard's lease; looking again later");
            }
        }
    }

    /// Takes a free shard, or one whose holder is gone, and opens it.
    async fn take_shard(&self, k: u32, lease: &Value, from: Option<&str>, me: &str) {
        let name = self.ring.shard_lease_name(k);
        let taken = sharding::handed(lease, me, self.duration(), OffsetDateTime::now_utc());
        match self.send(http::Method::PUT, Some(&name), Some(taken)).await {
            Ok(written) => {
                match from {
                    Some(from) => {
                        tracing::info!(target: "kopf::sharding", ring = %self.place(), shard = k, from, "took shard {k} over from a member that is gone")
                    }
                    None => {
                        tracing::info!(target: "kopf::sharding", ring = %self.place(), shard = k, "took shard {k} (released)")
                    }
                }
                self.open(k, &written);
            }
            Err(error) => {
                tracing::debug!(target: "kopf::sharding", ring = %self.place(), shard = k, %error, "could not take the shard; looking again later");
            }
        }
    }

    /// Opens a shard recorded as this member's (within its term only, and only for this
    /// incarnation: a round that began before a rejoin opens nothing); the watchers follow
    /// at the round's end.
    fn open(&self, k: u32, lease: &Value) {
        let mine = sharding::holder(lease) == Some(self.me().as_str());
        if !mine || !self.fence().is_open() || self.stopping.is_cancelled() {
            return;
        }
        lock(&self.shards).insert(k, lease.clone());
        self.ownership.open(k);
    }

    /// Drains a shard and records its new holder, in a task of its own (rounds go on
    /// meanwhile, and skip the shard); after a drain that timed out, the shard is not handed
    /// over again before another drain timeout has passed.
    fn hand_off(self: &Arc<Self>, k: u32, lease: Value, target: String) {
        lock(&self.handing).insert(k);
        let sharder = self.clone();
        let token = self.campaign.token().clone();
        self.campaign.spawn(async move {
            let drained = sharder.drain_and_hand_off(k, lease, &target).await;
            if !drained {
                tokio::select! {
                    _ = token.cancelled() => {}
                    _ = tokio::time::sleep(sharder.settings.drain_timeout) => {}
                }
            }
            lock(&sharder.handing).remove(&k);
            sharder.changed.notify_one();
        });
    }

    /// Drains a shard and writes the target as its holder: `false` if the drain timed out.
    async fn drain_and_hand_off(&self, k: u32, lease: Value, target: &str) -> bool {
        tracing::info!(target: "kopf::sharding", ring = %self.place(), shard = k, to = %target, "handing shard {k} over to {target}: draining it");
        if !self.ownership.drain(k, self.settings.drain_timeout).await {
            tracing::warn!(target: "kopf::sharding", ring = %self.place(), shard = k, "shard {k} was not drained within {:?} (handlers still run): kept for now, handed over later", self.settings.drain_timeout);
            return false;
        }
        let name = self.ring.shard_lease_name(k);
        let handed = sharding::handed(&lease, target, self.duration(), OffsetDateTime::now_utc());
        match self
            .send(http::Method::PUT, Some(&name), Some(handed))
            .await
        {
            Ok(written) => {
                lock(&self.shards).insert(k, written);
                tracing::info!(target: "kopf::sharding", ring = %self.place(), shard = k, to = %target, "handed shard {k} over to {target}");
            }
            Err(error) => {
                tracing::warn!(target: "kopf::sharding", ring = %self.place(), shard = k, %error, "failed to record the hand-off of shard {k}; looking again later");
            }
        }
        true
    }

    /// Ends the sharder's tasks, then releases the shards held here and deletes this member's
    /// Lease, within `timeout`. At a graceful stop, after the operator's tasks have ended, so
    /// that peers take the shards over at once. Failures are logged: the Leases then expire.
    pub(crate) async fn release(&self, timeout: Duration) {
        // First: no renewal may meet the deletion (and take it for a fencing).
        self.stop().await;
        // The term ends here, not a renew deadline later: peers may take the shards as soon
        // as they see them released.
        self.term.send_replace(None);
        let released = async {
            let me = self.me();
            let held: Vec<(u32, Value)> = lock(&self.shards)
                .iter()
                .filter(|(k, lease)| {
                    self.ownership.is_held(**k) && sharding::holder(lease) == Some(me.as_str())
                })
                .map(|(k, lease)| (*k, lease.clone()))
                .collect();
            let now = OffsetDateTime::now_utc();
            for (k, lease) in held {
                let name = self.ring.shard_lease_name(k);
                let free = sharding::released(&lease, now);
                if let Err(error) = self.send(http::Method::PUT, Some(&name), Some(free)).await {
                    tracing::warn!(target: "kopf::sharding", ring = %self.place(), shard = k, %error, "failed to release shard {k}: peers take it once this member's lease is gone");
                }
            }
            let name = self.ring.member_lease_name(&me);
            if lock(&self.member).is_some() {
                match self.send(http::Method::DELETE, Some(&name), None).await {
                    Ok(_) => {
                        tracing::info!(target: "kopf::sharding", ring = %self.place(), member = %me, "left the ring");
                    }
                    Err(error) => {
                        tracing::warn!(target: "kopf::sharding", ring = %self.place(), %error, "failed to delete this member's lease: it expires on its own");
                    }
                }
            }
        };
        if tokio::time::timeout(timeout, released).await.is_err() {
            tracing::warn!(target: "kopf::sharding", ring = %self.place(), "the shards were not released within {timeout:?}: they are taken over once this member's lease expires");
        }
    }

    /// Ends the sharder's tasks: nothing is renewed after it.
    pub(crate) async fn stop(&self) {
        self.campaign.cancel(StopReason::OperatorExiting);
        self.campaign.wait().await;
    }

    /// Sends one request to one of the ring's Leases (by name) or to their collection, and
    /// reads the reply.
    async fn send(
        &self,
        method: http::Method,
        name: Option<&str>,
        body: Option<Value>,
    ) -> Result<Value, kube::Error> {
        let path = leases::path(&self.ring.namespace, name);
        leases::send(&self.client, method, &path, body).await
    }
}

/// A new incarnation of this identity: unique per start and per rejoin.
fn incarnation(identity: &str) -> String {
    let suffix: u32 = rand::rng().random();
    format!("{identity}#{suffix:08x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Once its shards are released, this member acts on nothing more: its term ends with the
    /// release, not a renew deadline later.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_released_member_ends_its_term_at_once() {
        let server = kopf_testing::FakeApiServer::start().await.unwrap();
        let mut settings = Settings::default();
        let mut sharding = ShardingSettings::new(2);
        sharding.namespace = Some("default".into());
        sharding.identity = Some("me".into());
        sharding.lease_duration = Duration::from_secs(120);
        sharding.renew_deadline = Duration::from_secs(60);
        sharding.retry_period = Duration::from_millis(100);
        settings.peering.sharding = Some(sharding);
        let tasks = Tasks::root(1);
        let sharder = Sharder::start(&server.client(), &settings, &tasks)
            .unwrap()
            .unwrap();
        let fence = sharder.fence();
        tokio::time::timeout(Duration::from_secs(30), async {
            while !fence.is_open() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("it joins");
        tasks.cancel(StopReason::OperatorExiting);
        tasks.wait().await;
        sharder.release(Duration::from_secs(10)).await;
        assert!(!fence.is_open(), "the term ended with the release");
        drop(sharder);
        server.stop().await;
    }
}
