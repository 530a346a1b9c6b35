//! The chaos suite's long tier, in one command:
//!
//! ```sh
//! cargo run --release -p kopf-chaos --bin chaos -- --objects 1000 --seeds 3 --kills 10
//! ```
//!
//! For each seed, it runs the chaos operator over the objects under every transient fault,
//! killed with SIGKILL `--kills` times at writes drawn from the seed; with `--crash-points N`,
//! also every crash point (after and before each write lands) of an `N`-object scenario. It
//! prints the table the README shows, every violation found, and exits with 1 if any.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use kopf_chaos::invariants::{self, Report};
use kopf_chaos::run::{Crash, Plan, every_crash_point, run};

/// Runs the chaos suite's long tier and prints its table.
#[derive(Debug, Parser)]
#[command(name = "chaos")]
struct Options {
    /// Objects per run under faults and kills.
    #[arg(long, default_value_t = 1000)]
    objects: usize,
    /// Seeds to run (1..=N).
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// Run this seed only (to replay a run that failed).
    #[arg(long)]
    seed: Option<u64>,
    /// SIGKILLs per run.
    #[arg(long, default_value_t = 10)]
    kills: u32,
    /// Also kill at every write of a scenario with this many objects (0: skip).
    #[arg(long, default_value_t = 3)]
    crash_points: usize,
    /// The chaos operator's binary (default: `chaos-operator` next to this one).
    #[arg(long)]
    operator: Option<PathBuf>,
    /// Where the runs' files go (default: a folder in the system's temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let options = Options::parse();
    let Some(operator) = options.operator.clone().or_else(|| {
        let me = std::env::current_exe().ok()?;
        Some(me.with_file_name("chaos-operator"))
    }) else {
        eprintln!("chaos: cannot find chaos-operator; give --operator");
        return ExitCode::from(2);
    };
    let dir = options
        .dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("kopf-chaos"));
    let mut rows: Vec<(String, Report)> = Vec::new();

    if options.crash_points > 0 {
        eprintln!(
            "chaos: every crash point of {} objects",
            options.crash_points
        );
        match every_crash_point(
            options.crash_points,
            &operator,
            &dir.join("crash-points"),
            2,
        )
        .await
        {
            Ok(points) => {
                let writes = points.reference.writes;
                let reports = std::iter::once(&points.reference)
                    .chain(points.runs.iter().map(|(_, evidence)| evidence))
                    .map(invariants::check);
                rows.push((
                    format!("SIGKILL at each of {writes} writes, after and before it lands"),
                    invariants::sum(reports),
                ));
            }
            Err(error) => {
                eprintln!("chaos: {error}");
                return ExitCode::from(2);
            }
        }
    }

    let seeds = match options.seed {
        Some(seed) => seed..=seed,
        None => 1..=options.seeds,
    };
    for seed in seeds {
        let name = format!("every fault, {} SIGKILLs, seed {seed}", options.kills);
        eprintln!("chaos: {name}");
        let plan = Plan {
            objects: options.objects,
            seed,
            faults: true,
            crash: Crash::Repeatedly {
                kills: options.kills,
            },
        };
        match run(&plan, &operator, &dir.join(format!("seed-{seed}"))).await {
            Ok(evidence) => {
                let report = invariants::check(&evidence);
                eprintln!(
                    "chaos: {} violations, {} kills, faults {:?}",
                    report.violations.len(),
                    evidence.kills.len(),
                    evidence.faults
                );
                for violation in &report.violations {
                    eprintln!("chaos:   {violation}");
                }
                if !report.violations.is_empty()
                    && let Err(error) = keep_evidence(&evidence).await
                {
                    eprintln!("chaos: keeping the evidence failed: {error}");
                }
                rows.push((name, report));
            }
            Err(error) => {
                eprintln!("chaos: {error}");
                return ExitCode::from(2);
            }
        }
    }

    println!("{}", invariants::table(&rows));
    let violations: Vec<&String> = rows.iter().flat_map(|(_, r)| &r.violations).collect();
    for violation in &violations {
        println!("- {violation}");
    }
    println!(
        "the runs' files (call logs, operator logs): {}",
        dir.display()
    );
    if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Keeps a failed run's journal, request log and violations next to its call log, for a look
/// into what happened (`journal.jsonl`, `requests.jsonl`, `violations.txt`).
async fn keep_evidence(evidence: &kopf_chaos::run::Evidence) -> std::io::Result<()> {
    let lines = |values: Vec<serde_json::Value>| {
        values.iter().map(|v| format!("{v}\n")).collect::<String>()
    };
    let journal = evidence
        .journal
        .iter()
        .map(|c| {
            serde_json::json!({
                "rv": c.resource_version,
                "event": c.event,
                "resource": c.resource,
                "at": c.at.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default().to_string(),
                "object": c.object,
            })
        })
        .collect();
    let requests = evidence
        .requests
        .iter()
        .map(|r| serde_json::to_value(r).unwrap_or_default())
        .collect();
    let violations = kopf_chaos::invariants::check(evidence)
        .violations
        .join("\n");
    tokio::fs::write(evidence.dir.join("journal.jsonl"), lines(journal)).await?;
    tokio::fs::write(evidence.dir.join("requests.jsonl"), lines(requests)).await?;
    tokio::fs::write(evidence.dir.join("violations.txt"), violations).await
}
