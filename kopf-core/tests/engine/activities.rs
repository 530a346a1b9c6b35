//! Activities: startup handlers run before anything is watched (and may change the settings
//! and the memo), a failing one stops the operator cleanly; cleanup handlers run once at the
//! stop, after the handlers in flight stopped, within their timeout; probe handlers answer
//! the liveness endpoint, next to a readiness check.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use kopf::activities::Activity;
use kopf::operator::{Operator, OperatorError};
use kopf::registry::{ActivityHandler, ChangeHandler, Registry};
use kopf::storage::AnnotationsDiffBaseStorage;
use kopf::{PermanentError, TemporaryError};
use kopf_testing::{DEADLINE, Fault, wait};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::stopping::{DropFlag, HOUR, Running, alive_tasks, assert_nothing_left, settings};
use crate::support::{Calls, create, examples, get, server_with_crd};

/// An on-create handler that records the object's name and the memo's `region`.
fn recording(calls: &Calls) -> ChangeHandler {
    let calls = calls.clone();
    ChangeHandler::on_create(examples(), "create_fn", move |inv| {
        let calls = calls.clone();
        async move {
            let region = inv.memo().value_as::<String>("region");
            calls.record(json!({"name": inv.name(), "region": region}));
            Ok(None)
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_startup_handler_changes_the_settings_and_the_memo_that_handlers_then_see() {
    let server = server_with_crd().await;
    let calls = Calls::default();
    let startup = ActivityHandler::on_startup("configure", |inv| async move {
        assert_eq!(inv.activity(), Activity::Startup);
        inv.settings().persistence.diffbase_storage =
            Arc::new(AnnotationsDiffBaseStorage::new("my-operator.example.com"));
        inv.memo().set("region", "eu-1");
        Ok(None)
    });
    let operator = Operator::new(Registry::new().with(startup).with(recording(&calls)))
        .settings(kopf_testing::test_settings())
        .client(server.client());
    let running = Running::ready(operator).await;
    let client = server.client();
    create(&client, "first", json!({})).await;

    assert_eq!(
        calls.wait_len(1).await,
        vec![json!({"name": "first", "region": "eu-1"})]
    );
    let object = wait("the diff-base under the startup's prefix", || async {
        get(&client, "first").await.filter(|o| {
            !o["metadata"]["annotations"]["my-operator.example.com/last-handled-configuration"]
                .is_null()
        })
    })
    .await;
    assert!(
        object["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"].is_null(),
        "the default settings were replaced: {object}"
    );
    running.stop().await.expect("a clean stop");
    server.stop().await;
}

/// A sync startup handler through the attribute: it changes the settings through
/// `&mut kopf::Settings`, which are put back after the call.
#[kopf::on_startup(param = "eu-2")]
fn sync_configure(settings: &mut kopf::Settings, memo: &kopf::Memo, param: String) {
    settings.persistence.diffbase_storage =
        Arc::new(AnnotationsDiffBaseStorage::new("sync.example.com"));
    memo.set("region", param);
}

/// A cleanup handler through the attribute, recording into the operator memo's `Calls`.
#[kopf::on_cleanup]
async fn recorded_cleanup(memo: &kopf::Memo, activity: Activity, retry: u32) {
    let calls = memo
        .get::<Calls>()
        .expect("the operator memo has the calls");
    calls.record(json!({"activity": activity.to_string(), "retry": retry}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attribute_handlers_change_the_settings_at_startup_and_clean_up_at_the_stop() {
    let server = server_with_crd().await;
    let calls = Calls::default();
    let cleanups = Calls::default();
    let registry = kopf::handlers![sync_configure, recorded_cleanup].with(recording(&calls));
    let operator = Operator::new(registry)
        .settings(kopf_testing::test_settings())
        .memo(kopf::Memo::new().with(cleanups.clone()))
        .client(server.client());
    let running = Running::ready(operator).await;
    let client = server.client();
    create(&client, "first", json!({})).await;

    assert_eq!(
        calls.wait_len(1).await,
        vec![json!({"name": "first", "region": "eu-2"})]
    );
    wait("the diff-base under the startup's prefix", || async {
        get(&client, "first").await.filter(|o| {
            !o["metadata"]["annotations"]["sync.example.com/last-handled-configuration"].is_null()
        })
    })
    .await;
    assert!(cleanups.all().is_empty());
    running.stop().await.expect("a clean stop");
    assert_eq!(
        cleanups.all(),
        vec![json!({"activity": "cleanup", "retry": 0})]
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_handlers_run_in_order_and_temporary_errors_are_retried() {
    let server = server_with_crd().await;
    let steps = Calls::default();
    let (first, second) = (steps.clone(), steps.clone());
    let flaky = ActivityHandler::on_startup("flaky", move |inv| {
        let steps = first.clone();
        async move {
            steps.record(json!({"flaky": inv.retry()}));
            if inv.retry() < 2 {
                return Err(TemporaryError::new("not yet")
                    .delay(Duration::from_millis(10))
                    .into());
            }
            Ok(None)
        }
    });
    let then = ActivityHandler::on_startup("then", move |_inv| {
        let steps = second.clone();
        async move {
            steps.record(json!("then"));
            Ok(None)
        }
    });
    let operator = Operator::new(Registry::new().with(flaky).with(then))
        .settings(kopf_testing::test_settings())
        .client(server.client());
    let running = Running::ready(operator).await;

    assert_eq!(
        steps.all(),
        vec![
            json!({"flaky": 0}),
            json!({"flaky": 1}),
            json!({"flaky": 2}),
            json!("then")
        ]
    );
    running.stop().await.expect("a clean stop");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_startup_stops_the_operator_before_anything_is_watched() {
    let tasks_before = alive_tasks();
    let server = server_with_crd().await;
    server.reset_requests();
    let calls = Calls::default();
    let cleanups = Calls::default();
    let recorder = cleanups.clone();
    let failing = ActivityHandler::on_startup("configure", |_inv| async move {
        Err(PermanentError::new("the configuration is missing").into())
    });
    let cleanup = ActivityHandler::on_cleanup("farewell", move |_inv| {
        let cleanups = recorder.clone();
        async move {
            cleanups.record(json!("cleanup"));
            Ok(None)
        }
    });
    let operator = Operator::new(
        Registry::new()
            .with(failing)
            .with(cleanup)
            .with(recording(&calls)),
    )
    .settings(settings(Duration::from_secs(60)))
    .client(server.client());

    let result = tokio::time::timeout(DEADLINE, operator.run(Default::default()))
        .await
        .expect("run() returns by itself");

    match result {
        Err(OperatorError::Activity {
            activity: Activity::Startup,
            handler,
            message,
        }) => {
            assert_eq!(handler, "configure");
            assert_eq!(message, "the configuration is missing");
        }
        other => panic!("expected the startup's failure, got {other:?}"),
    }
    let error = OperatorError::Activity {
        activity: Activity::Startup,
        handler: "configure".into(),
        message: "the configuration is missing".into(),
    };
    assert_eq!(
        error.to_string(),
        "the startup handler configure failed: the configuration is missing"
    );
    let verbs: Vec<String> = server.requests().into_iter().map(|r| r.verb).collect();
    assert!(
        !verbs.iter().any(|v| v == "list" || v == "watch"),
        "nothing was listed or watched: {verbs:?}"
    );
    assert!(calls.all().is_empty());
    assert!(
        cleanups.all().is_empty(),
        "no cleanup after a failed startup"
    );
    assert_nothing_left(&server, tasks_before).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_startup_that_runs_out_of_retries_stops_the_operator() {
    let server = server_with_crd().await;
    let attempts = Arc::new(AtomicU32::new(0));
    let counter = attempts.clone();
    let failing = ActivityHandler::on_startup("connect", move |_inv| {
        let attempts = counter.clone();
        async move {
            attempts.fetch_add(1, Ordering::SeqCst);
            Err(kopf::Error::msg("connection refused"))
        }
    })
    .retries(3)
    .backoff(Duration::from_millis(10));
    let operator = Operator::new(Registry::new().with(failing))
        .settings(kopf_testing::test_settings())
        .client(server.client());

    let result = tokio::time::timeout(DEADLINE, operator.run(Default::default()))
        .await
        .expect("run() returns by itself");

    let Err(OperatorError::Activity {
        handler, message, ..
    }) = result
    else {
        panic!("expected the startup's failure, got {result:?}");
    };
    assert_eq!(handler, "connect");
    // Logged as "Activity 'connect' failed with an exception and will stop now (it would
    // exceed 3 retries on the next attempt): connection refused"; the error keeps the cause.
    assert_eq!(message, "connection refused");
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_during_the_startup_interrupts_it_at_once() {
    let tasks_before = alive_tasks();
    let server = server_with_crd().await;
    let steps = Calls::default();
    let (recorder, cleanups) = (steps.clone(), steps.clone());
    let waiting = ActivityHandler::on_startup("wait_for_database", move |inv| {
        let steps = recorder.clone();
        async move {
            steps.record(json!("started"));
            inv.stopped().cancelled().await;
            steps.record(json!(format!("stopped: {}", inv.stop_reason().unwrap())));
            Err(TemporaryError::new("interrupted").into())
        }
    });
    let cleanup = ActivityHandler::on_cleanup("farewell", move |_inv| {
        let steps = cleanups.clone();
        async move {
            steps.record(json!("cleanup"));
            Ok(None)
        }
    });
    let operator = Operator::new(Registry::new().with(waiting).with(cleanup))
        .settings(settings(Duration::from_secs(60)))
        .client(server.client());
    let (running, ready) = Running::start(operator);
    steps.wait_len(1).await;

    let result = running.stop().await;

    assert!(result.is_ok(), "no grace period was needed: {result:?}");
    assert!(!ready.is_ready());
    assert_eq!(
        steps.all(),
        vec![json!("started"), json!("stopped: the operator is exiting")]
    );
    assert_eq!(server.stats().count_verb("watch"), 0);
    assert_nothing_left(&server, tasks_before).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_runs_once_at_the_stop_after_the_handlers_in_flight_stopped() {
    let tasks_before = alive_tasks();
    let server = server_with_crd().await;
    let steps = Calls::default();
    let (recorder, cleanups) = (steps.clone(), steps.clone());
    let slow = ChangeHandler::on_create(examples(), "slow_fn", move |inv| {
        let steps = recorder.clone();
        async move {
            steps.record(json!("handler started"));
            inv.stopped().cancelled().await;
            // Still busy for a moment after being asked to stop: cleanup must wait for it.
            tokio::time::sleep(Duration::from_millis(200)).await;
            steps.record(json!("handler stopped"));
            Err(TemporaryError::new("interrupted").into())
        }
    });
    let cleanup = ActivityHandler::on_cleanup("farewell", move |inv| {
        let steps = cleanups.clone();
        async move {
            assert_eq!(inv.activity(), Activity::Cleanup);
            assert!(
                !inv.stopped().is_cancelled(),
                "cleanup is not asked to stop"
            );
            steps.record(json!("cleanup"));
            Ok(None)
        }
    });
    let operator = Operator::new(Registry::new().with(slow).with(cleanup))
        .settings(settings(Duration::from_secs(60)))
        .client(server.client());
    let running = Running::ready(operator).await;
    create(&server.client(), "busy", json!({})).await;
    steps.wait_len(1).await;

    let result = running.stop().await;

    assert!(result.is_ok(), "a clean stop: {result:?}");
    assert_eq!(
        steps.all(),
        vec![
            json!("handler started"),
            json!("handler stopped"),
            json!("cleanup")
        ]
    );
    assert_nothing_left(&server, tasks_before).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_is_aborted_after_its_timeout() {
    let tasks_before = alive_tasks();
    let server = server_with_crd().await;
    let started = Calls::default();
    let dropped = Arc::new(AtomicBool::new(false));
    let (recorder, flag) = (started.clone(), dropped.clone());
    let stubborn = ActivityHandler::on_cleanup("stubborn", move |_inv| {
        let started = recorder.clone();
        let flag = DropFlag(flag.clone());
        async move {
            let _flag = flag;
            started.record(json!("cleanup"));
            tokio::time::sleep(HOUR).await;
            Ok(None)
        }
    });
    let mut settings = settings(Duration::from_secs(60));
    settings.process.cleanup_timeout = Duration::from_millis(300);
    let operator = Operator::new(Registry::new().with(stubborn))
        .settings(settings)
        .client(server.client());
    let running = Running::ready(operator).await;

    let result = running.stop().await;

    match result {
        Err(OperatorError::Activity {
            activity: Activity::Cleanup,
            handler,
            message,
        }) => {
            assert_eq!(handler, "stubborn");
            assert!(message.contains("cleanup timeout of 300ms"), "{message}");
        }
        other => panic!("expected the cleanup's timeout, got {other:?}"),
    }
    assert_eq!(started.all(), vec![json!("cleanup")], "run once");
    assert!(dropped.load(Ordering::SeqCst), "the cleanup was dropped");
    assert_nothing_left(&server, tasks_before).await;
    server.stop().await;
}

/// A port on 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// `GET path` on 127.0.0.1:port; the status code and the JSON body.
pub(crate) async fn http_get(port: u16, path: &str) -> std::io::Result<(u16, Value)> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    Ok((code, serde_json::from_str(body).unwrap_or(Value::Null)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_liveness_endpoint_answers_with_the_probes_and_readiness_follows_the_listing() {
    let tasks_before = alive_tasks();
    let server = server_with_crd().await;
    // The initial listing fails until the faults are cleared: the operator is not ready.
    server.inject(Fault::respond(500).verb("list"));
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let probe = ActivityHandler::on_probe("connections", move |inv| {
        let calls = counter.clone();
        async move {
            assert_eq!(inv.activity(), Activity::Probe);
            Ok(Some(json!(calls.fetch_add(1, Ordering::SeqCst) + 1)))
        }
    });
    let nothing = ActivityHandler::on_probe("nothing", |_inv| async move { Ok(None) });
    let port = free_port();
    let operator = Operator::new(
        Registry::new()
            .with(probe)
            .with(nothing)
            .with(recording(&Calls::default())),
    )
    .settings(settings(Duration::from_secs(60)))
    .client(server.client())
    .liveness(format!("http://127.0.0.1:{port}/healthz"));
    let (running, ready) = Running::start(operator);

    let (code, body) = wait("the liveness endpoint", || async {
        http_get(port, "/healthz").await.ok()
    })
    .await;
    assert_eq!(
        (code, body),
        (200, json!({"connections": 1, "nothing": null}))
    );
    let again = http_get(port, "/healthz").await.unwrap();
    assert_eq!(
        again,
        (200, json!({"connections": 1, "nothing": null})),
        "cached"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    wait("a failed listing", || async {
        (server.stats().count_verb("list") > 0).then_some(())
    })
    .await;
    assert!(!ready.is_ready());
    assert_eq!(
        http_get(port, "/readyz").await.unwrap(),
        (503, json!({"ready": false}))
    );
    server.clear_faults();
    tokio::time::timeout(DEADLINE, ready.wait())
        .await
        .expect("ready once the listing works");
    assert_eq!(
        http_get(port, "/readyz").await.unwrap(),
        (200, json!({"ready": true}))
    );
    assert_eq!(http_get(port, "/other").await.unwrap().0, 404);

    running.stop().await.expect("a clean stop");
    assert!(
        http_get(port, "/healthz").await.is_err(),
        "the endpoint is closed with the operator"
    );
    assert_nothing_left(&server, tasks_before).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_probe_answers_500_and_a_taken_port_stops_the_operator() {
    let server = server_with_crd().await;
    let failing = ActivityHandler::on_probe("database", |_inv| async move {
        Err(PermanentError::new("the database is unreachable").into())
    });
    let port = free_port();
    let operator = Operator::new(Registry::new().with(failing))
        .settings(kopf_testing::test_settings())
        .client(server.client())
        .liveness(format!("http://127.0.0.1:{port}/healthz"));
    let running = Running::ready(operator).await;
    let (code, body) = http_get(port, "/healthz").await.unwrap();
    assert_eq!(code, 500);
    assert_eq!(
        body["error"],
        "the probe handler database failed: the database is unreachable"
    );

    // A second operator cannot take the same port: it says so and does not start.
    let second = Operator::new(Registry::new())
        .settings(kopf_testing::test_settings())
        .client(server.client())
        .liveness(format!("http://127.0.0.1:{port}/healthz"));
    let result = tokio::time::timeout(DEADLINE, second.run(Default::default()))
        .await
        .expect("run() returns by itself");
    let Err(OperatorError::Liveness { message, .. }) = result else {
        panic!("expected the bind error, got {result:?}");
    };
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
    let bad = Operator::new(Registry::new())
        .client(server.client())
        .liveness("https://127.0.0.1:1/healthz")
        .run(Default::default())
        .await;
    assert!(
        matches!(bad, Err(OperatorError::Liveness { .. })),
        "{bad:?}"
    );

    running.stop().await.expect("a clean stop");
    server.stop().await;
}

/// An index of the examples' names (all under one key), which the activities below read.
#[kopf::index("kopf.dev", "v1", "kopfexamples")]
fn example_names(name: String) -> (String, String) {
    ("all".to_string(), name)
}

fn indexed(names: &kopf::Index<String, String>) -> usize {
    names.get("all").map_or(0, |store| store.len())
}

#[kopf::on_startup]
async fn instance(
    settings: &mut kopf::Settings,
    example_names: &kopf::Index<String, String>,
    memo: &kopf::Memo,
) {
    let calls = memo
        .get::<Calls>()
        .expect("the operator memo has the calls");
    calls.record(json!({"activity": "startup", "indexed": indexed(example_names)}));
    settings.posting.reporting_instance = "indexes-test".to_string();
}

#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn indexed_create(
    name: String,
    example_names: &kopf::Index<String, String>,
    memo: &kopf::Memo,
) {
    let calls = memo
        .get::<Calls>()
        .expect("the operator memo has the calls");
    calls.record(json!({"created": name, "indexed": indexed(example_names)}));
}

#[kopf::on_probe(id = "names")]
fn indexed_probe(example_names: kopf::Index<String, String>, settings: &kopf::Settings) -> Value {
    json!({"indexed": indexed(&example_names), "instance": settings.posting.reporting_instance})
}

#[kopf::on_cleanup]
async fn indexed_cleanup(
    example_names: &kopf::Index<String, String>,
    settings: kopf::Settings,
    memo: &kopf::Memo,
) {
    let calls = memo
        .get::<Calls>()
        .expect("the operator memo has the calls");
    calls.record(json!({
        "activity": "cleanup", "indexed": indexed(example_names),
        "instance": settings.posting.reporting_instance,
    }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn activities_read_the_indexes_as_they_are_and_the_settings_startup_left() {
    let server = server_with_crd().await;
    let client = server.client();
    create(&client, "first", json!({})).await;
    let calls = Calls::default();
    let port = free_port();
    let registry = kopf::handlers![
        example_names,
        instance,
        indexed_create,
        indexed_probe,
        indexed_cleanup
    ];
    let operator = Operator::new(registry)
        .settings(kopf_testing::test_settings())
        .memo(kopf::Memo::new().with(calls.clone()))
        .client(server.client())
        .liveness(format!("http://127.0.0.1:{port}/healthz"));
    let (running, ready) = Running::start(operator);
    tokio::time::timeout(DEADLINE, ready.wait())
        .await
        .expect("ready");
    // Handlers of objects wait for the indexes to be filled: once this one ran, they are.
    calls
        .wait_until("the first object handled", |calls| {
            calls.iter().any(|c| c["created"] == "first")
        })
        .await;
    let (code, body) = http_get(port, "/healthz").await.expect("the probe answers");
    assert_eq!(
        (code, body),
        (
            200,
            json!({"names": {"indexed": 1, "instance": "indexes-test"}})
        ),
        "the probe reads the index live, and the settings that the startup handler left"
    );
    create(&client, "second", json!({})).await;
    calls
        .wait_until("the second object handled", |calls| {
            calls.iter().any(|c| c["created"] == "second")
        })
        .await;
    running.stop().await.expect("a clean stop");
    server.stop().await;
    assert_eq!(
        calls.all(),
        [
            // Before anything is listed, as in Kopf: the index exists, empty.
            json!({"activity": "startup", "indexed": 0}),
            json!({"created": "first", "indexed": 1}),
            json!({"created": "second", "indexed": 2}),
            json!({"activity": "cleanup", "indexed": 2, "instance": "indexes-test"}),
        ]
    );
}
