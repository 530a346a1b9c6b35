//! Several replicas of one operator, as a Deployment runs them: separate processes with
//! different peering priorities against one API server (the fake one). Only the replica of
//! the highest priority handles objects; when it stops gracefully (SIGTERM), it removes its
//! peering entry and the next one resumes at once; when it is killed (SIGKILL), the next one
//! resumes once its entry has expired (its lifetime, 4 s here). Replicas of the same priority
//! all pause, with Kopf's warning, until one leaves.
//!
//! With a Lease instead of peering, a leader stopped (SIGSTOP) past the lease duration is
//! taken over by the other, and when it continues (SIGCONT) it pauses before it writes
//! anything: the events it missed meanwhile are not handled again; and a write of it that
//! the server held meanwhile lands nothing over the new leader's.
//!
//! Each replica is this very test binary, started again with [`CHILD`] set (see
//! `stoppable.rs` for why not an example's binary): its [`operator_process`] runs the operator.
//! The scenarios print how long each hand-over took, from the leader's exit to the first
//! object handled by the next replica (`cargo test -p kopf-examples --test replicas --
//! --nocapture`); they assert only what happened, never how fast.

#![cfg(unix)]

mod support;

use std::time::{Duration, Instant};

use kopf::operator::Operator;
use kopf::registry::{ChangeHandler, Registry};
use kopf::resources::Selector;
use kopf::settings::LeaseSettings;
use kopf_testing::{FakeApiServer, fixtures, test_settings, wait};
use serde_json::{Value, json};
use support::{OperatorProcess, spawn_against};

/// Set in the environment of the child process: run a replica there.
const CHILD: &str = "KOPF_EXAMPLES_REPLICAS_CHILD";
/// The replica's peering priority, in the child's environment.
const PRIORITY: &str = "KOPF_EXAMPLES_REPLICAS_PRIORITY";
/// Set in the child's environment: elect a leader with a Lease instead of peering.
const LEASE: &str = "KOPF_EXAMPLES_REPLICAS_LEASE";
/// How long a replica's peering entry lives, in seconds.
const LIFETIME: u64 = 4;

/// How long the server must see no request for an operator to be taken as idle.
const QUIET: Duration = Duration::from_millis(1500);
/// The peering objects, as the server's counters name them: kept alive by the replicas.
const PEERINGS: &str = "clusterkopfpeerings.kopf.dev";
/// The Lease, as the server's counters name it: renewed by the leader even when idle.
const LEASES: &str = "leases.coordination.k8s.io";
const COLLECTION: &str = fixtures::KOPFEXAMPLES;

/// Not a scenario: a replica's process. Started by the scenarios (with [`CHILD`] set) to run
/// the operator and exit with its exit code; a no-op otherwise.
#[test]
fn operator_process() {
    if std::env::var_os(CHILD).is_some() {
        std::process::exit(replica());
    }
}

/// The replica: a create handler that says which replica handled the object (`POD_ID`, the
/// replica's peering identity too), peering with the priority its scenario gives, or, with
/// [`LEASE`] set, electing a leader with a Lease (of short durations: 3 s, renewed every
/// 0.5 s within 2 s).
fn replica() -> i32 {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let identity = std::env::var("POD_ID").expect("the replica's POD_ID");
    let mut settings = test_settings();
    if std::env::var_os(LEASE).is_some() {
        let mut lease = LeaseSettings::new("replicas");
        lease.lease_duration = Duration::from_secs(3);
        lease.renew_deadline = Duration::from_secs(2);
        lease.retry_period = Duration::from_millis(500);
        settings.peering.lease = Some(lease);
        settings.peering.standalone = true;
    } else {
        settings.peering.priority = std::env::var(PRIORITY)
            .expect("the replica's priority")
            .parse()
            .expect("an integer priority");
        settings.peering.lifetime = Duration::from_secs(LIFETIME);
    }
    let selector = Selector::new("kopf.dev", "v1", "kopfexamples");
    let registry = Registry::new().with(ChangeHandler::on_create(
        selector,
        "create_fn",
        move |kopf| {
            eprintln!("{identity} handles {}", kopf.name());
            let identity = identity.clone();
            async move { Ok(Some(json!({"by": identity}))) }
        },
    ));
    let operator = Operator::new(registry).settings(settings);
    match runtime.block_on(operator.run_until_signalled()) {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("the replica failed: {error}");
            1
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_highest_priority_works_and_a_sigterm_hands_over_at_once() {
    let (server, mut first, mut second) = two_replicas().await;

    first.signal("TERM");
    assert_eq!(first.exit_code().await, 0, "{}", first.log());
    let exited = Instant::now();
    create(&server, "two").await;
    assert_eq!(handled_by(&server, "two").await, "second");
    println!(
        "SIGTERM: the next replica handled its first object {:?} after the leader exited",
        exited.elapsed()
    );
    second.wait_for_log("Resuming operations").await;
    second.signal("TERM");
    assert_eq!(second.exit_code().await, 0, "{}", second.log());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replica_is_taken_over_once_its_entry_expires() {
    let (server, first, mut second) = two_replicas().await;

    first.signal("KILL");
    let killed = Instant::now();
    create(&server, "two").await;
    assert_eq!(handled_by(&server, "two").await, "second");
    println!(
        "SIGKILL: the next replica handled its first object {:?} after the leader was killed \
         (entry lifetime {LIFETIME} s)",
        killed.elapsed()
    );
    let entries = peering_entries(&server).await;
    assert!(
        entries.get("first").is_none_or(Value::is_null),
        "the dead replica's entry is cleaned: {entries:?}"
    );
    second.signal("TERM");
    assert_eq!(second.exit_code().await, 0, "{}", second.log());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equal_priorities_pause_both_until_one_leaves() {
    let server = server_with_peering().await;
    let mut first = start(&server, "first", 10);
    first.wait_for_log("peering as first").await;
    let mut second = start(&server, "second", 10);
    for replica in [&mut first, &mut second] {
        replica
            .wait_for_log("Possibly conflicting operators with the same priority")
            .await;
        replica
            .wait_for_log("Pausing all operators, including self")
            .await;
    }
    create(&server, "one").await;
    assert!(
        server
            .wait_quiet_but(&[PEERINGS], QUIET, kopf_testing::DEADLINE)
            .await
    );
    let object = get(&server, "one").await;
    assert!(object["status"].is_null(), "nobody handles it: {object}");

    first.signal("TERM");
    assert_eq!(first.exit_code().await, 0, "{}", first.log());
    assert_eq!(handled_by(&server, "one").await, "second");
    second
        .wait_for_log("Resuming operations after the pause")
        .await;
    second.signal("TERM");
    assert_eq!(second.exit_code().await, 0, "{}", second.log());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_lease_leader_is_taken_over_and_pauses_when_continued_before_writing() {
    let server = server_with_crd().await;
    let mut first = start_leasing(&server, "first");
    first.wait_for_log("successfully acquired lease").await;
    let mut second = start_leasing(&server, "second");
    second
        .wait_for_log("attempting to acquire leader lease")
        .await;
    create(&server, "one").await;
    assert_eq!(handled_by(&server, "one").await, "first");

    // Stopped, the leader renews nothing: the other takes the Lease once it has not changed
    // for the lease duration. The object created meanwhile waits, unread, in the stopped
    // leader's watch connection.
    first.signal("STOP");
    let stopped = Instant::now();
    second.wait_for_log("successfully acquired lease").await;
    create(&server, "two").await;
    assert_eq!(handled_by(&server, "two").await, "second");
    println!(
        "SIGSTOP: the other replica handled its first object {:?} after the leader was stopped \
         (lease duration 3 s)",
        stopped.elapsed()
    );
    assert!(
        server
            .wait_quiet_but(&[LEASES], QUIET, kopf_testing::DEADLINE)
            .await
    );
    server.reset_requests();

    // Continued, the old leader's term has passed on its own clock: it pauses before it
    // handles or writes anything, and does not take the Lease back from a live leader.
    first.signal("CONT");
    first.wait_for_log("lost leadership").await;
    assert!(
        server
            .wait_quiet_but(&[LEASES], QUIET, kopf_testing::DEADLINE)
            .await
    );
    let log = first.log();
    assert!(!log.contains("first handles two"), "{log}");
    assert_eq!(handled_by(&server, "two").await, "second");
    let writes: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| !matches!(r.verb.as_str(), "get" | "list" | "watch"))
        .filter(|r| r.resource != LEASES)
        .collect();
    assert!(
        writes.is_empty(),
        "no writes but the leader's renewals: {writes:?}"
    );
    assert!(
        !second.log().contains("lost leadership"),
        "{}",
        second.log()
    );

    for mut replica in [first, second] {
        replica.signal("TERM");
        assert_eq!(replica.exit_code().await, 0, "{}", replica.log());
    }
    server.stop().await;
}

/// A leader whose write the server holds, and which is stopped (SIGSTOP) meanwhile, past its
/// term: its client cannot cut the request at the term's end, so the server gets to answer
/// it. The other replica takes over and handles the object; then the held write is let go
/// of. It was made for the version that the old leader read, which the new leader's writes
/// moved on: the server refuses it (`409 Conflict`), and the new leader's result, records and
/// diff-base stay. Continued, the old leader sends nothing more for the object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_let_go_of_after_its_stopped_leaders_term_lands_nothing() {
    let server = server_with_crd().await;
    let mut first = start_leasing(&server, "first");
    first.wait_for_log("successfully acquired lease").await;
    let mut second = start_leasing(&server, "second");
    second
        .wait_for_log("attempting to acquire leader lease")
        .await;
    // Only the leader writes: its first write of the object is held.
    server.inject(
        kopf_testing::Fault::hold_before_commit()
            .verb("patch")
            .name("one")
            .times(1),
    );
    create(&server, "one").await;
    let held = server
        .wait_held(kopf_testing::DEADLINE)
        .await
        .expect("the leader's write is held");
    assert!(held.body.contains("\"first\""), "{held:?}");

    first.signal("STOP");
    second.wait_for_log("successfully acquired lease").await;
    let handled = wait("the new leader's result", || async {
        let object = get(&server, "one").await;
        let annotations = &object["metadata"]["annotations"];
        let done = object["status"]["create_fn"]["by"] == "second"
            && !annotations["kopf.zalando.org/last-handled-configuration"].is_null();
        done.then_some(object)
    })
    .await;

    let answered = |server: &FakeApiServer| -> Vec<u16> {
        server
            .requests()
            .into_iter()
            .filter(|r| r.verb == "patch" && r.path.ends_with("/one/status"))
            .map(|r| r.code)
            .collect()
    };
    assert_eq!(answered(&server), [200], "the new leader's result");
    server.release_held();
    let codes = wait("the held write's answer", || async {
        let codes = answered(&server);
        (codes.len() == 2).then_some(codes)
    })
    .await;
    assert_eq!(codes[1], 409, "the held write is refused: {codes:?}");

    first.signal("CONT");
    first.wait_for_log("lost leadership").await;
    assert!(
        server
            .wait_quiet_but(&[LEASES], QUIET, kopf_testing::DEADLINE)
            .await
    );
    let object = get(&server, "one").await;
    assert_eq!(object["status"], handled["status"], "{object}");
    assert_eq!(
        object["metadata"]["annotations"], handled["metadata"]["annotations"],
        "{object}"
    );
    assert_eq!(
        answered(&server).len(),
        2,
        "the old leader wrote nothing more: {}",
        first.log()
    );
    for mut replica in [first, second] {
        replica.signal("TERM");
        assert_eq!(replica.exit_code().await, 0, "{}", replica.log());
    }
    server.stop().await;
}

/// Two replicas, `first` (priority 20) and `second` (10): the second has paused in favour of
/// the first, which has handled an object.
async fn two_replicas() -> (FakeApiServer, OperatorProcess, OperatorProcess) {
    let server = server_with_peering().await;
    let mut first = start(&server, "first", 20);
    first.wait_for_log("peering as first").await;
    let mut second = start(&server, "second", 10);
    second.wait_for_log("Pausing operations in favour of").await;
    create(&server, "one").await;
    assert_eq!(handled_by(&server, "one").await, "first");
    (server, first, second)
}

/// A server on a runtime of its own, with the KopfExample CRD, Kopf's peering CRDs, and the
/// cluster-wide peering object `default`.
async fn server_with_peering() -> FakeApiServer {
    let server = server_with_crd().await;
    for crd in kopf::peering::peering_crds() {
        server.apply_value(crd).await;
    }
    server
        .apply("{apiVersion: kopf.dev/v1, kind: ClusterKopfPeering, metadata: {name: default}}")
        .await;
    server
}

/// A server on a runtime of its own, with the KopfExample CRD.
async fn server_with_crd() -> FakeApiServer {
    let server = kopf_testing::ApiServer::from_env()
        .start(FakeApiServer::builder())
        .await;
    server.apply(fixtures::KOPFEXAMPLE_CRD).await;
    server
}

/// A replica electing a leader with the Lease, named `identity` (its `POD_ID`).
fn start_leasing(server: &FakeApiServer, identity: &str) -> OperatorProcess {
    let args = ["operator_process", "--exact", "--nocapture", "--quiet"];
    spawn_against(server, CHILD, &args, |command| {
        command
            .env("POD_ID", identity)
            .env(LEASE, "1")
            .env("RUST_LOG", "info");
    })
}

/// A replica of this priority, named `identity` (its `POD_ID`).
fn start(server: &FakeApiServer, identity: &str, priority: i64) -> OperatorProcess {
    let args = ["operator_process", "--exact", "--nocapture", "--quiet"];
    spawn_against(server, CHILD, &args, |command| {
        command
            .env("POD_ID", identity)
            .env(PRIORITY, priority.to_string())
            .env("RUST_LOG", "info,kopf::peering=debug");
    })
}

async fn create(server: &FakeApiServer, name: &str) {
    let object = fixtures::kopfexample(name, json!({}));
    let (status, created) = server.request("POST", COLLECTION, object).await;
    assert_eq!(status, 201, "{created}");
}

/// The replica that handled the object, once one has.
async fn handled_by(server: &FakeApiServer, name: &str) -> String {
    wait(&format!("{name} to be handled"), || async {
        let object = get(server, name).await;
        object["status"]["create_fn"]["by"]
            .as_str()
            .map(String::from)
    })
    .await
}

/// The object as it is now.
async fn get(server: &FakeApiServer, name: &str) -> Value {
    let path = fixtures::kopfexample_path("default", name);
    let (status, object) = server.request("GET", &path, None).await;
    assert_eq!(status, 200, "{object}");
    object
}

async fn peering_entries(server: &FakeApiServer) -> serde_json::Map<String, Value> {
    let path = "/apis/kopf.dev/v1/clusterkopfpeerings/default";
    let (status, object) = server.request("GET", path, None).await;
    assert_eq!(status, 200, "the peering object: {object}");
    object["status"].as_object().cloned().unwrap_or_default()
}
