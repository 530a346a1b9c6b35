//! Where the state is kept (progress and diff-base in annotations, `status`, or both) and how
//! many handlers run per cycle (Kopf's lifecycles), seen from the API server: the objects'
//! fields, the PATCH requests, and the handlers' calls.

use std::sync::Arc;
use std::time::Duration;

use kopf::operator::{Operator, OperatorError};
use kopf::registry::{ChangeHandler, Registry};
use kopf::settings::Lifecycle;
use kopf::storage::{
    AnnotationsDiffBaseStorage, AnnotationsProgressStorage, MultiDiffBaseStorage,
    MultiProgressStorage, StatusDiffBaseStorage, StatusProgressStorage,
};
use kopf::{Settings, TemporaryError};
use kopf_testing::{FakeApiServer, TestClient, test_settings, wait};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::{Calls, create, examples, get, patch, server_with_crd};

const LAST_HANDLED: &str = "kopf.zalando.org/last-handled-configuration";

/// An operator against a server that outlives it, so that another can take its turn.
struct Running {
    stop: CancellationToken,
    running: tokio::task::JoinHandle<Result<(), OperatorError>>,
}

impl Running {
    /// Starts the operator and waits until it has listed everything.
    async fn start(server: &FakeApiServer, registry: Registry, settings: Settings) -> Running {
        let operator = Operator::new(registry)
            .settings(settings)
            .client(server.client());
        let ready = operator.ready();
        let stop = CancellationToken::new();
        let running = tokio::spawn(operator.run(stop.clone()));
        tokio::time::timeout(kopf_testing::DEADLINE, ready.wait())
            .await
            .expect("the operator gets ready in time");
        Running { stop, running }
    }

    /// Stops the operator; waits for `run()` to return and its watches to close.
    async fn stop(self, server: &FakeApiServer) {
        self.stop.cancel();
        tokio::time::timeout(kopf_testing::DEADLINE, self.running)
            .await
            .expect("the operator stops in time")
            .expect("the operator's task did not panic")
            .expect("a clean stop");
        wait("the operator's watches to close", || async {
            (server.stats().open_watches == 0).then_some(())
        })
        .await;
    }
}

/// Waits until the object satisfies `condition`; returns it.
async fn wait_until(
    server: &FakeApiServer,
    name: &str,
    what: &str,
    condition: impl Fn(&Value) -> bool,
) -> Value {
    let client = server.client();
    wait(what, || async {
        get(&client, name).await.filter(|o| condition(o))
    })
    .await
}

/// The PATCH requests sent for an object: their paths (`…/<name>` or `…/<name>/status`).
fn patches(server: &FakeApiServer, name: &str) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.verb == "patch" && r.name.as_deref() == Some(name))
        .map(|r| r.path)
        .collect()
}

fn handled_calls(calls: &Calls) -> Vec<String> {
    calls
        .all()
        .iter()
        .map(|c| c.as_str().unwrap_or_default().to_string())
        .collect()
}

fn writable_status_progress() -> Settings {
    let mut settings = test_settings();
    settings.persistence.progress_storage = Arc::new(StatusProgressStorage {
        writable: true,
        ..StatusProgressStorage::default()
    });
    settings
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_progress_survives_a_failed_attempt_and_the_next_operator_continues_it() {
    let server = server_with_crd().await;
    let first_calls = Calls::default();
    let recorder = first_calls.clone();
    let failing = Registry::new().with(ChangeHandler::on_create(examples(), "flaky", move |inv| {
        let calls = recorder.clone();
        async move {
            calls.record(json!(inv.retry()));
            // Long enough that this operator stops before it would retry.
            Err(TemporaryError::new("not yet")
                .delay(Duration::from_secs(2))
                .into())
        }
    }));
    let first = Running::start(&server, failing, writable_status_progress()).await;
    create(&server.client(), "flaky", json!({"field": "a"})).await;
    let failed = wait_until(&server, "flaky", "a progress record in status", |o| {
        o["status"]["kopf"]["progress"]["flaky"].is_object()
    })
    .await;
    first.stop(&server).await;
    assert_eq!(first_calls.all(), [json!(0)]);

    // Kopf's record, as an object in status; nothing in the annotations.
    let record = &failed["status"]["kopf"]["progress"]["flaky"];
    assert_eq!(record["purpose"], "create");
    assert_eq!(record["retries"], 1);
    assert_eq!(record["success"], false);
    assert_eq!(record["failure"], false);
    assert_eq!(record["message"], "not yet");
    assert!(record["started"].as_str().unwrap().ends_with("+00:00"));
    assert!(record["delayed"].is_string());
    let annotations = failed["metadata"]["annotations"].as_object();
    assert!(
        annotations.is_none_or(|a| a.keys().all(|k| !k.ends_with("/flaky"))),
        "{failed}"
    );
    // A CRD with a status subresource: the record went to `/status`.
    assert_eq!(
        patches(&server, "flaky"),
        ["/apis/kopf.dev/v1/namespaces/default/kopfexamples/flaky/status"]
    );

    let second_calls = Calls::default();
    let recorder = second_calls.clone();
    let succeeding =
        Registry::new().with(ChangeHandler::on_create(examples(), "flaky", move |inv| {
            let calls = recorder.clone();
            async move {
                calls.record(json!(inv.retry()));
                Ok(Some(json!({"attempt": inv.retry()})))
            }
        }));
    let second = Running::start(&server, succeeding, writable_status_progress()).await;
    let done = wait_until(&server, "flaky", "the handler's success", |o| {
        o["metadata"]["annotations"][LAST_HANDLED].is_string()
            && o["status"]["flaky"]["attempt"] == 1
    })
    .await;
    second.stop(&server).await;
    assert_eq!(second_calls.all(), [json!(1)], "continued, not restarted");
    assert!(
        done["status"]["kopf"]["progress"]["flaky"].is_null(),
        "the record is purged when done: {done}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_diff_base_kept_in_status_detects_creation_and_updates() {
    let calls = Calls::default();
    let (created, updated) = (calls.clone(), calls.clone());
    let registry = Registry::new()
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            move |_| {
                let calls = created.clone();
                async move {
                    calls.record(json!("create"));
                    Ok(None)
                }
            },
        ))
        .with(ChangeHandler::on_update(
            examples(),
            "update_fn",
            move |inv| {
                let calls = updated.clone();
                let change = json!([
                    "update",
                    inv.old().map(|o| &o["spec"]),
                    inv.new().map(|n| &n["spec"])
                ]);
                async move {
                    calls.record(change);
                    Ok(None)
                }
            },
        ));
    let mut settings = test_settings();
    settings.persistence.diffbase_storage = Arc::new(StatusDiffBaseStorage::default());
    let server = server_with_crd().await;
    let operator = Running::start(&server, registry, settings).await;

    create(&server.client(), "one", json!({"field": "a"})).await;
    let handled = wait_until(&server, "one", "the diff-base in status", |o| {
        o["status"]["kopf"]["last-handled-configuration"].is_string()
    })
    .await;
    // As Kopf's `StatusDiffBaseStorage`: a JSON string, without the annotation's newline.
    assert_eq!(
        handled["status"]["kopf"]["last-handled-configuration"],
        r#"{"spec":{"field":"a"}}"#
    );
    assert!(handled["metadata"]["annotations"][LAST_HANDLED].is_null());

    patch(&server.client(), "one", json!({"spec": {"field": "b"}})).await;
    wait_until(&server, "one", "the update handled", |o| {
        o["status"]["kopf"]["last-handled-configuration"] == r#"{"spec":{"field":"b"}}"#
    })
    .await;
    operator.stop(&server).await;
    assert_eq!(
        calls.all(),
        [
            json!("create"),
            json!(["update", {"field": "a"}, {"field": "b"}])
        ]
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_diff_base_writes_every_storage_in_one_cycle() {
    let calls = Calls::default();
    let (created, updated) = (calls.clone(), calls.clone());
    let registry = Registry::new()
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            move |_| {
                let calls = created.clone();
                async move {
                    calls.record(json!("create"));
                    Ok(None)
                }
            },
        ))
        .with(ChangeHandler::on_update(
            examples(),
            "update_fn",
            move |_| {
                let calls = updated.clone();
                async move {
                    calls.record(json!("update"));
                    Ok(None)
                }
            },
        ));
    let mut settings = test_settings();
    settings.persistence.diffbase_storage = Arc::new(MultiDiffBaseStorage {
        storages: vec![
            Box::new(AnnotationsDiffBaseStorage::default()),
            Box::new(StatusDiffBaseStorage::default()),
        ],
    });
    let server = server_with_crd().await;
    let operator = Running::start(&server, registry, settings).await;

    create(&server.client(), "both", json!({"field": "a"})).await;
    let handled = wait_until(&server, "both", "both diff-bases", |o| {
        o["metadata"]["annotations"][LAST_HANDLED].is_string()
            && o["status"]["kopf"]["last-handled-configuration"].is_string()
    })
    .await;
    assert_eq!(
        handled["metadata"]["annotations"][LAST_HANDLED],
        "{\"spec\":{\"field\":\"a\"}}\n"
    );
    assert_eq!(
        handled["status"]["kopf"]["last-handled-configuration"],
        r#"{"spec":{"field":"a"}}"#
    );
    // One cycle, two requests: the annotation to the object, the status to `/status`.
    let object = "/apis/kopf.dev/v1/namespaces/default/kopfexamples/both";
    let mut sent = patches(&server, "both");
    sent.sort();
    assert_eq!(sent, [object.to_string(), format!("{object}/status")]);

    patch(&server.client(), "both", json!({"spec": {"field": "b"}})).await;
    wait_until(&server, "both", "both diff-bases updated", |o| {
        o["metadata"]["annotations"][LAST_HANDLED] == "{\"spec\":{\"field\":\"b\"}}\n"
            && o["status"]["kopf"]["last-handled-configuration"] == r#"{"spec":{"field":"b"}}"#
    })
    .await;
    operator.stop(&server).await;
    assert_eq!(handled_calls(&calls), ["create", "update"]);
    server.stop().await;
}

/// With progress in `status`, a cycle whose handler also patches the object's labels writes
/// twice (the object, then `/status`); the next cycle waits for the second write to come back,
/// so the first handler is not run again on the state between the two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writes_per_cycle_are_awaited_before_the_next_handler() {
    let calls = Calls::default();
    let (first, second) = (calls.clone(), calls.clone());
    let registry = Registry::new()
        .with(ChangeHandler::on_create(
            examples(),
            "labelling",
            move |inv| {
                let calls = first.clone();
                inv.patch().labels().insert("labelled".into(), "yes".into());
                async move {
                    calls.record(json!("labelling"));
                    Ok(None)
                }
            },
        ))
        .with(ChangeHandler::on_create(examples(), "second", move |_| {
            let calls = second.clone();
            async move {
                calls.record(json!("second"));
                Ok(None)
            }
        }));
    let server = server_with_crd().await;
    let operator = Running::start(&server, registry, writable_status_progress()).await;
    create(&server.client(), "two", json!({})).await;
    let handled = wait_until(&server, "two", "the creation handled", |o| {
        o["metadata"]["annotations"][LAST_HANDLED].is_string()
    })
    .await;
    assert_eq!(handled["metadata"]["labels"]["labelled"], "yes");
    operator.stop(&server).await;
    assert_eq!(handled_calls(&calls), ["labelling", "second"]);
    server.stop().await;
}

/// Three create handlers that record their calls; `first` fails once (retried at once).
fn three_handlers(calls: &Calls) -> Registry {
    let mut registry = Registry::new();
    for id in ["first", "second", "third"] {
        let calls = calls.clone();
        registry.add(ChangeHandler::on_create(examples(), id, move |inv| {
            let calls = calls.clone();
            async move {
                calls.record(json!(id));
                if id == "first" && inv.retry() == 0 && inv.labels()["fail"] == "once" {
                    return Err(TemporaryError::new("once").immediately().into());
                }
                Ok(None)
            }
        }));
    }
    registry
}

/// Runs the three handlers on a fresh object under a lifecycle; returns the calls and the
/// number of PATCHes it took.
async fn handle_three(lifecycle: Lifecycle, labels: Value) -> (Vec<String>, usize) {
    let calls = Calls::default();
    let mut settings = test_settings();
    settings.execution.lifecycle = lifecycle;
    let server = server_with_crd().await;
    let operator = Running::start(&server, three_handlers(&calls), settings).await;
    TestClient::new(server.client())
        .request(
            "POST",
            crate::support::COLLECTION,
            json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "three", "labels": labels}, "spec": {}}),
        )
        .await;
    let handled = wait_until(&server, "three", "the creation handled", |o| {
        o["metadata"]["annotations"][LAST_HANDLED].is_string()
    })
    .await;
    let annotations = handled["metadata"]["annotations"].as_object().unwrap();
    assert_eq!(annotations.len(), 1, "progress purged: {annotations:?}");
    // The diff-base's own echo must not cause another write: wait until it has arrived and
    // nothing more happens.
    assert!(
        server
            .wait_quiet(Duration::from_millis(500), Duration::from_secs(30))
            .await,
        "the operator settles"
    );
    operator.stop(&server).await;
    let patches = patches(&server, "three").len();
    server.stop().await;
    (handled_calls(&calls), patches)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asap_runs_one_handler_per_cycle_and_all_at_once_all_in_one() {
    let (calls, writes) = handle_three(Lifecycle::Asap, json!({})).await;
    assert_eq!(calls, ["first", "second", "third"]);
    assert_eq!(writes, 3, "one PATCH per cycle, one cycle per handler");

    let (calls, writes) = handle_three(Lifecycle::AllAtOnce, json!({})).await;
    assert_eq!(calls, ["first", "second", "third"]);
    assert_eq!(writes, 1, "the diff-base only; the records never sent");

    let (mut calls, writes) = handle_three(Lifecycle::Shuffled, json!({})).await;
    calls.sort();
    assert_eq!(calls, ["first", "second", "third"]);
    assert_eq!(writes, 1);

    let (mut calls, writes) = handle_three(Lifecycle::Randomized, json!({})).await;
    calls.sort();
    assert_eq!(calls, ["first", "second", "third"]);
    assert_eq!(writes, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_handler_is_retried_first_one_by_one_and_last_asap() {
    let fail = json!({"fail": "once"});
    let (calls, _) = handle_three(Lifecycle::OneByOne, fail.clone()).await;
    assert_eq!(calls, ["first", "first", "second", "third"]);

    // Asap takes the handler with the fewest retries: the failed one waits for the others.
    let (calls, _) = handle_three(Lifecycle::Asap, fail.clone()).await;
    assert_eq!(calls, ["first", "second", "third", "first"]);

    // All at once: every due handler in the first cycle, then the retry.
    let (calls, writes) = handle_three(Lifecycle::AllAtOnce, fail).await;
    assert_eq!(calls, ["first", "second", "third", "first"]);
    assert_eq!(writes, 2);
}

/// With the diff-base and the progress in `status`, everything a cycle writes goes to one
/// place: one PATCH of `/status` per handled change, as a kube-rs reconcile writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_status_storages_a_handled_change_is_one_write() {
    let registry = Registry::new()
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            |_| async { Ok(Some(json!("created"))) },
        ))
        .with(ChangeHandler::on_update(
            examples(),
            "update_fn",
            |_| async { Ok(Some(json!("updated"))) },
        ));
    let mut settings = writable_status_progress();
    settings.persistence.diffbase_storage = Arc::new(StatusDiffBaseStorage::default());
    let server = server_with_crd().await;
    let operator = Running::start(&server, registry, settings).await;

    create(&server.client(), "one", json!({"field": "a"})).await;
    wait_until(&server, "one", "the creation handled", |o| {
        o["status"]["create_fn"] == "created"
            && o["status"]["kopf"]["last-handled-configuration"].is_string()
    })
    .await;
    crate::support::settle(&server).await;
    let written = patches(&server, "one");
    assert_eq!(written.len(), 1, "one write: {written:?}");
    assert!(written[0].ends_with("/one/status"), "{written:?}");

    patch(&server.client(), "one", json!({"spec": {"field": "b"}})).await;
    wait_until(&server, "one", "the update handled", |o| {
        o["status"]["update_fn"] == "updated"
    })
    .await;
    crate::support::settle(&server).await;
    let written = patches(&server, "one");
    assert_eq!(
        written.len(),
        3,
        "the test's patch, and one write: {written:?}"
    );
    assert!(written[2].ends_with("/one/status"), "{written:?}");
    let stored = get(&server.client(), "one").await.expect("the object");
    assert!(stored["metadata"]["annotations"][LAST_HANDLED].is_null());
    operator.stop(&server).await;
    server.stop().await;
}

/// Kopf's `MultiProgressStorage` with two operators' prefixes: a retried handler's record is
/// written under both, and both are purged once it succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_kept_in_every_storage_of_a_multi_storage() {
    let calls = Calls::default();
    let recorded = calls.clone();
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        move |inv| {
            let calls = recorded.clone();
            async move {
                calls.record(json!(inv.retry()));
                if inv.retry() == 0 {
                    return Err(TemporaryError::new("once more")
                        .delay(Duration::from_secs(1))
                        .into());
                }
                Ok(None)
            }
        },
    ));
    let mut settings = test_settings();
    settings.persistence.progress_storage = Arc::new(MultiProgressStorage {
        storages: vec![
            Box::new(AnnotationsProgressStorage::new("my-operator.example.com")),
            Box::new(AnnotationsProgressStorage::default()),
        ],
    });
    let server = server_with_crd().await;
    let operator = Running::start(&server, registry, settings).await;
    create(&server.client(), "multi", json!({})).await;
    let record = |o: &Value, prefix: &str| {
        o["metadata"]["annotations"][format!("{prefix}/create_fn")]
            .as_str()
            .and_then(|text| serde_json::from_str::<Value>(text).ok())
    };
    let retried = wait_until(&server, "multi", "the record under both prefixes", |o| {
        record(o, "my-operator.example.com").is_some() && record(o, "kopf.zalando.org").is_some()
    })
    .await;
    assert_eq!(
        record(&retried, "my-operator.example.com"),
        record(&retried, "kopf.zalando.org")
    );
    assert_eq!(record(&retried, "kopf.zalando.org").unwrap()["retries"], 1);
    wait_until(&server, "multi", "both records purged", |o| {
        record(o, "my-operator.example.com").is_none() && record(o, "kopf.zalando.org").is_none()
    })
    .await;
    operator.stop(&server).await;
    assert_eq!(calls.all(), [json!(0), json!(1)]);
    server.stop().await;
}
