//! Scenario 9: one resource at scale (`--scale-objects`, 100,000 by default). Per operator:
//! the create burst at that size and, in the same round, at [`BASE`] objects, to compare its
//! throughput; its start with every object already handled (a new process, from its start to
//! the last resume handler); the peak RSS of both; and its idle memory at half and all of that
//! size, as scenario 3 measures it. The server ceiling does the burst only. Python Kopf runs
//! at [`KOPF_SCALE`] objects only (its 100,000 take hours); kopf-rs and kube-rs at that size
//! too (without the idle memory), so that each has a ratio with Kopf from the same round.
//!
//! Its fake API servers keep a longer history than the 10,000 changes they keep by default
//! ([`history_limit`]): with 100,000 objects, 10,000 changes are a few seconds of writes, so a
//! watch that lags that much, or a list in pages that takes that long, would expire again and
//! again (410) and the scenario would measure relists. A real API server serves continue
//! tokens until etcd's compaction, every five minutes by default, and keeps up to about
//! 100,000 events of each resource for watches.
//!
//! Every wait of a phase has a deadline that grows with the size ([`phase_deadline`]), and an
//! operator's phases together may take four times as long ([`TOTAL_PHASES`]). An operator
//! that misses a deadline (or fails) keeps the figures of the phases it finished; its later
//! phases are left out, with a note, and the run goes on with the next operator.

use std::time::{Duration, Instant};

use crate::operators::{Kind, Programs};
use crate::scenarios::{self, Handled, Sample};

/// The size of the create burst that the large one is compared with (scenario 1's).
pub(crate) const BASE: usize = 1000;

/// The size Python Kopf is measured at, and the others with it.
pub(crate) const KOPF_SCALE: usize = 10_000;

/// The sizes that `kind` is measured at, smallest first, with whether its idle memory is
/// measured at each (at the largest only).
pub(crate) fn sizes(kind: Kind, objects: usize) -> Vec<(usize, bool)> {
    match kind {
        Kind::Kopf => vec![(objects.min(KOPF_SCALE), true)],
        _ if objects > KOPF_SCALE => vec![(KOPF_SCALE, false), (objects, true)],
        _ => vec![(objects, true)],
    }
}

/// The figures of scenario 1's create burst kept at scale, as they are named there.
const BURST_FIGURES: [&str; 5] = [
    "wall time until the last status, s",
    "API writes per second",
    "operator CPU per object, ms",
    "operator peak RSS, MiB",
    "server CPU, s",
];

/// How long a wait of a phase with `objects` objects may take: a minute, and 10 ms per object
/// (100 objects per second, about an eighth of Python Kopf's rate in a 1,000-object burst on an
/// unloaded machine), at most half an hour.
pub(crate) fn phase_deadline(objects: usize) -> Duration {
    let seconds = 60 + objects as u64 / 100;
    Duration::from_secs(seconds.min(1800))
}

/// How many phase deadlines one operator's phases may take together.
pub(crate) const TOTAL_PHASES: u32 = 4;

/// The time one operator has left for its phases.
struct Budget {
    objects: usize,
    until: Instant,
}

impl Budget {
    fn new(objects: usize) -> Budget {
        Budget {
            objects,
            until: Instant::now() + phase_deadline(objects) * TOTAL_PHASES,
        }
    }

    /// The deadline for the waits of the next phase, `what`: its own, or what is left of the
    /// total if that is less; an error once nothing is left.
    fn next(&self, what: &str) -> Result<Duration, String> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let total = (phase_deadline(self.objects) * TOTAL_PHASES).as_secs();
            return Err(format!(
                "{what}: not tried, the {total} s for every phase ran out"
            ));
        }
        Ok(phase_deadline(self.objects).min(left))
    }
}

/// The changes the fake API servers of this scenario keep for watches and continued lists:
/// three per object (a creation and two writes), at least the server's default.
pub(crate) fn history_limit(objects: usize) -> usize {
    (3 * objects).max(10_000)
}

/// The name of the row with the burst's throughput at `objects` objects.
fn throughput(objects: usize) -> String {
    format!("create burst: objects per second, {objects} objects")
}

/// The name of the row with the throughput at `objects` over that at [`BASE`].
pub(crate) fn throughput_ratio(objects: usize) -> String {
    format!("create burst: throughput at {objects} / at {BASE} objects")
}

/// What one operator did at scale: the figures of the phases it finished, and why the others
/// are missing, if they are.
pub(crate) struct Scaled {
    pub(crate) sample: Sample,
    pub(crate) missed: Option<String>,
}

/// Runs the phases for `kind` with `objects` objects (and the idle memory if `idle`).
pub(crate) async fn at_scale(
    programs: &Programs,
    kind: Kind,
    objects: usize,
    idle: bool,
) -> Scaled {
    let history = history_limit(objects).to_string();
    let programs = &programs.with_server_options(&["--history-limit", &history]);
    let mut sample = Sample::new();
    let missed = phases(programs, kind, objects, idle, &mut sample)
        .await
        .err();
    Scaled { sample, missed }
}

/// The phases in order, each adding its figures to `sample`; the first failure ends them.
async fn phases(
    programs: &Programs,
    kind: Kind,
    objects: usize,
    idle: bool,
    sample: &mut Sample,
) -> Result<(), String> {
    let budget = Budget::new(objects);
    let base = scenarios::create_burst(programs, kind, BASE)
        .await
        .map_err(|e| format!("the {BASE}-object create burst: {e}"))?;
    let what = format!("the {objects}-object create burst");
    let deadline = budget.next(&what)?;
    let (burst, handled) = scenarios::create_burst_within(programs, kind, objects, deadline)
        .await
        .map_err(|e| format!("{what}: {e}"))?;
    let (rate, base_rate) = (
        figure(&burst, "objects per second"),
        figure(&base, "objects per second"),
    );
    sample.push((throughput(objects), rate));
    sample.push((throughput(BASE), base_rate));
    sample.push((throughput_ratio(objects), rate / base_rate));
    for name in BURST_FIGURES {
        if let Some((_, value)) = burst.iter().find(|(n, _)| n == name) {
            sample.push((format!("create burst at {objects}: {name}"), *value));
        }
    }
    if kind == Kind::Ceiling {
        handled.cluster.stop();
        return Ok(());
    }
    let resumed = match budget.next("the start with handled objects") {
        Ok(deadline) => resumed(programs, kind, &handled, deadline).await,
        Err(error) => Err(error),
    };
    handled.cluster.stop();
    let (first, last, peak) = resumed?;
    sample.push((
        format!("start → first resume handler, {objects} handled objects, s"),
        first,
    ));
    sample.push((
        format!("start → last resume handler, {objects} handled objects, s"),
        last,
    ));
    sample.push((
        format!("start with {objects} handled objects: operator peak RSS, MiB"),
        peak,
    ));
    if !idle {
        return Ok(());
    }
    let deadline = budget.next("idle memory")?;
    let idle = scenarios::idle_scale(programs, kind, objects, deadline)
        .await
        .map_err(|e| format!("idle memory: {e}"))?;
    sample.extend(
        idle.into_iter()
            .map(|(name, value)| (format!("idle: {name}"), value)),
    );
    Ok(())
}

/// A new operator's start to its first and last resume handler, with the objects the burst's
/// operator handled.
async fn resumed(
    programs: &Programs,
    kind: Kind,
    handled: &Handled,
    deadline: Duration,
) -> Result<(f64, f64, f64), String> {
    scenarios::handlers_after_start(programs, kind, handled, ("2", "resume_fn"), deadline)
        .await
        .map_err(|e| format!("the start with handled objects: {e}"))
}

/// A figure of a sample (NaN if it is not there).
fn figure(sample: &Sample, name: &str) -> f64 {
    sample
        .iter()
        .find(|(n, _)| n == name)
        .map_or(f64::NAN, |(_, value)| *value)
}
