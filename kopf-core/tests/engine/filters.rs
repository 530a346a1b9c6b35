//! Filters on every kind of handler, with Kopf's semantics: `field` and `value` on event
//! handlers, indexes, daemons and timers (a daemon or timer stops when its object stops
//! matching, and starts again when it matches again); callables that see the whole object;
//! and the label selector sent to the server only when it cannot hide an object from a handler.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kopf::filters::{MetaFilter, ValueFilter};
use kopf::operator::Operator;
use kopf::registry::{
    ChangeHandler, DaemonHandler, EventHandler, IndexHandler, Registry, TimerHandler,
};
use kopf_testing::{OperatorHarness, test_settings, wait};
use serde_json::{Value, json};

use crate::support::{
    Calls, create, delete, examples, patch, server_with_crd, settle, wait_gone, wait_object,
};

async fn harness(registry: Registry) -> OperatorHarness {
    let server = server_with_crd().await;
    OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await
}

/// Counts the daemons running, by a guard that their futures hold: dropped, or returned, they
/// count no more.
#[derive(Clone, Default)]
struct Alive(Arc<AtomicUsize>);

struct Running(Arc<AtomicUsize>);

impl Alive {
    fn enter(&self) -> Running {
        self.0.fetch_add(1, Ordering::SeqCst);
        Running(self.0.clone())
    }

    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_with_a_field_filter_runs_only_while_its_object_matches() {
    let calls = Calls::default();
    let alive = Alive::default();
    let (recorded, counted) = (calls.clone(), alive.clone());
    let registry = Registry::new().with(
        DaemonHandler::new(examples(), "enabled_fn", move |invocation| {
            let (calls, running) = (recorded.clone(), counted.enter());
            async move {
                let _running = running;
                calls.record(json!({"started": invocation.spec()["enabled"]}));
                invocation.stopped().cancelled().await;
                calls.record(json!({"stopped": format!("{:?}", invocation.stop_reason())}));
                Ok(None)
            }
        })
        .field("spec.enabled")
        .value(ValueFilter::Value(json!(true)))
        .cancellation_backoff(Duration::from_secs(30)),
    );
    let harness = harness(registry).await;
    let client = harness.client();

    create(&client, "one", json!({"enabled": false})).await;
    settle(harness.server()).await;
    assert_eq!(calls.all(), Vec::<Value>::new(), "not started while false");
    let object = harness
        .get("kopfexamples", "default", "one")
        .await
        .expect("the object exists");
    assert!(
        object["metadata"]["finalizers"].is_null(),
        "no finalizer for a daemon that does not match: {object}"
    );

    patch(&client, "one", json!({"spec": {"enabled": true}})).await;
    calls.wait_len(1).await;
    patch(&client, "one", json!({"spec": {"enabled": false}})).await;
    calls.wait_len(2).await;
    wait("the stopped daemon to be gone", || async {
        (alive.count() == 0).then_some(())
    })
    .await;

    // Other changes while it does not match: it stays stopped.
    for n in 1..=3 {
        patch(&client, "one", json!({"spec": {"other": n}})).await;
        settle(harness.server()).await;
    }
    assert_eq!(calls.all().len(), 2, "not started again while false");
    assert_eq!(alive.count(), 0);

    patch(&client, "one", json!({"spec": {"enabled": true}})).await;
    calls.wait_len(3).await;
    delete(&client, "one").await;
    wait_gone(&harness, "one").await;
    assert_eq!(
        calls.all(),
        [
            json!({"started": true}),
            json!({"stopped": "Some(FiltersMismatch)"}),
            json!({"started": true}),
            json!({"stopped": "Some(ObjectDeleted)"}),
        ]
    );
    assert_eq!(alive.count(), 0, "no daemon is left running");
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_alone_lets_a_daemon_run_while_the_field_is_present() {
    let calls = Calls::default();
    let recorded = calls.clone();
    let registry = Registry::new().with(
        DaemonHandler::new(examples(), "present_fn", move |invocation| {
            let calls = recorded.clone();
            async move {
                calls.record(json!({"started": invocation.spec()["watch"]}));
                invocation.stopped().cancelled().await;
                calls.record(json!({"stopped": format!("{:?}", invocation.stop_reason())}));
                Ok(None)
            }
        })
        .field("spec.watch"),
    );
    let harness = harness(registry).await;
    let client = harness.client();
    create(&client, "one", json!({})).await;
    create(&client, "two", json!({"watch": false})).await;
    calls.wait_len(1).await;
    settle(harness.server()).await;
    // As Kopf: present, even false, is enough; absent is not.
    assert_eq!(calls.all(), [json!({"started": false})]);
    // A merge-patch's null removes the field.
    patch(&client, "two", json!({"spec": {"watch": null}})).await;
    calls.wait_len(2).await;
    assert_eq!(calls.all()[1], json!({"stopped": "Some(FiltersMismatch)"}));
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timer_with_a_field_filter_ticks_only_while_its_object_matches() {
    let ticks = Calls::default();
    let recorded = ticks.clone();
    let registry = Registry::new().with(
        TimerHandler::new(
            examples(),
            "tick_fn",
            Duration::from_millis(100),
            move |invocation| {
                let ticks = recorded.clone();
                async move {
                    ticks.record(invocation.spec()["phase"].clone());
                    // Written at each tick: the operator is not quiet while the timer ticks.
                    Ok(Some(json!({"ticks": ticks.all().len()})))
                }
            },
        )
        .field("spec.phase")
        .value(ValueFilter::callable(|phase| {
            phase.is_some_and(|phase| phase != "Done")
        })),
    );
    let harness = harness(registry).await;
    let client = harness.client();
    create(&client, "one", json!({"phase": "Running"})).await;
    wait_object(&harness, "one", "a few ticks", |o| {
        o["status"]["tick_fn/spec.phase"]["ticks"].as_u64() >= Some(3)
    })
    .await;
    patch(&client, "one", json!({"spec": {"phase": "Done"}})).await;
    // Quiet only once the ticks (each a write) have stopped.
    settle(harness.server()).await;
    let seen = ticks.all();
    assert!(
        seen.iter().all(|phase| phase == "Running"),
        "no tick once Done: {seen:?}"
    );
    patch(&client, "one", json!({"spec": {"phase": "Again"}})).await;
    ticks
        .wait_until("a tick after the match again", |all| {
            all.last() == Some(&json!("Again"))
        })
        .await;
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_handlers_and_indexes_see_only_the_objects_whose_field_matches() {
    let events = Calls::default();
    let (recorded, read) = (events.clone(), events.clone());
    let registry = Registry::new()
        .with(
            IndexHandler::new(examples(), "by_owner", |invocation| async move {
                let owner = invocation.spec()["owner"].as_str().map(str::to_string);
                Ok(owner.map(|owner| (owner, invocation.name().to_string())))
            })
            .field("spec.owner")
            .value(ValueFilter::Present),
        )
        .with(
            EventHandler::on_event(examples(), "fast_fn", move |invocation| {
                let events = recorded.clone();
                async move {
                    events.record(
                        json!({"fast": invocation.name(), "type": invocation.event_type()}),
                    );
                    Ok(Some(json!("seen")))
                }
            })
            .field("spec.mode")
            .value(ValueFilter::Value(json!("fast"))),
        )
        .with(EventHandler::on_event(
            examples(),
            "index_fn",
            move |invocation| {
                let events = read.clone();
                let owners: Vec<String> = invocation
                    .index::<String, String>("by_owner")
                    .map(|index| index.keys())
                    .unwrap_or_default();
                async move {
                    events.record(json!({"owners": owners}));
                    Ok(None)
                }
            },
        ));
    let harness = harness(registry).await;
    let client = harness.client();
    create(&client, "one", json!({"mode": "slow", "owner": "ann"})).await;
    events
        .wait_until("the index with ann", |all| {
            all.contains(&json!({"owners": ["ann"]}))
        })
        .await;
    patch(
        &client,
        "one",
        json!({"spec": {"mode": "fast", "owner": null}}),
    )
    .await;
    let object = wait_object(&harness, "one", "the fast handler's result", |o| {
        o["status"]["fast_fn/spec.mode"] == "seen"
    })
    .await;
    assert!(object["status"]["fast_fn"].is_null(), "{object}");
    events
        .wait_until("the index without ann", |all| {
            all.last() == Some(&json!({"owners": []}))
        })
        .await;
    let fast: Vec<Value> = events
        .all()
        .into_iter()
        .filter(|call| call.get("fast").is_some())
        .collect();
    assert_eq!(
        fast.first(),
        Some(&json!({"fast": "one", "type": "MODIFIED"})),
        "not called while slow"
    );
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callables_of_labels_annotations_and_values_see_the_whole_object() {
    let calls = Calls::default();
    let recorded = calls.clone();
    let registry = Registry::new().with(
        ChangeHandler::on_create(examples(), "owned_fn", move |invocation| {
            let calls = recorded.clone();
            async move {
                calls.record(json!(invocation.name()));
                Ok(None)
            }
        })
        .label(
            "owner",
            MetaFilter::callable_with_body(|owner, body| {
                owner.is_some() && owner == body["spec"]["owner"].as_str()
            }),
        )
        .annotation(
            "team",
            MetaFilter::callable_with_body(|team, body| {
                team.is_some_and(|team| body["metadata"]["labels"]["owner"] != team)
            }),
        )
        .field("spec.size")
        // As in Kopf, a value filter of a change is given the old and the new value: for a
        // creation, the old one is absent, and the callable must refuse it itself.
        .value(ValueFilter::callable_with_body(|size, body| {
            let limit = body["spec"]["limit"].as_i64();
            size.and_then(Value::as_i64)
                .zip(limit)
                .is_some_and(|(size, limit)| size < limit)
        })),
    );
    let harness = harness(registry).await;
    let object = |name: &str, owner: &str, size: i64| {
        json!({
            "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
            "metadata": {"name": name, "labels": {"owner": owner}, "annotations": {"team": "blue"}},
            "spec": {"owner": "ann", "size": size, "limit": 3},
        })
    };
    for (name, owner, size) in [
        ("good", "ann", 1),
        ("stranger", "bob", 1),
        ("big", "ann", 5),
    ] {
        harness.apply_value(object(name, owner, size)).await;
    }
    calls.wait_len(1).await;
    settle(harness.server()).await;
    assert_eq!(calls.all(), [json!("good")]);
    harness.stop().await.expect("a clean stop");
}

/// The label selector sent to the server: only when every handler of the resource filters on
/// the same plain labels, and no daemon or timer serves it (an object leaving such a watch
/// looks deleted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_without_filters_sees_objects_that_other_handlers_select_by_label() {
    let calls = Calls::default();
    let (created, started) = (calls.clone(), calls.clone());
    let registry = Registry::new()
        .with(
            ChangeHandler::on_create(examples(), "web_fn", move |invocation| {
                let calls = created.clone();
                async move {
                    calls.record(json!({"created": invocation.name()}));
                    Ok(None)
                }
            })
            .label("app", "web".into()),
        )
        .with(DaemonHandler::new(
            examples(),
            "any_fn",
            move |invocation| {
                let calls = started.clone();
                async move {
                    calls.record(json!({"daemon": invocation.name()}));
                    invocation.stopped().cancelled().await;
                    Ok(None)
                }
            },
        ));
    let harness = harness(registry).await;
    let client = harness.client();
    create(&client, "plain", json!({})).await;
    calls
        .wait_until("the daemon of the unlabelled object", |all| {
            all.contains(&json!({"daemon": "plain"}))
        })
        .await;
    let selectors: Vec<String> = harness
        .server()
        .requests()
        .iter()
        .filter(|r| r.verb == "watch" && r.resource.starts_with("kopfexamples"))
        .map(|r| r.query.clone())
        .collect();
    assert!(
        selectors
            .iter()
            .all(|query| !query.contains("labelSelector")),
        "{selectors:?}"
    );
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_that_all_filter_on_the_same_labels_watch_only_those_objects() {
    let calls = Calls::default();
    let recorded = calls.clone();
    let registry = Registry::new().with(
        ChangeHandler::on_create(examples(), "web_fn", move |invocation| {
            let calls = recorded.clone();
            async move {
                calls.record(json!(invocation.name()));
                Ok(None)
            }
        })
        .label("app", "web".into()),
    );
    let harness = harness(registry).await;
    harness
        .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: web, labels: {app: web}}}")
        .await;
    calls.wait_len(1).await;
    let watches: Vec<String> = harness
        .server()
        .requests()
        .iter()
        .filter(|r| r.verb == "watch" && r.resource.starts_with("kopfexamples"))
        .map(|r| r.query.clone())
        .collect();
    assert!(
        !watches.is_empty()
            && watches
                .iter()
                .all(|query| query.contains("labelSelector=app%3Dweb")),
        "{watches:?}"
    );
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_of_a_daemon_outside_the_spec_is_compared_between_states() {
    // As Kopf: the fields of daemons, timers and event handlers join the essence, so the
    // diff-base records them and their changes are changes.
    let calls = Calls::default();
    let recorded = calls.clone();
    let registry = Registry::new()
        .with(ChangeHandler::on_update(
            examples(),
            "update_fn",
            move |invocation| {
                let calls = recorded.clone();
                async move {
                    calls.record(json!(invocation.diff()));
                    Ok(None)
                }
            },
        ))
        .with(
            DaemonHandler::new(examples(), "phase_fn", |invocation| async move {
                invocation.stopped().cancelled().await;
                Ok(None)
            })
            .field("status.phase"),
        );
    let harness = harness(registry).await;
    let client = harness.client();
    create(&client, "one", json!({})).await;
    wait_object(&harness, "one", "the diff-base", |o| {
        o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"].is_string()
    })
    .await;
    let (status, answer) = harness
        .server()
        .request(
            "PATCH",
            &format!("{}/one/status", crate::support::COLLECTION),
            json!({"status": {"phase": "Running"}}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let all = calls.wait_len(1).await;
    // As Kopf's diff: the essence had no status before, and now has the phase in one.
    assert_eq!(
        all[0],
        json!([["add", ["status"], null, {"phase": "Running"}]])
    );
    let object = wait_object(&harness, "one", "the diff-base with the phase", |o| {
        o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"]
            .as_str()
            .is_some_and(|base| base.contains("Running"))
    })
    .await;
    let base: Value = serde_json::from_str(
        object["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(base["status"], json!({"phase": "Running"}));
    harness.stop().await.expect("a clean stop");
}

/// A daemon whose object matches again while its previous run is still stopping starts again
/// once that run has ended, without waiting for another event of the object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_matching_again_while_it_still_stops_starts_once_it_ended() {
    let calls = Calls::default();
    let release = Arc::new(tokio::sync::Notify::new());
    let (recorded, released) = (calls.clone(), release.clone());
    let registry = Registry::new().with(
        DaemonHandler::new(examples(), "slow_fn", move |invocation| {
            let (calls, release) = (recorded.clone(), released.clone());
            async move {
                calls.record(json!("started"));
                invocation.stopped().cancelled().await;
                calls.record(json!("stopping"));
                // Its cleanup outlasts the object's next change.
                release.notified().await;
                calls.record(json!("stopped"));
                Ok(None)
            }
        })
        .label("run", MetaFilter::Present)
        .cancellation_backoff(Duration::from_secs(60)),
    );
    let harness = harness(registry).await;
    let client = harness.client();
    harness
        .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: one, labels: {run: 'yes'}}}")
        .await;
    calls.wait_len(1).await;
    patch(
        &client,
        "one",
        json!({"metadata": {"labels": {"run": null}}}),
    )
    .await;
    calls.wait_len(2).await;
    patch(
        &client,
        "one",
        json!({"metadata": {"labels": {"run": "again"}}}),
    )
    .await;
    // The change is seen while the previous run still cleans up; then it ends, with no event.
    settle(harness.server()).await;
    release.notify_one();
    let all = calls.wait_len(4).await;
    assert_eq!(
        all,
        [
            json!("started"),
            json!("stopping"),
            json!("stopped"),
            json!("started")
        ]
    );
    release.notify_one();
    harness.stop().await.expect("a clean stop");
}

/// An object whose labels stop matching leaves a label-selected watch as if deleted: if it
/// held the finalizer of a deletion handler, nobody would take it off, and its deletion would
/// hang. As in Kopf, the finalizer goes when the object no longer matches: no label selector
/// is sent where a deletion handler needs a finalizer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_that_stops_matching_a_deletion_handler_loses_its_finalizer() {
    let registry = Registry::new().with(
        ChangeHandler::on_delete(examples(), "web_deleted", |_| async { Ok(None) })
            .label("app", "web".into()),
    );
    let harness = harness(registry).await;
    let client = harness.client();
    harness
        .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: web, labels: {app: web}}}")
        .await;
    wait_object(&harness, "web", "the finalizer", |o| {
        o["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
    })
    .await;
    patch(
        &client,
        "web",
        json!({"metadata": {"labels": {"app": "db"}}}),
    )
    .await;
    wait_object(&harness, "web", "the finalizer removed", |o| {
        o["metadata"]["finalizers"]
            .as_array()
            .is_none_or(Vec::is_empty)
    })
    .await;
    delete(&client, "web").await;
    wait_gone(&harness, "web").await;
    harness.stop().await.expect("a clean stop");
}
