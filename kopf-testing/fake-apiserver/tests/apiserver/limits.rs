//! No request can crash or stall the server: patches, sizes, depths and versions are bounded
//! as a real cluster bounds them.

use http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use kopf_fake_apiserver::{ApiRequest, FakeApiServer, PatchType};
use serde_json::{Value, json};

use crate::support::{DEADLINE, send};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

async fn configmap(server: &FakeApiServer, name: &str, data: Value) {
    let body =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data});
    let (code, body) = server.request("POST", CONFIGMAPS, body).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
}

/// A JSON patch of the object at `path`: the status and the answer.
async fn json_patch(
    server: &FakeApiServer,
    path: &str,
    operations: Vec<Value>,
) -> (StatusCode, Value) {
    let request = ApiRequest::new("PATCH", path)
        .json(Value::Array(operations))
        .patch_type(PatchType::Json);
    let answer = server.send(request).await;
    (answer.status, answer.json())
}

#[tokio::test]
async fn hostile_json_patches_are_refused_and_the_server_goes_on() {
    let server = FakeApiServer::start().await.unwrap();
    configmap(&server, "target", json!({"a": "x".repeat(1000)})).await;
    let path = format!("{CONFIGMAPS}/target");

    let many = vec![json!({"op": "test", "path": "/kind", "value": "ConfigMap"}); 10_001];
    let (code, body) = json_patch(&server, &path, many).await;
    assert_eq!(code, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body["reason"], "RequestEntityTooLarge");

    let doubling: Vec<Value> = (0..40)
        .map(|i| json!({"op": "copy", "from": "/data", "path": format!("/data/c{i}")}))
        .collect();
    let (code, body) = json_patch(&server, &path, doubling).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    // As kube-apiserver: a JSON patch that fails on the object does not say why.
    assert_eq!(
        body["message"], "the server rejected our request due to an error in our request",
        "{body}"
    );

    let mut nesting = Vec::new();
    let mut deep = json!([]);
    for _ in 1..100 {
        deep = json!([deep]);
    }
    for _ in 0..1000 {
        nesting.push(json!({"op": "add", "path": "/metadata/annotations", "value": deep}));
        nesting.push(json!({"op": "move", "from": "/data", "path": format!("/metadata/annotations{}/-", "/0".repeat(98))}));
        nesting.push(json!({"op": "move", "from": "/metadata/annotations", "path": "/data"}));
    }
    let (code, body) = json_patch(&server, &path, nesting).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["reason"], "Invalid", "{body}");

    let (code, body) = server.request("GET", &path, None).await;
    assert_eq!(code, StatusCode::OK, "the server goes on: {body}");
    assert_eq!(
        body["data"]["a"].as_str().map(str::len),
        Some(1000),
        "nothing changed"
    );
}

#[tokio::test]
async fn objects_cannot_grow_past_what_etcd_stores() {
    let server = FakeApiServer::start().await.unwrap();
    configmap(&server, "big", json!({"a": "x".repeat(1024 * 1024)})).await;
    let grow = json!({"data": {"b": "y".repeat(1024 * 1024)}});
    let path = format!("{CONFIGMAPS}/big");
    let (code, body) = server.request("PATCH", &path, grow).await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert_eq!(body["message"], "etcdserver: request is too large");
    let (code, body) = server.request("GET", &path, None).await;
    assert_eq!(code, StatusCode::OK);
    assert!(body["data"].get("b").is_none(), "nothing was stored");
}

#[tokio::test]
async fn watches_from_the_largest_versions_with_the_longest_timeouts_are_served() {
    let server = FakeApiServer::start().await.unwrap();
    let watch = |rv: u64, timeout: String| {
        Request::builder()
            .uri(format!(
                "{CONFIGMAPS}?watch=true&resourceVersion={rv}&timeoutSeconds={timeout}"
            ))
            .header("host", server.addr().to_string())
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap()
    };
    let response = send(&server, watch(u64::MAX, i64::MAX.to_string())).await;
    assert_eq!(response.status(), StatusCode::OK);
    // A timeout beyond Go's int64 is refused as kube-apiserver refuses it.
    let response = send(&server, watch(u64::MAX, u64::MAX.to_string())).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_watch_list_from_a_future_version_fails_with_an_error_event() {
    let server = FakeApiServer::start().await.unwrap();
    let request = Request::builder()
        .uri(format!(
            "{CONFIGMAPS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=999999999"
        ))
        .header("host", server.addr().to_string())
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let response = send(&server, request).await;
    assert_eq!(response.status(), StatusCode::OK);
    let body = tokio::time::timeout(DEADLINE, response.into_body().collect())
        .await
        .expect("the stream ends after the wait")
        .expect("the body was read")
        .to_bytes();
    let events: Vec<Value> = body
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).unwrap())
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    let status = &events[0]["object"];
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(
        (status["code"].as_u64(), status["reason"].as_str()),
        (Some(504), Some("Timeout"))
    );
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("Timeout: Too large resource version: 999999999, current: ")
    );
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
}
