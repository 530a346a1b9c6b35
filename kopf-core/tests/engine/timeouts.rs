//! Every request has a timeout (Kopf's `settings.networking.request_timeout` and
//! `settings.watching`'s `connect_timeout` and `client_timeout`): a request that the server
//! never answers (held, or delayed for an hour) is cut after its timeout, and the operator
//! sends it again or moves on, and keeps running: a write does not keep its permit, a
//! candidate acquires its Lease, a ring of shards assigns them, a watch begins, a stalled
//! watch stream is watched again.

use std::time::Duration;

use kopf::Settings;
use kopf::operator::Operator;
use kopf::registry::{ChangeHandler, Registry};
use kopf::settings::{LeaseSettings, ShardingSettings};
use kopf_testing::{FakeApiServer, Fault, OperatorHarness, test_settings, wait};
use serde_json::json;

use crate::leadership::client_as;
use crate::stopping::Running;
use crate::support::{Calls, create, examples, get, install_crd, server_with_crd};

/// Far longer than any test may take: a request delayed this long is never answered.
const HOUR: Duration = Duration::from_secs(3600);
const LEASES: &str = "leases.coordination.k8s.io";

/// Test settings whose requests time out after a second.
fn timing_out() -> Settings {
    let mut settings = test_settings();
    settings.networking.request_timeout = Some(Duration::from_secs(1));
    settings
}

/// A create handler recording the objects' names and returning `"done"`.
fn creations(calls: &Calls) -> Registry {
    let calls = calls.clone();
    Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        move |invocation| {
            calls.record(json!(invocation.name()));
            async { Ok(Some(json!("done"))) }
        },
    ))
}

/// Waits until the object's handler's result is stored.
async fn wait_done(client: &kube::Client, name: &str) {
    wait(&format!("{name}'s result"), || async {
        get(client, name)
            .await
            .filter(|o| o["status"]["create_fn"] == "done")
    })
    .await;
}

/// The operator's first write is never answered, and it holds the only write permit: it is
/// cut after the request timeout and sent again, and the other object's write goes out.
async fn a_write_left_unanswered_is_sent_again(fault: Fault) {
    let calls = Calls::default();
    let server = server_with_crd().await;
    server.inject(fault.verb("patch").user_agent("kopf-rs/").times(1));
    let mut settings = timing_out();
    settings.networking.max_concurrent_writes = 1;
    let operator = Operator::new(creations(&calls)).settings(settings);
    let harness = OperatorHarness::start_on(server, operator).await;
    let client = harness.client();
    for name in ["first", "second"] {
        create(&client, name, json!({})).await;
    }
    for name in ["first", "second"] {
        wait_done(&client, name).await;
    }
    let faults = harness.server().stats().faults;
    assert_eq!(
        faults.values().sum::<u64>(),
        1,
        "the write was left unanswered: {faults:?}"
    );
    let mut handled: Vec<_> = calls.all();
    handled.sort_by_key(|call| call.to_string());
    assert_eq!(
        handled,
        [json!("first"), json!("second")],
        "each handled once"
    );
    drop(client);
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_held_forever_times_out_and_is_sent_again() {
    a_write_left_unanswered_is_sent_again(Fault::hold_before_commit()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_delayed_past_its_timeout_is_sent_again() {
    a_write_left_unanswered_is_sent_again(Fault::delay(HOUR)).await;
}

/// The candidate's first request for its Lease is never answered: it is cut, the candidate
/// tries again, leads, and serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_request_left_unanswered_does_not_stall_the_election() {
    let server = server_with_crd().await;
    let client = server.client();
    server.inject(
        Fault::delay(HOUR)
            .resource(LEASES)
            .user_agent("candidate/")
            .times(1),
    );
    let mut settings = timing_out();
    settings.peering.standalone = true;
    let mut lease = LeaseSettings::new("lease-unanswered");
    lease.namespace = Some("default".into());
    lease.identity = Some("candidate".into());
    lease.lease_duration = Duration::from_secs(3);
    lease.renew_deadline = Duration::from_secs(2);
    lease.retry_period = Duration::from_millis(500);
    settings.peering.lease = Some(lease);
    let calls = Calls::default();
    let operator = Operator::new(creations(&calls))
        .settings(settings)
        .client(client_as(&server, "candidate"));
    let (running, _) = Running::start(operator);
    create(&client, "led", json!({})).await;
    wait_done(&client, "led").await;
    let faults = server.stats().faults;
    assert_eq!(
        faults.get("delay"),
        Some(&1),
        "a request was left unanswered"
    );
    running.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}

/// Settings of a member of a ring of 4 shards, named `identity`.
fn member(ring: &str, identity: &str) -> Settings {
    let mut settings = timing_out();
    settings.peering.standalone = true;
    let mut sharding = ShardingSettings::new(4);
    sharding.name = ring.into();
    sharding.identity = Some(identity.into());
    sharding.lease_duration = Duration::from_secs(3);
    sharding.renew_deadline = Duration::from_secs(2);
    sharding.retry_period = Duration::from_millis(300);
    settings.peering.sharding = Some(sharding);
    settings
}

/// Waits until shard 0's Lease names this holder.
async fn wait_shard_0(client: &kube::Client, ring: &str, holder: &str) {
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/default/leases/{ring}-0");
    wait(&format!("shard 0 held by {holder}"), || async {
        let request = http::Request::get(&path).body(Vec::new()).unwrap();
        let lease: serde_json::Value = client.request(request).await.ok()?;
        let held = lease["spec"]["holderIdentity"].as_str()?;
        held.starts_with(holder).then_some(())
    })
    .await;
}

/// A member's first listing of the ring's Leases, and its first taking of a shard (a write of
/// the shard's Lease), are never answered: each is cut, and a later round takes the shard
/// all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_requests_left_unanswered_do_not_stall_the_ring() {
    let ring = "ring-unanswered";
    let server = crate::support::apiserver(FakeApiServer::builder()).await;
    install_crd(&server).await;
    let client = server.client();
    // A first member makes the shards' Leases, and frees them as it stops.
    let calls = Calls::default();
    let first = Operator::new(creations(&calls))
        .settings(member(ring, "first"))
        .client(client_as(&server, "first"));
    let first = Running::ready(first).await;
    wait_shard_0(&client, ring, "first").await;
    first.stop().await.expect("a clean stop");

    server.inject(
        Fault::delay(HOUR)
            .verb("list")
            .resource(LEASES)
            .user_agent("second/")
            .times(1),
    );
    server.inject(
        Fault::hold_before_commit()
            .verb("update")
            .resource(LEASES)
            .name(&format!("{ring}-0"))
            .user_agent("second/")
            .times(1),
    );
    let second = Operator::new(creations(&calls))
        .settings(member(ring, "second"))
        .client(client_as(&server, "second"));
    let (second, _) = Running::start(second);
    let held = server.wait_held(kopf_testing::DEADLINE).await;
    assert!(held.is_some(), "the taking of shard 0 was held");
    wait_shard_0(&client, ring, "second").await;
    let faults = server.stats().faults;
    assert_eq!(faults.get("delay"), Some(&1), "{faults:?}");
    assert_eq!(faults.get("hold"), Some(&1), "{faults:?}");
    create(&client, "sharded", json!({})).await;
    wait_done(&client, "sharded").await;
    server.cut_held();
    second.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}

/// A watch whose stream never begins (its answer delayed for an hour) is cut after the
/// watching connect timeout, well before the inactivity timeout, and watched again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_that_does_not_begin_is_sent_again() {
    let calls = Calls::default();
    let server = server_with_crd().await;
    server.inject(
        Fault::delay(HOUR)
            .verb("watch")
            .resource("kopfexamples.kopf.dev")
            .user_agent("kopf-rs/")
            .times(1),
    );
    let mut settings = test_settings();
    settings.watching.connect_timeout = Some(Duration::from_secs(1));
    settings.watching.inactivity_timeout = HOUR;
    let operator = Operator::new(creations(&calls)).settings(settings);
    let harness = OperatorHarness::start_on(server, operator).await;
    let client = harness.client();
    create(&client, "watched", json!({})).await;
    wait_done(&client, "watched").await;
    assert_eq!(harness.server().stats().faults.values().sum::<u64>(), 1);
    drop(client);
    harness.stop().await.expect("a clean stop");
}

/// A watch stream that stalls (open, but silent) is ended by the operator after the watching
/// client timeout, well before the inactivity timeout, and watched again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_watch_stream_ends_after_the_client_timeout() {
    let calls = Calls::default();
    let server = server_with_crd().await;
    server.inject(
        Fault::silent_watch()
            .resource("kopfexamples.kopf.dev")
            .user_agent("kopf-rs/")
            .times(1),
    );
    let mut settings = test_settings();
    settings.watching.client_timeout = Some(Duration::from_secs(1));
    settings.watching.inactivity_timeout = HOUR;
    let operator = Operator::new(creations(&calls)).settings(settings);
    let harness = OperatorHarness::start_on(server, operator).await;
    let client = harness.client();
    create(&client, "watched", json!({})).await;
    wait_done(&client, "watched").await;
    assert_eq!(harness.server().stats().faults.values().sum::<u64>(), 1);
    drop(client);
    harness.stop().await.expect("a clean stop");
}
