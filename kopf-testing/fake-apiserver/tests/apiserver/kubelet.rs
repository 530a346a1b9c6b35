//! What a kubelet serves, answered as kube-apiserver answers it for pods that no kubelet runs:
//! the log of a pod on no node is empty (`204 No Content`); exec, attach and port-forward are
//! `400 pod NAME does not have a host assigned`; the container is checked first; a pod on a
//! node that does not exist is `404` for the node.

use http_body_util::BodyExt as _;
use k8s_openapi::api::core::v1::Pod;
use kopf_fake_apiserver::FakeApiServer;
use kube::api::{Api, LogParams, PostParams};
use serde_json::{Value, json};

/// `method path` as the admin, without retries: the status code and the body, as JSON when
/// it is.
async fn call(server: &FakeApiServer, method: &str, path: &str) -> (u16, Value) {
    let mut config = server.config();
    config.default_retry = false;
    let client = kube::Client::try_from(config).expect("a client");
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .body(kube::client::Body::empty())
        .expect("a request");
    let response = client.send(request).await.expect("an answer");
    let code = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("the body")
        .to_bytes();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (code, body)
}

async fn create_pod(pods: &Api<Pod>, pod: Value) {
    let pod: Pod = serde_json::from_value(pod).expect("a Pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("the pod is created");
}

#[tokio::test]
async fn a_pod_on_no_node_has_no_logs_and_cannot_be_exec_ed_into() {
    let server = FakeApiServer::start().await.unwrap();
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    create_pod(
        &pods,
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "app:1"}]}}),
    )
    .await;
    let logs = pods
        .logs("p", &LogParams::default())
        .await
        .expect("a pod on no node has logs: none");
    assert_eq!(logs, "");
    let pod = "/api/v1/namespaces/default/pods/p";
    let (code, body) = call(&server, "GET", &format!("{pod}/log")).await;
    assert_eq!((code, body), (204, json!("")));
    for (method, path) in [
        ("POST", format!("{pod}/exec?command=ls&stdout=true")),
        ("GET", format!("{pod}/exec?command=ls&stdout=true")),
        ("POST", format!("{pod}/attach?stdout=true")),
        ("POST", format!("{pod}/portforward?ports=8080")),
    ] {
        let (code, body) = call(&server, method, &path).await;
        assert_eq!(code, 400, "{method} {path}: {body}");
        assert_eq!(body["message"], "pod p does not have a host assigned");
    }
    let (code, body) = call(&server, "GET", &format!("{pod}/log?container=nope")).await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(body["message"], "container nope is not valid for pod p");

    create_pod(
        &pods,
        json!({"metadata": {"name": "two"}, "spec": {
            "initContainers": [{"name": "init", "image": "app:1"}],
            "containers": [{"name": "a", "image": "app:1"}, {"name": "b", "image": "app:1"}],
        }}),
    )
    .await;
    let two = "/api/v1/namespaces/default/pods/two";
    let (code, body) = call(&server, "POST", &format!("{two}/exec?command=ls")).await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(
        body["message"],
        "a container name must be specified for pod two, choose one of: [init a b]"
    );
    let (code, _) = call(&server, "GET", &format!("{two}/log?container=init")).await;
    assert_eq!(code, 204, "an init container has logs too");

    // A pod on a node needs that node's kubelet; the node must exist first.
    create_pod(
        &pods,
        json!({"metadata": {"name": "placed"}, "spec": {
            "nodeName": "worker-1",
            "containers": [{"name": "c", "image": "app:1"}],
        }}),
    )
    .await;
    let (code, body) = call(&server, "GET", "/api/v1/namespaces/default/pods/placed/log").await;
    assert_eq!(code, 404, "{body}");
    assert_eq!(body["message"], "nodes \"worker-1\" not found");
    let (code, body) = call(&server, "GET", "/api/v1/namespaces/default/pods/ghost/log").await;
    assert_eq!(code, 404, "{body}");
    assert_eq!(body["message"], "pods \"ghost\" not found");
    drop(pods);
    server.stop().await;
}

/// kubectl prints no logs for a pod on no node, and says why it cannot exec into it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_and_exec_on_a_pod_on_no_node() {
    let Some((_turn, server, kubectl)) =
        crate::kubectl::setup("kubectl_logs_and_exec_on_a_pod_on_no_node").await
    else {
        return;
    };
    kubectl
        .ok(&["run", "p", "--image=busybox:1.36", "--restart=Never"])
        .await;
    let logs = kubectl.ok(&["logs", "p"]).await;
    assert_eq!(logs, "");
    let refused = kubectl.fails(&["exec", "p", "--", "ls"]).await;
    assert!(
        refused.contains("pod p does not have a host assigned"),
        "{refused}"
    );
    drop(kubectl);
    server.stop().await;
}
