//! Kopf's peering: operators of different priorities on one server, where only the highest
//! works; equal priorities pause all; a paused operator's daemons stop and start again when
//! it resumes; a paused operator looks again when its blocker expires; namespaced peering in
//! both API groups; standalone when there is no peering CRD, or paused until it appears when
//! peering is mandatory.

use std::time::Duration;

use kopf::Settings;
use kopf::operator::Operator;
use kopf::registry::{ChangeHandler, DaemonHandler, Registry};
use kopf_testing::{FakeApiServer, TestClient, wait};
use serde_json::{Value, json};

use crate::activities::{free_port, http_get};
use crate::logs::lines_of;
use crate::stopping::Running;
use crate::support::{Calls, create, examples, get, server_with_crd, settle};

/// A server with the KopfExample CRD, Kopf's ClusterKopfPeering CRD, and the peering object
/// `name`.
pub(crate) async fn server_with_peering(name: &str) -> FakeApiServer {
    let server = server_with_crd().await;
    let client = server.client();
    create_peering_crd(&client, "kopf.dev", "Cluster").await;
    let object = json!({"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": name}});
    let created = post(&client, PEERINGS, object).await;
    assert_eq!(created["metadata"]["name"], name, "{created}");
    server
}

/// Kopf's peering CRD in this group: `ClusterKopfPeering` for the scope `Cluster`,
/// `KopfPeering` for `Namespaced`.
pub(crate) async fn create_peering_crd(client: &kube::Client, group: &str, scope: &str) {
    let (kind, singular) = match scope {
        "Cluster" => ("ClusterKopfPeering", "clusterkopfpeering"),
        _ => ("KopfPeering", "kopfpeering"),
    };
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{singular}s.{group}")},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"kind": kind, "plural": format!("{singular}s"), "singular": singular},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                }}},
            }],
        },
    });
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let created = post(client, path, crd).await;
    assert_eq!(created["kind"], "CustomResourceDefinition", "{created}");
    crate::support::wait_served(client, group, "v1", &format!("{singular}s")).await;
}

pub(crate) const PEERINGS: &str = "/apis/kopf.dev/v1/clusterkopfpeerings";

/// The entries of the cluster-wide peering object `name`, by identity.
async fn entries(client: &kube::Client, name: &str) -> serde_json::Map<String, Value> {
    status_at(client, &format!("{PEERINGS}/{name}")).await
}

/// The `status` of the peering object at this path.
pub(crate) async fn status_at(client: &kube::Client, path: &str) -> serde_json::Map<String, Value> {
    let request = http::Request::get(path).body(Vec::new()).unwrap();
    let object: Value = client.request(request).await.expect("the peering object");
    object["status"].as_object().cloned().unwrap_or_default()
}

pub(crate) fn settings(name: &str, priority: i64) -> Settings {
    let mut settings = kopf_testing::test_settings();
    settings.peering.name = name.into();
    settings.peering.priority = priority;
    settings
}

/// An operator whose on-create handler records the names it is called for.
pub(crate) fn recording(server: &FakeApiServer, calls: &Calls, settings: Settings) -> Operator {
    let calls = calls.clone();
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        move |invocation| {
            let calls = calls.clone();
            async move {
                calls.record(json!(invocation.name()));
                Ok(None)
            }
        },
    ));
    Operator::new(registry)
        .settings(settings)
        .client(server.client())
}

/// Waits until `count` logged lines about the peering `name` contain `text`.
pub(crate) async fn wait_lines(name: &str, text: &str, count: usize) {
    wait(&format!("{count} lines with {text:?}"), || async {
        let found = lines_of(name)
            .into_iter()
            .filter(|line| line.contains(text))
            .count();
        (found >= count).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_higher_priority_works_and_the_lower_resumes_when_it_leaves() {
    let name = "peering-priorities";
    lines_of(name); // Captures the logs from now on.
    let server = server_with_peering(name).await;
    let client = server.client();
    let (high_calls, low_calls) = (Calls::default(), Calls::default());
    let high = Running::ready(recording(&server, &high_calls, settings(name, 100))).await;
    let high_id = wait("the higher operator's entry", || async {
        let entries = entries(&client, name).await;
        let (id, entry) = entries.into_iter().next()?;
        (entry["priority"] == 100).then_some((id, entry))
    })
    .await;
    // Kopf's wire format: priority, lifetime in seconds, lastseen in Python's isoformat.
    let (high_id, entry) = high_id;
    let mut keys: Vec<&String> = entry.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["lastseen", "lifetime", "priority"]);
    assert_eq!(entry["lifetime"], 60);
    let lastseen = entry["lastseen"].as_str().unwrap();
    assert!(lastseen.ends_with("+00:00"), "{lastseen}");
    assert!(
        lastseen.len() == 25 || lastseen.len() == 32,
        "with or without microseconds: {lastseen}"
    );
    if std::env::var_os("POD_ID").is_none() {
        assert_eq!(
            high_id.split('/').count(),
            3,
            "user@host/stamp/random: {high_id}"
        );
    }

    // With the liveness endpoint: a standby is ready, so that a Deployment's rollout of
    // several replicas does not wait for it to lead.
    let port = free_port();
    let low = recording(&server, &low_calls, settings(name, 50))
        .liveness(format!("http://127.0.0.1:{port}/healthz"));
    let (low, _) = Running::start(low);
    wait_lines(name, "Pausing operations in favour of [<Peer ", 1).await;
    assert_eq!(
        http_get(port, "/readyz").await.unwrap(),
        (200, json!({"ready": true, "paused": true}))
    );
    wait("both entries", || async {
        (entries(&client, name).await.len() == 2).then_some(())
    })
    .await;
    create(&client, "first", json!({})).await;
    high_calls.wait_len(1).await;
    wait("the first object handled", || async {
        get(&client, "first").await.filter(|o| {
            !o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"].is_null()
        })
    })
    .await;
    assert!(
        low_calls.all().is_empty(),
        "the paused operator handles nothing"
    );

    high.stop().await.expect("a clean stop");
    let left = entries(&client, name).await;
    assert!(
        !left.contains_key(&high_id),
        "a stopped operator leaves no entry: {left:?}"
    );
    assert_eq!(left.len(), 1, "{left:?}");
    wait_lines(name, "Resuming operations after the pause", 1).await;
    create(&client, "second", json!({})).await;
    low_calls.wait_len(1).await;
    assert_eq!(high_calls.all(), [json!("first")]);
    assert_eq!(
        low_calls.all(),
        [json!("second")],
        "the resumed operator listed again, found the first handled, and handles new objects"
    );
    assert_eq!(
        http_get(port, "/readyz").await.unwrap(),
        (200, json!({"ready": true})),
        "serving"
    );
    low.stop().await.expect("a clean stop");
    wait("no entries left", || async {
        entries(&client, name).await.is_empty().then_some(())
    })
    .await;
    drop(client);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equal_priorities_pause_all_until_one_leaves() {
    let name = "peering-equal";
    lines_of(name);
    let server = server_with_peering(name).await;
    let client = server.client();
    let (first_calls, second_calls) = (Calls::default(), Calls::default());
    let first = Running::ready(recording(&server, &first_calls, settings(name, 7))).await;
    let (second, _) = Running::start(recording(&server, &second_calls, settings(name, 7)));
    wait_lines(
        name,
        "Possibly conflicting operators with the same priority",
        2,
    )
    .await;
    wait_lines(name, "Pausing all operators, including self", 2).await;
    create(&client, "nobody", json!({})).await;

    first.stop().await.expect("a clean stop");
    wait_lines(name, "Resuming operations after the pause", 1).await;
    let calls = second_calls.wait_len(1).await;
    assert_eq!(calls, [json!("nobody")], "the one left handles the object");
    assert!(
        first_calls.all().is_empty(),
        "nobody worked while both were there"
    );
    second.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_operators_daemons_stop_and_start_again_on_resuming() {
    let name = "peering-daemons";
    lines_of(name);
    let server = server_with_peering(name).await;
    let client = server.client();
    let calls = Calls::default();
    let recorded = calls.clone();
    let registry = Registry::new().with(
        DaemonHandler::new(examples(), "monitor", move |invocation| {
            let calls = recorded.clone();
            async move {
                calls.record(json!("started"));
                invocation.stopped().cancelled().await;
                calls.record(json!(format!("{:?}", invocation.stop_reason())));
                // A slow cleanup: the next instance waits for it.
                tokio::time::sleep(Duration::from_secs(2)).await;
                calls.record(json!("stopped"));
                Ok(None)
            }
        })
        .cancellation_backoff(Duration::from_secs(10)),
    );
    let operator = Operator::new(registry)
        .settings(settings(name, 1))
        .client(server.client());
    let low = Running::ready(operator).await;
    create(&client, "watched", json!({})).await;
    calls.wait_len(1).await;

    let high = Running::ready(
        Operator::new(Registry::new())
            .settings(settings(name, 2))
            .client(server.client()),
    )
    .await;
    let stopping = calls.wait_len(2).await;
    assert_eq!(
        stopping,
        [json!("started"), json!("Some(OperatorPaused)")],
        "the daemon is stopped for the pause"
    );
    // Resumes while the paused daemon still cleans up.
    high.stop().await.expect("a clean stop");
    let restarted = calls.wait_len(4).await;
    assert_eq!(
        restarted[2..],
        [json!("stopped"), json!("started")],
        "the daemon runs again, once its stopped instance has ended"
    );
    low.stop().await.expect("a clean stop");
    assert_eq!(
        calls.all()[4..],
        [json!("Some(OperatorExiting)"), json!("stopped")],
        "then it stops for the exit"
    );
    drop(client);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_crd_an_operator_is_standalone_and_a_mandatory_one_waits_for_it_paused() {
    let name = "peering-without-crd";
    lines_of(name);
    let server = server_with_crd().await;
    let client = server.client();
    let calls = Calls::default();
    let standalone = Running::ready(recording(&server, &calls, settings(name, 0))).await;
    wait_lines(
        name,
        "Default peering object is not found, falling back to the standalone mode.",
        1,
    )
    .await;
    create(&client, "served", json!({})).await;
    calls.wait_len(1).await;
    standalone.stop().await.expect("a clean stop");

    let mut mandatory = settings(name, 0);
    mandatory.peering.mandatory = true;
    mandatory.scanning.interval = Duration::from_millis(200);
    let paused_calls = Calls::default();
    let (paused, ready) = Running::start(recording(&server, &paused_calls, mandatory));
    wait_lines(name, "is not found: staying paused", 1).await;
    create(&client, "waiting", json!({})).await;
    assert!(!ready.is_ready(), "a paused operator lists nothing");
    // The CRD appears, then the peering object: no conflict, so the operator resumes.
    create_peering_crd(&client, "kopf.dev", "Cluster").await;
    wait_lines(name, "The peering CRD has appeared", 1).await;
    assert!(
        paused_calls.all().is_empty(),
        "still paused: no peering object yet"
    );
    let object = json!({"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": name}});
    post(&client, PEERINGS, object).await;
    assert_eq!(paused_calls.wait_len(1).await, [json!("waiting")]);
    wait("ready once listed", || async {
        ready.is_ready().then_some(())
    })
    .await;
    paused.stop().await.expect("a clean stop");
    assert!(
        entries(&client, name).await.is_empty(),
        "the entry is removed at the stop"
    );
    drop(client);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standalone_operator_ignores_the_peering_objects() {
    let name = "peering-standalone";
    let server = server_with_peering(name).await;
    let client = server.client();
    let calls = Calls::default();
    let mut standalone = settings(name, 0);
    standalone.peering.standalone = true;
    // A live peer of a higher priority, which would pause a peering operator.
    let lastseen = lastseen(time::Duration::ZERO);
    let peer =
        json!({"status": {"other": {"priority": 1000, "lifetime": 3600, "lastseen": lastseen}}});
    server.patch("clusterkopfpeerings", None, name, peer).await;
    let running = Running::ready(recording(&server, &calls, standalone)).await;
    create(&client, "served", json!({})).await;
    calls.wait_len(1).await;
    running.stop().await.expect("a clean stop");
    assert_eq!(
        entries(&client, name).await.keys().collect::<Vec<_>>(),
        ["other"],
        "no entry of its own"
    );
    drop(client);
    server.stop().await;
}

/// Kopf's `lastseen` for a moment this far from now.
fn lastseen(offset: time::Duration) -> String {
    (time::OffsetDateTime::now_utc() + offset)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_operator_looks_again_when_its_blocker_expires() {
    let name = "peering-expiry";
    lines_of(name);
    let server = server_with_peering(name).await;
    let client = server.client();
    let frozen = |lifetime: u64| json!({"status": {"frozen": {"priority": 100, "lifetime": lifetime, "lastseen": lastseen(time::Duration::ZERO)}}});
    server
        .patch("clusterkopfpeerings", None, name, frozen(3600))
        .await;
    let calls = Calls::default();
    let (running, _) = Running::start(recording(&server, &calls, settings(name, 0)));
    wait_lines(name, "Pausing operations in favour of [<Peer frozen", 1).await;
    create(&client, "later", json!({})).await;
    // The blocker now expires soon: the paused operator touches itself then, sees it dead,
    // removes it and resumes.
    server
        .patch("clusterkopfpeerings", None, name, frozen(2))
        .await;
    assert_eq!(calls.wait_len(1).await, [json!("later")]);
    wait_lines(name, "Resuming operations after the pause", 1).await;
    wait("the dead entry removed", || async {
        let entries = entries(&client, name).await;
        (!entries.contains_key("frozen") && entries.len() == 1).then_some(())
    })
    .await;
    running.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}

/// A freeze extended to an absurd lifetime (`freeze --lifetime 1000000000000`, or any peer
/// writing so) pauses for as long as it lives, and its removal (`resume`) resumes at once:
/// the operator's peering goes on judging, whatever the numbers in the entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_of_an_absurd_lifetime_pauses_until_it_is_removed() {
    let name = "peering-absurd";
    lines_of(name);
    let server = server_with_peering(name).await;
    let client = server.client();
    let path = format!("{PEERINGS}/{name}");
    let frozen = |lifetime: i64| json!({"status": {"frozen": {"priority": 100, "lifetime": lifetime, "lastseen": lastseen(time::Duration::ZERO)}}});
    assert_eq!(server.request("PATCH", &path, frozen(3600)).await.0, 200);
    let calls = Calls::default();
    let (running, _) = Running::start(recording(&server, &calls, settings(name, 0)));
    wait_lines(name, "Pausing operations in favour of [<Peer frozen", 1).await;
    assert_eq!(
        server
            .request("PATCH", &path, frozen(1_000_000_000_000))
            .await
            .0,
        200
    );
    create(&client, "during", json!({})).await;
    settle(&server).await;
    assert!(calls.all().is_empty(), "paused while the entry lives");
    assert_eq!(
        server
            .request("PATCH", &path, json!({"status": {"frozen": null}}))
            .await
            .0,
        200
    );
    assert_eq!(calls.wait_len(1).await, [json!("during")]);
    wait_lines(name, "Resuming operations after the pause", 1).await;
    running.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}

/// An absurd lifetime in the settings (`Duration::MAX`) keeps the operator peering, and what
/// it writes stays readable by Python Kopf's peers: `lastseen + lifetime` within the year 9999.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absurd_lifetime_in_the_settings_writes_an_entry_that_python_can_read() {
    let name = "peering-absurd-settings";
    lines_of(name);
    let server = server_with_peering(name).await;
    let client = server.client();
    let mut forever = settings(name, 3);
    forever.peering.lifetime = Duration::MAX;
    let calls = Calls::default();
    let running = Running::ready(recording(&server, &calls, forever)).await;
    let entry = wait("the operator's entry", || async {
        entries(&client, name)
            .await
            .into_iter()
            .next()
            .map(|(_, entry)| entry)
    })
    .await;
    let written = entry["lifetime"].as_i64().expect("whole seconds");
    let lastseen = time::OffsetDateTime::parse(
        entry["lastseen"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let end = lastseen.checked_add(time::Duration::seconds(written));
    assert!(
        end.is_some_and(|end| end.year() <= 9999),
        "Python cannot add {written} s to {lastseen}"
    );
    // And it goes on serving.
    create(&client, "served", json!({})).await;
    assert_eq!(calls.wait_len(1).await, [json!("served")]);
    running.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaced_peering_in_both_api_groups_with_dead_entries_cleaned() {
    let name = "peering-namespaced";
    let server = server_with_crd().await;
    let client = server.client();
    let mut objects = Vec::new();
    for group in ["kopf.dev", "zalando.org"] {
        create_peering_crd(&client, group, "Namespaced").await;
        let collection = format!("/apis/{group}/v1/namespaces/default/kopfpeerings");
        let ghost =
            json!({"priority": 9, "lifetime": 60, "lastseen": lastseen(-time::Duration::HOUR)});
        let object = json!({
            "apiVersion": format!("{group}/v1"), "kind": "KopfPeering",
            "metadata": {"name": name}, "status": {"ghost": ghost},
        });
        let created = wait("the peering object created", || async {
            let created = post(&client, &collection, object.clone()).await;
            (created["metadata"]["name"] == name).then_some(created)
        })
        .await;
        assert_eq!(created["status"]["ghost"]["priority"], 9);
        objects.push(format!("{collection}/{name}"));
    }
    let calls = Calls::default();
    let operator = recording(&server, &calls, settings(name, 5)).namespaces(["default"]);
    let running = Running::ready(operator).await;
    for object in &objects {
        let entry = wait("the operator's own entry only", || async {
            let entries = status_at(&client, object).await;
            let mut values = entries.values();
            match (values.next(), values.next()) {
                (Some(entry), None) if entry["priority"] == 5 => Some(entry.clone()),
                _ => None,
            }
        })
        .await;
        assert_eq!(entry["lifetime"], 60, "{object}");
    }
    create(&client, "served", json!({})).await;
    calls.wait_len(1).await;
    running.stop().await.expect("a clean stop");
    for object in objects {
        assert!(
            status_at(&client, &object).await.is_empty(),
            "{object}: no entry left"
        );
    }
    drop(client);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaced_peering_follows_the_namespaces_that_come_and_go() {
    let name = "peering-followed";
    lines_of(name);
    let server = server_with_crd().await;
    let client = server.client();
    create_peering_crd(&client, "kopf.dev", "Namespaced").await;
    let calls = Calls::default();
    // No namespace matches yet: the peering is kept in those that come.
    let operator = recording(&server, &calls, settings(name, 5)).namespaces(["team-*"]);
    let running = Running::ready(operator).await;

    // A namespace that comes with a peering object of a live peer of a higher priority.
    post(&client, "/api/v1/namespaces", namespace("team-a")).await;
    let team_a = "/apis/kopf.dev/v1/namespaces/team-a/kopfpeerings";
    let boss = json!({"priority": 10, "lifetime": 600, "lastseen": lastseen(time::Duration::ZERO)});
    let object = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfPeering",
                        "metadata": {"name": name}, "status": {"boss": boss}});
    wait("the peering object created", || async {
        let created = post(&client, team_a, object.clone()).await;
        (created["metadata"]["name"] == name).then_some(())
    })
    .await;
    let object = format!("{team_a}/{name}");
    wait("the operator's entry in the new namespace", || async {
        let entries = status_at(&client, &object).await;
        entries.values().any(|e| e["priority"] == 5).then_some(())
    })
    .await;
    wait_lines(name, "Pausing operations in favour of [<Peer boss", 1).await;

    // The namespace goes: so does its peering, and the pause it made.
    post(&client, "/api/v1/namespaces", namespace("team-b")).await;
    let delete = http::Request::delete("/api/v1/namespaces/team-a")
        .body(Vec::new())
        .unwrap();
    client
        .request::<Value>(delete)
        .await
        .expect("the namespace deleted");
    wait_lines(name, "Resuming operations after the pause", 1).await;
    let example = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                         "metadata": {"name": "in-team-b"}, "spec": {}});
    let examples = "/apis/kopf.dev/v1/namespaces/team-b/kopfexamples";
    post(&client, examples, example).await;
    assert_eq!(calls.wait_len(1).await, [json!("in-team-b")]);
    running.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// `POST path` with this body: the answer (the object, or the error's `Status`).
async fn post(client: &kube::Client, path: &str, body: Value) -> Value {
    TestClient::new(client.clone())
        .request("POST", path, body)
        .await
        .1
}

/// Tells when it is dropped: the memo that holds it is gone.
struct Tracked(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// An object deleted while the operator was paused is forgotten once it resumes: its memo
/// (and what handlers kept in it) is dropped then, not kept until the operator exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memo_of_an_object_deleted_while_paused_is_dropped_on_resuming() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let name = "peering-memos";
    lines_of(name);
    let server = server_with_peering(name).await;
    let client = server.client();
    let dropped = Arc::new(AtomicUsize::new(0));
    let calls = Calls::default();
    let (recorder, counter) = (calls.clone(), dropped.clone());
    let registry = Registry::new().with(kopf::registry::EventHandler::on_event(
        examples(),
        "remember",
        move |invocation| {
            let memo = invocation.memo();
            if memo.get::<Tracked>().is_none() {
                memo.insert(Tracked(counter.clone()));
            }
            recorder.record(json!(invocation.name()));
            async { Ok(None) }
        },
    ));
    let operator = Operator::new(registry)
        .settings(settings(name, 0))
        .client(server.client());
    let running = Running::ready(operator).await;
    create(&client, "doomed", json!({})).await;
    calls.wait_len(1).await;
    create(&client, "kept", json!({})).await;
    calls.wait_len(2).await;

    let path = format!("{PEERINGS}/{name}");
    let frozen = json!({"status": {"frozen": {"priority": 100, "lifetime": 3600, "lastseen": lastseen(time::Duration::ZERO)}}});
    assert_eq!(server.request("PATCH", &path, frozen).await.0, 200);
    wait_lines(name, "Pausing operations in favour of [<Peer frozen", 1).await;
    crate::support::delete(&client, "doomed").await;
    settle(&server).await;
    assert_eq!(dropped.load(Ordering::SeqCst), 0, "kept while paused");
    assert_eq!(
        server
            .request("PATCH", &path, json!({"status": {"frozen": null}}))
            .await
            .0,
        200
    );
    wait_lines(name, "Resuming operations after the pause", 1).await;
    wait("the deleted object's memo dropped", || async {
        (dropped.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    settle(&server).await;
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the memo of the object still there is kept"
    );
    running.stop().await.expect("a clean stop");
    drop(client);
    server.stop().await;
}
