//! The test's client (`TestClient`, and the same helpers on `FakeApiServer`): requests
//! answered with their status and JSON whatever the status, the patch types and headers some
//! tests need, errors for requests without an answer, objects applied from YAML and JSON
//! documents, and the shared fixtures.

use std::panic::AssertUnwindSafe;

use futures::FutureExt as _;
use http::StatusCode;
use kopf_fake_apiserver::{
    ApiRequest, FakeApiServer, PatchType, RequestError, TestClient, fixtures,
};
use serde_json::{Value, json};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn requests_answer_with_their_status_and_json_whatever_the_status() {
    let server = FakeApiServer::start().await.unwrap();
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let (status, created) = server.request("POST", CONFIGMAPS, config.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["metadata"]["name"], "c");

    // An error is an answer like any other: its status and its `Status` object.
    let (status, error) = server.request("POST", CONFIGMAPS, config).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(error["reason"], "AlreadyExists");

    // A PATCH is a merge patch unless told otherwise; `null` removes.
    let path = format!("{CONFIGMAPS}/c");
    let (status, patched) = server
        .request("PATCH", &path, json!({"data": {"a": "1", "b": "2"}}))
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    let (_, patched) = server
        .request("PATCH", &path, json!({"data": {"a": null}}))
        .await;
    assert_eq!(patched["data"], json!({"b": "2"}));

    // The other patch types, by their content types.
    let request = ApiRequest::new("PATCH", &path)
        .json(json!([{"op": "add", "path": "/data/c", "value": "3"}]))
        .patch_type(PatchType::Json);
    let answer = server.send(request).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.json());
    assert_eq!(answer.json()["data"], json!({"b": "2", "c": "3"}));
    let request = ApiRequest::new("PATCH", &path)
        .json(json!({"metadata": {"labels": {"strategic": "yes"}}}))
        .patch_type(PatchType::StrategicMerge);
    assert_eq!(server.send(request).await.status, StatusCode::OK);
    let request = ApiRequest::new("PATCH", format!("{path}?fieldManager=test"))
        .bytes("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {d: '4'}\n")
        .patch_type(PatchType::Apply);
    let answer = server.send(request).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.json());
    assert_eq!(answer.json()["data"]["d"], "4");
    let content_types: Vec<Option<String>> = server
        .requests()
        .iter()
        .filter(|r| r.verb == "patch")
        .map(|r| r.content_type.clone())
        .collect();
    assert_eq!(
        content_types,
        [
            "application/merge-patch+json",
            "application/merge-patch+json",
            "application/json-patch+json",
            "application/strategic-merge-patch+json",
            "application/apply-patch+yaml",
        ]
        .map(|t| Some(t.to_string()))
    );

    // Headers go as given: a User-Agent, which faults can aim at.
    server.inject(kopf_fake_apiserver::Fault::respond(500).user_agent("doomed/"));
    let aimed = ApiRequest::new("GET", &path).header(http::header::USER_AGENT, "doomed/1.0");
    assert_eq!(server.send(aimed).await.status, 500);
    assert_eq!(server.request("GET", &path, None).await.0, StatusCode::OK);
    server.clear_faults();

    // An answer that is not JSON comes as a JSON string.
    let (status, text) = server.request("GET", "/healthz", None).await;
    assert_eq!((status, text), (StatusCode::OK, Value::from("ok")));
    server.stop().await;
}

#[tokio::test]
async fn a_request_without_an_answer_is_an_error_or_a_panic_that_names_it() {
    let server = FakeApiServer::start().await.unwrap();
    let client = server.test_client();
    server.stop().await;

    let error = client
        .try_request("GET", "/api/v1/namespaces", None)
        .await
        .expect_err("nothing listens");
    assert!(
        matches!(error, RequestError::Unanswered { .. }),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with("GET /api/v1/namespaces got no answer: "),
        "{error}"
    );

    let panicked = AssertUnwindSafe(client.request("DELETE", "/api/v1/namespaces/x", None))
        .catch_unwind()
        .await
        .expect_err("a test's request panics");
    let message = panicked
        .downcast_ref::<String>()
        .expect("a formatted message");
    assert!(
        message.starts_with("DELETE /api/v1/namespaces/x got no answer"),
        "{message}"
    );
}

#[tokio::test]
async fn success_turns_an_error_status_into_an_error() {
    let server = FakeApiServer::start().await.unwrap();
    let client = server.test_client();
    let missing = ApiRequest::new("GET", format!("{CONFIGMAPS}/missing"));
    let error = client
        .try_send(missing)
        .await
        .expect("an answer")
        .success()
        .expect_err("404 is no success");
    match &error {
        RequestError::Refused { status, body, .. } => {
            assert_eq!(*status, StatusCode::NOT_FOUND);
            assert_eq!(body["reason"], "NotFound");
        }
        other => panic!("refused, not {other:?}"),
    }
    assert!(
        error.to_string().starts_with(&format!(
            "GET {CONFIGMAPS}/missing was answered 404 Not Found: "
        )),
        "{error}"
    );
    let listed = client
        .try_send(ApiRequest::new("GET", CONFIGMAPS))
        .await
        .and_then(|answer| answer.success())
        .expect("a list");
    assert_eq!(listed.json()["kind"], "ConfigMapList");
    drop(client);
    server.stop().await;
}

#[tokio::test]
async fn objects_are_applied_from_yaml_and_json_documents_and_waited_for() {
    let server = FakeApiServer::start().await.unwrap();
    // Any kube::Client will do: the helpers know nothing of the fake server.
    let client = TestClient::new(server.client());
    let crd = client.apply(fixtures::KOPFEXAMPLE_CRD).await;
    let established = &crd[0]["status"]["conditions"];
    assert!(
        established
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True"),
        "the CRD is returned once established: {established}"
    );
    let applied = client
        .apply(
            r#"
            apiVersion: kopf.dev/v1
            kind: KopfExample
            metadata: {name: kex}
            spec: {field: value}
            ---
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elsewhere"}}
            "#,
        )
        .await;
    assert_eq!(applied.len(), 2);
    assert_eq!(applied[0]["metadata"]["namespace"], "default");
    assert_eq!(applied[1]["kind"], "Namespace");

    // Applied again: replaced, the same object.
    let replaced = client
        .apply_value(fixtures::kopfexample("kex", json!({"field": "other"})))
        .await;
    assert_eq!(replaced["metadata"]["uid"], applied[0]["metadata"]["uid"]);
    assert_eq!(replaced["spec"], json!({"field": "other"}));

    // By the names kubectl knows.
    for resource in [
        "kopfexamples",
        "kopfexample",
        "KopfExample",
        "kopfexamples.kopf.dev",
    ] {
        let found = client.get(resource, None, "kex").await;
        assert_eq!(found.unwrap()["spec"]["field"], "other", "{resource}");
    }
    assert!(
        client
            .get("kopfexamples", "elsewhere", "kex")
            .await
            .is_none()
    );

    let with_finalizer = json!({"metadata": {"finalizers": ["example.com/hold"]}});
    server
        .patch("kopfexamples", "default", "kex", with_finalizer)
        .await;
    server.delete("kopfexamples", "default", "kex").await;
    let held = server
        .wait_for("kopfexamples", "default", "kex", |o| {
            o["metadata"]["deletionTimestamp"].is_string()
        })
        .await;
    assert_eq!(held["metadata"]["finalizers"], json!(["example.com/hold"]));
    let release = json!({"metadata": {"finalizers": null}});
    server
        .patch("kopfexamples", "default", "kex", release)
        .await;
    server
        .wait_for_deletion("kopfexamples", "default", "kex")
        .await;
    drop(client);
    server.stop().await;
}

#[tokio::test]
async fn the_fixtures_are_kopfs_example_and_crds_of_its_shape() {
    // `kubectl apply -f examples/crd.yaml` applies the fixture itself.
    let linked = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/crd.yaml"
    ))
    .expect("examples/crd.yaml links to the fixture");
    assert_eq!(linked, fixtures::KOPFEXAMPLE_CRD);

    let server = FakeApiServer::start().await.unwrap();
    server
        .apply_value(fixtures::free_form_crd("example.com", "Widget"))
        .await;
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                        "metadata": {"name": "w"}, "spec": {"any": ["thing"]}});
    let (status, created) = server
        .request(
            "POST",
            "/apis/example.com/v1/namespaces/default/widgets",
            widget,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["spec"]["any"], json!(["thing"]), "free-form");
    let status_path = "/apis/example.com/v1/namespaces/default/widgets/w/status";
    let (status, _) = server
        .request("PATCH", status_path, json!({"status": {"seen": true}}))
        .await;
    assert_eq!(status, StatusCode::OK, "a status subresource");

    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
    }});
    server
        .apply_value(fixtures::kopfexample_crd_with_schema(schema))
        .await;
    let (status, error) = server
        .request(
            "POST",
            fixtures::KOPFEXAMPLES,
            fixtures::kopfexample("kex", json!({"size": "big"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error}");
    server.stop().await;
}

/// The same helpers, unchanged, on a real kube-apiserver: what tests do on the fake server
/// they can do on the real one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_helpers_serve_a_real_api_server() {
    let test = "client::the_same_helpers_serve_a_real_api_server";
    let Some(server) = kopf_fake_apiserver::RealApiServer::for_test(test).await else {
        return;
    };
    let client = server.test_client().await;
    let crd = client.apply(fixtures::KOPFEXAMPLE_CRD).await;
    assert_eq!(crd[0]["metadata"]["name"], "kopfexamples.kopf.dev");
    let applied = client
        .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: kex}, spec: {a: 1}}")
        .await;
    assert_eq!(applied[0]["metadata"]["namespace"], "default");

    let path = fixtures::kopfexample_path("default", "kex");
    let (status, kex) = client.request("GET", &path, None).await;
    assert_eq!(status, StatusCode::OK, "{kex}");
    let (status, error) = client
        .request("GET", &fixtures::kopfexample_path("default", "nope"), None)
        .await;
    assert_eq!(
        (status, &error["reason"]),
        (StatusCode::NOT_FOUND, &json!("NotFound"))
    );

    let request = ApiRequest::new("PATCH", &path)
        .json(json!([{"op": "replace", "path": "/spec/a", "value": 2}]))
        .patch_type(PatchType::Json)
        .header(http::header::USER_AGENT, "kopf-rs-tests");
    let answer = client.send(request).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.json());
    client
        .patch("kopfexamples", "default", "kex", json!({"spec": {"b": 3}}))
        .await;
    client
        .wait_for("kopfexamples", "default", "kex", |o| {
            o["spec"] == json!({"a": 2, "b": 3})
        })
        .await;
    client.delete("kopfexamples", "default", "kex").await;
    client
        .wait_for_deletion("kopfexamples", "default", "kex")
        .await;
    drop(client);
    server.stop().await;
}
