//! The differential fidelity suite: the same request sequences go to the fake API server and
//! to a real kube-apiserver (Kubernetes 1.36 with etcd and the controller manager's garbage
//! collector), and their answers are compared after masking only what must differ (uids,
//! resourceVersion values, timestamps, generated names: see `mask`): status codes, the
//! headers clients read, bodies, `Status` errors, watch events.
//!
//! The sequences are generated (`generated/`: objects valid and invalid, the four patch kinds,
//! selectors, pagination, watches, conflicts, dry runs, deletions, RBAC, shards, CRDs with
//! CEL rules, webhooks) and recorded from the project's own suites (`recorded`: the requests
//! the engine, client and parity tests sent, replayed). Each runs in a namespace of its own,
//! several at once, on one server of each kind.
//!
//! A difference is either fixed in the fake server or kept in `known_differences.yaml` with
//! its reason; one that the table does not name fails the suite, and so does an entry that
//! names none.
//!
//! Run it: `cargo test -p kopf-fake-apiserver --test fidelity -- --nocapture` (the real server
//! is built once per machine; without Go it skips loudly, and fails under CI).

mod compare;
mod corpus;
mod generated;
mod mask;
mod recorded;
mod report;
mod run;
mod sequence;
mod servers;
mod suite;
mod table;
#[allow(
    dead_code,
    unreachable_pub,
    reason = "the webhook server of the apiserver tests, shared; this suite uses a part of it"
)]
#[path = "../apiserver/webhook_server.rs"]
mod webhook_server;

use kopf_fake_apiserver::RealApiServer;

use servers::Server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fake_server_answers_as_the_real_one() {
    let test = "the_fake_server_answers_as_the_real_one";
    let Some(real) = RealApiServer::for_test(test).await else {
        return;
    };
    let fake = Server::fake("fake").await;
    let real_side = Server::real(&real).await;
    let report = suite::compare(&fake, &real_side).await;
    print!("{}", report.render());
    real.stop().await;
    report.assert_explained();
}

/// The suite's own check, where no real server runs too: two fake servers answer every
/// sequence alike once masked, so whatever differs against the real server is the fake
/// server's doing, not the masks' or the sequences' (a step that depends on timing, a mask
/// that misses a server-made value).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_fake_servers_answer_alike() {
    let first = Server::fake("fake").await;
    let second = Server::fake("fake-2").await;
    let report = suite::compare(&first, &second).await;
    assert!(
        report.differences.is_empty(),
        "two fake servers differ, so the suite compares something other than the servers:\n{}",
        report.render()
    );
    assert!(report.compared > 200, "{} steps compared", report.compared);
}

/// Rebuilds `recorded.jsonl` from the request logs in the folder `KOPF_FIDELITY_RECORDINGS`
/// names (see `recorded` for how to record them).
#[test]
#[ignore = "run by hand after recording the suites"]
fn build_the_recorded_corpus() {
    let folder = std::env::var_os("KOPF_FIDELITY_RECORDINGS")
        .expect("KOPF_FIDELITY_RECORDINGS names the folder of the recorded logs");
    let built = corpus::build(std::path::Path::new(&folder));
    let steps: usize = built
        .sequences
        .iter()
        .map(|s| s["steps"].as_array().map_or(0, Vec::len))
        .sum();
    let header = serde_json::json!({
        "sessions": built.sessions,
        "requests": built.requests,
        "left_out": built.left_out,
    });
    let mut text = format!("{header}\n");
    for sequence in &built.sequences {
        text.push_str(&format!("{sequence}\n"));
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fidelity/recorded.jsonl");
    std::fs::write(path, text).expect("the corpus is written");
    println!(
        "{} sessions, {} requests recorded; {} sequences of {steps} steps kept; left out: {:?}",
        built.sessions,
        built.requests,
        built.sequences.len(),
        built.left_out
    );
}
