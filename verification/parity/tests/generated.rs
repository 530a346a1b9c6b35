//! The generated tier of the differential suite: seeded random sequences of steps (creations,
//! changes of fields, labels and flags, restarts with and without changes made meanwhile,
//! deletions) over one operator with every kind of handler, each run with Python Kopf and
//! with kopf-rs, the outcomes compared. Slow, so ignored by default:
//!
//! ```text
//! cargo test -p kopf-parity --test generated -- --ignored --nocapture
//! PARITY_SEED=7 PARITY_SCENARIOS=20 PARITY_STEPS=12 cargo test -p kopf-parity --test generated -- --ignored
//! ```
//!
//! A failure prints the seed and the steps, to replay with `PARITY_SEED` and one scenario.

use std::path::PathBuf;

use kopf_parity::driver::{self, Environment, Side};
use kopf_parity::{python, scenarios};

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

#[test]
#[ignore = "slow: minutes per scenario; run with --ignored"]
fn generated_scenarios_behave_as_in_kopf() {
    let Some(python) = python::python("generated_scenarios_behave_as_in_kopf") else {
        return;
    };
    let environment = Environment {
        python,
        operator: PathBuf::from(env!("CARGO_BIN_EXE_parity-operator")),
        workdir: PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("parity-generated"),
    };
    let first = setting("PARITY_SEED", 1);
    let count = setting("PARITY_SCENARIOS", 10);
    let steps = usize::try_from(setting("PARITY_STEPS", 10)).unwrap_or(10);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let (mut calls, mut failed) = (0, Vec::new());
    for seed in first..first + count {
        let scenario = scenarios::generated(seed, steps);
        let (kopf, ours) = runtime.block_on(async {
            tokio::join!(
                driver::run(Side::Kopf, &scenario, &environment),
                driver::run(Side::KopfRs, &scenario, &environment),
            )
        });
        let differences = ours.differences(&kopf);
        calls += kopf.count_calls();
        if differences.is_empty() {
            println!("seed {seed}: no difference");
        } else {
            println!(
                "seed {seed}: {} differences\nsteps: {}\n{}",
                differences.len(),
                serde_json::to_string(&scenario.steps).unwrap_or_default(),
                differences.join("\n")
            );
            failed.push(seed);
        }
    }
    println!(
        "generated: {count} scenarios of {steps} steps from seed {first}, {calls} calls compared, \
         {} with differences {failed:?}",
        failed.len()
    );
    assert!(failed.is_empty(), "seeds with differences: {failed:?}");
}
