//! Lifecycles of the user's own (Kopf's callable `settings.execution.lifecycle`): they see the
//! due handlers' ids and retries and choose which run; what cannot be followed is logged and
//! the cycle runs as Kopf's default would.

use kopf::registry::{ChangeHandler, Registry};
use kopf::settings::{DueHandler, Lifecycle};
use kopf_testing::{DEADLINE, OperatorHarness, test_settings};
use serde_json::json;

use crate::logs::logs;
use crate::support::{Calls, create, examples, server_with_crd, wait_object};

/// Three creation handlers, each recording its call.
fn three(calls: &Calls) -> Registry {
    ["a_fn", "b_fn", "c_fn"]
        .into_iter()
        .fold(Registry::new(), |registry, id| {
            let calls = calls.clone();
            registry.with(ChangeHandler::on_create(examples(), id, move |_| {
                let calls = calls.clone();
                async move {
                    calls.record(json!(id));
                    Ok(None)
                }
            }))
        })
}

async fn handled_with(lifecycle: Lifecycle, name: &str) -> Vec<serde_json::Value> {
    let calls = Calls::default();
    let mut settings = test_settings();
    settings.execution.lifecycle = lifecycle;
    let server = server_with_crd().await;
    let harness = OperatorHarness::start_on(
        server,
        kopf::operator::Operator::new(three(&calls)).settings(settings),
    )
    .await;
    create(&harness.client(), name, json!({})).await;
    wait_object(&harness, name, "the creation handled", |o| {
        o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"].is_string()
    })
    .await;
    harness.stop().await.expect("a clean stop");
    calls.all()
}

/// Waits until the whole log (not only lines about an object) contains `text`.
async fn wait_logged(text: &str) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let logged = String::from_utf8_lossy(&logs().lock().unwrap()).contains(text);
        if logged {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "no line {text:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_lifecycle_sees_the_due_handlers_and_its_plan_is_followed() {
    let seen = Calls::default();
    let recorded = seen.clone();
    let reversed = Lifecycle::custom("reversed", move |due: &[DueHandler<'_>]| {
        let due: Vec<_> = due.iter().map(|d| json!([d.id, d.retries])).collect();
        recorded.record(json!(due));
        (0..due.len()).rev().collect()
    });
    let calls = handled_with(reversed, "reversed").await;
    assert_eq!(calls, [json!("c_fn"), json!("b_fn"), json!("a_fn")]);
    assert_eq!(
        seen.all()[0],
        json!([["a_fn", 0], ["b_fn", 0], ["c_fn", 0]]),
        "in registration order, with their retries"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_lifecycle_that_returns_nonsense_or_panics_is_logged_and_runs_as_asap() {
    logs();
    let out_of_range = Lifecycle::custom("out-of-range", |due: &[DueHandler<'_>]| vec![due.len()]);
    let calls = handled_with(out_of_range, "out-of-range").await;
    assert_eq!(calls, [json!("a_fn"), json!("b_fn"), json!("c_fn")]);
    wait_logged("The lifecycle 'out-of-range' returned [3] for the due handlers [a_fn, b_fn, c_fn]: position 3 is out of range").await;

    let twice = Lifecycle::custom("twice", |_: &[DueHandler<'_>]| vec![0, 0]);
    let calls = handled_with(twice, "twice").await;
    assert_eq!(calls, [json!("a_fn"), json!("b_fn"), json!("c_fn")]);
    wait_logged("The lifecycle 'twice' returned [0, 0]").await;

    let panicking = Lifecycle::custom("panicking", |_: &[DueHandler<'_>]| panic!("no plan today"));
    let calls = handled_with(panicking, "panicking").await;
    assert_eq!(calls, [json!("a_fn"), json!("b_fn"), json!("c_fn")]);
    wait_logged(
        "The lifecycle 'panicking' panicked on the due handlers [a_fn, b_fn, c_fn]: no plan today",
    )
    .await;
}
