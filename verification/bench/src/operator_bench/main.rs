//! `operator-bench`: the same jobs done by kopf-rs, Python Kopf and a kube-rs `Controller`,
//! each a separate process measured from outside against a fresh `kopf-fake-apiserver`
//! process, runs interleaved; the medians and ratios go to `BENCHMARKS.md`.
//!
//! ```sh
//! cargo build --release -p kopf-fake-apiserver -p kopf-bench --bins
//! target/release/operator-bench [--objects N] [--runs R] [--scenarios 1,2,3,4,5,6,7,8,9,10,11] [--out BENCHMARKS.md]
//! ```
//!
//! `--help` lists the options. Scenario 7 is the instruction count (callgrind) of a small
//! create burst and of the exit with a daemon per object (`OPERATOR_BENCH_DUMPS=DIR` keeps its
//! callgrind dumps there, for `callgrind_annotate`); scenario 8 is a create burst among 1, 2
//! and 4 kopf-rs replicas with assigned shards (kopf-rs only); scenario 9 compares the
//! operators with 100,000 objects of one resource (`--scale-objects`); scenario 10 is the fake
//! API server alone with that many stored objects; scenario 11 is the API requests per minute
//! that peering (or a Lease) costs each replica of kopf-rs and of Python Kopf at rest.
//! Scenarios 8 to 11 run only when asked for. Python Kopf comes from `scripts/python-env` (a
//! virtualenv with kopf 1.45.2).
//!
//! `--apiserver real` runs scenarios 1 and 4 on a real kube-apiserver with etcd
//! (`scripts/real-apiserver`, built once with Go) instead; `--apiserver fake,real` on both, the
//! real server's tables as a section of the report after the fake one's.

mod at_rest;
mod cluster;
mod metrics;
mod observe;
mod operators;
mod peering;
mod process;
mod report;
mod scale;
mod scenarios;
mod server_scale;
mod sharding;

use std::path::PathBuf;
use std::process::ExitCode;

use cluster::ApiServer;
use operators::{Kind, Programs};
use report::Report;
use scenarios::Sizes;

/// The command line.
struct Options {
    sizes: Sizes,
    runs: usize,
    scenarios: Vec<u8>,
    operators: Vec<Kind>,
    apiservers: Vec<ApiServer>,
    out: PathBuf,
}

/// The scenarios that run on a real API server. 8, 10 and 11 use the fake server's options
/// and controls; 2, 3, 5, 6 and 7 have not been made to run there and checked yet.
const ON_REAL_SERVER: [u8; 2] = [1, 4];

const USAGE: &str =
    "usage: operator-bench [--objects N] [--runs R] [--scenarios 1,2,3,4,5,6,7,8,9,10,11]
       [--operators kopf-rs,kopf,kube-rs,kopf-rs-status] [--idle-objects N] [--update-objects N]
       [--update-rate PER_SECOND] [--update-seconds S] [--instruction-objects N]
       [--scale-objects N] [--apiserver fake|real|fake,real] [--out PATH]

Scenarios: 1 create burst (kopf-rs also with its status storages), 2 steady updates, 3 idle scale, 4 shutdown, 5 deletion with
finalizers, 6 startup, 7 instruction counts (callgrind) of a create burst and of an exit, 8
a create burst among 1, 2 and 4 kopf-rs replicas with assigned shards, 9 scale: create
burst, start and idle memory with --scale-objects objects of one resource, 10 the fake API
server alone with --scale-objects stored objects, 11 peering at rest: API requests per
minute per replica of kopf-rs and Kopf peering, of kopf-rs with a Lease, and of both
standalone, counted for 2 minutes each (8 to 11 are not run unless asked for).

--apiserver: the fake API server (kopf-fake-apiserver, the default), a real one (kube-apiserver
1.36 with etcd, from scripts/real-apiserver: Go builds it once), or both in turn, the real
one's tables as a section after the fake one's. Only scenarios 1 and 4 run on the real
server; the others need the fake one.

Defaults are small: --objects 200 --runs 3 --idle-objects 2000 --update-objects 100
--update-rate 20 --update-seconds 10 --instruction-objects 100 --scale-objects 100000
--apiserver fake --out BENCHMARKS.md";

fn options() -> Result<Options, String> {
    let mut options = Options {
        sizes: Sizes {
            objects: 200,
            idle_objects: 2000,
            update_objects: 100,
            update_rate: 20,
            update_seconds: 10,
            instruction_objects: 100,
            scale_objects: 100_000,
        },
        runs: 3,
        scenarios: vec![1, 2, 3, 4, 5, 6, 7],
        operators: vec![Kind::KopfRs, Kind::Kopf, Kind::KubeRs],
        apiservers: vec![ApiServer::Fake],
        out: PathBuf::from("BENCHMARKS.md"),
    };
    let mut scenarios_given = false;
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        return Err(USAGE.into());
    }
    for pair in args.chunks(2) {
        let [option, value] = pair else {
            return Err(format!("{} needs a value\n{USAGE}", pair[0]));
        };
        let number = || {
            value
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0 || option == "--instruction-objects")
                .ok_or_else(|| format!("{option} takes a positive number, not {value:?}"))
        };
        match option.as_str() {
            "--objects" => options.sizes.objects = number()?,
            "--runs" => options.runs = number()?,
            "--idle-objects" => options.sizes.idle_objects = number()?.max(2),
            "--update-objects" => options.sizes.update_objects = number()?,
            "--update-rate" => options.sizes.update_rate = number()? as u32,
            "--update-seconds" => options.sizes.update_seconds = number()? as u32,
            "--instruction-objects" => options.sizes.instruction_objects = number()?,
            "--scale-objects" => options.sizes.scale_objects = number()?.max(2),
            "--out" => options.out = PathBuf::from(value),
            "--scenarios" => {
                scenarios_given = true;
                options.scenarios = value
                    .split(',')
                    .map(|s| s.trim().parse::<u8>().ok().filter(|n| (1..=11).contains(n)))
                    .collect::<Option<_>>()
                    .ok_or_else(|| format!("--scenarios takes numbers 1 to 11, not {value:?}"))?;
            }
            "--operators" => {
                options.operators = value
                    .split(',')
                    .map(|s| Kind::parse(s.trim()))
                    .collect::<Option<_>>()
                    .ok_or_else(|| {
                        format!("--operators takes kopf-rs, kopf, kube-rs, kopf-rs-status, not {value:?}")
                    })?;
            }
            "--apiserver" => {
                options.apiservers = value
                    .split(',')
                    .map(|s| ApiServer::parse(s.trim()))
                    .collect::<Option<_>>()
                    .ok_or_else(|| {
                        format!("--apiserver takes fake, real or fake,real, not {value:?}")
                    })?;
                options.apiservers.dedup();
            }
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
    }
    if options.apiservers == [ApiServer::Real] {
        let fake_only = fake_only(&options.scenarios);
        if !scenarios_given {
            options.scenarios.retain(|s| ON_REAL_SERVER.contains(s));
        } else if !fake_only.is_empty() {
            return Err(format!(
                "scenarios {} need the fake API server: only 1 and 4 run on a real one \
                 (--apiserver fake,real runs the others on the fake server only)",
                list(&fake_only)
            ));
        }
    }
    Ok(options)
}

/// The scenarios among `scenarios` that run only on the fake API server.
fn fake_only(scenarios: &[u8]) -> Vec<u8> {
    let mut fake_only: Vec<u8> = scenarios
        .iter()
        .copied()
        .filter(|s| !ON_REAL_SERVER.contains(s))
        .collect();
    fake_only.sort_unstable();
    fake_only.dedup();
    fake_only
}

/// `1, 2, 3`.
fn list(scenarios: &[u8]) -> String {
    let names: Vec<String> = scenarios.iter().map(u8::to_string).collect();
    names.join(", ")
}

/// The workspace's root (two folders above this package's).
fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The virtualenv's python, made or refreshed by `scripts/python-env`.
fn python_env() -> Result<PathBuf, String> {
    let script = root().join("scripts/python-env");
    let output = std::process::Command::new(&script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !output.status.success() {
        return Err(format!("{} failed ({})", script.display(), output.status));
    }
    let path = String::from_utf8_lossy(&output.stdout).trim().to_string();
    Ok(PathBuf::from(path))
}

fn main() -> ExitCode {
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let mut notes = Vec::new();
    let python = match python_env() {
        Ok(python) => python,
        Err(error) => {
            eprintln!("{error}: Python Kopf is left out");
            notes.push(format!("Python Kopf was left out: {error}."));
            PathBuf::from("python3")
        }
    };
    let mut operators = options.operators.clone();
    if !notes.is_empty() {
        operators.retain(|k| *k != Kind::Kopf);
    }
    let programs = match Programs::find(python, &root()) {
        Ok(programs) => programs,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let mut text = String::new();
    for (i, &server) in options.apiservers.iter().enumerate() {
        let mut notes = notes.clone();
        let mut scenarios = options.scenarios.clone();
        if server == ApiServer::Real {
            let fake_only = fake_only(&scenarios);
            if !fake_only.is_empty() {
                let note = format!(
                    "scenarios {} need the fake API server: they did not run on the real one.",
                    list(&fake_only)
                );
                eprintln!("{note}");
                notes.push(format!(
                    "Scenarios {}",
                    note.trim_start_matches("scenarios ")
                ));
            }
            scenarios.retain(|s| ON_REAL_SERVER.contains(s));
        }
        let mut report = Report::new(
            server,
            options.sizes.clone(),
            options.runs,
            operators.clone(),
            notes,
        );
        let programs = programs.on(server);
        let run = run_all(&programs, &options, &scenarios, &operators, &mut report);
        let sections = runtime.block_on(run);
        text.push_str(&if i == 0 {
            report.markdown()
        } else {
            report.section()
        });
        for section in sections {
            text.push('\n');
            text.push_str(&section);
        }
    }
    if let Err(error) = std::fs::write(&options.out, &text) {
        eprintln!("cannot write {}: {error}", options.out.display());
        println!("{text}");
        return ExitCode::FAILURE;
    }
    println!("{text}");
    eprintln!("written to {}", options.out.display());
    ExitCode::SUCCESS
}

/// Runs the scenarios into the report; returns the sections of those that are not comparisons
/// of the three operators (scenarios 8, 10 and 11).
async fn run_all(
    programs: &Programs,
    options: &Options,
    scenarios: &[u8],
    operators: &[Kind],
    report: &mut Report,
) -> Vec<String> {
    let sizes = &options.sizes;
    let mut sections = Vec::new();
    for &scenario in scenarios {
        if scenario == 8 {
            sections.push(sharding::sharded_burst(programs, sizes.objects, options.runs).await);
            continue;
        }
        if scenario == 11 {
            sections.push(peering::peering_at_rest(programs, operators, options.runs).await);
            continue;
        }
        if scenario == 10 {
            let section =
                server_scale::server_at_scale(programs, sizes.scale_objects, options.runs).await;
            sections.push(section);
            continue;
        }
        let with_ceiling = matches!(scenario, 1 | 5 | 9);
        let mut kinds = operators.to_vec();
        // Scenario 1 measures kopf-rs with its status storages too, once, even when asked
        // for by name.
        if scenario == 1
            && operators.contains(&Kind::KopfRs)
            && !kinds.contains(&Kind::KopfRsStatus)
        {
            kinds.push(Kind::KopfRsStatus);
        }
        if with_ceiling {
            kinds.push(Kind::Ceiling);
        }
        let runs = if scenario == 7 { 1 } else { options.runs };
        let dir = tempfile::tempdir().expect("a temporary directory");
        // Scenario 7's callgrind dumps go to `OPERATOR_BENCH_DUMPS` when set (kept, to be
        // read with `callgrind_annotate`), else into a temporary directory.
        let dumps = std::env::var_os("OPERATOR_BENCH_DUMPS")
            .map(PathBuf::from)
            .unwrap_or_else(|| dir.path().to_path_buf());
        if scenario == 7 && sizes.instruction_objects == 0 {
            continue;
        }
        for run in 0..runs {
            for &kind in &kinds {
                eprintln!(
                    "scenario {scenario}, run {}/{runs}: {}, on {}",
                    run + 1,
                    kind.title(),
                    programs.apiserver.title()
                );
                let result = match scenario {
                    1 => scenarios::create_burst(programs, kind, sizes.objects).await,
                    2 => scenarios::steady_updates(programs, kind, sizes, run).await,
                    3 => {
                        let objects = sizes.idle_objects;
                        scenarios::idle_scale(programs, kind, objects, scenarios::DEADLINE).await
                    }
                    4 => scenarios::shutdown(programs, kind, sizes.objects).await,
                    5 => scenarios::deletion(programs, kind, sizes.objects).await,
                    6 => scenarios::startup(programs, kind, sizes.objects).await,
                    9 => {
                        let mut sample = scenarios::Sample::new();
                        for (objects, idle) in scale::sizes(kind, sizes.scale_objects) {
                            let scaled = scale::at_scale(programs, kind, objects, idle).await;
                            sample.extend(scaled.sample);
                            if let Some(missed) = scaled.missed {
                                let missed = missed.lines().next().unwrap_or_default();
                                let (title, run) = (kind.title(), run + 1);
                                report.note(
                                    9,
                                    format!("{title}, run {run}, {objects} objects: {missed}"),
                                );
                            }
                        }
                        Ok(sample)
                    }
                    _ => {
                        let (objects, daemons) = (sizes.instruction_objects, sizes.objects);
                        scenarios::instructions(programs, kind, objects, daemons, &dumps).await
                    }
                };
                match &result {
                    Ok(sample) => {
                        for (name, value) in sample {
                            eprintln!("  {name}: {value:.3}");
                        }
                    }
                    Err(error) => eprintln!("  failed: {error}"),
                }
                report.add(scenario, run, kind, result);
            }
        }
    }
    sections
}
