//! Daemons and timers: started per object, stopped on deletion (the finalizer released only
//! after they ended), on filters that stop matching, and on the operator's exit; timers with
//! `idle`; results and patches written to the object.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use kopf::TemporaryError;
use kopf::filters::MetaFilter;
use kopf::operator::Operator;
use kopf::registry::{DaemonHandler, EventHandler, Registry, TimerHandler};
use kopf_testing::{OperatorHarness, test_settings, wait};
use serde_json::json;

use crate::stopping::{Running, alive_tasks, assert_nothing_left};
use crate::support::{
    Calls, create, delete, examples, patch, server_with_crd, settle, wait_gone, wait_object,
};

const FINALIZER: &str = "kopf.zalando.org/KopfFinalizerMarker";

async fn harness(registry: Registry) -> OperatorHarness {
    let server = server_with_crd().await;
    OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await
}

fn reason(invocation: &kopf::Invocation) -> String {
    format!("{:?}", invocation.stop_reason())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_runs_until_its_object_is_deleted_and_holds_the_finalizer_until_it_ended() {
    let calls = Calls::default();
    let recorded = calls.clone();
    let registry = Registry::new().with(
        DaemonHandler::new(examples(), "monitor", move |invocation| {
            let calls = recorded.clone();
            async move {
                calls.record(json!({"started": invocation.name()}));
                invocation.stopped().cancelled().await;
                // Cleanup with `.await`s of its own, within the cancellation backoff.
                tokio::time::sleep(Duration::from_millis(200)).await;
                calls.record(json!({"stopped": reason(&invocation)}));
                Ok(Some(json!("never stored: the object is gone")))
            }
        })
        .cancellation_backoff(Duration::from_secs(30)),
    );
    let harness = harness(registry).await;
    let client = harness.client();

    create(&client, "one", json!({})).await;
    wait_object(&harness, "one", "the finalizer", |o| {
        o["metadata"]["finalizers"] == json!([FINALIZER])
    })
    .await;
    calls.wait_len(1).await;
    delete(&client, "one").await;
    wait_gone(&harness, "one").await;
    assert_eq!(
        calls.all(),
        [
            json!({"started": "one"}),
            json!({"stopped": "Some(ObjectDeleted)"})
        ],
        "the daemon finished its cleanup before the finalizer was released"
    );
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_that_ignores_stopped_is_dropped_after_its_backoff() {
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = dropped.clone();
    let registry = Registry::new().with(
        DaemonHandler::new(examples(), "stubborn", move |_| {
            let guard = SetOnDrop(flag.clone());
            async move {
                let _guard = guard;
                loop {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        })
        .cancellation_backoff(Duration::from_millis(300)),
    );
    let harness = harness(registry).await;
    let client = harness.client();
    create(&client, "one", json!({})).await;
    wait_object(&harness, "one", "the finalizer", |o| {
        o["metadata"]["finalizers"] == json!([FINALIZER])
    })
    .await;
    delete(&client, "one").await;
    wait_gone(&harness, "one").await;
    assert!(dropped.load(Ordering::SeqCst), "the daemon was dropped");
    harness.stop().await.expect("a clean stop");
}

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_daemon_that_ignores_stopped_is_abandoned_after_its_cancellation_timeout() {
    let release = Arc::new(AtomicBool::new(false));
    let released = release.clone();
    let running = Arc::new(AtomicBool::new(false));
    let started = running.clone();
    let registry = Registry::new().with(
        DaemonHandler::new(
            examples(),
            "stuck",
            kopf::registry::blocking(move |_| {
                started.store(true, Ordering::SeqCst);
                while !released.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None)
            }),
        )
        .cancellation_backoff(Duration::from_millis(100))
        .cancellation_timeout(Duration::from_millis(500)),
    );
    let harness = harness(registry).await;
    let client = harness.client();
    create(&client, "one", json!({})).await;
    wait("the sync daemon to start", || async {
        running.load(Ordering::SeqCst).then_some(())
    })
    .await;
    delete(&client, "one").await;
    wait_gone(&harness, "one").await;
    assert!(
        !release.load(Ordering::SeqCst),
        "the object went while the thread still ran: it was abandoned"
    );
    release.store(true, Ordering::SeqCst);
    harness
        .stop()
        .await
        .expect("a clean stop once the thread ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_follow_their_filters_and_one_that_returned_is_not_restarted() {
    let calls = Calls::default();
    let (filtered, once) = (calls.clone(), calls.clone());
    let registry = Registry::new()
        .with(
            DaemonHandler::new(examples(), "filtered", move |invocation| {
                let calls = filtered.clone();
                async move {
                    calls.record(json!({"filtered": "started"}));
                    invocation.stopped().cancelled().await;
                    calls.record(json!({"filtered": reason(&invocation)}));
                    Ok(None)
                }
            })
            .label("watched", MetaFilter::Present)
            .cancellation_backoff(Duration::from_secs(30)),
        )
        .with(DaemonHandler::new(examples(), "once", move |invocation| {
            let calls = once.clone();
            async move {
                calls.record(json!({"once": invocation.retry()}));
                if invocation.retry() == 0 {
                    return Err(TemporaryError::new("first try")
                        .delay(Duration::ZERO)
                        .into());
                }
                Ok(Some(json!({"done": true})))
            }
        }));
    let harness = harness(registry).await;
    let client = harness.client();
    create(&client, "one", json!({})).await;
    wait_object(&harness, "one", "the returning daemon's result", |o| {
        o["status"]["once"]["done"] == true
    })
    .await;
    patch(
        &client,
        "one",
        json!({"metadata": {"labels": {"watched": "yes"}}}),
    )
    .await;
    calls.wait_len(3).await;
    patch(
        &client,
        "one",
        json!({"metadata": {"labels": {"watched": null}}}),
    )
    .await;
    calls.wait_len(4).await;
    patch(
        &client,
        "one",
        json!({"metadata": {"labels": {"watched": "again"}}}),
    )
    .await;
    let all = calls.wait_len(5).await;
    assert_eq!(
        all,
        [
            json!({"once": 0}),
            json!({"once": 1}),
            json!({"filtered": "started"}),
            json!({"filtered": "Some(FiltersMismatch)"}),
            json!({"filtered": "started"}),
        ],
        "retried once after a temporary error, never restarted after returning"
    );
    harness.stop().await.expect("a clean stop");
    assert_eq!(
        calls.all().last(),
        Some(&json!({"filtered": "Some(OperatorExiting)"}))
    );
}

/// A daemon's `timeout` ends it as a permanent failure: it is not started again for that
/// object, and the operator stops without waiting for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_past_its_timeout_is_dropped_and_not_started_again() {
    let calls = Calls::default();
    let recorded = calls.clone();
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = dropped.clone();
    let registry = Registry::new().with(
        DaemonHandler::new(examples(), "limited", move |invocation| {
            let calls = recorded.clone();
            let guard = SetOnDrop(flag.clone());
            async move {
                let _guard = guard;
                calls.record(json!({"started": invocation.retry()}));
                invocation.stopped().cancelled().await;
                calls.record(json!({"stopped": reason(&invocation)}));
                Ok(None)
            }
        })
        .timeout(Duration::from_millis(300))
        .cancellation_backoff(Duration::from_secs(30)),
    );
    let harness = harness(registry).await;
    let client = harness.client();
    create(&client, "one", json!({})).await;
    calls.wait_len(1).await;
    wait("the daemon dropped at its timeout", || async {
        dropped.load(Ordering::SeqCst).then_some(())
    })
    .await;
    // Changes that reconcile the object's daemons: the timed-out one stays ended.
    for seq in 1..=2 {
        patch(&client, "one", json!({"spec": {"seq": seq}})).await;
        settle(harness.server()).await;
    }
    assert_eq!(
        calls.all(),
        [json!({"started": 0})],
        "dropped at its timeout, not told to stop, and not started again"
    );
    harness.stop().await.expect("a clean stop");
    assert_eq!(calls.all().len(), 1, "nothing started at the exit either");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_run_repeatedly_and_store_their_results() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let registry = Registry::new().with(TimerHandler::new(
        examples(),
        "tick",
        Duration::from_millis(100),
        move |_| {
            let runs = counted.clone();
            async move {
                let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
                Ok(Some(json!({"runs": n})))
            }
        },
    ));
    let harness = harness(registry).await;
    let client = harness.client();
    create(&client, "one", json!({})).await;
    wait_object(&harness, "one", "the timer's third result", |o| {
        o["status"]["tick"]["runs"].as_u64() >= Some(3)
    })
    .await;
    delete(&client, "one").await;
    wait_gone(&harness, "one").await;
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_timer_waits_until_the_object_has_not_changed_for_that_long() {
    // Far longer than the changes below take (a few round trips to the server), and than a
    // stall of the machine among them: the timer cannot run before the object stops changing.
    let idle = Duration::from_secs(3);
    let changed = Arc::new(std::sync::Mutex::new(std::time::Instant::now()));
    let (seen, runs) = (Calls::default(), Calls::default());
    let (last_change, observed, recorded) = (changed.clone(), seen.clone(), runs.clone());
    let registry = Registry::new()
        .with(EventHandler::on_event(examples(), "seen", move |inv| {
            let (seen, n) = (observed.clone(), inv.spec()["n"].clone());
            async move {
                seen.record(n);
                Ok(None)
            }
        }))
        .with(
            TimerHandler::new(examples(), "idle", Duration::from_millis(100), move |inv| {
                let (changed, runs, n) = (
                    last_change.clone(),
                    recorded.clone(),
                    inv.spec()["n"].clone(),
                );
                async move {
                    let elapsed = changed.lock().unwrap().elapsed();
                    runs.record(json!({"n": n, "elapsed": elapsed.as_millis() as u64}));
                    Ok(None)
                }
            })
            .idle(idle),
        );
    let harness = harness(registry).await;
    let client = harness.client();
    create(&client, "one", json!({"n": 0})).await;
    // Each change is made once the operator has seen the one before: the changes come one
    // after another over the operator's own handling of them, not over a guessed time.
    for n in 1..=3 {
        seen.wait_until("the operator to see the object's last change", |all| {
            all.contains(&json!(n - 1))
        })
        .await;
        *changed.lock().unwrap() = std::time::Instant::now();
        patch(&client, "one", json!({"spec": {"n": n}})).await;
    }
    let all = runs.wait_len(2).await;
    for (i, run) in all.iter().enumerate() {
        assert_eq!(run["n"], 3, "run {i} came before the last change: {all:?}");
        assert!(
            run["elapsed"].as_u64().unwrap() >= idle.as_millis() as u64,
            "run {i} came sooner than the idle time after the last change: {all:?}"
        );
    }
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_daemons_stop_together_when_the_operator_stops() {
    let alive = Arc::new(AtomicUsize::new(0));
    let counted = alive.clone();
    let tasks_before = alive_tasks();
    let registry = Registry::new().with(
        DaemonHandler::new(examples(), "monitor", move |invocation| {
            let alive = counted.clone();
            async move {
                alive.fetch_add(1, Ordering::SeqCst);
                invocation.stopped().cancelled().await;
                alive.fetch_sub(1, Ordering::SeqCst);
                Ok(None)
            }
        })
        .cancellation_backoff(Duration::from_secs(30)),
    );
    let server = server_with_crd().await;
    let client = server.client();
    for i in 0..100 {
        create(&client, &format!("obj-{i}"), json!({})).await;
    }
    drop(client);
    let mut settings = test_settings();
    settings.process.grace_period = Duration::from_secs(3600);
    let running = Running::ready(
        Operator::new(registry)
            .settings(settings)
            .client(server.client()),
    )
    .await;
    wait("a hundred daemons to run", || async {
        (alive.load(Ordering::SeqCst) == 100).then_some(())
    })
    .await;
    running
        .stop()
        .await
        .expect("every daemon returned on its own, well before the grace period");
    assert_eq!(alive.load(Ordering::SeqCst), 0);
    assert_nothing_left(&server, tasks_before).await;
}

/// The server-side label selector (sent when every handler of a resource filters on the same
/// plain labels) must not hide objects from a daemon or timer that has no such filter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_without_label_filters_sees_objects_that_other_handlers_filter_out() {
    let calls = Calls::default();
    let (created, monitored) = (calls.clone(), calls.clone());
    let registry = Registry::new()
        .with(
            kopf::registry::ChangeHandler::on_create(examples(), "web_only", move |invocation| {
                created.record(json!({"created": invocation.name()}));
                std::future::ready(Ok(None))
            })
            .label("app", "web".into()),
        )
        .with(DaemonHandler::new(
            examples(),
            "monitor",
            move |invocation| {
                let calls = monitored.clone();
                async move {
                    calls.record(json!({"monitored": invocation.name()}));
                    invocation.stopped().cancelled().await;
                    Ok(None)
                }
            },
        ));
    let harness = harness(registry).await;
    let client = harness.client();
    create(&client, "unlabelled", json!({})).await;
    calls.wait_len(1).await;
    assert_eq!(calls.all(), vec![json!({"monitored": "unlabelled"})]);
    assert!(
        examples_listed_with(&harness)
            .iter()
            .all(|query| !query.contains("labelSelector")),
        "no selector while the daemon has no filter: {:?}",
        examples_listed_with(&harness)
    );
    harness.stop().await.expect("a clean stop");
}

/// When every handler, the daemon too, has the same plain label filter, it is sent to the
/// server as a selector, and the objects without the label are not seen at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_label_filter_on_every_handler_is_sent_as_a_selector() {
    let calls = Calls::default();
    let monitored = calls.clone();
    let registry = Registry::new().with(
        DaemonHandler::new(examples(), "monitor", move |invocation| {
            let calls = monitored.clone();
            async move {
                calls.record(json!({"monitored": invocation.name()}));
                invocation.stopped().cancelled().await;
                Ok(None)
            }
        })
        .label("app", "web".into()),
    );
    let harness = harness(registry).await;
    let client = harness.client();
    create(&client, "unlabelled", json!({})).await;
    create(&client, "web", json!({})).await;
    patch(
        &client,
        "web",
        json!({"metadata": {"labels": {"app": "web"}}}),
    )
    .await;
    calls.wait_len(1).await;
    settle(harness.server()).await;
    assert_eq!(calls.all(), vec![json!({"monitored": "web"})]);
    let queries = examples_listed_with(&harness);
    assert!(
        !queries.is_empty()
            && queries
                .iter()
                .all(|query| query.contains("labelSelector=app%3Dweb")),
        "every list and watch of the examples carries the selector: {queries:?}"
    );
    harness.stop().await.expect("a clean stop");
}

/// The query strings of the lists and watches of the examples.
fn examples_listed_with(harness: &OperatorHarness) -> Vec<String> {
    harness
        .server()
        .requests()
        .into_iter()
        .filter(|r| {
            matches!(r.verb.as_str(), "list" | "watch") && r.path.ends_with("/kopfexamples")
        })
        .map(|r| r.query)
        .collect()
}
