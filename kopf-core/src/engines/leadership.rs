//! Leader election with a `coordination.k8s.io/v1` Lease: client-go's `leaderelection`
//! algorithm (as controller-runtime uses it), whose record and rules are in
//! [`crate::configs::leadership`].
//!
//! One task, the elector, runs in a tree of its own (so that it renews the Lease until the
//! very end of a graceful stop, as controller-runtime's manager does) and is never paused:
//! - as a candidate, it tries to acquire the Lease every retry period (with client-go's
//!   jitter): a GET, a create on `404`, and a PUT guarded by the GET's resourceVersion when
//!   the Lease is free, its own, or its holder's record has not been seen to change for the
//!   lease duration (on the local monotonic clock);
//! - as the leader, it renews the Lease every retry period, retrying for up to the renew
//!   deadline; when that passes, it loses the leadership: it pauses and becomes a candidate
//!   again, or, with [`LostLeadership::Exit`], it makes the operator stop with an error.
//!
//! Invariants:
//! 1. The operator is paused whenever this candidate is not the leader: from the start until
//!    it acquires the Lease, and from a lost renewal on. Its [`Pause`] joins peering's.
//! 2. The operator acts on objects only within the leader's term ([`Fence`]): until a renew
//!    deadline after the start of the last successful renewal, on the local monotonic clock.
//!    Others take over no sooner than a lease duration (longer) after they saw that renewal,
//!    so two leaders never act at once, even when this one was stopped and continues long
//!    after (its term has ended by then, whether or not its elector has run since).
//! 3. Every write carries the resourceVersion of the Lease as last read or written, so that of
//!    two concurrent writers one gets `409 Conflict` and loses that round.
//! 4. The Lease is released ([`Elector::release`]) only by a leader, only after the operator's
//!    tasks (and its cleanup handlers) have ended, at a graceful stop, and never when work was
//!    abandoned at the grace period (it may still act: the Lease expires after its term). A
//!    stopping operator renews what it holds until then, but acquires nothing. The release
//!    ends the term at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng as _;
use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::aiokits::tasks::{StopReason, Tasks};
use crate::clients::leases;
use crate::configs::leadership::{self, jittered};
use crate::configs::settings::{LeaseSettings, LostLeadership, Settings};
use crate::engines::activities::ActivityError;
use crate::engines::pausing::{Fence, Pause};
use crate::engines::peering;
use crate::helpers::sync::lock;

/// The Lease as this candidate last read or wrote it, and when its `spec` was seen to change.
#[derive(Debug)]
struct Observed {
    lease: Value,
    changed_at: Instant,
}

/// This operator's candidacy for one Lease.
pub(crate) struct Elector {
    client: kube::Client,
    identity: String,
    namespace: String,
    settings: LeaseSettings,
    /// Paused while not leading.
    paused: watch::Sender<bool>,
    /// When the current term ends; `None` while not leading.
    term: watch::Sender<Option<Instant>>,
    leading: AtomicBool,
    observed: Mutex<Option<Observed>>,
    /// Cancelled when the election ends the operator: the leadership lost with `Exit`, or a
    /// failure of the work started on leading (then in `failure`).
    ended: CancellationToken,
    failure: Mutex<Option<ActivityError>>,
    /// Where the work started on leading runs: a child node per term. Its cancellation (the
    /// operator's stop) ends the candidacy: nothing is acquired after it.
    node: Tasks,
    /// The elector's own tree: stopped only after everything else ([`Elector::release`]).
    campaign: Tasks,
    on_leading: Option<OnLeading>,
}

/// What runs each time this candidate starts leading, before the operator serves (client-go's
/// `OnStartedLeading`), in a node of its own that is stopped if the leadership is lost.
pub(crate) type OnLeading = Arc<
    dyn Fn(Tasks) -> futures::future::BoxFuture<'static, Result<(), ActivityError>> + Send + Sync,
>;

/// Why the election ended the operator.
#[derive(Debug)]
pub(crate) enum Ending {
    /// The leadership was lost, and the settings say to exit.
    Lost,
    /// The work started on leading failed for good.
    Failed(ActivityError),
}

/// Why the Lease settings cannot be used: client-go's validation.
pub(crate) fn check(settings: &Settings) -> Result<(), String> {
    match &settings.peering.lease {
        None => Ok(()),
        Some(lease) => {
            let identity = lease.identity.clone().unwrap_or_else(|| "-".into());
            leadership::validate(lease, &identity)
        }
    }
}

impl Elector {
    /// Starts the election that the settings ask for, in the operator's tree, with what runs
    /// each time it starts leading: `None` when they select no Lease; an error when the
    /// settings are invalid.
    pub(crate) fn start(
        client: &kube::Client,
        settings: &Settings,
        tasks: &Tasks,
        on_leading: Option<OnLeading>,
    ) -> Result<Option<Arc<Elector>>, String> {
        let Some(lease) = &settings.peering.lease else {
            return Ok(None);
        };
        let identity = lease.identity.clone().unwrap_or_else(peering::identity);
        leadership::validate(lease, &identity)?;
        let namespace = lease
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        let elector = Arc::new(Elector {
            client: client.clone(),
            identity,
            namespace,
            settings: lease.clone(),
            paused: watch::Sender::new(true),
            term: watch::Sender::new(None),
            leading: AtomicBool::new(false),
            observed: Mutex::new(None),
            ended: CancellationToken::new(),
            failure: Mutex::new(None),
            node: tasks.clone(),
            campaign: Tasks::root(1),
            on_leading,
        });
        let campaign = elector.campaign.token().clone();
        elector.campaign.spawn(elector.clone().elect(campaign));
        Ok(Some(elector))
    }

    /// Paused while this candidate does not lead, or its term has ended.
    pub(crate) fn pause(&self) -> Pause {
        Pause::following(self.paused.subscribe()).fenced(self.fence())
    }

    /// Open within this leader's term: what every step that acts on objects obeys.
    pub(crate) fn fence(&self) -> Fence {
        Fence::following(self.term.subscribe())
    }

    /// Resolves when the election ends the operator, with why; never otherwise.
    pub(crate) async fn ended(&self) -> Ending {
        self.ended.cancelled().await;
        match lock(&self.failure).take() {
            Some(error) => Ending::Failed(error),
            None => Ending::Lost,
        }
    }

    /// Whether this candidate leads now (or did when its task stopped).
    pub(crate) fn is_leading(&self) -> bool {
        self.leading.load(Ordering::SeqCst)
    }

    /// This candidate's identity, as the Lease's holder.
    pub(crate) fn identity(&self) -> &str {
        &self.identity
    }

    /// How often candidates try to acquire the Lease.
    pub(crate) fn retry_period(&self) -> Duration {
        self.settings.retry_period
    }

    /// The Lease as `namespace/name`, for logs and errors.
    pub(crate) fn lease(&self) -> String {
        format!("{}/{}", self.namespace, self.settings.name)
    }

    /// Acquires, leads until the leadership is lost, and again, until cancelled (or lost with
    /// `Exit`, or failed on leading); once the operator stops, only renews what it holds.
    async fn elect(self: Arc<Self>, token: CancellationToken) {
        let stopping = self.node.token().clone();
        loop {
            let acquired = tokio::select! {
                _ = stopping.cancelled() => false,
                acquired = self.acquire(&token) => acquired,
            };
            if !acquired {
                return;
            }
            let term = self.node.child();
            let lead = self.lead(&token);
            tokio::pin!(lead);
            let started = async {
                match &self.on_leading {
                    Some(on_leading) => on_leading(term.clone()).await,
                    None => Ok(()),
                }
            };
            let lost = tokio::select! {
                lost = &mut lead => lost,
                started = started => match started {
                    Ok(()) => {
                        self.paused.send_replace(false);
                        (&mut lead).await
                    }
                    Err(error) => {
                        tracing::error!(target: "kopf::leadership", lease = ?self.settings.name, "{error}");
                        *lock(&self.failure) = Some(error);
                        self.ended.cancel();
                        return;
                    }
                },
            };
            term.cancel(StopReason::OperatorPaused);
            if !lost {
                return;
            }
            self.leading.store(false, Ordering::SeqCst);
            self.term.send_replace(None);
            self.paused.send_replace(true);
            let name = &self.settings.name;
            tracing::warn!(target: "kopf::leadership", lease = ?name, "failed to renew lease {}: lost leadership", self.lease());
            if self.settings.on_lost == LostLeadership::Exit {
                self.ended.cancel();
                return;
            }
        }
    }

    /// Tries until the Lease is acquired (`true`) or the token is cancelled (`false`).
    async fn acquire(&self, token: &CancellationToken) -> bool {
        let name = &self.settings.name;
        tracing::info!(target: "kopf::leadership", lease = ?name, identity = %self.identity, "attempting to acquire leader lease {}...", self.lease());
        loop {
            let acquired = tokio::select! {
                _ = token.cancelled() => return false,
                acquired = self.try_acquire_or_renew() => acquired,
            };
            if acquired {
                self.leading.store(true, Ordering::SeqCst);
                tracing::info!(target: "kopf::leadership", lease = ?name, identity = %self.identity, "successfully acquired lease {}", self.lease());
                return true;
            }
            let delay = jittered(self.settings.retry_period, rand::rng().random::<f64>());
            tokio::select! {
                _ = token.cancelled() => return false,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// Renews every retry period while leading; `true` when no renewal succeeded within the
    /// term (a renew deadline from the start of the last successful one), `false` when
    /// cancelled.
    async fn lead(&self, token: &CancellationToken) -> bool {
        let period = self.settings.retry_period;
        loop {
            tokio::select! {
                _ = token.cancelled() => return false,
                _ = tokio::time::sleep(period) => {}
            }
            // Not from now: after a long stop (SIGSTOP), the term has ended already.
            let Some(until) = *self.term.borrow() else {
                return true;
            };
            loop {
                let attempt = tokio::time::timeout_at(until, self.try_acquire_or_renew());
                let renewed = tokio::select! {
                    _ = token.cancelled() => return false,
                    renewed = attempt => renewed.unwrap_or(false),
                };
                if renewed {
                    break;
                }
                if Instant::now() + period >= until {
                    return true;
                }
                tokio::select! {
                    _ = token.cancelled() => return false,
                    _ = tokio::time::sleep(period) => {}
                }
            }
        }
    }

    /// One round of client-go's `tryAcquireOrRenew`: whether this candidate holds the Lease
    /// after it. When it does, a new term starts, dated from the round's start.
    async fn try_acquire_or_renew(&self) -> bool {
        let began = Instant::now();
        let held = self.acquire_or_renew().await;
        if held {
            self.term
                .send_replace(Some(began + self.settings.renew_deadline));
        }
        held
    }

    /// The requests of one round of `tryAcquireOrRenew`.
    async fn acquire_or_renew(&self) -> bool {
        if self.renew_optimistically().await {
            return true;
        }
        let name = &self.settings.name;
        let found = match self.send(http::Method::GET, Some(name), None).await {
            Ok(lease) => lease,
            Err(kube::Error::Api(status)) if status.code == 404 => {
                let lease = json!({
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": name, "namespace": self.namespace},
                    "spec": leadership::taken(&Value::Null, &self.identity, self.settings.lease_duration, OffsetDateTime::now_utc()),
                });
                return match self.send(http::Method::POST, None, Some(lease)).await {
                    Ok(created) => {
                        self.observe(created);
                        true
                    }
                    Err(error) => {
                        tracing::warn!(target: "kopf::leadership", lease = ?name, %error, "error initially creating leader election record");
                        false
                    }
                };
            }
            Err(error) => {
                tracing::warn!(target: "kopf::leadership", lease = ?name, %error, "error retrieving resource lock {}", self.lease());
                return false;
            }
        };
        let unchanged_for = self.observe(found.clone());
        let spec = &found["spec"];
        if !leadership::may_take(
            spec,
            &self.identity,
            unchanged_for,
            self.settings.lease_duration,
        ) {
            tracing::debug!(target: "kopf::leadership", lease = ?name, "lock is held by {} and has not yet expired", leadership::holder(spec).unwrap_or_default());
            return false;
        }
        match self.put_taken(found).await {
            Ok(()) => true,
            Err(error) => {
                tracing::debug!(target: "kopf::leadership", lease = ?name, %error, "failed to update lock {}", self.lease());
                false
            }
        }
    }

    /// client-go's fast path: a leader renews from the Lease it last wrote, with no read
    /// first (an update a retry period, not a read and an update). The update carries that
    /// resourceVersion, so a Lease changed meanwhile by anyone else is a conflict: then
    /// `false`, and the round reads the Lease as any candidate does.
    async fn renew_optimistically(&self) -> bool {
        if !self.leading.load(Ordering::SeqCst) {
            return false;
        }
        let Some(lease) = lock(&self.observed).as_ref().map(|o| o.lease.clone()) else {
            return false;
        };
        if leadership::holder(&lease["spec"]) != Some(self.identity.as_str()) {
            return false;
        }
        let name = &self.settings.name;
        match self.put_taken(lease).await {
            Ok(()) => true,
            Err(error) => {
                tracing::debug!(target: "kopf::leadership", lease = ?name, %error, "failed to update lease {} optimistically, falling back to slow path", self.lease());
                false
            }
        }
    }

    /// Writes `lease` (as last read or written, so guarded by its resourceVersion) as held by
    /// this candidate and renewed now; remembers what the server stored.
    async fn put_taken(&self, mut lease: Value) -> Result<(), kube::Error> {
        lease["spec"] = leadership::taken(
            &lease["spec"],
            &self.identity,
            self.settings.lease_duration,
            OffsetDateTime::now_utc(),
        );
        let name = &self.settings.name;
        let written = self
            .send(http::Method::PUT, Some(name), Some(lease))
            .await?;
        self.observe(written);
        Ok(())
    }

    /// Remembers the Lease as read or written; returns for how long its `spec` has been seen
    /// unchanged.
    fn observe(&self, lease: Value) -> Duration {
        let mut observed = lock(&self.observed);
        let now = Instant::now();
        let changed_at = match observed.as_ref() {
            Some(before) if before.lease["spec"] == lease["spec"] => before.changed_at,
            _ => now,
        };
        *observed = Some(Observed { lease, changed_at });
        now - changed_at
    }

    /// Releases the Lease if this candidate leads (client-go's `ReleaseOnCancel`): a PUT with
    /// no holder and a duration of one second, guarded by the resourceVersion last written,
    /// within `timeout`. At a graceful stop, after everything else has stopped, so that
    /// another candidate takes over at once. Failures are logged and ignored: the Lease then
    /// expires on its own.
    pub(crate) async fn release(&self, timeout: Duration) {
        self.stop().await;
        // The term ends here, not a renew deadline later: the next leader may start as soon
        // as it sees the release.
        self.term.send_replace(None);
        if !self.leading.swap(false, Ordering::SeqCst) {
            return;
        }
        let Some(mut lease) = lock(&self.observed).as_ref().map(|o| o.lease.clone()) else {
            return;
        };
        if leadership::holder(&lease["spec"]) != Some(self.identity.as_str()) {
            return;
        }
        lease["spec"] = leadership::released(&lease["spec"], OffsetDateTime::now_utc());
        let name = &self.settings.name;
        let put = self.send(http::Method::PUT, Some(name), Some(lease));
        match tokio::time::timeout(timeout, put).await {
            Ok(Ok(_)) => {
                tracing::info!(target: "kopf::leadership", lease = ?name, "released lease {}", self.lease());
            }
            Ok(Err(error)) => {
                tracing::warn!(target: "kopf::leadership", lease = ?name, %error, "failed to release lock {}: it expires on its own", self.lease());
            }
            Err(_) => {
                tracing::warn!(target: "kopf::leadership", lease = ?name, "the lease {} was not released within {timeout:?}: it expires on its own", self.lease());
            }
        }
    }

    /// Ends the elector's own task: nothing is renewed or acquired after it. Called at the end
    /// of every run, released or not.
    pub(crate) async fn stop(&self) {
        self.campaign.cancel(StopReason::OperatorExiting);
        self.campaign.wait().await;
    }

    /// Sends one request to the Lease (by name) or to the namespace's Leases, with this JSON
    /// body (if any), and reads the JSON reply.
    async fn send(
        &self,
        method: http::Method,
        name: Option<&str>,
        body: Option<Value>,
    ) -> Result<Value, kube::Error> {
        let path = leases::path(&self.namespace, name);
        leases::send(&self.client, method, &path, body).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Once the Lease is released, this operator acts on nothing more: its term ends with the
    /// release, not a renew deadline later.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_released_lease_ends_the_term_at_once() {
        let server = kopf_testing::FakeApiServer::start().await.unwrap();
        let mut settings = Settings::default();
        let mut lease = LeaseSettings::new("lease-released");
        lease.namespace = Some("default".into());
        lease.identity = Some("me".into());
        lease.renew_deadline = Duration::from_secs(60);
        lease.lease_duration = Duration::from_secs(120);
        settings.peering.lease = Some(lease);
        let tasks = Tasks::root(1);
        let elector = Elector::start(&server.client(), &settings, &tasks, None)
            .unwrap()
            .unwrap();
        let (fence, pause) = (elector.fence(), elector.pause());
        tokio::time::timeout(Duration::from_secs(30), async {
            while !fence.is_open() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("it leads");
        assert!(!pause.is_paused());
        tasks.cancel(StopReason::OperatorExiting);
        tasks.wait().await;
        elector.release(Duration::from_secs(10)).await;
        assert!(!fence.is_open(), "the term ended with the release");
        assert!(pause.is_paused());
        drop(elector);
        server.stop().await;
    }
}
