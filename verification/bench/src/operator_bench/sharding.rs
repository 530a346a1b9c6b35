//! Scenario 8: a create burst split among kopf-rs replicas with assigned shards (`--shards
//! 16`): 1, 2 and 4 replicas, on a server that filters by `shardSelector` and on one that
//! ignores it (`--no-sharded-watches`: each replica receives every object and drops the
//! others' itself). Measured: the wall time until every object's create handler has written
//! its status (from the first creation), the CPU seconds of each replica, and the bytes each
//! replica received on its connections (from `ss`: mostly the watch events it received). Only
//! kopf-rs: neither Python Kopf nor kube-rs assigns shards.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::at_rest;
use crate::cluster::Cluster;
use crate::observe::Observer;
use crate::operators::{Kind, Programs};
use crate::process::Process;
use crate::scenarios::marked;

/// The virtual shards the replicas split the objects into.
const SHARDS: u32 = 16;
/// How long the replicas are watched at rest after the burst.
const REST: Duration = Duration::from_secs(30);
/// Longer than any run may take.
const DEADLINE: Duration = Duration::from_secs(300);

/// One run's figures.
struct Run {
    wall: f64,
    /// Per replica: CPU seconds and KiB received during the burst.
    replicas: Vec<(f64, f64)>,
    /// API requests per minute per replica at rest, after the burst.
    at_rest: f64,
}

/// Runs every combination `runs` times, interleaved, and describes the medians in Markdown.
pub(crate) async fn sharded_burst(programs: &Programs, objects: usize, runs: usize) -> String {
    let combinations: Vec<(usize, bool)> = [1, 2, 4]
        .into_iter()
        .flat_map(|n| [(n, true), (n, false)])
        .collect();
    let mut results: Vec<Vec<Run>> = combinations.iter().map(|_| Vec::new()).collect();
    let mut failures = Vec::new();
    for run in 0..runs {
        for (i, &(replicas, filtering)) in combinations.iter().enumerate() {
            eprintln!(
                "scenario 8, run {}/{runs}: {replicas} replica(s), {} filtering",
                run + 1,
                if filtering { "server" } else { "client" }
            );
            match burst(programs, objects, replicas, filtering).await {
                Ok(measured) => {
                    eprintln!("  wall time: {:.3} s", measured.wall);
                    results[i].push(measured);
                }
                Err(error) => {
                    eprintln!("  failed: {error}");
                    failures.push(format!(
                        "{replicas} replica(s), filtering {filtering}: {error}"
                    ));
                }
            }
        }
    }
    describe(objects, runs, &combinations, &results, &failures)
}

/// One burst with `replicas` replicas; `filtering`: the server applies `shardSelector`.
async fn burst(
    programs: &Programs,
    objects: usize,
    replicas: usize,
    filtering: bool,
) -> Result<Run, String> {
    let options: &[&str] = if filtering {
        &[]
    } else {
        &["--no-sharded-watches"]
    };
    let cluster = Cluster::start_with(programs, options).await?;
    let observer = Observer::start(cluster.client.client().clone()).await?;
    let mut operators = Vec::new();
    for r in 0..replicas {
        let shards = SHARDS.to_string();
        let identity = format!("replica-{r}");
        operators.push(programs.start_replica(
            Kind::KopfRs,
            &cluster.kubeconfig,
            "create",
            "1",
            &["--shards", &shards],
            &[("POD_ID", &identity)],
        )?);
    }
    let measured = measure(&cluster, &observer, &operators, objects, replicas).await;
    for operator in operators {
        let _ = operator.terminate(Duration::from_secs(30));
    }
    cluster.stop();
    measured
}

async fn measure(
    cluster: &Cluster,
    observer: &Observer,
    operators: &[Process],
    objects: usize,
    replicas: usize,
) -> Result<Run, String> {
    spread(cluster, operators, replicas).await?;
    let before: Vec<(f64, f64)> = operators.iter().map(usage).collect();
    let start = Instant::now();
    cluster
        .create_objects(objects, None, |_| async { Ok(()) })
        .await?;
    let done = observer
        .wait(
            "every create handler's status",
            DEADLINE,
            marked(objects, "create_fn", "1"),
        )
        .await?;
    for operator in operators {
        operator.check_running()?;
    }
    let after: Vec<(f64, f64)> = operators.iter().map(usage).collect();
    Ok(Run {
        wall: done.duration_since(start).as_secs_f64(),
        replicas: before
            .iter()
            .zip(&after)
            .map(|(b, a)| (a.0 - b.0, a.1 - b.1))
            .collect(),
        at_rest: at_rest(cluster, observer, replicas).await?,
    })
}

/// The replicas' API requests per minute each, at rest: Lease renewals, looks at the ring,
/// watch reconnects; counted by the server over [`REST`], less the runner's own.
async fn at_rest(cluster: &Cluster, observer: &Observer, replicas: usize) -> Result<f64, String> {
    // The burst's last writes settle first.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let requests = at_rest::requests(cluster, Some(observer), replicas, REST).await?;
    Ok(at_rest::total(&requests))
}

/// A replica's CPU seconds so far, and the KiB received on its open TCP connections (as `ss`
/// reports them; sockets do not count in `/proc/<pid>/io`).
fn usage(operator: &Process) -> (f64, f64) {
    (operator.cpu(), received_kib(operator.pid()))
}

/// The bytes received on the process's open TCP connections, in KiB (0 without `ss`).
fn received_kib(pid: i32) -> f64 {
    let Ok(output) = std::process::Command::new("ss").arg("-tinp").output() else {
        return 0.0;
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let owner = format!("pid={pid},");
    let mut ours = false;
    let mut bytes = 0.0;
    for line in text.lines() {
        if line.starts_with(|c: char| !c.is_whitespace()) {
            ours = line.contains(&owner);
        } else if ours {
            bytes += line
                .split_whitespace()
                .find_map(|field| field.strip_prefix("bytes_received:"))
                .and_then(|n| n.parse::<f64>().ok())
                .unwrap_or(0.0);
        }
    }
    bytes / 1024.0
}

/// Waits until the shards' Leases are held by `replicas` members, evenly.
async fn spread(cluster: &Cluster, operators: &[Process], replicas: usize) -> Result<(), String> {
    let until = Instant::now() + DEADLINE;
    let capacity = (SHARDS as usize).div_ceil(replicas);
    loop {
        for operator in operators {
            operator.check_running()?;
        }
        let list = cluster
            .send_get("/apis/coordination.k8s.io/v1/namespaces/default/leases?labelSelector=kopf.dev%2Fshard-role%3Dshard")
            .await?;
        let holders: Vec<String> = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l["spec"]["holderIdentity"].as_str())
            .filter(|h| !h.is_empty())
            .map(String::from)
            .collect();
        let mut load = std::collections::BTreeMap::<&str, usize>::new();
        for holder in &holders {
            *load.entry(holder).or_default() += 1;
        }
        if holders.len() == SHARDS as usize
            && load.len() == replicas
            && load.values().all(|l| *l <= capacity)
        {
            return Ok(());
        }
        if Instant::now() > until {
            return Err(format!(
                "the shards did not spread over {replicas} replicas: {load:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn describe(
    objects: usize,
    runs: usize,
    combinations: &[(usize, bool)],
    results: &[Vec<Run>],
    failures: &[String],
) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "## 8. Sharded create burst: {objects} objects, {SHARDS} shards, kopf-rs replicas\n\n\
         Medians of {runs} runs. Throughput is objects per second from the first creation to \
         the last create handler's status; the ratio is against one replica with the same \
         filtering. CPU and KiB received are per replica (mean over the replicas) during the \
         burst; KiB received are the bytes on the replica's connections (from `ss`), mostly the \
         watch events it received. Requests at rest are counted by the server for 30 s after the \
         burst (Lease renewals, looks at the ring, watch reconnects). The machine has 2 cores shared by the server, the runner and \
         every replica. `server`: the API server filters by `shardSelector`; `client`: it ignores the \
         parameter and each replica drops the other shards' objects itself.\n"
    );
    let _ = writeln!(
        text,
        "| replicas | filtering | objects/s | ratio vs 1 replica | CPU per replica, s | KiB received per replica | requests per minute per replica at rest |"
    );
    let _ = writeln!(text, "|---|---|---|---|---|---|---|");
    let throughput =
        |i: usize| median(results[i].iter().map(|r| objects as f64 / r.wall).collect());
    for (i, &(replicas, filtering)) in combinations.iter().enumerate() {
        let base = combinations
            .iter()
            .position(|&(n, f)| n == 1 && f == filtering)
            .expect("one replica is measured");
        let per_replica = |pick: fn(&(f64, f64)) -> f64| {
            median(
                results[i]
                    .iter()
                    .map(|r| r.replicas.iter().map(pick).sum::<f64>() / r.replicas.len() as f64)
                    .collect(),
            )
        };
        let _ = writeln!(
            text,
            "| {replicas} | {} | {:.0} | {:.2}× | {:.2} | {:.0} | {:.0} |",
            if filtering { "server" } else { "client" },
            throughput(i),
            throughput(i) / throughput(base),
            per_replica(|u| u.0),
            per_replica(|u| u.1),
            median(results[i].iter().map(|r| r.at_rest).collect()),
        );
    }
    for failure in failures {
        let _ = writeln!(text, "\nFailed: {failure}");
    }
    text
}
