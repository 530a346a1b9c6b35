//! Kubernetes Events posted about objects (handlers' log records and the events toolkit), and
//! memos: the operator's seeded into each object's, each object's kept while it lives.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kopf::operator::Operator;
use kopf::registry::{ChangeHandler, EventHandler, Registry};
use kopf::resources::Selector;
use kopf::{Memo, Settings};
use kopf_testing::{DEADLINE, FakeApiServer, OperatorHarness, TestClient, test_settings, wait};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::{
    Calls, create, delete, examples, get, metrics, metrics_url, patch, server_with_crd, wait_object,
};

const EVENTS: &str = "/api/v1/namespaces/default/events";

async fn events(client: &kube::Client) -> Vec<Value> {
    let request = http::Request::get(EVENTS).body(Vec::new()).unwrap();
    let list: Value = client.request(request).await.expect("events are listed");
    let items = list["items"].as_array().cloned().unwrap_or_default();
    ours(items)
}

/// Posts an Event as a real API server's own controllers do in `default`, which the tests
/// that count the operator's Events leave out.
pub(crate) async fn post_the_servers_own_event(client: &kube::Client) {
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": "kubernetes-"},
        "involvedObject": {"apiVersion": "v1", "kind": "Service", "name": "kubernetes", "namespace": "default"},
        "reason": "ClusterIPNotAllocated", "message": "repairing", "type": "Warning",
        "source": {"component": "ipallocator-repair-controller"},
    });
    let request = http::Request::post(EVENTS)
        .header("Content-Type", "application/json")
        .body(event.to_string().into_bytes())
        .unwrap();
    let _: Value = client.request(request).await.expect("an Event is created");
}

/// The operator's Events, not the server's own: a real API server posts some to `default`
/// (`ClusterIPNotAllocated` while it repairs the `kubernetes` Service's address).
pub(crate) fn ours(events: Vec<Value>) -> Vec<Value> {
    events
        .into_iter()
        .filter(|event| event["source"]["component"] == "kopf")
        .collect()
}

/// Runs an operator to its end on a server the test keeps: once `run()` returned, the poster
/// has posted all it ever will.
pub(crate) async fn run_until(
    server: &FakeApiServer,
    operator: Operator,
    done: impl AsyncFnOnce(&kube::Client),
) {
    // As the operator's own clients: kube-client's retries off, the operator retries.
    let mut config = server.config();
    config.default_retry = false;
    let client = kube::Client::try_from(config).expect("a client of the fake server");
    let operator = operator.client(client);
    let ready = operator.ready();
    let stop = CancellationToken::new();
    let running = tokio::spawn(operator.run(stop.clone()));
    tokio::time::timeout(DEADLINE, ready.wait())
        .await
        .expect("the operator gets ready in time");
    done(&server.client()).await;
    stop.cancel();
    tokio::time::timeout(DEADLINE, running)
        .await
        .expect("run() returns in time")
        .expect("run() does not panic")
        .expect("a clean stop");
}

/// A create handler that logs at every level and posts an event through the toolkit, about
/// its object and about a core Event (which Kopf never posts about).
fn logging_registry() -> Registry {
    Registry::new().with(ChangeHandler::on_create(examples(), "create_fn", |inv| async move {
        let logger = inv.logger();
        logger.debug("a debug record");
        logger.info(format_args!("hello from {}", inv.name()));
        logger.warn("x".repeat(2000));
        logger.error("an error record");
        inv.events().info("Created", "by the toolkit");
        let event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "default"}});
        inv.events().about(&event).info("Loop", "never posted");
        Ok(Some(json!("done")))
    }))
}

fn by_message<'a>(events: &'a [Value], prefix: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["message"].as_str().is_some_and(|m| m.starts_with(prefix)))
        .unwrap_or_else(|| panic!("an event with a message starting {prefix:?} in {events:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_records_are_posted_as_events_in_kopfs_shape_when_asked() {
    let mut settings = test_settings();
    settings.posting.loggers = true;
    let server = server_with_crd().await;
    let mut object = Value::Null;
    run_until(
        &server,
        Operator::new(logging_registry()).settings(settings),
        async |client| {
            create(client, "one", json!({})).await;
            object = wait("the create handler's result", || async {
                get(client, "one")
                    .await
                    .filter(|o| o["status"]["create_fn"] == "done")
            })
            .await;
            wait("six events", || async {
                (events(client).await.len() >= 6).then_some(())
            })
            .await;
        },
    )
    .await;

    let events = events(&server.client()).await;
    assert_eq!(
        events.len(),
        6,
        "info, warn, error, toolkit, and Kopf's two lines (the handler's success, the \
         cause processed); no debug, nothing about Events: {events:#?}"
    );
    let expected_reference = json!({
        "apiVersion": "kopf.dev/v1",
        "kind": "KopfExample",
        "name": "one",
        "uid": object["metadata"]["uid"],
        "namespace": "default",
    });
    for event in &events {
        assert!(
            event["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("kopf-event-") && n.len() > "kopf-event-".len()),
            "a generated name: {event:#}"
        );
        assert_eq!(event["metadata"]["generateName"], "kopf-event-");
        assert_eq!(event["metadata"]["namespace"], "default");
        assert_eq!(event["involvedObject"], expected_reference);
        assert_eq!(event["action"], "Action?");
        assert_eq!(event["source"], json!({"component": "kopf"}));
        assert_eq!(event["reportingComponent"], "kopf");
        assert_eq!(event["reportingInstance"], "dev");
        // The server keeps them in its own format (RFC 3339 in UTC, `Z`).
        for stamp in ["eventTime", "firstTimestamp", "lastTimestamp"] {
            let stamp = event[stamp].as_str().unwrap_or_default();
            assert!(
                stamp.starts_with("20") && stamp.ends_with('Z'),
                "{stamp}: {event:#}"
            );
        }
    }
    let info = by_message(&events, "hello from one");
    assert_eq!(
        (&info["type"], &info["reason"]),
        (&json!("Normal"), &json!("Logging"))
    );
    let warning = by_message(&events, "xxx");
    assert_eq!(
        (&warning["type"], &warning["reason"]),
        (&json!("Warning"), &json!("Logging"))
    );
    let cut = warning["message"].as_str().unwrap();
    assert_eq!(cut, format!("{}...{}", "x".repeat(511), "x".repeat(510)));
    for kopfs in [
        "Handler 'create_fn' succeeded.",
        "Creation is processed: 1 succeeded; 0 failed.",
    ] {
        let line = by_message(&events, kopfs);
        assert_eq!(
            (&line["type"], &line["reason"]),
            (&json!("Normal"), &json!("Logging"))
        );
    }
    let error = by_message(&events, "an error record");
    assert_eq!(
        (&error["type"], &error["reason"]),
        (&json!("Error"), &json!("Logging"))
    );
    let toolkit = by_message(&events, "by the toolkit");
    assert_eq!(
        (&toolkit["type"], &toolkit["reason"]),
        (&json!("Normal"), &json!("Created"))
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_records_and_toolkit_events_at_or_above_the_level_are_posted() {
    let mut settings = test_settings();
    settings.posting.loggers = true;
    settings.posting.level = tracing::Level::WARN;
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        |inv| async move {
            let logger = inv.logger();
            logger.info("an info record");
            logger.warn("a warning record");
            logger.error("an error record");
            kopf::info(inv.body(), "Info", "an info event");
            kopf::warn(inv.body(), "Warning", "a warning event");
            kopf::exception(inv.body(), "Error", "an error event");
            kopf::event(
                inv.body(),
                "Normal",
                "Any",
                "an event of any type, whatever the level",
            );
            Ok(Some(json!("done")))
        },
    ));
    let server = server_with_crd().await;
    run_until(
        &server,
        Operator::new(registry).settings(settings),
        async |client| {
            post_the_servers_own_event(client).await;
            create(client, "one", json!({})).await;
            wait("the create handler's result", || async {
                get(client, "one")
                    .await
                    .filter(|o| o["status"]["create_fn"] == "done")
            })
            .await;
        },
    )
    .await;
    let events = events(&server.client()).await;
    let mut posted: Vec<(&str, &str)> = events
        .iter()
        .filter_map(|e| Some((e["type"].as_str()?, e["message"].as_str()?)))
        .collect();
    posted.sort_unstable();
    assert_eq!(
        posted,
        [
            ("Error", "an error event"),
            ("Error", "an error record"),
            ("Normal", "an event of any type, whatever the level"),
            ("Warning", "a warning event"),
            ("Warning", "a warning record"),
        ],
        "nothing at INFO, Kopf's own lines included"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_only_the_toolkit_posts_and_disabled_posting_posts_nothing() {
    for (enabled, expected) in [(true, vec!["by the toolkit"]), (false, vec![])] {
        let mut settings = test_settings();
        settings.posting.enabled = enabled;
        let server = server_with_crd().await;
        run_until(
            &server,
            Operator::new(logging_registry()).settings(settings),
            async |client| {
                create(client, "one", json!({})).await;
                wait("the create handler's result", || async {
                    get(client, "one")
                        .await
                        .filter(|o| o["status"]["create_fn"] == "done")
                })
                .await;
            },
        )
        .await;
        let events = events(&server.client()).await;
        let messages: Vec<&str> = events
            .iter()
            .filter_map(|e| e["message"].as_str())
            .collect();
        assert_eq!(messages, expected, "posting enabled: {enabled}");
        server.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_about_cluster_scoped_objects_go_to_the_default_namespace() {
    let namespaces = Selector::new("", "v1", "namespaces");
    let registry = Registry::new().with(EventHandler::on_event(
        namespaces,
        "seen",
        |inv| async move {
            if inv.name() == "watched" {
                inv.events().warn("Seen", "a namespace");
            }
            Ok(None)
        },
    ));
    let server = crate::support::apiserver(FakeApiServer::builder()).await;
    let mut uid = Value::Null;
    run_until(
        &server,
        Operator::new(registry).settings(test_settings()),
        async |client| {
            let created = TestClient::new(client.clone())
        .request("POST", "/api/v1/namespaces", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "watched"}}))
        .await
        .1;
            uid = created["metadata"]["uid"].clone();
            wait("the event", || async {
                (!events(client).await.is_empty()).then_some(())
            })
            .await;
        },
    )
    .await;
    let events = events(&server.client()).await;
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(
        events[0]["involvedObject"],
        json!({"apiVersion": "v1", "kind": "Namespace", "name": "watched", "uid": uid, "namespace": "default"})
    );
    assert_eq!(
        (&events[0]["type"], &events[0]["reason"]),
        (&json!("Warning"), &json!("Seen"))
    );
    server.stop().await;
}

/// Counts its drops: shows when an object's memo is gone.
struct Tracked(Arc<AtomicUsize>);

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The object's name, as its first event handler saw it.
struct Owner(String);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memos_are_seeded_from_the_operator_kept_per_object_and_dropped_with_it() {
    let shared = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let calls = Calls::default();
    let (c1, c2, d) = (calls.clone(), calls.clone(), dropped.clone());
    let registry = Registry::new()
        .with(EventHandler::on_event(examples(), "count", move |inv| {
            let dropped = d.clone();
            async move {
                let memo = inv.memo();
                memo.get::<Arc<AtomicUsize>>()
                    .expect("the operator's value, seeded")
                    .fetch_add(1, Ordering::SeqCst);
                memo.update(|values| {
                    let seen = values.get("events").and_then(Value::as_u64).unwrap_or(0);
                    values.insert("events".into(), (seen + 1).into());
                });
                if memo.get::<Owner>().is_none() {
                    memo.insert(Owner(inv.name().to_string()));
                    memo.insert(Tracked(dropped));
                }
                Ok(None)
            }
        }))
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            move |inv| {
                let calls = c1.clone();
                async move {
                    let memo = inv.memo();
                    calls.record(json!({
                        "handler": "create",
                        "name": inv.name(),
                        "owner": memo.get::<Owner>().map(|o| o.0.clone()),
                        "greeting": memo.value("greeting"),
                        "created": memo.value("created"),
                        "events": memo.value("events"),
                    }));
                    memo.set("created", inv.name());
                    Ok(None)
                }
            },
        ))
        .with(ChangeHandler::on_update(
            examples(),
            "update_fn",
            move |inv| {
                let calls = c2.clone();
                async move {
                    let memo = inv.memo();
                    calls.record(json!({
                        "handler": "update",
                        "name": inv.name(),
                        "owner": memo.get::<Owner>().map(|o| o.0.clone()),
                        "created": memo.value("created"),
                        "events": memo.value("events"),
                    }));
                    Ok(None)
                }
            },
        ));
    let mut settings: Settings = test_settings();
    settings.queueing.idle_timeout = Duration::from_millis(100);
    let operator = Operator::new(registry)
        .settings(settings)
        .memo(
            Memo::new()
                .with(shared.clone())
                .with_value("greeting", "hello"),
        )
        .metrics("http://127.0.0.1:0/metrics");
    let endpoint = operator.metrics_endpoint();
    let harness = OperatorHarness::start_on(server_with_crd().await, operator).await;
    let url = metrics_url(&endpoint).await;
    let client = harness.client();

    create(&client, "one", json!({"field": 1})).await;
    calls.wait_len(1).await;
    create(&client, "two", json!({"field": 1})).await;
    let created = calls.wait_len(2).await;
    for (call, name) in created.iter().zip(["one", "two"]) {
        assert_eq!(call["handler"], "create");
        assert_eq!(call["name"], name);
        assert_eq!(
            call["owner"], name,
            "the event handler's value, in the same memo"
        );
        assert_eq!(call["greeting"], "hello", "seeded from the operator's memo");
        assert_eq!(
            call["created"],
            Value::Null,
            "nothing from the other object"
        );
        assert_eq!(
            call["events"], 1,
            "the event handlers ran first, on the same memo"
        );
    }

    // Once idle for the idle timeout, the worker of "one" ends (and so does that of "two");
    // its memo stays. The operator counts the per-object workers alive: none is left.
    wait("the objects' workers to idle out", || async {
        let workers = metrics(&url)
            .await
            .get(r#"kopf_workers{resource="kopfexamples.v1.kopf.dev"}"#)
            .copied();
        (workers == Some(0.0)).then_some(())
    })
    .await;
    patch(&client, "one", json!({"spec": {"field": 2}})).await;
    let updated = calls.wait_len(3).await;
    let update = &updated[2];
    assert_eq!(update["handler"], "update");
    assert_eq!(update["owner"], "one");
    assert_eq!(
        update["created"], "one",
        "set by the create handler of this object"
    );
    assert!(
        update["events"].as_u64().is_some_and(|n| n >= 2),
        "{update}"
    );

    // The operator's typed value is one, shared by all objects' memos.
    let counted = wait_object(&harness, "two", "two's object", |_| true).await;
    assert!(counted["metadata"]["uid"].is_string());
    assert!(shared.load(Ordering::SeqCst) >= 3);

    assert_eq!(dropped.load(Ordering::SeqCst), 0);
    delete(&client, "one").await;
    wait("one's memo to be dropped", || async {
        (dropped.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "two's memo stays");
    harness.stop().await.expect("a clean stop");
}

/// Settings for the retries of posts: quick backoffs, Kopf's count of them.
fn quick_posting() -> Settings {
    let mut settings = test_settings();
    settings.posting.default_backoffs = vec![Duration::from_millis(100); 8];
    settings
}

/// The operator's posts of Events.
fn event_posts(server: &FakeApiServer) -> Vec<kopf_testing::fake_apiserver::LoggedRequest> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.verb == "create" && r.resource == "events")
        .collect()
}

/// A create handler that posts one event per name in the object's `spec.events`.
fn posting_registry() -> Registry {
    Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        |inv| async move {
            for reason in inv.spec()["events"].as_array().into_iter().flatten() {
                kopf::info(inv.body(), reason.as_str().unwrap_or("None"), "posted");
            }
            Ok(None)
        },
    ))
}

async fn reasons(client: &kube::Client) -> Vec<String> {
    let mut reasons: Vec<String> = events(client)
        .await
        .iter()
        .filter_map(|e| e["reason"].as_str().map(String::from))
        .collect();
    reasons.sort();
    reasons
}

/// Kopf 1.45 retries failed posts (`posting.default_backoffs`): Events survive `500`s, a
/// `429` with `Retry-After` (waited at least as long as it asks), and a connection dropped
/// before the server took the post; each arrives once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_retried_through_faults_and_not_lost() {
    let server = server_with_crd().await;
    use kopf_testing::Fault;
    server.inject(
        Fault::respond(500)
            .verb("create")
            .resource("events")
            .times(2),
    );
    run_until(
        &server,
        Operator::new(posting_registry()).settings(quick_posting()),
        async |client| {
            create(client, "one", json!({"events": ["AfterErrors"]})).await;
            wait("the event after two 500s", || async {
                (reasons(client).await == ["AfterErrors"]).then_some(())
            })
            .await;

            server.inject(
                Fault::too_many_requests(1)
                    .verb("create")
                    .resource("events")
                    .times(1),
            );
            let asked = tokio::time::Instant::now();
            create(client, "two", json!({"events": ["AfterTooMany"]})).await;
            wait("the event after a 429", || async {
                reasons(client)
                    .await
                    .contains(&"AfterTooMany".to_string())
                    .then_some(())
            })
            .await;
            assert!(
                asked.elapsed() >= Duration::from_secs(1),
                "Retry-After: 1 is waited, not the 100 ms backoff"
            );

            server.inject(
                Fault::hold_before_commit()
                    .verb("create")
                    .resource("events")
                    .times(1),
            );
            create(client, "three", json!({"events": ["AfterDrop"]})).await;
            server
                .wait_held(DEADLINE)
                .await
                .expect("the post is held by the server");
            server.cut_held();
            wait("the event after a dropped connection", || async {
                reasons(client)
                    .await
                    .contains(&"AfterDrop".to_string())
                    .then_some(())
            })
            .await;
        },
    )
    .await;
    assert_eq!(
        reasons(&server.client()).await,
        ["AfterDrop", "AfterErrors", "AfterTooMany"],
        "each arrived once"
    );
    let codes: Vec<u16> = event_posts(&server).iter().map(|r| r.code).collect();
    assert_eq!(
        codes,
        [500, 500, 201, 429, 201, 0, 201],
        "two 500s, a 429 and a drop, each retried"
    );
    server.stop().await;
}

/// An event that keeps failing is dropped after its backoffs, with a warning; it does not
/// hold back the events of other objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_that_keeps_failing_is_dropped_after_its_backoffs() {
    let server = server_with_crd().await;
    use kopf_testing::Fault;
    let mut settings = quick_posting();
    settings.posting.default_backoffs = vec![Duration::from_millis(50); 2];
    server.inject(
        Fault::respond(503)
            .verb("create")
            .resource("events")
            .times(3),
    );
    run_until(
        &server,
        Operator::new(posting_registry()).settings(settings),
        async |client| {
            create(client, "one", json!({"events": ["Lost"]})).await;
            wait("three attempts", || async {
                (event_posts(&server).len() >= 3).then_some(())
            })
            .await;
            create(client, "two", json!({"events": ["Kept"]})).await;
            wait("the other object's event", || async {
                (reasons(client).await == ["Kept"]).then_some(())
            })
            .await;
        },
    )
    .await;
    let codes: Vec<u16> = event_posts(&server).iter().map(|r| r.code).collect();
    assert_eq!(reasons(&server.client()).await, ["Kept"], "{codes:?}");
    server.stop().await;
}

/// Kopf's `kopf.info` works anywhere in the operator: here from a task that a startup
/// handler started (Kopf's context variables reach every task of the operator; kopf-rs finds
/// the operator running on the task's runtime).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_posted_from_a_startup_task_arrives() {
    let started = Arc::new(tokio::sync::Notify::new());
    let go = started.clone();
    let registry = Registry::new().with(kopf::registry::ActivityHandler::on_startup(
        "start_task",
        move |activity| {
            let client = activity.client().clone();
            let go = go.clone();
            // A task of the program's own, as a Kopf operator's `asyncio.create_task`.
            tokio::spawn(async move {
                go.notified().await;
                let one = loop {
                    if let Some(one) = get(&client, "one").await {
                        break one;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                };
                kopf::info(
                    &one,
                    "FromTask",
                    "posted by a task the startup handler started",
                );
            });
            async { Ok(None) }
        },
    ));
    let server = server_with_crd().await;
    run_until(
        &server,
        Operator::new(registry).settings(quick_posting()),
        async |client| {
            let one = create(client, "one", json!({})).await;
            started.notify_one();
            let event = wait("the task's event", || async {
                events(client)
                    .await
                    .into_iter()
                    .find(|e| e["reason"] == "FromTask")
            })
            .await;
            assert_eq!(event["involvedObject"]["uid"], one["metadata"]["uid"]);
            assert_eq!(event["type"], "Normal");
        },
    )
    .await;
    server.stop().await;
}

/// At a stop, what is queued is still posted (within the grace period), before `run()`
/// returns: the poster is the last part of the operator to stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_queued_at_the_stop_are_posted_before_run_returns() {
    let server = server_with_crd().await;
    use kopf_testing::Fault;
    let registry = Registry::new().with(kopf::registry::ActivityHandler::on_cleanup(
        "goodbye",
        |_| async {
            let about = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "uid": "ns-uid"}});
            kopf::warn(&about, "Goodbye", "posted by a cleanup handler");
            Ok(None)
        },
    ));
    let registry = registry.with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        |inv| async move {
            kopf::info(inv.body(), "Slow", "posted while the server is slow");
            Ok(None)
        },
    ));
    // Every post waits a while and the first fails: they are still in flight at the stop.
    server.inject(
        Fault::delay(Duration::from_millis(300))
            .verb("create")
            .resource("events"),
    );
    server.inject(
        Fault::respond(500)
            .verb("create")
            .resource("events")
            .times(1),
    );
    run_until(
        &server,
        Operator::new(registry).settings(quick_posting()),
        async |client| {
            create(client, "one", json!({})).await;
            wait("the first attempt", || async {
                (!event_posts(&server).is_empty()).then_some(())
            })
            .await;
        },
    )
    .await;
    assert_eq!(
        reasons(&server.client()).await,
        ["Goodbye", "Slow"],
        "both posted before run() returned"
    );
    server.stop().await;
}
