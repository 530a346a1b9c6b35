//! What a deletion answers, as kube-apiserver 1.36 answers it: the deleted object for the kinds
//! whose storage returns it (pods, ServiceAccounts, Services, namespaces, ...), a `Status`
//! naming it for the others (custom resources, ConfigMaps, ...), and the object, marked, for
//! every kind while finalizers hold it. Checked with kube-rs's `Api::delete` (which answers
//! `Either<K, Status>`), kubectl and the Python client.

use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use kopf_fake_apiserver::{FakeApiServer, fixtures};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

use crate::support::{self, DEADLINE};

/// The KopfExample CRD, established.
async fn with_kopf_examples(server: &FakeApiServer) -> Api<DynamicObject> {
    server.apply(fixtures::KOPFEXAMPLE_CRD).await;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kopf.dev", "v1", "KopfExample"),
        "kopfexamples",
    );
    Api::namespaced_with(server.client(), "default", &resource)
}

fn kopf_example(name: &str, finalizers: &[&str]) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "kopf.dev/v1",
        "kind": "KopfExample",
        "metadata": {"name": name, "finalizers": finalizers},
        "spec": {"field": "value"},
    }))
    .unwrap()
}

#[tokio::test]
async fn removing_a_custom_resource_or_a_config_map_answers_a_status_naming_it() {
    let server = FakeApiServer::start().await.unwrap();
    let examples = with_kopf_examples(&server).await;
    let created = examples
        .create(&PostParams::default(), &kopf_example("gone", &[]))
        .await
        .unwrap();
    let status = examples
        .delete("gone", &DeleteParams::default())
        .await
        .unwrap()
        .right()
        .expect("a Status, not the object");
    assert_eq!(
        status.status,
        Some(kube::core::response::StatusSummary::Success)
    );
    let details = status.details.expect("details name the object");
    assert_eq!(details.name, "gone");
    assert_eq!(details.group, "kopf.dev");
    assert_eq!(
        details.kind, "kopfexamples",
        "the plural, as the real server"
    );
    assert_eq!(Some(details.uid), created.metadata.uid);
    assert_eq!(status.code, 0, "no code, as the real server");

    let configmaps: Api<ConfigMap> = Api::default_namespaced(server.client());
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "cm"}})).unwrap();
    let created = configmaps
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    // A dry run answers as the deletion would, and deletes nothing.
    let dry = configmaps
        .delete("cm", &DeleteParams::default().dry_run())
        .await
        .unwrap()
        .right()
        .expect("a Status, not the object");
    assert_eq!(
        dry.details.as_ref().map(|d| d.kind.as_str()),
        Some("configmaps")
    );
    configmaps
        .get("cm")
        .await
        .expect("a dry run deletes nothing");
    let status = configmaps
        .delete("cm", &DeleteParams::default())
        .await
        .unwrap()
        .right()
        .expect("a Status, not the object");
    let details = status.details.expect("details name the object");
    assert_eq!((details.name.as_str(), details.group.as_str()), ("cm", ""));
    assert_eq!(details.kind, "configmaps");
    assert_eq!(Some(details.uid), created.metadata.uid);

    // Word for word, as kube-apiserver writes it.
    let created = configmaps
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let request = http::Request::delete("/api/v1/namespaces/default/configmaps/cm")
        .body(Vec::new())
        .unwrap();
    let body: Value =
        serde_json::from_str(&server.client().request_text(request).await.unwrap()).unwrap();
    assert_eq!(
        body,
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": "cm", "kind": "configmaps", "uid": created.metadata.uid},
        })
    );
    drop((examples, configmaps));
    server.stop().await;
}

#[tokio::test]
async fn pods_and_service_accounts_answer_the_deleted_object_and_finalizers_the_marked_one() {
    let server = FakeApiServer::start().await.unwrap();
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "app:1"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let deleted = pods
        .delete("p", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("the pod, not a Status");
    assert_eq!(deleted.metadata.name.as_deref(), Some("p"));

    let accounts: Api<ServiceAccount> = Api::default_namespaced(server.client());
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "robot"}})).unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let deleted = accounts
        .delete("robot", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("the account, not a Status");
    assert_eq!(deleted.metadata.name.as_deref(), Some("robot"));

    // With finalizers, every kind answers the object, now being deleted.
    let examples = with_kopf_examples(&server).await;
    examples
        .create(
            &PostParams::default(),
            &kopf_example("held", &["kopf.dev/test"]),
        )
        .await
        .unwrap();
    let marked = examples
        .delete("held", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("the marked object, not a Status");
    assert!(marked.metadata.deletion_timestamp.is_some(), "{marked:?}");
    let again = examples
        .delete("held", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("the marked object, not a Status");
    assert_eq!(
        again.metadata.deletion_timestamp,
        marked.metadata.deletion_timestamp
    );
    drop((pods, accounts, examples));
    server.stop().await;
}

/// kubectl prints what it always prints, and `--raw` shows the `Status` the server answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_deletes_and_shows_the_status_answered() {
    let Some((_turn, server, kubectl)) =
        crate::kubectl::setup("kubectl_deletes_and_shows_the_status_answered").await
    else {
        return;
    };
    kubectl
        .ok(&["create", "configmap", "cm", "--from-literal=k=v"])
        .await;
    let out = kubectl.ok(&["delete", "configmap", "cm"]).await;
    assert_eq!(out.trim(), r#"configmap "cm" deleted"#);

    kubectl.ok(&["create", "configmap", "raw"]).await;
    let uid = kubectl.json(&["get", "configmap", "raw"]).await["metadata"]["uid"].clone();
    let out = kubectl
        .ok(&[
            "delete",
            "--raw",
            "/api/v1/namespaces/default/configmaps/raw",
        ])
        .await;
    let answer: Value = serde_json::from_str(&out).expect("the answer is JSON");
    assert_eq!(answer["kind"], "Status", "{answer}");
    assert_eq!(
        answer["details"],
        json!({"name": "raw", "kind": "configmaps", "uid": uid})
    );

    kubectl.ok(&["create", "serviceaccount", "robot"]).await;
    let out = kubectl
        .ok(&[
            "delete",
            "--raw",
            "/api/v1/namespaces/default/serviceaccounts/robot",
        ])
        .await;
    let answer: Value = serde_json::from_str(&out).expect("the answer is JSON");
    assert_eq!(answer["kind"], "ServiceAccount", "{answer}");
    drop(kubectl);
    server.stop().await;
}

/// The Python client reads each answer as the type its API says (a `V1Status` for ConfigMaps,
/// a `V1Pod` for pods, a dict for custom objects).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_reads_the_answers_of_deletions() {
    let Some(python) = support::python("deletion::the_python_client_reads_the_answers").await
    else {
        return;
    };
    let _turn = support::serial().await;
    let server = FakeApiServer::start().await.unwrap();
    let examples = with_kopf_examples(&server).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let script = crate::python::scripts().join("client_deletions.py");
    let run = tokio::process::Command::new(python)
        .arg(script)
        .env("KUBECONFIG", &kubeconfig)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(DEADLINE * 2, run)
        .await
        .expect("the script finishes")
        .expect("python runs");
    assert!(
        output.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("all good"));
    drop(examples);
    server.stop().await;
}
