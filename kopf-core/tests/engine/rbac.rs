//! The `rbac` output is enough, and no more than needed: applied to a server that enforces
//! RBAC, it lets an operator acting as its ServiceAccount do its work, children included
//! (`owns = [..]`), while a request outside its rules is forbidden.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kopf::outcomes::HandlerOutcome;
use kopf_testing::OperatorHarness;
use kopf_testing::fixtures::KOPFEXAMPLE_CRD;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

const ACCOUNT: &str = "kex-operator";

/// A ConfigMap named after the object, owned by it.
async fn child(name: &str, owner: &serde_json::Value, client: kube::Client) -> kopf::Result<()> {
    let mut config: serde_json::Value = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": format!("{name}-config")},
        "data": {"owner": name},
    });
    kopf::hierarchies::adopt(&mut config, owner)?;
    let config: ConfigMap = serde_json::from_value(config)?;
    Api::<ConfigMap>::default_namespaced(client)
        .create(&PostParams::default(), &config)
        .await?;
    Ok(())
}

#[kopf::on_create("kopf.dev", "v1", "kopfexamples", owns = [ConfigMap])]
async fn configure(name: &str, body: &serde_json::Value, client: kube::Client) -> kopf::Result<()> {
    child(name, body, client).await
}

#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn configure_undeclared(
    name: &str,
    body: &serde_json::Value,
    client: kube::Client,
) -> kopf::Result<()> {
    child(name, body, client).await
}

/// The harness with the KOPFEXAMPLE_CRD and the registry's `rbac -n default` output applied, the
/// operator acting as the ServiceAccount on a server that enforces RBAC.
async fn start(registry: kopf::registry::Registry) -> OperatorHarness {
    let rbac =
        kopf::rbac::rbac_manifest(&registry, ["-n", "default", "--service-account", ACCOUNT])
            .expect("the rbac options are valid");
    OperatorHarness::builder()
        .apply(KOPFEXAMPLE_CRD)
        .apply(rbac)
        .namespaces(["default"])
        .service_account("default", ACCOUNT)
        .start(registry)
        .await
}

fn forbidden(error: kube::Error) -> kube::core::Status {
    match error {
        kube::Error::Api(status) if status.code == 403 => *status,
        other => panic!("expected 403 Forbidden, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rbac_output_lets_the_operator_create_its_children_and_nothing_more() {
    let harness = start(kopf::handlers![configure]).await;
    harness
        .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: kex}}")
        .await;
    let config = harness
        .wait_for("configmaps", "default", "kex-config", |_| true)
        .await;
    assert_eq!(config["data"]["owner"], "kex");
    assert_eq!(
        harness.wait_for_outcome("kex", "configure").await,
        HandlerOutcome::Succeeded { retries: 1 }
    );
    let refused: Vec<_> = harness
        .server()
        .requests()
        .into_iter()
        .filter(|request| request.code == 403)
        .collect();
    assert!(refused.is_empty(), "the operator was refused: {refused:#?}");

    // As the operator's ServiceAccount, outside its rules:
    let operator = kopf_testing::service_account_client(harness.server(), "default", ACCOUNT).await;
    let secrets = Api::<Secret>::default_namespaced(operator.clone());
    let status = forbidden(secrets.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(
        status.message,
        "secrets is forbidden: User \"system:serviceaccount:default:kex-operator\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\""
    );
    assert_eq!(status.reason, "Forbidden");
    let elsewhere = Api::<ConfigMap>::namespaced(operator.clone(), "kube-system");
    forbidden(elsewhere.list(&ListParams::default()).await.unwrap_err());
    let deployments = Api::<Deployment>::default_namespaced(operator);
    let status = forbidden(deployments.get("web").await.unwrap_err());
    assert!(
        status
            .message
            .starts_with("deployments.apps \"web\" is forbidden: User \"system:serviceaccount:default:kex-operator\" cannot get resource \"deployments\" in API group \"apps\""),
        "{}",
        status.message
    );
    harness.stop().await.expect("a clean stop");
}

/// The same handler without `owns`: the output does not cover its ConfigMap, and the
/// server refuses it, which the handler's outcome shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_is_not_declared_is_forbidden() {
    let registry = kopf::handlers![configure_undeclared];
    let rbac = kopf::rbac::rbac_manifest(&registry, ["-n", "default"]).expect("valid options");
    assert!(
        rbac.contains("# NOT COVERED: configure_undeclared takes a `client`"),
        "{rbac}"
    );
    let harness = start(registry).await;
    harness
        .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: kex}}")
        .await;
    let refused = kopf_testing::wait("the handler's refused attempt", || async {
        harness
            .outcome("kex", "configure_undeclared")
            .filter(|outcome| outcome.message().is_some_and(|m| m.contains("forbidden")))
    })
    .await;
    assert!(
        matches!(&refused, HandlerOutcome::Retrying { message, .. }
            if message.contains("cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\"")),
        "{refused:?}"
    );
    harness.stop().await.expect("a clean stop");
}

/// With assigned shards (`rbac --shards`), the output covers the ring's Leases: the member's
/// own, the shards', and the watch of the ring that wakes the reconciler when a shard moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rbac_output_with_shards_lets_the_ring_be_joined_and_watched() {
    let registry = kopf::handlers![configure];
    let rbac = kopf::rbac::rbac_manifest(
        &registry,
        [
            "-n",
            "default",
            "--service-account",
            ACCOUNT,
            "--shards",
            "4",
        ],
    )
    .expect("the rbac options are valid");
    let mut settings = kopf_testing::test_settings();
    let mut sharding = kopf::settings::ShardingSettings::new(4);
    sharding.namespace = Some("default".into());
    sharding.lease_duration = std::time::Duration::from_secs(3);
    sharding.renew_deadline = std::time::Duration::from_secs(2);
    sharding.retry_period = std::time::Duration::from_millis(300);
    settings.peering.sharding = Some(sharding);
    settings.peering.standalone = true;
    let harness = OperatorHarness::builder()
        .apply(kopf_testing::fixtures::KOPFEXAMPLE_CRD)
        .apply(rbac)
        .settings(settings)
        .namespaces(["default"])
        .service_account("default", ACCOUNT)
        .start(registry)
        .await;
    harness
        .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: kex}}")
        .await;
    harness
        .wait_for("configmaps", "default", "kex-config", |_| true)
        .await;
    let watches = kopf_testing::wait("the ring's watch", || async {
        let watches: Vec<_> = harness
            .server()
            .requests()
            .into_iter()
            .filter(|request| request.verb == "watch" && request.resource.starts_with("leases"))
            .collect();
        (!watches.is_empty()).then_some(watches)
    })
    .await;
    assert!(
        watches.iter().all(|request| request.code == 200),
        "the ring's watch is allowed: {watches:#?}"
    );
    let refused: Vec<_> = harness
        .server()
        .requests()
        .into_iter()
        .filter(|request| request.code == 403)
        .collect();
    assert!(refused.is_empty(), "the operator was refused: {refused:#?}");
    harness.stop().await.expect("a clean stop");
}
