//! RBAC enforcement: ServiceAccounts' tokens are checked against the stored roles, the admin
//! keeps full access, unknown tokens are turned away.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kopf_fake_apiserver::FakeApiServer;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

fn code(error: kube::Error) -> u16 {
    match error {
        kube::Error::Api(status) => status.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_cluster_role_bound_in_a_namespace_grants_only_there() {
    let server = FakeApiServer::builder()
        .enforce_rbac()
        .start()
        .await
        .expect("the server starts");
    let admin = server.client();
    server
        .apply_value(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}))
        .await;
    server.apply_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "configmap-editor"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create"]}],
    })).await;
    server.apply_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "bot", "namespace": "team"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "configmap-editor"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "default"}],
    })).await;

    let bot = server.client_as_service_account("default", "bot");
    let in_team: Api<ConfigMap> = Api::namespaced(bot.clone(), "team");
    let config: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "settings"}})).unwrap();
    in_team
        .create(&PostParams::default(), &config)
        .await
        .expect("granted in team");
    assert_eq!(
        in_team
            .list(&ListParams::default().fields(crate::support::NOT_ROOT_CA))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    let in_default: Api<ConfigMap> = Api::namespaced(bot.clone(), "default");
    assert_eq!(
        code(in_default.list(&ListParams::default()).await.unwrap_err()),
        403
    );
    let everywhere: Api<ConfigMap> = Api::all(bot.clone());
    assert_eq!(
        code(everywhere.list(&ListParams::default()).await.unwrap_err()),
        403
    );
    let secrets: Api<Secret> = Api::namespaced(bot.clone(), "team");
    assert_eq!(
        code(secrets.list(&ListParams::default()).await.unwrap_err()),
        403
    );
    // Discovery is open to every token.
    bot.list_api_groups().await.expect("discovery");

    // The admin keeps full access; an unknown token is not let in.
    let namespaces: Api<Namespace> = Api::all(admin);
    assert!(namespaces.list(&ListParams::default()).await.is_ok());
    let mut config = server.service_account_config("default", "bot");
    config.auth_info.token = Some("made-up".to_string().into());
    let stranger: Api<Namespace> = Api::all(kube::Client::try_from(config).unwrap());
    assert_eq!(
        code(stranger.list(&ListParams::default()).await.unwrap_err()),
        401
    );
    drop((
        bot, in_team, in_default, everywhere, secrets, namespaces, stranger,
    ));
    server.stop().await;
}

#[tokio::test]
async fn without_enforcement_service_accounts_have_full_access() {
    let server = FakeApiServer::start().await.expect("the server starts");
    let bot = server.client_as_service_account("default", "bot");
    let secrets: Api<Secret> = Api::namespaced(bot, "default");
    assert!(secrets.list(&ListParams::default()).await.is_ok());
    drop(secrets);
    server.stop().await;
}
