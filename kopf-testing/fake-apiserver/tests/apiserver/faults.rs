//! Faults the server injects on request, as real clients see them: writes that are committed
//! but answered with an error or not at all, bodies cut in the middle, silent watches,
//! conflicts with a competing writer, lists in a seeded random order, objects re-created
//! under their name, writes held until the test decides, and views that lag behind; and the
//! journal of every change made.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};
use http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kopf_fake_apiserver::{ApiRequest, FakeApiServer, Fault, FaultAction};
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent};
use kube::api::{GetParams, WatchParams};
use serde_json::{Value, json};

use crate::support::{DEADLINE, NOT_ROOT_CA, client_without_retries, send, wait};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

fn configmap(name: &str, data: Value) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": data,
    }))
    .unwrap()
}

fn api_status<T: std::fmt::Debug>(result: kube::Result<T>) -> Box<kube::core::Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The request got no answer at all: the connection dropped (not an error `Status`).
fn assert_no_answer<T: std::fmt::Debug>(result: &kube::Result<T>) {
    match result {
        Err(kube::Error::Api(status)) => panic!("expected no answer at all, got {status:?}"),
        Err(_) => {}
        Ok(value) => panic!("expected no answer at all, got {value:?}"),
    }
}

/// A raw GET: the response with its body still unread.
async fn open(server: &FakeApiServer, path: &str) -> http::Response<hyper::body::Incoming> {
    let request = Request::get(path)
        .header("host", server.addr().to_string())
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    send(server, request).await
}

/// How a body read to its end went: the bytes received, and whether it ended cleanly.
async fn read_to_end(body: &mut hyper::body::Incoming) -> (Vec<u8>, Result<(), hyper::Error>) {
    let mut received = Vec::new();
    let read = async {
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(frame) => {
                    if let Ok(data) = frame.into_data() {
                        received.extend_from_slice(&data);
                    }
                }
                Err(error) => return Err(error),
            }
        }
        Ok(())
    };
    let outcome = tokio::time::timeout(DEADLINE, read)
        .await
        .expect("the body ended in time");
    (received, outcome)
}

/// The events in newline-delimited watch output.
fn events(bytes: &[u8]) -> Vec<Value> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("whole events only"))
        .collect()
}

/// The next event of a kube-rs watch stream, within the deadline.
async fn next_event<S>(stream: &mut S) -> WatchEvent<ConfigMap>
where
    S: futures::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    tokio::time::timeout(DEADLINE, stream.try_next())
        .await
        .expect("an event in time")
        .expect("the watch works")
        .expect("the watch goes on")
}

#[tokio::test]
async fn a_write_can_be_committed_and_answered_with_an_error() {
    let server = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client_without_retries(&server));
    let created = api
        .create(&PostParams::default(), &configmap("cm", json!({"a": "1"})))
        .await
        .unwrap();
    let mut watch = api
        .watch(
            &WatchParams::default(),
            &created.resource_version().unwrap(),
        )
        .await
        .unwrap()
        .boxed();

    server.inject(
        Fault::commit_then_fail(500)
            .verb("patch")
            .resource("configmaps")
            .times(1),
    );
    let status = api_status(
        api.patch(
            "cm",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "2"}})),
        )
        .await,
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (500, "InternalError")
    );
    assert_eq!(
        api.get("cm").await.unwrap().data.unwrap()["a"],
        "2",
        "the patch was committed all the same"
    );
    match next_event(&mut watch).await {
        WatchEvent::Modified(cm) => assert_eq!(cm.data.unwrap()["a"], "2"),
        other => panic!("expected the patch on the watch, got {other:?}"),
    }

    // Over the control API; deletions too.
    let (code, _) = server
        .request(
            "POST",
            "/_fake/faults",
            json!({"verb": "delete", "times": 1, "action": {"commit_then_fail": {"code": 503}}}),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    let status = api_status(api.delete("cm", &DeleteParams::default()).await);
    assert_eq!(status.code, 503);
    match next_event(&mut watch).await {
        WatchEvent::Deleted(cm) => assert_eq!(cm.name_any(), "cm"),
        other => panic!("expected the deletion on the watch, got {other:?}"),
    }
    assert_eq!(api_status(api.get("cm").await).code, 404);

    // A write that fails on its own gets its real answer, and the rule is not spent on reads.
    server.inject(Fault::commit_then_fail(500).times(1));
    assert_eq!(api_status(api.get("cm").await).code, 404);
    let status = api_status(api.delete("cm", &DeleteParams::default()).await);
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
    server.stop().await;
}

#[tokio::test]
async fn a_write_can_be_committed_and_left_without_an_answer() {
    let server = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client_without_retries(&server));
    server.inject(
        Fault::commit_then_reset()
            .verb("create")
            .resource("configmaps")
            .times(1),
    );
    let result = api
        .create(&PostParams::default(), &configmap("cm", json!({"a": "1"})))
        .await;
    assert_no_answer(&result);
    let cm = api.get("cm").await.expect("the creation was committed");
    assert_eq!(cm.data.unwrap()["a"], "1");
    let logged: Vec<(String, u16)> = server
        .requests()
        .iter()
        .map(|r| (r.verb.clone(), r.code))
        .collect();
    assert_eq!(
        logged,
        [("create".to_string(), 0), ("get".to_string(), 200)],
        "the request log says the creation got no answer"
    );

    // Over the control API: a retried creation finds the object there already.
    let (code, _) = server
        .request(
            "POST",
            "/_fake/faults",
            json!({"verb": "create", "times": 1, "action": "commit_then_reset"}),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    let cm2 = configmap("cm2", json!({}));
    assert_no_answer(&api.create(&PostParams::default(), &cm2).await);
    let status = api_status(api.create(&PostParams::default(), &cm2).await);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "AlreadyExists")
    );
    server.stop().await;
}

#[tokio::test]
async fn a_list_can_break_off_in_the_middle_of_its_body() {
    let server = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client_without_retries(&server));
    for name in ["a", "b", "c"] {
        api.create(&PostParams::default(), &configmap(name, json!({"k": name})))
            .await
            .unwrap();
    }
    let whole = open(&server, CONFIGMAPS)
        .await
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes();

    server.inject(Fault::reset_list_after(40).resource("configmaps").times(1));
    let response = open(&server, CONFIGMAPS).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-length"],
        whole.len().to_string(),
        "the headers promise the whole list"
    );
    let (received, outcome) = read_to_end(&mut response.into_body()).await;
    assert!(outcome.is_err(), "the body did not end cleanly");
    assert_eq!(received, whole[..40], "a prefix of the list's JSON arrived");

    // Half of it by default, over the control API, and kube-rs sees an error (not an answer).
    let (code, _) = server
        .request(
            "POST",
            "/_fake/faults",
            json!({"verb": "list", "times": 1, "action": {"reset_mid_body": {}}}),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    assert_no_answer(&api.list(&ListParams::default()).await);
    assert_eq!(
        api.list(&ListParams::default().fields(NOT_ROOT_CA))
            .await
            .unwrap()
            .items
            .len(),
        3
    );
    server.stop().await;
}

#[tokio::test]
async fn a_watch_can_break_off_after_some_events_or_at_once() {
    let server = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    for name in ["a", "b", "c"] {
        api.create(&PostParams::default(), &configmap(name, json!({})))
            .await
            .unwrap();
    }
    let watch = format!("{CONFIGMAPS}?watch=true");

    server.inject(Fault::reset_watch_after(2).times(1));
    let response = open(&server, &watch).await;
    assert_eq!(response.status(), StatusCode::OK);
    let (received, outcome) = read_to_end(&mut response.into_body()).await;
    assert!(outcome.is_err(), "the stream did not end cleanly");
    let cut = events(&received);
    let names: Vec<&str> = cut
        .iter()
        .map(|e| e["object"]["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"], "two events, then the cut");

    // Right after the headers, over the control API.
    let (code, _) = server
        .request(
            "POST",
            "/_fake/faults",
            json!({"verb": "watch", "times": 1, "action": {"reset_mid_body": {"events": 0}}}),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    let response = open(&server, &watch).await;
    assert_eq!(response.status(), StatusCode::OK);
    let (received, outcome) = read_to_end(&mut response.into_body()).await;
    assert!(outcome.is_err(), "the stream did not end cleanly");
    assert!(
        received.is_empty(),
        "{}",
        String::from_utf8_lossy(&received)
    );

    // Compared with a stream that the server ends cleanly.
    server.inject(Fault::close_watch_after(1).verb("watch").times(1));
    let (received, outcome) = read_to_end(&mut open(&server, &watch).await.into_body()).await;
    assert!(outcome.is_ok());
    assert_eq!(events(&received).len(), 1);
    wait("no watch left open", || async {
        (server.stats().open_watches == 0).then_some(())
    })
    .await;
    server.stop().await;
}

#[tokio::test]
async fn a_silent_watch_says_nothing_until_the_client_goes_away() {
    let server = FakeApiServer::builder()
        .bookmark_interval(Duration::from_millis(50))
        .start()
        .await
        .unwrap();
    let query = "?watch=true&allowWatchBookmarks=true&timeoutSeconds=1";
    server.inject(Fault::silent_watch().resource("configmaps").times(1));
    let silent = open(&server, &format!("{CONFIGMAPS}{query}")).await;
    assert_eq!(silent.status(), StatusCode::OK, "the watch was accepted");
    let mut silent = silent.into_body();
    let (received, outcome) = read_to_end(
        &mut open(&server, &format!("{CONFIGMAPS}{query}"))
            .await
            .into_body(),
    )
    .await;
    assert!(outcome.is_ok());
    let kinds: BTreeSet<String> = events(&received)
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect();
    assert!(
        kinds.contains("BOOKMARK"),
        "a healthy watch got bookmarks and ended after its timeout: {kinds:?}"
    );
    Api::<ConfigMap>::default_namespaced(server.client())
        .create(&PostParams::default(), &configmap("cm", json!({})))
        .await
        .unwrap();
    let (received, outcome) = read_to_end(
        &mut open(&server, &format!("{CONFIGMAPS}{query}"))
            .await
            .into_body(),
    )
    .await;
    assert!(outcome.is_ok());
    assert!(events(&received).iter().any(|e| e["type"] == "ADDED"));

    // Meanwhile, the silent one sent nothing, outlived its timeout and is still open.
    assert!(
        futures::FutureExt::now_or_never(silent.frame()).is_none(),
        "the silent watch sent something"
    );
    assert_eq!(server.stats().open_watches, 1);

    // The client gives up (its inactivity timeout); the server lets go.
    drop(silent);
    wait("the silent watch to close", || async {
        (server.stats().open_watches == 0).then_some(())
    })
    .await;

    // Over the control API.
    let (code, _) = server
        .request(
            "POST",
            "/_fake/faults",
            json!({"verb": "watch", "action": "silent_watch"}),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    let response = open(&server, &format!("{CONFIGMAPS}?watch=true")).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(server.stats().open_watches, 1);
    server.stop().await;
}

#[tokio::test]
async fn a_conflict_can_come_with_or_without_a_competing_write() {
    let server = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client_without_retries(&server));
    let created = api
        .create(&PostParams::default(), &configmap("cm", json!({"a": "1"})))
        .await
        .unwrap();

    // A claimed conflict changes nothing: the same write succeeds when retried.
    server.inject(Fault::conflict().verb("update").times(1));
    let mut changed = created.clone();
    changed.data = Some([("a".to_string(), "2".to_string())].into());
    let status = api_status(api.replace("cm", &PostParams::default(), &changed).await);
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(
        status.message.contains("the object has been modified"),
        "{}",
        status.message
    );
    assert_eq!(
        api.get("cm").await.unwrap().resource_version(),
        created.resource_version()
    );
    let stored = api
        .replace("cm", &PostParams::default(), &changed)
        .await
        .expect("the retry succeeds");

    // A competing write: the stale write keeps failing, a fresh one succeeds.
    let mut watch = api
        .watch(&WatchParams::default(), &stored.resource_version().unwrap())
        .await
        .unwrap()
        .boxed();
    server.inject(
        Fault::conflict_after_competing_write()
            .verb("update")
            .times(1),
    );
    let mut stale = stored.clone();
    stale.data = Some([("a".to_string(), "3".to_string())].into());
    let status = api_status(api.replace("cm", &PostParams::default(), &stale).await);
    assert_eq!(status.code, 409);
    match next_event(&mut watch).await {
        WatchEvent::Modified(cm) => assert!(
            cm.annotations()
                .contains_key("fake.kopf.dev/competing-writer"),
            "{cm:?}"
        ),
        other => panic!("expected the competing write on the watch, got {other:?}"),
    }
    let status = api_status(api.replace("cm", &PostParams::default(), &stale).await);
    assert_eq!(
        status.code, 409,
        "the server itself now refuses the stale write"
    );
    let mut fresh = api.get("cm").await.unwrap();
    assert_ne!(fresh.resource_version(), stored.resource_version());
    fresh.data = Some([("a".to_string(), "3".to_string())].into());
    api.replace("cm", &PostParams::default(), &fresh)
        .await
        .expect("a write from a fresh read succeeds");

    // Over the control API, for patches; a missing object is still not found.
    let (code, _) = server
        .request(
            "POST",
            "/_fake/faults",
            json!({"verb": "patch", "times": 2, "action": {"conflict": {"compete": true}}}),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    let merge = Patch::Merge(json!({"data": {"b": "1"}}));
    let status = api_status(api.patch("cm", &PatchParams::default(), &merge).await);
    assert_eq!(status.code, 409);
    let status = api_status(api.patch("missing", &PatchParams::default(), &merge).await);
    assert_eq!(status.code, 404);
    api.patch("cm", &PatchParams::default(), &merge)
        .await
        .expect("the rule is spent");
    server.stop().await;
}

/// The names of the configmaps, as a list through kube-rs gives them.
async fn listed(api: &Api<ConfigMap>, params: &ListParams) -> Vec<String> {
    api.list(&params.clone().fields(NOT_ROOT_CA))
        .await
        .unwrap()
        .items
        .iter()
        .map(|cm| cm.name_any())
        .collect()
}

/// A server with a dozen configmaps whose lists (and watches' initial events) are shuffled.
async fn shuffling_server(seed: u64) -> (FakeApiServer, Api<ConfigMap>, Vec<String>) {
    let server = FakeApiServer::builder()
        .fault_seed(seed)
        .start()
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let names: Vec<String> = (10..22).map(|i| format!("cm-{i}")).collect();
    for name in &names {
        api.create(&PostParams::default(), &configmap(name, json!({})))
            .await
            .unwrap();
    }
    server.inject(Fault::shuffle_list().resource("configmaps"));
    (server, api, names)
}

#[tokio::test]
async fn lists_can_come_in_a_seeded_random_order_that_replays() {
    let (server, api, names) = shuffling_server(7).await;
    let first = listed(&api, &ListParams::default()).await;
    let second = listed(&api, &ListParams::default()).await;
    assert_ne!(first, names, "shuffled");
    assert_ne!(first, second, "each list draws its own order");
    let mut sorted = first.clone();
    sorted.sort();
    assert_eq!(sorted, names, "the same items");

    // Pages are shuffled within themselves: paging still gives every item once.
    let mut paged = Vec::new();
    let mut params = ListParams::default().fields(NOT_ROOT_CA).limit(5);
    loop {
        let page = api.list(&params).await.unwrap();
        paged.extend(page.items.iter().map(|cm| cm.name_any()));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    paged.sort();
    assert_eq!(paged, names);

    // A watch's initial events.
    let response = open(&server, &format!("{CONFIGMAPS}?watch=true")).await;
    let mut body = response.into_body();
    let mut received = Vec::new();
    while events(&received).len() < names.len() {
        let frame = tokio::time::timeout(DEADLINE, body.frame())
            .await
            .expect("events in time")
            .expect("the stream goes on")
            .unwrap();
        received.extend_from_slice(&frame.into_data().unwrap());
    }
    let initial: Vec<String> = events(&received)
        .iter()
        .map(|e| {
            e["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_ne!(initial, names, "shuffled");
    drop(body);
    server.stop().await;

    // The same seed and the same requests: the same orders.
    let (replay, api, _) = shuffling_server(7).await;
    assert_eq!(listed(&api, &ListParams::default()).await, first);
    assert_eq!(listed(&api, &ListParams::default()).await, second);
    replay.stop().await;

    // Over the control API, with the server reseeded there too.
    let (other, api, _) = shuffling_server(1).await;
    let (code, _) = other
        .request("POST", "/_fake/faults/seed?seed=7", json!({}))
        .await;
    assert_eq!(code, StatusCode::OK);
    other.clear_faults();
    let (code, _) = other
        .request(
            "POST",
            "/_fake/faults",
            json!({"resource": "configmaps", "action": "shuffle_list"}),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(listed(&api, &ListParams::default()).await, first);
    other.stop().await;
}

#[tokio::test]
async fn an_object_can_be_recreated_under_its_name_with_a_new_uid() {
    let server = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut held = configmap("cm", json!({"incarnation": "1"}));
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    let old = api.create(&PostParams::default(), &held).await.unwrap();
    let mut watch = api
        .watch(&WatchParams::default(), &old.resource_version().unwrap())
        .await
        .unwrap()
        .boxed();

    let mut body = serde_json::to_value(&old).unwrap();
    body["data"] = json!({"incarnation": "2"});
    body["metadata"]["finalizers"] = json!([]);
    let created = server.recreate(body).expect("the object existed");
    let new_uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    assert_ne!(Some(new_uid.as_str()), old.uid().as_deref());

    match next_event(&mut watch).await {
        WatchEvent::Deleted(cm) => {
            assert_eq!(
                cm.uid(),
                old.uid(),
                "the old incarnation went, finalizers and all"
            )
        }
        other => panic!("expected DELETED first, got {other:?}"),
    }
    match next_event(&mut watch).await {
        WatchEvent::Added(cm) => {
            assert_eq!(cm.uid().as_deref(), Some(new_uid.as_str()));
            assert_eq!(cm.data.unwrap()["incarnation"], "2");
        }
        other => panic!("expected ADDED next, got {other:?}"),
    }
    assert_eq!(
        api.get("cm").await.unwrap().uid().as_deref(),
        Some(new_uid.as_str())
    );

    // Over the control API.
    let (code, again) = server
        .request(
            "POST",
            "/_fake/recreate",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "cm", "namespace": "default"}, "data": {"incarnation": "3"}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{again}");
    assert_ne!(again["metadata"]["uid"].as_str(), Some(new_uid.as_str()));
    assert!(matches!(
        next_event(&mut watch).await,
        WatchEvent::Deleted(_)
    ));
    assert!(matches!(next_event(&mut watch).await, WatchEvent::Added(_)));

    // What cannot be re-created changes nothing and says why.
    let error = server
        .recreate(json!({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "missing", "namespace": "default"}}))
        .unwrap_err();
    assert_eq!(
        (error.code, error.reason.as_str()),
        (404, "NotFound"),
        "{error}"
    );
    let error = server
        .recreate(json!({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "cm", "namespace": "nowhere"}}))
        .unwrap_err();
    assert_eq!(error.code, 404, "{error}");
    let error = server
        .recreate(json!({"apiVersion": "v1", "kind": "Nothing", "metadata": {"name": "cm"}}))
        .unwrap_err();
    assert!(error.message.contains("no resource of kind"), "{error}");
    assert_eq!(
        api.get("cm").await.unwrap().data.unwrap()["incarnation"],
        "3"
    );
    server.stop().await;
}

#[tokio::test]
async fn every_fault_is_available_over_the_control_api_as_from_rust() {
    let server = FakeApiServer::start().await.unwrap();
    let built = [
        Fault::commit_then_fail(500),
        Fault::commit_then_reset(),
        Fault::reset_mid_body(),
        Fault::reset_watch_after(3),
        Fault::reset_list_after(10),
        Fault::silent_watch(),
        Fault::conflict(),
        Fault::conflict_after_competing_write(),
        Fault::shuffle_list(),
        Fault::hold_after_commit().after(2).times(1),
        Fault::hold_before_commit(),
        Fault::stale_view(3),
    ];
    for fault in &built {
        let (code, answer) = server
            .request(
                "POST",
                "/_fake/faults",
                serde_json::to_value(fault).unwrap(),
            )
            .await;
        assert_eq!(code, StatusCode::OK, "{answer}");
    }
    let (_, listed) = server.request("GET", "/_fake/faults", None).await;
    let listed: Vec<Fault> = serde_json::from_value(listed).unwrap();
    assert_eq!(listed, built);
    assert!(matches!(
        listed[7].action,
        FaultAction::Conflict { compete: true }
    ));
    server.stop().await;
}

fn data_of(cm: &ConfigMap) -> String {
    cm.data.as_ref().map(|d| d["v"].clone()).unwrap_or_default()
}

#[tokio::test]
async fn a_write_can_be_held_after_it_was_made_until_the_test_decides() {
    let server = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client_without_retries(&server));
    // The first creation passes; the second is made, and its answer waits.
    server.inject(Fault::hold_after_commit().verb("create").after(1).times(1));
    api.create(
        &PostParams::default(),
        &configmap("first", json!({"v": "1"})),
    )
    .await
    .expect("the first creation is not held");
    let creating = {
        let api = api.clone();
        tokio::spawn(async move {
            api.create(
                &PostParams::default(),
                &configmap("second", json!({"v": "2"})),
            )
            .await
        })
    };
    let held = server
        .wait_held(DEADLINE)
        .await
        .expect("the second creation is held");
    assert_eq!(
        (held.verb.as_str(), held.resource.as_str()),
        ("create", "configmaps")
    );
    assert!(held.committed);
    assert!(held.body.contains("\"second\""), "{}", held.body);
    assert_eq!(
        data_of(&api.get("second").await.expect("made while held")),
        "2"
    );
    assert!(!creating.is_finished(), "the answer waits");
    assert_eq!(server.release_held(), [held]);
    let created = creating.await.unwrap().expect("answered once released");
    assert_eq!(created.name_any(), "second");
    assert!(server.held().is_empty());

    // Cut instead: the write stays made, the client gets no answer.
    server.inject(Fault::hold_after_commit().verb("create").times(1));
    let creating = {
        let api = api.clone();
        tokio::spawn(async move {
            api.create(
                &PostParams::default(),
                &configmap("third", json!({"v": "3"})),
            )
            .await
        })
    };
    server.wait_held(DEADLINE).await.expect("held");
    assert_eq!(server.cut_held().len(), 1);
    assert_no_answer(&creating.await.unwrap());
    api.get("third")
        .await
        .expect("a cut write that was made stays made");
    server.stop().await;
}

#[tokio::test]
async fn a_write_held_before_it_was_made_is_made_only_if_released() {
    let server = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client_without_retries(&server));
    api.create(&PostParams::default(), &configmap("cm", json!({"v": "1"})))
        .await
        .unwrap();
    let patch = |v: &str| {
        let api = api.clone();
        let body = json!({"data": {"v": v}});
        tokio::spawn(async move {
            api.patch("cm", &PatchParams::default(), &Patch::Merge(body))
                .await
        })
    };

    server.inject(Fault::hold_before_commit().verb("patch").times(1));
    let patching = patch("2");
    let held = server.wait_held(DEADLINE).await.expect("held");
    assert!(!held.committed);
    assert_eq!(held.name.as_deref(), Some("cm"));
    assert_eq!(data_of(&api.get("cm").await.unwrap()), "1", "not made yet");
    server.cut_held();
    assert_no_answer(&patching.await.unwrap());
    assert_eq!(data_of(&api.get("cm").await.unwrap()), "1", "never made");

    server.inject(Fault::hold_before_commit().verb("patch").times(1));
    let patching = patch("3");
    server.wait_held(DEADLINE).await.expect("held");
    server.release_held();
    assert_eq!(data_of(&patching.await.unwrap().unwrap()), "3");
    assert_eq!(
        data_of(&api.get("cm").await.unwrap()),
        "3",
        "made once released"
    );

    // Over the control API, as a test in another language would.
    let (code, _) = server
        .request(
            "POST",
            "/_fake/faults",
            json!({"verb": "patch", "times": 1, "action": {"hold": {"commit": false}}}),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    let patching = patch("4");
    server.wait_held(DEADLINE).await.expect("held");
    let (_, listed) = server.request("GET", "/_fake/held", None).await;
    let listed: Vec<kopf_fake_apiserver::HeldWrite> = serde_json::from_value(listed).unwrap();
    assert_eq!(listed.len(), 1);
    let (code, released) = server
        .request("POST", "/_fake/held/release", json!({}))
        .await;
    assert_eq!(
        (code, released.as_array().map(Vec::len)),
        (StatusCode::OK, Some(1))
    );
    assert_eq!(data_of(&patching.await.unwrap().unwrap()), "4");
    server.stop().await;
}

#[tokio::test]
async fn a_lagging_view_serves_the_past_and_a_watch_on_it_then_catches_up() {
    let server = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client_without_retries(&server));
    api.create(&PostParams::default(), &configmap("cm", json!({"v": "1"})))
        .await
        .unwrap();
    for v in ["2", "3"] {
        api.patch(
            "cm",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": v}})),
        )
        .await
        .unwrap();
    }
    let newest = api.get("cm").await.unwrap();
    assert_eq!(data_of(&newest), "3");

    // A consistent read (no resourceVersion) is never stale, as on a real server.
    server.inject(Fault::stale_view(2).verb("get").times(1));
    assert_eq!(data_of(&api.get("cm").await.unwrap()), "3");
    assert_eq!(
        server.stats().faults.get("stale_view"),
        None,
        "it did not fire"
    );
    server.clear_faults();

    // With resourceVersion=0, two changes behind: the object as it was after its creation.
    server.inject(Fault::stale_view(2).verb("get").times(1));
    let stale = api.get_with("cm", &GetParams::any()).await.unwrap();
    assert_eq!(data_of(&stale), "1", "time went backwards");
    assert!(stale.resource_version() < newest.resource_version());

    server.inject(Fault::stale_view(1).verb("list").times(1));
    let list = api
        .list(&ListParams::default().match_any().fields(NOT_ROOT_CA))
        .await
        .unwrap();
    assert_eq!(data_of(&list.items[0]), "2");
    let list_rv: u64 = list.metadata.resource_version.unwrap().parse().unwrap();
    let newest_rv: u64 = newest.resource_version().unwrap().parse().unwrap();
    assert_eq!(list_rv, newest_rv - 1, "the list says how old it is");

    // Further back than the object: it does not exist yet.
    server.inject(Fault::stale_view(3).verb("get").times(1));
    assert_eq!(
        api_status(api.get_with("cm", &GetParams::any()).await).code,
        404
    );

    // A watch from no version on the lagging view: the past first, then every change since.
    server.inject(Fault::stale_view(2).verb("watch").times(1));
    let mut stream = api
        .watch(&WatchParams::default().fields(NOT_ROOT_CA), "0")
        .await
        .unwrap()
        .boxed();
    let mut seen = Vec::new();
    while seen.last().map(String::as_str) != Some("3") {
        match next_event(&mut stream).await {
            WatchEvent::Added(cm) | WatchEvent::Modified(cm) => seen.push(data_of(&cm)),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ["1", "2", "3"]);
    server.stop().await;
}

#[tokio::test]
async fn the_journal_keeps_every_change_in_order_when_asked_to() {
    let server = FakeApiServer::builder().journal().start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client_without_retries(&server));
    api.create(&PostParams::default(), &configmap("cm", json!({"v": "1"})))
        .await
        .unwrap();
    api.patch(
        "cm",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    api.delete("cm", &DeleteParams::default()).await.unwrap();
    server.compact();
    let journal: Vec<_> = server
        .journal()
        .into_iter()
        .filter(|c| c.resource == "configmaps" && c.object["metadata"]["name"] == "cm")
        .collect();
    let seen: Vec<(&str, Value)> = journal
        .iter()
        .map(|c| (c.event, c.object["data"]["v"].clone()))
        .collect();
    assert_eq!(
        seen,
        [
            ("ADDED", json!("1")),
            ("MODIFIED", json!("2")),
            ("DELETED", json!("2"))
        ],
        "compaction forgets nothing of the journal"
    );
    assert!(
        journal
            .windows(2)
            .all(|w| w[0].resource_version < w[1].resource_version && w[0].at <= w[1].at)
    );

    let plain = FakeApiServer::start().await.unwrap();
    assert!(plain.journal().is_empty(), "no journal unless asked for");
    plain.stop().await;
    server.stop().await;
}

#[tokio::test]
async fn a_fault_can_aim_at_one_client_by_its_user_agent() {
    let server = FakeApiServer::start().await.unwrap();
    server.inject(Fault::respond(500).user_agent("kopf-rs/"));
    let get = |agent: &'static str| {
        server.send(ApiRequest::new("GET", CONFIGMAPS).header(http::header::USER_AGENT, agent))
    };
    assert_eq!(
        get("kopf-rs/0.1.0").await.status,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    assert_eq!(get("kubectl/v1.33.0").await.status, StatusCode::OK);
    let logged = server.requests();
    assert_eq!(logged[0].user_agent.as_deref(), Some("kopf-rs/0.1.0"));
    assert_eq!(logged[0].faults, ["respond"]);
    assert!(logged[1].faults.is_empty());
    assert_eq!(server.stats().faults["respond"], 1);
    server.stop().await;
}

/// The names of the configmaps in a watch's events, in order, until `count` were seen.
async fn watched(api: &Api<ConfigMap>, count: usize) -> Vec<String> {
    let mut stream = api
        .watch(&WatchParams::default().fields(NOT_ROOT_CA), "0")
        .await
        .unwrap()
        .boxed();
    let mut names = Vec::new();
    while names.len() < count {
        match next_event(&mut stream).await {
            WatchEvent::Added(cm) | WatchEvent::Modified(cm) => names.push(cm.name_any()),
            other => panic!("unexpected {other:?}"),
        }
    }
    names
}

#[tokio::test]
async fn contract_breaking_faults_need_an_explicit_opt_in_and_then_break_one_stream() {
    let refusing = FakeApiServer::start().await.unwrap();
    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        refusing.inject(Fault::break_stream(kopf_fake_apiserver::Breach::Drop, 0));
    }))
    .expect_err("refused without the opt-in");
    let message = refused.downcast::<String>().unwrap();
    assert!(message.contains("contract_breaking_faults()"), "{message}");
    let (code, answer) = refusing
        .request(
            "POST",
            "/_fake/faults",
            json!({"action": {"break_stream": {"breach": "drop"}}}),
        )
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{answer}");
    refusing.stop().await;

    let server = FakeApiServer::builder()
        .contract_breaking_faults()
        .start()
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client_without_retries(&server));
    for name in ["a", "b", "c"] {
        api.create(&PostParams::default(), &configmap(name, json!({})))
            .await
            .unwrap();
    }
    assert_eq!(watched(&api, 3).await, ["a", "b", "c"], "an honest stream");
    use kopf_fake_apiserver::Breach;
    server.inject(Fault::break_stream(Breach::Drop, 1).times(1));
    let mut names = watched(&api, 2).await;
    assert_eq!(names, ["a", "c"], "the second event dropped");
    server.inject(Fault::break_stream(Breach::Duplicate, 0).times(1));
    names = watched(&api, 4).await;
    assert_eq!(names, ["a", "a", "b", "c"], "the first event twice");
    server.inject(Fault::break_stream(Breach::Reorder, 0).times(1));
    names = watched(&api, 3).await;
    assert_eq!(names, ["b", "a", "c"], "the first event after the second");
    assert_eq!(server.stats().faults["break_stream"], 3);
    server.stop().await;
}

#[tokio::test]
async fn a_fault_aims_at_a_resource_by_its_plural_alone_or_with_its_group() {
    let server = FakeApiServer::start().await.unwrap();
    let client = client_without_retries(&server);
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), "default");
    let configmaps: Api<ConfigMap> = Api::namespaced(client, "default");
    let list = ListParams::default();
    for resource in ["deployments", "deployments.apps"] {
        server.inject(Fault::respond(500).resource(resource).times(1));
        assert!(
            configmaps.list(&list).await.is_ok(),
            "{resource} aims elsewhere"
        );
        let status = api_status(deployments.list(&list).await);
        assert_eq!(status.code, 500, "{resource} aims at deployments.apps");
        assert!(deployments.list(&list).await.is_ok(), "once only");
    }
    // A plural is not a prefix: `deploy` is not `deployments`; a group must be the whole one.
    server.inject(Fault::respond(500).resource("deploy"));
    server.inject(Fault::respond(500).resource("deployments.app"));
    assert!(deployments.list(&list).await.is_ok());
    server.stop().await;
}
