//! The scenarios: each runs one operator (or the ceiling client) against a fresh fake API
//! server and returns what it measured, as named figures.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use serde_json::{Value, json};

use crate::cluster::{self, Cluster, Verbs};
use crate::observe::{Objects, Observer};
use crate::operators::{Kind, Programs};
use crate::process::Process;

/// Longer than any wait should take (at the sizes of scenarios 1 to 7).
pub(crate) const DEADLINE: Duration = Duration::from_secs(300);

/// How long an operator may take to exit after SIGTERM before it is killed.
const EXIT_DEADLINE: Duration = Duration::from_secs(60);

/// Longer than the idle timeout after which kopf-rs and Kopf end an object's worker (5 s by
/// default in both): idle memory is measured after it.
const IDLE_WORKERS_GONE: Duration = Duration::from_secs(7);

/// Named figures of one run, in the order they are reported.
pub(crate) type Sample = Vec<(String, f64)>;

/// The sizes of the scenarios.
#[derive(Debug, Clone)]
pub(crate) struct Sizes {
    /// Objects of the create burst, shutdown, deletion and startup scenarios.
    pub(crate) objects: usize,
    /// Objects of the idle scenario (it also runs with half as many).
    pub(crate) idle_objects: usize,
    /// Objects that the steady updates go to.
    pub(crate) update_objects: usize,
    /// Updates per second.
    pub(crate) update_rate: u32,
    /// For how long the updates go on, in seconds.
    pub(crate) update_seconds: u32,
    /// Objects of the instruction-count run (0: none).
    pub(crate) instruction_objects: usize,
    /// Objects of the scale scenarios (9 and 10).
    pub(crate) scale_objects: usize,
}

/// Unix seconds now.
fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

fn unix(time: SystemTime) -> f64 {
    time.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// Whether `count` objects carry the mark of `handler` from `run`.
pub(crate) fn marked(
    count: usize,
    handler: &'static str,
    run: &'static str,
) -> impl Fn(&Objects) -> bool {
    move |objects| objects.len() >= count && objects.marked(handler, run) >= count
}

/// The marks (unix seconds) of `handler` from `run`.
fn marks(observer: &Observer, handler: &str, run: &str) -> Vec<f64> {
    observer.with(|objects| {
        objects
            .values()
            .filter(|seen| seen.status[handler]["run"] == run)
            .filter_map(|seen| seen.status[handler]["at"].as_f64())
            .collect()
    })
}

/// Waits until the operator watches KopfExamples (more watches than the runner's own).
async fn ready(
    cluster: &Cluster,
    observer: Option<&Observer>,
    operator: &Process,
    deadline: Duration,
) -> Result<(), String> {
    let until = Instant::now() + deadline;
    loop {
        operator.check_running()?;
        cluster.check_running()?;
        // The runner's watches: those it started, and the one it keeps open.
        let own = observer.map_or((0, 0), |o| (o.own_requests().1, 1));
        if cluster.watching_kopfexamples(own).await? {
            return Ok(());
        }
        if Instant::now() > until {
            return Err(format!(
                "{} did not watch KopfExamples within {deadline:?}; its last output:\n{}",
                operator.label,
                operator.tail()
            ));
        }
        tokio::time::sleep(cluster.poll_pause()).await;
    }
}

/// The request counters once no write has come for a second (or after 15 s).
async fn settled_verbs(cluster: &Cluster) -> Result<Verbs, String> {
    let until = Instant::now() + Duration::from_secs(15);
    let mut last = cluster.verbs().await?;
    let mut quiet = 0;
    while quiet < 4 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let verbs = cluster.verbs().await?;
        if writes(&verbs) == writes(&last) {
            quiet += 1;
        } else {
            quiet = 0;
        }
        last = verbs;
    }
    Ok(last)
}

/// API writes among the requests.
fn writes(verbs: &Verbs) -> f64 {
    ["create", "update", "patch", "delete"]
        .iter()
        .map(|v| verbs.get(*v).copied().unwrap_or(0.0))
        .sum()
}

/// The operator's requests: `after - before - own` (the runner's), per verb.
fn operator_verbs(before: &Verbs, after: &Verbs, own: &[(&str, f64)]) -> Verbs {
    let mut verbs = Verbs::new();
    for (verb, count) in after {
        let mut count = count - before.get(verb).copied().unwrap_or(0.0);
        for (own_verb, own_count) in own {
            if own_verb == verb {
                count -= own_count;
            }
        }
        if count > 0.0 {
            verbs.insert(verb.clone(), count);
        }
    }
    verbs
}

/// Figures about the operator's requests for `per` objects (or updates).
fn request_figures(sample: &mut Sample, verbs: &Verbs, per: f64, unit: &str) {
    let total: f64 = verbs.values().sum();
    sample.push((format!("API requests per {unit}"), total / per));
    sample.push((format!("API writes per {unit}"), writes(verbs) / per));
    for verb in [
        "get", "list", "watch", "create", "update", "patch", "delete", "other",
    ] {
        if let Some(count) = verbs.get(verb) {
            sample.push((format!("… {verb} per {unit}"), count / per));
        }
    }
}

/// A fresh fake API server with `objects` objects (with `finalizer`, if any) already in it.
async fn populated(
    programs: &Programs,
    objects: usize,
    finalizer: Option<&str>,
) -> Result<Cluster, String> {
    let cluster = Cluster::start(programs).await?;
    cluster
        .create_objects(objects, finalizer, |_| async { Ok(()) })
        .await?;
    Ok(cluster)
}

/// Starts the operator of `kind` in `mode` and waits until it watches; none for the ceiling
/// client, which does the operator's job itself.
async fn start_operator(
    programs: &Programs,
    kind: Kind,
    cluster: &Cluster,
    observer: &Observer,
    mode: &str,
    deadline: Duration,
) -> Result<Option<Process>, String> {
    if kind == Kind::Ceiling {
        return Ok(None);
    }
    let operator = programs.start(kind, &cluster.kubeconfig, mode, "1", None)?;
    ready(cluster, Some(observer), &operator, deadline).await?;
    Ok(Some(operator))
}

/// Stops the operator (if any) and then the fake API server.
fn stop(operator: Option<Process>, cluster: Cluster) {
    if let Some(operator) = operator {
        operator.terminate(EXIT_DEADLINE);
    }
    cluster.stop();
}

/// Waits until every one of `objects` carries the create handler's mark of run 1.
async fn all_created(
    observer: &Observer,
    objects: usize,
    deadline: Duration,
) -> Result<Instant, String> {
    observer
        .wait(
            "every create handler's status",
            deadline,
            marked(objects, "create_fn", "1"),
        )
        .await
}

/// Adds to a failed wait's error why the operator stopped, if it did.
fn blame(operator: &Process) -> impl Fn(String) -> String + '_ {
    |e| {
        format!(
            "{e}; {}",
            operator.check_running().err().unwrap_or_default()
        )
    }
}

/// A measured stretch: what it watches, and the counters at its start.
struct Stretch<'a> {
    cluster: &'a Cluster,
    observer: &'a Observer,
    operator: Option<&'a Process>,
    verbs: Verbs,
    own: (u64, u64),
    cpu: f64,
    server_cpu: f64,
    start: Instant,
}

/// What was spent during a measured stretch.
struct Spent {
    /// The operator's requests per verb (the runner's own left out).
    verbs: Verbs,
    /// Operator CPU seconds (0 without an operator).
    cpu: f64,
    /// Fake API server CPU seconds.
    server_cpu: f64,
}

impl<'a> Stretch<'a> {
    /// Starts a stretch now, with `verbs` the request counters just read.
    fn start(
        verbs: Verbs,
        cluster: &'a Cluster,
        observer: &'a Observer,
        operator: Option<&'a Process>,
    ) -> Stretch<'a> {
        Stretch {
            cluster,
            observer,
            operator,
            verbs,
            own: observer.own_requests(),
            cpu: operator.map_or(0.0, Process::cpu),
            server_cpu: cluster.server_cpu(),
            start: Instant::now(),
        }
    }

    /// Seconds from the start until a wait was `done`; the operator's error first if it has
    /// stopped meanwhile.
    fn wall(&self, done: Result<Instant, String>) -> Result<f64, String> {
        if let Some(operator) = self.operator {
            operator.check_running()?;
        }
        Ok(done?.duration_since(self.start).as_secs_f64())
    }

    /// What was spent since the start, once the writes have settled; `own` is the runner's own
    /// requests besides its lists and watches (a verb and how many).
    async fn spent(self, own: (&str, f64)) -> Result<Spent, String> {
        let after = settled_verbs(self.cluster).await?;
        let own_after = self.observer.own_requests();
        let cpu = self.operator.map_or(0.0, |o| o.cpu() - self.cpu);
        let server_cpu = self.cluster.server_cpu() - self.server_cpu;
        let own = [
            own,
            ("list", (own_after.0 - self.own.0) as f64),
            ("watch", (own_after.1 - self.own.1) as f64),
        ];
        Ok(Spent {
            verbs: operator_verbs(&self.verbs, &after, &own),
            cpu,
            server_cpu,
        })
    }
}

/// Figures about the operator's CPU for `per` objects (or updates).
fn cpu_figures(sample: &mut Sample, spent: &Spent, per: f64, unit: &str) {
    let cpu = spent.cpu;
    sample.push(("operator CPU, s".into(), cpu));
    sample.push((format!("operator CPU per {unit}, ms"), cpu * 1e3 / per));
    sample.push((
        "operator CPU per API write, ms".into(),
        cpu * 1e3 / writes(&spent.verbs).max(1.0),
    ));
}

/// Scenario 1: N objects created at once; each needs a create handler's status write.
pub(crate) async fn create_burst(
    programs: &Programs,
    kind: Kind,
    objects: usize,
) -> Result<Sample, String> {
    let (sample, handled) = create_burst_within(programs, kind, objects, DEADLINE).await?;
    handled.cluster.stop();
    Ok(sample)
}

/// A fake API server whose objects have all been handled by an operator that has exited
/// since, and the runner's view of them.
pub(crate) struct Handled {
    pub(crate) cluster: Cluster,
    pub(crate) observer: Observer,
}

/// Scenario 1's burst, each wait given `deadline`; its figures, and the server with the
/// handled objects (the operator stopped).
pub(crate) async fn create_burst_within(
    programs: &Programs,
    kind: Kind,
    objects: usize,
    deadline: Duration,
) -> Result<(Sample, Handled), String> {
    let cluster = Cluster::start(programs).await?;
    let observer = Observer::start(cluster.client.client().clone()).await?;
    let operator = start_operator(programs, kind, &cluster, &observer, "create", deadline).await?;
    let before = cluster.verbs().await?;
    let stretch = Stretch::start(before, &cluster, &observer, operator.as_ref());
    if kind == Kind::Ceiling {
        let client = cluster.client.clone();
        cluster
            .create_objects(objects, None, |i| {
                let client = client.clone();
                async move {
                    let status = json!({"status": {"create_fn": {"at": now(), "run": "1"}}});
                    cluster::send(
                        &client,
                        "PATCH",
                        &format!("{}/status", cluster::path(i)),
                        &status,
                    )
                    .await
                    .map(drop)
                }
            })
            .await?;
    } else {
        cluster
            .create_objects(objects, None, |_| async { Ok(()) })
            .await?;
    }
    let done = all_created(&observer, objects, deadline).await;
    let wall = stretch.wall(done)?;
    let spent = stretch.spent(("create", objects as f64)).await?;
    let (_, peak) = operator.as_ref().map_or((0, 0), Process::memory);
    if let Some(operator) = operator {
        operator.terminate(EXIT_DEADLINE);
    }
    let n = objects as f64;
    let mut sample: Sample = vec![
        ("wall time until the last status, s".into(), wall),
        ("objects per second".into(), n / wall),
        ("API writes per second".into(), writes(&spent.verbs) / wall),
    ];
    if kind != Kind::Ceiling {
        cpu_figures(&mut sample, &spent, n, "object");
        sample.push(("operator peak RSS, MiB".into(), peak as f64 / 1024.0));
    }
    sample.push(("server CPU, s".into(), spent.server_cpu));
    request_figures(&mut sample, &spent.verbs, n, "object");
    Ok((sample, Handled { cluster, observer }))
}

/// A small deterministic generator for picking objects.
pub(crate) struct XorShift(pub(crate) u64);

impl XorShift {
    /// The next number below `n`.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Percentile `p` (0..=100) of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0 * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Scenario 2: M updates per second to random objects for T seconds.
pub(crate) async fn steady_updates(
    programs: &Programs,
    kind: Kind,
    sizes: &Sizes,
    run: usize,
) -> Result<Sample, String> {
    let objects = sizes.update_objects;
    let cluster = populated(programs, objects, None).await?;
    let observer = Observer::start(cluster.client.client().clone()).await?;
    let operator = programs.start(kind, &cluster.kubeconfig, "update", "1", None)?;
    ready(&cluster, Some(&observer), &operator, DEADLINE).await?;
    all_created(&observer, objects, DEADLINE)
        .await
        .map_err(blame(&operator))?;
    let before = settled_verbs(&cluster).await?;
    let stretch = Stretch::start(before, &cluster, &observer, Some(&operator));
    let total = (sizes.update_rate * sizes.update_seconds) as usize;
    let mut written: HashMap<u64, f64> = HashMap::new();
    let mut last_seq: HashMap<usize, u64> = HashMap::new();
    let mut random = XorShift(0x9E37_79B9_7F4A_7C15 ^ (run as u64 + 1));
    let mut interval =
        tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(sizes.update_rate)));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut pending = FuturesUnordered::new();
    let mut seq = 0;
    while seq < total as u64 || !pending.is_empty() {
        tokio::select! {
            _ = interval.tick(), if seq < total as u64 => {
                seq += 1;
                let i = random.below(objects);
                last_seq.insert(i, seq);
                written.insert(seq, now());
                let client = cluster.client.clone();
                pending.push(async move {
                    cluster::send(&client, "PATCH", &cluster::path(i), &json!({"spec": {"seq": seq}})).await
                });
            }
            Some(result) = pending.next() => { result?; }
        }
    }
    let wanted: Vec<(String, u64)> = last_seq
        .iter()
        .map(|(i, seq)| (format!("{}/{}", namespace_of(*i), cluster::name(*i)), *seq))
        .collect();
    observer
        .wait(
            "the last update of every object",
            Duration::from_secs(120),
            |seen| {
                wanted.iter().all(|(name, seq)| {
                    seen.get(name)
                        .and_then(|s| s.status["update_fn"]["seq"].as_u64())
                        .is_some_and(|handled| handled >= *seq)
                })
            },
        )
        .await
        .map_err(blame(&operator))?;
    let n = total as f64;
    let spent = stretch.spent(("patch", n)).await?;
    stop(Some(operator), cluster);
    let mut latencies: Vec<f64> = observer
        .updates()
        .iter()
        .filter_map(|mark| written.get(&mark.seq).map(|at| (mark.at - at) * 1e3))
        .collect();
    latencies.sort_by(f64::total_cmp);
    let mut sample: Sample = vec![
        (
            "update → handler latency p50, ms".into(),
            percentile(&latencies, 50.0),
        ),
        (
            "update → handler latency p99, ms".into(),
            percentile(&latencies, 99.0),
        ),
        (
            "updates seen by a handler, %".into(),
            latencies.len() as f64 * 100.0 / n,
        ),
    ];
    cpu_figures(&mut sample, &spent, n, "update");
    request_figures(&mut sample, &spent.verbs, n, "update");
    Ok(sample)
}

fn namespace_of(i: usize) -> String {
    format!("bench-{}", i % cluster::NAMESPACES)
}

/// Scenario 3, one size: the operator's resident memory (MiB) once it has seen `objects` and
/// nothing is left to do, each wait given `deadline`.
async fn idle_memory(
    programs: &Programs,
    kind: Kind,
    objects: usize,
    deadline: Duration,
) -> Result<f64, String> {
    let cluster = populated(programs, objects, None).await?;
    let operator = programs.start(kind, &cluster.kubeconfig, "idle", "1", None)?;
    ready(&cluster, None, &operator, deadline).await?;
    // Settled: past the per-object workers' idle timeout, and less than 10 ms of CPU in each
    // of two consecutive seconds.
    let until = Instant::now() + deadline;
    let earliest = Instant::now() + IDLE_WORKERS_GONE;
    let (mut quiet, mut cpu) = (0, operator.cpu());
    while quiet < 2 || Instant::now() < earliest {
        tokio::time::sleep(Duration::from_secs(1)).await;
        operator.check_running()?;
        let now = operator.cpu();
        quiet = if now - cpu < 0.01 { quiet + 1 } else { 0 };
        cpu = now;
        if Instant::now() > until {
            return Err(format!(
                "{} did not settle within {deadline:?}",
                operator.label
            ));
        }
    }
    let (rss, _) = operator.memory();
    stop(Some(operator), cluster);
    Ok(rss as f64 / 1024.0)
}

/// Scenario 3: idle memory at two sizes, and the memory per object from their difference;
/// each wait given `deadline`.
pub(crate) async fn idle_scale(
    programs: &Programs,
    kind: Kind,
    objects: usize,
    deadline: Duration,
) -> Result<Sample, String> {
    let small = objects / 2;
    let rss_small = idle_memory(programs, kind, small, deadline).await?;
    let rss_large = idle_memory(programs, kind, objects, deadline).await?;
    Ok(vec![
        (format!("RSS with {small} objects, MiB"), rss_small),
        (format!("RSS with {objects} objects, MiB"), rss_large),
        (
            "memory per object, KiB".into(),
            (rss_large - rss_small) * 1024.0 / (objects - small) as f64,
        ),
    ])
}

/// One shutdown: SIGTERM to exit once every object is handled (mode `create`), or once every
/// busy handler or daemon runs (`busy`, `daemon`). Its time (`None` if the operator had to be
/// killed), the connections it left open, and its resident memory (MiB) at the signal.
async fn shutdown_once(
    programs: &Programs,
    kind: Kind,
    objects: usize,
    mode: &str,
) -> Result<(Option<f64>, f64, f64), String> {
    let cluster = populated(programs, objects, None).await?;
    let observer = Observer::start(cluster.client.client().clone()).await?;
    let baseline = cluster.open_connections().await?;
    let operator = programs.start(kind, &cluster.kubeconfig, mode, "1", None)?;
    if mode == "create" {
        all_created(&observer, objects, DEADLINE)
            .await
            .map_err(blame(&operator))?;
    } else {
        let what = format!("{mode} handlers");
        all_started(&operator, &cluster, objects, &what, DEADLINE).await?;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (resident, _) = operator.memory();
    let exit = operator
        .terminate(EXIT_DEADLINE)
        .map(|d| d.as_secs_f64() * 1e3);
    let until = Instant::now() + Duration::from_secs(1);
    let mut open = cluster.open_connections().await?;
    while open > baseline && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
        open = cluster.open_connections().await?;
    }
    drop(observer);
    cluster.stop();
    Ok((
        exit,
        open.saturating_sub(baseline) as f64,
        resident as f64 / 1024.0,
    ))
}

/// Waits until `count` of the operator's busy handlers or daemons have said they started.
async fn all_started(
    operator: &Process,
    cluster: &Cluster,
    count: usize,
    what: &str,
    deadline: Duration,
) -> Result<(), String> {
    let until = Instant::now() + deadline;
    while operator.started() < count {
        operator.check_running()?;
        cluster.check_running()?;
        if Instant::now() > until {
            return Err(format!(
                "only {} of {count} {what} of {} started",
                operator.started(),
                operator.label
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Scenario 4: SIGTERM to exit, idle, with a handler in flight per object, and with a daemon
/// per object.
pub(crate) async fn shutdown(
    programs: &Programs,
    kind: Kind,
    objects: usize,
) -> Result<Sample, String> {
    let deadline = EXIT_DEADLINE.as_secs_f64() * 1e3;
    let mut sample = Sample::new();
    let mut killed = 0.0;
    let mut left = Vec::new();
    let mut resident = Vec::new();
    for (mode, what) in [
        ("create", "idle".to_string()),
        ("busy", format!("{objects} handlers in flight")),
        ("daemon", format!("{objects} daemons")),
    ] {
        let (exit, open, memory) = shutdown_once(programs, kind, objects, mode).await?;
        if exit.is_none() {
            killed += 1.0;
        }
        sample.push((
            format!("SIGTERM → exit, {what}, ms"),
            exit.unwrap_or(deadline),
        ));
        left.push((format!("connections left open after exit, {what}"), open));
        resident.push((
            format!("resident memory at the signal, {what}, MiB"),
            memory,
        ));
    }
    sample.push((
        format!("killed after {} s (of 3 exits)", EXIT_DEADLINE.as_secs()),
        killed,
    ));
    sample.extend(left);
    sample.extend(resident);
    Ok(sample)
}

/// Scenario 5: N objects with a delete handler (a finalizer) deleted at once.
pub(crate) async fn deletion(
    programs: &Programs,
    kind: Kind,
    objects: usize,
) -> Result<Sample, String> {
    let finalizer = (kind == Kind::Ceiling).then_some("bench.kopf.dev/cleanup");
    let cluster = populated(programs, objects, finalizer).await?;
    let observer = Observer::start(cluster.client.client().clone()).await?;
    let operator = start_operator(programs, kind, &cluster, &observer, "delete", DEADLINE).await?;
    if let Some(operator) = &operator {
        let handled = marked(objects, "create_fn", "1");
        observer
            .wait("every object handled, with a finalizer", DEADLINE, |seen| {
                handled(seen) && seen.values().all(|s| s.finalizers > 0)
            })
            .await
            .map_err(blame(operator))?;
    }
    let before = settled_verbs(&cluster).await?;
    let stretch = Stretch::start(before, &cluster, &observer, operator.as_ref());
    let client = cluster.client.clone();
    cluster
        .delete_objects(objects, |i| {
            let client = client.clone();
            async move {
                if kind == Kind::Ceiling {
                    let patch = json!({"metadata": {"finalizers": Value::Null}});
                    cluster::send(&client, "PATCH", &cluster::path(i), &patch).await?;
                }
                Ok(())
            }
        })
        .await?;
    let done = observer
        .wait("every object gone", DEADLINE, |seen| seen.is_empty())
        .await;
    let wall = stretch.wall(done)?;
    let spent = stretch.spent(("delete", objects as f64)).await?;
    stop(operator, cluster);
    let n = objects as f64;
    let mut sample: Sample = vec![
        ("wall time until all are gone, s".into(), wall),
        ("objects per second".into(), n / wall),
    ];
    if kind != Kind::Ceiling {
        cpu_figures(&mut sample, &spent, n, "object");
    }
    sample.push(("server CPU, s".into(), spent.server_cpu));
    request_figures(&mut sample, &spent.verbs, n, "object");
    Ok(sample)
}

/// Scenario 6: process start to the first (and last) handler call with N objects present,
/// fresh (to be created) and then already handled (to be resumed by a new process).
pub(crate) async fn startup(
    programs: &Programs,
    kind: Kind,
    objects: usize,
) -> Result<Sample, String> {
    let cluster = populated(programs, objects, None).await?;
    let observer = Observer::start(cluster.client.client().clone()).await?;
    let handled = Handled { cluster, observer };
    let mut sample = Sample::new();
    for (run, handler, what) in [("1", "create_fn", "fresh"), ("2", "resume_fn", "resumed")] {
        let (first, last, _) =
            handlers_after_start(programs, kind, &handled, (run, handler), DEADLINE).await?;
        sample.push((format!("start → first handler, {what}, s"), first));
        sample.push((format!("start → last handler, {what}, s"), last));
    }
    handled.cluster.stop();
    Ok(sample)
}

/// Starts an operator in the `startup` mode with `run`'s marks and waits (up to `deadline`)
/// until every object carries `handler`'s mark of it; seconds from the process's start to the
/// first and to the last of those handler calls, and the process's peak RSS in MiB. The
/// operator is stopped after.
pub(crate) async fn handlers_after_start(
    programs: &Programs,
    kind: Kind,
    handled: &Handled,
    (run, handler): (&'static str, &'static str),
    deadline: Duration,
) -> Result<(f64, f64, f64), String> {
    let Handled { cluster, observer } = handled;
    let objects = observer.with(Objects::len);
    let operator = programs.start(kind, &cluster.kubeconfig, "startup", run, None)?;
    let started = unix(operator.spawned_at);
    let done = observer
        .wait(
            &format!("every {handler} of run {run}"),
            deadline,
            marked(objects, handler, run),
        )
        .await
        .map_err(blame(&operator));
    let (_, peak) = operator.memory();
    operator.terminate(EXIT_DEADLINE);
    done?;
    let times = marks(observer, handler, run);
    let first = times.iter().copied().fold(f64::INFINITY, f64::min);
    let last = times.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Ok((first - started, last - started, peak as f64 / 1024.0))
}

/// Instruction counts (callgrind) of a small create burst: the operator's instructions from
/// the moment it watches until every object is handled and its writes have settled; and, but
/// for Python Kopf (whose start of a thousand daemons under valgrind takes too long), of the
/// exits with a busy handler and with a daemon per object for `daemons` objects.
pub(crate) async fn instructions(
    programs: &Programs,
    kind: Kind,
    objects: usize,
    daemons: usize,
    dir: &Path,
) -> Result<Sample, String> {
    let out = dir.join(format!("callgrind.{}.out", label(kind)));
    let valgrind = callgrind_into(&out);
    let cluster = Cluster::start(programs).await?;
    let observer = Observer::start(cluster.client.client().clone()).await?;
    let operator = programs.start(kind, &cluster.kubeconfig, "create", "1", Some(&valgrind))?;
    ready(
        &cluster,
        Some(&observer),
        &operator,
        Duration::from_secs(600),
    )
    .await?;
    settle(&operator).await?;
    callgrind_control(&["-z", &operator.pid().to_string()])?;
    let before = cluster.verbs().await?;
    let stretch = Stretch::start(before, &cluster, &observer, Some(&operator));
    cluster
        .create_objects(objects, None, |_| async { Ok(()) })
        .await?;
    all_created(&observer, objects, Duration::from_secs(900))
        .await
        .map_err(blame(&operator))?;
    let spent = stretch.spent(("create", objects as f64)).await?;
    callgrind_control(&["-d", &operator.pid().to_string()])?;
    let total = dumped_instructions(&out)?;
    operator.terminate(Duration::from_secs(120));
    cluster.stop();
    let mut sample = vec![
        (
            "instructions per object, millions".into(),
            total / objects as f64 / 1e6,
        ),
        (
            "instructions per API write, millions".into(),
            total / writes(&spent.verbs).max(1.0) / 1e6,
        ),
    ];
    if kind != Kind::Kopf && daemons > 0 {
        for (mode, what) in [("busy", "handlers in flight"), ("daemon", "daemons")] {
            let exit = exit_instructions(programs, kind, mode, daemons, dir).await?;
            sample.push((
                format!("instructions from SIGTERM to exit, {daemons} {what}, millions"),
                exit / 1e6,
            ));
        }
    }
    Ok(sample)
}

/// The operator's instructions from SIGTERM to its end, once each of `objects` objects has
/// its busy handler or its daemon running (`mode`: scenario 4's exits, counted: their wall
/// time spreads with the machine's noise as much as a change moves it, the count does not).
async fn exit_instructions(
    programs: &Programs,
    kind: Kind,
    mode: &str,
    objects: usize,
    dir: &Path,
) -> Result<f64, String> {
    let out = dir.join(format!("callgrind.{}.exit-{mode}.out", label(kind)));
    // Dumps left by an earlier invocation (in `OPERATOR_BENCH_DUMPS`) must not pass for this
    // one's.
    for dump in thread_dumps(&out)? {
        let _ = std::fs::remove_file(dump);
    }
    let mut valgrind = callgrind_into(&out);
    // A dump per thread, each naming its functions in full: the freeing thread's is told by
    // its function's name (see below).
    valgrind.extend([
        "--separate-threads=yes".into(),
        "--compress-strings=no".into(),
    ]);
    let cluster = populated(programs, objects, None).await?;
    let operator = programs.start(kind, &cluster.kubeconfig, mode, "1", Some(&valgrind))?;
    let what = format!("{mode} handlers (under valgrind)");
    all_started(
        &operator,
        &cluster,
        objects,
        &what,
        Duration::from_secs(600),
    )
    .await?;
    settle(&operator).await?;
    callgrind_control(&["-z", &operator.pid().to_string()])?;
    // The dump at the exit holds what ran since the counters were zeroed: the exit alone.
    let exited = operator.terminate(Duration::from_secs(300));
    cluster.stop();
    if exited.is_none() {
        return Err(format!("{} did not exit under valgrind", kind.title()));
    }
    // kopf-rs's freeing thread is left out: it waits 200 ms before it frees, so an exit ends
    // before it runs, but not an exit slowed down by valgrind.
    let mut total = 0.0;
    for dump in thread_dumps(&out)? {
        let text =
            std::fs::read_to_string(&dump).map_err(|e| format!("{}: {e}", dump.display()))?;
        if !text.contains("kopf::helpers::freeing::free_apart::{{closure}}") {
            total += instructions_in(&dump)?;
        }
    }
    Ok(total)
}

/// The per-thread dumps of `out` (`out-01`, `out-02`, ...: `--separate-threads=yes`).
fn thread_dumps(out: &Path) -> Result<Vec<PathBuf>, String> {
    dumps_of(out, "-")
}

/// The files next to `out` whose names are its name, then `then`, then anything.
fn dumps_of(out: &Path, then: &str) -> Result<Vec<PathBuf>, String> {
    let dir = out.parent().expect("a directory");
    let name = out.file_name().expect("a file name").to_string_lossy();
    let prefix = format!("{name}{then}");
    Ok(std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect())
}

/// valgrind's arguments: callgrind, its dumps at `out`.
fn callgrind_into(out: &Path) -> Vec<String> {
    vec![
        "--tool=callgrind".to_string(),
        format!("--callgrind-out-file={}", out.display()),
    ]
}

/// The operator's name in a dump's file name.
fn label(kind: Kind) -> &'static str {
    kind.title().split(' ').next().unwrap_or("op")
}

/// Waits for the operator's start to finish its own work (slow under valgrind): two quiet
/// seconds in a row (under 20 ms of CPU each), five minutes at most; an error after that,
/// since counting from then on would count the start too.
async fn settle(operator: &Process) -> Result<(), String> {
    let until = Instant::now() + Duration::from_secs(300);
    let (mut quiet, mut cpu) = (0, operator.cpu());
    while quiet < 2 {
        if Instant::now() > until {
            return Err(format!(
                "{} was still busy after 5 minutes under valgrind",
                operator.label
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        operator.check_running()?;
        let now = operator.cpu();
        quiet = if now - cpu < 0.02 { quiet + 1 } else { 0 };
        cpu = now;
    }
    Ok(())
}

fn callgrind_control(args: &[&str]) -> Result<(), String> {
    let output = std::process::Command::new("callgrind_control")
        .args(args)
        .output()
        .map_err(|e| format!("callgrind_control: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "callgrind_control {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(())
}

/// The instructions in the newest dump next to `out` (`out.N`, written by `callgrind_control -d`).
fn dumped_instructions(out: &Path) -> Result<f64, String> {
    let mut dumps: Vec<_> = dumps_of(out, "")?
        .into_iter()
        .filter_map(|dump| Some((dump.metadata().ok()?.modified().ok()?, dump)))
        .collect();
    dumps.sort();
    let (_, newest) = dumps.last().ok_or("callgrind wrote no dump")?;
    instructions_in(newest)
}

/// The instruction total of one callgrind dump.
fn instructions_in(dump: &Path) -> Result<f64, String> {
    let text = std::fs::read_to_string(dump).map_err(|e| format!("{}: {e}", dump.display()))?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
        })
        .and_then(|n| n.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| format!("no instruction total in {}", dump.display()))
}
