//! `shardSelector` (Kubernetes 1.36 server-side sharded list and watch, KEP-5866): lists,
//! watches and deletecollections keep only the objects whose `metadata.uid` or
//! `metadata.namespace` hashes into the selector's ranges, lists echo it in
//! `metadata.shardInfo`, and a server started with `sharded_watches(false)` ignores it as
//! servers without the feature gate do.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use http::{Request, StatusCode};
use kopf_fake_apiserver::{ApiRequest, FakeApiServer};
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent};
use kube::core::DynamicObject;
use serde_json::{Value, json};

use crate::support::{DEADLINE, wait};

/// The lower half of the hash space, by uid.
const LOW: &str = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
/// The upper half, up to the 2^64 bound.
const HIGH: &str = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')";
/// The label every object of these tests carries, so that lists leave out what clusters hold
/// anyway (`kube-root-ca.crt`).
const LABEL: &str = "test=shards";

/// The 64-bit FNV-1a hash, written out here again so that the server's is checked against an
/// independent one.
fn fnv1a_64(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Percent-encodes a query parameter's value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `GET path` with this `Accept`: the status and the JSON body.
async fn get(server: &FakeApiServer, path: &str, accept: &str) -> (StatusCode, Value) {
    let request = ApiRequest::new("GET", path).header(http::header::ACCEPT, accept);
    let answer = server.send(request).await;
    let body = serde_json::from_slice(&answer.body)
        .unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {}", answer.json()));
    (answer.status, body)
}

/// Lists the labelled ConfigMaps at `collection` with this shard selector (and query); fails
/// unless the server answers 200.
async fn list(server: &FakeApiServer, collection: &str, selector: &str, extra: &str) -> Value {
    let path = format!(
        "{collection}?labelSelector={}&shardSelector={}{extra}",
        encode(LABEL),
        encode(selector)
    );
    let (status, body) = get(server, &path, "application/json").await;
    assert_eq!(status, StatusCode::OK, "{path}: {body}");
    body
}

/// The `namespace/name`s of a list's items.
fn names(list: &Value) -> BTreeSet<String> {
    list["items"]
        .as_array()
        .expect("a list has items")
        .iter()
        .map(|item| {
            format!(
                "{}/{}",
                item["metadata"]["namespace"].as_str().unwrap_or_default(),
                item["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// Creates labelled ConfigMaps `cm-0`.. in `namespace`; returns `namespace/name` of each.
async fn create_configmaps(client: &kube::Client, namespace: &str, count: usize) -> Vec<String> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &configmaps());
    let mut created = Vec::new();
    for i in 0..count {
        let name = format!("cm-{i}");
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"test": "shards"}},
        }))
        .expect("a valid ConfigMap");
        api.create(&PostParams::default(), &object)
            .await
            .expect("created");
        created.push(format!("{namespace}/{name}"));
    }
    created
}

fn configmaps() -> kube::api::ApiResource {
    kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&())
}

/// Asserts that two shards' names split `all` exactly, with something in each.
fn assert_partition(all: &BTreeSet<String>, one: &BTreeSet<String>, other: &BTreeSet<String>) {
    assert!(one.is_disjoint(other), "both shards hold {:?}", one & other);
    assert_eq!(&(one | other), all, "the shards together hold everything");
    assert!(
        !one.is_empty() && !other.is_empty(),
        "both shards hold something: {one:?} / {other:?}"
    );
}

/// Two complementary shards of uids split the objects exactly, each list says which shard it
/// is (in the selector's canonical form, whatever the spelling sent), and a selector of both
/// halves with `||` is the whole.
#[tokio::test]
async fn lists_of_complementary_uid_shards_partition_the_objects() {
    let server = FakeApiServer::start().await.expect("the server starts");
    let all: BTreeSet<String> = create_configmaps(&server.client(), "default", 40)
        .await
        .into_iter()
        .collect();
    let collection = "/api/v1/namespaces/default/configmaps";

    let low = list(&server, collection, LOW, "").await;
    let high = list(&server, collection, HIGH, "").await;
    assert_partition(&all, &names(&low), &names(&high));
    assert_eq!(low["metadata"]["shardInfo"], json!({"selector": LOW}));
    assert_eq!(high["metadata"]["shardInfo"], json!({"selector": HIGH}));
    for item in low["items"].as_array().unwrap() {
        assert!(fnv1a_64(item["metadata"]["uid"].as_str().unwrap()) < 1 << 63);
    }

    let spelled =
        "  shardRange( object.metadata.uid,\"0x0000000000000000\" , '0x8000000000000000')";
    let respelled = list(&server, collection, spelled, "").await;
    assert_eq!(names(&respelled), names(&low));
    assert_eq!(respelled["metadata"]["shardInfo"], json!({"selector": LOW}));

    let both = list(&server, collection, &format!("{HIGH} || {LOW}"), "").await;
    assert_eq!(names(&both), all);
    assert_eq!(
        both["metadata"]["shardInfo"]["selector"],
        format!("{HIGH} || {LOW}")
    );

    // Without a selector, or with an empty one, nothing is filtered and nothing is said.
    let (_, unsharded) = get(
        &server,
        &format!(
            "{collection}?labelSelector={}&shardSelector=",
            encode(LABEL)
        ),
        "application/json",
    )
    .await;
    assert_eq!(names(&unsharded), all);
    assert!(
        unsharded["metadata"].get("shardInfo").is_none(),
        "{unsharded}"
    );
    server.stop().await;
}

/// Shards by namespace keep each namespace whole, on the side its name hashes to, in a list
/// across all namespaces.
#[tokio::test]
async fn lists_of_namespace_shards_keep_each_namespace_whole() {
    let server = FakeApiServer::start().await.expect("the server starts");
    let client = server.client();
    let namespaces: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
    );
    // Names that differ in one late character mostly hash into one half, so pick four of
    // each half, with the test's own hash.
    let (lower, upper): (Vec<String>, Vec<String>) = (0..)
        .map(|i| format!("shard-ns-{i}"))
        .take(4096)
        .partition(|name| fnv1a_64(name) < 1 << 63);
    let chosen = lower.iter().take(4).chain(upper.iter().take(4));
    let mut all = BTreeSet::new();
    for name in chosen {
        let namespace: DynamicObject = serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        )
        .unwrap();
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .expect("created");
        all.extend(create_configmaps(&client, name, 2).await);
    }
    let by_namespace = |start: &str, end: &str| {
        format!("shardRange(object.metadata.namespace, '{start}', '{end}')")
    };
    let low = list(
        &server,
        "/api/v1/configmaps",
        &by_namespace("0x0000000000000000", "0x8000000000000000"),
        "",
    )
    .await;
    let high = list(
        &server,
        "/api/v1/configmaps",
        &by_namespace("0x8000000000000000", "0x10000000000000000"),
        "",
    )
    .await;
    let (low, high) = (names(&low), names(&high));
    assert_partition(&all, &low, &high);
    for name in &low {
        let namespace = name.split('/').next().unwrap();
        assert!(
            fnv1a_64(namespace) < 1 << 63,
            "{namespace} is in the upper half"
        );
    }
    for name in &high {
        let namespace = name.split('/').next().unwrap();
        assert!(
            fnv1a_64(namespace) >= 1 << 63,
            "{namespace} is in the lower half"
        );
    }
    server.stop().await;
}

/// Pages of a sharded list, followed by their continue tokens, hold exactly the unpaged
/// shard; each says it is sharded and, as the real server, counts no remaining items.
#[tokio::test]
async fn paginated_sharded_lists_keep_the_selector() {
    let server = FakeApiServer::start().await.expect("the server starts");
    create_configmaps(&server.client(), "default", 20).await;
    let collection = "/api/v1/namespaces/default/configmaps";
    let whole = names(&list(&server, collection, LOW, "").await);

    let mut paged = BTreeSet::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let page = list(
            &server,
            collection,
            LOW,
            &format!("&limit=3&continue={}", encode(&token)),
        )
        .await;
        pages += 1;
        assert_eq!(page["metadata"]["shardInfo"], json!({"selector": LOW}));
        assert!(
            page["metadata"].get("remainingItemCount").is_none(),
            "{page}"
        );
        let items = names(&page);
        assert!(items.len() <= 3);
        assert!(paged.is_disjoint(&items), "a page repeats an item");
        paged.extend(items);
        match page["metadata"]["continue"].as_str() {
            Some(next) if !next.is_empty() => token = next.to_owned(),
            _ => break,
        }
    }
    assert_eq!(paged, whole);
    assert!(pages > 1, "{} items in pages of 3", whole.len());
    server.stop().await;
}

/// Metadata-only lists are filtered too, and (as the real server's) carry no `shardInfo`.
#[tokio::test]
async fn metadata_only_lists_are_filtered() {
    let server = FakeApiServer::start().await.expect("the server starts");
    create_configmaps(&server.client(), "default", 20).await;
    let collection = "/api/v1/namespaces/default/configmaps";
    let full = list(&server, collection, LOW, "").await;
    let other = list(&server, collection, HIGH, "").await;
    let path = format!(
        "{collection}?labelSelector={}&shardSelector={}",
        encode(LABEL),
        encode(LOW)
    );
    let accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    let (status, partial) = get(&server, &path, accept).await;
    assert_eq!(status, StatusCode::OK, "{partial}");
    assert_eq!(partial["kind"], "PartialObjectMetadataList");
    assert_eq!(names(&partial), names(&full));
    assert!(names(&partial).is_disjoint(&names(&other)), "{partial}");
    assert!(partial["metadata"].get("shardInfo").is_none(), "{partial}");
    server.stop().await;
}

/// Watches of complementary shards see each object's events on exactly one of them, creation
/// to deletion, and bookmarks still come on both.
#[tokio::test]
async fn watches_of_complementary_shards_split_the_events() {
    let server = FakeApiServer::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .await
        .expect("the server starts");
    let client = server.client();
    let start = list(&server, "/api/v1/namespaces/default/configmaps", LOW, "").await;
    let rv = start["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let watch = |selector: &str| {
        let path = format!(
            "/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion={rv}&labelSelector={}&shardSelector={}",
            encode(LABEL),
            encode(selector)
        );
        let request = Request::get(path).body(Vec::new()).unwrap();
        let client = client.clone();
        async move {
            client
                .request_events::<DynamicObject>(request)
                .await
                .expect("the watch starts")
                .boxed()
        }
    };
    let mut low = watch(LOW).await;
    let mut high = watch(HIGH).await;

    let all: BTreeSet<String> = create_configmaps(&client, "default", 40)
        .await
        .into_iter()
        .collect();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &configmaps());
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels(LABEL),
    )
    .await
    .expect("deleted");
    let last = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let last: u64 = last.parse().unwrap();

    let low_events = events_until(&mut low, last).await;
    let high_events = events_until(&mut high, last).await;

    let named = |events: &[(&str, String)], kind: &str| -> BTreeSet<String> {
        events
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, name)| format!("default/{name}"))
            .collect()
    };
    let (low_added, high_added) = (named(&low_events, "ADDED"), named(&high_events, "ADDED"));
    assert_partition(&all, &low_added, &high_added);
    assert_eq!(named(&low_events, "DELETED"), low_added);
    assert_eq!(named(&high_events, "DELETED"), high_added);
    // The watches agree with the lists of the same shards.
    let low_listed = names(&list(&server, "/api/v1/namespaces/default/configmaps", LOW, "").await);
    assert!(low_listed.is_empty(), "all were deleted: {low_listed:?}");
    server.stop().await;
}

/// A watch's events (kind, name) until a bookmark says it has reached `last`: events come in
/// order, so no earlier change can follow it.
async fn events_until(
    stream: &mut BoxStream<'static, kube::Result<WatchEvent<DynamicObject>>>,
    last: u64,
) -> Vec<(&'static str, String)> {
    let mut seen = Vec::new();
    let until = tokio::time::Instant::now() + DEADLINE;
    loop {
        let event = tokio::time::timeout_at(until, stream.try_next())
            .await
            .expect("a bookmark at the last write comes in time")
            .expect("the watch goes on")
            .expect("the watch goes on");
        let (kind, object) = match event {
            WatchEvent::Added(o) => ("ADDED", o),
            WatchEvent::Modified(o) => ("MODIFIED", o),
            WatchEvent::Deleted(o) => ("DELETED", o),
            WatchEvent::Bookmark(b) => {
                if b.metadata.resource_version.parse::<u64>().unwrap() >= last {
                    return seen;
                }
                continue;
            }
            WatchEvent::Error(e) => panic!("the watch failed: {e:?}"),
        };
        seen.push((kind, object.metadata.name.unwrap_or_default()));
    }
}

/// A deletecollection with a shard selector deletes that shard only.
#[tokio::test]
async fn deletecollection_deletes_one_shard() {
    let server = FakeApiServer::start().await.expect("the server starts");
    let all: BTreeSet<String> = create_configmaps(&server.client(), "default", 40)
        .await
        .into_iter()
        .collect();
    let collection = "/api/v1/namespaces/default/configmaps";
    let high = names(&list(&server, collection, HIGH, "").await);
    let lower = format!(
        "{collection}?labelSelector={}&shardSelector={}",
        encode(LABEL),
        encode(LOW)
    );
    let (status, deleted) = server.request("DELETE", &lower, None).await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    let api: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &configmaps());
    let left: BTreeSet<String> = wait("the lower shard's deletion", || async {
        let left: BTreeSet<String> = api
            .list(&ListParams::default().labels(LABEL))
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|o| format!("default/{}", o.metadata.name.unwrap()))
            .collect();
        (left.len() < all.len()).then_some(left)
    })
    .await;
    assert_eq!(left, high);
    server.stop().await;
}

/// Invalid selectors fail as on a real server: the storage layer's error is no API status,
/// so the answer is a 500 with the parser's message and no reason; for watches too.
#[tokio::test]
async fn invalid_selectors_fail_with_the_real_servers_answer() {
    let server = FakeApiServer::start().await.expect("the server starts");
    let cases = [
        (
            "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
            r#"invalid shard selector: hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean "0x0000000000000000"?)"#,
        ),
        (
            "shardRange(object.metadata.uid, '0x8000000000000000', '0x0000000000000000')",
            "invalid shard selector: shard range start 0x8000000000000000 must be less than end 0x0000000000000000",
        ),
        (
            "shardRange(metadata.uid, '0x0000000000000000', '0x8000000000000000')",
            r#"invalid shard selector: unsupported field path "metadata.uid"; supported: object.metadata.uid, object.metadata.namespace"#,
        ),
        (
            " ",
            "invalid shard selector: empty shard selector is not allowed; omit the parameter for unfiltered lists",
        ),
    ];
    for (selector, message) in cases {
        for watch in ["", "&watch=true"] {
            let path = format!(
                "/api/v1/namespaces/default/configmaps?shardSelector={}{watch}",
                encode(selector)
            );
            let (status, body) = get(&server, &path, "application/json").await;
            assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{path}: {body}");
            assert_eq!(
                body,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "code": 500}),
                "{path}"
            );
        }
    }
    server.stop().await;
}

/// A server without the feature ignores the parameter, even an invalid one, and says nothing.
#[tokio::test]
async fn without_the_feature_the_selector_is_ignored() {
    let server = FakeApiServer::builder()
        .sharded_watches(false)
        .start()
        .await
        .expect("the server starts");
    let all: BTreeSet<String> = create_configmaps(&server.client(), "default", 40)
        .await
        .into_iter()
        .collect();
    let collection = "/api/v1/namespaces/default/configmaps";
    let low = list(&server, collection, LOW, "").await;
    assert_eq!(names(&low), all);
    assert!(low["metadata"].get("shardInfo").is_none(), "{low}");
    let invalid = list(&server, collection, "no such thing", "").await;
    assert_eq!(names(&invalid), all);
    server.stop().await;
}

/// kubectl has no flag for it, but its raw GET reaches it like any client.
#[tokio::test]
async fn kubectl_get_raw_with_a_shard_selector() {
    let Some((_turn, server, kubectl)) =
        crate::kubectl::setup("kubectl_get_raw_with_a_shard_selector").await
    else {
        return;
    };
    let all: BTreeSet<String> = create_configmaps(&server.client(), "default", 40)
        .await
        .into_iter()
        .collect();
    let shard = |selector: &str| {
        format!(
            "/api/v1/namespaces/default/configmaps?labelSelector={}&shardSelector={}",
            encode(LABEL),
            encode(selector)
        )
    };
    let low: Value = serde_json::from_str(&kubectl.ok(&["get", "--raw", &shard(LOW)]).await)
        .expect("kubectl prints the JSON list");
    let high: Value = serde_json::from_str(&kubectl.ok(&["get", "--raw", &shard(HIGH)]).await)
        .expect("kubectl prints the JSON list");
    assert_eq!(low["metadata"]["shardInfo"], json!({"selector": LOW}));
    assert_partition(&all, &names(&low), &names(&high));
    drop(kubectl);
    server.stop().await;
}

/// Lists of custom resources are filtered too, but (as Kubernetes 1.36's, whose unstructured
/// lists lack the field) carry no `shardInfo`: a client cannot tell there that the server
/// filtered.
#[tokio::test]
async fn lists_of_custom_resources_are_filtered_without_shard_info() {
    let server = FakeApiServer::start().await.expect("the server starts");
    server
        .apply(kopf_fake_apiserver::fixtures::KOPFEXAMPLE_CRD)
        .await;
    let collection = kopf_fake_apiserver::fixtures::KOPFEXAMPLES;
    for i in 0..10 {
        let object = kopf_fake_apiserver::fixtures::kopfexample(&format!("kex-{i}"), json!({}));
        server
            .test_client()
            .request("POST", collection, object)
            .await;
    }
    let all = |selector: &str| {
        let path = format!("{collection}?shardSelector={}", encode(selector));
        let server = &server;
        async move { get(server, &path, "application/json").await.1 }
    };
    let (low, high) = (all(LOW).await, all(HIGH).await);
    let count = |list: &Value| list["items"].as_array().map_or(0, Vec::len);
    assert_eq!(count(&low) + count(&high), 10, "split between the halves");
    assert!(low["metadata"].get("shardInfo").is_none(), "{low}");
    assert!(high["metadata"].get("shardInfo").is_none(), "{high}");
    server.stop().await;
}
