//! Scenario 11: what peering costs at rest. kopf-rs and Python Kopf, 1 and 2 replicas
//! peering through the cluster-wide `ClusterKopfPeering` `default` (`--peering default`, a
//! distinct priority per replica, so that one works and the others pause in its favour, as
//! Kopf's documentation advises); kopf-rs electing a leader with a Lease instead (`--lease`);
//! and both `--standalone`, the floor (watches only). With no objects to handle, the server
//! counts every request for [`REST`] once the replicas have settled: keep-alives, Lease
//! renewals and acquire attempts, watch reconnects. Given per minute per replica, by verb and
//! resource.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::at_rest;
use crate::cluster::{Cluster, Requests};
use crate::operators::{Kind, Programs};
use crate::process::Process;

/// How long the requests are counted: two keep-alive cycles of Kopf's default lifetime
/// (60 s, a touch every 50 to 55 s), so that a rate per minute is not one touch more or less.
const REST: Duration = Duration::from_secs(120);
/// How long the replicas are left alone between their settling and the counting.
const SETTLE: Duration = Duration::from_secs(5);
/// Longer than any start may take.
const DEADLINE: Duration = Duration::from_secs(120);
/// The Lease of `--lease`, in the namespace `default`.
const LEASE: &str = "kopf-bench-leader";
/// What Kopf and kopf-rs alike log when a replica pauses in favour of a higher priority...
const PAUSED: &str = "Pausing operations in favour of";
/// ... and when it resumes (also at the start of a mandatory peering, which begins paused).
const RESUMED: &str = "Resuming operations after the pause";

/// How the replicas keep out of each other's way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Kopf's peering: `--peering default --priority N`.
    Peering,
    /// kopf-rs's leader election with a Lease: `--lease default/kopf-bench-leader`.
    Lease,
    /// None: `--standalone`.
    Standalone,
}

impl Mode {
    fn title(self) -> &'static str {
        match self {
            Mode::Peering => "peering",
            Mode::Lease => "Lease",
            Mode::Standalone => "standalone",
        }
    }

    /// The `kopf run` options of the `replica`th of `replicas` (the first has the highest
    /// priority).
    fn options(self, replica: usize, replicas: usize) -> Vec<String> {
        match self {
            Mode::Peering => vec![
                "--peering".into(),
                "default".into(),
                "--priority".into(),
                (replicas - replica).to_string(),
            ],
            Mode::Lease => vec!["--lease".into(), format!("default/{LEASE}")],
            Mode::Standalone => vec!["--standalone".into()],
        }
    }
}

/// One measured setup: who, how, how many.
#[derive(Debug, Clone, Copy)]
struct Setup {
    kind: Kind,
    mode: Mode,
    replicas: usize,
}

impl std::fmt::Display for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (kind, mode, replicas) = (self.kind.title(), self.mode.title(), self.replicas);
        write!(f, "{kind}, {mode}, {replicas} replica(s)")
    }
}

/// The setups of those `operators` that peer (kopf-rs and Python Kopf), in the order they run.
fn setups(operators: &[Kind]) -> Vec<Setup> {
    let setup = |kind, mode, replicas| Setup {
        kind,
        mode,
        replicas,
    };
    [
        setup(Kind::KopfRs, Mode::Peering, 1),
        setup(Kind::Kopf, Mode::Peering, 1),
        setup(Kind::KopfRs, Mode::Peering, 2),
        setup(Kind::Kopf, Mode::Peering, 2),
        setup(Kind::KopfRs, Mode::Lease, 1),
        setup(Kind::KopfRs, Mode::Lease, 2),
        setup(Kind::KopfRs, Mode::Standalone, 1),
        setup(Kind::Kopf, Mode::Standalone, 1),
    ]
    .into_iter()
    .filter(|s| operators.contains(&s.kind))
    .collect()
}

/// Runs every setup `runs` times, interleaved, and describes the medians in Markdown.
pub(crate) async fn peering_at_rest(
    programs: &Programs,
    operators: &[Kind],
    runs: usize,
) -> String {
    let setups = setups(operators);
    let mut results: Vec<Vec<Requests>> = setups.iter().map(|_| Vec::new()).collect();
    let mut failures = Vec::new();
    for run in 0..runs {
        for (i, setup) in setups.iter().enumerate() {
            eprintln!("scenario 11, run {}/{runs}: {setup}", run + 1);
            match measure(programs, setup, run).await {
                Ok(requests) => {
                    eprintln!(
                        "  requests per minute per replica: {:.2}",
                        at_rest::total(&requests)
                    );
                    for ((verb, resource), rate) in &requests {
                        eprintln!("    {verb} {resource}: {rate:.2}");
                    }
                    results[i].push(requests);
                }
                Err(error) => {
                    eprintln!("  failed: {error}");
                    failures.push(format!("{setup}, run {}: {error}", run + 1));
                }
            }
        }
    }
    describe(runs, &setups, &results, &failures)
}

/// One measurement: a fresh server with Kopf's peering CRDs and the peering object, the
/// replicas, and their requests at rest.
async fn measure(programs: &Programs, setup: &Setup, run: usize) -> Result<Requests, String> {
    let cluster = Cluster::start(programs).await?;
    peering_objects(&cluster).await?;
    let identities: Vec<String> = (0..setup.replicas)
        .map(|r| format!("replica-{r}"))
        .collect();
    let mut replicas = Vec::new();
    for (r, identity) in identities.iter().enumerate() {
        let options = setup.mode.options(r, setup.replicas);
        let options: Vec<&str> = options.iter().map(String::as_str).collect();
        let started = programs.start_replica(
            setup.kind,
            &cluster.kubeconfig,
            "create",
            &run.to_string(),
            &options,
            &[("POD_ID", identity)],
        );
        replicas.push(started?);
    }
    let measured = async {
        settle(&cluster, setup.mode, &replicas, &identities).await?;
        tokio::time::sleep(SETTLE).await;
        let requests = at_rest::requests(&cluster, None, setup.replicas, REST).await?;
        for replica in &replicas {
            replica.check_running()?;
        }
        Ok(requests)
    }
    .await;
    for replica in replicas {
        let _ = replica.terminate(Duration::from_secs(30));
    }
    cluster.stop();
    measured
}

/// Kopf's peering CRDs and the cluster-wide peering object `default`, as `kopf` makes them.
async fn peering_objects(cluster: &Cluster) -> Result<(), String> {
    for crd in kopf::peering::peering_crds() {
        cluster
            .send(
                "POST",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                &crd,
            )
            .await?;
    }
    let peering = json!({"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering",
                         "metadata": {"name": "default"}});
    // The CRD is served once it is established: retried until then.
    let until = Instant::now() + DEADLINE;
    loop {
        let created = cluster
            .send("POST", "/apis/kopf.dev/v1/clusterkopfpeerings", &peering)
            .await;
        match created {
            Ok(object) if object["kind"] == "ClusterKopfPeering" => return Ok(()),
            Ok(object) if Instant::now() > until => {
                return Err(format!("the peering object was not created: {object}"));
            }
            Err(error) if Instant::now() > until => return Err(error),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Waits until one replica watches the KopfExamples (it works) and, when peering, every
/// replica has its entry in the peering object, the first (the highest priority) has resumed
/// and the others are paused; with a Lease, until one replica holds it.
async fn settle(
    cluster: &Cluster,
    mode: Mode,
    replicas: &[Process],
    identities: &[String],
) -> Result<(), String> {
    let until = Instant::now() + DEADLINE;
    loop {
        for replica in replicas {
            replica.check_running()?;
        }
        let working = cluster.kopfexample_watches().await? > 0;
        let (settled, state) = match mode {
            Mode::Peering => {
                let object = cluster
                    .send_get("/apis/kopf.dev/v1/clusterkopfpeerings/default")
                    .await?;
                let status = &object["status"];
                let entered = identities.iter().all(|id| status[id].is_object());
                let leads = replicas.first().is_some_and(|r| !paused(r));
                let others = replicas.iter().skip(1).all(paused);
                (entered && leads && others, status.clone())
            }
            Mode::Lease => {
                let path =
                    format!("/apis/coordination.k8s.io/v1/namespaces/default/leases/{LEASE}");
                let lease = cluster.send_get(&path).await.unwrap_or(Value::Null);
                let holder = lease["spec"]["holderIdentity"].as_str().unwrap_or_default();
                (
                    identities.iter().any(|id| id == holder),
                    lease["spec"].clone(),
                )
            }
            Mode::Standalone => (true, Value::Null),
        };
        if working && settled {
            return Ok(());
        }
        if Instant::now() > until {
            return Err(format!(
                "the replicas did not settle within {DEADLINE:?} (watching: {working}, state: {state})"
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Whether a peering replica is paused, by its last word on it: `--peering` (mandatory)
/// starts paused, and a replica that sees a higher priority at its first look stays so
/// without a word.
fn paused(replica: &Process) -> bool {
    let tail = replica.tail();
    let last = tail
        .lines()
        .rev()
        .find(|line| line.contains(PAUSED) || line.contains(RESUMED));
    last.is_none_or(|line| line.contains(PAUSED))
}

fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The median of each kind of request over the runs (0 in a run without it), those above 0,
/// most frequent first: `patch clusterkopfpeerings.kopf.dev 1.0, watch ...`.
fn breakdown(runs: &[Requests]) -> String {
    let mut keys: Vec<&(String, String)> = runs.iter().flat_map(|r| r.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut medians: Vec<(String, f64)> = keys
        .into_iter()
        .map(|key| {
            let each = runs
                .iter()
                .map(|r| r.get(key).copied().unwrap_or(0.0))
                .collect();
            (format!("{} {}", key.0, key.1), median(each))
        })
        .filter(|(_, rate)| *rate > 0.0)
        .collect();
    medians.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let parts: Vec<String> = medians
        .iter()
        .map(|(request, rate)| format!("{request} {rate:.1}"))
        .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

fn describe(
    runs: usize,
    setups: &[Setup],
    results: &[Vec<Requests>],
    failures: &[String],
) -> String {
    let mut text = String::new();
    let rest = REST.as_secs();
    let _ = writeln!(
        text,
        "## 11. Peering at rest: API requests per minute per replica\n\n\
         Medians of {runs} runs. No objects: each setup gets a fresh server with Kopf's peering \
         CRDs and the cluster-wide `ClusterKopfPeering` `default`, its replicas (`POD_ID` \
         `replica-0`, `replica-1`, ...; `kopf run -A` with the options of the mode) and, once \
         they have settled (one replica watches the KopfExamples; when peering, every replica \
         has its entry in the peering object, the first has resumed and the others are paused; \
         with a Lease, one holds it) and {} s more, the server counts their requests for {rest} s \
         (two cycles of Kopf's keep-alive: every 50 to 55 s for the default 60 s lifetime); the \
         runner sends none meanwhile. `peering`: `--peering default --priority N`, N = 2 for \
         `replica-0` and 1 for `replica-1`, so one works and the other pauses, as Kopf's \
         documentation advises (equal priorities would pause both). `Lease`: kopf-rs's \
         `--lease default/{LEASE}` (client-go's durations: 15 s, renewed every 2 s; not Kopf's). \
         `standalone`: `--standalone`, no peering: the floor, watch reconnects only. Requests \
         are per minute per replica (the replicas' sum divided by their number); \"over \
         standalone\" subtracts the same operator's standalone figure; the breakdown is by verb \
         and resource as the server counts them.\n",
        SETTLE.as_secs()
    );
    let _ = writeln!(
        text,
        "| operator | mode | replicas | requests per minute per replica | over standalone | by verb and resource, per minute per replica |"
    );
    let _ = writeln!(text, "|---|---|---|---|---|---|");
    let total = |i: usize| median(results[i].iter().map(at_rest::total).collect());
    for (i, setup) in setups.iter().enumerate() {
        let floor = setups
            .iter()
            .position(|s| s.kind == setup.kind && s.mode == Mode::Standalone)
            .map(total)
            .filter(|floor| !floor.is_nan());
        let over = match floor {
            Some(floor) if setup.mode != Mode::Standalone => format!("{:.1}", total(i) - floor),
            _ => "–".into(),
        };
        let _ = writeln!(
            text,
            "| {} | {} | {} | {:.1} | {over} | {} |",
            setup.kind.title(),
            setup.mode.title(),
            setup.replicas,
            total(i),
            breakdown(&results[i]),
        );
    }
    for failure in failures {
        let _ = writeln!(text, "\nFailed: {failure}");
    }
    text
}
