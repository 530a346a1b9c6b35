//! The sequences recorded from the project's own suites (`recorded.jsonl`, built by
//! `corpus`), replayed: each recorded request is sent as it was, a repeated one polled until
//! the code the recording saw last, a watch read until it is quiet.
//!
//! Rebuild the corpus after recording the suites (the fake server writes one log per server
//! into the folder `KOPF_FAKE_APISERVER_RECORD` names):
//!
//! ```text
//! KOPF_FAKE_APISERVER_RECORD=/tmp/recordings cargo test -p kopf-core --test engine
//! KOPF_FAKE_APISERVER_RECORD=/tmp/recordings cargo test -p kopf-fake-apiserver --test apiserver
//! KOPF_FIDELITY_RECORDINGS=/tmp/recordings cargo test -p kopf-fake-apiserver --test fidelity \
//!     build_the_recorded_corpus -- --ignored
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::sequence::{Condition, Sequence, Until, call};

/// The corpus: a line of what was left out, then one sequence per line.
const CORPUS: &str = include_str!("recorded.jsonl");

/// How long a recorded poll waits for the code the recording saw (shorter than a generated
/// poll's: a replay may never reach a state that a test reached with requests left out).
const PATIENCE: Duration = Duration::from_secs(10);

/// How long a recorded watch stays quiet before it is closed.
const QUIET: Duration = Duration::from_millis(500);

/// The recorded sequences, and the recorded requests left out, by why.
pub(crate) struct Recorded {
    pub(crate) sequences: Vec<Sequence>,
    pub(crate) left_out: BTreeMap<String, usize>,
}

pub(crate) fn sequences() -> Recorded {
    let mut lines = CORPUS.lines().filter(|l| !l.trim().is_empty());
    let header: Value = lines
        .next()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_default();
    let left_out = header["left_out"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(why, n)| (why.clone(), n.as_u64().unwrap_or(0) as usize))
        .collect();
    let sequences = lines
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("recorded.jsonl does not parse: {e}"));
            sequence(&value)
        })
        .collect();
    Recorded {
        sequences,
        left_out,
    }
}

fn sequence(value: &Value) -> Sequence {
    let name = value["name"].as_str().unwrap_or("recorded/unnamed");
    let mut sequence = Sequence::new(name);
    for ns in value["namespaces"].as_array().into_iter().flatten() {
        if let Some(ns) = ns.as_str() {
            sequence = sequence.namespace(ns);
        }
    }
    for step in value["steps"].as_array().into_iter().flatten() {
        if step["kind"] == "established" {
            sequence = sequence.established(step["crd"].as_str().unwrap_or_default());
            continue;
        }
        let label = step["label"].as_str().unwrap_or("step");
        let mut request = call(
            step["method"].as_str().unwrap_or("GET"),
            step["path"].as_str().unwrap_or("/"),
        );
        let content_type = step["content_type"].as_str().unwrap_or("application/json");
        if let Some(body) = step["body"].get("json") {
            request = request.json_as(content_type, body.clone());
        } else if let Some(text) = step["body"].get("text").and_then(Value::as_str) {
            request = request.text(content_type, text);
        }
        let code = step["code"].as_u64().unwrap_or(200) as u16;
        sequence = match step["kind"].as_str() {
            Some("watch") => sequence.watch(label, request, Until::Quiet(QUIET)),
            Some("poll") => sequence.poll_for(label, request, Condition::Code(code), PATIENCE),
            _ => sequence.send(label, request),
        };
    }
    sequence
}
