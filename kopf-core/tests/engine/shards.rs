//! Static shards (Kopf 1.45's `settings.watching.shard_selectors`): two operators with
//! complementary shard selectors each handle exactly their half of the objects, on a server
//! that filters or on one that ignores the selector (then the operators filter on their side);
//! sharded operators of the same priority keep running instead of pausing, but still pause
//! for a higher priority; an invalid selector stops the operator at the start.

use std::collections::BTreeSet;

use kopf::Settings;
use kopf::operator::OperatorError;
use kopf_testing::{FakeApiServer, wait};
use serde_json::{Value, json};

use crate::logs::{lines_of, logs};
use crate::peering::{PEERINGS, recording, server_with_peering, status_at, wait_lines};
use crate::stopping::Running;
use crate::support::{COLLECTION, Calls, create, examples, install_crd, server_with_crd};

const LOWER: &str = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
const UPPER: &str = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')";

fn sharded(mut settings: Settings, selector: &str) -> Settings {
    settings
        .watching
        .shard_selectors
        .push((examples(), selector.into()));
    settings
}

/// The API server's hash of shard selectors: 64-bit FNV-1a.
fn fnv1a_64(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Creates the objects; their names split by the hash of their uids: (lower, upper half).
async fn create_all(
    client: &kube::Client,
    names: &[String],
) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut lower, mut upper) = (BTreeSet::new(), BTreeSet::new());
    for name in names {
        let created = create(client, name, json!({})).await;
        let uid = created["metadata"]["uid"].as_str().expect("a uid");
        let half = if fnv1a_64(uid) < 0x8000_0000_0000_0000 {
            &mut lower
        } else {
            &mut upper
        };
        half.insert(name.clone());
    }
    (lower, upper)
}

/// Whether the server filters lists by `shardSelector` itself: its list of one half has fewer
/// objects than all (both halves hold some). Lists of custom resources do not say so in
/// `metadata.shardInfo` (Kubernetes 1.36's unstructured lists lack the field).
async fn server_filters(client: &kube::Client) -> bool {
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("shardSelector", LOWER)
        .finish();
    let count = |path: String| async move {
        let request = http::Request::get(path).body(Vec::new()).unwrap();
        let list: Value = client.request(request).await.expect("a list");
        list["items"].as_array().map_or(0, Vec::len)
    };
    count(format!("{COLLECTION}?{query}")).await < count(COLLECTION.to_string()).await
}

/// The `shardSelector` of every list and watch of kopfexamples that the server received.
fn sent_selectors(server: &FakeApiServer) -> Vec<(String, Option<String>)> {
    server
        .requests()
        .into_iter()
        .filter(|r| {
            (r.verb == "list" || r.verb == "watch") && r.resource.starts_with("kopfexamples")
        })
        .map(|r| {
            let selector = form_urlencoded::parse(r.query.as_bytes())
                .find(|(key, _)| key == "shardSelector")
                .map(|(_, value)| value.into_owned());
            (r.verb, selector)
        })
        .collect()
}

/// Waits until `calls` holds exactly `expected` (in any order), then checks nothing else came.
async fn wait_exactly(calls: &Calls, expected: &BTreeSet<String>) {
    let all = calls.wait_len(expected.len()).await;
    let seen: BTreeSet<String> = all
        .iter()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect();
    assert_eq!(
        &seen, expected,
        "the objects of this half, each once: {all:?}"
    );
    assert_eq!(all.len(), expected.len(), "each once: {all:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selectors_split_the_objects_between_two_operators_on_a_server_that_filters() {
    split_between_two_operators(true).await;
}

/// As on a server without the feature (Kubernetes 1.36 with its gate off): the operators
/// filter on their side, and say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_selectors_split_the_objects_between_two_operators_on_a_server_that_ignores_them() {
    split_between_two_operators(false).await;
}

async fn split_between_two_operators(sharded_watches: bool) {
    logs(); // Captures the logs from now on.
    let server =
        crate::support::apiserver(FakeApiServer::builder().sharded_watches(sharded_watches)).await;
    install_crd(&server).await;
    let client = server.client();
    let names: Vec<String> = (0..16).map(|i| format!("sharded-{i}")).collect();
    // Half of them listed at the start, half of them watched.
    let (mut lower, mut upper) = create_all(&client, &names[..8]).await;
    let (lower_calls, upper_calls) = (Calls::default(), Calls::default());
    let settings = kopf_testing::test_settings();
    let first = Running::ready(recording(
        &server,
        &lower_calls,
        sharded(settings.clone(), LOWER),
    ))
    .await;
    let second = Running::ready(recording(&server, &upper_calls, sharded(settings, UPPER))).await;
    let (watched_lower, watched_upper) = create_all(&client, &names[8..]).await;
    lower.extend(watched_lower);
    upper.extend(watched_upper);
    assert!(
        !lower.is_empty() && !upper.is_empty(),
        "random uids fall in both halves"
    );

    wait_exactly(&lower_calls, &lower).await;
    wait_exactly(&upper_calls, &upper).await;

    let sent = sent_selectors(&server);
    assert!(sent.iter().any(|(verb, _)| verb == "list"), "{sent:?}");
    assert!(sent.iter().any(|(verb, _)| verb == "watch"), "{sent:?}");
    for (verb, selector) in &sent {
        let selector = selector.as_deref();
        assert!(
            selector == Some(LOWER) || selector == Some(UPPER),
            "every {verb} carries its operator's selector: {selector:?}"
        );
    }
    assert_eq!(server_filters(&client).await, sharded_watches);
    if !sharded_watches {
        // (Not counted when the server filters: the other test's lines share the capture.)
        let told = String::from_utf8_lossy(&logs().lock().unwrap())
            .lines()
            .filter(|line| {
                line.contains("the server's list tells no shardInfo")
                    && line.contains("kopfexamples")
            })
            .count();
        assert!(told >= 2, "each operator says it filters on its side");
    }
    first.stop().await.expect("a clean stop");
    second.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peering_keeps_sharded_operators_of_the_same_priority_running() {
    let name = "peering-sharded";
    lines_of(name); // Captures the logs from now on.
    let server = server_with_peering(name).await;
    let client = server.client();
    let (lower_calls, upper_calls) = (Calls::default(), Calls::default());
    let settings = crate::peering::settings(name, 7);
    let first = Running::ready(recording(
        &server,
        &lower_calls,
        sharded(settings.clone(), LOWER),
    ))
    .await;
    let second = Running::ready(recording(&server, &upper_calls, sharded(settings, UPPER))).await;
    wait("both entries in the peering object", || async {
        let entries = status_at(&client, &format!("{PEERINGS}/{name}")).await;
        (entries.len() == 2).then_some(())
    })
    .await;
    // Each judges the object with both entries now: unsharded, both would pause (the
    // objects would not be handled, and the pause would be logged).

    let names: Vec<String> = (0..12).map(|i| format!("peered-{i}")).collect();
    let (lower, upper) = create_all(&client, &names).await;
    wait_exactly(&lower_calls, &lower).await;
    wait_exactly(&upper_calls, &upper).await;
    let paused: Vec<String> = lines_of(name)
        .into_iter()
        .filter(|line| line.contains("Pausing") || line.contains("conflicting"))
        .collect();
    assert!(
        paused.is_empty(),
        "sharded operators do not pause: {paused:?}"
    );

    first.stop().await.expect("a clean stop");
    second.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peering_still_pauses_sharded_operators_for_a_higher_priority() {
    let name = "peering-sharded-lower";
    lines_of(name); // Captures the logs from now on.
    let server = server_with_peering(name).await;
    let client = server.client();
    let (high_calls, low_calls) = (Calls::default(), Calls::default());
    let high_settings = crate::peering::settings(name, 100);
    let high = Running::ready(recording(&server, &high_calls, high_settings)).await;
    let low_settings = sharded(crate::peering::settings(name, 1), LOWER);
    let (low, _) = Running::start(recording(&server, &low_calls, low_settings));
    wait_lines(name, "Pausing operations in favour of", 1).await;
    create(&client, "for-the-higher", json!({})).await;
    let calls = high_calls.wait_len(1).await;
    assert_eq!(calls, [json!("for-the-higher")]);
    assert!(
        low_calls.all().is_empty(),
        "the lower one is paused: {:?}",
        low_calls.all()
    );
    low.stop().await.expect("a clean stop");
    high.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_shard_selector_stops_the_operator_at_the_start() {
    let server = server_with_crd().await;
    let settings = sharded(
        kopf_testing::test_settings(),
        "shardRange(object.metadata.name, '0x0', '0x8000000000000000')",
    );
    let (running, _) = Running::start(recording(&server, &Calls::default(), settings));
    let error = running.returned().await.expect_err("an invalid selector");
    assert!(
        matches!(error, OperatorError::ShardSelector(_)),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("kopf.dev/v1/kopfexamples") || message.contains("kopfexamples"),
        "{message}"
    );
    assert!(
        message.contains("unsupported field \"object.metadata.name\""),
        "{message}"
    );
    server.stop().await;
}
