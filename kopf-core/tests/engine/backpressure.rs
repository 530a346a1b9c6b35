//! The budget of objects in flight (`settings.queueing.in_flight_limit`): a flood of objects
//! costs the operator what the budget allows, the watch is read no further past it, and still
//! every object is handled, every event of an object seen in order, the last one winning.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use kopf::operator::Operator;
use kopf::registry::{ChangeHandler, EventHandler, Registry};
use kopf_testing::{Fault, OperatorHarness, test_settings};
use serde_json::{Value, json};

use crate::support::{
    Calls, create, examples, metrics_url, patch, samples, scrape, server_with_crd, wait_object,
};

/// How long a flood may take to be handled: long, as a debug build on a busy machine is slow;
/// the tests wait for what they expect, never for a time.
const FLOOD_DEADLINE: Duration = Duration::from_secs(900);

/// Waits (up to [`FLOOD_DEADLINE`]) until `done` says so, polling.
async fn wait_long(what: &str, mut done: impl FnMut() -> bool) {
    let until = tokio::time::Instant::now() + FLOOD_DEADLINE;
    while !done() {
        assert!(
            tokio::time::Instant::now() < until,
            "timed out after {FLOOD_DEADLINE:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates `count` objects named `o<n>`, a few at a time, as a burst of clients would.
async fn flood(client: &kube::Client, count: usize) {
    futures::stream::iter(0..count)
        .map(|n| async move { create(client, &format!("o{n}"), json!({"seq": 0})).await })
        .buffer_unordered(32)
        .for_each(|_| async {})
        .await;
}

/// The value of a series the operator's metrics endpoint serves now.
async fn series(url: &str, name: &str) -> f64 {
    let (code, text) = scrape(url).await;
    assert_eq!(code, 200, "{text}");
    samples(&text).get(name).copied().unwrap_or(f64::NAN)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_objects_never_holds_more_than_the_budget_in_flight() {
    const LIMIT: usize = 50;
    const OBJECTS: usize = 10_000;
    let handled = Arc::new(Mutex::new(0usize));
    let counted = handled.clone();
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        move |_| {
            *counted.lock().unwrap() += 1;
            async { Ok(Some(json!("done"))) }
        },
    ));
    let mut settings = test_settings();
    settings.queueing.in_flight_limit = LIMIT;
    let server = server_with_crd().await;
    let operator = Operator::new(registry)
        .settings(settings)
        .metrics("http://127.0.0.1:0/metrics");
    let endpoint = operator.metrics_endpoint();
    let harness = OperatorHarness::start_on(server, operator).await;
    let url = metrics_url(&endpoint).await;

    flood(&harness.client(), OBJECTS).await;
    wait_long("every object handled", || {
        *handled.lock().unwrap() >= OBJECTS
    })
    .await;
    let peak = series(&url, "kopf_in_flight_peak").await;
    assert!(
        peak <= LIMIT as f64,
        "{peak} objects' states were in flight at once, over the budget of {LIMIT}"
    );
    assert!(peak >= 1.0, "the budget was used: {peak}");
    let until = tokio::time::Instant::now() + FLOOD_DEADLINE;
    let mut left = series(&url, "kopf_in_flight").await;
    while left > 0.0 && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
        left = series(&url, "kopf_in_flight").await;
    }
    assert_eq!(left, 0.0, "every state is given back once handled");
    assert_eq!(
        *handled.lock().unwrap(),
        OBJECTS,
        "each object handled once"
    );
    harness.stop().await.expect("a clean stop");
}

/// The `seq` of an object's spec.
fn seq(body: &Value) -> i64 {
    body["spec"]["seq"].as_i64().unwrap_or(-1)
}

/// Under a small budget, objects created and changed in a burst: every object's creation is
/// handled once, its changes in order (the newest state of each object's last change wins),
/// and its event handler sees every event of it, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_small_budget_every_object_is_handled_in_order_and_the_last_event_wins() {
    const LIMIT: usize = 8;
    const OBJECTS: usize = 300;
    const UPDATES: i64 = 3;
    type Seqs = Arc<Mutex<BTreeMap<String, Vec<i64>>>>;
    // Per object: the seqs that the event handler saw, in order, and those that the create
    // and the update handlers ran on.
    let (events, created, updated) = (Seqs::default(), Seqs::default(), Seqs::default());
    let record = |all: &Seqs| {
        let all = all.clone();
        move |inv: kopf::Invocation| {
            let (name, seq) = (inv.name().to_string(), seq(inv.body()));
            all.lock().unwrap().entry(name).or_default().push(seq);
            async { Ok(None) }
        }
    };
    let registry = Registry::new()
        .with(EventHandler::on_event(
            examples(),
            "event_fn",
            record(&events),
        ))
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            record(&created),
        ))
        .with(ChangeHandler::on_update(
            examples(),
            "update_fn",
            record(&updated),
        ));
    let mut settings = test_settings();
    settings.queueing.in_flight_limit = LIMIT;
    let server = server_with_crd().await;
    let operator = Operator::new(registry).settings(settings);
    let harness = OperatorHarness::start_on(server, operator).await;
    let client = harness.client();

    flood(&client, OBJECTS).await;
    for seq in 1..=UPDATES {
        futures::stream::iter(0..OBJECTS)
            .map(|n| {
                let client = &client;
                async move { patch(client, &format!("o{n}"), json!({"spec": {"seq": seq}})).await }
            })
            .buffer_unordered(32)
            .for_each(|_| async {})
            .await;
    }
    // The newest state of each object: its last change, as a create or an update handler saw
    // it (a creation whose object changed before its worker read it runs on the newest).
    let newest = |name: &String| {
        let (created, updated) = (created.lock().unwrap(), updated.lock().unwrap());
        let last = updated.get(name).or(created.get(name));
        last.and_then(|seqs| seqs.last().copied())
    };
    wait_long("every object's last change handled", || {
        (0..OBJECTS).all(|n| newest(&format!("o{n}")) == Some(UPDATES))
    })
    .await;
    wait_long("every object's last event seen", || {
        let events = events.lock().unwrap();
        events.len() == OBJECTS && events.values().all(|s| s.last() == Some(&UPDATES))
    })
    .await;
    harness.stop().await.expect("a clean stop");

    let created = created.lock().unwrap();
    let updated = updated.lock().unwrap();
    assert_eq!(created.len(), OBJECTS, "every object's creation handled");
    for (name, seqs) in created.iter() {
        assert_eq!(seqs.len(), 1, "{name}'s creation handled once: {seqs:?}");
        let after: Vec<i64> = seqs
            .iter()
            .chain(updated.get(name).into_iter().flatten())
            .copied()
            .collect();
        assert!(
            after.windows(2).all(|w| w[0] < w[1]),
            "{name}'s changes handled in order, once each: {after:?}"
        );
    }
    let events = events.lock().unwrap();
    for (name, seqs) in events.iter() {
        assert!(
            seqs.windows(2).all(|w| w[0] <= w[1]),
            "{name}'s events seen in order: {seqs:?}"
        );
        for seq in 0..=UPDATES {
            assert!(
                seqs.contains(&seq),
                "{name}'s event of seq {seq} seen: {seqs:?}"
            );
        }
    }
}

/// A user's change that lands while the operator's write of a creation is on its way, both
/// read from the watch only after the consistency timeout (the watch waits for room in the
/// budget): the change is handled as an update of the created object, never as a second
/// creation from the older state that the watch brings first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_read_late_behind_the_operators_own_write_is_no_second_creation() {
    let calls = Calls::default();
    let record = |trigger: &'static str| {
        let calls = calls.clone();
        move |inv: kopf::Invocation| {
            calls.record(json!({"trigger": trigger, "seq": seq(inv.body())}));
            async { Ok(None) }
        }
    };
    // The event handler of `blocker` holds its state in flight until the test lets it go:
    // with a budget of one, the watch is read no further meanwhile.
    let unblocked = Arc::new(tokio::sync::Semaphore::new(0));
    let gate = unblocked.clone();
    let subject = |inv: &kopf::Invocation| inv.name() == "subject";
    let registry = Registry::new()
        .with(EventHandler::on_event(examples(), "event_fn", move |inv| {
            let gate = gate.clone();
            let blocks = inv.name() == "blocker" && inv.body()["spec"]["block"] == true;
            async move {
                if blocks {
                    let _permit = gate.acquire().await;
                }
                Ok(None)
            }
        }))
        .with(ChangeHandler::on_create(examples(), "create_fn", record("create")).when(subject))
        .with(ChangeHandler::on_update(examples(), "update_fn", record("update")).when(subject));
    let mut settings = test_settings();
    settings.queueing.in_flight_limit = 1;
    // Short, to come soon; the outcome does not depend on it.
    settings.persistence.consistency_timeout = Duration::from_millis(200);
    let server = server_with_crd().await;
    let client = server.client();
    create(&client, "blocker", json!({"block": false})).await;
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(settings)).await;
    let server = harness.server();

    // The operator's write of the creation waits at the server; meanwhile the user changes
    // the object, and then the blocker, whose event holds the watch back once it is read.
    server.inject(
        Fault::hold_before_commit()
            .verb("patch")
            .name("subject")
            .times(1),
    );
    create(&client, "subject", json!({"seq": 0})).await;
    server
        .wait_held(kopf_testing::DEADLINE)
        .await
        .expect("the operator's write of the creation is held");
    patch(&client, "subject", json!({"spec": {"seq": 1}})).await;
    patch(&client, "blocker", json!({"spec": {"block": true}})).await;
    server.release_held();

    // The change is read (before the write, in the watch's order), the blocker's event
    // next, and the write's own event stays unread past the consistency timeout.
    let seen = calls
        .wait_until("the change handled", |calls| {
            calls.iter().filter(|c| c["trigger"] == "create").count() > 1
                || calls.iter().any(|c| c["trigger"] == "update")
        })
        .await;
    unblocked.add_permits(1);
    assert_eq!(
        seen,
        [
            json!({"trigger": "create", "seq": 0}),
            json!({"trigger": "update", "seq": 1}),
        ],
        "created once, then updated"
    );
    let diffbase = |object: &Value| {
        object["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"]
            .as_str()
            .and_then(|text| serde_json::from_str::<Value>(text).ok())
            .map(|essence| essence["spec"]["seq"].clone())
    };
    wait_object(&harness, "subject", "the update's diff-base", |object| {
        diffbase(object) == Some(json!(1))
    })
    .await;
    assert!(
        server
            .wait_quiet(Duration::from_millis(1500), kopf_testing::DEADLINE)
            .await
    );
    assert_eq!(
        calls.all(),
        seen,
        "nothing handled again once the watch caught up"
    );
    harness.stop().await.expect("a clean stop");
}
