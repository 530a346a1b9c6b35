//! Change handlers: create, update, field, delete; retries and failures; Kopf's state.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kopf::registry::{ChangeHandler, Registry};
use kopf::{PermanentError, TemporaryError};
use kopf_testing::OperatorHarness;
use serde_json::{Value, json};

use crate::support::{
    Calls, create, delete, examples, patch, server_with_crd, wait_gone, wait_object,
};

fn last_handled(object: &Value) -> Option<Value> {
    let text = object["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"]
        .as_str()?;
    serde_json::from_str(text).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lifecycle_of_create_update_field_and_delete() {
    let calls = Calls::default();
    let (c1, c2, c3, c4) = (calls.clone(), calls.clone(), calls.clone(), calls.clone());
    let registry = Registry::new()
        .with(ChangeHandler::on_create(examples(), "create_fn", move |inv| {
            let calls = c1.clone();
            async move {
                calls.record(json!({"handler": "create", "spec": inv.spec(), "old": inv.old(), "reason": inv.reason().map(|r| r.as_str())}));
                Ok(Some(json!({"message": "created"})))
            }
        }))
        .with(ChangeHandler::on_update(examples(), "update_fn", move |inv| {
            let calls = c2.clone();
            async move {
                let diff: Vec<Value> = inv.diff().iter().map(|d| json!([d.op.as_str(), d.path, d.old, d.new])).collect();
                calls.record(json!({"handler": "update", "diff": diff, "old": inv.old(), "new": inv.new()}));
                Ok(None)
            }
        }))
        .with(ChangeHandler::on_field(examples(), "field_fn", "spec.field", move |inv| {
            let calls = c3.clone();
            async move {
                calls.record(json!({"handler": "field", "old": inv.old(), "new": inv.new()}));
                Ok(None)
            }
        }))
        .with(ChangeHandler::on_delete(examples(), "delete_fn", move |inv| {
            let calls = c4.clone();
            async move {
                calls.record(json!({"handler": "delete", "name": inv.name()}));
                Ok(None)
            }
        }));
    let server = server_with_crd().await;
    let harness = OperatorHarness::start_on(
        server,
        kopf::operator::Operator::new(registry).settings(kopf_testing::test_settings()),
    )
    .await;
    let client = harness.client();

    create(&client, "one", json!({"field": "a", "other": 1})).await;
    let created = wait_object(&harness, "one", "the create handler's result", |o| {
        o["status"]["create_fn"]["message"] == "created"
    })
    .await;
    assert_eq!(
        created["metadata"]["finalizers"],
        json!(["kopf.zalando.org/KopfFinalizerMarker"])
    );
    wait_object(&harness, "one", "the diff-base", |o| {
        last_handled(o).is_some()
    })
    .await;

    patch(&client, "one", json!({"spec": {"field": "b"}})).await;
    let handled = wait_object(&harness, "one", "the update handled", |o| {
        last_handled(o).is_some_and(|l| l["spec"]["field"] == "b")
    })
    .await;
    assert_eq!(
        last_handled(&handled).unwrap(),
        json!({"spec": {"field": "b", "other": 1}})
    );

    delete(&client, "one").await;
    wait_gone(&harness, "one").await;
    harness.stop().await.expect("a clean stop");

    let calls = calls.all();
    let names: Vec<&str> = calls
        .iter()
        .map(|c| c["handler"].as_str().unwrap())
        .collect();
    assert_eq!(
        names.iter().filter(|n| **n == "create").count(),
        1,
        "{calls:?}"
    );
    assert_eq!(
        names.iter().filter(|n| **n == "update").count(),
        1,
        "{calls:?}"
    );
    assert_eq!(
        names.iter().filter(|n| **n == "delete").count(),
        1,
        "{calls:?}"
    );
    // The field handler runs on creation (the field appears) and on its change.
    let fields: Vec<&Value> = calls.iter().filter(|c| c["handler"] == "field").collect();
    assert_eq!(fields.len(), 2, "{calls:?}");
    assert_eq!(
        (&fields[1]["old"], &fields[1]["new"]),
        (&json!("a"), &json!("b"))
    );
    let create = calls.iter().find(|c| c["handler"] == "create").unwrap();
    assert_eq!(create["old"], Value::Null);
    assert_eq!(create["reason"], "create");
    let update = calls.iter().find(|c| c["handler"] == "update").unwrap();
    assert_eq!(
        update["diff"],
        json!([["change", ["spec", "field"], "a", "b"]])
    );
    assert_eq!(update["old"]["spec"]["field"], "a");
    assert_eq!(update["new"]["spec"]["field"], "b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simple_create_costs_one_patch_or_two_with_a_result() {
    let registry = Registry::new()
        .with(
            ChangeHandler::on_create(examples(), "quiet", |_| async { Ok(None) })
                .label("kind", "quiet".into()),
        )
        .with(
            ChangeHandler::on_create(examples(), "talkative", |_| async {
                Ok(Some(json!("done")))
            })
            .label("kind", "talkative".into()),
        );
    let server = server_with_crd().await;
    let harness = OperatorHarness::start_on(
        server,
        kopf::operator::Operator::new(registry).settings(kopf_testing::test_settings()),
    )
    .await;
    harness
        .request(
            "POST",
            crate::support::COLLECTION,
            json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "q", "labels": {"kind": "quiet"}}, "spec": {}}),
        )
        .await;
    wait_object(&harness, "q", "handled", |o| last_handled(o).is_some()).await;
    harness
        .request(
            "POST",
            crate::support::COLLECTION,
            json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "t", "labels": {"kind": "talkative"}}, "spec": {}}),
        )
        .await;
    let talkative = wait_object(&harness, "t", "handled", |o| {
        last_handled(o).is_some() && o["status"]["talkative"] == "done"
    })
    .await;
    assert!(
        talkative["metadata"]["annotations"]
            .as_object()
            .unwrap()
            .keys()
            .all(|k| !k.ends_with("/talkative")),
        "progress is purged"
    );
    // Once the echoes are handled and nothing more happens, count the writes per object.
    assert!(
        harness
            .server()
            .wait_quiet(Duration::from_millis(500), Duration::from_secs(30))
            .await,
        "the operator settles"
    );
    let patches = |name: &str| {
        harness
            .server()
            .requests()
            .iter()
            .filter(|r| r.verb == "patch" && r.name.as_deref() == Some(name))
            .count()
    };
    assert_eq!(patches("q"), 1, "{:#?}", harness.server().requests());
    assert_eq!(patches("t"), 2, "{:#?}", harness.server().requests());
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn temporary_errors_are_retried_with_the_retry_count_and_kopfs_progress_record() {
    let calls = Calls::default();
    let recorder = calls.clone();
    let registry =
        Registry::new().with(ChangeHandler::on_create(examples(), "flaky", move |inv| {
            let calls = recorder.clone();
            async move {
                calls.record(json!({"retry": inv.retry()}));
                if inv.retry() < 2 {
                    return Err(TemporaryError::new("not yet")
                        .delay(Duration::from_millis(100))
                        .into());
                }
                Ok(Some(json!({"attempts": inv.retry() + 1})))
            }
        }));
    let server = server_with_crd().await;
    let harness = OperatorHarness::start_on(
        server,
        kopf::operator::Operator::new(registry).settings(kopf_testing::test_settings()),
    )
    .await;
    create(&harness.client(), "flaky", json!({})).await;
    // The progress record after a failed attempt, in Kopf's format.
    let failing = wait_object(&harness, "flaky", "a progress record", |o| {
        o["metadata"]["annotations"]["kopf.zalando.org/flaky"].is_string()
    })
    .await;
    let record: Value = serde_json::from_str(
        failing["metadata"]["annotations"]["kopf.zalando.org/flaky"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(record["purpose"], "create");
    assert_eq!(record["success"], false);
    assert_eq!(record["failure"], false);
    assert_eq!(record["message"], "not yet");
    assert!(record["retries"].as_u64().unwrap() >= 1);
    assert!(
        record["started"].as_str().unwrap().ends_with("+00:00"),
        "{record}"
    );
    assert!(record["delayed"].is_string());
    // The result and the purged record are two writes (the result first): the final state is
    // waited for as a whole.
    wait_object(
        &harness,
        "flaky",
        "the final success, its record purged",
        |o| {
            o["status"]["flaky"]["attempts"] == 3
                && o["metadata"]["annotations"]["kopf.zalando.org/flaky"].is_null()
        },
    )
    .await;
    assert_eq!(
        calls.all(),
        vec![
            json!({"retry": 0}),
            json!({"retry": 1}),
            json!({"retry": 2})
        ]
    );
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_errors_panics_limits_and_timeouts() {
    let calls = Calls::default();
    let (permanent, panicking) = (calls.clone(), calls.clone());
    let registry = Registry::new()
        .with(
            ChangeHandler::on_create(examples(), "permanent", move |_| {
                permanent.record(json!("permanent"));
                async { Err(PermanentError::new("no way").into()) }
            })
            .label("case", "permanent".into()),
        )
        .with(
            ChangeHandler::on_create(examples(), "panicking", move |_| {
                panicking.record(json!("panic"));
                async { panic!("boom") }
            })
            .label("case", "panic".into())
            .retries(2),
        )
        .with(
            ChangeHandler::on_create(examples(), "sleepy", |inv| async move {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(3600)) => Ok(None),
                    _ = inv.stopped().cancelled() => Err(kopf::Error::msg("stopped")),
                }
            })
            .label("case", "sleepy".into())
            .timeout(Duration::from_millis(300)),
        );
    let server = server_with_crd().await;
    let harness = OperatorHarness::start_on(
        server,
        kopf::operator::Operator::new(registry).settings(kopf_testing::test_settings()),
    )
    .await;
    for (name, case) in [("p", "permanent"), ("x", "panic"), ("s", "sleepy")] {
        harness
            .request(
                "POST",
                crate::support::COLLECTION,
                json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": name, "labels": {"case": case}}, "spec": {}}),
            )
            .await;
    }
    // Failed handlers are done: the object is handled, the record purged, the message logged.
    for name in ["p", "x", "s"] {
        wait_object(&harness, name, "handling to finish", |o| {
            last_handled(o).is_some()
        })
        .await;
    }
    harness.stop().await.expect("a clean stop");
    let calls = calls.all();
    let count = |what: &str| calls.iter().filter(|c| *c == what).count();
    assert_eq!(count("permanent"), 1, "a permanent error is not retried");
    assert_eq!(
        count("panic"),
        2,
        "a panic is a failed attempt, retried up to the limit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_that_does_not_fit_the_type_is_a_permanent_error_and_others_go_on() {
    #[derive(serde::Deserialize)]
    struct Spec {
        size: u32,
    }
    let calls = Calls::default();
    let recorder = calls.clone();
    let registry =
        Registry::new().with(ChangeHandler::on_create(examples(), "typed", move |inv| {
            let calls = recorder.clone();
            async move {
                let spec: Spec = inv.spec_as()?;
                calls.record(json!(spec.size));
                Ok(None)
            }
        }));
    let server = server_with_crd().await;
    let harness = OperatorHarness::start_on(
        server,
        kopf::operator::Operator::new(registry).settings(kopf_testing::test_settings()),
    )
    .await;
    let client = harness.client();
    create(&client, "bad", json!({"size": "big"})).await;
    create(&client, "good", json!({"size": 3})).await;
    wait_object(&harness, "good", "handled", |o| last_handled(o).is_some()).await;
    // The bad one fails for good: handled (diff-base written), the handler called never.
    wait_object(&harness, "bad", "handled", |o| last_handled(o).is_some()).await;
    assert_eq!(calls.all(), vec![json!(3)]);
    harness.stop().await.expect("a clean stop");
}

/// Runs an operator (its settings changed by `tweak`) on a server with one object created
/// before it starts (listed) and one after (watched); returns, per object, whether its
/// create and event handlers saw `metadata.managedFields` (and the text of the whole body
/// that the event handler saw), the objects on the server, and the text of the watched
/// object as created.
async fn managed_fields_seen(tweak: fn(&mut kopf::Settings)) -> (Vec<Value>, Vec<Value>, String) {
    let calls = Calls::default();
    let (c1, c2) = (calls.clone(), calls.clone());
    let registry = Registry::new()
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            move |inv| {
                let calls = c1.clone();
                async move {
                    let seen = !inv.meta()["managedFields"].is_null();
                    calls.record(json!({"handler": "create", "name": inv.name(), "seen": seen}));
                    Ok(Some(json!("done")))
                }
            },
        ))
        .with(kopf::registry::EventHandler::on_event(
            examples(),
            "event_fn",
            move |inv| {
                let calls = c2.clone();
                async move {
                    let seen = !inv.body()["metadata"]["managedFields"].is_null();
                    let text = serde_json::to_string(inv.body()).unwrap();
                    calls.record(
                        json!({"handler": "event", "name": inv.name(), "seen": seen, "text": text}),
                    );
                    Ok(None)
                }
            },
        ));
    let server = server_with_crd().await;
    let created = create(&server.client(), "listed", json!({"field": "a"})).await;
    assert!(
        created["metadata"]["managedFields"].is_array(),
        "the server records field managers: {created}"
    );
    let mut settings = kopf_testing::test_settings();
    tweak(&mut settings);
    let harness = OperatorHarness::start_on(
        server,
        kopf::operator::Operator::new(registry).settings(settings),
    )
    .await;
    let watched = create(&harness.client(), "watched", json!({"field": "b"})).await;
    let mut objects = Vec::new();
    for name in ["listed", "watched"] {
        objects.push(
            wait_object(&harness, name, "the create handler's result", |o| {
                o["status"]["create_fn"] == "done"
            })
            .await,
        );
    }
    calls
        .wait_until("both objects' create handlers", |all| {
            all.iter().filter(|c| c["handler"] == "create").count() == 2
        })
        .await;
    harness.stop().await.expect("a clean stop");
    (
        calls.all(),
        objects,
        serde_json::to_string(&watched).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripped_managed_fields_are_not_seen_by_handlers_and_stay_on_the_server() {
    let (calls, objects, _) = managed_fields_seen(|s| s.watching.strip_managed_fields = true).await;
    assert!(
        calls.iter().all(|c| c["seen"] == false),
        "no handler sees managedFields: {calls:?}"
    );
    for name in ["listed", "watched"] {
        for handler in ["create", "event"] {
            assert!(
                calls
                    .iter()
                    .any(|c| c["name"] == name && c["handler"] == handler),
                "the {handler} handler ran for {name}: {calls:?}"
            );
        }
    }
    for object in &objects {
        assert!(
            object["metadata"]["managedFields"].is_array(),
            "the server keeps them: {object}"
        );
    }

    // By default, as Kopf, the objects are passed whole: the watched object's first event,
    // as the handler sees it, is the object as created, to the order of its keys (the
    // managed fields, kept apart as read, are back in their place).
    let (calls, _, watched) = managed_fields_seen(|_| {}).await;
    assert!(
        calls.iter().all(|c| c["seen"] == true),
        "handlers see managedFields: {calls:?}"
    );
    assert!(
        calls
            .iter()
            .any(|c| c["name"] == "watched" && c["text"] == watched),
        "the event handler saw the object as created ({watched}): {calls:?}"
    );
}

/// The handlers of one cycle see one shared copy of the change (`new`, `old`, `diff`): each
/// invocation used to get copies of its own (two per handler, the object's essence each),
/// made and freed on every cycle and held by every handler in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handlers_of_one_cycle_share_one_copy_of_the_change() {
    // The invocations are kept, so that no copy is freed and its address reused meanwhile.
    let seen: Arc<Mutex<Vec<kopf::Invocation>>> = Arc::default();
    let recording = |id: &str| {
        let seen = seen.clone();
        ChangeHandler::on_create(examples(), id, move |invocation: kopf::Invocation| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(invocation);
                Ok(None)
            }
        })
    };
    let registry = Registry::new()
        .with(recording("first"))
        .with(recording("second"));
    let mut settings = kopf_testing::test_settings();
    // Both handlers in one cycle (Kopf's default, `Asap`, runs one per cycle).
    settings.execution.lifecycle = kopf::settings::Lifecycle::AllAtOnce;
    let harness = OperatorHarness::start_on(
        server_with_crd().await,
        kopf::operator::Operator::new(registry).settings(settings),
    )
    .await;
    create(&harness.client(), "shared", json!({"field": 1})).await;
    wait_object(&harness, "shared", "handled", |o| last_handled(o).is_some()).await;
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(seen.len(), 2, "both handlers ran once");
    let new = |i: usize| seen[i].new().expect("a creation has a new essence") as *const Value;
    let diff = |i: usize| std::ptr::from_ref(seen[i].diff()).cast::<()>();
    assert_eq!(new(0), new(1), "the same essence, not copies");
    assert_eq!(diff(0), diff(1), "the same diff, not copies");
    drop(seen); // They hold the operator's client.
    harness.stop().await.expect("a clean stop");
}

/// Kopf's `PatchFn`: a function in the handler's patch changes the object as it is when
/// written, after the merge changes; the object's part goes as JSON-patch operations, the
/// `status` (a subresource here) as a merge of it.
#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
fn append_fn(patch: &mut kopf::Patch) {
    patch.set("spec.size", 2);
    patch.function(|body: &mut Value| {
        let size = body["spec"]["size"].clone();
        if let Some(items) = body["spec"]["items"].as_array_mut()
            && !items.contains(&json!("b"))
        {
            items.push(json!("b"));
        }
        body["status"]["seen_size"] = size;
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_functions_change_the_object_as_it_is_when_written() {
    let server = server_with_crd().await;
    let operator = kopf::operator::Operator::new(kopf::handlers![append_fn])
        .settings(kopf_testing::test_settings());
    let harness = OperatorHarness::start_on(server, operator).await;
    create(&harness.client(), "fns", json!({"items": ["a"], "size": 1})).await;
    let done = wait_object(&harness, "fns", "the handled object", |o| {
        last_handled(o).is_some()
    })
    .await;
    assert_eq!(done["spec"]["items"], json!(["a", "b"]), "{done}");
    assert_eq!(done["spec"]["size"], 2, "{done}");
    assert_eq!(done["status"]["seen_size"], 2, "{done}");
    harness.stop().await.expect("a clean stop");
}
