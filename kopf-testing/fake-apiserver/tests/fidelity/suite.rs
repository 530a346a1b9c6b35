//! The whole suite on a pair of servers: every sequence, several at once, each in a
//! namespace of its own; those that forget the fake server's history run alone at the end.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt as _;
use serde_json::{Value, json};

use super::report::Report;
use super::run::{Context, run};
use super::sequence::Sequence;
use super::servers::Server;
use super::webhook_server::{Answer, WebhookServer};
use super::{generated, recorded};

/// How many sequences run at once: enough to keep both servers busy while one waits for
/// the real server's controllers, few enough for a machine of two cores.
const AT_ONCE: usize = 6;

/// Runs every sequence on `fake` and `real` and reports what differs.
pub(crate) async fn compare(fake: &Server, real: &Server) -> Report {
    let started = Instant::now();
    let context = Context {
        webhook: WebhookServer::start(Arc::new(answer)).await,
    };
    // `KOPF_FIDELITY_ONLY=text`: only the sequences whose names contain it (to look into one).
    let only = std::env::var("KOPF_FIDELITY_ONLY").unwrap_or_default();
    let chosen = |s: &Sequence| s.name.contains(&only);
    let generated: Vec<Sequence> = generated::sequences().into_iter().filter(chosen).collect();
    let mut recorded = recorded::sequences();
    recorded.sequences.retain(chosen);
    let mut report = Report {
        generated: generated.len(),
        recorded: recorded.sequences.len(),
        left_out: recorded.left_out,
        partial: !only.is_empty(),
        ..Report::default()
    };
    let all: Vec<(usize, Sequence)> = generated
        .into_iter()
        .chain(recorded.sequences)
        .enumerate()
        .collect();
    let (alone, together): (Vec<_>, Vec<_>) = all.iter().partition(|(_, s)| s.exclusive);
    let context = &context;
    let outcomes: Vec<_> = futures::stream::iter(together)
        .map(|(index, sequence)| async move {
            let ns = namespace(*index, &sequence.name);
            (sequence, run(sequence, &ns, context, fake, real).await)
        })
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    for (sequence, outcome) in outcomes {
        report.add(sequence, outcome);
    }
    for (index, sequence) in alone {
        let ns = namespace(*index, &sequence.name);
        let outcome = run(sequence, &ns, context, fake, real).await;
        report.add(sequence, outcome);
    }
    report.elapsed = started.elapsed();
    report
}

/// The namespace of a sequence (and the word in its cluster-scoped names): short, unique,
/// and readable in a report.
fn namespace(index: usize, name: &str) -> String {
    let slug: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let slug = slug.trim_matches('-');
    let mut ns = format!("f{index}-{slug}");
    ns.truncate(30);
    ns.trim_end_matches('-').to_string()
}

/// The suite's webhook answers by the last segment of its path: `deny` (with a message and
/// code 403), `patch` (adds a label), anything else is allowed with a warning (so that a
/// client can tell that the webhook was called).
fn answer(path: &str, review: &Value) -> Answer {
    let path = path.split('?').next().unwrap_or_default();
    match path.rsplit('/').next().unwrap_or_default() {
        "deny" => Answer::deny(review, "the suite's webhook says no", 403),
        "patch" => Answer::patch(
            review,
            json!([{"op": "add", "path": "/metadata/labels", "value": {"patched": "yes"}}]),
        ),
        _ => Answer::review(
            review,
            json!({"allowed": true, "warnings": ["the suite's webhook allowed it"]}),
        ),
    }
}
