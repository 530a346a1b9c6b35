//! Metadata-only answers (`PartialObjectMetadata`): kube-rs's `get_metadata`,
//! `list_metadata`, `patch_metadata` and `metadata_watcher`, and the raw shapes they rely on.

use std::collections::BTreeMap;

use futures::StreamExt as _;
use http::StatusCode;
use k8s_openapi::api::core::v1::ConfigMap;
use kopf_fake_apiserver::{ApiRequest, FakeApiServer};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::json;

use crate::support::{NOT_ROOT_CA, wait};

fn config_map(name: &str, data: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "meta"}},
        "data": {"big": data},
    }))
    .unwrap()
}

#[tokio::test]
async fn get_list_and_patch_metadata_return_partial_objects() {
    let server = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &config_map("one", "payload"))
        .await
        .unwrap();

    let meta = api.get_metadata("one").await.unwrap();
    assert_eq!(meta.metadata.name.as_deref(), Some("one"));
    let types = meta.types.expect("kind and apiVersion are set");
    assert_eq!(types.kind, "PartialObjectMetadata");
    assert_eq!(types.api_version, "meta.k8s.io/v1");

    let list = api
        .list_metadata(&ListParams::default().fields(NOT_ROOT_CA))
        .await
        .unwrap();
    let names: Vec<_> = list
        .items
        .iter()
        .filter_map(|i| i.metadata.name.clone())
        .collect();
    assert_eq!(names, vec!["one"]);
    assert_eq!(list.types.kind, "PartialObjectMetadataList");

    let patch = json!({"metadata": {"annotations": {"seen": "yes"}}});
    let patched: PartialObjectMeta<ConfigMap> = api
        .patch_metadata("one", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let annotations = patched.metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.get("seen").map(String::as_str), Some("yes"));
    // The object itself is intact: only the answer was reduced.
    let whole = api.get("one").await.unwrap();
    assert_eq!(whole.data.unwrap()["big"], "payload");
    server.stop().await;
}

#[tokio::test]
async fn raw_answers_carry_no_data_and_mismatches_are_not_acceptable() {
    let server = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &config_map("raw", "secret-ish"))
        .await
        .unwrap();
    let get = |path: &str, accept: &str| {
        let request = ApiRequest::new("GET", path).header(http::header::ACCEPT, accept);
        let server = &server;
        async move {
            let answer = server.send(request).await;
            (answer.status, answer.json())
        }
    };
    let one = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    let many = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

    let (status, object) = get("/api/v1/namespaces/default/configmaps/raw", one).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        object.as_object().unwrap().keys().collect::<Vec<_>>(),
        vec!["kind", "apiVersion", "metadata"],
        "{object}"
    );
    assert!(!object.to_string().contains("secret-ish"));

    let (status, list) = get(
        "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Draw",
        many,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["items"][0]["kind"], "PartialObjectMetadata");
    assert_eq!(list["items"][0]["metadata"]["name"], "raw");
    assert!(list["items"][0].get("data").is_none());

    // The real server refuses a list where one object was asked for, and the other way round.
    let (status, error) = get("/api/v1/namespaces/default/configmaps", one).await;
    assert_eq!(status, StatusCode::NOT_ACCEPTABLE, "{error}");
    assert_eq!(error["reason"], "NotAcceptable");
    assert!(
        error["message"].as_str().unwrap().contains("is a list"),
        "{error}"
    );
    let (status, _) = get("/api/v1/namespaces/default/configmaps/raw", many).await;
    assert_eq!(status, StatusCode::NOT_ACCEPTABLE);
    server.stop().await;
}

#[tokio::test]
async fn metadata_watcher_sees_changes_without_the_objects_bodies() {
    let server = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &config_map("before", "x"))
        .await
        .unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::new()));
    // kube-rs's metadata watcher: an `Api` of `PartialObjectMeta` asks for metadata only.
    let metadata: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(server.client(), "default");
    let stream = watcher(metadata, watcher::Config::default()).applied_objects();
    let recorder = {
        let seen = seen.clone();
        async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                let meta = event.expect("metadata events decode");
                let types = meta.types.clone().expect("kind and apiVersion are set");
                assert_eq!(types.kind, "PartialObjectMetadata");
                seen.lock().unwrap().insert(
                    meta.metadata.name.clone().unwrap(),
                    meta.metadata.labels.clone().unwrap_or_default(),
                );
            }
        }
    };
    let watching = tokio::spawn(recorder);
    api.create(&PostParams::default(), &config_map("after", "y"))
        .await
        .unwrap();
    let patch = json!({"metadata": {"labels": {"changed": "true"}}});
    api.patch("after", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait("the watcher to see both objects and the label", || {
        let seen = seen.lock().unwrap().clone();
        async move {
            (seen.contains_key("before")
                && seen.get("after").is_some_and(|l| l.contains_key("changed")))
            .then_some(())
        }
    })
    .await;
    watching.abort();
    server.stop().await;
}
