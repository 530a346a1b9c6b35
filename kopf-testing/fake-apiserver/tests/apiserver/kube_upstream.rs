//! Behaviours that kube-rs's own cluster tests (its `#[ignore]`d ones) rely on, each checked
//! here with kube-rs's typed helpers against the fake server: cordoning nodes, approving
//! certificate signing requests, reviewing requested tokens, adding ephemeral containers.

use k8s_openapi::api::authentication::v1::{
    TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec,
};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{EphemeralContainer, Node, Pod, ServiceAccount};
use kopf_fake_apiserver::FakeApiServer;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn names(list: &[Node]) -> Vec<String> {
    list.iter()
        .filter_map(|node| node.metadata.name.clone())
        .collect()
}

#[tokio::test]
async fn cordoned_nodes_leave_the_schedulable_selection() {
    let server = FakeApiServer::start().await.unwrap();
    let nodes: Api<Node> = Api::all(server.client());
    for name in ["worker-a", "worker-b"] {
        let node = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let schedulable = ListParams::default().fields("spec.unschedulable=false");
    let unschedulable = ListParams::default().fields("spec.unschedulable==true");
    let before = nodes.list(&schedulable).await.unwrap();
    assert!(names(&before.items).contains(&"worker-a".to_string()));

    nodes.cordon("worker-a").await.unwrap();
    let cordoned = nodes.list(&schedulable).await.unwrap();
    assert_eq!(cordoned.items.len(), before.items.len() - 1);
    assert!(!names(&cordoned.items).contains(&"worker-a".to_string()));
    let held = nodes.list(&unschedulable).await.unwrap();
    assert_eq!(names(&held.items), ["worker-a"]);

    nodes.uncordon("worker-a").await.unwrap();
    let after = nodes.list(&schedulable).await.unwrap();
    assert_eq!(names(&after.items), names(&before.items));
    server.stop().await;
}

#[tokio::test]
async fn a_csr_is_approved_through_its_approval_subresource_only() {
    let server = FakeApiServer::start().await.unwrap();
    let csrs: Api<CertificateSigningRequest> = Api::all(server.client());
    let csr = serde_json::from_value(json!({
        "metadata": {"name": "client-cert"},
        "spec": {
            "request": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K",
            "signerName": "kubernetes.io/kube-apiserver-client",
            "usages": ["client auth"],
        },
    }))
    .unwrap();
    csrs.create(&PostParams::default(), &csr).await.unwrap();

    // The approval subresource takes the conditions and nothing else.
    let approve = json!({
        "spec": {"signerName": "example.com/changed"},
        "status": {
            "certificate": "Zm9yZ2Vk",
            "conditions": [{
                "type": "Approved", "status": "True",
                "reason": "TestApproval", "message": "approved by a test",
            }],
        },
    });
    let approved = csrs
        .patch_approval(
            "client-cert",
            &PatchParams::default(),
            &Patch::Merge(&approve),
        )
        .await
        .unwrap();
    let status = approved.status.unwrap();
    let condition = &status.conditions.as_ref().unwrap()[0];
    assert_eq!(condition.type_, "Approved");
    assert_eq!(condition.reason.as_deref(), Some("TestApproval"));
    assert!(condition.last_update_time.is_some(), "{condition:?}");
    assert!(condition.last_transition_time.is_some(), "{condition:?}");
    assert_eq!(status.certificate, None, "only conditions change");
    assert_eq!(
        approved.spec.signer_name,
        "kubernetes.io/kube-apiserver-client"
    );

    let read = csrs.get_approval("client-cert").await.unwrap();
    let conditions = read.status.unwrap().conditions.unwrap();
    assert_eq!(conditions[0].type_, "Approved");
    server.stop().await;
}

#[tokio::test]
async fn a_requested_token_reviews_as_its_service_account_for_its_audiences() {
    let server = FakeApiServer::start().await.unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(server.client(), "default");
    let account = serde_json::from_value(json!({"metadata": {"name": "robot"}})).unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let audiences = vec!["vault".to_string()];
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: audiences.clone(),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let issued = accounts
        .create_token_request("robot", &PostParams::default(), &request)
        .await
        .unwrap();
    let token = issued.status.unwrap().token;
    assert!(!token.is_empty());

    let reviews: Api<TokenReview> = Api::all(server.client());
    let review = |audiences: Option<Vec<String>>| TokenReview {
        spec: TokenReviewSpec {
            audiences,
            token: Some(token.clone()),
        },
        ..TokenReview::default()
    };
    let answer = reviews
        .create(&PostParams::default(), &review(Some(audiences.clone())))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(answer.authenticated, Some(true));
    assert_eq!(answer.audiences, Some(audiences));
    assert_eq!(
        answer.user.unwrap().username.as_deref(),
        Some("system:serviceaccount:default:robot")
    );
    // Asking about no audience in particular asks about the API server's own, which a token
    // for another audience is not good for.
    let answer = reviews
        .create(&PostParams::default(), &review(None))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(answer.authenticated, None, "not authenticated: {answer:?}");
    let error = answer.error.clone().unwrap_or_default();
    assert!(
        error.starts_with("token audiences [\"vault\"] is invalid"),
        "{answer:?}"
    );
    server.stop().await;
}

fn debug_container(name: &str, image: &str) -> EphemeralContainer {
    serde_json::from_value(json!({"name": name, "image": image})).unwrap()
}

#[tokio::test]
async fn ephemeral_containers_accumulate_and_stay_unchanged() {
    let server = FakeApiServer::start().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let pod = serde_json::from_value(json!({
        "metadata": {"name": "app"},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let ephemeral = |pod: Pod| -> Vec<String> {
        let containers = pod.spec.unwrap().ephemeral_containers.unwrap_or_default();
        containers.into_iter().map(|c| c.name).collect()
    };
    assert!(ephemeral(pods.get_ephemeral_containers("app").await.unwrap()).is_empty());

    // A replace naming only the new list (no resourceVersion, no regular containers).
    let first = serde_json::from_value(json!({
        "metadata": {"name": "app"},
        "spec": {"containers": [], "ephemeralContainers": [debug_container("debug-1", "busybox")]},
    }))
    .unwrap();
    let replaced = pods
        .replace_ephemeral_containers("app", &PostParams::default(), &first)
        .await
        .unwrap();
    assert_eq!(ephemeral(replaced), ["debug-1"]);

    // A strategic merge adds a second one; the first stays wherever the merge puts it.
    let second: Pod = serde_json::from_value(json!({
        "spec": {"ephemeralContainers": [debug_container("debug-2", "alpine")]},
    }))
    .unwrap();
    let patched = pods
        .patch_ephemeral_containers("app", &PatchParams::default(), &Patch::Strategic(second))
        .await
        .unwrap();
    let mut names = ephemeral(patched);
    names.sort();
    assert_eq!(names, ["debug-1", "debug-2"]);
    let pod = pods.get("app").await.unwrap();
    assert_eq!(
        pod.spec.unwrap().containers[0].name,
        "app",
        "containers kept"
    );

    // Changing an existing one is refused, as removing one is.
    let changed: Pod = serde_json::from_value(json!({
        "spec": {"ephemeralContainers": [debug_container("debug-1", "alpine")]},
    }))
    .unwrap();
    let refused = pods
        .patch_ephemeral_containers("app", &PatchParams::default(), &Patch::Strategic(changed))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("not an API error: {refused}")
    };
    assert_eq!(status.code, 422);
    assert!(
        status.message.contains("\"debug-1\" may not be changed"),
        "{}",
        status.message
    );
    server.stop().await;
}
