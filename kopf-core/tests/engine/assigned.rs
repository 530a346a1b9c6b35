//! Assigned shards (`settings.peering.sharding`, `--shards N`): replicas in one process split
//! the objects by the shards recorded in Leases, hand shards over live when a replica joins or
//! leaves (daemons stop on one and start on the other, never both at once), keep a shard whose
//! drain does not end in time, and refuse settings that cannot work.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kopf::operator::{Operator, OperatorError};
use kopf::registry::{ChangeHandler, DaemonHandler, EventHandler, IndexHandler, Registry};
use kopf::settings::ShardingSettings;
use kopf::{Index, Settings};
use kopf_testing::{DEADLINE, FakeApiServer, Fault, wait};
use serde_json::{Value, json};

use crate::logs::logs;
use crate::stopping::Running;
use crate::support::{Calls, create, examples, install_crd};

const SHARDS: u32 = 8;
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/default/leases";

fn settings(identity: &str, ring: &str) -> Settings {
    let mut settings = kopf_testing::test_settings();
    let mut sharding = ShardingSettings::new(SHARDS);
    sharding.name = ring.into();
    sharding.identity = Some(identity.into());
    sharding.lease_duration = Duration::from_secs(3);
    sharding.renew_deadline = Duration::from_secs(2);
    sharding.retry_period = Duration::from_millis(300);
    sharding.drain_timeout = Duration::from_secs(10);
    settings.peering.sharding = Some(sharding);
    settings.peering.standalone = true;
    settings
}

/// A replica whose create handler records `[replica, name]`.
fn replica(server: &FakeApiServer, identity: &str, ring: &str, calls: &Calls) -> Operator {
    let calls = calls.clone();
    let who = identity.to_string();
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        move |invocation| {
            calls.record(json!([who, invocation.name()]));
            async { Ok(None) }
        },
    ));
    Operator::new(registry)
        .settings(settings(identity, ring))
        .client(server.client())
}

async fn server(sharded_watches: bool) -> FakeApiServer {
    let server =
        crate::support::apiserver(FakeApiServer::builder().sharded_watches(sharded_watches)).await;
    install_crd(&server).await;
    server
}

/// The holders of the ring's shards (the identity before the incarnation's `#`), by shard.
async fn holders(client: &kube::Client, ring: &str) -> BTreeMap<u32, String> {
    let request = http::Request::get(format!(
        "{LEASES}?labelSelector=kopf.dev%2Fshard-ring%3D{ring},kopf.dev%2Fshard-role%3Dshard"
    ))
    .body(Vec::new())
    .unwrap();
    let list: Value = client.request(request).await.expect("the leases");
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|lease| {
            let k = lease["metadata"]["name"]
                .as_str()?
                .strip_prefix(&format!("{ring}-"))?
                .parse()
                .ok()?;
            let holder = lease["spec"]["holderIdentity"].as_str()?;
            Some((k, holder.split('#').next()?.to_string()))
        })
        .collect()
}

/// Waits until the shards are held by exactly these replicas, each by one of them, spread
/// as evenly as the bound allows.
async fn wait_spread(
    client: &kube::Client,
    ring: &str,
    replicas: &[&str],
) -> BTreeMap<u32, String> {
    let expected: BTreeSet<String> = replicas.iter().map(|r| r.to_string()).collect();
    let capacity = SHARDS.div_ceil(replicas.len() as u32) as usize;
    wait(&format!("the shards spread over {replicas:?}"), || async {
        let holders = holders(client, ring).await;
        let mut load: HashMap<&String, usize> = HashMap::new();
        for holder in holders.values() {
            *load.entry(holder).or_default() += 1;
        }
        let spread = holders.len() == SHARDS as usize
            && load.keys().cloned().cloned().collect::<BTreeSet<_>>() == expected
            && load.values().all(|l| *l <= capacity);
        spread.then_some(holders)
    })
    .await
}

/// The shard of an object, as the replicas compute it: FNV-1a of the uid, scaled.
fn shard_of(uid: &str) -> u32 {
    let hash = uid.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    ((u128::from(hash) * u128::from(SHARDS)) >> 64) as u32
}

/// Creates objects; returns their shards by name.
async fn create_some(client: &kube::Client, prefix: &str, n: usize) -> BTreeMap<String, u32> {
    let mut shards = BTreeMap::new();
    for i in 0..n {
        let name = format!("{prefix}-{i}");
        let created = create(client, &name, json!({})).await;
        let uid = created["metadata"]["uid"].as_str().expect("a uid");
        shards.insert(name, shard_of(uid));
    }
    shards
}

/// Waits until every object was handled, then checks each was handled once, by the holder of
/// its shard at the time.
async fn wait_handled_once(
    calls: &Calls,
    objects: &BTreeMap<String, u32>,
    by: impl Fn(&str, u32) -> bool,
) {
    let all = calls
        .wait_until(&format!("{} objects handled", objects.len()), |all| {
            let names: BTreeSet<&str> = all.iter().filter_map(|c| c[1].as_str()).collect();
            objects.keys().all(|name| names.contains(name.as_str()))
        })
        .await;
    let mut seen: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for call in &all {
        seen.entry(call[1].as_str().unwrap())
            .or_default()
            .push(call[0].as_str().unwrap());
    }
    for (name, shard) in objects {
        let replicas = &seen[name.as_str()];
        assert_eq!(replicas.len(), 1, "{name} handled once: {replicas:?}");
        assert!(
            by(replicas[0], *shard),
            "{name} (shard {shard}) handled by {} who did not hold the shard",
            replicas[0]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_split_the_shards_and_take_them_over_as_they_come_and_go() {
    come_and_go(true, "ring-filtered").await;
}

/// As on a server without sharded watches: each replica filters the objects on its side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_split_the_shards_on_a_server_that_ignores_shard_selectors() {
    come_and_go(false, "ring-unfiltered").await;
}

async fn come_and_go(sharded_watches: bool, ring: &str) {
    let server = server(sharded_watches).await;
    let client = server.client();
    let calls = Calls::default();
    let before = create_some(&client, "before", 12).await;

    // Alone: all shards, all objects.
    let first = Running::ready(replica(&server, "first", ring, &calls)).await;
    wait_spread(&client, ring, &["first"]).await;
    wait_handled_once(&calls, &before, |r, _| r == "first").await;

    // A second replica joins: about half of the shards move, drained, to it.
    let second = Running::ready(replica(&server, "second", ring, &calls)).await;
    let holders = wait_spread(&client, ring, &["first", "second"]).await;
    let during = create_some(&client, "during", 24).await;
    wait_handled_once(&calls, &during, |r, shard| holders[&shard] == r).await;
    let moved_objects = before
        .values()
        .filter(|shard| holders[shard] == "second")
        .count();
    assert!(moved_objects < before.len(), "not everything moved");

    // The first leaves: its shards are released at its stop and taken at once.
    first.stop().await.expect("a clean stop");
    wait_spread(&client, ring, &["second"]).await;
    let after = create_some(&client, "after", 8).await;
    wait_handled_once(&calls, &after, |r, _| r == "second").await;

    // Nothing was handled twice, by the replica that got an object's shard either.
    let everything: BTreeMap<String, u32> = before.into_iter().chain(during).chain(after).collect();
    wait_handled_once(&calls, &everything, |_, _| true).await;
    second.stop().await.expect("a clean stop");
    assert!(
        holders_released(&client, ring).await,
        "the shards are released at the last stop"
    );
    drop(client);
    server.stop().await;
}

/// Whether every shard's Lease has no holder, and no member's Lease is left.
async fn holders_released(client: &kube::Client, ring: &str) -> bool {
    let request = http::Request::get(format!(
        "{LEASES}?labelSelector=kopf.dev%2Fshard-ring%3D{ring}"
    ))
    .body(Vec::new())
    .unwrap();
    let list: Value = client.request(request).await.expect("the leases");
    list["items"].as_array().unwrap().iter().all(|lease| {
        lease["metadata"]["labels"]["kopf.dev/shard-role"] == "shard"
            && lease["spec"]["holderIdentity"]
                .as_str()
                .unwrap_or_default()
                .is_empty()
    })
}

/// Which replica runs each object's daemon now; any overlap is recorded.
#[derive(Clone, Default)]
struct Exclusive {
    running: Arc<Mutex<HashMap<String, String>>>,
    overlaps: Arc<Mutex<Vec<String>>>,
    stops: Arc<Mutex<Vec<String>>>,
}

fn daemon_replica(
    server: &FakeApiServer,
    identity: &str,
    ring: &str,
    exclusive: &Exclusive,
) -> Operator {
    let exclusive = exclusive.clone();
    let who = identity.to_string();
    let registry = Registry::new().with(DaemonHandler::new(
        examples(),
        "monitor",
        move |invocation| {
            let exclusive = exclusive.clone();
            let who = who.clone();
            async move {
                let name = invocation.name().to_string();
                if let Some(other) = exclusive
                    .running
                    .lock()
                    .unwrap()
                    .insert(name.clone(), who.clone())
                {
                    exclusive
                        .overlaps
                        .lock()
                        .unwrap()
                        .push(format!("{name}: {other} and {who}"));
                }
                invocation.stopped().cancelled().await;
                exclusive
                    .stops
                    .lock()
                    .unwrap()
                    .push(format!("{:?}", invocation.stop_reason()));
                exclusive.running.lock().unwrap().remove(&name);
                Ok(None)
            }
        },
    ));
    Operator::new(registry)
        .settings(settings(identity, ring))
        .client(server.client())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_move_with_their_shards_and_never_run_on_two_replicas_at_once() {
    let ring = "ring-daemons";
    let server = server(true).await;
    let client = server.client();
    let objects = create_some(&client, "daemon", 16).await;
    let exclusive = Exclusive::default();
    let first = Running::ready(daemon_replica(&server, "first", ring, &exclusive)).await;
    let all_running = |replicas: Vec<(&'static str, BTreeSet<u32>)>| {
        let exclusive = exclusive.clone();
        let objects = objects.clone();
        async move {
            wait(
                "every object's daemon running on its shard's holder",
                || async {
                    let running = exclusive.running.lock().unwrap().clone();
                    let right = objects.iter().all(|(name, shard)| {
                        running.get(name).is_some_and(|who| {
                            replicas
                                .iter()
                                .any(|(r, shards)| r == who && shards.contains(shard))
                        })
                    });
                    right.then_some(())
                },
            )
            .await;
        }
    };
    let holders = wait_spread(&client, ring, &["first"]).await;
    all_running(vec![("first", holders.keys().copied().collect())]).await;

    let second = Running::ready(daemon_replica(&server, "second", ring, &exclusive)).await;
    let holders = wait_spread(&client, ring, &["first", "second"]).await;
    let of = |who: &str| -> BTreeSet<u32> {
        holders
            .iter()
            .filter(|(_, h)| *h == who)
            .map(|(k, _)| *k)
            .collect()
    };
    all_running(vec![("first", of("first")), ("second", of("second"))]).await;
    let moved = objects
        .values()
        .filter(|s| of("second").contains(s))
        .count();
    let stops = exclusive.stops.lock().unwrap().clone();
    assert_eq!(
        stops.iter().filter(|s| s.contains("ShardMoved")).count(),
        moved,
        "each moved object's daemon stopped once, for the move: {stops:?}"
    );

    second.stop().await.expect("a clean stop");
    let holders = wait_spread(&client, ring, &["first"]).await;
    all_running(vec![("first", holders.keys().copied().collect())]).await;
    first.stop().await.expect("a clean stop");
    assert!(
        exclusive.overlaps.lock().unwrap().is_empty(),
        "never two daemons of one object at once: {:?}",
        exclusive.overlaps.lock().unwrap()
    );
    drop(client);
    server.stop().await;
}

/// Where a replica's event handler leaves a handle to its index of the objects' names.
type Slot = Arc<Mutex<Option<Index<String, String>>>>;

fn indexing_replica(server: &FakeApiServer, identity: &str, ring: &str, slot: &Slot) -> Operator {
    let slot = slot.clone();
    let registry = Registry::new()
        .with(IndexHandler::new(
            examples(),
            "names",
            |invocation| async move { Ok(("all".to_string(), invocation.name().to_string())) },
        ))
        .with(EventHandler::on_event(
            examples(),
            "keep_index",
            move |invocation| {
                if let Ok(index) = invocation.index::<String, String>("names") {
                    *slot.lock().unwrap() = Some(index.clone());
                }
                async { Ok(None) }
            },
        ));
    Operator::new(registry)
        .settings(settings(identity, ring))
        .client(server.client())
}

/// The names in a replica's index, once it has one.
fn indexed(slot: &Slot) -> BTreeSet<String> {
    slot.lock()
        .unwrap()
        .as_ref()
        .and_then(|index| index.get(&"all".to_string()))
        .map(|store| store.iter().cloned().collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_hold_the_objects_of_the_shards_held_here_and_let_go_of_moved_ones() {
    let ring = "ring-indexes";
    let server = server(true).await;
    let client = server.client();
    let objects = create_some(&client, "indexed", 16).await;
    let (first_slot, second_slot) = (Slot::default(), Slot::default());
    let first = Running::ready(indexing_replica(&server, "first", ring, &first_slot)).await;
    wait_spread(&client, ring, &["first"]).await;
    let all: BTreeSet<String> = objects.keys().cloned().collect();
    wait("every object in the first replica's index", || async {
        (indexed(&first_slot) == all).then_some(())
    })
    .await;

    let second = Running::ready(indexing_replica(&server, "second", ring, &second_slot)).await;
    let holders = wait_spread(&client, ring, &["first", "second"]).await;
    let of = |who: &str| -> BTreeSet<String> {
        objects
            .iter()
            .filter(|(_, shard)| holders[shard] == who)
            .map(|(name, _)| name.clone())
            .collect()
    };
    wait(
        "each replica's index holds its shards' objects only",
        || async {
            (indexed(&first_slot) == of("first") && indexed(&second_slot) == of("second"))
                .then_some(())
        },
    )
    .await;
    first.stop().await.expect("a clean stop");
    second.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_whose_drain_does_not_end_in_time_stays_until_its_handler_finishes() {
    logs(); // Captures the logs from now on.
    let ring = "ring-stuck";
    let server = server(true).await;
    let client = server.client();
    let calls = Calls::default();
    let release = Arc::new(tokio::sync::Notify::new());
    let slow = {
        let calls = calls.clone();
        let release = release.clone();
        let registry = Registry::new().with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            move |invocation| {
                let calls = calls.clone();
                let release = release.clone();
                async move {
                    calls.record(json!(["first", invocation.name()]));
                    release.notified().await;
                    Ok(None)
                }
            },
        ));
        let mut settings = settings("first", ring);
        settings.peering.sharding.as_mut().unwrap().drain_timeout = Duration::from_millis(500);
        Operator::new(registry)
            .settings(settings)
            .client(server.client())
    };
    let first = Running::ready(slow).await;
    wait_spread(&client, ring, &["first"]).await;
    // One object in every shard, its handler in flight until released.
    let mut objects = BTreeMap::new();
    let mut i = 0;
    while objects.values().collect::<BTreeSet<_>>().len() < SHARDS as usize {
        objects.extend(create_some(&client, &format!("stuck-{i}"), 1).await);
        i += 1;
    }
    calls.wait_len(objects.len()).await;

    let second = Running::ready(replica(&server, "second", ring, &calls)).await;
    // This test's lines only: the log holds the other tests' too.
    let timed_out = || {
        String::from_utf8_lossy(&logs().lock().unwrap())
            .lines()
            .filter(|line| line.contains("was not drained within") && line.contains(ring))
            .count()
    };
    let listings = || {
        server
            .requests()
            .iter()
            .filter(|r| r.verb == "list" && r.resource.starts_with("kopfexamples"))
            .count()
    };
    wait("a drain that timed out", || async {
        (timed_out() > 0).then_some(())
    })
    .await;
    // A drain that times out changes nothing the watchers follow: the shard's objects are
    // not listed again (a listing taken before a handler's write could come after it).
    let listed = listings();
    let failed = timed_out();
    wait("two more drains that timed out", || async {
        (timed_out() >= failed + 2).then_some(())
    })
    .await;
    assert_eq!(
        listings(),
        listed,
        "listed again after a drain that timed out"
    );
    let held = holders(&client, ring).await;
    assert!(
        held.values().all(|h| h == "first"),
        "no shard moved while its handlers run: {held:?}"
    );
    release.notify_waiters();
    let holders = wait_spread(&client, ring, &["first", "second"]).await;
    assert!(holders.values().any(|h| h == "second"));
    // Each handler ran once: the objects' handlers finished on the first replica.
    let all = calls.all();
    assert_eq!(all.len(), objects.len(), "{all:?}");
    first.stop().await.expect("a clean stop");
    second.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharding_settings_that_cannot_work_stop_the_operator_at_the_start() {
    let server = server(true).await;
    let calls = Calls::default();
    let mut zero = settings("x", "ring-bad");
    zero.peering.sharding.as_mut().unwrap().shards = 0;
    let mut both = settings("x", "ring-bad");
    both.watching.shard_selectors.push((
        examples(),
        "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')".into(),
    ));
    let mut timings = settings("x", "ring-bad");
    timings.peering.sharding.as_mut().unwrap().renew_deadline = Duration::from_secs(5);
    // Absurd numbers: a shard table of four billion entries, durations no Lease holds.
    let mut countless = settings("x", "ring-bad");
    countless.peering.sharding.as_mut().unwrap().shards = u32::MAX;
    let mut endless = settings("x", "ring-bad");
    let sharding = endless.peering.sharding.as_mut().unwrap();
    sharding.lease_duration = Duration::MAX;
    sharding.renew_deadline = Duration::MAX / 2;
    for (bad, says) in [
        (zero, "at least 1"),
        (both, "cannot be combined"),
        (timings, "greater than the renew deadline"),
        (countless, "at most 4096"),
        (endless, "at most 2147483647 s"),
    ] {
        let operator = replica(&server, "x", "ring-bad", &calls).settings(bad);
        let returned = tokio::time::timeout(DEADLINE, operator.run(Default::default())).await;
        match returned.expect("run() returns at once") {
            Err(OperatorError::Sharding(message)) => {
                assert!(message.contains(says), "{message}");
            }
            other => panic!("expected an error about the sharding settings: {other:?}"),
        }
    }
    server.stop().await;
}

/// A replica whose create handler returns `{"by": identity}`, its requests named
/// `identity/kopf-rs`.
fn returning_who(server: &FakeApiServer, identity: &'static str, ring: &str) -> Operator {
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        move |_| async move { Ok(Some(json!({"by": identity}))) },
    ));
    Operator::new(registry)
        .settings(settings(identity, ring))
        .client(crate::leadership::client_as(server, identity))
}

/// An owner's write that the server holds past the owner's term (its member Lease cannot be
/// renewed meanwhile) and lets go of only after the replica that took the shard over handled
/// the object: that replica's result, records and diff-base stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_held_past_the_owners_term_does_not_land_over_the_next_owners() {
    let ring = "ring-held-write";
    let server = server(true).await;
    let client = server.client();
    let old = Running::ready(returning_who(&server, "old", ring)).await;
    wait_spread(&client, ring, &["old"]).await;

    server.inject(
        Fault::hold_before_commit()
            .verb("patch")
            .name("one")
            .user_agent("old/"),
    );
    create(&client, "one", json!({})).await;
    let held = server
        .wait_held(kopf_testing::DEADLINE)
        .await
        .expect("the old owner's write is held");
    assert!(held.body.contains("\"old\""), "{held:?}");

    // The old owner cannot renew its member Lease: its term ends on its clock, and the
    // other replica fences it once its Lease has not changed for the lease duration, takes
    // its shards, and handles the object.
    server.inject(
        Fault::respond(500)
            .verb("update")
            .resource("leases.coordination.k8s.io")
            .user_agent("old/"),
    );
    let new = Running::ready(returning_who(&server, "new", ring)).await;
    wait_spread(&client, ring, &["new"]).await;
    let handled = wait("the new owner's result", || async {
        crate::support::get(&client, "one").await.filter(|o| {
            o["status"]["create_fn"]["by"] == "new"
                && !o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"]
                    .is_null()
        })
    })
    .await;

    server.release_held();
    // The Leases are renewed all the while; nothing else may happen.
    let quiet = Duration::from_millis(1500);
    assert!(
        server
            .wait_quiet_but(
                &["leases.coordination.k8s.io"],
                quiet,
                kopf_testing::DEADLINE
            )
            .await
    );
    let object = crate::support::get(&client, "one")
        .await
        .expect("the object");
    assert_eq!(
        object["status"], handled["status"],
        "the new owner's result stays: {object}"
    );
    assert_eq!(
        object["metadata"]["annotations"], handled["metadata"]["annotations"],
        "the new owner's records and diff-base stay: {object}"
    );
    server.clear_faults();
    let _ = old.stop().await;
    new.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}
