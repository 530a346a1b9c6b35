//! Kopf's settings that change what the operator asks of the API server, seen from the
//! server: the selectors sent with lists and watches, the page size, the initial state
//! streamed by a watch instead of listed (on the fake server and on a real one), and the
//! threads of sync handlers sized by a startup handler.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use kopf::operator::Operator;
use kopf::registry::{ActivityHandler, ChangeHandler, Registry};
use kopf_testing::fake_apiserver::LoggedRequest;
use kopf_testing::{OperatorHarness, test_settings, wait};
use serde_json::{Value, json};

use crate::support::{Calls, create, examples, get, patch, server_with_crd};

/// The operator's requests for KopfExamples with this verb.
fn requests(harness: &OperatorHarness, verb: &str) -> Vec<LoggedRequest> {
    harness
        .server()
        .requests()
        .into_iter()
        .filter(|r| r.verb == verb && r.path.ends_with("/kopfexamples"))
        .filter(|r| {
            r.user_agent
                .as_deref()
                .is_some_and(|ua| ua.starts_with("kopf-rs"))
        })
        .collect()
}

/// A query parameter of a logged request, decoded.
fn parameter(request: &LoggedRequest, name: &str) -> Option<String> {
    form_urlencoded::parse(request.query.as_bytes())
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

/// A create handler that records the names it is called for.
fn recording(calls: &Calls) -> Registry {
    let recorder = calls.clone();
    Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        move |inv| {
            recorder.record(json!(inv.name()));
            async { Ok(None) }
        },
    ))
}

fn labelled(name: &str, tier: &str) -> Value {
    json!({
        "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
        "metadata": {"name": name, "labels": {"tier": tier}}, "spec": {},
    })
}

/// Kopf's `settings.watching.label_selectors` and `field_selectors`: every entry that matches
/// the resource is sent with its lists and watches, joined with commas, so the server sends
/// only those objects; handlers never hear of the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_and_field_selectors_of_the_settings_are_sent_to_the_server() {
    let server = server_with_crd().await;
    let client = server.client();
    let collection = crate::support::COLLECTION;
    for (name, tier) in [("gold", "gold"), ("silver", "silver"), ("hidden", "gold")] {
        send(&client, collection, labelled(name, tier)).await;
    }
    let calls = Calls::default();
    let mut settings = test_settings();
    settings.watching.label_selectors = vec![
        (examples(), "tier=gold".into()),
        (
            kopf::resources::Selector::named("kopfexamples"),
            "tier".into(),
        ),
        // Not of this resource: not sent.
        (
            kopf::resources::Selector::new("", "v1", "pods"),
            "app=other".into(),
        ),
    ];
    settings.watching.field_selectors = vec![(examples(), "metadata.name!=hidden".into())];
    let operator = Operator::new(recording(&calls)).settings(settings);
    let harness = OperatorHarness::start_on(server, operator).await;
    calls.wait_len(1).await;
    send(&client, collection, labelled("later", "gold")).await;
    send(&client, collection, labelled("ignored", "bronze")).await;
    calls.wait_len(2).await;
    crate::support::settle(harness.server()).await;
    assert_eq!(calls.all(), [json!("gold"), json!("later")]);

    let lists = requests(&harness, "list");
    let watches = requests(&harness, "watch");
    assert!(!lists.is_empty() && !watches.is_empty());
    for request in lists.iter().chain(&watches) {
        assert_eq!(
            parameter(request, "labelSelector").as_deref(),
            Some("tier,tier=gold"),
            "sorted, as Kopf joins them: {request:?}"
        );
        assert_eq!(
            parameter(request, "fieldSelector").as_deref(),
            Some("metadata.name!=hidden"),
            "{request:?}"
        );
    }
    harness.stop().await.expect("a clean stop");
}

/// Kopf's `settings.watching.chunk_size`: the initial listing asks for pages of that size;
/// `None` lists in one request. Either way a page is at most the budget of objects in flight
/// (`queueing.in_flight_limit`), so that a listing never holds more than it allows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chunk_size_pages_the_listing_and_none_lists_at_once() {
    let default = test_settings().queueing.in_flight_limit;
    for (chunk_size, in_flight_limit, pages, limit) in [
        (Some(2), default, 3, 2),
        (None, default, 1, default),
        (Some(500), 2, 3, 2),
        (None, 2, 3, 2),
    ] {
        let server = server_with_crd().await;
        let client = server.client();
        for name in ["a", "b", "c", "d", "e"] {
            create(&client, name, json!({})).await;
        }
        let calls = Calls::default();
        let mut settings = test_settings();
        settings.watching.chunk_size = chunk_size;
        settings.queueing.in_flight_limit = in_flight_limit;
        let operator = Operator::new(recording(&calls)).settings(settings);
        let harness = OperatorHarness::start_on(server, operator).await;
        calls.wait_len(5).await;
        let lists = requests(&harness, "list");
        let case = format!("{chunk_size:?} within {in_flight_limit}");
        assert_eq!(lists.len(), pages, "{case}: {lists:#?}");
        for list in &lists {
            assert_eq!(
                parameter(list, "limit"),
                Some(limit.to_string()),
                "{case}: {list:?}"
            );
        }
        harness.stop().await.expect("a clean stop");
    }
}

/// A resume handler and a create handler: what the initial state is told as (listed objects
/// get resume handlers, Kopf's `type=None`; changes do not).
fn resuming(calls: &Calls) -> Registry {
    let (resumed, created) = (calls.clone(), calls.clone());
    Registry::new()
        .with(ChangeHandler::on_resume(
            examples(),
            "resume_fn",
            move |inv| {
                resumed.record(json!(["resume", inv.name()]));
                async { Ok(None) }
            },
        ))
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            move |inv| {
                created.record(json!(["create", inv.name()]));
                async { Ok(None) }
            },
        ))
}

/// Kopf's `settings.watching.initial_streaming`: no list request at all; one watch with
/// `sendInitialEvents=true&resourceVersionMatch=NotOlderThan` whose events up to the bookmark
/// annotated `k8s.io/initial-events-end` are the initial state (resume handlers run for the
/// objects handled before, as after a listing), then changes as usual.
async fn initial_streaming_scenario(client: kube::Client, operator: impl Fn(Registry) -> Operator) {
    // A first run handles "old" completely.
    let calls = Calls::default();
    let stop = tokio_util::sync::CancellationToken::new();
    let first = operator(resuming(&calls));
    let ready = first.ready();
    let running = tokio::spawn(first.run(stop.clone()));
    tokio::time::timeout(kopf_testing::DEADLINE, ready.wait())
        .await
        .expect("ready in time");
    create(&client, "old", json!({})).await;
    calls.wait_len(1).await;
    wait("old to be handled", || async {
        get(&client, "old").await.filter(|o| {
            o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"].is_string()
        })
    })
    .await;
    stop.cancel();
    running.await.expect("no panic").expect("a clean stop");

    // The streaming run: "old" is in the initial state (resumed), "new" comes after.
    let calls = Calls::default();
    let stop = tokio_util::sync::CancellationToken::new();
    let second = operator(resuming(&calls));
    let ready = second.ready();
    let running = tokio::spawn(second.run(stop.clone()));
    tokio::time::timeout(kopf_testing::DEADLINE, ready.wait())
        .await
        .expect("ready in time: the initial-events-end bookmark ended the initial state");
    calls.wait_len(1).await;
    create(&client, "new", json!({})).await;
    calls.wait_len(2).await;
    patch(&client, "old", json!({"spec": {"field": 1}})).await;
    create(&client, "newer", json!({})).await;
    calls.wait_len(3).await;
    assert_eq!(
        calls.all(),
        [
            json!(["resume", "old"]),
            json!(["create", "new"]),
            json!(["create", "newer"])
        ],
        "old is resumed once, from the initial state; not resumed again on its change"
    );
    stop.cancel();
    running.await.expect("no panic").expect("a clean stop");
}

fn streaming_settings() -> kopf::Settings {
    let mut settings = test_settings();
    settings.watching.initial_streaming = true;
    settings
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_streaming_watches_instead_of_listing() {
    let server = server_with_crd().await;
    let client = server.client();
    let operator = |registry: Registry| {
        Operator::new(registry)
            .settings(streaming_settings())
            .client(server.client())
    };
    // The first run lists (it streams too: both runs use the same settings).
    initial_streaming_scenario(client, operator).await;
    let requests = server.requests();
    // The test's own requests are gets and writes: every list and watch is the operator's.
    let ours = |r: &&LoggedRequest| r.path.ends_with("/kopfexamples");
    assert!(
        !requests.iter().filter(ours).any(|r| r.verb == "list"),
        "no listing of KopfExamples"
    );
    let streamed: Vec<&LoggedRequest> = requests
        .iter()
        .filter(ours)
        .filter(|r| r.verb == "watch" && r.query.contains("sendInitialEvents=true"))
        // A real server answers `429` with a `Retry-After` while the watch cache of a CRD
        // created a moment ago is not ready for streaming: the operator streams again then.
        .filter(|r| r.code == 200)
        .collect();
    assert_eq!(
        streamed.len(),
        2,
        "one streaming watch per run: {streamed:#?}"
    );
    for request in streamed {
        assert!(
            request.query.contains("resourceVersionMatch=NotOlderThan")
                && request.query.contains("allowWatchBookmarks=true"),
            "{request:?}"
        );
    }
    server.stop().await;
}

/// The same against a real kube-apiserver 1.36, which streams the initial state from its
/// watch cache and ends it with the annotated bookmark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_streaming_works_with_a_real_api_server() {
    let Some(server) = kopf_testing::fake_apiserver::RealApiServer::for_test(
        "initial_streaming_works_with_a_real_api_server",
    )
    .await
    else {
        return;
    };
    let client = server.client().await;
    // Applied and established, so that its collection is served.
    server
        .test_client()
        .await
        .apply(kopf_testing::fixtures::KOPFEXAMPLE_CRD)
        .await;
    let operator = |registry: Registry| {
        Operator::new(registry)
            .settings(streaming_settings())
            .client(client.clone())
    };
    initial_streaming_scenario(client.clone(), operator).await;
    drop(client);
    server.stop().await;
}

/// Posts an object as JSON (the answer is not needed).
async fn send(client: &kube::Client, path: &str, body: Value) {
    let request = http::Request::post(path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).expect("JSON"))
        .expect("a request");
    client.request_text(request).await.expect("posted");
}

/// Kopf's `settings.execution.max_workers`, set by a startup handler: the operator's threads
/// for sync handlers follow it. Two sync handlers that each wait for the other to run at the
/// same time finish only if two threads run at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_workers_set_by_a_startup_handler_takes_effect() {
    let together = Arc::new((Mutex::new(0usize), Condvar::new()));
    let meeting = together.clone();
    let sync_fn = kopf::registry::blocking(move |inv| {
        let (count, met) = &*meeting;
        let mut arrived = count.lock().unwrap();
        *arrived += 1;
        met.notify_all();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while *arrived < 2 && !inv.stopped().is_cancelled() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(kopf::PermanentError::new("alone: one thread at a time").into());
            }
            arrived = met
                .wait_timeout(arrived, left.min(Duration::from_millis(50)))
                .unwrap()
                .0;
        }
        Ok(Some(json!("met")))
    });
    let registry = Registry::new()
        .with(ActivityHandler::on_startup("configure", |activity| {
            activity.settings().execution.max_workers = Some(2);
            async { Ok(None) }
        }))
        .with(ChangeHandler::on_create(examples(), "sync_fn", sync_fn));
    let mut settings = test_settings();
    settings.execution.max_workers = Some(1);
    let server = server_with_crd().await;
    let client = server.client();
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(settings)).await;
    create(&client, "one", json!({})).await;
    create(&client, "two", json!({})).await;
    for name in ["one", "two"] {
        let outcome = harness.wait_for_outcome(name, "sync_fn").await;
        assert!(
            matches!(outcome, kopf::outcomes::HandlerOutcome::Succeeded { .. }),
            "{name}: {outcome:?}"
        );
    }
    harness.stop().await.expect("a clean stop");
}

/// `max_workers` of zero cannot run anything: the operator says so instead of starting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_workers_of_zero_is_refused_with_a_clear_error() {
    let server = server_with_crd().await;
    let mut settings = test_settings();
    settings.execution.max_workers = Some(0);
    let operator = Operator::new(Registry::new())
        .settings(settings)
        .client(server.client());
    let error = operator
        .run(tokio_util::sync::CancellationToken::new())
        .await
        .expect_err("refused");
    assert!(
        error.to_string().contains("settings.execution.max_workers"),
        "{error}"
    );
    server.stop().await;
}

/// Kopf's defaults, as the installed Kopf 1.45.2 prints them.
const KOPF_DEFAULTS: &str = r#"
import json, logging, kopf
s = kopf.OperatorSettings()
print(json.dumps({
    "posting.enabled": s.posting.enabled,
    "posting.loggers": s.posting.loggers,
    "posting.level": logging.getLevelName(s.posting.level),
    "posting.default_backoffs": list(s.posting.default_backoffs),
    "posting.logging_backoffs": list(s.posting.logging_backoffs),
    "posting.worker_limit": s.posting.worker_limit,
    "posting.idle_timeout": s.posting.idle_timeout,
    "posting.reporting_component": s.posting.reporting_component,
    "posting.reporting_instance": s.posting.reporting_instance,
    "posting.event_name_prefix": s.posting.event_name_prefix,
    "peering.name": s.peering.name,
    "peering.stealth": s.peering.stealth,
    "peering.priority": s.peering.priority,
    "peering.lifetime": s.peering.lifetime,
    "peering.mandatory": s.peering.mandatory,
    "peering.standalone": s.peering.standalone,
    "watching.server_timeout": s.watching.server_timeout,
    "watching.client_timeout": s.watching.client_timeout,
    "watching.connect_timeout": s.watching.connect_timeout,
    "watching.reconnect_backoff": s.watching.reconnect_backoff,
    "watching.inactivity_timeout": s.watching.inactivity_timeout,
    "watching.chunk_size": s.watching.chunk_size,
    "watching.initial_streaming": s.watching.initial_streaming,
    "watching.label_selectors": len(s.watching.label_selectors),
    "watching.field_selectors": len(s.watching.field_selectors),
    "watching.shard_selectors": len(s.watching.shard_selectors),
    "queueing.worker_limit": s.queueing.worker_limit,
    "queueing.idle_timeout": s.queueing.idle_timeout,
    "queueing.error_delays": list(s.queueing.error_delays),
    "scanning.disabled": s.scanning.disabled,
    "admission.server": s.admission.server,
    "admission.managed": s.admission.managed,
    "execution.default_backoff": s.execution.default_backoff,
    "execution.max_workers": s.execution.max_workers,
    "background.cancellation_polling": s.background.cancellation_polling,
    "background.instant_exit_timeout": s.background.instant_exit_timeout,
    "background.instant_exit_zero_time_cycles": s.background.instant_exit_zero_time_cycles,
    "networking.request_timeout": s.networking.request_timeout,
    "networking.connect_timeout": s.networking.connect_timeout,
    "networking.error_backoffs": list(s.networking.error_backoffs),
    "networking.enforce_retry_after": s.networking.enforce_retry_after,
    "networking.trust_env": s.networking.trust_env,
    "persistence.finalizer": s.persistence.finalizer,
    "persistence.consistency_timeout": s.persistence.consistency_timeout,
}))
"#;

/// kopf-rs' defaults of Kopf's settings, in the shape of [`KOPF_DEFAULTS`]'s output.
#[allow(deprecated, reason = "Kopf's background settings exist for ports only")]
fn our_defaults() -> serde_json::Map<String, Value> {
    let s = kopf::Settings::default();
    let secs = |d: Duration| json!(d.as_secs_f64());
    let maybe = |d: Option<Duration>| d.map_or(Value::Null, |d| json!(d.as_secs_f64()));
    let all = |ds: &[Duration]| json!(ds.iter().map(|d| d.as_secs_f64()).collect::<Vec<_>>());
    let mut defaults = serde_json::Map::new();
    let mut put = |key: &str, value: Value| {
        defaults.insert(key.to_string(), value);
    };
    put("posting.enabled", json!(s.posting.enabled));
    put("posting.loggers", json!(s.posting.loggers));
    put("posting.level", json!(s.posting.level.to_string()));
    put(
        "posting.default_backoffs",
        json!(all(&s.posting.default_backoffs)),
    );
    put(
        "posting.logging_backoffs",
        json!(all(&s.posting.logging_backoffs)),
    );
    put("posting.worker_limit", json!(s.posting.worker_limit));
    put("posting.idle_timeout", json!(secs(s.posting.idle_timeout)));
    put(
        "posting.reporting_component",
        json!(s.posting.reporting_component),
    );
    put(
        "posting.reporting_instance",
        json!(s.posting.reporting_instance),
    );
    put(
        "posting.event_name_prefix",
        json!(s.posting.event_name_prefix),
    );
    put("peering.name", json!(s.peering.name));
    put("peering.stealth", json!(s.peering.stealth));
    put("peering.priority", json!(s.peering.priority));
    put("peering.lifetime", json!(secs(s.peering.lifetime)));
    put("peering.mandatory", json!(s.peering.mandatory));
    put("peering.standalone", json!(s.peering.standalone));
    put(
        "watching.server_timeout",
        json!(maybe(s.watching.server_timeout)),
    );
    put(
        "watching.client_timeout",
        json!(maybe(s.watching.client_timeout)),
    );
    put(
        "watching.connect_timeout",
        json!(maybe(s.watching.connect_timeout)),
    );
    put(
        "watching.reconnect_backoff",
        json!(secs(s.watching.reconnect_backoff)),
    );
    put(
        "watching.inactivity_timeout",
        json!(secs(s.watching.inactivity_timeout)),
    );
    put("watching.chunk_size", json!(s.watching.chunk_size));
    put(
        "watching.initial_streaming",
        json!(s.watching.initial_streaming),
    );
    put(
        "watching.label_selectors",
        json!(s.watching.label_selectors.len()),
    );
    put(
        "watching.field_selectors",
        json!(s.watching.field_selectors.len()),
    );
    put(
        "watching.shard_selectors",
        json!(s.watching.shard_selectors.len()),
    );
    put("queueing.worker_limit", json!(s.queueing.worker_limit));
    put(
        "queueing.idle_timeout",
        json!(secs(s.queueing.idle_timeout)),
    );
    put(
        "queueing.error_delays",
        json!(all(&s.queueing.error_delays)),
    );
    put("scanning.disabled", json!(s.scanning.disabled));
    put(
        "admission.server",
        json!(s.admission.server.as_ref().map(|_| "a server")),
    );
    put("admission.managed", json!(s.admission.managed));
    put(
        "execution.default_backoff",
        json!(secs(s.execution.default_backoff)),
    );
    put("execution.max_workers", json!(s.execution.max_workers));
    put(
        "background.cancellation_polling",
        json!(secs(s.background.cancellation_polling)),
    );
    put(
        "background.instant_exit_timeout",
        json!(maybe(s.background.instant_exit_timeout)),
    );
    put(
        "background.instant_exit_zero_time_cycles",
        json!(s.background.instant_exit_zero_time_cycles),
    );
    put(
        "networking.request_timeout",
        json!(maybe(s.networking.request_timeout)),
    );
    put(
        "networking.connect_timeout",
        json!(maybe(s.networking.connect_timeout)),
    );
    put(
        "networking.error_backoffs",
        json!(all(&s.networking.error_backoffs)),
    );
    put(
        "networking.enforce_retry_after",
        json!(s.networking.enforce_retry_after),
    );
    put("networking.trust_env", json!(s.networking.trust_env));
    put("persistence.finalizer", json!(s.persistence.finalizer));
    put(
        "persistence.consistency_timeout",
        json!(secs(s.persistence.consistency_timeout)),
    );
    defaults
}

/// Where kopf-rs' default differs from Kopf's on purpose (the guide's configuration chapter
/// says why): nothing else may.
const DIFFERENT_ON_PURPOSE: [(&str, &str); 1] = [(
    "watching.chunk_size",
    "kopf-rs pages its listings by 500 (Kopf lists in one request) so that a huge listing is never all in memory",
)];

/// Every default of Kopf's settings that kopf-rs has, compared with what the installed Kopf
/// 1.45.2 prints (numbers as seconds; Kopf's ints and floats compare as numbers).
#[tokio::test]
async fn the_defaults_of_kopfs_settings_are_kopfs() {
    let test = "the_defaults_of_kopfs_settings_are_kopfs";
    let Some(python) = crate::interop::python(test).await else {
        return;
    };
    let output = tokio::process::Command::new(python)
        .arg("-c")
        .arg(KOPF_DEFAULTS)
        .output()
        .await
        .expect("python runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let kopfs: serde_json::Map<String, Value> =
        serde_json::from_slice(&output.stdout).expect("Kopf's defaults as JSON");
    let ours = our_defaults();
    assert_eq!(
        kopfs.keys().collect::<Vec<_>>(),
        ours.keys().collect::<Vec<_>>(),
        "the same settings on both sides"
    );
    let number = |value: &Value| value.as_f64();
    let mut differences = Vec::new();
    for (key, kopf) in &kopfs {
        let ours = &ours[key];
        let same = match (kopf, ours) {
            (Value::Array(a), Value::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(a, b)| number(a) == number(b))
            }
            (Value::Number(_), Value::Number(_)) => number(kopf) == number(ours),
            _ => kopf == ours,
        };
        let on_purpose = DIFFERENT_ON_PURPOSE.iter().any(|(k, _)| k == key);
        if same == on_purpose {
            differences.push(format!(
                "{key}: Kopf {kopf}, kopf-rs {ours} (on purpose: {on_purpose})"
            ));
        }
    }
    assert!(differences.is_empty(), "{differences:#?}");
}
