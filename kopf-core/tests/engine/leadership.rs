//! Leader election with a `coordination.k8s.io/v1` Lease (client-go's algorithm): of two
//! operators on one server only the holder of the Lease serves; a graceful stop releases it
//! and the other takes over at once; a leader that cannot renew pauses (and leads again when
//! it can), or with `LostLeadership::Exit` makes `run()` return an error; invalid durations
//! are an error at the start; a Lease held by another is taken only when its record has not
//! changed for the lease duration on this operator's clock, whatever its timestamps say. The
//! Lease's fields are client-go's. Leader-only activities run only on the leader.

use std::sync::Arc;
use std::time::Duration;

use kopf::activities::Activity;
use kopf::operator::{Operator, OperatorError};
use kopf::registry::{ActivityHandler, ChangeHandler, DaemonHandler, Registry};
use kopf::settings::{LeaseSettings, LostLeadership};
use kopf::{PermanentError, Settings};
use kopf_testing::{Fault, TestClient, wait};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::time::Instant;

use crate::activities::{free_port, http_get};
use crate::logs::lines_of;
use crate::peering::{recording, wait_lines};
use crate::stopping::Running;
use crate::support::{Calls, create, examples, get, server_with_crd};

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
const RESOURCE: &str = "leases.coordination.k8s.io";

/// Settings with only the Lease `name` (no Kopf peering), with short durations, for the
/// candidate `identity`.
fn settings(name: &str, identity: &str, lease_duration: Duration) -> Settings {
    let mut settings = kopf_testing::test_settings();
    settings.peering.standalone = true;
    let mut lease = LeaseSettings::new(name);
    lease.namespace = Some("default".into());
    lease.identity = Some(identity.into());
    lease.lease_duration = lease_duration;
    lease.renew_deadline = Duration::from_secs(2);
    lease.retry_period = Duration::from_millis(500);
    settings.peering.lease = Some(lease);
    settings
}

/// The Lease's `spec`.
async fn lease(client: &kube::Client, name: &str) -> Value {
    let request = http::Request::get(format!("{LEASES}/{name}"))
        .body(Vec::new())
        .unwrap();
    let lease: Value = client.request(request).await.expect("the lease");
    lease["spec"].clone()
}

/// Waits until the Lease's `spec` satisfies `condition`; returns it.
async fn wait_lease(
    client: &kube::Client,
    name: &str,
    what: &str,
    condition: impl Fn(&Value) -> bool,
) -> Value {
    wait(what, || async {
        let spec = lease(client, name).await;
        condition(&spec).then_some(spec)
    })
    .await
}

/// Kubernetes' MicroTime: `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
fn assert_micro_time(value: &Value) {
    let text = value.as_str().unwrap_or_default();
    let bytes = text.as_bytes();
    assert_eq!(bytes.len(), 27, "{text}");
    assert_eq!(
        (bytes[10], bytes[19], bytes[26]),
        (b'T', b'.', b'Z'),
        "{text}"
    );
    assert!(
        text.replace(['-', ':', 'T', '.', 'Z'], "")
            .bytes()
            .all(|b| b.is_ascii_digit()),
        "{text}"
    );
}

/// A change to valid Lease settings.
type Change = fn(&mut LeaseSettings);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_durations_or_identities_are_an_error_at_the_start() {
    let server = server_with_crd().await;
    let invalid = |change: Change| {
        let mut settings = settings("lease-invalid", "me", Duration::from_secs(3));
        change(settings.peering.lease.as_mut().unwrap());
        Operator::new(Registry::new())
            .settings(settings)
            .client(server.client())
    };
    let cases: [(Change, &str); 6] = [
        (
            |lease| lease.renew_deadline = lease.lease_duration,
            "must be greater than the renew deadline",
        ),
        // Valid for client-go's rules, but no Lease can hold it (an int32 of seconds).
        (
            |lease| lease.lease_duration = Duration::MAX,
            "at most 2147483647 s",
        ),
        (
            |lease| {
                lease.lease_duration = Duration::MAX;
                lease.renew_deadline = Duration::MAX / 2;
            },
            "at most 2147483647 s",
        ),
        (
            |lease| lease.retry_period = Duration::from_millis(1700),
            "1.2 × the retry period",
        ),
        (|lease| lease.retry_period = Duration::ZERO, "above zero"),
        (|lease| lease.identity = Some(String::new()), "identity"),
    ];
    for (change, expected) in cases {
        let (running, _) = Running::start(invalid(change));
        match running.returned().await {
            Err(error @ OperatorError::Lease(_)) => {
                let message = error.to_string();
                assert!(message.starts_with("invalid lease settings: "), "{message}");
                assert!(message.contains(expected), "{message}");
            }
            other => panic!("expected a lease error with {expected:?}, got {other:?}"),
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_serves_and_a_graceful_stop_hands_the_lease_over_at_once() {
    let name = "lease-handover";
    lines_of(name);
    let server = server_with_crd().await;
    let client = server.client();
    // A long lease duration: a take-over well before it shows the release, not the expiry.
    let duration = Duration::from_secs(10);
    let (first_calls, second_calls) = (Calls::default(), Calls::default());
    let first = Running::ready(recording(
        &server,
        &first_calls,
        settings(name, "first", duration),
    ))
    .await;
    let acquired = lease(&client, name).await;
    assert_eq!(acquired["holderIdentity"], "first");
    assert_eq!(acquired["leaseDurationSeconds"], 10);
    assert_eq!(acquired["leaseTransitions"], 0, "a new lease");
    assert_micro_time(&acquired["acquireTime"]);
    assert_micro_time(&acquired["renewTime"]);

    let port = free_port();
    let second = recording(&server, &second_calls, settings(name, "second", duration))
        .liveness(format!("http://127.0.0.1:{port}/healthz"));
    let (second, second_ready) = Running::start(second);
    wait_lines(
        name,
        "attempting to acquire leader lease default/lease-handover",
        2,
    )
    .await;
    create(&client, "first-object", json!({})).await;
    assert_eq!(first_calls.wait_len(1).await, [json!("first-object")]);
    wait("the object handled", || async {
        get(&client, "first-object").await.filter(|o| {
            !o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"].is_null()
        })
    })
    .await;
    let renewed = wait_lease(&client, name, "a renewal", |spec| {
        spec["renewTime"] != acquired["renewTime"]
    })
    .await;
    assert_eq!(renewed["holderIdentity"], "first");
    assert_eq!(
        renewed["acquireTime"], acquired["acquireTime"],
        "kept on renewals"
    );
    assert_eq!(renewed["leaseTransitions"], 0);
    assert_micro_time(&renewed["renewTime"]);
    assert!(
        second_calls.all().is_empty(),
        "the candidate serves nothing"
    );
    assert!(!second_ready.is_ready(), "a candidate lists nothing");
    assert_eq!(
        http_get(port, "/readyz").await.unwrap(),
        (200, json!({"ready": true, "paused": true})),
        "a candidate stands by, ready"
    );

    first.stop().await.expect("a clean stop");
    let stopped = Instant::now();
    let released = lease(&client, name).await;
    if released["holderIdentity"] == "" {
        assert_eq!(released["leaseDurationSeconds"], 1, "{released}");
        assert_micro_time(&released["renewTime"]);
    } else {
        assert_eq!(
            released["holderIdentity"], "second",
            "taken at once: {released}"
        );
    }
    wait_lines(name, "released lease default/lease-handover", 1).await;
    let taken = wait_lease(&client, name, "the take-over", |spec| {
        spec["holderIdentity"] == "second"
    })
    .await;
    assert!(
        stopped.elapsed() < duration - Duration::from_secs(2),
        "taken over after the release, not after the expiry: {:?}",
        stopped.elapsed()
    );
    assert_eq!(taken["leaseTransitions"], 1, "one change of the holder");
    assert_eq!(taken["leaseDurationSeconds"], 10);
    wait_lines(
        name,
        "successfully acquired lease default/lease-handover",
        2,
    )
    .await;
    create(&client, "second-object", json!({})).await;
    assert_eq!(second_calls.wait_len(1).await, [json!("second-object")]);
    assert_eq!(
        first_calls.all(),
        [json!("first-object")],
        "the new leader found the first object handled"
    );
    second.stop().await.expect("a clean stop");
    assert_eq!(lease(&client, name).await["holderIdentity"], "");
    drop(client);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_leader_keeps_the_lease_until_its_handlers_finished_and_writes_their_results() {
    let name = "lease-long-stop";
    lines_of(name);
    let server = server_with_crd().await;
    let client = server.client();
    let duration = Duration::from_secs(3);
    let started = Calls::default();
    // Opened by the test: the handler goes on through the stop (it ignores being asked to
    // stop) for longer than the lease duration.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let registry = Registry::new().with(ChangeHandler::on_create(examples(), "slow_fn", {
        let (started, gate) = (started.clone(), gate.clone());
        move |invocation| {
            let (started, gate) = (started.clone(), gate.clone());
            async move {
                started.record(json!(invocation.name()));
                let _permit = gate.acquire().await;
                Ok(Some(json!("finished")))
            }
        }
    }));
    let first = Operator::new(registry)
        .settings(settings(name, "first", duration))
        .client(server.client());
    let first = Running::ready(first).await;
    let second_calls = Calls::default();
    let second = recording(&server, &second_calls, settings(name, "second", duration));
    let (second, _) = Running::start(second);
    wait_lines(
        name,
        "attempting to acquire leader lease default/lease-long-stop",
        2,
    )
    .await;
    create(&client, "slow", json!({})).await;
    started.wait_len(1).await;

    let stop_began = OffsetDateTime::now_utc();
    let stopping = first.stop();
    let meanwhile = async {
        // Renewed by the stopping leader for longer than the lease duration: no one else
        // could have taken it.
        let beyond = stop_began + duration + Duration::from_millis(500);
        let spec = wait_lease(&client, name, "a renewal past the lease duration", |spec| {
            let renewed = spec["renewTime"].as_str().unwrap_or_default();
            OffsetDateTime::parse(renewed, &Rfc3339).is_ok_and(|at| at > beyond)
        })
        .await;
        assert_eq!(spec["holderIdentity"], "first", "{spec}");
        gate.add_permits(1);
    };
    let (stopped, ()) = tokio::join!(stopping, meanwhile);
    stopped.expect("a clean stop");
    let object = get(&client, "slow").await.expect("the object");
    assert_eq!(
        object["status"]["slow_fn"], "finished",
        "the result written within the term: {object}"
    );
    wait_lease(&client, name, "the take-over after the release", |spec| {
        spec["holderIdentity"] == "second"
    })
    .await;
    assert!(
        second_calls.all().is_empty(),
        "the new leader found the object handled"
    );
    second.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_pauses_and_leads_again_when_it_can() {
    let name = "lease-lost-pause";
    lines_of(name);
    let server = server_with_crd().await;
    let client = server.client();
    let calls = Calls::default();
    let recorded = calls.clone();
    let registry = Registry::new().with(DaemonHandler::new(
        examples(),
        "monitor",
        move |invocation| {
            let calls = recorded.clone();
            async move {
                calls.record(json!("started"));
                invocation.stopped().cancelled().await;
                calls.record(json!(format!("{:?}", invocation.stop_reason())));
                Ok(None)
            }
        },
    ));
    let operator = Operator::new(registry)
        .settings(settings(name, "leader", Duration::from_secs(3)))
        .client(server.client());
    let leader = Running::ready(operator).await;
    create(&client, "watched", json!({})).await;
    calls.wait_len(1).await;

    server.inject(
        Fault::respond(500)
            .verb("update")
            .resource(RESOURCE)
            .name(name),
    );
    wait_lines(
        name,
        "failed to renew lease default/lease-lost-pause: lost leadership",
        1,
    )
    .await;
    assert_eq!(
        calls.wait_len(2).await,
        [json!("started"), json!("Some(OperatorPaused)")],
        "not leading, the operator pauses: its daemons stop"
    );

    server.clear_faults();
    wait_lines(
        name,
        "successfully acquired lease default/lease-lost-pause",
        2,
    )
    .await;
    assert_eq!(
        calls.wait_len(3).await[2],
        json!("started"),
        "leading again, it serves again"
    );
    let spec = lease(&client, name).await;
    assert_eq!(spec["holderIdentity"], "leader");
    assert_eq!(spec["leaseTransitions"], 0, "the holder never changed");
    leader.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}

/// The leader's requests to the Lease since the counters were reset, as verbs.
fn lease_verbs(server: &kopf_testing::FakeApiServer, name: &str) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.resource == RESOURCE && r.name.as_deref() == Some(name))
        .map(|r| r.verb)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_renews_from_the_lease_it_wrote_and_reads_it_only_after_a_conflict() {
    let name = "lease-optimistic";
    lines_of(name);
    let server = server_with_crd().await;
    let client = server.client();
    let calls = Calls::default();
    let leader = Running::ready(recording(
        &server,
        &calls,
        settings(name, "leader", Duration::from_secs(3)),
    ))
    .await;
    wait_lease(&client, name, "the lease acquired", |spec| {
        spec["holderIdentity"] == "leader"
    })
    .await;

    // client-go's fast path: an update each retry period, with no read before it.
    server.reset_requests();
    wait("four renewals", || async {
        let verbs = lease_verbs(&server, name);
        (verbs.iter().filter(|v| *v == "update").count() >= 4).then_some(())
    })
    .await;
    let verbs = lease_verbs(&server, name);
    assert!(
        verbs.iter().all(|v| v == "update"),
        "renewals only: {verbs:?}"
    );

    // Someone else changes the Lease: the next renewal conflicts, reads it, and renews.
    let request = http::Request::patch(format!("{LEASES}/{name}"))
        .header("Content-Type", "application/merge-patch+json")
        .body(serde_json::to_vec(&json!({"metadata": {"labels": {"touched": "yes"}}})).unwrap())
        .unwrap();
    let _: Value = client.request(request).await.expect("the lease patched");
    server.reset_requests();
    wait("a read after the conflict, then renewals again", || async {
        let verbs = lease_verbs(&server, name);
        let read = verbs.iter().position(|v| v == "get")?;
        (verbs[read..].iter().filter(|v| *v == "update").count() >= 2).then_some(())
    })
    .await;
    let spec = lease(&client, name).await;
    assert_eq!(spec["holderIdentity"], "leader");
    assert_eq!(spec["leaseTransitions"], 0, "the holder never changed");
    assert!(
        lines_of(name)
            .iter()
            .all(|l| !l.contains("lost leadership")),
        "the conflict did not cost the leadership"
    );
    leader.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_exit_a_leader_that_cannot_renew_stops_with_an_error() {
    let name = "lease-lost-exit";
    lines_of(name);
    let server = server_with_crd().await;
    let client = server.client();
    let mut settings = settings(name, "leader", Duration::from_secs(3));
    settings.peering.lease.as_mut().unwrap().on_lost = LostLeadership::Exit;
    let leader = Running::ready(recording(&server, &Calls::default(), settings)).await;
    server.inject(
        Fault::respond(409)
            .verb("update")
            .resource(RESOURCE)
            .name(name),
    );
    let returned = leader.returned().await;
    match returned {
        Err(OperatorError::LostLeadership { lease }) => {
            assert_eq!(lease, "default/lease-lost-exit");
        }
        other => panic!("expected the lost leadership, got {other:?}"),
    }
    server.clear_faults();
    assert_eq!(
        lease(&client, name).await["holderIdentity"],
        "leader",
        "a lost lease is not released: another takes it when it expires"
    );
    drop(client);
    server.stop().await;
}

/// Startup and cleanup handlers, one of each leader-only, recording `<what>-<who>`.
fn activities(calls: &Calls, who: &str) -> Registry {
    let handler = |id: &str, startup: bool| {
        let (calls, call) = (calls.clone(), format!("{id}-{who}"));
        let function = move |_| {
            let (calls, call) = (calls.clone(), call.clone());
            async move {
                calls.record(json!(call));
                Ok(None)
            }
        };
        if startup {
            ActivityHandler::on_startup(id, function)
        } else {
            ActivityHandler::on_cleanup(id, function)
        }
    };
    Registry::new()
        .with(handler("lead", true).leader_only())
        .with(handler("start", true))
        .with(handler("clean", false).leader_only())
        .with(handler("bye", false))
}

/// The calls recorded for `who`.
fn of(calls: &Calls, who: &str) -> Vec<String> {
    let suffix = format!("-{who}");
    calls
        .all()
        .iter()
        .filter_map(|call| call.as_str().map(String::from))
        .filter(|call| call.ends_with(&suffix))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_only_activities_run_only_on_the_leader_or_without_a_lease() {
    let name = "lease-activities";
    lines_of(name);
    let server = server_with_crd().await;
    let calls = Calls::default();
    let operator = |who: &str| {
        Operator::new(activities(&calls, who))
            .settings(settings(name, who, Duration::from_secs(10)))
            .client(server.client())
    };
    // With nothing to watch, an operator is ready at once: the test waits for the calls.
    let (first, _) = Running::start(operator("first"));
    wait("the leader's startup", || async {
        (of(&calls, "first").len() == 2).then_some(())
    })
    .await;
    assert_eq!(
        of(&calls, "first"),
        ["start-first", "lead-first"],
        "the leader-only startup after the others, on leading"
    );
    let (second, _) = Running::start(operator("second"));
    wait_lines(name, "attempting to acquire leader lease", 2).await;
    wait("the candidate's startup", || async {
        (!of(&calls, "second").is_empty()).then_some(())
    })
    .await;
    assert_eq!(of(&calls, "second"), ["start-second"], "not leading yet");

    first.stop().await.expect("a clean stop");
    assert_eq!(
        of(&calls, "first"),
        ["start-first", "lead-first", "clean-first", "bye-first"],
        "the leader's cleanup includes its leader-only handlers"
    );
    wait("the new leader's startup", || async {
        (of(&calls, "second").len() == 2).then_some(())
    })
    .await;
    assert_eq!(of(&calls, "second"), ["start-second", "lead-second"]);
    second.stop().await.expect("a clean stop");
    assert_eq!(of(&calls, "second")[2..], ["clean-second", "bye-second"],);

    let (third, _) = Running::start(operator("third"));
    let (candidate, _) = Running::start(operator("candidate"));
    wait("a leader", || async {
        (of(&calls, "third").len() == 2 || of(&calls, "candidate").len() == 2).then_some(())
    })
    .await;
    let (leader, other) = if of(&calls, "third").len() == 2 {
        (third, candidate)
    } else {
        (candidate, third)
    };
    // Both candidates started (a stop during the startup runs no cleanup handler).
    wait_lines(name, "attempting to acquire leader lease", 4).await;
    other.stop().await.expect("a clean stop");
    let stopped_candidate: Vec<String> = ["third", "candidate"]
        .iter()
        .map(|who| of(&calls, who))
        .find(|calls| calls.len() == 2 && calls[1].starts_with("bye"))
        .unwrap_or_else(|| panic!("the candidate stopped: {:?}", calls.all()));
    assert!(
        stopped_candidate[0].starts_with("start-"),
        "a candidate's cleanup leaves out the leader-only handlers: {stopped_candidate:?}"
    );
    leader.stop().await.expect("a clean stop");

    let mut standalone = kopf_testing::test_settings();
    standalone.peering.standalone = true;
    let solo = Running::ready(
        Operator::new(activities(&calls, "solo"))
            .settings(standalone)
            .client(server.client()),
    )
    .await;
    solo.stop().await.expect("a clean stop");
    assert_eq!(
        of(&calls, "solo"),
        ["start-solo", "lead-solo", "clean-solo", "bye-solo"],
        "without a lease, the operator is its own leader"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_only_startup_handler_that_fails_stops_the_leader_with_its_error() {
    let name = "lease-failing-startup";
    let server = server_with_crd().await;
    let registry = Registry::new().with(
        ActivityHandler::on_startup("migrate", |_| async {
            Err(PermanentError::new("the schema cannot be migrated").into())
        })
        .leader_only(),
    );
    let operator = Operator::new(registry)
        .settings(settings(name, "leader", Duration::from_secs(3)))
        .client(server.client());
    let (running, _) = Running::start(operator);
    match running.returned().await {
        Err(OperatorError::Activity {
            activity: Activity::Startup,
            handler,
            message,
        }) => {
            assert_eq!(handler, "migrate");
            assert!(
                message.contains("the schema cannot be migrated"),
                "{message}"
            );
        }
        other => panic!("expected the startup handler's failure, got {other:?}"),
    }
    assert_eq!(
        lease(&server.client(), name).await["holderIdentity"],
        "",
        "it led, so it released the lease at its stop"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_held_by_another_is_taken_only_after_it_was_seen_unchanged_for_its_duration() {
    let name = "lease-expiry";
    let server = server_with_crd().await;
    let client = server.client();
    // Its times are long past, and its duration short: neither counts, only this operator's
    // clock since it saw the record last change.
    let held = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"holderIdentity": "vanished", "leaseDurationSeconds": 1,
                 "acquireTime": "2000-01-01T00:00:00.000000Z",
                 "renewTime": "2000-01-01T00:00:00.000000Z", "leaseTransitions": 4},
    });
    let created = TestClient::new(client.clone())
        .request("POST", LEASES, held)
        .await
        .1;
    assert_eq!(created["spec"]["holderIdentity"], "vanished", "{created}");
    let duration = Duration::from_secs(3);
    let started = Instant::now();
    let calls = Calls::default();
    let (running, _) = Running::start(recording(&server, &calls, settings(name, "me", duration)));
    let taken = wait_lease(&client, name, "the take-over", |spec| {
        spec["holderIdentity"] == "me"
    })
    .await;
    assert!(
        started.elapsed() >= duration,
        "not before the lease duration passed on this clock: {:?}",
        started.elapsed()
    );
    assert_eq!(
        taken["leaseTransitions"], 5,
        "one more change of the holder"
    );
    assert_eq!(taken["leaseDurationSeconds"], 3);
    running.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}

/// A client of the server whose requests say `agent/kopf-rs` as their User-Agent, so that
/// faults aim at one operator of several.
pub(crate) fn client_as(server: &kopf_testing::FakeApiServer, agent: &str) -> kube::Client {
    let mut config = server.config();
    let agent = http::HeaderValue::from_str(&format!("{agent}/kopf-rs")).expect("a header");
    config.headers.push((http::header::USER_AGENT, agent));
    kube::Client::try_from(config).expect("a client of the fake server")
}

/// An operator whose create handler returns `{"by": who}`.
fn returning_who(who: &'static str) -> Registry {
    Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        move |_| async move { Ok(Some(json!({"by": who}))) },
    ))
}

/// A leader's write that the server holds past its term (the leader cannot renew meanwhile)
/// and lets go of only after the next leader handled the object: the next leader's result,
/// records and diff-base stay. The old leader's request carries its term's deadline and the
/// resourceVersion it was made for, so it cannot land once the term is over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_held_past_the_leaders_term_does_not_land_over_the_next_leaders() {
    let name = "lease-held-write";
    lines_of(name);
    let server = server_with_crd().await;
    let client = server.client();
    let old = Operator::new(returning_who("old"))
        .settings(settings(name, "old", Duration::from_secs(3)))
        .client(client_as(&server, "old"));
    let old = Running::ready(old).await;
    let new = Operator::new(returning_who("new"))
        .settings(settings(name, "new", Duration::from_secs(3)))
        .client(client_as(&server, "new"));
    let (new, _) = Running::start(new);
    wait_lines(name, "attempting to acquire leader lease", 2).await;

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
        .expect("the old leader's write is held");
    assert!(held.body.contains("\"old\""), "{held:?}");

    // The old leader cannot renew: its term ends on its clock, and the other takes the Lease
    // once it has not changed for the lease duration, and handles the object.
    server.inject(
        Fault::respond(500)
            .verb("update")
            .resource(RESOURCE)
            .user_agent("old/"),
    );
    wait_lease(&client, name, "the new leader", |spec| {
        spec["holderIdentity"] == "new"
    })
    .await;
    let handled = wait("the new leader's result", || async {
        get(&client, "one").await.filter(|o| {
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
    let object = get(&client, "one").await.expect("the object");
    assert_eq!(
        object["status"], handled["status"],
        "the new leader's result stays: {object}"
    );
    assert_eq!(
        object["metadata"]["annotations"], handled["metadata"]["annotations"],
        "the new leader's records and diff-base stay: {object}"
    );
    server.clear_faults();
    let _ = old.stop().await;
    new.stop().await.expect("a clean stop");
}

/// A rolling update that shortens the lease duration: the new candidate waits for the
/// duration that the holder recorded (it acts that long on its term), not only its own
/// shorter one, as client-go does; the longer of the two, as the shards do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_held_by_another_is_taken_no_sooner_than_its_recorded_duration() {
    let name = "lease-recorded-duration";
    let server = server_with_crd().await;
    let client = server.client();
    let held = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"holderIdentity": "old-replica", "leaseDurationSeconds": 6,
                 "acquireTime": "2000-01-01T00:00:00.000000Z",
                 "renewTime": "2000-01-01T00:00:00.000000Z", "leaseTransitions": 1},
    });
    let created = server.request("POST", LEASES, held).await.1;
    assert_eq!(
        created["spec"]["holderIdentity"], "old-replica",
        "{created}"
    );
    let started = Instant::now();
    let calls = Calls::default();
    let shorter = settings(name, "new-replica", Duration::from_secs(3));
    let (running, _) = Running::start(recording(&server, &calls, shorter));
    let taken = wait_lease(&client, name, "the take-over", |spec| {
        spec["holderIdentity"] == "new-replica"
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_secs(6),
        "not before the recorded duration passed on this clock: {:?}",
        started.elapsed()
    );
    assert_eq!(taken["leaseDurationSeconds"], 3, "its own from now on");
    running.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}

/// A leader whose work was abandoned at the grace period (a sync handler still runs) does
/// not release the Lease: that work may still act, so the next leader waits for the Lease to
/// expire (by then this one's term has ended), as the shards of assigned sharding do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_work_was_abandoned_keeps_the_lease_to_expire() {
    let name = "lease-abandoned";
    let server = server_with_crd().await;
    let client = server.client();
    let steps = Calls::default();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let released = Arc::new(std::sync::Mutex::new(released));
    let recorder = steps.clone();
    let handler = ChangeHandler::on_create(
        examples(),
        "stuck_fn",
        kopf::registry::blocking(move |_inv| {
            recorder.record(json!("started"));
            let _ = released.lock().unwrap().recv();
            recorder.record(json!("finished"));
            Ok(None)
        }),
    );
    let mut settings = settings(name, "me", Duration::from_secs(3));
    settings.process.grace_period = Duration::from_secs(1);
    let operator = Operator::new(Registry::new().with(handler))
        .settings(settings)
        .client(server.client());
    let running = Running::ready(operator).await;
    wait_lease(&client, name, "the leadership", |spec| {
        spec["holderIdentity"] == "me"
    })
    .await;
    create(&client, "stuck", json!({})).await;
    steps.wait_len(1).await;
    let result = running.stop().await;
    assert!(
        matches!(result, Err(OperatorError::Aborted(_))),
        "the stuck handler was abandoned: {result:?}"
    );
    assert_eq!(
        lease(&client, name).await["holderIdentity"],
        "me",
        "not released while abandoned work may still act"
    );
    release.send(()).expect("the handler still waits");
    steps.wait_len(2).await;
    drop(client);
    server.stop().await;
}
