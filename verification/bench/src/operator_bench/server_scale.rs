//! Scenario 10: the fake API server's own ceiling with many stored objects, with no operator:
//! a fresh `kopf-fake-apiserver` process stores N objects (`--scale-objects`) and, for
//! comparison, another one stores [`BASE`]. Measured for each: how fast the runner stores them,
//! the server's resident memory per stored object (with the objects minus empty, over N), the
//! merge PATCHes to `/status` of random stored objects per second that a minimal client gets
//! (`CONCURRENCY` at a time, as scenario 1's ceiling column writes), the server's CPU per
//! PATCH, and the time to list every object in pages of 500 (as operators list, parsed by
//! kube-rs as theirs are).

use std::fmt::Write as _;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use serde_json::json;

use crate::cluster::{self, CONCURRENCY, Cluster};
use crate::observe::{PAGE, kopfexamples, list_all};
use crate::operators::Programs;
use crate::process::{cpu_seconds, memory_kib};
use crate::report::{median, number};
use crate::scale::BASE;
use crate::scenarios::{Sample, XorShift};

/// Status PATCHes per measurement.
const PATCHES: usize = 20_000;

/// Measures both sizes `runs` times, interleaved, and describes the medians in Markdown.
pub(crate) async fn server_at_scale(programs: &Programs, objects: usize, runs: usize) -> String {
    let sizes = [BASE, objects];
    let mut samples: [Vec<Sample>; 2] = [Vec::new(), Vec::new()];
    let mut failures = Vec::new();
    for run in 0..runs {
        for (i, &size) in sizes.iter().enumerate() {
            eprintln!(
                "scenario 10, run {}/{runs}: the server with {size} objects",
                run + 1
            );
            match measure(programs, size, run).await {
                Ok(sample) => {
                    for (name, value) in &sample {
                        eprintln!("  {name}: {value:.3}");
                    }
                    samples[i].push(sample);
                }
                Err(error) => {
                    eprintln!("  failed: {error}");
                    failures.push(format!("run {}, {size} objects: {error}", run + 1));
                }
            }
        }
    }
    describe(&sizes, runs, &samples, &failures)
}

/// One fresh server with `objects` objects: its figures.
async fn measure(programs: &Programs, objects: usize, run: usize) -> Result<Sample, String> {
    let cluster = Cluster::start(programs).await?;
    let pid = cluster.pid();
    let (empty, _) = memory_kib(pid);
    let (start, cpu) = (Instant::now(), cpu_seconds(pid));
    cluster
        .create_objects(objects, None, |_| async { Ok(()) })
        .await?;
    let storing = start.elapsed().as_secs_f64();
    let storing_cpu = cpu_seconds(pid) - cpu;
    let (full, _) = memory_kib(pid);
    let (patches, server_cpu) = patch_rate(&cluster, objects, run).await?;
    let start = Instant::now();
    let (listed, _) = list_all(
        &kopfexamples(cluster.client.client().clone()),
        &AtomicU64::new(0),
    )
    .await?;
    let listing = start.elapsed().as_secs_f64();
    cluster.stop();
    if listed.len() != objects {
        return Err(format!("listed {} of {objects} objects", listed.len()));
    }
    let n = objects as f64;
    Ok(vec![
        (
            format!("objects stored per second ({CONCURRENCY} creations at a time)"),
            n / storing,
        ),
        ("server CPU per creation, µs".into(), storing_cpu * 1e6 / n),
        ("server RSS, empty, MiB".into(), empty as f64 / 1024.0),
        (
            "server RSS with the objects, MiB".into(),
            full as f64 / 1024.0,
        ),
        (
            "server RSS per stored object, KiB".into(),
            full.saturating_sub(empty) as f64 / n,
        ),
        (
            format!("status PATCHes per second ({CONCURRENCY} at a time, random objects)"),
            patches,
        ),
        ("server CPU per status PATCH, µs".into(), server_cpu * 1e6),
        (
            format!("LIST of every object in pages of {PAGE}, s"),
            listing,
        ),
        ("objects listed per second".into(), n / listing),
    ])
}

/// [`PATCHES`] merge patches to the `/status` of random stored objects, `CONCURRENCY` at a
/// time: the patches per second, and the server's CPU seconds per patch.
async fn patch_rate(cluster: &Cluster, objects: usize, run: usize) -> Result<(f64, f64), String> {
    let mut random = XorShift(0x2545_F491_4F6C_DD1D ^ (run as u64 + 1));
    let targets: Vec<String> = (0..PATCHES)
        .map(|_| format!("{}/status", cluster::path(random.below(objects))))
        .collect();
    let cpu = cpu_seconds(cluster.pid());
    let start = Instant::now();
    cluster::each_object(PATCHES, |i| {
        let patch = json!({"status": {"create_fn": {"at": i, "run": "1"}}});
        let (client, path) = (&cluster.client, &targets[i]);
        async move {
            cluster::request(client, "PATCH", path, &patch)
                .await
                .map(drop)
        }
    })
    .await?;
    let seconds = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds(cluster.pid()) - cpu;
    Ok((PATCHES as f64 / seconds, cpu / PATCHES as f64))
}

/// The section: a row per figure, a column per size, and the ratio of the large to the small.
fn describe(
    sizes: &[usize; 2],
    runs: usize,
    samples: &[Vec<Sample>; 2],
    failures: &[String],
) -> String {
    let [small, large] = *sizes;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "## 10. The fake API server alone with {large} stored objects\n\n\
         Medians of {runs} runs; no operator. A fresh `kopf-fake-apiserver` process per size: the \
         runner stores the objects ({CONCURRENCY} creations at a time), then sends {PATCHES} merge \
         patches to the `/status` of random stored objects ({CONCURRENCY} at a time, as the server \
         ceiling of scenario 1 writes), then lists every object in pages of {PAGE} through \
         kube-rs (as operators list). RSS per stored object: the server's RSS with the objects \
         minus its RSS empty (the CRD and namespaces only), over the objects. The runner shares \
         the machine's cores with the server.\n"
    );
    let _ = writeln!(
        text,
        "| | {small} objects | {large} objects | {large} / {small} |\n|---|---:|---:|---:|"
    );
    let names: Vec<&String> = samples
        .iter()
        .flatten()
        .flat_map(|sample| sample.iter().map(|(name, _)| name))
        .fold(Vec::new(), |mut names, name| {
            if !names.contains(&name) {
                names.push(name);
            }
            names
        });
    for name in names {
        let value = |i: usize| {
            median(
                samples[i]
                    .iter()
                    .filter_map(|sample| sample.iter().find(|(n, _)| n == name))
                    .map(|(_, value)| *value)
                    .collect(),
            )
        };
        let cell = |v: Option<f64>| v.map_or("–".into(), number);
        let ratio = match (value(0), value(1)) {
            (Some(a), Some(b)) if a != 0.0 => format!("{}×", number(b / a)),
            _ => "–".into(),
        };
        let _ = writeln!(
            text,
            "| {name} | {} | {} | {ratio} |",
            cell(value(0)),
            cell(value(1))
        );
    }
    for failure in failures {
        let _ = writeln!(text, "\nFailed: {failure}");
    }
    text
}
