//! What must hold after every chaos run, checked from the server's journal (every change it
//! made, when) and the handler-call log (every call, started and ended):
//!
//! 1. A handler whose success was committed is never run again; only a call in flight (or
//!    whose result had not landed) when its process was killed may run again, and those
//!    re-runs are counted.
//! 2. No result is lost: every handler's latest success is stored, unless its process was
//!    killed before it landed (and then a re-run's is).
//! 3. No handler is lost: every object's creation, resize and deletion is handled.
//! 4. Retry numbers go up by one per failure, and survive restarts (they repeat only after a
//!    kill that came before the failure was recorded).
//! 5. The finalizer is removed only after the deletion handler of that same object finished.
//! 6. No object stays stuck: every deleted object is gone.
//! 7. Calls for one object never overlap.
//! 8. Once the faults stop, the operator converges and stops writing, and it exits cleanly on
//!    SIGTERM leaving no connection or watch open.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::UNIX_EPOCH;

use serde_json::Value;

use crate::calls::Line;
use crate::resource::{ANNOTATIONS, FINALIZER, GROUP, LAST_HANDLED, PLURAL};
use crate::run::Evidence;

/// The handlers and causes every object must see handled: (handler, cause).
const EXPECTED: [(&str, &str); 4] = [
    ("first", "create"),
    ("second", "create"),
    ("resize", "size=2"),
    ("cleanup", "delete"),
];

/// The numbers a run's report gives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Objects in the run.
    pub objects: usize,
    /// Faults that fired.
    pub faults: u64,
    /// SIGKILLs.
    pub kills: usize,
    /// Handler calls started.
    pub calls: usize,
    /// Calls that ran again after a kill took their result with it (allowed).
    pub reruns: usize,
    /// Successful calls whose result never landed although their process lived on.
    pub results_lost: usize,
    /// Objects left behind.
    pub stuck: usize,
}

/// The verdict on a run.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// What was violated, one sentence each; empty when all held.
    pub violations: Vec<String>,
    /// The numbers.
    pub tally: Tally,
}

/// One call, with its start and end lines joined.
#[derive(Debug, Clone)]
struct Call {
    pid: u32,
    token: String,
    uid: String,
    name: String,
    handler: String,
    cause: String,
    retry: u32,
    started: u128,
    /// When and how it ended; `None` when its process died first.
    ended: Option<(u128, String)>,
}

impl Call {
    fn describe(&self) -> String {
        format!(
            "{}'s {} for {} (retry {}, process {})",
            self.name, self.handler, self.cause, self.retry, self.pid
        )
    }
}

/// Checks a run's evidence.
pub fn check(evidence: &Evidence) -> Report {
    let calls = join(&evidence.calls);
    let killed: BTreeSet<u32> = evidence.kills.iter().map(|k| k.pid).collect();
    let commits = commits(evidence);
    let recorded = Records::of(evidence);
    let mut report = Report {
        violations: Vec::new(),
        tally: Tally {
            objects: evidence.plan.objects,
            faults: evidence.faults.values().sum(),
            kills: evidence.kills.len(),
            calls: calls.len(),
            stuck: evidence.stuck.len(),
            ..Tally::default()
        },
    };
    let violations = &mut report.violations;
    let tally = &mut report.tally;

    // 7: per object, calls never overlap.
    let mut by_object: BTreeMap<&str, Vec<&Call>> = BTreeMap::new();
    for call in &calls {
        by_object.entry(&call.uid).or_default().push(call);
    }
    for object_calls in by_object.values() {
        for pair in object_calls.windows(2) {
            let (before, after) = (pair[0], pair[1]);
            match &before.ended {
                Some((ended, _)) if after.started < *ended => violations.push(format!(
                    "{} overlapped {}",
                    after.describe(),
                    before.describe()
                )),
                None if !killed.contains(&before.pid) => violations.push(format!(
                    "{} never ended, though its process was not killed",
                    before.describe()
                )),
                None if after.pid == before.pid => violations.push(format!(
                    "{} started while {} had not ended",
                    after.describe(),
                    before.describe()
                )),
                _ => {}
            }
        }
    }

    // 1, 2 and 4: per object, handler and cause.
    let mut by_cause: BTreeMap<(&str, &str, &str), Vec<&Call>> = BTreeMap::new();
    for call in &calls {
        by_cause
            .entry((&call.uid, &call.handler, &call.cause))
            .or_default()
            .push(call);
    }
    for series in by_cause.values() {
        for pair in series.windows(2) {
            let (before, after) = (pair[0], pair[1]);
            let before_killed = killed.contains(&before.pid);
            match before.ended.as_ref().map(|(_, outcome)| outcome.as_str()) {
                Some("temporary") => {
                    let expected = if before_killed {
                        before.retry..=before.retry + 1
                    } else {
                        before.retry + 1..=before.retry + 1
                    };
                    if !expected.contains(&after.retry) {
                        violations.push(format!(
                            "{} came after a failure at retry {}",
                            after.describe(),
                            before.retry
                        ));
                    }
                }
                _ => {
                    // A re-run after a success or a call cut short.
                    match recorded.completed(before) {
                        Some(at) if at < after.started => violations.push(format!(
                            "{} re-ran a handler whose success had been recorded ({})",
                            after.describe(),
                            before.describe()
                        )),
                        _ if !before_killed => violations.push(format!(
                            "{} re-ran {} although no kill took its result",
                            after.describe(),
                            before.describe()
                        )),
                        _ => tally.reruns += 1,
                    }
                    if after.retry < before.retry {
                        violations.push(format!(
                            "{} went back from retry {}",
                            after.describe(),
                            before.retry
                        ));
                    }
                }
            }
        }
        // The latest success must have landed, unless a kill took it: then the state it
        // handled was handled again (a re-run, seen above) or was superseded (a transient
        // state); the expected causes' results are checked below.
        let Some(last) = series.last() else { continue };
        let succeeded = matches!(&last.ended, Some((_, outcome)) if outcome == "ok");
        let stores_result = last.handler != "cleanup";
        if succeeded
            && stores_result
            && !killed.contains(&last.pid)
            && !commits.contains_key(last.token.as_str())
        {
            tally.results_lost += 1;
            violations.push(format!(
                "{} succeeded, but its result never landed",
                last.describe()
            ));
        }
        if !succeeded && !killed.contains(&last.pid) {
            violations.push(format!(
                "{} was the last call, and it did not succeed",
                last.describe()
            ));
        }
    }

    // 3: every object's handlers ran to success, and their results landed.
    let uids = uids(evidence);
    for (uid, name) in &uids {
        for (handler, cause) in EXPECTED {
            let series = by_cause.get(&(uid.as_str(), handler, cause));
            let succeeded = || {
                series
                    .into_iter()
                    .flatten()
                    .filter(|c| matches!(&c.ended, Some((_, o)) if o == "ok"))
            };
            if succeeded().next().is_none() {
                violations.push(format!("{name}'s {handler} for {cause} never succeeded"));
            } else if handler != "cleanup"
                && !succeeded().any(|c| commits.contains_key(c.token.as_str()))
            {
                tally.results_lost += 1;
                violations.push(format!(
                    "{name}'s {handler} for {cause} succeeded, but no result of it landed"
                ));
            }
        }
    }

    // 5: the finalizer goes only after the deletion handler finished.
    for (uid, released) in finalizers_released(evidence) {
        let finished = by_cause
            .get(&(uid.as_str(), "cleanup", "delete"))
            .into_iter()
            .flatten()
            .filter_map(|c| match &c.ended {
                Some((at, outcome)) if outcome == "ok" => Some(*at),
                _ => None,
            })
            .min();
        let name = uids.get(&uid).cloned().unwrap_or_default();
        match finished {
            Some(at) if at < released => {}
            Some(_) => violations.push(format!(
                "{name}'s finalizer was removed before its deletion handler finished"
            )),
            None => violations.push(format!(
                "{name}'s finalizer was removed, and its deletion handler never finished"
            )),
        }
    }

    // 6 and 8.
    for name in &evidence.stuck {
        violations.push(format!("{name} was stuck: never deleted"));
    }
    for timeout in &evidence.timeouts {
        violations.push(format!("timed out in {timeout}"));
    }
    if !evidence.quiet {
        violations.push("the operator kept writing after the faults stopped".into());
    }
    if let Err(error) = &evidence.clean_exit {
        violations.push(format!("the exit was not clean: {error}"));
    }
    report
}

/// Calls with their ends, ordered by start (whatever the order of their lines).
fn join(lines: &[Line]) -> Vec<Call> {
    let ends: BTreeMap<&str, &Line> = lines
        .iter()
        .filter(|line| line.phase != "start")
        .map(|line| (line.token.as_str(), line))
        .collect();
    let mut calls: Vec<Call> = lines
        .iter()
        .filter(|line| line.phase == "start")
        .map(|line| Call {
            pid: line.pid,
            token: line.token.clone(),
            uid: line.uid.clone(),
            name: line.name.clone(),
            handler: line.handler.clone(),
            cause: line.cause.clone(),
            retry: line.retry,
            started: line.at,
            ended: ends
                .get(line.token.as_str())
                .map(|end| (end.at, end.phase.clone())),
        })
        .collect();
    calls.sort_by_key(|c| c.started);
    calls
}

fn resource() -> String {
    format!("{PLURAL}.{GROUP}")
}

fn nanos(at: std::time::SystemTime) -> u128 {
    at.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

/// When each token first appeared in a stored result.
fn commits(evidence: &Evidence) -> BTreeMap<&str, u128> {
    let mut commits = BTreeMap::new();
    for change in evidence.journal.iter().filter(|c| c.resource == resource()) {
        let Some(status) = change.object["status"].as_object() else {
            continue;
        };
        for token in status.values().filter_map(|v| v["token"].as_str()) {
            commits.entry(token).or_insert_with(|| nanos(change.at));
        }
    }
    commits
}

/// What the journal says of handlers' completions: for each object, when a handler's
/// progress record said success, and when a cycle ended (the diff-base changed, or the
/// finalizer went).
struct Records {
    by_uid: BTreeMap<String, Vec<(u128, Completion)>>,
}

enum Completion {
    /// The progress record under this annotation said success.
    Handler(String),
    /// The whole cycle ended.
    Cycle,
}

impl Records {
    fn of(evidence: &Evidence) -> Self {
        let mut by_uid: BTreeMap<String, Vec<(u128, Completion)>> = BTreeMap::new();
        let mut last_handled: BTreeMap<String, Value> = BTreeMap::new();
        let mut finalized: BTreeSet<String> = BTreeSet::new();
        for change in evidence.journal.iter().filter(|c| c.resource == resource()) {
            let meta = &change.object["metadata"];
            let uid = meta["uid"].as_str().unwrap_or_default().to_string();
            let at = nanos(change.at);
            let entries = by_uid.entry(uid.clone()).or_default();
            let annotations = meta["annotations"].as_object();
            for (key, value) in annotations.into_iter().flatten() {
                if key == LAST_HANDLED || !key.starts_with(ANNOTATIONS) {
                    continue;
                }
                let record: Value = value
                    .as_str()
                    .and_then(|v| serde_json::from_str(v).ok())
                    .unwrap_or_default();
                if record["success"] == true {
                    entries.push((at, Completion::Handler(key.clone())));
                }
            }
            let handled = meta["annotations"][LAST_HANDLED].clone();
            if last_handled.get(&uid) != Some(&handled) {
                if !handled.is_null() {
                    entries.push((at, Completion::Cycle));
                }
                last_handled.insert(uid.clone(), handled);
            }
            let holds = meta["finalizers"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f == &Value::from(FINALIZER)));
            if holds {
                finalized.insert(uid.clone());
            } else if finalized.remove(&uid) {
                entries.push((at, Completion::Cycle));
            }
        }
        Records { by_uid }
    }

    /// When the journal first recorded the call's handler as done after the call started.
    fn completed(&self, call: &Call) -> Option<u128> {
        let prefix = format!("{ANNOTATIONS}{}", call.handler);
        self.by_uid
            .get(&call.uid)?
            .iter()
            .filter(|(at, _)| *at > call.started)
            .find(|(_, completion)| match completion {
                Completion::Cycle => true,
                Completion::Handler(key) => key.starts_with(&prefix),
            })
            .map(|(at, _)| *at)
    }
}

/// Every object's uid, with its name.
fn uids(evidence: &Evidence) -> BTreeMap<String, String> {
    evidence
        .journal
        .iter()
        .filter(|c| c.resource == resource())
        .map(|c| {
            let meta = &c.object["metadata"];
            (
                meta["uid"].as_str().unwrap_or_default().to_string(),
                meta["name"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// When each object lost kopf's finalizer while being deleted (or vanished with it).
fn finalizers_released(evidence: &Evidence) -> BTreeMap<String, u128> {
    let mut released = BTreeMap::new();
    let mut had: BTreeSet<String> = BTreeSet::new();
    for change in evidence.journal.iter().filter(|c| c.resource == resource()) {
        let meta = &change.object["metadata"];
        let uid = meta["uid"].as_str().unwrap_or_default().to_string();
        let holds = meta["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == &Value::from(FINALIZER)));
        if holds {
            had.insert(uid.clone());
        }
        let deleting = !meta["deletionTimestamp"].is_null() || change.event == "DELETED";
        if deleting && had.contains(&uid) && (!holds || change.event == "DELETED") {
            released.entry(uid).or_insert_with(|| nanos(change.at));
        }
    }
    released
}

/// The report's table: one row per run (or per group of runs, summed).
pub fn table(rows: &[(String, Report)]) -> String {
    let mut text = String::from(
        "| scenario | objects | faults injected | kills | handler calls | re-runs (allowed) | violations | results lost | objects stuck |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (name, report) in rows {
        let t = &report.tally;
        let _ = writeln!(
            text,
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} |",
            t.objects,
            t.faults,
            t.kills,
            t.calls,
            t.reruns,
            report.violations.len(),
            t.results_lost,
            t.stuck
        );
    }
    text
}

/// Sums reports (for a row over many runs): the violations are kept, the numbers added.
pub fn sum(reports: impl IntoIterator<Item = Report>) -> Report {
    reports
        .into_iter()
        .fold(Report::default(), |mut total, report| {
            total.violations.extend(report.violations);
            let (t, r) = (&mut total.tally, report.tally);
            t.objects = t.objects.max(r.objects);
            t.faults += r.faults;
            t.kills += r.kills;
            t.calls += r.calls;
            t.reruns += r.reruns;
            t.results_lost += r.results_lost;
            t.stuck += r.stuck;
            total
        })
}
