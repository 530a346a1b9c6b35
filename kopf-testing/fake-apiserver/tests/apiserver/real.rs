//! The real API server that the fake one is measured against starts, serves a 1.36 API with
//! etcd behind it and the controllers' garbage collection, and leaves nothing when stopped.

use kopf_fake_apiserver::RealApiServer;
use serde_json::json;

#[tokio::test]
async fn a_real_api_server_starts_serves_and_stops() {
    let Some(server) = RealApiServer::for_test("a_real_api_server_starts_serves_and_stops").await
    else {
        return;
    };
    let client = server.client().await;
    let version = client.apiserver_version().await.expect("/version answers");
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "36")
    );
    let readyz: String = client
        .request_text(http::Request::get("/readyz?verbose").body(vec![]).unwrap())
        .await
        .expect("/readyz answers");
    assert!(readyz.contains("[+]etcd ok"), "{readyz}");

    // Owner references are followed by the garbage collector, as in a cluster.
    let configmaps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), "default");
    let owner = configmaps
        .create(
            &Default::default(),
            &serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap(),
        )
        .await
        .expect("the owner is created");
    let uid = owner.metadata.uid.unwrap();
    let dependent = json!({"metadata": {"name": "dependent", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid},
    ]}});
    configmaps
        .create(
            &Default::default(),
            &serde_json::from_value(dependent).unwrap(),
        )
        .await
        .expect("the dependent is created");
    configmaps
        .delete("owner", &Default::default())
        .await
        .expect("the owner is deleted");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while configmaps.get_opt("dependent").await.unwrap().is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the dependent was never collected"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    let kubeconfig = server.kubeconfig_path().to_path_buf();
    server.stop().await;
    assert!(
        !kubeconfig.exists(),
        "the server's files are removed at its stop"
    );
}
