//! The API's semantics as a client sees them on the wire: discovery, CRDs, watches, lifecycle
//! rules, errors, faults, control, persistence.

use std::time::Duration;

use http::header::CONTENT_TYPE;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt as _;
use kopf_fake_apiserver::{ApiRequest, FakeApiServer, Fault, PatchType, TestClient, fixtures};
use serde_json::{Value, json};

use crate::support::{DEADLINE, send, wait};

/// The KopfExample CRD with this schema of its objects, a scale subresource, and a second
/// version `v2` served from the same storage.
fn crd(schema: Value) -> Value {
    let mut crd = fixtures::kopfexample_crd_with_schema(schema.clone());
    crd["spec"]["versions"][0]["subresources"]["scale"] =
        json!({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"});
    let v2 = json!({"name": "v2", "served": true, "storage": false,
                    "schema": {"openAPIV3Schema": schema}});
    crd["spec"]["versions"]
        .as_array_mut()
        .expect("the CRD's versions")
        .push(v2);
    crd
}

async fn with_crd(server: &FakeApiServer, schema: Value) {
    server.apply_value(crd(schema)).await;
}

const KEX: &str = fixtures::KOPFEXAMPLES;

#[tokio::test]
async fn discovery_reports_a_recent_kubernetes_and_its_resources() {
    let server = FakeApiServer::start().await.unwrap();
    let (code, version) = server.request("GET", "/version", None).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(version["major"], "1");
    assert_eq!(version["minor"], "33");

    let (_, core) = server.request("GET", "/api/v1", None).await;
    let names: Vec<&str> = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for expected in [
        "namespaces",
        "configmaps",
        "secrets",
        "pods",
        "pods/status",
        "services",
        "serviceaccounts",
        "events",
    ] {
        assert!(names.contains(&expected), "{expected} not in {names:?}");
    }
    let (_, groups) = server.request("GET", "/apis", None).await;
    let groups: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    for expected in [
        "apps",
        "coordination.k8s.io",
        "events.k8s.io",
        "apiextensions.k8s.io",
        "admissionregistration.k8s.io",
    ] {
        assert!(groups.contains(&expected), "{expected} not in {groups:?}");
    }

    // Aggregated discovery answers in its own media type, which clients check.
    let request = ApiRequest::new("GET", "/apis").header(
        http::header::ACCEPT,
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
    );
    let answer = server.send(request).await;
    assert_eq!(
        answer.headers[CONTENT_TYPE],
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    let body = answer.json();
    assert_eq!(body["kind"], "APIGroupDiscoveryList");
    let apps = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "apps")
        .unwrap();
    let deployments = apps["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "deployments")
        .unwrap();
    assert_eq!(deployments["resource"], "deployments");
    assert!(
        deployments["subresources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["subresource"] == "scale")
    );

    // A CRD appears in discovery and in kube-rs's discovery once created.
    with_crd(&server, fixtures::kopfexample_schema()).await;
    let (_, group) = server.request("GET", "/apis/kopf.dev", None).await;
    assert_eq!(group["preferredVersion"]["version"], "v1");
    let discovery = kube::Discovery::new(server.client()).run().await.unwrap();
    let (resource, caps) = discovery
        .resolve_gvk(&kube::api::GroupVersionKind::gvk(
            "kopf.dev",
            "v1",
            "KopfExample",
        ))
        .unwrap();
    assert_eq!(resource.plural, "kopfexamples");
    assert!(
        caps.subresources
            .iter()
            .any(|(r, _)| r.plural.ends_with("status")),
        "{:?}",
        caps.subresources
    );

    // OpenAPI v3: kubectl looks for fieldValidation on the PATCH operation of the kind.
    let (_, root) = server.request("GET", "/openapi/v3", None).await;
    let url = root["paths"]["apis/kopf.dev/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, document) = server.request("GET", &url, None).await;
    assert_eq!(code, StatusCode::OK);
    let item =
        &document["paths"]["/apis/kopf.dev/v1/namespaces/{namespace}/kopfexamples/{name}"]["patch"];
    assert_eq!(
        item["x-kubernetes-group-version-kind"]["kind"],
        "KopfExample"
    );
    assert!(
        item["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
    );
    server.stop().await;
}

#[tokio::test]
async fn objects_get_identity_versions_and_generations() {
    let server = FakeApiServer::start().await.unwrap();
    with_crd(&server, fixtures::kopfexample_schema()).await;
    let (code, created) = server
        .request(
            "POST",
            KEX,
            fixtures::kopfexample("one", json!({"field": "a"})),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let meta = &created["metadata"];
    assert_eq!(meta["generation"], 1);
    assert_eq!(meta["namespace"], "default");
    assert!(meta["uid"].as_str().unwrap().len() >= 32);
    assert!(meta["creationTimestamp"].as_str().unwrap().ends_with('Z'));
    let rv1: u64 = meta["resourceVersion"].as_str().unwrap().parse().unwrap();

    // A spec change bumps generation; a status change (status subresource) does not.
    let (_, changed) = server
        .request(
            "PATCH",
            &format!("{KEX}/one"),
            json!({"spec": {"field": "b"}}),
        )
        .await;
    assert_eq!(changed["metadata"]["generation"], 2);
    let rv2: u64 = changed["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1);
    let (_, status) = server
        .request(
            "PATCH",
            &format!("{KEX}/one/status"),
            json!({"status": {"phase": "x"}, "spec": {"field": "ignored"}}),
        )
        .await;
    assert_eq!(status["metadata"]["generation"], 2);
    assert_eq!(status["status"]["phase"], "x");
    assert_eq!(
        status["spec"]["field"], "b",
        "a status write changes only the status"
    );
    // A main-resource write leaves the status alone.
    let (_, main) = server
        .request(
            "PATCH",
            &format!("{KEX}/one"),
            json!({"status": {"phase": "y"}}),
        )
        .await;
    assert_eq!(main["status"]["phase"], "x");

    // A write that changes nothing keeps the resourceVersion.
    let before = status["metadata"]["resourceVersion"].clone();
    let (_, same) = server
        .request(
            "PATCH",
            &format!("{KEX}/one"),
            json!({"spec": {"field": "b"}}),
        )
        .await;
    assert_eq!(same["metadata"]["resourceVersion"], before);

    // generateName makes a name; the same name twice is a conflict.
    let (code, generated) = server
        .request(
            "POST",
            KEX,
            json!({"metadata": {"generateName": "kex-"}, "spec": {}}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let name = generated["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("kex-") && name.len() == 9, "{name}");
    let (code, error) = server
        .request("POST", KEX, fixtures::kopfexample("one", json!({})))
        .await;
    assert_eq!(
        (code, error["reason"].as_str()),
        (StatusCode::CONFLICT, Some("AlreadyExists"))
    );

    // A stale resourceVersion on update is a conflict.
    let mut stale = created.clone();
    stale["spec"]["field"] = json!("c");
    let (code, error) = server.request("PUT", &format!("{KEX}/one"), stale).await;
    assert_eq!(
        (code, error["reason"].as_str()),
        (StatusCode::CONFLICT, Some("Conflict"))
    );
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("the object has been modified")
    );
    server.stop().await;
}

#[tokio::test]
async fn several_versions_are_served_from_one_storage() {
    let server = FakeApiServer::start().await.unwrap();
    with_crd(&server, fixtures::kopfexample_schema()).await;
    server
        .request(
            "POST",
            KEX,
            fixtures::kopfexample("one", json!({"field": "a"})),
        )
        .await;
    let (code, v2) = server
        .request(
            "GET",
            "/apis/kopf.dev/v2/namespaces/default/kopfexamples/one",
            None,
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(v2["apiVersion"], "kopf.dev/v2");
    assert_eq!(v2["spec"]["field"], "a");
    let (_, crd) = server
        .request(
            "GET",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/kopfexamples.kopf.dev",
            None,
        )
        .await;
    let conditions = crd["status"]["conditions"].as_array().unwrap();
    for kind in ["Established", "NamesAccepted"] {
        assert!(
            conditions
                .iter()
                .any(|c| c["type"] == kind && c["status"] == "True"),
            "{kind}: {conditions:?}"
        );
    }
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    server.stop().await;
}

#[tokio::test]
async fn the_scale_subresource_reads_and_writes_replicas() {
    let server = FakeApiServer::start().await.unwrap();
    with_crd(&server, fixtures::kopfexample_schema()).await;
    server
        .request(
            "POST",
            KEX,
            fixtures::kopfexample("one", json!({"replicas": 1})),
        )
        .await;
    let (code, scale) = server
        .request("GET", &format!("{KEX}/one/scale"), None)
        .await;
    assert_eq!(code, StatusCode::OK, "{scale}");
    assert_eq!(
        (scale["kind"].as_str(), scale["spec"]["replicas"].as_i64()),
        (Some("Scale"), Some(1))
    );
    let (code, scaled) = server
        .request(
            "PATCH",
            &format!("{KEX}/one/scale"),
            json!({"spec": {"replicas": 3}}),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{scaled}");
    assert_eq!(scaled["spec"]["replicas"], 3);
    let (_, object) = server.request("GET", &format!("{KEX}/one"), None).await;
    assert_eq!(object["spec"]["replicas"], 3);
    server.stop().await;
}

#[tokio::test]
async fn deleting_a_crd_deletes_its_objects_and_stops_serving_it() {
    let server = FakeApiServer::start().await.unwrap();
    with_crd(&server, fixtures::kopfexample_schema()).await;
    server
        .request("POST", KEX, fixtures::kopfexample("one", json!({})))
        .await;
    server
        .request(
            "POST",
            KEX,
            json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}, "spec": {}}),
        )
        .await;
    let (code, _) = server
        .request(
            "DELETE",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/kopfexamples.kopf.dev",
            None,
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    // The object with a finalizer holds the CRD (and itself) until the finalizer goes.
    let (code, held) = server.request("GET", &format!("{KEX}/held"), None).await;
    assert_eq!(code, StatusCode::OK);
    assert!(held["metadata"]["deletionTimestamp"].is_string());
    let (code, _) = server.request("GET", &format!("{KEX}/one"), None).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    server
        .request(
            "PATCH",
            &format!("{KEX}/held"),
            json!({"metadata": {"finalizers": null}}),
        )
        .await;
    let (code, _) = server
        .request(
            "GET",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/kopfexamples.kopf.dev",
            None,
        )
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    let (code, body) = server.request("GET", KEX, None).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{body}");
    let (code, _) = server.request("GET", "/apis/kopf.dev/v1", None).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    server.stop().await;
}

#[tokio::test]
async fn finalizers_hold_objects_until_they_are_removed() {
    let server = FakeApiServer::start().await.unwrap();
    let path = "/api/v1/namespaces/default/configmaps";
    server
        .request(
            "POST",
            path,
            json!({"metadata": {"name": "cm", "finalizers": ["example.com/x"]}}),
        )
        .await;
    let (code, marked) = server.request("DELETE", &format!("{path}/cm"), None).await;
    assert_eq!(code, StatusCode::OK);
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    // No new finalizers on a terminating object.
    let (code, error) = server
        .request(
            "PATCH",
            &format!("{path}/cm"),
            json!({"metadata": {"finalizers": ["example.com/x", "example.com/y"]}}),
        )
        .await;
    assert_eq!(
        (code, error["reason"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("Invalid"))
    );
    let removal = json!([{"op": "remove", "path": "/metadata/finalizers"}]);
    let request = ApiRequest::new("PATCH", format!("{path}/cm"))
        .json(removal)
        .patch_type(PatchType::Json);
    let answer = server.send(request).await;
    let (code, last) = (answer.status, answer.json());
    assert_eq!(code, StatusCode::OK);
    // The answer is the object as updated (its finalizers gone), as the real server's is.
    assert!(last["metadata"]["deletionTimestamp"].is_string(), "{last}");
    assert!(last["metadata"]["finalizers"].is_null(), "{last}");
    let (code, _) = server.request("GET", &format!("{path}/cm"), None).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    server.stop().await;
}

async fn owned_configmap(server: &FakeApiServer, name: &str, owner: &Value, finalizers: Value) {
    let reference = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"], "blockOwnerDeletion": true});
    let (code, body) = server.request("POST", "/api/v1/namespaces/default/configmaps", json!({"metadata": {"name": name, "ownerReferences": [reference], "finalizers": finalizers}}))
    .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
}

#[tokio::test]
async fn garbage_collection_follows_the_propagation_policy() {
    let server = FakeApiServer::start().await.unwrap();
    let path = "/api/v1/namespaces/default/configmaps";
    let exists = |name: &str| {
        let server = &server;
        let path = format!("{path}/{name}");
        async move { server.request("GET", &path, None).await.0 == StatusCode::OK }
    };

    // Background (the default): the owner goes at once, then its dependents.
    let (_, owner) = server
        .request("POST", path, json!({"metadata": {"name": "owner1"}}))
        .await;
    owned_configmap(&server, "child1", &owner, json!([])).await;
    server
        .request("DELETE", &format!("{path}/owner1"), None)
        .await;
    assert!(!exists("owner1").await);
    assert!(!exists("child1").await);

    // Foreground: the owner waits until its dependents are gone.
    let (_, owner) = server
        .request("POST", path, json!({"metadata": {"name": "owner2"}}))
        .await;
    owned_configmap(&server, "child2", &owner, json!(["example.com/hold"])).await;
    server
        .request(
            "DELETE",
            &format!("{path}/owner2"),
            Some(json!({"propagationPolicy": "Foreground"})),
        )
        .await;
    let (_, waiting) = server.request("GET", &format!("{path}/owner2"), None).await;
    assert!(
        waiting["metadata"]["finalizers"]
            .as_array()
            .unwrap()
            .contains(&json!("foregroundDeletion"))
    );
    let (_, child) = server.request("GET", &format!("{path}/child2"), None).await;
    assert!(child["metadata"]["deletionTimestamp"].is_string());
    server
        .request(
            "PATCH",
            &format!("{path}/child2"),
            json!({"metadata": {"finalizers": null}}),
        )
        .await;
    assert!(!exists("child2").await);
    assert!(!exists("owner2").await);

    // Orphan: dependents stay, without the reference.
    let (_, owner) = server
        .request("POST", path, json!({"metadata": {"name": "owner3"}}))
        .await;
    owned_configmap(&server, "child3", &owner, json!([])).await;
    server
        .request(
            "DELETE",
            &format!("{path}/owner3?propagationPolicy=Orphan"),
            None,
        )
        .await;
    assert!(!exists("owner3").await);
    let (_, orphan) = server.request("GET", &format!("{path}/child3"), None).await;
    assert!(
        orphan["metadata"]["ownerReferences"]
            .as_array()
            .is_none_or(|r| r.is_empty()),
        "{orphan}"
    );
    server.stop().await;
}

#[tokio::test]
async fn namespace_deletion_empties_the_namespace_first() {
    let server = FakeApiServer::start().await.unwrap();
    server
        .request(
            "POST",
            "/api/v1/namespaces",
            json!({"metadata": {"name": "doomed"}}),
        )
        .await;
    let path = "/api/v1/namespaces/doomed/configmaps";
    server
        .request("POST", path, json!({"metadata": {"name": "plain"}}))
        .await;
    server
        .request(
            "POST",
            path,
            json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
        )
        .await;
    server
        .request("DELETE", "/api/v1/namespaces/doomed", None)
        .await;
    let (code, ns) = server
        .request("GET", "/api/v1/namespaces/doomed", None)
        .await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(ns["status"]["phase"], "Terminating");
    assert_eq!(
        server
            .request("GET", &format!("{path}/plain"), None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    let (code, error) = server
        .request("POST", path, json!({"metadata": {"name": "late"}}))
        .await;
    assert_eq!(
        (code, error["reason"].as_str()),
        (StatusCode::FORBIDDEN, Some("Forbidden"))
    );
    server
        .request(
            "PATCH",
            &format!("{path}/held"),
            json!({"metadata": {"finalizers": null}}),
        )
        .await;
    assert_eq!(
        server
            .request("GET", "/api/v1/namespaces/doomed", None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    // Creating in a namespace that does not exist is a 404 naming the namespace.
    let (code, error) = server
        .request("POST", path, json!({"metadata": {"name": "x"}}))
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(error["message"], "namespaces \"doomed\" not found");
    server.stop().await;
}

/// Reads a watch stream's events until `count` arrived or the stream ended.
async fn watch_events(server: &FakeApiServer, path: &str, count: usize) -> Vec<Value> {
    let request = Request::builder()
        .uri(path)
        .header("host", server.addr().to_string())
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let response = send(server, request).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let mut buffer = Vec::new();
    let mut events = Vec::new();
    let read = async {
        while events.len() < count {
            let Some(frame) = body.frame().await else {
                break;
            };
            let Ok(data) = frame.unwrap().into_data() else {
                continue;
            };
            buffer.extend_from_slice(&data);
            while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                let event = serde_json::from_slice::<Value>(&line).unwrap();
                // The namespace's own CA bundle is not one of the test's objects.
                if event["object"]["metadata"]["name"] != "kube-root-ca.crt" {
                    events.push(event);
                }
            }
        }
    };
    tokio::time::timeout(DEADLINE, read)
        .await
        .expect("the watch delivered in time");
    events
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["type"].as_str().unwrap(),
                e["object"]["metadata"]["name"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test]
async fn watches_start_with_the_state_and_replay_from_versions() {
    let server = FakeApiServer::start().await.unwrap();
    let path = "/api/v1/namespaces/default/configmaps";
    let (_, a) = server
        .request("POST", path, json!({"metadata": {"name": "a"}}))
        .await;
    let rv_a = a["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    server
        .request("POST", path, json!({"metadata": {"name": "b"}}))
        .await;
    server
        .request("PATCH", &format!("{path}/a"), json!({"data": {"k": "v"}}))
        .await;
    server.request("DELETE", &format!("{path}/b"), None).await;

    // Without a version: the current state as ADDED events.
    let events = watch_events(&server, &format!("{path}?watch=true"), 1).await;
    assert_eq!(kinds(&events), ["ADDED a"]);
    // From a version: every change after it, in order.
    let events = watch_events(
        &server,
        &format!("{path}?watch=true&resourceVersion={rv_a}"),
        3,
    )
    .await;
    assert_eq!(kinds(&events), ["ADDED b", "MODIFIED a", "DELETED b"]);
    // Streaming lists: the state, then a bookmark marking the end of the initial events.
    let events = watch_events(
        &server,
        &format!("{path}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"),
        2,
    )
    .await;
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[1]["type"], "BOOKMARK");
    assert_eq!(
        events[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    // An empty resourceVersion (kube-rs always sends the parameter) is an unset one, as the
    // real server takes it.
    let events = watch_events(
        &server,
        &format!("{path}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion="),
        2,
    )
    .await;
    assert_eq!(
        (events[0]["type"].as_str(), events[1]["type"].as_str()),
        (Some("ADDED"), Some("BOOKMARK"))
    );

    // Once the history no longer reaches back: HTTP 200 with one ERROR event, 410 Expired.
    server.compact();
    let events = watch_events(
        &server,
        &format!("{path}?watch=true&resourceVersion={rv_a}"),
        2,
    )
    .await;
    assert_eq!(
        events.len(),
        1,
        "the stream ends after the error: {events:?}"
    );
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(events[0]["object"]["code"], 410);
    assert_eq!(events[0]["object"]["reason"], "Expired");
    // A list's continue token from before the compaction is expired too, with HTTP 410.
    for name in ["c", "d"] {
        server
            .request("POST", path, json!({"metadata": {"name": name}}))
            .await;
    }
    let (_, page) = server
        .request("GET", &format!("{path}?limit=1"), None)
        .await;
    let token = page["metadata"]["continue"].as_str().unwrap().to_string();
    server
        .request("POST", path, json!({"metadata": {"name": "e"}}))
        .await;
    server.compact();
    let (code, error) = server
        .request("GET", &format!("{path}?limit=1&continue={token}"), None)
        .await;
    assert_eq!(
        (code, error["reason"].as_str()),
        (StatusCode::GONE, Some("Expired"))
    );
    server.stop().await;
}

#[tokio::test]
async fn watches_follow_objects_into_and_out_of_their_selectors() {
    let server = FakeApiServer::start().await.unwrap();
    let path = "/api/v1/namespaces/default/configmaps";
    let (_, list) = server.request("GET", path, None).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    server
        .request(
            "POST",
            path,
            json!({"metadata": {"name": "x", "labels": {"app": "no"}}}),
        )
        .await;
    server
        .request(
            "PATCH",
            &format!("{path}/x"),
            json!({"metadata": {"labels": {"app": "yes"}}}),
        )
        .await;
    server
        .request("PATCH", &format!("{path}/x"), json!({"data": {"k": "v"}}))
        .await;
    server
        .request(
            "PATCH",
            &format!("{path}/x"),
            json!({"metadata": {"labels": {"app": "no"}}}),
        )
        .await;
    let events = watch_events(
        &server,
        &format!("{path}?watch=true&resourceVersion={rv}&labelSelector=app%3Dyes"),
        3,
    )
    .await;
    assert_eq!(kinds(&events), ["ADDED x", "MODIFIED x", "DELETED x"]);
    let (code, error) = server
        .request(
            "GET",
            &format!("{path}?labelSelector=app%20in%20(yes"),
            None,
        )
        .await;
    assert_eq!(
        (code, error["reason"].as_str()),
        (StatusCode::BAD_REQUEST, Some("BadRequest"))
    );
    let (code, _) = server
        .request("GET", &format!("{path}?fieldSelector=spec.bogus%3Dx"), None)
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    server.stop().await;
}

#[tokio::test]
async fn watches_end_on_timeout_and_send_bookmarks() {
    let server = FakeApiServer::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .await
        .unwrap();
    let path = "/api/v1/namespaces/default/configmaps";
    let events = watch_events(
        &server,
        &format!("{path}?watch=true&timeoutSeconds=1&allowWatchBookmarks=true"),
        1000,
    )
    .await;
    assert!(events.iter().any(|e| e["type"] == "BOOKMARK"), "{events:?}");
    assert!(events.iter().all(|e| e["type"] == "BOOKMARK"), "{events:?}");
    server.stop().await;
}

/// A request that must fail: method, path, content type, body, expected code and reason.
type BadRequest<'a> = (Method, &'a str, &'a str, Vec<u8>, StatusCode, &'a str);

#[tokio::test]
async fn bad_input_gets_status_errors_and_changes_nothing() {
    let server = FakeApiServer::start().await.unwrap();
    let path = "/api/v1/namespaces/default/configmaps";
    let before = server.stats().resource_version;
    let missing = format!("{path}/missing");
    let cases: Vec<BadRequest<'_>> = vec![
        (
            Method::POST,
            path,
            "application/json",
            b"{not json".to_vec(),
            StatusCode::BAD_REQUEST,
            "BadRequest",
        ),
        (
            Method::POST,
            path,
            "application/json",
            b"[1, 2]".to_vec(),
            StatusCode::BAD_REQUEST,
            "BadRequest",
        ),
        (
            Method::POST,
            path,
            "application/json",
            br#"{"kind": "Secret", "metadata": {"name": "x"}}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "BadRequest",
        ),
        (
            Method::POST,
            path,
            "application/json",
            br#"{"metadata": {"name": "Not_Valid"}}"#.to_vec(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
        ),
        (
            Method::POST,
            path,
            "application/json",
            br#"{"metadata": {}}"#.to_vec(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
        ),
        (
            Method::POST,
            path,
            "application/json",
            vec![b' '; 3 * 1024 * 1024 + 1],
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
        ),
        (
            Method::GET,
            "/api/v1/namespaces/default/nonsense",
            "application/json",
            vec![],
            StatusCode::NOT_FOUND,
            "NotFound",
        ),
        (
            Method::GET,
            "/apis/nope.example.com/v1/things",
            "application/json",
            vec![],
            StatusCode::NOT_FOUND,
            "NotFound",
        ),
        (
            Method::PUT,
            path,
            "application/json",
            b"{}".to_vec(),
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
        ),
        (
            Method::PATCH,
            &missing,
            PatchType::Merge.content_type(),
            b"{}".to_vec(),
            StatusCode::NOT_FOUND,
            "NotFound",
        ),
        (
            Method::PATCH,
            "/api/v1/namespaces/default",
            "text/plain",
            b"{}".to_vec(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
        ),
        (
            Method::PATCH,
            "/api/v1/namespaces/default",
            PatchType::Json.content_type(),
            b"{\"op\": 1}".to_vec(),
            StatusCode::BAD_REQUEST,
            "BadRequest",
        ),
    ];
    for (method, path, content_type, body, code, reason) in cases {
        let request = ApiRequest::new(&method, path)
            .bytes(body)
            .header(CONTENT_TYPE, content_type);
        let answer = server.send(request).await;
        let (got, status) = (answer.status, answer.json());
        assert_eq!(got, code, "{method} {path}: {status}");
        assert_eq!(status["kind"], "Status", "{method} {path}: {status}");
        assert_eq!(status["reason"], reason, "{method} {path}: {status}");
        assert_eq!(status["code"], code.as_u16());
    }
    assert_eq!(
        server.stats().resource_version,
        before,
        "failed requests changed nothing"
    );
    server.stop().await;
}

#[tokio::test]
async fn strategic_merge_patches_are_for_built_ins_only() {
    let server = FakeApiServer::start().await.unwrap();
    with_crd(&server, fixtures::kopfexample_schema()).await;
    server
        .request("POST", KEX, fixtures::kopfexample("one", json!({})))
        .await;
    let strategic = |path: String, patch: Value| {
        let request = ApiRequest::new("PATCH", path)
            .json(patch)
            .patch_type(PatchType::StrategicMerge);
        server.send(request)
    };
    let answer = strategic(format!("{KEX}/one"), json!({"spec": {"a": 1}})).await;
    let (code, error) = (answer.status, answer.json());
    assert_eq!(
        (code, error["reason"].as_str()),
        (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Some("UnsupportedMediaType")
        )
    );
    let labels = json!({"metadata": {"labels": {"a": "b"}}});
    let answer = strategic("/api/v1/namespaces/default".into(), labels).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.json());
    server.stop().await;
}

#[tokio::test]
async fn field_validation_prunes_warns_or_rejects_unknown_fields() {
    let server = FakeApiServer::start().await.unwrap();
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "required": ["size"], "properties": {
            "size": {"type": "integer", "minimum": 1},
            "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
        }},
    }});
    with_crd(&server, schema).await;
    // Warn (the default): pruned, with a Warning header.
    let created = |path: String, name: &str| {
        let object = fixtures::kopfexample(name, json!({"size": 1, "extra": true}));
        server.send(ApiRequest::new("POST", path).json(object))
    };
    let answer = created(KEX.into(), "a").await;
    let body = answer.json();
    assert_eq!(answer.status, StatusCode::CREATED, "{body}");
    assert!(body["spec"].get("extra").is_none());
    assert_eq!(body["spec"]["mode"], "fast", "defaults are applied");
    let warning = answer
        .headers
        .get("warning")
        .expect("a warning header")
        .to_str()
        .unwrap();
    assert!(
        warning.contains(r#"unknown field \"spec.extra\""#),
        "{warning}"
    );
    // Strict: 400 naming the field.
    let answer = created(format!("{KEX}?fieldValidation=Strict"), "b").await;
    let error = answer.json();
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("unknown field \"spec.extra\""),
        "{error}"
    );
    // Ignore: pruned silently.
    let answer = created(format!("{KEX}?fieldValidation=Ignore"), "c").await;
    assert_eq!(answer.status, StatusCode::CREATED);
    assert!(answer.headers.get("warning").is_none());
    // Types, required fields and enums: 422 Invalid with the fields' paths.
    let (code, error) = server
        .request(
            "POST",
            KEX,
            fixtures::kopfexample("d", json!({"size": "big", "mode": "odd"})),
        )
        .await;
    assert_eq!(
        (code, error["reason"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("Invalid"))
    );
    let fields: Vec<&str> = error["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["field"].as_str())
        .collect();
    assert!(
        fields.contains(&"spec.size") && fields.contains(&"spec.mode"),
        "{error}"
    );
    let (code, error) = server
        .request("POST", KEX, fixtures::kopfexample("e", json!({})))
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        error["message"].as_str().unwrap().contains("spec.size"),
        "{error}"
    );
    server.stop().await;
}

#[tokio::test]
async fn faults_answer_delay_and_cut_watches() {
    let server = FakeApiServer::start().await.unwrap();
    let path = "/api/v1/namespaces/default/configmaps";
    server.inject(
        Fault::too_many_requests(7)
            .verb("list")
            .resource("configmaps")
            .times(1),
    );
    let answer = server.send(ApiRequest::new("GET", path)).await;
    assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(answer.headers["retry-after"], "7");
    assert_eq!(answer.json()["details"]["retryAfterSeconds"], 7);
    assert_eq!(
        server.request("GET", path, None).await.0,
        StatusCode::OK,
        "the rule fired once"
    );

    server.inject(
        Fault::respond(503)
            .verb("create")
            .resource("configmaps")
            .times(1),
    );
    let (code, _) = server
        .request("POST", path, json!({"metadata": {"name": "unlucky"}}))
        .await;
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
    let (code, _) = server
        .request("POST", path, json!({"metadata": {"name": "lucky"}}))
        .await;
    assert_eq!(code, StatusCode::CREATED);
    server.clear_faults();

    server.inject(Fault::close_watch_after(1).verb("watch"));
    server
        .request("POST", path, json!({"metadata": {"name": "another"}}))
        .await;
    let events = watch_events(&server, &format!("{path}?watch=true"), 10).await;
    assert_eq!(events.len(), 1, "the stream was cut after one event");
    server.clear_faults();

    let stats = server.stats();
    assert_eq!(stats.count("list", "configmaps"), 2);
    assert_eq!(stats.count("create", "configmaps"), 3);
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.verb == "create" && r.name.is_none() && r.code == 503)
    );

    // The same over HTTP, for tests in other languages.
    let (code, _) = server
        .request(
            "POST",
            "/_fake/faults",
            json!({"verb": "get", "action": {"respond": {"code": 500}}}),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(
        server
            .request("GET", &format!("{path}/lucky"), None)
            .await
            .0,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    server.request("DELETE", "/_fake/faults", None).await;
    let (_, stats) = server.request("GET", "/_fake/stats", None).await;
    assert!(stats["open_connections"].as_u64().unwrap() >= 1);
    assert_eq!(stats["requests"]["get"]["configmaps"], 1);
    server.stop().await;
}

#[tokio::test]
async fn a_token_is_required_when_configured() {
    let server = FakeApiServer::builder()
        .token("secret")
        .start()
        .await
        .unwrap();
    let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(server.client());
    api.get("default")
        .await
        .expect("its own client sends the token");
    let mut config = server.config();
    config.auth_info.token = None;
    let anonymous = TestClient::new(kube::Client::try_from(config).unwrap());
    // Without a token, the request is system:anonymous's, whom no role lets list namespaces.
    let (code, _) = anonymous.request("GET", "/api/v1/namespaces", None).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    server.stop().await;
}

#[tokio::test]
async fn stopping_closes_every_connection() {
    let server = FakeApiServer::start().await.unwrap();
    let client = server.client();
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::default_namespaced(client.clone());
    api.list(&Default::default()).await.unwrap();
    assert!(server.stats().open_connections >= 1);
    let addr = server.addr();
    server.stop().await;
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "nothing listens after stop"
    );
    assert!(api.list(&Default::default()).await.is_err());
}

#[tokio::test]
async fn a_restart_drops_connections_and_keeps_data() {
    let server = FakeApiServer::start().await.unwrap();
    // A client of its own, whose connection stays open (pooled) until the restart drops it.
    let client = server.test_client();
    let kept = json!({"metadata": {"name": "kept"}});
    let (code, _) = client
        .request("POST", "/api/v1/namespaces/default/configmaps", kept)
        .await;
    assert_eq!(code, StatusCode::CREATED);
    let connections = server.stats().open_connections;
    assert!(connections >= 1);
    server.restart();
    wait("connections to drop", || async {
        (server.stats().open_connections == 0).then_some(())
    })
    .await;
    assert_eq!(
        server
            .request("GET", "/api/v1/namespaces/default/configmaps/kept", None)
            .await
            .0,
        StatusCode::OK
    );
    server.stop().await;
}

#[tokio::test]
async fn the_state_file_keeps_objects_across_restarts() {
    let file = std::env::temp_dir().join(format!("kopf-fake-state-{}.json", uuid_like()));
    let server = FakeApiServer::builder()
        .state_file(&file)
        .start()
        .await
        .unwrap();
    with_crd(&server, fixtures::kopfexample_schema()).await;
    let (_, created) = server
        .request(
            "POST",
            KEX,
            fixtures::kopfexample("persisted", json!({"field": "a"})),
        )
        .await;
    server.stop().await;

    let server = FakeApiServer::builder()
        .state_file(&file)
        .start()
        .await
        .unwrap();
    let (code, loaded) = server
        .request("GET", &format!("{KEX}/persisted"), None)
        .await;
    assert_eq!(code, StatusCode::OK, "{loaded}");
    assert_eq!(loaded["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(
        loaded["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    let (_, fresh) = server
        .request("POST", KEX, fixtures::kopfexample("fresh", json!({})))
        .await;
    let old: u64 = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let new: u64 = fresh["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(new > old, "versions keep increasing across restarts");
    server.stop().await;
    std::fs::remove_file(&file).ok();
}

fn uuid_like() -> String {
    format!(
        "{}-{:?}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_on_its_own_runtime_adds_no_task_to_ours() {
    let before = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    let server = FakeApiServer::builder()
        .start_on_own_runtime()
        .await
        .unwrap();
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::default_namespaced(server.client());
    let watch = api.watch(&Default::default(), "0").await.expect("watching");
    assert_eq!(server.stats().open_watches, 1);
    let addr = server.addr();
    server.stop().await;
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "nothing listens after stop"
    );
    drop(watch);
    drop(api);
    wait("the client's tasks to end", || async {
        (tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
            <= before)
            .then_some(())
    })
    .await;
}
