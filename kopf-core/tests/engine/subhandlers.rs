//! Sub-handlers: registered by a handler while it runs, each with its own progress record
//! (`parent/child`), listed in the parent's `subrefs`; the parent finishes when they all have.

use std::time::Duration;

use kopf::TemporaryError;
use kopf::registry::{ChangeHandler, Registry, SubHandler};
use kopf_testing::{OperatorHarness, test_settings};
use serde_json::{Value, json};

use crate::logs::{lines_of, wait_line};
use crate::support::{Calls, create, examples, server_with_crd, wait_object};

fn progress(object: &Value, id: &str) -> Option<Value> {
    let text = object["metadata"]["annotations"][format!("kopf.zalando.org/{id}")].as_str()?;
    serde_json::from_str(text).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_handlers_run_each_with_its_own_retries_and_the_parent_waits_for_them() {
    let calls = Calls::default();
    let recorded = calls.clone();
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        move |invocation| {
            let calls = recorded.clone();
            async move {
                calls.record(json!("parent"));
                for item in ["a", "b"] {
                    let calls = calls.clone();
                    invocation
                        .subhandlers()
                        .add(format!("item-{item}"), move |child| {
                            let calls = calls.clone();
                            async move {
                                calls.record(json!({"child": item, "retry": child.retry()}));
                                if item == "b" && child.retry() == 0 {
                                    // Long enough for the test to see the progress on the object.
                                    return Err(TemporaryError::new("not yet")
                                        .delay(Duration::from_secs(1))
                                        .into());
                                }
                                Ok(Some(json!({"item": item})))
                            }
                        });
                }
                Ok(Some(json!({"message": "all items done"})))
            }
        },
    ));
    let server = server_with_crd().await;
    let harness = OperatorHarness::start_on(
        server,
        kopf::operator::Operator::new(registry).settings(test_settings()),
    )
    .await;
    let client = harness.client();
    create(&client, "one", json!({})).await;

    let pending = wait_object(&harness, "one", "the parent's subrefs", |o| {
        progress(o, "create_fn").is_some_and(|p| p["subrefs"].is_array())
    })
    .await;
    assert_eq!(
        progress(&pending, "create_fn").unwrap()["subrefs"],
        json!(["create_fn/item-a", "create_fn/item-b"])
    );
    // The result is stored first, the records' purge right after it (a second write).
    let purged = |o: &Value| {
        o["metadata"]["annotations"].as_object().is_none_or(|a| {
            !a.keys()
                .any(|k| k.starts_with("kopf.zalando.org/create_fn"))
        })
    };
    let done = wait_object(
        &harness,
        "one",
        "the parent's result, and the records purged",
        |o| o["status"]["create_fn"]["message"] == "all items done" && purged(o),
    )
    .await;
    assert_eq!(done["status"]["create_fn/item-a"], json!({"item": "a"}));
    assert_eq!(done["status"]["create_fn/item-b"], json!({"item": "b"}));
    let annotations = done["metadata"]["annotations"].as_object().unwrap();
    assert!(
        !annotations
            .keys()
            .any(|k| k.starts_with("kopf.zalando.org/create_fn")),
        "every progress record is purged once all finished: {annotations:?}"
    );
    let children: Vec<Value> = calls.all().into_iter().filter(|c| c.is_object()).collect();
    assert_eq!(
        children,
        [
            json!({"child": "a", "retry": 0}),
            json!({"child": "b", "retry": 0}),
            json!({"child": "b", "retry": 1}),
        ],
        "each child runs until it succeeds, and never again after"
    );
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_sub_handler_leaves_its_parent_succeeded_once_the_others_finished_as_in_kopf() {
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        |invocation| async move {
            invocation.subhandlers().register(
                SubHandler::new("flaky", |_| async {
                    Err(kopf::Error::msg("always broken"))
                })
                .retries(2)
                .backoff(Duration::from_millis(50)),
            );
            invocation
                .subhandlers()
                .add("fine", |_| async { Ok(Some(json!("ok"))) });
            Ok(None)
        },
    ));
    let server = server_with_crd().await;
    let harness = OperatorHarness::start_on(
        server,
        kopf::operator::Operator::new(registry).settings(test_settings()),
    )
    .await;
    let client = harness.client();
    lines_of("subfail"); // Logs are captured from now on.
    create(&client, "subfail", json!({})).await;
    wait_line("subfail", "Handler 'create_fn' succeeded.").await;
    let done = wait_object(
        &harness,
        "subfail",
        "the diff-base after all finished",
        |o| o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"].is_string(),
    )
    .await;
    assert_eq!(done["status"]["create_fn/fine"], json!("ok"));
    // The outcomes the operator kept: the parent's is its sub-handlers' end (the parent is
    // called again in each cycle while they are unfinished): done, as Kopf's `execute()` ends
    // once all have finished, whether or not some failed.
    let parent = harness.outcome("subfail", "create_fn");
    assert!(
        matches!(
            &parent,
            Some(kopf::outcomes::HandlerOutcome::Succeeded { .. })
        ),
        "{parent:?}"
    );
    assert!(
        !lines_of("subfail")
            .iter()
            .any(|line| line.contains("Handler 'create_fn' failed")),
        "the parent is not failed"
    );
    // Out of retries: the framework's own error says so (Kopf's `HandlerRetriesError`).
    let retries_error = kopf::HandlerRetriesError::new(
        "Handler 'create_fn/flaky' failed with an exception and will stop now \
         (it would exceed 2 retries on the next attempt): always broken",
        2,
    );
    assert_eq!(
        harness.outcome("subfail", "create_fn/flaky"),
        Some(kopf::outcomes::HandlerOutcome::Failed {
            message: "always broken".into(),
            retries: 2,
            error: kopf::outcomes::Failure::Retries(retries_error),
        })
    );
    assert_eq!(
        harness.outcome("subfail", "create_fn/fine"),
        Some(kopf::outcomes::HandlerOutcome::Succeeded { retries: 1 })
    );
    harness.stop().await.expect("a clean stop");
}

/// Sub-handlers' filters, as Kopf's `@kopf.subhandler(labels=, when=, field=, value=, old=,
/// new=)`: those that do not match are neither run nor waited for; one with a field sees that
/// field of what its parent sees, and under an update handler runs only when it changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_handlers_run_only_when_their_filters_match() {
    use kopf::filters::{MetaFilter, ValueFilter};

    let calls = Calls::default();
    let recorded = calls.clone();
    let registry = Registry::new().with(ChangeHandler::on_update(
        examples(),
        "update_fn",
        move |invocation| {
            let calls = recorded.clone();
            async move {
                let sub = |name: &'static str| {
                    let calls = calls.clone();
                    SubHandler::new(name, move |child| {
                        let calls = calls.clone();
                        async move {
                            let (old, new) = (child.old().cloned(), child.new().cloned());
                            calls.record(json!({"sub": name, "old": old, "new": new}));
                            Ok(None)
                        }
                    })
                };
                let subhandlers = invocation.subhandlers();
                subhandlers.register(sub("size").field("spec.size"));
                subhandlers.register(
                    sub("grown")
                        .field("spec.size")
                        .old(ValueFilter::Present)
                        .new_value(ValueFilter::callable(|new| {
                            new.and_then(Value::as_i64) > Some(2)
                        })),
                );
                subhandlers.register(
                    sub("three")
                        .field("spec.size")
                        .value(ValueFilter::Value(json!(3))),
                );
                subhandlers.register(sub("gold").label("tier", "gold".into()));
                subhandlers.register(sub("flagged").when(|child| child.spec()["flag"] == true));
                subhandlers.register(sub("ownerless").label(
                    "owner",
                    MetaFilter::callable_with_body(|owner, body| {
                        owner.is_none() && body["spec"]["owner"].is_null()
                    }),
                ));
                Ok(None)
            }
        },
    ));
    let server = server_with_crd().await;
    let harness = OperatorHarness::start_on(
        server,
        kopf::operator::Operator::new(registry).settings(test_settings()),
    )
    .await;
    let client = harness.client();
    create(&client, "one", json!({"size": 1})).await;
    crate::support::settle(harness.server()).await;
    crate::support::patch(&client, "one", json!({"spec": {"size": 3}})).await;
    let round = |calls: &Calls| {
        let mut all: Vec<Value> = calls.all();
        all.sort_by_key(ToString::to_string);
        all
    };
    wait_object(&harness, "one", "the first update handled", |o| {
        o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"]
            .as_str()
            .is_some_and(|base| base.contains("\"size\":3"))
    })
    .await;
    assert_eq!(
        round(&calls),
        [
            json!({"sub": "grown", "old": 1, "new": 3}),
            json!({"sub": "ownerless", "old": {"spec": {"size": 1}}, "new": {"spec": {"size": 3}}}),
            json!({"sub": "size", "old": 1, "new": 3}),
            json!({"sub": "three", "old": 1, "new": 3}),
        ],
        "the field's sub-handlers see the field; gold and flagged do not match"
    );
    // The size unchanged: the field's sub-handlers need its change under an update handler.
    let before = calls.all().len();
    crate::support::patch(
        &client,
        "one",
        json!({"metadata": {"labels": {"tier": "gold"}}, "spec": {"flag": true}}),
    )
    .await;
    let all = calls.wait_len(before + 3).await;
    let mut later: Vec<&str> = all[before..]
        .iter()
        .map(|call| call["sub"].as_str().unwrap())
        .collect();
    later.sort_unstable();
    assert_eq!(later, ["flagged", "gold", "ownerless"]);
    crate::support::settle(harness.server()).await;
    assert_eq!(calls.all().len(), before + 3, "nothing else ran");
    harness.stop().await.expect("a clean stop");
}

/// Sub-handlers registered with `kopf::register` from a function the handler calls (Kopf's
/// `kopf.register(fn, id=...)`), async and sync; an event handler, which has none, gets a
/// clear error, and so does a task the handler spawned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_handlers_registered_with_kopf_register_run_as_the_others() {
    fn plan(items: &[&str]) -> Result<(), kopf::registry::NoChangeHandler> {
        for item in items {
            let item = item.to_string();
            kopf::register(SubHandler::new(format!("item-{item}"), move |_child| {
                let item = item.clone();
                async move { Ok(Some(json!({"item": item}))) }
            }))?;
        }
        Ok(())
    }
    let calls = Calls::default();
    let recorded = calls.clone();
    let registry = Registry::new()
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            |_invocation| async move {
                plan(&["a", "b"])?;
                let spawned = tokio::spawn(async { plan(&["c"]).is_err() }).await?;
                Ok(Some(json!({"spawned_refused": spawned})))
            },
        ))
        .with(ChangeHandler::on_create(
            examples(),
            "sync_fn",
            kopf::registry::blocking(|_invocation| {
                plan(&["s"])?;
                Ok(None)
            }),
        ))
        .with(kopf::registry::EventHandler::on_event(
            examples(),
            "watch_fn",
            move |_invocation| {
                let calls = recorded.clone();
                async move {
                    let refused = plan(&["x"]).map_err(|error| error.to_string());
                    calls.record(json!(refused.err()));
                    Ok(None)
                }
            },
        ));
    let server = server_with_crd().await;
    let harness = OperatorHarness::start_on(
        server,
        kopf::operator::Operator::new(registry).settings(test_settings()),
    )
    .await;
    let client = harness.client();
    create(&client, "one", json!({})).await;
    let done = wait_object(&harness, "one", "the sub-handlers' results", |o| {
        o["status"]["create_fn"].is_object() && o["status"]["sync_fn/item-s"].is_object()
    })
    .await;
    assert_eq!(done["status"]["create_fn/item-a"], json!({"item": "a"}));
    assert_eq!(done["status"]["create_fn/item-b"], json!({"item": "b"}));
    assert_eq!(
        done["status"]["create_fn"],
        json!({"spawned_refused": true})
    );
    assert_eq!(done["status"].get("create_fn/item-c"), None);
    let refusals = calls.wait_len(1).await;
    let refusal = refusals[0].as_str().expect("the event handler was refused");
    assert!(refusal.contains("no change handler runs"), "{refusal}");
    harness.stop().await.expect("a clean stop");
}
