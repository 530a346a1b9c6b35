//! The custody of what the operator writes for the whole cluster (the managed admission
//! webhook configurations), when no replica pauses for another (assigned shards, shard
//! selectors): a `coordination.k8s.io/v1` Lease of its own, held by one replica at a time,
//! with client-go's rules ([`crate::configs::leadership`]).
//!
//! One task, in a tree of its own (so that the holder renews until it hands the custody over
//! at the end of a stop):
//! - a candidate tries to take the Lease every retry period (with client-go's jitter): a GET,
//!   a create on `404`, and a PUT guarded by the GET's resourceVersion when the Lease is free,
//!   its own, or its holder's record has not been seen to change for the lease duration;
//! - the holder renews it every retry period, from the Lease it last wrote.
//!
//! Invariants:
//! 1. Only a replica that serves (not paused) is a candidate, and only until the operator
//!    stops: a holder that pauses releases the Lease at once.
//! 2. The custody lasts a term: a renew deadline after the start of the last successful
//!    renewal, on the local monotonic clock ([`Fence`]). Others take the Lease no sooner than
//!    a lease duration (longer) after they saw that renewal.
//! 3. At a graceful stop, the holder releases the Lease ([`Custody::release`]) only once it is
//!    done with what it keeps; a successor may take it at its next attempt.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
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
use crate::configs::settings::LeaseSettings;
use crate::engines::pausing::{Fence, Pause};
use crate::helpers::sync::lock;

/// This replica's part in the custody of one Lease.
pub(crate) struct Custody {
    client: kube::Client,
    identity: String,
    namespace: String,
    settings: LeaseSettings,
    /// What the custody is for, in log lines (e.g. "the webhook configurations auto.kopf.dev").
    what: String,
    /// When the current term ends; `None` while not holding the Lease.
    term: watch::Sender<Option<Instant>>,
    holding: AtomicBool,
    /// The Lease as last read or written, and when its `spec` was seen to change.
    observed: Mutex<Option<(Value, Instant)>>,
    /// The custody's own tree: stopped by [`Custody::release`].
    campaign: Tasks,
}

impl std::fmt::Debug for Custody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Custody")
            .field("lease", &self.lease())
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl Custody {
    /// Starts the candidacy for `lease` (whose namespace defaults to the client's), as
    /// `identity`, while `serving` is not paused and until `stopping` is cancelled.
    pub(crate) fn start(
        client: &kube::Client,
        lease: LeaseSettings,
        identity: String,
        what: String,
        serving: Pause,
        stopping: CancellationToken,
    ) -> Result<std::sync::Arc<Custody>, String> {
        leadership::validate(&lease, &identity)?;
        let namespace = lease
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        let custody = std::sync::Arc::new(Custody {
            client: client.clone(),
            identity,
            namespace,
            settings: lease,
            what,
            term: watch::Sender::new(None),
            holding: AtomicBool::new(false),
            observed: Mutex::new(None),
            campaign: Tasks::root(1),
        });
        let token = custody.campaign.token().clone();
        custody
            .campaign
            .spawn(custody.clone().keep(serving, stopping, token));
        Ok(custody)
    }

    /// Paused while this replica does not hold the custody, or its term has ended.
    pub(crate) fn pause(&self) -> Pause {
        Pause::never().fenced(Fence::following(self.term.subscribe()))
    }

    /// The Lease as `namespace/name`, for logs.
    pub(crate) fn lease(&self) -> String {
        format!("{}/{}", self.namespace, self.settings.name)
    }

    /// How long a live candidate takes at most to take the Lease once it is released: its
    /// retry period with client-go's jitter, and a second for the requests.
    pub(crate) fn takeover(&self) -> Duration {
        jittered(self.settings.retry_period, 1.0) + Duration::from_secs(1)
    }

    /// Whether another replica holds the Lease now (as a GET finds it).
    pub(crate) async fn taken_by_another(&self) -> bool {
        holder_other_than(
            &self.client,
            &self.namespace,
            &self.settings.name,
            &self.identity,
        )
        .await
    }

    /// Renews or takes the Lease while serving; releases it when paused; until cancelled.
    async fn keep(
        self: std::sync::Arc<Self>,
        mut serving: Pause,
        stopping: CancellationToken,
        token: CancellationToken,
    ) {
        loop {
            let holding = self.holding.load(Ordering::SeqCst);
            let candidate = !stopping.is_cancelled() && !serving.is_paused();
            if holding && serving.is_paused() && !stopping.is_cancelled() {
                tracing::info!(target: "kopf::custody", lease = %self.lease(), "paused: giving up the custody of {}", self.what);
                self.put_released(self.settings.renew_deadline).await;
                continue;
            }
            if !holding && !candidate {
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = serving.changed() => {}
                    _ = stopping.cancelled(), if !stopping.is_cancelled() => {}
                }
                continue;
            }
            let began = Instant::now();
            let deadline = began + self.settings.renew_deadline;
            let held = tokio::select! {
                _ = token.cancelled() => return,
                held = tokio::time::timeout_at(deadline, self.acquire_or_renew(candidate)) => held.unwrap_or(false),
            };
            if held {
                self.term.send_replace(Some(deadline));
                if !self.holding.swap(true, Ordering::SeqCst) {
                    tracing::info!(target: "kopf::custody", lease = %self.lease(), identity = %self.identity, "took the custody of {}", self.what);
                }
            } else if holding && self.term.borrow().is_none_or(|ends| Instant::now() >= ends) {
                self.holding.store(false, Ordering::SeqCst);
                self.term.send_replace(None);
                tracing::warn!(target: "kopf::custody", lease = %self.lease(), "failed to renew the lease: lost the custody of {}", self.what);
            }
            let delay = if self.holding.load(Ordering::SeqCst) {
                self.settings.retry_period
            } else {
                jittered(self.settings.retry_period, rand::rng().random::<f64>())
            };
            tokio::select! {
                _ = token.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
                // A pause, or a resumption: look at once.
                _ = serving.changed() => {}
            }
        }
    }

    /// One round of client-go's `tryAcquireOrRenew`: whether this replica holds the Lease
    /// after it. A replica that is no candidate (stopping) renews but never acquires.
    async fn acquire_or_renew(&self, candidate: bool) -> bool {
        let holding = self.holding.load(Ordering::SeqCst);
        let cached = lock(&self.observed)
            .as_ref()
            .map(|(lease, _)| lease.clone());
        if holding
            && let Some(lease) = cached
            && leadership::holder(&lease["spec"]) == Some(self.identity.as_str())
            && self.put_taken(lease).await.is_ok()
        {
            return true;
        }
        let name = &self.settings.name;
        let found = match self.send(http::Method::GET, Some(name), None).await {
            Ok(lease) => lease,
            Err(kube::Error::Api(status)) if status.code == 404 && candidate => {
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
                        tracing::debug!(target: "kopf::custody", lease = %self.lease(), %error, "cannot create the lease");
                        false
                    }
                };
            }
            Err(error) => {
                tracing::debug!(target: "kopf::custody", lease = %self.lease(), %error, "cannot read the lease");
                return false;
            }
        };
        let unchanged_for = self.observe(found.clone());
        let spec = &found["spec"];
        let ours = leadership::holder(spec) == Some(self.identity.as_str());
        if !(candidate || ours)
            || !leadership::may_take(
                spec,
                &self.identity,
                unchanged_for,
                self.settings.lease_duration,
            )
        {
            return false;
        }
        self.put_taken(found).await.is_ok()
    }

    /// Writes `lease` (guarded by its resourceVersion) as held by this replica, renewed now.
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
            Some((before, at)) if before["spec"] == lease["spec"] => *at,
            _ => now,
        };
        *observed = Some((lease, changed_at));
        now - changed_at
    }

    /// Ends the candidacy and releases the Lease if held (client-go's `ReleaseOnCancel`), so
    /// that a successor takes it at its next attempt; within `timeout`. Failures are logged:
    /// the Lease then expires on its own.
    pub(crate) async fn release(&self, timeout: Duration) {
        self.stop().await;
        self.put_released(timeout).await;
    }

    /// Ends the candidacy's task: nothing is renewed or acquired after it. Called at the end
    /// of every run, released or not.
    pub(crate) async fn stop(&self) {
        self.campaign.cancel(StopReason::OperatorExiting);
        self.campaign.wait().await;
    }

    async fn put_released(&self, timeout: Duration) {
        self.term.send_replace(None);
        if !self.holding.swap(false, Ordering::SeqCst) {
            return;
        }
        let Some(mut lease) = lock(&self.observed)
            .as_ref()
            .map(|(lease, _)| lease.clone())
        else {
            return;
        };
        if leadership::holder(&lease["spec"]) != Some(self.identity.as_str()) {
            return;
        }
        lease["spec"] = leadership::released(&lease["spec"], OffsetDateTime::now_utc());
        let name = self.settings.name.clone();
        let put = self.send(http::Method::PUT, Some(&name), Some(lease));
        match tokio::time::timeout(timeout, put).await {
            Ok(Ok(released)) => {
                self.observe(released);
                tracing::info!(target: "kopf::custody", lease = %self.lease(), "released the custody of {}", self.what);
            }
            Ok(Err(error)) => {
                tracing::warn!(target: "kopf::custody", lease = %self.lease(), %error, "cannot release the lease: it expires on its own");
            }
            Err(_) => {
                tracing::warn!(target: "kopf::custody", lease = %self.lease(), "the lease was not released within {timeout:?}: it expires on its own");
            }
        }
    }

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

/// Whether the Lease `namespace/name` is held now by someone other than `identity` (as a GET
/// finds it; `false` when it cannot be read).
pub(crate) async fn holder_other_than(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    identity: &str,
) -> bool {
    let path = leases::path(namespace, Some(name));
    match leases::send(client, http::Method::GET, &path, None).await {
        Ok(lease) => leadership::holder(&lease["spec"]).is_some_and(|holder| holder != identity),
        Err(_) => false,
    }
}
