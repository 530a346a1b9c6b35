//! What webhooks are told of a request: a new object as it will be stored (with its uid,
//! creation time and first generation for validating webhooks), who asks (ServiceAccounts with their uid), the
//! `Binding` and `Eviction` of pods' subresources, and a `Scale` that is reviewed again when
//! its object changed before the write could commit.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use kopf_fake_apiserver::FakeApiServer;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::support;
use crate::webhook_server::{Answer, WebhookServer};
use crate::webhooks::{api_error, config_map, entry, mutating, script, validating};

#[tokio::test]
async fn validating_webhooks_see_the_uid_creation_time_and_generation_that_are_stored() {
    let webhook = WebhookServer::start(script(|_, review| Answer::allow(review))).await;
    let server = FakeApiServer::start().await.unwrap();
    let rules = json!([
        {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]},
        {"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]},
    ]);
    let all = |name: &str, path: &str| entry(&webhook, name, path, json!({"rules": rules}));
    mutating(
        &server,
        "mutate",
        vec![all("mutate.example.com", "/mutate")],
    )
    .await;
    validating(
        &server,
        "validate",
        vec![all("validate.example.com", "/validate")],
    )
    .await;
    let accounts: Api<ServiceAccount> = Api::default_namespaced(server.client());
    let account = json!({"metadata": {"name": "writer"}});
    let account = accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(account).unwrap(),
        )
        .await
        .unwrap();

    let writer = server.client_as_service_account("default", "writer");
    let api: Api<ConfigMap> = Api::default_namespaced(writer);
    let created = api
        .create(&PostParams::default(), &config_map("new", json!({})))
        .await
        .unwrap();
    let stored = api.get("new").await.unwrap();
    assert_eq!(created.metadata.uid, stored.metadata.uid);

    let mutated = &webhook.received("/mutate")[0].review["request"];
    let meta = &mutated["object"]["metadata"];
    assert_eq!(
        meta.get("uid"),
        None,
        "mutating webhooks see no uid: {meta}"
    );
    assert_eq!(meta.get("creationTimestamp"), None, "{meta}");
    let validated = &webhook.received("/validate")[0].review["request"];
    let meta = &validated["object"]["metadata"];
    assert_eq!(meta["uid"], json!(stored.metadata.uid), "{meta}");
    let created_at = serde_json::to_value(&stored.metadata.creation_timestamp).unwrap();
    assert_eq!(meta["creationTimestamp"], created_at, "{meta}");

    assert_eq!(
        meta.get("generation"),
        None,
        "ConfigMaps count no generations"
    );

    let deployments: Api<Deployment> = Api::default_namespaced(server.client());
    let deployment = support::create_deployment(&deployments, None).await;
    let meta = &webhook.received("/mutate")[1].review["request"]["object"]["metadata"];
    assert_eq!(meta.get("generation"), None, "{meta}");
    let meta = &webhook.received("/validate")[1].review["request"]["object"]["metadata"];
    assert_eq!(meta["generation"], 1, "{meta}");
    assert_eq!(meta["uid"], json!(deployment.metadata.uid), "{meta}");

    let user = &validated["userInfo"];
    assert_eq!(user["username"], "system:serviceaccount:default:writer");
    assert_eq!(
        user["uid"],
        json!(account.metadata.uid),
        "a ServiceAccount's token authenticates with the account's uid: {user}"
    );
    assert!(
        user["groups"]
            .as_array()
            .unwrap()
            .contains(&json!("system:serviceaccounts:default")),
        "{user}"
    );
    assert!(
        user["extra"]["authentication.kubernetes.io/credential-id"].is_array(),
        "{user}"
    );
    server.stop().await;
}

#[tokio::test]
async fn bindings_and_evictions_are_admitted_as_creations_on_pod_subresources() {
    let webhook = WebhookServer::start(script(|path, review| {
        let request = &review["request"];
        match path.split('?').next().unwrap_or_default() {
            "/schedule" => Answer::patch(
                review,
                json!([{"op": "replace", "path": "/target/name", "value": "node-b"}]),
            ),
            "/guard" if request["subResource"] == "eviction" && request["name"] == "precious" => {
                Answer::deny(review, "precious pods stay", 403)
            }
            _ => Answer::allow(review),
        }
    }))
    .await;
    let server = FakeApiServer::start().await.unwrap();
    let api: Api<Pod> = Api::default_namespaced(support::client_without_retries(&server));
    for name in ["p", "precious"] {
        let pod = json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        api.create(
            &PostParams::default(),
            &serde_json::from_value(pod).unwrap(),
        )
        .await
        .unwrap();
    }
    let bindings = json!([{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/binding"]}]);
    let schedule = entry(
        &webhook,
        "schedule.example.com",
        "/schedule",
        json!({"rules": bindings}),
    );
    mutating(&server, "schedule", vec![schedule]).await;
    // The pods' own changes (the node assigned, the deletion) are not admitted.
    let rules = json!([
        {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/binding", "pods/eviction"]},
        {"operations": ["UPDATE", "DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]},
    ]);
    let guard = entry(
        &webhook,
        "guard.example.com",
        "/guard",
        json!({"rules": rules}),
    );
    validating(&server, "guard", vec![guard]).await;

    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
    });
    let _: Value = api
        .create_subresource("binding", "p", &PostParams::default(), &binding)
        .await
        .unwrap();
    let pod = api.get("p").await.unwrap();
    assert_eq!(
        pod.spec.unwrap().node_name.as_deref(),
        Some("node-b"),
        "the mutating webhook changed the Binding"
    );

    let eviction = |name: &str| json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}});
    let evict = |name: &'static str| {
        let api = api.clone();
        async move {
            api.create_subresource::<Value, Value>(
                "eviction",
                name,
                &PostParams::default(),
                &eviction(name),
            )
            .await
        }
    };
    let error = api_error(evict("precious").await);
    assert_eq!(error.code, 403);
    assert_eq!(
        error.message,
        "admission webhook \"guard.example.com\" denied the request: precious pods stay"
    );
    let precious = api.get("precious").await.unwrap();
    assert!(precious.metadata.deletion_timestamp.is_none());
    evict("p").await.expect("the eviction of p is allowed");

    let requests: Vec<Value> = webhook
        .received("/guard")
        .into_iter()
        .map(|received| received.review["request"].clone())
        .collect();
    let seen: Vec<(Value, Value, Value)> = requests
        .iter()
        .map(|r| {
            (
                r["operation"].clone(),
                r["subResource"].clone(),
                r["name"].clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (json!("CREATE"), json!("binding"), json!("p")),
            (json!("CREATE"), json!("eviction"), json!("precious")),
            (json!("CREATE"), json!("eviction"), json!("p")),
        ]
    );
    let bound = &requests[0];
    assert_eq!(
        bound["kind"],
        json!({"group": "", "version": "v1", "kind": "Binding"})
    );
    assert_eq!(
        bound["resource"],
        json!({"group": "", "version": "v1", "resource": "pods"})
    );
    assert_eq!(bound["requestSubResource"], "binding");
    assert_eq!(bound["namespace"], "default");
    assert_eq!(bound["object"]["target"]["name"], "node-b");
    assert_eq!(bound["object"]["metadata"]["namespace"], "default");
    assert_eq!(bound["oldObject"], Value::Null);
    assert_eq!(bound["options"]["kind"], "CreateOptions");
    let evicted = &requests[2];
    assert_eq!(
        evicted["kind"],
        json!({"group": "policy", "version": "v1", "kind": "Eviction"})
    );
    assert_eq!(
        evicted["resource"],
        json!({"group": "", "version": "v1", "resource": "pods"})
    );
    assert_eq!(evicted["object"]["kind"], "Eviction");
    assert_eq!(evicted["object"]["metadata"]["name"], "p");
    server.stop().await;
}

#[tokio::test]
async fn a_scale_write_is_admitted_again_when_its_object_changed_meanwhile() {
    let gate = Arc::new(Semaphore::new(0));
    let calls = Arc::new(AtomicUsize::new(0));
    let (held, counted) = (gate.clone(), calls.clone());
    let webhook = WebhookServer::start(script(move |_, review| {
        // The first review waits until the test has changed the object.
        match counted.fetch_add(1, Ordering::SeqCst) {
            0 => Answer::allow(review).when_open(&held),
            _ => Answer::allow(review),
        }
    }))
    .await;
    let server = FakeApiServer::start().await.unwrap();
    let client = support::client_without_retries(&server);
    let deployments: Api<Deployment> = Api::default_namespaced(client);
    support::create_deployment(&deployments, Some(1)).await;
    let rules = json!([{"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments/scale"]}]);
    let check = entry(
        &webhook,
        "scale.example.com",
        "/scale",
        json!({"rules": rules}),
    );
    validating(&server, "scale", vec![check]).await;

    let scaling = async {
        let scale = Patch::Merge(json!({"spec": {"replicas": 3}}));
        deployments
            .patch_scale("d", &PatchParams::default(), &scale)
            .await
    };
    let meanwhile = async {
        support::wait("the first review", || async {
            (!webhook.received("/scale").is_empty()).then_some(())
        })
        .await;
        let label = Patch::Merge(json!({"metadata": {"labels": {"changed": "meanwhile"}}}));
        deployments
            .patch("d", &PatchParams::default(), &label)
            .await
            .expect("the deployment changes while its scale is reviewed");
        gate.add_permits(1);
    };
    let (scaled, ()) = tokio::join!(scaling, meanwhile);
    scaled.expect("the scale is written after a second review");

    let reviews = webhook.received("/scale");
    assert_eq!(reviews.len(), 2, "reviewed again after the change");
    let version = |index: usize| {
        reviews[index].review["request"]["oldObject"]["metadata"]["resourceVersion"].clone()
    };
    assert_ne!(
        version(0),
        version(1),
        "the second review sees the new object"
    );
    let stored = deployments.get("d").await.unwrap();
    assert_eq!(stored.spec.unwrap().replicas, Some(3));
    let labels = stored.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("changed").map(String::as_str), Some("meanwhile"));
    server.stop().await;
}
