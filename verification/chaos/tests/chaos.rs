//! The chaos suite's fast tier: the chaos operator killed at every one of its writes in a
//! small scenario, and a scenario under every fault with repeated kills. After each run, the
//! invariants (`kopf_chaos::invariants`) must hold: nothing lost, nothing stuck, re-runs only
//! where a kill took a result with it.

use std::path::{Path, PathBuf};

use futures::future::join_all;
use kopf_chaos::invariants::{self, Report};
use kopf_chaos::run::{Crash, Evidence, Plan, every_crash_point, run};

fn operator() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_chaos-operator"))
}

fn dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("chaos")
        .join(name)
}

/// Runs a plan and checks it; on violations, says where the run's files are.
async fn checked(name: String, plan: Plan) -> (String, Evidence, Report) {
    let evidence = run(&plan, operator(), &dir(&name))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let report = invariants::check(&evidence);
    (name, evidence, report)
}

fn assert_held(results: &[(String, Evidence, Report)]) {
    let mut failures = String::new();
    for (name, evidence, report) in results {
        for violation in &report.violations {
            failures.push_str(&format!(
                "{name} ({}): {violation}\n",
                evidence.dir.display()
            ));
        }
    }
    assert!(failures.is_empty(), "invariants violated:\n{failures}");
}

/// Every crash point: the operator is killed right after each of its writes landed, and
/// right before each would have, then started again; every run must lose nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_at_any_write_loses_nothing() {
    let points = every_crash_point(2, operator(), &dir("crash-points"), 4)
        .await
        .expect("the runs ran");
    let reference = &points.reference;
    let operator_agents: std::collections::BTreeSet<_> = reference
        .requests
        .iter()
        .filter_map(|r| r.user_agent.as_deref())
        .filter(|agent| *agent != "chaos-driver")
        .collect();
    assert_eq!(
        operator_agents.into_iter().collect::<Vec<_>>(),
        [concat!("kopf-rs/", env!("CARGO_PKG_VERSION"))],
        "the operator names itself in every request"
    );
    assert!(reference.kills.is_empty());
    assert!(
        reference.writes >= 8,
        "the scenario makes writes to crash at: {}",
        reference.writes
    );

    let results: Vec<(String, Evidence, Report)> =
        std::iter::once(("reference".to_string(), reference.clone()))
            .chain(points.runs.iter().cloned())
            .map(|(name, evidence)| {
                let report = invariants::check(&evidence);
                (name, evidence, report)
            })
            .collect();
    assert_held(&results);
    let killed = points
        .runs
        .iter()
        .filter(|(_, e)| !e.kills.is_empty())
        .count();
    // The number of writes varies a little from run to run (a retry more or less): nearly
    // every crash point must still have been reached.
    assert!(
        killed * 10 >= points.runs.len() * 8,
        "only {killed} of {} runs reached their crash point",
        points.runs.len()
    );
    let rows: Vec<(String, Report)> = vec![(
        format!(
            "kill at each of {} writes, after and before it lands",
            reference.writes
        ),
        invariants::sum(results.into_iter().map(|(_, _, r)| r)),
    )];
    println!("{}", invariants::table(&rows));
}

/// Every fault at once, and the operator killed several times at writes drawn from the seed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_every_fault_and_repeated_kills_nothing_is_lost() {
    let plans = (1..=2).map(|seed| {
        (
            format!("faults-and-kills-seed-{seed}"),
            Plan {
                objects: 30,
                seed,
                faults: true,
                crash: Crash::Repeatedly { kills: 4 },
            },
        )
    });
    let results = join_all(plans.map(|(name, plan)| checked(name, plan))).await;
    assert_held(&results);
    for (name, evidence, _) in &results {
        assert!(!evidence.kills.is_empty(), "{name}: no kill happened");
        for fault in [
            "commit_then_fail",
            "commit_then_reset",
            "respond",
            "conflict",
            "reset_mid_body",
            "close_watch_after",
            "hold",
        ] {
            assert!(
                evidence.faults.contains_key(fault),
                "{name}: no {fault} fired: {:?}",
                evidence.faults
            );
        }
        // A lagging view was there for every read at resourceVersion=0, but kopf-rs reads
        // consistently (lists without a version, watches from the list's): no time travel.
        assert_eq!(evidence.faults.get("stale_view"), None, "{name}");
    }
    let rows: Vec<(String, Report)> = results
        .into_iter()
        .map(|(name, _, report)| (name, report))
        .collect();
    println!("{}", invariants::table(&rows));
}

/// The checker is no rubber stamp: a clean run's evidence, tampered with as each defect
/// would leave it, fails the invariant that defect breaks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_invariants_catch_each_kind_of_loss() {
    let plan = Plan {
        objects: 1,
        seed: 3,
        faults: false,
        crash: Crash::Never,
    };
    let (_, clean, report) = checked("tampered".into(), plan).await;
    assert_eq!(report.violations, Vec::<String>::new());
    let violated = |tamper: &dyn Fn(&mut Evidence)| {
        let mut evidence = clean.clone();
        tamper(&mut evidence);
        invariants::check(&evidence).violations.join("\n")
    };
    let last_at = clean.calls.iter().map(|c| c.at).max().unwrap();
    let first_ok = clean
        .calls
        .iter()
        .find(|c| c.handler == "first" && c.phase == "ok")
        .unwrap()
        .clone();

    // A handler run again although its success was recorded, by a process never killed.
    let rerun = violated(&|e| {
        for (phase, at) in [("start", last_at + 1), ("ok", last_at + 2)] {
            let mut line = first_ok.clone();
            line.token = "rerun".into();
            line.phase = phase.into();
            line.at = at;
            e.calls.push(line);
        }
    });
    assert!(
        rerun.contains("re-ran a handler whose success had been recorded"),
        "{rerun}"
    );

    // A result that never landed.
    let lost = violated(&|e| {
        for change in &mut e.journal {
            if change.object["status"]["first"]["token"] == first_ok.token.as_str() {
                change.object["status"]["first"] = serde_json::Value::Null;
            }
        }
    });
    assert!(
        lost.contains("its result never landed") && lost.contains("no result of it landed"),
        "{lost}"
    );

    // The finalizer removed before the deletion handler finished.
    let early = violated(&|e| {
        for line in e.calls.iter_mut().filter(|c| c.handler == "cleanup") {
            line.at = last_at + 1_000_000_000_000;
        }
    });
    assert!(early.contains("finalizer was removed before"), "{early}");

    // A handler lost: the deletion handler never called.
    let missing = violated(&|e| e.calls.retain(|c| c.handler != "cleanup"));
    assert!(
        missing.contains("cleanup for delete never succeeded"),
        "{missing}"
    );

    // Two calls for one object at once.
    let overlap = violated(&|e| {
        let resize = e
            .calls
            .iter()
            .position(|c| c.handler == "resize" && c.phase == "ok")
            .unwrap();
        e.calls[resize].at = last_at + 10;
    });
    assert!(overlap.contains("overlapped"), "{overlap}");

    // A retry number that skipped.
    let skipped = violated(&|e| {
        for line in e
            .calls
            .iter_mut()
            .filter(|c| c.handler == "second" && c.retry == 1)
        {
            line.retry = 2;
        }
    });
    assert!(
        skipped.contains("came after a failure at retry 0"),
        "{skipped}"
    );
}
