//! Reliability (issue 14): what a handler did is stored or done again, never lost nor done
//! twice, whatever the writes meet (newer versions, errors, rejections); broken filters,
//! odd annotations and relists break nothing.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kopf::Index;
use kopf::filters::{MetaFilter, ValueFilter};
use kopf::operator::Operator;
use kopf::registry::{
    ChangeHandler, DaemonHandler, EventHandler, IndexHandler, Registry, TimerHandler,
};
use kopf_testing::{Fault, OperatorHarness, test_settings, wait};
use serde_json::{Value, json};

use crate::support::{Calls, create, examples, get, lists, patch, server_with_crd, settle};

const LAST_HANDLED: &str = "kopf.zalando.org/last-handled-configuration";

/// Waits until the object satisfies `condition`; returns it.
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

// Defect 3: the handlers' JSON-patch operations.

/// A create handler that appends to `spec.items` with a JSON-patch operation and records its
/// calls; `on_first` runs (awaited) inside its first call.
fn appending<F, Fut>(calls: &Calls, on_first: F) -> Registry
where
    F: Fn(kube::Client) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let calls = calls.clone();
    Registry::new().with(ChangeHandler::on_create(examples(), "append", move |inv| {
        let (calls, on_first) = (calls.clone(), on_first.clone());
        inv.patch()
            .operation(json!({"op": "add", "path": "/spec/items/-", "value": "appended"}));
        let first = calls.all().is_empty();
        calls.record(json!(inv.name()));
        let client = inv.client().clone();
        async move {
            if first {
                on_first(client).await;
            }
            Ok(None)
        }
    }))
}

/// The object's newer version that the guarded JSON patch meets right after the records were
/// stored (another writer changed the object between the two requests): the operations are
/// not lost, and the handler is recorded done only once they are stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_patch_operations_are_not_lost_when_the_object_changes_during_the_write() {
    let calls = Calls::default();
    let registry = appending(&calls, |_| async {});
    let harness = OperatorHarness::start_on(
        server_with_crd().await,
        Operator::new(registry).settings(test_settings()),
    )
    .await;
    let client = harness.client();
    // The operator's next two PATCHes are slow, so that another writer gets in between.
    harness.server().inject(
        Fault::delay(Duration::from_secs(2))
            .verb("patch")
            .resource("kopfexamples.kopf.dev")
            .times(2),
    );
    create(&client, "ops", json!({"items": ["created"]})).await;
    wait_for(&client, "ops", "the creation recorded", |o| {
        o["metadata"]["annotations"][LAST_HANDLED].is_string()
    })
    .await;
    // Another writer: a change that is none of the handler's business.
    patch(
        &client,
        "ops",
        json!({"metadata": {"labels": {"touched": "yes"}}}),
    )
    .await;
    let object = wait_for(&client, "ops", "the operations stored", |o| {
        o["spec"]["items"] == json!(["created", "appended"])
    })
    .await;
    settle(harness.server()).await;
    let object = get(&client, "ops").await.unwrap_or(object);
    assert_eq!(object["spec"]["items"], json!(["created", "appended"]));
    assert_eq!(calls.all(), vec![json!("ops")], "the handler ran once");
    harness.stop().await.expect("a clean stop");
}

/// The handler's operations were made for a version of the object that another writer
/// changed while the handler ran: they are not applied to the newer version, and the handler
/// is not recorded done; it runs again on the newer version, and its operations of that run
/// are stored, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_patch_operations_made_for_an_outdated_version_re_run_the_handler() {
    let calls = Calls::default();
    let registry = appending(&calls, |client| async move {
        patch(
            &client,
            "ops",
            json!({"metadata": {"labels": {"touched": "yes"}}}),
        )
        .await;
    });
    let harness = OperatorHarness::start_on(
        server_with_crd().await,
        Operator::new(registry).settings(test_settings()),
    )
    .await;
    let client = harness.client();
    create(&client, "ops", json!({"items": ["created"]})).await;
    wait_for(&client, "ops", "the creation recorded", |o| {
        o["metadata"]["annotations"][LAST_HANDLED].is_string()
    })
    .await;
    settle(harness.server()).await;
    let object = get(&client, "ops").await.expect("the object exists");
    assert_eq!(object["spec"]["items"], json!(["created", "appended"]));
    assert_eq!(object["metadata"]["labels"]["touched"], "yes");
    assert_eq!(
        calls.all(),
        vec![json!("ops"), json!("ops")],
        "the handler ran again on the newer version"
    );
    harness.stop().await.expect("a clean stop");
}

// Defect 5: filters that panic.

/// A handler that records its id, the object's name and the spec it saw.
fn recording(
    calls: &Calls,
    id: &'static str,
) -> impl Fn(kopf::Invocation) -> kopf::registry::HandlerFuture + Send + Sync + 'static {
    let calls = calls.clone();
    move |inv| {
        calls.record(
            json!({"handler": id, "name": inv.name(), "spec": inv.spec(), "labels": inv.labels()}),
        );
        Box::pin(async { Ok(None) })
    }
}

/// A `when`, a label callable and a value callable that panic for some objects: the panic is
/// logged as an error naming the handler and the object, the handler is skipped for that
/// state, and everything else goes on: the object's other handlers, its later events, and
/// the other objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_filter_skips_its_handler_and_stops_nothing_else() {
    crate::logs::logs();
    let calls = Calls::default();
    let registry = Registry::new()
        .with(ChangeHandler::on_create(
            examples(),
            "sturdy",
            recording(&calls, "sturdy"),
        ))
        .with(
            ChangeHandler::on_create(examples(), "fragile", recording(&calls, "fragile")).when(
                |inv| {
                    assert_ne!(inv.name(), "filter-bad", "the fragile filter broke");
                    true
                },
            ),
        )
        .with(
            ChangeHandler::on_update(examples(), "valued", recording(&calls, "valued"))
                .field("spec.v")
                .new_value(ValueFilter::callable(|v| {
                    assert_ne!(v, Some(&json!("boom")), "the value filter broke");
                    true
                })),
        )
        .with(
            EventHandler::on_event(examples(), "watching", recording(&calls, "watching")).label(
                "kind",
                MetaFilter::callable(|v| {
                    assert_ne!(v, Some("boom"), "the label filter broke");
                    true
                }),
            ),
        );
    let harness = OperatorHarness::start_on(
        server_with_crd().await,
        Operator::new(registry).settings(test_settings()),
    )
    .await;
    let client = harness.client();
    for (name, kind) in [("filter-bad", "boom"), ("filter-good", "fine")] {
        let body = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
            "metadata": {"name": name, "labels": {"kind": kind}}, "spec": {"v": 1}});
        let created = harness
            .request("POST", crate::support::COLLECTION, body)
            .await
            .1;
        assert!(created["metadata"]["uid"].is_string(), "{created}");
    }
    for name in ["filter-bad", "filter-good"] {
        wait_for(&client, name, "the creation handled", |o| {
            o["metadata"]["annotations"][LAST_HANDLED].is_string()
        })
        .await;
    }
    patch(&client, "filter-bad", json!({"spec": {"v": "boom"}})).await;
    patch(&client, "filter-good", json!({"spec": {"v": 2}})).await;
    // The object's later events still reach the handlers whose filters it passes.
    patch(
        &client,
        "filter-bad",
        json!({"metadata": {"labels": {"kind": "fine"}}}),
    )
    .await;
    calls
        .wait_until("the event handler to see filter-bad relabelled", |calls| {
            calls
                .iter()
                .any(|c| c["handler"] == "watching" && c["name"] == "filter-bad")
        })
        .await;
    for (name, v) in [("filter-bad", json!("boom")), ("filter-good", json!(2))] {
        wait_for(&client, name, "the update handled", |o| {
            o["metadata"]["annotations"][LAST_HANDLED]
                .as_str()
                .is_some_and(|l| serde_json::from_str::<Value>(l).unwrap()["spec"]["v"] == v)
        })
        .await;
    }
    settle(harness.server()).await;
    harness.stop().await.expect("a clean stop");

    let calls = calls.all();
    let of = |handler: &str, name: &str| {
        calls
            .iter()
            .filter(|c| c["handler"] == handler && c["name"] == name)
            .count()
    };
    assert_eq!(of("sturdy", "filter-bad"), 1, "{calls:#?}");
    assert_eq!(of("sturdy", "filter-good"), 1, "{calls:#?}");
    assert_eq!(of("fragile", "filter-bad"), 0, "{calls:#?}");
    assert_eq!(of("fragile", "filter-good"), 1, "{calls:#?}");
    assert_eq!(of("valued", "filter-bad"), 0, "{calls:#?}");
    assert_eq!(of("valued", "filter-good"), 1, "{calls:#?}");
    assert!(of("watching", "filter-good") >= 2, "{calls:#?}");
    assert!(
        calls
            .iter()
            .filter(|c| c["handler"] == "watching" && c["name"] == "filter-bad")
            .all(|c| c["labels"]["kind"] == "fine"),
        "{calls:#?}"
    );
    for (handler, message) in [
        ("fragile", "the fragile filter broke"),
        ("valued/spec.v", "the value filter broke"),
        ("watching", "the label filter broke"),
    ] {
        let text = format!("The filter of handler '{handler}' panicked on default/filter-bad");
        let lines = crate::logs::lines_of("filter-bad");
        let line = lines
            .iter()
            .find(|l| l.contains(&text))
            .unwrap_or_else(|| panic!("no line with {text:?} in:\n{}", lines.join("\n")));
        assert!(line.contains("ERROR"), "{line}");
        assert!(line.contains(message), "{line}");
    }
}

// Defect 6: odd counts on objects, failed writes of timers.

/// A handler's progress record on the object says it was retried `u32::MAX` times (anything
/// may be written there): the count saturates instead of overflowing, and the handler is
/// handled as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_count_at_its_maximum_saturates() {
    let calls = Calls::default();
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        recording(&calls, "create_fn"),
    ));
    let harness = OperatorHarness::start_on(
        server_with_crd().await,
        Operator::new(registry).settings(test_settings()),
    )
    .await;
    let client = harness.client();
    let record = json!({"started": "2026-03-01T12:34:56.123456+00:00", "purpose": "create",
        "retries": u32::MAX, "success": false, "failure": false});
    let body = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
        "metadata": {"name": "retried-a-lot",
            "annotations": {"kopf.zalando.org/create_fn": record.to_string()}},
        "spec": {"v": 1}});
    let created = harness
        .request("POST", crate::support::COLLECTION, body)
        .await
        .1;
    assert!(created["metadata"]["uid"].is_string(), "{created}");
    let handled = wait_for(&client, "retried-a-lot", "the creation handled", |o| {
        o["metadata"]["annotations"][LAST_HANDLED].is_string()
    })
    .await;
    assert!(
        handled["metadata"]["annotations"]["kopf.zalando.org/create_fn"].is_null(),
        "the finished record is purged: {handled}"
    );
    assert_eq!(calls.all().len(), 1, "{:?}", calls.all());
    harness.stop().await.expect("a clean stop");
}

/// A timer's write fails (the server answers 500 to every try): what the timer patched is
/// not lost, but written with its next tick's patch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timers_failed_write_is_kept_for_its_next_write() {
    let ticks = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let registry = Registry::new().with(TimerHandler::new(
        examples(),
        "ticking",
        Duration::from_millis(300),
        move |inv| {
            let tick = ticks.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            inv.patch()
                .status()
                .insert(format!("tick-{tick}"), json!(tick));
            async { Ok(None) }
        },
    ));
    let server = server_with_crd().await;
    // Every try of the first write of the status (the test settings retry three times).
    server.inject(
        Fault::respond(500)
            .verb("patch")
            .resource("kopfexamples.kopf.dev/status")
            .times(4),
    );
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await;
    let client = harness.client();
    create(&client, "ticking", json!({})).await;
    let object = wait_for(&client, "ticking", "three ticks written", |o| {
        o["status"]["tick-3"].is_number()
    })
    .await;
    assert_eq!(object["status"]["tick-1"], 1, "{object}");
    assert_eq!(object["status"]["tick-2"], 2, "{object}");
    let status_patches = harness
        .server()
        .stats()
        .count("patch", "kopfexamples.kopf.dev/status");
    assert!(status_patches >= 5, "the first write was tried four times");
    harness.stop().await.expect("a clean stop");
}

// Defect 2: failed and rejected writes.

/// A create handler `create_fn` that records the object's name and returns `result`.
fn naming_creations(calls: &Calls, result: Value) -> Registry {
    let calls = calls.clone();
    Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        move |invocation| {
            calls.record(json!(invocation.name()));
            let result = result.clone();
            async move { Ok(Some(result)) }
        },
    ))
}

/// The write that records a handler's success fails (every retry of it): the handler is not
/// run again; the write alone is tried again until it lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_write_is_retried_without_running_the_handler_again() {
    let calls = Calls::default();
    let registry = naming_creations(&calls, json!("created"));
    let server = server_with_crd().await;
    // Every try of the first write of the object (its status goes through).
    server.inject(
        Fault::respond(500)
            .verb("patch")
            .resource("kopfexamples.kopf.dev")
            .times(4),
    );
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await;
    let client = harness.client();
    create(&client, "unwritten", json!({"v": 1})).await;
    let handled = wait_for(&client, "unwritten", "the creation recorded", |o| {
        o["metadata"]["annotations"][LAST_HANDLED].is_string()
    })
    .await;
    assert_eq!(handled["status"]["create_fn"], "created");
    settle(harness.server()).await;
    let object_patches = harness
        .server()
        .stats()
        .count("patch", "kopfexamples.kopf.dev");
    assert!(object_patches >= 5, "the first write was tried four times");
    assert_eq!(
        calls.all(),
        vec![json!("unwritten")],
        "the handler ran once"
    );
    harness.stop().await.expect("a clean stop");
}

/// Kopf #1087: a handler succeeds, but storing the handled spec pushes the annotations past
/// 262,144 bytes, and the server rejects the write with 422. It is reported once, with what
/// to do; nothing runs or is written again in a loop; and the deletion still goes through
/// (the delete handler runs, the finalizer is removed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_rejected_for_good_is_reported_once_and_blocks_no_deletion() {
    crate::logs::logs();
    let calls = Calls::default();
    let registry = Registry::new()
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            recording(&calls, "create_fn"),
        ))
        .with(ChangeHandler::on_delete(
            examples(),
            "delete_fn",
            recording(&calls, "delete_fn"),
        ));
    let harness = OperatorHarness::start_on(
        server_with_crd().await,
        Operator::new(registry).settings(test_settings()),
    )
    .await;
    let client = harness.client();
    let blob = "x".repeat(270_000);
    create(&client, "too-big", json!({"blob": blob})).await;
    calls
        .wait_until("the creation handled", |calls| {
            calls.iter().any(|c| c["handler"] == "create_fn")
        })
        .await;
    crate::logs::wait_line("too-big", "rejected the patch of default/too-big for good").await;
    settle(harness.server()).await;
    let patches_then = harness
        .server()
        .stats()
        .count("patch", "kopfexamples.kopf.dev");
    settle(harness.server()).await;
    assert_eq!(
        harness
            .server()
            .stats()
            .count("patch", "kopfexamples.kopf.dev"),
        patches_then,
        "nothing is written again"
    );

    crate::support::delete(&client, "too-big").await;
    crate::support::wait_gone(&harness, "too-big").await;
    settle(harness.server()).await;
    harness.stop().await.expect("a clean stop");

    let handlers: Vec<Value> = calls.all().iter().map(|c| c["handler"].clone()).collect();
    assert_eq!(handlers, [json!("create_fn"), json!("delete_fn")]);
    let reports: Vec<String> = crate::logs::lines_of("too-big")
        .into_iter()
        .filter(|l| l.contains("for good"))
        .collect();
    assert_eq!(reports.len(), 1, "{reports:#?}");
    assert!(reports[0].contains("ERROR"), "{}", reports[0]);
    assert!(reports[0].contains("422"), "{}", reports[0]);
    assert!(
        reports[0].contains("262,144 bytes") && reports[0].contains("status"),
        "it says what to do: {}",
        reports[0]
    );
}

// Defect 4: relists forget what is gone.

/// Objects deleted while the operator did not watch (a watch gap ending in `410 Gone`) show
/// up only as absent from the new listing: they leave the indexes and the operator's memory
/// as if deleted, and their daemons are stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_forgets_the_objects_deleted_while_unwatched() {
    let calls = Calls::default();
    let index: Arc<Mutex<Option<Index<String, String>>>> = Arc::default();
    let (grabbed, daemon_calls) = (index.clone(), calls.clone());
    let registry = Registry::new()
        .with(IndexHandler::new(examples(), "names", |inv| async move {
            Ok(Some(("all".to_string(), inv.name().to_string())))
        }))
        .with(ChangeHandler::on_create(examples(), "grab", move |inv| {
            if let Ok(names) = inv.index::<String, String>("names") {
                *grabbed.lock().unwrap() = Some(names.clone());
            }
            async { Ok(None) }
        }))
        .with(
            DaemonHandler::new(examples(), "monitor", move |inv| {
                let calls = daemon_calls.clone();
                async move {
                    calls.record(json!({"started": inv.name()}));
                    inv.stopped().cancelled().await;
                    let reason = inv.stop_reason().map(|r| format!("{r:?}"));
                    calls.record(json!({"stopped": inv.name(), "reason": reason}));
                    Ok(None)
                }
            })
            .label("daemon", MetaFilter::Present),
        );
    let harness = OperatorHarness::start_on(
        server_with_crd().await,
        Operator::new(registry).settings(test_settings()),
    )
    .await;
    if harness.fake_only("compacting the watch history") {
        return;
    }
    let client = harness.client();
    let server = harness.server();
    for (name, labels) in [
        ("kept", json!({})),
        ("gone", json!({})),
        ("guarded", json!({"daemon": "yes"})),
    ] {
        let body = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
            "metadata": {"name": name, "labels": labels}, "spec": {}});
        let created = harness
            .request("POST", crate::support::COLLECTION, body)
            .await
            .1;
        assert!(created["metadata"]["uid"].is_string(), "{created}");
    }
    let names = || -> Vec<String> {
        let index = index.lock().unwrap();
        let mut names: Vec<String> = index
            .as_ref()
            .and_then(|index| index.get("all"))
            .map(|store| store.iter().cloned().collect())
            .unwrap_or_default();
        names.sort();
        names
    };
    wait("all three indexed", || async {
        (names() == ["gone", "guarded", "kept"]).then_some(())
    })
    .await;
    calls
        .wait_until("the daemon started", |calls| {
            calls.iter().any(|c| c["started"] == "guarded")
        })
        .await;

    // A watch gap: the reconnection is late, and by then the history is compacted (410).
    let lists_before = lists(server);
    server.inject(
        Fault::delay(Duration::from_millis(500))
            .verb("watch")
            .resource("kopfexamples.kopf.dev")
            .times(1),
    );
    server.close_watches();
    crate::support::delete(&client, "gone").await;
    // Its finalizer taken off by someone else, so that it goes at once.
    patch(
        &client,
        "guarded",
        json!({"metadata": {"finalizers": null}}),
    )
    .await;
    crate::support::delete(&client, "guarded").await;
    server.compact();
    wait("a relisting", || async {
        (lists(server) > lists_before).then_some(())
    })
    .await;

    wait("the deleted objects to leave the index", || async {
        (names() == ["kept"]).then_some(())
    })
    .await;
    let stopped = calls
        .wait_until("the daemon stopped", |calls| {
            calls.iter().any(|c| c["stopped"] == "guarded")
        })
        .await;
    let stopped: Vec<&Value> = stopped
        .iter()
        .filter(|c| c["stopped"].is_string())
        .collect();
    assert_eq!(
        stopped,
        [&json!({"stopped": "guarded", "reason": "ObjectDeleted"})]
    );
    settle(harness.server()).await;
    harness.stop().await.expect("a clean stop");
}

// The faults of the fake server, together.

/// Under writes that land but answer an error or no answer at all, a watch cut mid-stream
/// and lists in a random order, every object is handled, each handler exactly once: a write
/// believed failed is sent again alone (it changes nothing the second time), and a relist
/// finds the objects handled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_committed_failures_and_cut_streams_every_object_is_handled_once() {
    let calls = Calls::default();
    let registry = naming_creations(&calls, json!("done"));
    let server = server_with_crd().await;
    server.seed_faults(7);
    server.inject(Fault::shuffle_list());
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await;
    let server = harness.server();
    // One object's first status write each: a fault left for a later write could meet the
    // retry of a write it already failed, which carries the version that write was made for
    // and is refused (409) as the write landed; then the fault has fired and failed nothing.
    // Whether a retry or another object's first write comes first is timing (a real server
    // answers slower than the fake one, and the retry came first in 3 runs of 8).
    for name in ["object-0", "object-1", "object-2"] {
        server.inject(
            Fault::commit_then_fail(500)
                .verb("patch")
                .resource("kopfexamples.kopf.dev/status")
                .name(name)
                .times(1),
        );
    }
    server.inject(
        Fault::commit_then_reset()
            .verb("patch")
            .resource("kopfexamples.kopf.dev")
            .times(3),
    );
    server.inject(
        Fault::reset_watch_after(5)
            .verb("watch")
            .resource("kopfexamples.kopf.dev")
            .times(1),
    );
    let client = harness.client();
    let names: Vec<String> = (0..20).map(|i| format!("object-{i}")).collect();
    for name in &names {
        create(&client, name, json!({})).await;
    }
    for name in &names {
        wait_for(&client, name, "handled, its result stored", |o| {
            o["status"]["create_fn"] == "done"
                && !o["metadata"]["annotations"][LAST_HANDLED].is_null()
        })
        .await;
    }
    settle(server).await;
    // The faults did fire: writes answered 500 or not at all, after they had landed. A retry
    // of a write that landed, carrying the version it was made for, is refused (409) when the
    // fault meets it again: the fault needs a write that lands.
    let requests = server.requests();
    let answered = |resource: &str, code: u16| {
        requests
            .iter()
            .filter(|r| r.verb == "patch" && r.resource == resource && r.code == code)
            .count()
    };
    assert_eq!(answered("kopfexamples.kopf.dev/status", 500), 3);
    let reset: Vec<u16> = requests
        .iter()
        .filter(|r| r.faults.iter().any(|f| f == "commit_then_reset"))
        .map(|r| r.code)
        .collect();
    assert_eq!(reset.len(), 3, "{reset:?}");
    assert!(reset.contains(&0), "{reset:?}");
    assert!(
        reset.iter().all(|code| [0, 409].contains(code)),
        "{reset:?}"
    );
    let mut handled: Vec<String> = calls
        .all()
        .iter()
        .map(|call| call.as_str().unwrap_or_default().to_string())
        .collect();
    handled.sort();
    let mut expected = names.clone();
    expected.sort();
    assert_eq!(handled, expected, "each object's handler ran exactly once");
    drop(client);
    harness.stop().await.expect("a clean stop");
}

/// An operator with one delete handler (so objects carry its finalizer), recording calls.
async fn deleting(calls: &Calls) -> OperatorHarness {
    let registry = Registry::new().with(ChangeHandler::on_delete(
        examples(),
        "delete_fn",
        recording(calls, "delete_fn"),
    ));
    OperatorHarness::start_on(
        server_with_crd().await,
        Operator::new(registry).settings(test_settings()),
    )
    .await
}

/// Found by the chaos suite: the write that removes the finalizer after the delete handler
/// meets a 409 (or a 500). It is tried again (the handler does not run again), and the
/// object goes: it is not left in deletion forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_finalizer_removal_is_tried_again_until_the_object_goes() {
    for fault in [
        Fault::conflict(),
        Fault::respond(500),
        Fault::commit_then_reset(),
    ] {
        let calls = Calls::default();
        let harness = deleting(&calls).await;
        created_with_finalizer(&harness, "going").await;
        settle(harness.server()).await;
        harness.server().inject(once_on_patches(&fault));
        deleted_once(harness, &calls, "going", &fault).await;
    }
}

/// Found by the chaos suite too: the finalizer's addition meets a 409 (or a 422, a 500, a
/// cut connection) and no event follows it (nothing changed). It is tried again until it
/// lands: the object is not left unhandled until some later change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_finalizer_addition_is_tried_again_without_a_new_event() {
    for fault in [
        Fault::conflict(),
        Fault::respond(422),
        Fault::commit_then_reset(),
    ] {
        let calls = Calls::default();
        let harness = deleting(&calls).await;
        harness.server().inject(once_on_patches(&fault));
        created_with_finalizer(&harness, "coming").await;
        assert_eq!(
            harness.server().stats().faults.values().sum::<u64>(),
            1,
            "{fault:?} fired on the finalizer's addition"
        );
        deleted_once(harness, &calls, "coming", &fault).await;
    }
}

/// `fault` on the next patch of a KopfExample only.
fn once_on_patches(fault: &Fault) -> Fault {
    fault
        .clone()
        .verb("patch")
        .resource("kopfexamples.kopf.dev")
        .times(1)
}

/// Creates `name` and waits until the operator has handled it and added its finalizer.
async fn created_with_finalizer(harness: &OperatorHarness, name: &str) {
    let client = harness.client();
    create(&client, name, json!({})).await;
    wait_for(&client, name, "the finalizer added", |o| {
        o["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
            && o["metadata"]["annotations"][LAST_HANDLED].is_string()
    })
    .await;
}

/// Deletes `name` and checks that it goes, that `fault` fired once in all, and that the
/// deletion handler ran once; then stops the operator.
async fn deleted_once(harness: OperatorHarness, calls: &Calls, name: &str, fault: &Fault) {
    crate::support::delete(&harness.client(), name).await;
    crate::support::wait_gone(&harness, name).await;
    assert_eq!(
        harness.server().stats().faults.values().sum::<u64>(),
        1,
        "{fault:?} fired"
    );
    settle(harness.server()).await;
    let handlers: Vec<Value> = calls.all().iter().map(|c| c["handler"].clone()).collect();
    assert_eq!(
        handlers,
        [json!("delete_fn")],
        "{fault:?}: the handler ran once"
    );
    harness.stop().await.expect("a clean stop");
}

/// When the deletion handlers are done, the finalizer's removal is the one write, even when
/// they returned results: the object is gone with it, and nothing more is sent to it (no
/// write answered 404).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_deletion_is_one_write() {
    let registry = Registry::new().with(ChangeHandler::on_delete(examples(), "delete_fn", |_| {
        Box::pin(async { Ok(Some(json!("cleaned up"))) })
    }));
    let harness = OperatorHarness::start_on(
        server_with_crd().await,
        Operator::new(registry).settings(test_settings()),
    )
    .await;
    let client = harness.client();
    create(&client, "brief", json!({})).await;
    wait_for(&client, "brief", "handled", |o| {
        o["metadata"]["annotations"][LAST_HANDLED].is_string()
    })
    .await;
    settle(harness.server()).await;
    harness.server().reset_requests();
    crate::support::delete(&client, "brief").await;
    crate::support::wait_gone(&harness, "brief").await;
    settle(harness.server()).await;
    let writes: Vec<(String, String, u16)> = harness
        .server()
        .requests()
        .into_iter()
        .filter(|r| r.verb == "patch")
        .map(|r| (r.verb, r.resource, r.code))
        .collect();
    assert_eq!(
        writes,
        [(
            "patch".to_string(),
            "kopfexamples.kopf.dev".to_string(),
            200
        )],
        "one write, the finalizer's removal"
    );
    harness.stop().await.expect("a clean stop");
}
