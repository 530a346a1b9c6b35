//! The scripted scenarios of the differential suite: each runs with Python Kopf 1.45.2 and
//! with kopf-rs on fresh fake API servers, and the two outcomes (calls, final states, Events,
//! log lines, per object) must be the same, but for what `outcome::ALLOWED` names.
//!
//! They need the project's virtualenv with Kopf (`scripts/python-env`): without Python they
//! are skipped loudly (and fail under CI). They take turns: Kopf takes seconds to start, and
//! the machine's cores are better spent on one operator at a time.

use std::path::PathBuf;
use std::sync::Mutex;

use kopf_parity::driver::{self, Environment, Scenario, Side};
use kopf_parity::outcome::{FROM_STARTUP_TASKS, Outcome};
use kopf_parity::{python, scenarios};

/// One scenario at a time.
static TURN: Mutex<()> = Mutex::new(());

/// Runs the scenario with both sides and compares them; returns kopf-rs' outcome (`None`
/// where Python is missing and the scenario was skipped).
fn check(scenario: Scenario) -> Option<Outcome> {
    let _turn = TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let python = python::python(&scenario.name)?;
    let environment = Environment {
        python,
        operator: PathBuf::from(env!("CARGO_BIN_EXE_parity-operator")),
        workdir: PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("parity"),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    // Side by side, each on its own server: mostly, both wait for their operator's quiet.
    let (kopf, ours) = runtime.block_on(async {
        tokio::join!(
            driver::run(Side::Kopf, &scenario, &environment),
            driver::run(Side::KopfRs, &scenario, &environment),
        )
    });
    let differences = ours.differences(&kopf);
    assert!(
        differences.is_empty(),
        "{}: kopf-rs differs from Kopf ({} differences; runs kept in {}):\n{}",
        scenario.name,
        differences.len(),
        environment.workdir.display(),
        differences.join("\n")
    );
    let calls = kopf.count_calls();
    println!("{}: {calls} calls compared, no difference", scenario.name);
    Some(ours)
}

#[test]
fn lifecycle() {
    check(scenarios::lifecycle());
}

#[test]
fn fields_and_restarts() {
    check(scenarios::fields_and_restarts());
}

#[test]
fn filters() {
    check(scenarios::filters());
}

#[test]
fn errors() {
    check(scenarios::errors());
}

#[test]
fn subhandlers() {
    check(scenarios::subhandlers());
}

#[test]
fn executed_subhandlers() {
    check(scenarios::executed_subhandlers());
}

#[test]
fn executed_registered_subhandlers() {
    check(scenarios::executed_registered_subhandlers());
}

#[test]
fn startup_events() {
    let Some(ours) = check(scenarios::startup_events()) else {
        return;
    };
    // Left out of the comparison (Kopf posts none of them), but kopf-rs must post them: once
    // after the creation, once after the restart.
    let mut from_startup: Vec<String> = ours.events["one"]
        .iter()
        .filter(|event| FROM_STARTUP_TASKS.iter().any(|reason| event[1] == *reason))
        .map(ToString::to_string)
        .collect();
    from_startup.sort();
    assert_eq!(
        from_startup,
        [
            r#"["Normal","Startup","seen one"]"#,
            r#"["Normal","Startup","seen one"]"#,
            r#"["Warning","Noticed","noticed one"]"#,
            r#"["Warning","Noticed","noticed one"]"#,
        ]
    );
}

#[test]
fn resumes_and_events() {
    check(scenarios::resumes_and_events());
}

#[test]
fn deletions() {
    check(scenarios::deletions());
}

#[test]
fn daemons_and_timers() {
    check(scenarios::daemons_and_timers());
}

#[test]
fn live_views_and_field_filters() {
    check(scenarios::live_views_and_field_filters());
}

#[test]
fn indexes() {
    check(scenarios::indexes());
}

#[test]
fn stacked() {
    check(scenarios::stacked());
}

#[test]
fn namespace_patterns() {
    check(scenarios::namespace_patterns());
}

#[test]
fn clusterwide() {
    check(scenarios::clusterwide());
}
