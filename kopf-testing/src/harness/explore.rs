//! The explorer: a user's operator run through a scenario again and again, each time with one
//! fault at one of its writes (a crash right after it landed, a crash right before it would
//! have, an error answered after it landed) or with stale reads (time travel), and every run
//! compared with a fault-free reference. [`Explorer::mutate`] runs an Acto-style campaign
//! on a custom resource instead. What differs, or what stays stuck, is a bug the plan's name replays.
//!
//! A crash is a crash: each incarnation of the operator runs on a runtime of its own, and a
//! crash drops that runtime with every task on it at once (nothing more is written, nothing
//! is cleaned up, memory is lost); the held write is then cut and a fresh incarnation starts,
//! as a restarted pod would.
//!
//! Each run starts a server of its own: the fake one, or a real kube-apiserver with the fake
//! one in front as the proxy that injects the faults ([`Explorer::apiserver`]).
//!
//! ```no_run
//! use kopf::operator::Operator;
//! use kopf_testing::{Explorer, test_settings};
//!
//! # async fn example(registry: fn() -> kopf::registry::Registry) {
//! let exploration = Explorer::new(move || Operator::new(registry()).settings(test_settings()))
//!     .setup(kopf_testing::fixtures::KOPFEXAMPLE_CRD)
//!     .scenario(|harness| async move {
//!         harness.apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: kex}}").await;
//!         harness.wait_for("kopfexamples", "default", "kex", |o| !o["status"].is_null()).await;
//!     })
//!     .run()
//!     .await;
//! exploration.assert_ok(); // or: the first failing plan, what differed, and how to replay it
//! # }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use kopf::operator::Operator;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::apiserver::ApiServer;
use super::operator::OperatorHarness;
use super::sent::{AGENT, named_as_kopf_rs};
use kopf_fake_apiserver::{Committed, DEADLINE, FakeApiServer, Fault};

/// Resources whose objects the comparison leaves out: what the operator says, not does.
pub(super) const UNCOMPARED: [&str; 4] = [
    "events",
    "events.events.k8s.io",
    "leases.coordination.k8s.io",
    "kopfpeerings.kopf.dev",
];

/// One fault at one of the operator's writes (counted from 0 in the reference run's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Plan {
    /// No fault.
    Reference,
    /// The operator dies right after its write number N landed (before it hears back).
    CrashAfterWrite(u64),
    /// The operator dies right before its write number N would have landed.
    CrashBeforeWrite(u64),
    /// Write number N lands, but the operator is answered `500` (it believes it failed).
    FailAfterWrite(u64),
    /// Every read the operator makes at `resourceVersion=0` (a kube-rs reflector, a list
    /// with `match_any`) is served from a view 3 changes behind, as a lagging API server's
    /// cache does: time travel. kopf-rs's own reads are consistent; handlers' may not be.
    StaleReads,
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Plan::Reference => write!(f, "reference"),
            Plan::CrashAfterWrite(n) => write!(f, "crash-after-write-{n}"),
            Plan::CrashBeforeWrite(n) => write!(f, "crash-before-write-{n}"),
            Plan::FailAfterWrite(n) => write!(f, "fail-after-write-{n}"),
            Plan::StaleReads => write!(f, "stale-reads"),
        }
    }
}

/// A plan's name is not one [`Plan`] prints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not a plan: try reference, crash-after-write-N, crash-before-write-N, fail-after-write-N or stale-reads"
)]
pub struct BadPlan(String);

impl FromStr for Plan {
    type Err = BadPlan;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BadPlan(text.to_string());
        match text {
            "reference" => return Ok(Plan::Reference),
            "stale-reads" => return Ok(Plan::StaleReads),
            _ => {}
        }
        let (kind, number) = text.rsplit_once('-').ok_or_else(bad)?;
        let number: u64 = number.parse().map_err(|_| bad())?;
        match kind {
            "crash-after-write" => Ok(Plan::CrashAfterWrite(number)),
            "crash-before-write" => Ok(Plan::CrashBeforeWrite(number)),
            "fail-after-write" => Ok(Plan::FailAfterWrite(number)),
            _ => Err(bad()),
        }
    }
}

/// How one run went.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The plan run.
    pub plan: Plan,
    /// The operator's writes, in order, as `verb resource namespace/name`.
    pub writes: Vec<String>,
    /// The objects at the end, normalized (see [`Explorer::ignore`]), by
    /// `resource namespace/name` (`name*` for names generated from `generateName`).
    pub state: BTreeMap<String, Vec<Value>>,
    /// What went wrong: invariants violated and differences from the reference.
    pub problems: Vec<String>,
    /// Whether the plan's fault happened (the run had that many writes).
    pub struck: bool,
}

/// What [`Explorer::run`] found.
#[derive(Debug, Clone)]
pub struct Exploration {
    /// The fault-free run every other is compared with.
    pub reference: Outcome,
    /// The runs with a fault, in plan order.
    pub outcomes: Vec<Outcome>,
}

impl Exploration {
    /// The runs with problems, in plan order.
    pub fn failures(&self) -> Vec<&Outcome> {
        std::iter::once(&self.reference)
            .chain(&self.outcomes)
            .filter(|o| !o.problems.is_empty())
            .collect()
    }

    /// Panics with the first failing plan (the earliest write it concerns), what went wrong,
    /// and how to replay it, if any plan failed.
    pub fn assert_ok(&self) {
        let failures = self.failures();
        let Some(first) = failures.first() else {
            return;
        };
        let write = match first.plan {
            Plan::Reference | Plan::StaleReads => None,
            Plan::CrashAfterWrite(n) | Plan::CrashBeforeWrite(n) | Plan::FailAfterWrite(n) => {
                self.reference.writes.get(n as usize)
            }
        };
        panic!(
            "{} of {} plans failed; the first: {}{}\n{}\nreplay it with Explorer::only(\"{}\"); all failing: {}",
            failures.len(),
            self.outcomes.len() + 1,
            first.plan,
            write
                .map(|w| format!(" (the write: {w})"))
                .unwrap_or_default(),
            first
                .problems
                .iter()
                .map(|p| format!("  - {p}"))
                .collect::<Vec<_>>()
                .join("\n"),
            first.plan,
            failures
                .iter()
                .map(|f| f.plan.to_string())
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
}

/// The harness's helpers hold non-`Send` state across awaits, so scenarios need not be `Send`
/// (they run where [`Explorer::run`] is awaited).
type Scenario =
    Arc<dyn Fn(Arc<OperatorHarness>) -> Pin<Box<dyn Future<Output = ()>>> + Send + Sync>;

/// Runs a user's operator through a scenario under one fault per run; see the module docs.
#[derive(Clone)]
pub struct Explorer {
    operator: Arc<dyn Fn() -> Operator + Send + Sync>,
    setup: Vec<String>,
    scenario: Scenario,
    ignored: Vec<String>,
    only: Option<Plan>,
    at_once: usize,
    apiserver: ApiServer,
}

impl fmt::Debug for Explorer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Explorer")
            .field("setup", &self.setup)
            .field("ignored", &self.ignored)
            .field("only", &self.only)
            .field("apiserver", &self.apiserver)
            .finish_non_exhaustive()
    }
}

impl Explorer {
    /// An explorer of the operators `operator` makes: one per incarnation (a crash loses the
    /// old one's memory). Their client is set by the explorer.
    pub fn new(operator: impl Fn() -> Operator + Send + Sync + 'static) -> Self {
        Explorer {
            operator: Arc::new(operator),
            setup: Vec::new(),
            scenario: Arc::new(|_| Box::pin(async {})),
            ignored: Vec::new(),
            only: None,
            at_once: 2,
            apiserver: ApiServer::from_env(),
        }
    }

    /// YAML to apply before the operator starts (CRDs, namespaces, fixtures); repeatable.
    pub fn setup(mut self, yaml: impl Into<String>) -> Self {
        self.setup.push(yaml.into());
        self
    }

    /// What happens to the cluster in every run: objects applied, changed, deleted, and
    /// waits for the operator to handle them (the harness's helpers; the harness runs no
    /// operator of its own). After it, the explorer waits until the operator is quiet.
    pub fn scenario<F, Fut>(mut self, scenario: F) -> Self
    where
        F: Fn(Arc<OperatorHarness>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        self.scenario = Arc::new(move |harness| Box::pin(scenario(harness)));
        self
    }

    /// Leave this dotted path out when comparing objects (`status.create_fn.startedAt`): for
    /// values that differ from run to run by design (times, random names).
    pub fn ignore(mut self, path: impl Into<String>) -> Self {
        self.ignored.push(path.into());
        self
    }

    /// A fresh server for one run, with a journal of its changes to compare the ends by.
    pub(super) async fn start_server(&self) -> FakeApiServer {
        self.apiserver
            .start(FakeApiServer::builder().journal())
            .await
    }

    pub(super) fn setup_documents(&self) -> &[String] {
        &self.setup
    }

    pub(super) fn operator_factory(&self) -> &(dyn Fn() -> Operator + Send + Sync) {
        &*self.operator
    }

    pub(super) fn ignored_paths(&self) -> &[String] {
        &self.ignored
    }

    /// Run only this plan (and the reference), as a failure's report names it.
    ///
    /// # Panics
    ///
    /// When the name is not a plan's.
    pub fn only(mut self, plan: &str) -> Self {
        self.only = Some(plan.parse().unwrap_or_else(|e: BadPlan| panic!("{e}")));
        self
    }

    /// The API server each run starts for itself: the fake one, or a real kube-apiserver
    /// with the fake one in front as a proxy that injects the plans' faults. By default, the
    /// one [`APISERVER_VARIABLE`](super::apiserver::APISERVER_VARIABLE) names. A real server
    /// keeps its history itself, so [`Plan::StaleReads`] is not run there.
    pub fn apiserver(mut self, apiserver: ApiServer) -> Self {
        self.apiserver = apiserver;
        self
    }

    /// How many runs go at the same time (default 2); each has its own server.
    pub fn at_once(mut self, runs: usize) -> Self {
        self.at_once = runs.max(1);
        self
    }

    /// Runs the reference, then every plan: stale reads (on the fake server), and for each
    /// write of the reference, a crash after it and before it, and an error answered after
    /// it. Plans that cannot change what the operator does are pruned: a crash or an error
    /// right after posting an Event is the same as a crash right before the next write.
    ///
    /// # Panics
    ///
    /// When [`only`](Self::only) names [`Plan::StaleReads`] on a real server, which cannot
    /// lag its views on demand.
    pub async fn run(self) -> Exploration {
        if self.only == Some(Plan::StaleReads) && self.apiserver == ApiServer::Real {
            panic!(
                "the stale-reads plan needs the fake API server: a real one keeps its history itself; \
                 mark the test with ApiServer::fake_only"
            );
        }
        let mut reference = self.run_plan(Plan::Reference).await;
        reference.struck = true;
        let stale_reads = (self.apiserver == ApiServer::Fake).then_some(Plan::StaleReads);
        let plans: Vec<Plan> = match self.only {
            Some(Plan::Reference) => Vec::new(),
            Some(plan) => vec![plan],
            None => stale_reads
                .into_iter()
                .chain((0..reference.writes.len() as u64).flat_map(|n| {
                    let posting = reference.writes[n as usize].contains(" events");
                    let mut plans = vec![Plan::CrashBeforeWrite(n)];
                    if !posting {
                        plans.extend([Plan::CrashAfterWrite(n), Plan::FailAfterWrite(n)]);
                    }
                    plans
                }))
                .collect(),
        };
        let mut outcomes = Vec::new();
        for batch in plans.chunks(self.at_once) {
            let runs = batch.iter().map(|plan| self.run_plan(*plan));
            outcomes.extend(futures::future::join_all(runs).await);
        }
        for outcome in &mut outcomes {
            outcome
                .problems
                .extend(differences(&reference.state, &outcome.state));
        }
        Exploration {
            reference,
            outcomes,
        }
    }

    async fn run_plan(&self, plan: Plan) -> Outcome {
        let server = self.start_server().await;
        let harness = Arc::new(OperatorHarness::without_operator(server, None));
        for yaml in &self.setup {
            harness.apply(yaml).await;
        }
        let server = harness.server();
        let kill = match plan {
            Plan::Reference => None,
            Plan::CrashAfterWrite(n) => Some(Fault::hold_after_commit().after(n)),
            Plan::CrashBeforeWrite(n) => Some(Fault::hold_before_commit().after(n)),
            Plan::FailAfterWrite(n) => {
                server.inject(
                    Fault::commit_then_fail(500)
                        .after(n)
                        .times(1)
                        .user_agent(AGENT),
                );
                None
            }
            Plan::StaleReads => {
                server.inject(Fault::stale_view(3).user_agent(AGENT));
                None
            }
        };
        let crashes = kill.is_some();
        if let Some(kill) = kill {
            server.inject(kill.times(1).user_agent(AGENT));
        }
        let mut problems = Vec::new();
        let mut incarnation = Incarnation::launch(&*self.operator, server);
        if !incarnation.ready().await {
            problems.push("the operator did not get ready".to_string());
        }

        let scenario = (self.scenario)(harness.clone());
        let scenario = AssertUnwindSafe(scenario).catch_unwind();
        tokio::pin!(scenario);
        let mut crashed = false;
        let finished = loop {
            tokio::select! {
                finished = &mut scenario => break finished,
                held = server.wait_held(Duration::from_secs(3600)), if crashes && !crashed => {
                    if held.is_some() {
                        incarnation.crash().await;
                        server.cut_held();
                        crashed = true;
                        incarnation = Incarnation::launch(&*self.operator, server);
                    }
                }
            }
        };
        if let Err(panic) = finished {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "the scenario panicked".into());
            problems.push(format!("the scenario failed: {message}"));
        }
        server.clear_faults();
        if !server.held().is_empty() {
            // Held at the scenario's very end: crash there too, and start again.
            incarnation.crash().await;
            server.cut_held();
            crashed = true;
            incarnation = Incarnation::launch(&*self.operator, server);
        }
        if !server
            .wait_quiet_but(&UNCOMPARED, Duration::from_millis(500), DEADLINE)
            .await
        {
            problems.push("the operator did not go quiet: it kept writing".into());
        }
        if let Err(error) = incarnation.stop().await {
            problems.push(format!("the operator did not stop cleanly: {error}"));
        }
        let struck = match plan {
            Plan::Reference => true,
            Plan::FailAfterWrite(_) => server.stats().faults.contains_key("commit_then_fail"),
            Plan::StaleReads => server.stats().faults.contains_key("stale_view"),
            _ => crashed,
        };
        let journal = server.journal();
        let writes: Vec<String> = server
            .requests()
            .iter()
            .filter(|r| r.user_agent.as_deref() == Some(AGENT))
            .filter(|r| matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete"))
            .map(|r| {
                format!(
                    "{} {} {}/{}",
                    r.verb,
                    r.resource,
                    r.namespace.as_deref().unwrap_or_default(),
                    r.name.as_deref().unwrap_or_default()
                )
            })
            .collect();
        let state = final_state(&journal, &self.ignored);
        for (key, objects) in &state {
            for object in objects {
                if !object["metadata"]["deletionTimestamp"].is_null() {
                    problems.push(format!("{key} is stuck in deletion"));
                }
            }
        }
        drop(harness);
        Outcome {
            plan,
            writes,
            state,
            problems,
            struck,
        }
    }
}

/// One life of the operator, on a runtime (and thread) of its own.
pub(super) struct Incarnation {
    stop: CancellationToken,
    crash: Option<oneshot::Sender<()>>,
    ready: kopf::operator::Ready,
    done: oneshot::Receiver<Result<(), String>>,
}

/// An incarnation dropped unstopped (an explorer's future dropped midway) still stops: its
/// thread does not outlive the explorer's interest in it.
impl Drop for Incarnation {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Incarnation {
    pub(super) fn launch(
        make: &(dyn Fn() -> Operator + Send + Sync),
        server: &FakeApiServer,
    ) -> Self {
        let operator = make().client(agent_client(server));
        let ready = operator.ready();
        let stop = CancellationToken::new();
        let (crash, crashed) = oneshot::channel::<()>();
        let (finished, done) = oneshot::channel();
        let token = stop.clone();
        let spawned = std::thread::Builder::new()
            .name("kopf-explored-operator".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        let _ = finished.send(Err(format!("no runtime: {error}")));
                        return;
                    }
                };
                let ended = runtime.block_on(async move {
                    tokio::select! {
                        result = operator.run(token) => Some(result),
                        _ = crashed => None,
                    }
                });
                let outcome = match ended {
                    // A crash: every task is dropped where it stands, nothing runs on.
                    None => {
                        runtime.shutdown_background();
                        Ok(())
                    }
                    Some(result) => {
                        drop(runtime);
                        result.map_err(|e| e.to_string())
                    }
                };
                let _ = finished.send(outcome);
            });
        if let Err(error) = spawned {
            panic!("cannot start a thread for the operator: {error}");
        }
        Incarnation {
            stop,
            crash: Some(crash),
            ready,
            done,
        }
    }

    pub(super) async fn ready(&self) -> bool {
        tokio::time::timeout(DEADLINE, self.ready.wait())
            .await
            .is_ok()
    }

    /// Drops the operator where it stands.
    async fn crash(&mut self) {
        if let Some(crash) = self.crash.take() {
            let _ = crash.send(());
        }
        let _ = (&mut self.done).await;
    }

    /// Stops the operator as SIGTERM would, and says how it went.
    pub(super) async fn stop(mut self) -> Result<(), String> {
        self.stop.cancel();
        let result = tokio::time::timeout(DEADLINE, &mut self.done).await;
        match result {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err("the operator's thread ended without a word".into()),
            Err(_) => Err(format!("the operator did not stop within {DEADLINE:?}")),
        }
    }
}

/// A client to the server that names itself as kopf-rs does.
fn agent_client(server: &FakeApiServer) -> kube::Client {
    let mut config = server.config();
    named_as_kopf_rs(&mut config);
    kube::Client::try_from(config).expect("a client of the fake server always builds")
}

/// The objects at the end of the journal, normalized for comparison.
pub(super) fn final_state(
    journal: &[Committed],
    ignored: &[String],
) -> BTreeMap<String, Vec<Value>> {
    let mut latest: BTreeMap<(String, String, String), &Value> = BTreeMap::new();
    for change in journal {
        if UNCOMPARED.contains(&change.resource.as_str()) {
            continue;
        }
        let meta = &change.object["metadata"];
        let key = (
            change.resource.clone(),
            meta["namespace"].as_str().unwrap_or_default().to_string(),
            meta["name"].as_str().unwrap_or_default().to_string(),
        );
        if change.event == "DELETED" {
            latest.remove(&key);
        } else {
            latest.insert(key, &change.object);
        }
    }
    let mut state: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for ((resource, namespace, name), object) in latest {
        let mut object = object.clone();
        let generated = object["metadata"]["generateName"]
            .as_str()
            .map(String::from);
        let shown = match &generated {
            Some(prefix) => format!("{prefix}*"),
            None => name,
        };
        normalize(&mut object, ignored);
        if generated.is_some() {
            object["metadata"]["name"] = Value::String(shown.clone());
        }
        state
            .entry(format!("{resource} {namespace}/{shown}"))
            .or_default()
            .push(object);
    }
    for objects in state.values_mut() {
        objects.sort_by_key(|o| o.to_string());
    }
    state
}

/// Drops what differs between runs by nature: identities, versions, times, managers, and the
/// certificates each server (and each webhook server) issues itself.
fn normalize(object: &mut Value, ignored: &[String]) {
    mask_run_values(object);
    if let Some(meta) = object["metadata"].as_object_mut() {
        for key in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
            "generation",
            "selfLink",
        ] {
            meta.remove(key);
        }
        if let Some(owners) = meta
            .get_mut("ownerReferences")
            .and_then(Value::as_array_mut)
        {
            for owner in owners {
                if let Some(owner) = owner.as_object_mut() {
                    owner.remove("uid");
                }
            }
        }
    }
    for path in ignored {
        let mut parts: Vec<&str> = path.split('.').collect();
        let Some(last) = parts.pop() else { continue };
        let parent = parts
            .iter()
            .try_fold(&mut *object, |value, key| value.get_mut(*key));
        if let Some(Value::Object(parent)) = parent {
            parent.remove(last);
        }
    }
}

/// Where two values differ: the dotted paths, with both values (`(absent)` for none).
fn differing_paths(
    expected: &Value,
    actual: &Value,
    path: String,
    found: &mut Vec<(String, String, String)>,
) {
    let at = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    match (expected, actual) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let none = Value::Null;
                let (x, y) = (a.get(key).unwrap_or(&none), b.get(key).unwrap_or(&none));
                differing_paths(x, y, at(key), found);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differing_paths(x, y, at(&i.to_string()), found);
            }
        }
        _ if expected != actual => {
            let shown = |v: &Value| {
                if v.is_null() {
                    "(absent)".to_string()
                } else {
                    v.to_string()
                }
            };
            found.push((path, shown(expected), shown(actual)));
        }
        _ => {}
    }
}

/// Whether a string is a time as Kubernetes writes them (RFC 3339): such values differ from
/// run to run by nature.
fn is_time(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() >= 20
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes[10] == b'T'
        && bytes[13] == b':'
        && bytes[16] == b':'
        && bytes[..4].iter().all(u8::is_ascii_digit)
}

/// Whether a string holds a certificate, as PEM (a CA bundle in a ConfigMap) or as base64 of
/// PEM (a webhook's `caBundle`): each API server and each webhook server makes its own, so
/// such values differ from run to run by nature.
fn is_certificate(text: &str) -> bool {
    const PEM: &str = "-----BEGIN CERTIFICATE-----";
    // "-----BEGIN CERTIFICATE-----" in base64, as it starts a caBundle.
    const BASE64_PEM: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t";
    text.contains(PEM) || text.starts_with(BASE64_PEM)
}

/// Replaces times and certificates with placeholders, everywhere in a value.
fn mask_run_values(value: &mut Value) {
    match value {
        Value::String(text) if is_time(text) => *text = "<time>".into(),
        Value::String(text) if is_certificate(text) => *text = "<certificate>".into(),
        Value::Object(map) => map.values_mut().for_each(mask_run_values),
        Value::Array(items) => items.iter_mut().for_each(mask_run_values),
        _ => {}
    }
}

/// What differs between the reference's objects and a run's.
pub(super) fn differences(
    reference: &BTreeMap<String, Vec<Value>>,
    state: &BTreeMap<String, Vec<Value>>,
) -> Vec<String> {
    let mut found = Vec::new();
    let keys: std::collections::BTreeSet<&String> = reference.keys().chain(state.keys()).collect();
    let none = Vec::new();
    for key in keys {
        let (expected, actual) = (
            reference.get(key).unwrap_or(&none),
            state.get(key).unwrap_or(&none),
        );
        if expected == actual {
            continue;
        }
        if expected.len() != actual.len() {
            found.push(format!(
                "{key}: {} object(s), the reference has {}",
                actual.len(),
                expected.len()
            ));
        } else {
            for (expected, actual) in expected.iter().zip(actual) {
                let mut paths = Vec::new();
                differing_paths(expected, actual, String::new(), &mut paths);
                for (path, expected, actual) in paths.into_iter().take(5) {
                    found.push(format!(
                        "{key} differs from the reference at {path}: {actual} instead of {expected}"
                    ));
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each real API server issues its own CA, and publishes it in every namespace: runs on
    /// two servers must not differ by it (they did, and every plan failed on a real server).
    #[test]
    fn the_certificates_of_each_run_are_not_compared() {
        let bundle = |ca: &str| {
            serde_json::json!({
                "metadata": {"name": "kube-root-ca.crt", "namespace": "default"},
                "data": {"ca.crt": format!("-----BEGIN CERTIFICATE-----\n{ca}\n-----END CERTIFICATE-----\n")},
                "webhooks": [{"clientConfig": {"caBundle": format!("LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t{ca}")}}],
            })
        };
        let (mut first, mut second) = (bundle("MIIBcTCCARag"), bundle("MIIBcTCCARbh"));
        normalize(&mut first, &[]);
        normalize(&mut second, &[]);
        assert_eq!(first, second);
        assert_eq!(first["data"]["ca.crt"], "<certificate>");

        let (mut setting, mut other) = (
            serde_json::json!({"data": {"value": "a certificate"}}),
            serde_json::json!({"data": {"value": "b certificate"}}),
        );
        normalize(&mut setting, &[]);
        normalize(&mut other, &[]);
        assert_ne!(setting, other, "only certificates are masked");
    }
}
