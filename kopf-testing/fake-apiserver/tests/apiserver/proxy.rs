//! The fake server as a proxy in front of a real API server: requests reach the real server
//! and are logged and counted on their way, and every fault acts on the real server as it
//! does on the fake one (writes failed or cut after they were made, held before or after,
//! conflicts, lists and watches cut, ended, silenced, shuffled or broken). What only the fake
//! server can do is refused, saying so. Each test starts a real server (or skips loudly where
//! none can run).

use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};
use http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kopf_fake_apiserver::{Breach, FakeApiServer, FakeApiServerBuilder, Fault, RealApiServer};
use kube::api::WatchParams;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent};
use serde_json::{Value, json};

use crate::support::{DEADLINE, client_without_retries, send, wait};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const LABELLED: &str = "labelSelector=test%3Dproxy";

/// A fresh real server with a proxy of `builder` in front; `None` (a loud skip) where no real
/// server can run. Also the real server's own configuration, to reach it around the proxy.
async fn proxy(test: &str, builder: FakeApiServerBuilder) -> Option<(FakeApiServer, kube::Config)> {
    let real = RealApiServer::for_test(test).await?;
    let config = real.config().await;
    let proxy = real.proxy(builder).await.expect("the proxy starts");
    Some((proxy, config))
}

fn configmap(name: &str, data: Value) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": {"test": "proxy"}},
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

fn assert_no_answer<T: std::fmt::Debug>(result: &kube::Result<T>) {
    match result {
        Err(kube::Error::Api(status)) => panic!("expected no answer at all, got {status:?}"),
        Err(_) => {}
        Ok(value) => panic!("expected no answer at all, got {value:?}"),
    }
}

async fn open(server: &FakeApiServer, path: &str) -> http::Response<hyper::body::Incoming> {
    let request = Request::get(path)
        .header("host", server.addr().to_string())
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    send(server, request).await
}

/// The bytes of a body read to its end, and whether it ended cleanly.
async fn read_to_end(body: &mut hyper::body::Incoming) -> (Vec<u8>, bool) {
    let mut received = Vec::new();
    let read = async {
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(frame) => {
                    if let Ok(data) = frame.into_data() {
                        received.extend_from_slice(&data);
                    }
                }
                Err(_) => return false,
            }
        }
        true
    };
    let clean = tokio::time::timeout(DEADLINE, read)
        .await
        .expect("the body ended in time");
    (received, clean)
}

fn events(bytes: &[u8]) -> Vec<Value> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("whole events only"))
        .collect()
}

fn names(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] != "BOOKMARK")
        .map(|e| {
            e["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// The object as the real server has it, read around the proxy.
async fn upstream_get(config: &kube::Config, name: &str) -> Option<ConfigMap> {
    let client = kube::Client::try_from(config.clone()).unwrap();
    Api::<ConfigMap>::namespaced(client, "default")
        .get_opt(name)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_proxy_serves_the_real_server_and_logs_what_passes() {
    let Some((server, _)) = proxy(
        "a_proxy_serves_the_real_server_and_logs_what_passes",
        FakeApiServer::builder().journal(),
    )
    .await
    else {
        return;
    };
    assert!(server.is_proxy());
    assert!(
        server
            .upstream_url()
            .unwrap()
            .starts_with("https://127.0.0.1:")
    );
    let client = server.client();
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "36")
    );
    let discovery = kube::Discovery::new(client.clone()).run().await.unwrap();
    assert!(
        discovery.has_group("apps"),
        "discovery is the real server's"
    );

    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut stream = api
        .watch(&WatchParams::default().labels("test=proxy"), "0")
        .await
        .unwrap()
        .boxed();
    wait("the watch to be counted", || async {
        (server.stats().open_watches == 1).then_some(())
    })
    .await;
    api.create(&PostParams::default(), &configmap("cm", json!({"a": "1"})))
        .await
        .unwrap();
    let added = async {
        loop {
            match stream.try_next().await.unwrap().unwrap() {
                WatchEvent::Bookmark(_) => continue,
                event => return event,
            }
        }
    };
    let event = tokio::time::timeout(DEADLINE, added)
        .await
        .expect("an event in time");
    assert!(
        matches!(&event, WatchEvent::Added(cm) if cm.metadata.name.as_deref() == Some("cm")),
        "{event:?}"
    );
    api.patch(
        "cm",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "2"}})),
    )
    .await
    .unwrap();
    // An error is the real server's own.
    let missing = api_status(api.get("missing").await);
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    assert_eq!(missing.message, "configmaps \"missing\" not found");

    let logged: Vec<(String, String, Option<String>, u16)> = server
        .requests()
        .into_iter()
        .filter(|r| r.resource == "configmaps")
        .map(|r| (r.verb, r.method, r.name, r.code))
        .collect();
    assert_eq!(
        logged,
        [
            ("watch".into(), "GET".into(), None, 200),
            ("create".into(), "POST".into(), None, 201),
            ("patch".into(), "PATCH".into(), Some("cm".into()), 200),
            ("get".into(), "GET".into(), Some("missing".into()), 404),
        ]
    );
    assert_eq!(server.stats().count("patch", "configmaps"), 1);

    // The journal holds every change of the configmaps since the first request for them,
    // each as soon as its write is answered.
    let journal: Vec<(&str, String, String)> = server
        .journal()
        .into_iter()
        .filter(|c| c.resource == "configmaps" && c.object["metadata"]["name"] == "cm")
        .map(|c| {
            let data = c.object["data"]["a"].as_str().unwrap().to_string();
            (
                c.event,
                data,
                c.object["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        journal,
        [
            ("ADDED", "1".to_string(), "ConfigMap".to_string()),
            ("MODIFIED", "2".to_string(), "ConfigMap".to_string()),
        ]
    );
    api.delete("cm", &DeleteParams::default()).await.unwrap();
    let last = server.journal().pop().expect("a journal");
    assert_eq!(
        (last.event, last.object["metadata"]["name"].as_str()),
        ("DELETED", Some("cm"))
    );
    api.create(&PostParams::default(), &configmap("cm", json!({"a": "2"})))
        .await
        .unwrap();

    // Watches end when the test closes them, and connections when it restarts the server.
    server.close_watches();
    wait("the watch to end", || async {
        (server.stats().open_watches == 0).then_some(())
    })
    .await;
    drop(stream);
    server.restart();
    wait("the connections to close", || async {
        (server.stats().open_connections == 0).then_some(())
    })
    .await;
    assert_eq!(api.get("cm").await.unwrap().data.unwrap()["a"], "2");
    drop((api, client));
    server.stop().await;
}

/// A resource made a moment ago (a new CRD's) is journaled from its first object on: the real
/// server answers the journal's first list `429 Too Many Requests` with `Retry-After` while the
/// resource's watch cache fills, and the journal lists again rather than never following it.
#[tokio::test]
async fn the_journal_follows_a_resource_made_a_moment_ago() {
    let Some((server, _)) = proxy(
        "the_journal_follows_a_resource_made_a_moment_ago",
        FakeApiServer::builder().journal(),
    )
    .await
    else {
        return;
    };
    let client = server.client();
    let json_request = |method: &str, path: &str, body: &Value| {
        Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(body).unwrap())
            .unwrap()
    };
    let crd = kopf_fake_apiserver::fixtures::free_form_crd("journal.kopf.dev", "Widget");
    let _: Value = client
        .request(json_request(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &crd,
        ))
        .await
        .unwrap();
    // As an operator or a test would: the resource is used once discovery names it.
    wait("the new resource to be served", || async {
        let request = Request::get("/apis/journal.kopf.dev/v1")
            .body(Vec::new())
            .unwrap();
        let group: Value = client.request(request).await.ok()?;
        let resources = group["resources"].as_array()?;
        resources
            .iter()
            .any(|r| r["name"] == "widgets")
            .then_some(())
    })
    .await;
    let objects = "/apis/journal.kopf.dev/v1/namespaces/default/widgets";
    let object = json!({
        "apiVersion": "journal.kopf.dev/v1",
        "kind": "Widget",
        "metadata": {"name": "fresh"},
        "spec": {"step": 1},
    });
    let _: Value = client
        .request(json_request("POST", objects, &object))
        .await
        .unwrap();
    let _: Value = client
        .request(
            Request::builder()
                .method("PATCH")
                .uri(format!("{objects}/fresh"))
                .header("content-type", "application/merge-patch+json")
                .body(serde_json::to_vec(&json!({"spec": {"step": 2}})).unwrap())
                .unwrap(),
        )
        .await
        .unwrap();

    let journaled: Vec<(&str, Value)> = server
        .journal()
        .into_iter()
        .filter(|c| c.resource == "widgets.journal.kopf.dev")
        .map(|c| (c.event, c.object["spec"]["step"].clone()))
        .collect();
    assert_eq!(
        journaled,
        [("ADDED", json!(1)), ("MODIFIED", json!(2))],
        "every change of the new resource is journaled"
    );
    drop(client);
    server.stop().await;
}

#[tokio::test]
async fn faults_on_writes_act_on_the_real_server() {
    let Some((server, real)) = proxy(
        "faults_on_writes_act_on_the_real_server",
        FakeApiServer::builder(),
    )
    .await
    else {
        return;
    };
    let api: Api<ConfigMap> = Api::default_namespaced(client_without_retries(&server));

    // Refused without reaching the real server.
    server.inject(Fault::too_many_requests(7).verb("create").times(1));
    let status = api_status(
        api.create(&PostParams::default(), &configmap("a", json!({})))
            .await,
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (429, "TooManyRequests")
    );
    assert!(upstream_get(&real, "a").await.is_none());

    // Made, then answered with an error, or with no answer at all.
    server.inject(Fault::commit_then_fail(500).verb("create").times(1));
    let status = api_status(
        api.create(&PostParams::default(), &configmap("a", json!({})))
            .await,
    );
    assert_eq!(status.code, 500);
    assert!(
        upstream_get(&real, "a").await.is_some(),
        "made despite the 500"
    );
    server.inject(Fault::commit_then_reset().verb("patch").times(1));
    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "v"}})),
        )
        .await;
    assert_no_answer(&patched);
    assert_eq!(
        upstream_get(&real, "a").await.unwrap().data.unwrap()["k"],
        "v"
    );
    // A write that fails on its own gets its real answer, however the fault was meant.
    server.inject(Fault::commit_then_fail(500).verb("create").times(1));
    let status = api_status(
        api.create(&PostParams::default(), &configmap("a", json!({})))
            .await,
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "AlreadyExists")
    );

    // Held before it is made: cut, it never is; released, it is.
    server.inject(Fault::hold_before_commit().verb("create").times(2));
    let creating = tokio::spawn({
        let api = api.clone();
        async move {
            api.create(&PostParams::default(), &configmap("b", json!({})))
                .await
        }
    });
    let held = server
        .wait_held(DEADLINE)
        .await
        .expect("the create is held");
    assert_eq!((held.verb.as_str(), held.committed), ("create", false));
    assert!(upstream_get(&real, "b").await.is_none());
    server.cut_held();
    assert_no_answer(&creating.await.unwrap());
    assert!(
        upstream_get(&real, "b").await.is_none(),
        "a cut write was not made"
    );
    let creating = tokio::spawn({
        let api = api.clone();
        async move {
            api.create(&PostParams::default(), &configmap("b", json!({})))
                .await
        }
    });
    server
        .wait_held(DEADLINE)
        .await
        .expect("the create is held");
    server.release_held();
    creating
        .await
        .unwrap()
        .expect("a released write is made and answered");

    // Held after it is made: the real server has it while its answer waits.
    server.inject(Fault::hold_after_commit().verb("delete").times(1));
    let deleting = tokio::spawn({
        let api = api.clone();
        async move { api.delete("b", &DeleteParams::default()).await }
    });
    let held = server
        .wait_held(DEADLINE)
        .await
        .expect("the delete is held");
    assert!(held.committed);
    assert!(
        upstream_get(&real, "b").await.is_none(),
        "deleted before the answer"
    );
    server.cut_held();
    assert_no_answer(&deleting.await.unwrap());

    // Conflicts: claimed (nothing changes), or after a competing write made for real.
    let before = upstream_get(&real, "a").await.unwrap();
    server.inject(Fault::conflict().verb("patch").times(1));
    let status = api_status(
        api.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "w"}})),
        )
        .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(
        status.message.contains("the object has been modified"),
        "{status:?}"
    );
    let after = upstream_get(&real, "a").await.unwrap();
    assert_eq!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );
    server.inject(
        Fault::conflict_after_competing_write()
            .verb("patch")
            .times(1),
    );
    let status = api_status(
        api.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "w"}})),
        )
        .await,
    );
    assert_eq!(status.code, 409);
    let competed = upstream_get(&real, "a").await.unwrap();
    assert_ne!(
        competed.metadata.resource_version,
        after.metadata.resource_version
    );
    assert!(
        competed
            .metadata
            .annotations
            .unwrap()
            .contains_key("fake.kopf.dev/competing-writer")
    );
    assert_eq!(
        competed.data.unwrap()["k"],
        "v",
        "the write itself was not made"
    );
    // A conflict for an object that is not there is the real server's 404.
    server.inject(Fault::conflict().verb("patch").times(1));
    let status = api_status(
        api.patch("nope", &PatchParams::default(), &Patch::Merge(json!({})))
            .await,
    );
    assert_eq!(status.code, 404);

    let fired = server.stats().faults;
    for action in [
        "respond",
        "commit_then_fail",
        "commit_then_reset",
        "hold",
        "conflict",
    ] {
        assert!(fired.contains_key(action), "{action} fired: {fired:?}");
    }
    drop(api);
    server.stop().await;
}

#[tokio::test]
async fn faults_on_lists_and_watches_act_on_the_real_server() {
    let Some((server, _)) = proxy(
        "faults_on_lists_and_watches_act_on_the_real_server",
        FakeApiServer::builder()
            .contract_breaking_faults()
            .fault_seed(7),
    )
    .await
    else {
        return;
    };
    let api: Api<ConfigMap> = Api::default_namespaced(client_without_retries(&server));
    for name in ["a", "b", "c", "d", "e", "f"] {
        api.create(&PostParams::default(), &configmap(name, json!({})))
            .await
            .unwrap();
    }
    let list = format!("{CONFIGMAPS}?{LABELLED}");
    let watch = format!("{CONFIGMAPS}?watch=true&{LABELLED}");

    // Watches from the start list what exists: cut after two events, or ended after one.
    server.inject(Fault::reset_watch_after(2).times(1));
    let (received, clean) = read_to_end(&mut open(&server, &watch).await.into_body()).await;
    assert!(!clean, "the stream did not end cleanly");
    assert_eq!(names(&events(&received)).len(), 2);
    server.inject(Fault::close_watch_after(1).verb("watch").times(1));
    let (received, clean) = read_to_end(&mut open(&server, &watch).await.into_body()).await;
    assert!(clean);
    assert_eq!(events(&received).len(), 1);

    // A list cut in its middle.
    server.inject(Fault::reset_list_after(40).times(1));
    let result = api.list(&ListParams::default().labels("test=proxy")).await;
    assert_no_answer(&result);

    // A list in a seeded random order; without the fault, in the server's order.
    let ordered: Vec<String> = api
        .list(&ListParams::default().labels("test=proxy"))
        .await
        .unwrap()
        .items
        .iter()
        .map(|cm| cm.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(ordered, ["a", "b", "c", "d", "e", "f"]);
    server.inject(Fault::shuffle_list().verb("list").times(1));
    let shuffled: Vec<String> = api
        .list(&ListParams::default().labels("test=proxy"))
        .await
        .unwrap()
        .items
        .iter()
        .map(|cm| cm.metadata.name.clone().unwrap())
        .collect();
    assert_ne!(shuffled, ordered, "seed 7 shuffles six names");
    let mut sorted = shuffled.clone();
    sorted.sort();
    assert_eq!(sorted, ordered);
    // And a watch-list's initial events, before the bookmark that ends them.
    server.inject(Fault::shuffle_list().verb("watch").times(1));
    let watch_list = format!(
        "{watch}&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"
    );
    let (received, clean) = read_to_end(&mut open(&server, &watch_list).await.into_body()).await;
    assert!(clean);
    let received = events(&received);
    assert_eq!(names(&received).len(), 6);
    assert_ne!(names(&received), ordered);
    assert!(received.iter().any(|e| e["type"] == "BOOKMARK"
        && e["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true"));

    // Contract-breaking: one event of one stream dropped, repeated, or swapped.
    for (breach, expected) in [
        (Breach::Drop, vec!["a", "c", "d", "e", "f"]),
        (Breach::Duplicate, vec!["a", "b", "b", "c", "d", "e", "f"]),
        (Breach::Reorder, vec!["a", "c", "b", "d", "e", "f"]),
    ] {
        server.inject(Fault::break_stream(breach, 1).times(1));
        let query = format!("{watch}&timeoutSeconds=1");
        let (received, _) = read_to_end(&mut open(&server, &query).await.into_body()).await;
        assert_eq!(names(&events(&received)), expected, "{breach:?}");
    }

    // A silent watch never reaches the real server, and stays open until the client goes.
    server.inject(Fault::silent_watch().times(1));
    let silent = open(&server, &format!("{watch}&timeoutSeconds=1")).await;
    assert_eq!(silent.status(), StatusCode::OK);
    let mut silent = silent.into_body();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(futures::FutureExt::now_or_never(silent.frame()).is_none());
    assert_eq!(server.stats().open_watches, 1);
    drop(silent);
    wait("the silent watch to close", || async {
        (server.stats().open_watches == 0).then_some(())
    })
    .await;
    let (received, clean) = read_to_end(&mut open(&server, &list).await.into_body()).await;
    assert!(clean);
    assert_eq!(
        serde_json::from_slice::<Value>(&received).unwrap()["items"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
    drop(api);
    server.stop().await;
}

#[tokio::test]
async fn requests_with_their_own_token_act_as_their_account_and_fake_only_controls_refuse() {
    let test = "requests_with_their_own_token_act_as_their_account_and_fake_only_controls_refuse";
    let Some((server, real)) = proxy(test, FakeApiServer::builder()).await else {
        return;
    };
    let admin = server.client();
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::default_namespaced(admin.clone());
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "reader"}})).unwrap(),
        )
        .await
        .unwrap();
    let request = Request::post("/api/v1/namespaces/default/serviceaccounts/reader/token")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})).unwrap())
        .unwrap();
    let issued: Value = admin.request(request).await.unwrap();
    let token = issued["status"]["token"].as_str().unwrap().to_string();
    let mut config = server.config();
    config.auth_info.token = Some(token.into());
    let reader: Api<ConfigMap> = Api::default_namespaced(kube::Client::try_from(config).unwrap());
    let status = api_status(reader.list(&ListParams::default()).await);
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert!(
        status
            .message
            .contains("system:serviceaccount:default:reader"),
        "the real server saw the account: {}",
        status.message
    );

    // What only the fake server can do is refused, saying so.
    let refused = |what: &dyn Fn()| {
        let panic =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(what)).expect_err("refused");
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            message.contains("works only on the fake API server"),
            "{message}"
        );
    };
    refused(&|| server.compact());
    refused(&|| server.inject(Fault::stale_view(1)));
    refused(&|| server.set_bookmark_interval(Duration::from_secs(1)));
    refused(&|| {
        server.service_account_token("default", "reader");
    });
    let recreated = server.recreate(serde_json::to_value(configmap("cm", json!({}))).unwrap());
    assert!(
        recreated
            .unwrap_err()
            .message
            .contains("works only on the fake API server")
    );
    let state = FakeApiServer::builder()
        .upstream(real)
        .state_file("/nonexistent/state")
        .start()
        .await;
    assert!(state.is_err());
    drop((admin, accounts, reader));
    server.stop().await;
}

/// A proxy without sharded watches stands for a server without the feature gate: the real
/// server behind it never sees the `shardSelector`, and every object comes back; a proxy with
/// them passes it on, and the real server filters.
#[tokio::test]
async fn a_proxy_without_sharded_watches_leaves_the_shard_selector_out() {
    let test = "a_proxy_without_sharded_watches_leaves_the_shard_selector_out";
    let Some((sharded, real)) = proxy(test, FakeApiServer::builder()).await else {
        return;
    };
    let unsharded = FakeApiServer::builder()
        .upstream(real)
        .sharded_watches(false)
        .start()
        .await
        .expect("a proxy without sharded watches starts");
    let configmaps: Api<ConfigMap> = Api::default_namespaced(sharded.client());
    for i in 0..8 {
        let name = format!("shard-{i}");
        configmaps
            .create(&PostParams::default(), &configmap(&name, json!({})))
            .await
            .unwrap();
    }
    // Half of the uids' range: with 8 random uids, all 8 fall in it once in 256 runs, so
    // a test that must see fewer than 8 uses the half that holds fewer.
    let ranges = [
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
        "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
    ];
    let count = |server: &FakeApiServer, selector: &str| {
        let path = format!(
            "{CONFIGMAPS}?{LABELLED}&shardSelector={}",
            selector
                .bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' => char::from(b).to_string(),
                    _ => format!("%{b:02X}"),
                })
                .collect::<String>()
        );
        let client = server.client();
        async move {
            let request = Request::get(path).body(Vec::new()).unwrap();
            let list: Value = client.request(request).await.expect("the list is answered");
            list["items"].as_array().map_or(0, Vec::len)
        }
    };
    let low = count(&sharded, ranges[0]).await;
    let high = count(&sharded, ranges[1]).await;
    assert_eq!(
        low + high,
        8,
        "the real server splits the objects between the halves"
    );
    let fewer = if low < high { ranges[0] } else { ranges[1] };
    assert!(count(&sharded, fewer).await < 8);
    assert_eq!(
        count(&unsharded, fewer).await,
        8,
        "the selector was left out"
    );
    let logged = unsharded.requests();
    assert!(
        logged.iter().any(|r| r.query.contains("shardSelector")),
        "the proxy's log shows the request as it came: {logged:#?}"
    );
    unsharded.stop().await;
    sharded.stop().await;
}
