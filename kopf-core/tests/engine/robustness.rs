//! Robustness and filters: restarts resume where the last operator stopped, broken watches
//! and expired histories lose no change, resources and namespaces come and go, handler filters
//! and limits decide what runs, event handlers see everything, and odd objects break nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kopf::filters::{MetaFilter, ValueFilter};
use kopf::operator::{Operator, OperatorError};
use kopf::registry::{ChangeHandler, ErrorsMode, EventHandler, Registry};
use kopf::{Invocation, PermanentError, TemporaryError};
use kopf_testing::{
    DEADLINE, FakeApiServer, Fault, OperatorHarness, TestClient, fixtures, test_settings, wait,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::{COLLECTION, Calls, create, delete, examples, get, lists, patch, settle};

const LAST_HANDLED: &str = "kopf.zalando.org/last-handled-configuration";

async fn server_with(schema: Option<Value>) -> FakeApiServer {
    let server = crate::support::apiserver(FakeApiServer::builder()).await;
    if let Some(schema) = schema {
        server
            .apply_value(fixtures::kopfexample_crd_with_schema(schema))
            .await;
    }
    server
}

/// Creates namespaces (the server stores objects only in existing ones).
async fn create_namespaces(client: &kube::Client, names: &[&str]) {
    for name in names {
        let namespace = json!({"metadata": {"name": name}});
        let (status, created) = TestClient::new(client.clone())
            .request("POST", "/api/v1/namespaces", namespace)
            .await;
        assert_eq!(status, 201, "{created}");
    }
}

/// Creates an object from a whole body (metadata included) in the default namespace.
async fn create_body(client: &kube::Client, body: Value) -> Value {
    let (status, created) = TestClient::new(client.clone())
        .request("POST", COLLECTION, body)
        .await;
    assert_eq!(status, 201, "{created}");
    created
}

async fn get_in(client: &kube::Client, namespace: &str, name: &str) -> Option<Value> {
    let path = fixtures::kopfexample_path(namespace, name);
    let (status, object) = TestClient::new(client.clone())
        .try_request("GET", &path, None)
        .await
        .ok()?;
    status.is_success().then_some(object)
}

fn last_handled(object: &Value) -> Option<Value> {
    serde_json::from_str(object["metadata"]["annotations"][LAST_HANDLED].as_str()?).ok()
}

/// Waits until the object (in `default`) satisfies `condition`; returns it.
async fn wait_for(
    client: &kube::Client,
    name: &str,
    what: &str,
    condition: impl Fn(&Value) -> bool,
) -> Value {
    wait(&format!("{name}: {what}"), || async {
        get(client, name).await.filter(|o| condition(o))
    })
    .await
}

/// Waits until the object's last handled spec is `spec`: its newest change is handled.
async fn wait_handled(client: &kube::Client, name: &str, spec: Value) -> Value {
    wait_for(client, name, &format!("handled as {spec}"), |o| {
        last_handled(o).is_some_and(|l| l["spec"] == spec)
    })
    .await
}

fn named<'a>(calls: &'a [Value], key: &str, value: &str) -> Vec<&'a Value> {
    calls.iter().filter(|c| c[key] == value).collect()
}

/// A handler that records what it saw: handler id, reason, name, namespace, spec, old, new.
fn recording(
    calls: &Calls,
    handler: &'static str,
) -> impl Fn(Invocation) -> kopf::registry::HandlerFuture + Send + Sync + 'static {
    let calls = calls.clone();
    move |inv: Invocation| {
        calls.record(json!({
            "handler": handler,
            "reason": inv.reason().map(|r| r.as_str()),
            "name": inv.name(),
            "namespace": inv.namespace(),
            "spec": inv.spec(),
            "old": inv.old(),
            "new": inv.new(),
            "retry": inv.retry(),
        }));
        Box::pin(async { Ok(None) })
    }
}

/// An operator on a server that outlives it, to restart operators on the same objects.
struct Running {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), OperatorError>>,
}

impl Running {
    async fn start(server: &FakeApiServer, operator: Operator) -> Running {
        let operator = operator.client(server.client());
        let ready = operator.ready();
        let stop = CancellationToken::new();
        let task = tokio::spawn(operator.run(stop.clone()));
        tokio::time::timeout(DEADLINE, ready.wait())
            .await
            .expect("the operator gets ready in time");
        Running { stop, task }
    }

    async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(DEADLINE, self.task)
            .await
            .expect("the operator stops in time")
            .expect("the operator's task did not panic")
            .expect("a clean stop");
    }
}

// 1. Restarts.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_operator_resumes_handled_objects_and_does_not_create_them_again() {
    let calls = Calls::default();
    let server = server_with(Some(fixtures::kopfexample_schema())).await;
    let client = server.client();

    let first = Running::start(
        &server,
        Operator::new(Registry::new().with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            recording(&calls, "create"),
        )))
        .settings(test_settings()),
    )
    .await;
    create(&client, "existing", json!({"field": 1})).await;
    wait_handled(&client, "existing", json!({"field": 1})).await;
    first.stop().await;
    assert_eq!(calls.all().len(), 1, "{:?}", calls.all());

    let registry = Registry::new()
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            recording(&calls, "create"),
        ))
        .with(ChangeHandler::on_resume(
            examples(),
            "resume_fn",
            recording(&calls, "resume"),
        ));
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await;
    calls.wait_len(2).await;
    // Objects created while it runs are created, not resumed.
    create(&client, "fresh", json!({"field": 2})).await;
    calls.wait_len(3).await;
    wait_handled(&client, "fresh", json!({"field": 2})).await;
    // A relisting (the watch answered 410) is not a restart: nothing is resumed again.
    let server = harness.server();
    let lists_before = lists(server);
    server.inject(
        Fault::respond(410)
            .verb("watch")
            .resource("kopfexamples.kopf.dev")
            .times(1),
    );
    server.close_watches();
    wait("a relisting", || async {
        (lists(server) > lists_before).then_some(())
    })
    .await;
    settle(harness.server()).await;
    harness.stop().await.expect("a clean stop");

    let calls = calls.all();
    assert_eq!(calls.len(), 3, "{calls:#?}");
    let summary: Vec<(&Value, &Value, &Value)> = calls
        .iter()
        .map(|c| (&c["handler"], &c["name"], &c["reason"]))
        .collect();
    assert_eq!(
        summary,
        vec![
            (&json!("create"), &json!("existing"), &json!("create")),
            (&json!("resume"), &json!("existing"), &json!("resume")),
            (&json!("create"), &json!("fresh"), &json!("create")),
        ]
    );
    // Resuming: nothing changed since the object was handled.
    assert_eq!(calls[1]["old"], json!({"spec": {"field": 1}}));
    assert_eq!(calls[1]["new"], json!({"spec": {"field": 1}}));
}

/// A write that changes nothing (a handler's result equal to the one stored before) makes no
/// new version and no watch event: the handlers after it run at once, not after the
/// consistency timeout (found by the differential suite: after a restart, the second handler
/// of a change waited for the timeout, so the third came only with the next change).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_changes_nothing_is_not_waited_for() {
    let calls = Calls::default();
    let server = server_with(Some(fixtures::kopfexample_schema())).await;
    let client = server.client();
    // Each returns the same result every time: stored again, it changes nothing.
    fn same_result(
        calls: &Calls,
        handler: &'static str,
    ) -> impl Fn(Invocation) -> kopf::registry::HandlerFuture + Send + Sync + 'static + use<> {
        let calls = calls.clone();
        move |invocation: Invocation| -> kopf::registry::HandlerFuture {
            calls.record(json!({"handler": handler, "name": invocation.name()}));
            Box::pin(async { Ok(Some(json!({"done": true}))) })
        }
    }
    let registry = Registry::new()
        .with(
            ChangeHandler::on_update(examples(), "update_fn", same_result(&calls, "update"))
                .field("spec.field"),
        )
        .with(ChangeHandler::on_field(
            examples(),
            "field_fn",
            "spec.field",
            same_result(&calls, "field"),
        ))
        .with(ChangeHandler::on_field(
            examples(),
            "other_fn",
            "spec.other",
            same_result(&calls, "other"),
        ));
    // A lost wake-up waits for this, far beyond the test's deadline.
    let mut settings = test_settings();
    settings.persistence.consistency_timeout = Duration::from_secs(600);
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(settings)).await;
    create(&client, "one", json!({"field": "a"})).await;
    wait_handled(&client, "one", json!({"field": "a"})).await;
    patch(&client, "one", json!({"spec": {"field": "b"}})).await;
    wait_handled(&client, "one", json!({"field": "b"})).await;
    let before = calls.all().len();

    // update_fn's and field_fn's results are stored already: writing them changes nothing.
    patch(&client, "one", json!({"spec": {"field": "c", "other": 1}})).await;
    wait_handled(&client, "one", json!({"field": "c", "other": 1})).await;
    let handlers: Vec<Value> = calls.all()[before..]
        .iter()
        .map(|call| call["handler"].clone())
        .collect();
    assert_eq!(handlers, ["update", "field", "other"]);
    harness.stop().await.expect("a clean stop");
    drop(client);
}

/// As Kopf: a field handler (`on_field`, or `on_update` with a field) is called only when its
/// field's value changed, whatever the reason; a restart with no change of the field calls it
/// not at all (it was once called with reason `resume`, old equal to new).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn field_handlers_are_called_after_a_restart_only_if_their_field_changed() {
    let calls = Calls::default();
    let server = server_with(Some(fixtures::kopfexample_schema())).await;
    let client = server.client();
    let field_handlers = |calls: &Calls| {
        Registry::new()
            .with(ChangeHandler::on_field(
                examples(),
                "field_fn",
                "spec.field",
                recording(calls, "field"),
            ))
            .with(
                ChangeHandler::on_update(examples(), "update_fn", recording(calls, "update"))
                    .field("spec.field"),
            )
    };

    let first = Running::start(
        &server,
        Operator::new(field_handlers(&calls)).settings(test_settings()),
    )
    .await;
    create(&client, "untouched", json!({"field": 1})).await;
    create(&client, "changed", json!({"field": 1})).await;
    wait_handled(&client, "untouched", json!({"field": 1})).await;
    wait_handled(&client, "changed", json!({"field": 1})).await;
    first.stop().await;
    assert_eq!(
        calls.all().len(),
        2,
        "on create, the field handler only: {:?}",
        calls.all()
    );

    // While the operator is down, one object's field changes, the other's does not.
    patch(&client, "changed", json!({"spec": {"field": 2}})).await;
    let registry = field_handlers(&calls).with(ChangeHandler::on_resume(
        examples(),
        "resume_fn",
        recording(&calls, "resume"),
    ));
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await;
    wait_handled(&client, "changed", json!({"field": 2})).await;
    wait("both objects resumed", || async {
        (named(&calls.all(), "handler", "resume").len() == 2).then_some(())
    })
    .await;
    assert!(
        harness
            .server()
            .wait_quiet(Duration::from_millis(500), DEADLINE)
            .await,
        "the operator keeps sending requests"
    );
    harness.stop().await.expect("a clean stop");

    let calls = calls.all();
    let mut seen: Vec<(String, String, String)> = calls[2..]
        .iter()
        .map(|c| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (text(&c["handler"]), text(&c["name"]), text(&c["reason"]))
        })
        .collect();
    seen.sort();
    let expected = [
        ("field", "changed", "update"),
        ("resume", "changed", "update"),
        ("resume", "untouched", "resume"),
        ("update", "changed", "update"),
    ];
    assert_eq!(
        seen,
        expected.map(|(h, n, r)| (h.to_string(), n.to_string(), r.to_string())),
        "{calls:#?}"
    );
    let field = named(&calls[2..], "handler", "field");
    assert_eq!((&field[0]["old"], &field[0]["new"]), (&json!(1), &json!(2)));
}

/// A crash between the two writes of a handler's outcome (its result in `status`, its record
/// and the diff-base in the annotations) loses nothing: the result is written first, so a
/// crash before the record re-runs the handler rather than leaving it done without a result.
/// (The status write hangs here until the operator is aborted, as if it had died.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_the_result_and_the_record_re_runs_the_handler() {
    let calls = Calls::default();
    let server = server_with(Some(fixtures::kopfexample_schema())).await;
    let client = server.client();
    let registry = |calls: &Calls| {
        let calls = calls.clone();
        Registry::new().with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            move |inv| {
                calls.record(json!({"retry": inv.retry()}));
                async { Ok(Some(json!({"stored": true}))) }
            },
        ))
    };
    server.inject(
        Fault::delay(Duration::from_secs(3600))
            .verb("patch")
            .resource("kopfexamples.kopf.dev/status")
            .times(1),
    );
    let mut settings = test_settings();
    settings.process.grace_period = Duration::from_millis(500);
    let operator = Operator::new(registry(&calls))
        .settings(settings)
        .client(server.client());
    let stop = CancellationToken::new();
    let running = tokio::spawn(operator.run(stop.clone()));
    create(&client, "crashing", json!({})).await;
    wait("the result's write to hang", || async {
        (server
            .stats()
            .count("patch", "kopfexamples.kopf.dev/status")
            > 0)
        .then_some(())
    })
    .await;
    stop.cancel();
    let _aborted = tokio::time::timeout(DEADLINE, running)
        .await
        .expect("the operator stops within its grace period");
    let object = get(&client, "crashing").await.expect("the object");
    assert!(
        last_handled(&object).is_none(),
        "not recorded as handled before its result is stored: {object:#}"
    );

    let harness = OperatorHarness::start_on(
        server,
        Operator::new(registry(&calls)).settings(test_settings()),
    )
    .await;
    wait_for(&client, "crashing", "the result and the record", |o| {
        o["status"]["create_fn"]["stored"] == true && last_handled(o).is_some()
    })
    .await;
    harness.stop().await.expect("a clean stop");
    assert_eq!(
        calls.all().len(),
        2,
        "called again after the crash: {:?}",
        calls.all()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_progress_of_a_half_finished_handler_survives_a_restart() {
    let calls = Calls::default();
    let flaky = |calls: &Calls| {
        let calls = calls.clone();
        ChangeHandler::on_create(examples(), "flaky", move |inv| {
            let calls = calls.clone();
            async move {
                let started = inv.started().unix_timestamp_nanos() / 1000;
                calls.record(json!({
                    "retry": inv.retry(),
                    "reason": inv.reason().map(|r| r.as_str()),
                    "started": started as i64,
                }));
                if inv.retry() < 2 {
                    return Err(TemporaryError::new("not yet")
                        .delay(Duration::from_secs(1))
                        .into());
                }
                Ok(Some(json!({"attempts": inv.retry() + 1})))
            }
        })
    };
    let server = server_with(Some(fixtures::kopfexample_schema())).await;
    let client = server.client();
    let first = Running::start(
        &server,
        Operator::new(Registry::new().with(flaky(&calls))).settings(test_settings()),
    )
    .await;
    create(&client, "slow", json!({})).await;
    let failing = wait_for(&client, "slow", "the first attempt recorded", |o| {
        o["metadata"]["annotations"]["kopf.zalando.org/flaky"].is_string()
    })
    .await;
    first.stop().await;
    let record: Value = serde_json::from_str(
        failing["metadata"]["annotations"]["kopf.zalando.org/flaky"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(record["retries"], 1, "{record}");
    assert_eq!(calls.all().len(), 1);

    let harness = OperatorHarness::start_on(
        server,
        Operator::new(Registry::new().with(flaky(&calls))).settings(test_settings()),
    )
    .await;
    // The result and the diff-base are two writes (the result first): the final state is
    // waited for as a whole.
    wait_for(&client, "slow", "the final success, handled", |o| {
        o["status"]["flaky"]["attempts"] == 3 && last_handled(o).is_some()
    })
    .await;
    settle(harness.server()).await;
    harness.stop().await.expect("a clean stop");

    let calls = calls.all();
    let retries: Vec<&Value> = calls.iter().map(|c| &c["retry"]).collect();
    assert_eq!(retries, vec![&json!(0), &json!(1), &json!(2)], "{calls:#?}");
    assert!(calls.iter().all(|c| c["reason"] == "create"), "{calls:#?}");
    // `started` is the first attempt's, kept on the object across the restart (Kopf stores it
    // with microseconds).
    let started: Vec<i64> = calls
        .iter()
        .map(|c| c["started"].as_i64().unwrap())
        .collect();
    assert!(
        started.iter().all(|s| (s - started[0]).abs() <= 1),
        "{started:?}"
    );
}

// 2. Broken watches.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_watches_and_expired_histories_lose_no_change() {
    let calls = Calls::default();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let entered = Calls::default();
    let (create_calls, gate_in, entered_in) = (calls.clone(), gate.clone(), entered.clone());
    let registry = Registry::new()
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            move |inv| {
                let (calls, gate, entered) =
                    (create_calls.clone(), gate_in.clone(), entered_in.clone());
                async move {
                    if inv.name() == "held" {
                        entered.record(json!(inv.name()));
                        let _permit = gate.acquire().await;
                    }
                    calls.record(
                        json!({"handler": "create", "name": inv.name(), "spec": inv.spec()}),
                    );
                    Ok(None)
                }
            },
        ))
        .with(ChangeHandler::on_update(
            examples(),
            "update_fn",
            recording(&calls, "update"),
        ));
    let server = server_with(Some(fixtures::kopfexample_schema())).await;
    if kopf_testing::fake_only(&server, "compacting the watch history") {
        return;
    }
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await;
    let client = harness.client();
    let server = harness.server();

    create(&client, "a", json!({"v": 1})).await;
    wait_handled(&client, "a", json!({"v": 1})).await;

    // A watch ends (as a server-side timeout would): the changes right after it are not lost.
    server.close_watches();
    create(&client, "b", json!({"v": 1})).await;
    patch(&client, "a", json!({"spec": {"v": 2}})).await;
    wait_handled(&client, "b", json!({"v": 1})).await;
    wait_handled(&client, "a", json!({"v": 2})).await;

    // Watches that break after every event, three times in a row.
    let watches_before = watches(server);
    server.inject(
        Fault::close_watch_after(1)
            .verb("watch")
            .resource("kopfexamples.kopf.dev")
            .times(3),
    );
    server.close_watches();
    for name in ["c", "d", "e"] {
        create(&client, name, json!({"v": 1})).await;
    }
    patch(&client, "b", json!({"spec": {"v": 2}})).await;
    for name in ["c", "d", "e"] {
        wait_handled(&client, name, json!({"v": 1})).await;
    }
    wait_handled(&client, "b", json!({"v": 2})).await;
    assert!(
        watches(server) >= watches_before + 4,
        "the watch was reopened after each break"
    );

    // The history expires while a handler runs: the watcher relists, and the changes made
    // meanwhile are handled once the handler is done.
    // (The watch's reconnection is delayed, so that it asks for a version already compacted.)
    create(&client, "held", json!({"v": 1})).await;
    entered.wait_len(1).await;
    let lists_before = lists(server);
    server.inject(
        Fault::delay(Duration::from_millis(500))
            .verb("watch")
            .resource("kopfexamples.kopf.dev")
            .times(1),
    );
    server.close_watches();
    create(&client, "f", json!({"v": 1})).await;
    patch(&client, "c", json!({"spec": {"v": 2}})).await;
    server.compact();
    wait_handled(&client, "f", json!({"v": 1})).await;
    wait_handled(&client, "c", json!({"v": 2})).await;
    gate.add_permits(1);
    wait_handled(&client, "held", json!({"v": 1})).await;
    assert!(
        lists(server) > lists_before,
        "the watcher listed again after 410"
    );
    settle(harness.server()).await;

    let calls = calls.all();
    for name in ["a", "b", "c", "d", "e", "f", "held"] {
        let creates: Vec<_> = named(&calls, "name", name)
            .into_iter()
            .filter(|c| c["handler"] == "create")
            .collect();
        assert_eq!(creates.len(), 1, "{name}: {calls:#?}");
        assert_eq!(creates[0]["spec"], json!({"v": 1}));
        let updates: Vec<(Value, Value)> = named(&calls, "name", name)
            .into_iter()
            .filter(|c| c["handler"] == "update")
            .map(|c| (c["old"]["spec"]["v"].clone(), c["new"]["spec"]["v"].clone()))
            .collect();
        let expected: Vec<(Value, Value)> = if ["a", "b", "c"].contains(&name) {
            vec![(json!(1), json!(2))]
        } else {
            vec![]
        };
        assert_eq!(updates, expected, "{name}: {calls:#?}");
    }
    harness.stop().await.expect("a clean stop");
}

/// How many times kopfexamples were watched.
fn watches(server: &FakeApiServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.verb == "watch" && r.resource.starts_with("kopfexamples"))
        .count()
}

// 3. Resources that come and go.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_created_later_is_served_and_a_deleted_one_stops_its_watchers() {
    let calls = Calls::default();
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        recording(&calls, "create"),
    ));
    let server = server_with(None).await;
    // Ready at once: nothing to list yet.
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await;
    let client = harness.client();
    // The operator's own watch of CRDs only.
    wait("the watch of CRDs", || async {
        (harness.server().stats().open_watches == 1).then_some(())
    })
    .await;

    harness.apply(fixtures::KOPFEXAMPLE_CRD).await;
    create(&client, "early", json!({})).await;
    wait_handled(&client, "early", json!({})).await;
    assert_eq!(harness.server().stats().open_watches, 2);

    // The CRD goes (and its objects with it): the watcher stops, the operator does not.
    harness
        .delete("customresourcedefinitions", None, "kopfexamples.kopf.dev")
        .await;
    let server = harness.server();
    wait("the watch to close", || async {
        (server.stats().open_watches == 1).then_some(())
    })
    .await;
    // Quiet: the operator has wound down what it did for the resource.
    settle(server).await;
    let watched = |server: &FakeApiServer| {
        server
            .requests()
            .iter()
            .filter(|r| {
                r.resource.starts_with("kopfexamples") && (r.verb == "watch" || r.verb == "list")
            })
            .count()
    };
    let before = watched(server);
    // Quiet again: nothing was asked of the server meanwhile (a retry would show here).
    settle(server).await;
    assert_eq!(
        watched(server),
        before,
        "no watching of a resource that is not served"
    );

    // It comes back: objects are handled again. (A real API server removes a CRD a moment
    // after its deletion, once its objects are gone; the fake one at once.)
    harness
        .wait_for_deletion("customresourcedefinitions", None, "kopfexamples.kopf.dev")
        .await;
    harness.apply(fixtures::KOPFEXAMPLE_CRD).await;
    create(&client, "again", json!({})).await;
    wait_handled(&client, "again", json!({})).await;
    settle(harness.server()).await;
    harness.stop().await.expect("a clean stop");

    let names: Vec<Value> = calls.all().iter().map(|c| c["name"].clone()).collect();
    assert_eq!(names, vec![json!("early"), json!("again")]);
}

// 4. Namespaces.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_namespaces_that_the_patterns_select_are_served() {
    let calls = Calls::default();
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        recording(&calls, "create"),
    ));
    let server = server_with(Some(fixtures::kopfexample_schema())).await;
    create_namespaces(&server.client(), &["ns-skip", "other", "ns1", "ns-a"]).await;
    // Kopf's patterns: any pattern may serve a namespace; within one, `!` excludes from what its
    // first glob matched. (`["ns1", "ns-*", "!ns-skip"]` would serve everything, as in Kopf:
    // `!ns-skip` alone means "all but ns-skip".)
    let operator = Operator::new(registry)
        .settings(test_settings())
        .namespaces(["ns1", "ns-*,!ns-skip"]);
    let harness = OperatorHarness::start_on(server, operator).await;
    let client = harness.client();
    // The ones to skip first: when the served ones are handled, the others had their chance.
    for namespace in ["ns-skip", "other", "ns1", "ns-a"] {
        let body = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "obj"}, "spec": {"ns": namespace}});
        let (status, created) = harness
            .request("POST", &fixtures::kopfexamples_in(namespace), body)
            .await;
        assert_eq!(status, 201, "{created}");
    }
    for namespace in ["ns1", "ns-a"] {
        wait(&format!("obj in {namespace} handled"), || async {
            get_in(&client, namespace, "obj")
                .await
                .filter(|o| last_handled(o).is_some())
        })
        .await;
    }
    settle(harness.server()).await;
    for namespace in ["ns-skip", "other"] {
        let object = get_in(&client, namespace, "obj").await.unwrap();
        assert!(
            object["metadata"]["annotations"].is_null(),
            "{namespace}: {object:#}"
        );
    }
    let mut namespaces: Vec<String> = calls
        .all()
        .iter()
        .map(|c| c["namespace"].as_str().unwrap().to_string())
        .collect();
    namespaces.sort();
    assert_eq!(namespaces, vec!["ns-a", "ns1"]);
    let mut patched: Vec<String> = harness
        .server()
        .requests()
        .iter()
        .filter(|r| r.verb == "patch")
        .filter_map(|r| r.namespace.clone())
        .collect();
    patched.sort();
    patched.dedup();
    assert_eq!(patched, vec!["ns-a", "ns1"]);
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_namespaces_are_watched_each_on_its_own() {
    let calls = Calls::default();
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        recording(&calls, "create"),
    ));
    let server = server_with(Some(fixtures::kopfexample_schema())).await;
    create_namespaces(&server.client(), &["ns1", "ns2", "ns3"]).await;
    let operator = Operator::new(registry)
        .settings(test_settings())
        .namespaces(["ns1", "ns2"]);
    let harness = OperatorHarness::start_on(server, operator).await;
    let client = harness.client();
    for namespace in ["ns3", "ns1", "ns2"] {
        let body = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "obj"}, "spec": {}});
        harness
            .request("POST", &fixtures::kopfexamples_in(namespace), body)
            .await;
    }
    for namespace in ["ns1", "ns2"] {
        wait(&format!("obj in {namespace} handled"), || async {
            get_in(&client, namespace, "obj")
                .await
                .filter(|o| last_handled(o).is_some())
        })
        .await;
    }
    settle(harness.server()).await;
    let mut namespaces: Vec<String> = calls
        .all()
        .iter()
        .map(|c| c["namespace"].as_str().unwrap().to_string())
        .collect();
    namespaces.sort();
    assert_eq!(namespaces, vec!["ns1", "ns2"]);
    let watched: Vec<Option<String>> = harness
        .server()
        .requests()
        .iter()
        .filter(|r| r.resource.starts_with("kopfexamples") && r.verb == "watch")
        .map(|r| r.namespace.clone())
        .collect();
    assert!(
        watched.contains(&Some("ns1".into())) && watched.contains(&Some("ns2".into())),
        "{watched:?}"
    );
    assert!(
        watched
            .iter()
            .all(|ns| matches!(ns.as_deref(), Some("ns1" | "ns2"))),
        "no cluster-wide or other watches: {watched:?}"
    );
    harness.stop().await.expect("a clean stop");
}

// 5. Filters, error modes, limits.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_annotation_and_when_filters_choose_the_handlers() {
    let calls = Calls::default();
    let handler =
        |id: &'static str| ChangeHandler::on_create(examples(), id, recording(&calls, id));
    let registry = Registry::new()
        .with(handler("by_value").label("app", "web".into()))
        .with(handler("by_presence").label("tier", MetaFilter::Present))
        .with(handler("by_absence").label("legacy", MetaFilter::Absent))
        .with(handler("by_callable").label(
            "size",
            MetaFilter::callable(|v| {
                v.and_then(|v| v.parse::<u32>().ok())
                    .is_some_and(|n| n > 10)
            }),
        ))
        .with(handler("by_annotation").annotation("example.com/mode", "on".into()))
        .with(handler("by_absent_annotation").annotation("example.com/mode", MetaFilter::Absent))
        .with(handler("by_when").when(|inv| inv.spec()["enabled"] == true))
        .with(
            handler("by_all")
                .label("app", "web".into())
                .when(|inv| inv.spec()["enabled"] == false),
        );
    let server = server_with(Some(fixtures::kopfexample_schema())).await;
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await;
    let client = harness.client();
    create_body(
        &client,
        json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "o1", "labels": {"app": "web", "tier": "back"},
               "annotations": {"example.com/mode": "on"}}, "spec": {"enabled": true}}),
    )
    .await;
    create_body(
        &client,
        json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "o2", "labels": {"legacy": "yes", "size": "20"}},
               "spec": {"enabled": false}}),
    )
    .await;
    create_body(
        &client,
        json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "o3", "labels": {"size": "5"}}, "spec": {}}),
    )
    .await;
    wait_handled(&client, "o1", json!({"enabled": true})).await;
    wait_handled(&client, "o2", json!({"enabled": false})).await;
    wait_handled(&client, "o3", json!({})).await;
    settle(harness.server()).await;
    harness.stop().await.expect("a clean stop");

    let calls = calls.all();
    let mut ran: Vec<(String, String)> = calls
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["handler"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    ran.sort();
    let expected: Vec<(String, String)> = [
        ("o1", "by_absence"),
        ("o1", "by_annotation"),
        ("o1", "by_presence"),
        ("o1", "by_value"),
        ("o1", "by_when"),
        ("o2", "by_absent_annotation"),
        ("o2", "by_callable"),
        ("o3", "by_absence"),
        ("o3", "by_absent_annotation"),
    ]
    .iter()
    .map(|(n, h)| (n.to_string(), h.to_string()))
    .collect();
    assert_eq!(ran, expected, "{calls:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn field_filters_on_values_old_and_new() {
    let calls = Calls::default();
    let big = |v: Option<&Value>| v.and_then(Value::as_i64).is_some_and(|n| n >= 10);
    let registry = Registry::new()
        .with(
            ChangeHandler::on_field(
                examples(),
                "size_is_3",
                "spec.size",
                recording(&calls, "size_is_3"),
            )
            .value(ValueFilter::Value(json!(3))),
        )
        .with(
            ChangeHandler::on_update(examples(), "one_to_two", recording(&calls, "one_to_two"))
                .field("spec.size")
                .old(ValueFilter::Value(json!(1)))
                .new_value(ValueFilter::Value(json!(2))),
        )
        .with(
            ChangeHandler::on_update(examples(), "grown_big", recording(&calls, "grown_big"))
                .field("spec.size")
                .new_value(ValueFilter::callable(big)),
        )
        .with(
            ChangeHandler::on_field(
                examples(),
                "extra_added",
                "spec.extra",
                recording(&calls, "extra_added"),
            )
            .old(ValueFilter::Absent)
            .new_value(ValueFilter::Present),
        );
    let server = server_with(Some(fixtures::kopfexample_schema())).await;
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await;
    let client = harness.client();

    create(&client, "x", json!({"size": 1})).await;
    create(&client, "y", json!({"size": 3})).await;
    wait_handled(&client, "x", json!({"size": 1})).await;
    wait_handled(&client, "y", json!({"size": 3})).await;
    patch(&client, "x", json!({"spec": {"size": 2}})).await;
    wait_handled(&client, "x", json!({"size": 2})).await;
    patch(&client, "y", json!({"spec": {"size": 10}})).await;
    wait_handled(&client, "y", json!({"size": 10})).await;
    patch(&client, "x", json!({"spec": {"extra": "e"}})).await;
    wait_handled(&client, "x", json!({"size": 2, "extra": "e"})).await;
    patch(&client, "x", json!({"spec": {"extra": "f"}})).await;
    wait_handled(&client, "x", json!({"size": 2, "extra": "f"})).await;
    settle(harness.server()).await;
    harness.stop().await.expect("a clean stop");

    let calls = calls.all();
    let seen = |name: &str| -> Vec<(Value, Value, Value, Value)> {
        named(&calls, "name", name)
            .into_iter()
            .map(|c| {
                (
                    c["handler"].clone(),
                    c["reason"].clone(),
                    c["old"].clone(),
                    c["new"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(
        seen("x"),
        vec![
            (json!("one_to_two"), json!("update"), json!(1), json!(2)),
            (
                json!("extra_added"),
                json!("update"),
                Value::Null,
                json!("e")
            ),
        ],
        "{calls:#?}"
    );
    // `value` passes if the old or the new value matches.
    assert_eq!(
        seen("y"),
        vec![
            (json!("size_is_3"), json!("create"), Value::Null, json!(3)),
            (json!("size_is_3"), json!("update"), json!(3), json!(10)),
            (json!("grown_big"), json!("update"), json!(3), json!(10)),
        ],
        "{calls:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optional_delete_handlers_do_not_block_deletion() {
    let calls = Calls::default();
    let registry = Registry::new()
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            recording(&calls, "create"),
        ))
        .with(
            ChangeHandler::on_delete(examples(), "optional_fn", recording(&calls, "optional"))
                .optional(),
        )
        .with(
            ChangeHandler::on_delete(examples(), "guard_fn", recording(&calls, "guard"))
                .label("guarded", MetaFilter::Present),
        );
    let server = server_with(Some(fixtures::kopfexample_schema())).await;
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await;
    let client = harness.client();

    // Only an optional delete handler: no finalizer, no JSON patch, deleted at once.
    create(&client, "free", json!({})).await;
    let free = wait_handled(&client, "free", json!({})).await;
    assert!(free["metadata"]["finalizers"].is_null(), "{free:#}");
    let json_patches = |name: &str| {
        harness
            .server()
            .requests()
            .iter()
            .filter(|r| r.name.as_deref() == Some(name))
            .filter(|r| r.content_type.as_deref() == Some("application/json-patch+json"))
            .count()
    };
    assert_eq!(
        json_patches("free"),
        0,
        "{:#?}",
        harness.server().requests()
    );
    delete(&client, "free").await;
    assert!(get(&client, "free").await.is_none(), "deleted at once");

    // With a mandatory one too: the finalizer holds the object, and both run.
    create_body(
        &client,
        json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "guarded", "labels": {"guarded": "yes"}}, "spec": {}}),
    )
    .await;
    let guarded = wait_handled(&client, "guarded", json!({})).await;
    assert_eq!(
        guarded["metadata"]["finalizers"],
        json!(["kopf.zalando.org/KopfFinalizerMarker"])
    );
    delete(&client, "guarded").await;
    wait("guarded to be gone", || async {
        get(&client, "guarded").await.is_none().then_some(())
    })
    .await;
    settle(harness.server()).await;
    harness.stop().await.expect("a clean stop");

    let calls = calls.all();
    let summary: Vec<(&Value, &Value)> =
        calls.iter().map(|c| (&c["handler"], &c["name"])).collect();
    assert_eq!(
        summary,
        vec![
            (&json!("create"), &json!("free")),
            (&json!("create"), &json!("guarded")),
            (&json!("optional"), &json!("guarded")),
            (&json!("guard"), &json!("guarded")),
        ],
        "{calls:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_modes_retries_and_timeouts_limit_the_attempts() {
    let calls = Calls::default();
    let failing = |id: &'static str, outcome: fn(u32) -> kopf::registry::HandlerResult| {
        let calls = calls.clone();
        ChangeHandler::on_create(examples(), id, move |inv| {
            let calls = calls.clone();
            async move {
                calls.record(json!({
                    "handler": id,
                    "retry": inv.retry(),
                    "runtime": inv.runtime().as_millis() as u64,
                    "started": (inv.started().unix_timestamp_nanos() / 1000) as i64,
                }));
                outcome(inv.retry())
            }
        })
        .label("case", id.into())
    };
    let registry = Registry::new()
        .with(
            failing("ignored", |_| Err(kopf::Error::msg("oops")))
                .errors(ErrorsMode::Ignored)
                .backoff(Duration::from_millis(50)),
        )
        .with(
            failing("permanent", |_| Err(kopf::Error::msg("oops")))
                .errors(ErrorsMode::Permanent)
                .backoff(Duration::from_millis(50)),
        )
        .with(
            failing("temporary", |retry| match retry {
                0 => Err(kopf::Error::msg("oops")),
                _ => Ok(None),
            })
            .backoff(Duration::from_millis(50)),
        )
        .with(
            failing("explicitly_permanent", |_| {
                Err(PermanentError::new("never").into())
            })
            .errors(ErrorsMode::Ignored),
        )
        .with(
            failing("limited", |_| Err(kopf::Error::msg("oops")))
                .retries(3)
                .backoff(Duration::from_millis(50)),
        )
        .with(
            failing("timed", |_| {
                Err(TemporaryError::new("later")
                    .delay(Duration::from_millis(200))
                    .into())
            })
            .timeout(Duration::from_millis(1000)),
        );
    let server = server_with(Some(fixtures::kopfexample_schema())).await;
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await;
    let client = harness.client();
    let cases = [
        "ignored",
        "permanent",
        "temporary",
        "explicitly_permanent",
        "limited",
        "timed",
    ];
    for case in cases {
        let name = case.replace('_', "-");
        create_body(
            &client,
            json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": name, "labels": {"case": case}}, "spec": {}}),
        )
        .await;
    }
    for case in cases {
        wait_handled(&client, &case.replace('_', "-"), json!({})).await;
    }
    settle(harness.server()).await;
    harness.stop().await.expect("a clean stop");

    let calls = calls.all();
    let retries = |id: &str| -> Vec<u64> {
        named(&calls, "handler", id)
            .iter()
            .map(|c| c["retry"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(retries("ignored"), vec![0], "{calls:#?}");
    assert_eq!(retries("permanent"), vec![0], "{calls:#?}");
    assert_eq!(retries("temporary"), vec![0, 1], "{calls:#?}");
    assert_eq!(retries("explicitly_permanent"), vec![0], "{calls:#?}");
    assert_eq!(retries("limited"), vec![0, 1, 2], "{calls:#?}");
    let timed = named(&calls, "handler", "timed");
    assert!(
        (2..=6).contains(&timed.len()),
        "retried until the timeout: {timed:#?}"
    );
    // The timeout is checked right before each attempt (the runtime is read a moment later).
    assert!(
        timed.iter().all(|c| c["runtime"].as_u64().unwrap() < 1050),
        "no attempt after the timeout: {timed:#?}"
    );
    assert!(
        timed.iter().all(|c| c["started"] == timed[0]["started"]),
        "{timed:#?}"
    );
}

// 6. Event handlers.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_handlers_see_every_raw_event_in_order_and_their_errors_are_ignored() {
    let calls = Calls::default();
    let labelled = Calls::default();
    let (recorder, labelled_recorder) = (calls.clone(), labelled.clone());
    let registry = Registry::new()
        .with(EventHandler::on_event(examples(), "event_fn", move |inv| {
            let calls = recorder.clone();
            async move {
                let event_type = inv.event_type().map(String::from);
                calls.record(json!({
                    "type": event_type,
                    "name": inv.name(),
                    "v": inv.spec()["v"],
                    "reason": inv.reason().map(|r| r.as_str()),
                }));
                match event_type.as_deref() {
                    Some("ADDED") => Err(kopf::Error::msg("failing on purpose")),
                    Some("MODIFIED") if inv.spec()["v"] == 2 => panic!("panicking on purpose"),
                    Some("MODIFIED") => Err(TemporaryError::new("a retry is not a thing here")
                        .delay(Duration::from_millis(10))
                        .into()),
                    _ => Ok(None),
                }
            }
        }))
        .with(
            EventHandler::on_event(examples(), "labelled_fn", move |inv| {
                let calls = labelled_recorder.clone();
                async move {
                    calls.record(json!([inv.event_type(), inv.name()]));
                    Ok(None)
                }
            })
            .label("watched", MetaFilter::Present),
        );
    let server = server_with(Some(fixtures::kopfexample_schema())).await;
    let client = server.client();
    create(&client, "listed", json!({"v": 0})).await;
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await;

    create(&client, "live", json!({"v": 1})).await;
    patch(&client, "live", json!({"spec": {"v": 2}})).await;
    patch(&client, "live", json!({"spec": {"v": 3}})).await;
    delete(&client, "live").await;
    create_body(
        &client,
        json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "after", "labels": {"watched": "yes"}}, "spec": {"v": 9}}),
    )
    .await;
    wait("the events of `after`", || async {
        let calls = calls.all();
        let live_deleted = calls
            .iter()
            .any(|c| c["name"] == "live" && c["type"] == "DELETED");
        let after = calls.iter().any(|c| c["name"] == "after");
        (live_deleted && after && !labelled.all().is_empty()).then_some(())
    })
    .await;
    settle(harness.server()).await;
    // Failed event handlers write nothing.
    let after = get(&client, "after").await.unwrap();
    assert!(after["status"].is_null(), "{after:#}");
    assert!(after["metadata"]["annotations"].is_null(), "{after:#}");
    let patches: Vec<_> = harness
        .server()
        .requests()
        .into_iter()
        .filter(|r| r.verb == "patch")
        .map(|r| r.name)
        .collect();
    assert_eq!(
        patches,
        vec![Some("live".to_string()); 2],
        "only the test's own"
    );
    harness.stop().await.expect("a clean stop");

    let calls = calls.all();
    let events = |name: &str| -> Vec<(Value, Value)> {
        named(&calls, "name", name)
            .into_iter()
            .map(|c| (c["type"].clone(), c["v"].clone()))
            .collect()
    };
    assert_eq!(events("listed"), vec![(Value::Null, json!(0))]);
    assert_eq!(
        events("live"),
        vec![
            (json!("ADDED"), json!(1)),
            (json!("MODIFIED"), json!(2)),
            (json!("MODIFIED"), json!(3)),
            (json!("DELETED"), json!(3)),
        ],
        "{calls:#?}"
    );
    assert_eq!(events("after"), vec![(json!("ADDED"), json!(9))]);
    assert!(calls.iter().all(|c| c["reason"].is_null()));
    assert_eq!(labelled.all(), vec![json!(["ADDED", "after"])]);
}

// 7. Retries without events.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_a_retry_pending_outlives_its_idle_timeout_and_retries_on_time() {
    let attempts = Arc::new(std::sync::Mutex::new(Vec::<Instant>::new()));
    let recorder = attempts.clone();
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "patient",
        move |inv| {
            let attempts = recorder.clone();
            async move {
                attempts.lock().unwrap().push(Instant::now());
                if inv.retry() == 0 {
                    return Err(TemporaryError::new("later")
                        .delay(Duration::from_millis(1500))
                        .into());
                }
                Ok(Some(json!({"retry": inv.retry()})))
            }
        },
    ));
    let mut settings = test_settings();
    settings.queueing.idle_timeout = Duration::from_millis(100);
    let server = server_with(Some(fixtures::kopfexample_schema())).await;
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(settings)).await;
    let client = harness.client();
    create(&client, "patient", json!({})).await;
    wait_for(&client, "patient", "the retry's result", |o| {
        o["status"]["patient"]["retry"] == 1
    })
    .await;
    settle(harness.server()).await;
    harness.stop().await.expect("a clean stop");

    let attempts = attempts.lock().unwrap().clone();
    assert_eq!(attempts.len(), 2);
    let gap = attempts[1] - attempts[0];
    assert!(
        gap >= Duration::from_millis(1400) && gap < Duration::from_secs(4),
        "retried after {gap:?}"
    );
}

// 8. Odd objects.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_objects_do_not_stop_the_operator() {
    let calls = Calls::default();
    let registry = Registry::new()
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            recording(&calls, "create"),
        ))
        .with(ChangeHandler::on_field(
            examples(),
            "field_fn",
            "spec.deep.field",
            recording(&calls, "field"),
        ));
    // A schema that lets anything in, so that `spec` may be a string or a list.
    let server = server_with(Some(
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    ))
    .await;
    let client = server.client();
    let odd = |name: &str, spec: Value, annotations: Value| {
        json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
               "metadata": {"name": name, "annotations": annotations}, "spec": spec})
    };
    let objects = [
        ("spec-string", json!("not an object"), json!({})),
        ("spec-list", json!([1, 2]), json!({})),
        (
            "progress-not-json",
            json!({}),
            json!({"kopf.zalando.org/create_fn": "not json"}),
        ),
        (
            "progress-not-a-record",
            json!({}),
            json!({"kopf.zalando.org/create_fn": "[\"retries\", 5]",
                   "kopf.zalando.org/field_fn.spec.deep.field": "{\"retries\": \"many\", \"started\": 5}"}),
        ),
        (
            "diffbase-not-json",
            json!({}),
            json!({LAST_HANDLED: "{{not json"}),
        ),
        (
            "diffbase-not-an-object",
            json!({}),
            json!({LAST_HANDLED: "[1, 2]"}),
        ),
    ];
    // Half of them exist before the operator starts (its first listing), half come later.
    let (before, after) = objects.split_at(3);
    for (name, spec, annotations) in before {
        create_body(&client, odd(name, spec.clone(), annotations.clone())).await;
    }
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await;
    for (name, spec, annotations) in after {
        create_body(&client, odd(name, spec.clone(), annotations.clone())).await;
    }
    create(&client, "good", json!({"deep": {"field": 1}})).await;
    wait_handled(&client, "good", json!({"deep": {"field": 1}})).await;
    for (name, spec, _) in &objects {
        wait_handled(&client, name, spec.clone()).await;
    }
    settle(harness.server()).await;
    harness.stop().await.expect("a clean stop");

    let calls = calls.all();
    for (name, spec, _) in &objects {
        let creates = named(&calls, "name", name)
            .into_iter()
            .filter(|c| c["handler"] == "create")
            .collect::<Vec<_>>();
        // A diff-base that is JSON but not an object is still an old state, as in Kopf: the
        // object is updated, not created (and this operator has no update handlers).
        let expected = if *name == "diffbase-not-an-object" {
            0
        } else {
            1
        };
        assert_eq!(creates.len(), expected, "{name}: {calls:#?}");
        assert!(creates.iter().all(|c| &c["spec"] == spec), "{calls:#?}");
    }
    let good: Vec<&Value> = named(&calls, "name", "good");
    assert_eq!(good.len(), 2, "{calls:#?}");
}

/// A result that the CRD's schema prunes from `status` (a typed CRD that does not declare the
/// handler's field) is not lost silently: a warning names the field and the fix, once per
/// field, however many objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_pruned_by_the_schema_is_warned_about_once() {
    let name = "pruned-result";
    crate::logs::lines_of(name);
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "status": {"type": "object", "properties": {"known": {"type": "string"}}},
    }});
    let server = server_with(Some(schema)).await;
    let client = server.client();
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        |_| async { Ok(Some(json!({"message": "done"}))) },
    ));
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await;
    for object in [name, "pruned-again"] {
        create(&client, object, json!({})).await;
        let handled = wait_handled(&client, object, json!({})).await;
        assert!(handled["status"].get("create_fn").is_none(), "{handled}");
    }
    let warning =
        "status.create_fn was not stored: the schema of kopfexamples.v1.kopf.dev prunes it";
    let lines: Vec<String> = [name, "pruned-again"]
        .into_iter()
        .flat_map(crate::logs::lines_of)
        .collect();
    let warnings = lines.iter().filter(|line| line.contains(warning)).count();
    assert_eq!(warnings, 1, "{lines:#?}");
    harness.stop().await.expect("a clean stop");
    drop(client);
}
