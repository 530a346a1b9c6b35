//! Sub-handlers run in place (`kopf::execute`, Kopf's `await kopf.execute(...)`): within the
//! parent's call, each with its own progress record (`parent/child`); the parent is retried
//! while some are unfinished, and those that finished are not called again.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kopf::TemporaryError;
use kopf::registry::{ChangeHandler, EventHandler, Registry, SubHandler};
use kopf::settings::Lifecycle;
use kopf_testing::{OperatorHarness, test_settings};
use serde_json::{Value, json};

use crate::logs::{lines_of, wait_line};
use crate::support::{Calls, create, examples, server_with_crd, wait_object};

/// The progress record of handler `id` on the object, as Kopf keeps it in an annotation.
fn progress(object: &Value, key: &str) -> Option<Value> {
    let text = object["metadata"]["annotations"][format!("kopf.zalando.org/{key}")].as_str()?;
    serde_json::from_str(text).ok()
}

/// An operator with these handlers, on a fresh server with the examples' CRD.
async fn start(registry: Registry) -> OperatorHarness {
    let operator = kopf::operator::Operator::new(registry).settings(test_settings());
    OperatorHarness::start_on(server_with_crd().await, operator).await
}

/// A sub-handler that records its calls and fails temporarily on the retries in `failing`.
fn child(calls: &Calls, id: &'static str, failing: &'static [u32]) -> SubHandler {
    let calls = calls.clone();
    SubHandler::new(id, move |child| {
        let calls = calls.clone();
        async move {
            calls.record(json!({"child": id, "retry": child.retry()}));
            if failing.contains(&child.retry()) {
                // Long enough for the test to see the progress on the object.
                return Err(TemporaryError::new("not yet")
                    .delay(Duration::from_secs(1))
                    .into());
            }
            Ok(Some(json!({"item": id})))
        }
    })
}

/// How a parent runs its sub-handlers in place.
#[derive(Debug, Clone, Copy, PartialEq)]
enum InPlace {
    /// Those it gives: `kopf::execute(handlers)`, Kopf's `kopf.execute(fns=...)`.
    Given,
    /// Those it registered: `subhandlers.execute()`, Kopf's `kopf.execute()`; then once more,
    /// which runs none.
    Registered,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executed_sub_handlers_run_in_place_and_the_parent_is_retried_until_they_finish() {
    retried_until_they_finish("inplace", InPlace::Given).await;
}

/// The same with the sub-handlers registered so far: in place, before the handler's code
/// after the call; a second call in the same handler's call runs none, nor does the run after
/// the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_sub_handlers_run_in_place_once_per_call() {
    retried_until_they_finish("registered", InPlace::Registered).await;
}

/// Two sub-handlers run in place, one failing once: the parent is retried until both have
/// finished, without calling the finished one again, and goes on after.
async fn retried_until_they_finish(name: &str, form: InPlace) {
    let calls = Calls::default();
    let recorded = calls.clone();
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        move |invocation| {
            let calls = recorded.clone();
            async move {
                let retry = invocation.retry();
                calls.record(json!({"parent": "before", "retry": retry}));
                let children = [child(&calls, "a", &[]), child(&calls, "b", &[0])];
                match form {
                    InPlace::Given => kopf::execute(children).await?,
                    InPlace::Registered => {
                        let subhandlers = invocation.subhandlers();
                        children.into_iter().for_each(|c| subhandlers.register(c));
                        subhandlers.execute().await?;
                    }
                }
                calls.record(json!({"parent": "after", "retry": retry}));
                if form == InPlace::Registered {
                    let again = invocation.subhandlers().execute().await;
                    calls.record(json!({"parent": "again", "ok": again.is_ok()}));
                }
                Ok(Some(json!({"message": "all items done"})))
            }
        },
    ));
    let harness = start(registry).await;
    create(&harness.client(), name, json!({})).await;

    // While `b` waits for its retry: the records as Kopf writes them.
    let pending = wait_object(&harness, name, "b's retry recorded", |o| {
        progress(o, "create_fn.b").is_some_and(|b| b["retries"] == 1)
    })
    .await;
    let parent = progress(&pending, "create_fn").expect("the parent's record");
    assert_eq!(parent["subrefs"], json!(["create_fn/a", "create_fn/b"]));
    assert_eq!(parent["success"], false);
    assert_eq!(parent["failure"], false);
    assert_eq!(parent["purpose"], "create");
    let a = progress(&pending, "create_fn.a").expect("a's record");
    assert_eq!((&a["success"], &a["retries"]), (&json!(true), &json!(1)));
    assert!(a["stopped"].is_string(), "{a}");
    let b = progress(&pending, "create_fn.b").expect("b's record");
    assert_eq!(
        (&b["success"], &b["failure"], &b["message"], &b["purpose"]),
        (
            &json!(false),
            &json!(false),
            &json!("not yet"),
            &json!("create")
        )
    );
    assert!(b["delayed"].is_string() && b["started"].is_string(), "{b}");
    assert_eq!(pending["status"]["create_fn/a"], json!({"item": "a"}));

    let done = wait_object(&harness, name, "the result, records purged", |o| {
        o["status"]["create_fn"]["message"] == "all items done"
            && o["metadata"]["annotations"].as_object().is_some_and(|a| {
                !a.keys()
                    .any(|k| k.starts_with("kopf.zalando.org/create_fn"))
            })
    })
    .await;
    assert_eq!(done["status"]["create_fn/b"], json!({"item": "b"}));
    crate::support::settle(harness.server()).await;
    let mut expected = vec![
        // Kopf's default lifecycle (asap): one sub-handler per call.
        json!({"parent": "before", "retry": 0}),
        json!({"child": "a", "retry": 0}),
        json!({"parent": "before", "retry": 1}),
        json!({"child": "b", "retry": 0}),
        json!({"parent": "before", "retry": 2}),
        json!({"child": "b", "retry": 1}),
        json!({"parent": "after", "retry": 2}),
    ];
    if form == InPlace::Registered {
        expected.push(json!({"parent": "again", "ok": true}));
    }
    assert_eq!(
        calls.all(),
        expected,
        "finished children are not called again, nor after the call; the parent goes on once \
         all finished"
    );
    assert!(matches!(
        harness.outcome(name, "create_fn"),
        Some(kopf::outcomes::HandlerOutcome::Succeeded { .. })
    ));
    assert!(
        !lines_of(name)
            .iter()
            .any(|line| line.contains("Handler 'create_fn' failed")),
        "unfinished sub-handlers are no failure of the parent"
    );
    harness.stop().await.expect("a clean stop");
}

/// A sub-handler that panics, one that fails for good, one with sub-handlers of its own run
/// in place, all in one cycle (the lifecycle given to `execute`): the panic is retried as an
/// error, the permanent failure ends that sub-handler alone (as in Kopf, `execute` returns
/// once all have finished, failed or not), and the operator runs on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panicking_failing_and_nested_sub_handlers_run_in_place() {
    let calls = Calls::default();
    let recorded = calls.clone();
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        move |_invocation| {
            let calls = recorded.clone();
            async move {
                let (panicky, broken, nested) = (calls.clone(), calls.clone(), calls.clone());
                let children = vec![
                    SubHandler::new("panicky", move |child| {
                        let calls = panicky.clone();
                        async move {
                            calls.record(json!({"child": "panicky", "retry": child.retry()}));
                            if child.retry() == 0 {
                                panic!("a bug in the sub-handler");
                            }
                            Ok(None)
                        }
                    })
                    .backoff(Duration::from_millis(50)),
                    SubHandler::new("broken", move |_| {
                        let calls = broken.clone();
                        async move {
                            calls.record(json!({"child": "broken"}));
                            Err(kopf::PermanentError::new("always broken").into())
                        }
                    }),
                    SubHandler::new("nested", move |_| {
                        let calls = nested.clone();
                        async move {
                            calls.record(json!({"child": "nested"}));
                            let grand = child(&calls, "grand", &[]);
                            kopf::execute([grand]).await?;
                            Ok(Some(json!("nested done")))
                        }
                    }),
                ];
                kopf::execute(children)
                    .lifecycle(Lifecycle::AllAtOnce)
                    .await?;
                calls.record(json!({"parent": "after"}));
                Ok(Some(json!({"message": "went on"})))
            }
        },
    ));
    let harness = start(registry).await;
    let client = harness.client();
    lines_of("panicky"); // Logs are captured from now on.
    create(&client, "panicky", json!({})).await;
    wait_line(
        "panicky",
        "Handler 'create_fn/panicky' failed with an exception and will try again in 0.05 seconds: the handler panicked: a bug in the sub-handler",
    )
    .await;
    wait_line(
        "panicky",
        "Handler 'create_fn/broken' failed permanently: always broken",
    )
    .await;
    let done = wait_object(&harness, "panicky", "the parent's result", |o| {
        o["status"]["create_fn"]["message"] == "went on"
    })
    .await;
    assert_eq!(done["status"]["create_fn/nested"], json!("nested done"));
    assert_eq!(
        done["status"]["create_fn/nested/grand"],
        json!({"item": "grand"})
    );
    assert_eq!(
        harness.outcome("panicky", "create_fn/broken"),
        Some(kopf::outcomes::HandlerOutcome::Failed {
            message: "always broken".into(),
            retries: 1,
            error: kopf::outcomes::Failure::Permanent,
        })
    );
    assert_eq!(
        harness.outcome("panicky", "create_fn/panicky"),
        Some(kopf::outcomes::HandlerOutcome::Succeeded { retries: 2 })
    );
    assert!(matches!(
        harness.outcome("panicky", "create_fn"),
        Some(kopf::outcomes::HandlerOutcome::Succeeded { .. })
    ));
    crate::support::settle(harness.server()).await;
    let mut all: Vec<String> = calls.all().iter().map(Value::to_string).collect();
    all.sort();
    assert_eq!(
        all,
        [
            json!({"child": "broken"}).to_string(),
            json!({"child": "grand", "retry": 0}).to_string(),
            json!({"child": "nested"}).to_string(),
            json!({"child": "panicky", "retry": 0}).to_string(),
            json!({"child": "panicky", "retry": 1}).to_string(),
            json!({"parent": "after"}).to_string(),
        ],
        "each sub-handler runs until it finished, never after"
    );
    harness.stop().await.expect("a clean stop");
}

/// Outside of a change handler's call, `execute` (and `subhandlers.execute()`) says where it
/// may be called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_outside_of_a_change_handler_is_a_clear_error() {
    let noop = || SubHandler::new("x", |_| async { Ok(None) });
    let outside = kopf::execute([noop()]).await.expect_err("no handler runs");
    assert!(
        outside.to_string().contains("no change handler runs"),
        "{outside}"
    );
    let made = kopf::registry::SubHandlers::default();
    made.register(noop());
    let registered = made.execute().await.expect_err("no handler's sub-handlers");
    assert!(
        registered.to_string().contains("no change handler runs"),
        "{registered}"
    );

    let calls = Calls::default();
    let (recorded, watched) = (calls.clone(), calls.clone());
    // The create handler's sub-handlers, kept past its call.
    let kept = Arc::new(Mutex::new(None));
    let keeping = kept.clone();
    let registry = Registry::new()
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            move |invocation| {
                let calls = recorded.clone();
                *keeping.lock().unwrap() = Some(invocation.subhandlers().clone());
                async move {
                    let spawned = tokio::spawn(async move {
                        kopf::execute([SubHandler::new("x", |_| async { Ok(None) })])
                            .await
                            .err()
                            .map(|error| error.to_string())
                    })
                    .await?;
                    calls.record(json!({"spawned": spawned}));
                    Ok(None)
                }
            },
        ))
        .with(EventHandler::on_event(
            examples(),
            "watch_fn",
            move |invocation| {
                let calls = watched.clone();
                async move {
                    let refused = kopf::execute([SubHandler::new("x", |_| async { Ok(None) })])
                        .await
                        .err()
                        .map(|error| error.to_string());
                    calls.record(json!({"event": refused}));
                    // An event handler's sub-handlers are no change handler's either.
                    let subhandlers = invocation.subhandlers();
                    subhandlers.register(SubHandler::new("x", |_| async { Ok(None) }));
                    let refused = subhandlers.execute().await.err().map(|e| e.to_string());
                    calls.record(json!({"event": refused}));
                    Ok(None)
                }
            },
        ));
    let harness = start(registry).await;
    create(&harness.client(), "outside", json!({})).await;
    let all = calls
        .wait_until("the three refusals", |all| {
            all.iter().any(|c| c.get("spawned").is_some())
                && all.iter().filter(|c| c.get("event").is_some()).count() >= 2
        })
        .await;
    for call in all {
        let refusal = call["spawned"].as_str().or(call["event"].as_str());
        let refusal = refusal.unwrap_or_else(|| panic!("refused: {call}"));
        assert!(refusal.contains("no change handler runs"), "{refusal}");
    }
    let done = wait_object(&harness, "outside", "the handler's end", |o| {
        o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"].is_string()
    })
    .await;
    assert_eq!(done["status"].get("create_fn/x"), None);
    let late = kept.lock().unwrap().take().expect("the handler was called");
    late.register(noop());
    let ended = late.execute().await.expect_err("the call has ended");
    assert!(
        ended
            .to_string()
            .contains("awaited after the call of handler 'create_fn' had ended"),
        "{ended}"
    );
    // Kept past the operator's stop, they hold nothing of it: the harness checks that the
    // operator's client was let go of (they held it before).
    harness.stop().await.expect("a clean stop");
    drop(late);
}

/// Sub-handlers that all finish within the parent's only call leave no record behind: their
/// records are purged with the parent's, as Kopf's are (the differential suite found one left
/// on the object).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_handlers_finished_in_the_parents_only_call_leave_no_record() {
    let calls = Calls::default();
    let recorded = calls.clone();
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        move |_invocation| {
            let calls = recorded.clone();
            async move {
                kopf::execute([child(&calls, "a", &[])]).await?;
                Ok(None)
            }
        },
    ));
    let harness = start(registry).await;
    create(&harness.client(), "oneshot", json!({})).await;
    let done = wait_object(&harness, "oneshot", "the creation handled", |o| {
        o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"].is_string()
    })
    .await;
    assert_eq!(done["status"]["create_fn/a"], json!({"item": "a"}));
    let annotations = done["metadata"]["annotations"].as_object().unwrap();
    assert!(
        !annotations
            .keys()
            .any(|k| k.starts_with("kopf.zalando.org/create_fn")),
        "no record is left: {annotations:?}"
    );
    assert_eq!(calls.all().len(), 1);
    harness.stop().await.expect("a clean stop");
}

/// A sub-handler registered after the sub-handlers ran in place does not run, as in Kopf
/// (neither by a second call nor after the call), and a warning names it; a sub-handler runs
/// its own registered ones in place too, in the lifecycle the parent gave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_handler_registered_after_the_execution_does_not_run_and_is_warned_about() {
    let calls = Calls::default();
    let recorded = calls.clone();
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        move |invocation| {
            let calls = recorded.clone();
            async move {
                let subhandlers = invocation.subhandlers();
                let nested = calls.clone();
                subhandlers.register(child(&calls, "first", &[]));
                subhandlers.register(SubHandler::new("nested", move |child_call| {
                    let calls = nested.clone();
                    async move {
                        calls.record(json!({"child": "nested"}));
                        let grandchildren = child_call.subhandlers();
                        grandchildren.register(child(&calls, "grand", &[]));
                        grandchildren.execute().await?;
                        calls.record(json!({"child": "nested", "after": "grand"}));
                        Ok(Some(json!("nested done")))
                    }
                }));
                subhandlers
                    .execute()
                    .lifecycle(Lifecycle::AllAtOnce)
                    .await?;
                calls.record(json!({"parent": "after"}));
                subhandlers.register(child(&calls, "late", &[]));
                // As in Kopf, a second call runs none, not even those registered since.
                subhandlers.execute().await?;
                Ok(Some(json!({"message": "went on"})))
            }
        },
    ));
    let harness = start(registry).await;
    lines_of("late"); // Logs are captured from now on.
    create(&harness.client(), "late", json!({})).await;
    wait_line(
        "late",
        "Sub-handlers 'create_fn/late' were registered after handler 'create_fn' ran its sub-handlers in place",
    )
    .await;
    let done = wait_object(&harness, "late", "the parent's result", |o| {
        o["status"]["create_fn"]["message"] == "went on"
    })
    .await;
    assert_eq!(done["status"]["create_fn/first"], json!({"item": "first"}));
    assert_eq!(done["status"]["create_fn/nested"], json!("nested done"));
    assert_eq!(
        done["status"]["create_fn/nested/grand"],
        json!({"item": "grand"})
    );
    assert_eq!(done["status"].get("create_fn/late"), None);
    crate::support::settle(harness.server()).await;
    assert_eq!(
        calls.all(),
        [
            json!({"child": "first", "retry": 0}),
            json!({"child": "nested"}),
            json!({"child": "grand", "retry": 0}),
            json!({"child": "nested", "after": "grand"}),
            json!({"parent": "after"}),
        ],
        "the late one never runs"
    );
    assert!(
        lines_of("late")
            .iter()
            .any(|line| line.contains("Handler 'create_fn' succeeded")),
        "the parent is reported once it ran: {:?}",
        lines_of("late")
    );
    harness.stop().await.expect("a clean stop");
}
