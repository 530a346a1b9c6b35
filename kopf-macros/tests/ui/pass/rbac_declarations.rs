//! What handlers touch through their own client, declared for the `rbac` subcommand.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};

#[kopf::on_create("kopf.dev", "v1", "kopfexamples", owns = [Deployment, k8s_openapi::api::core::v1::Service])]
async fn create_fn(client: kube::Client) {
    let _ = client;
}

#[kopf::on_update("kopfexamples", reads = ConfigMap, owns = [Deployment])]
async fn update_fn() {}

#[kopf::timer("kopfexamples", interval = 60, reads = [Namespace])]
async fn tick_fn() {}

#[kopf::on_startup(reads = [Secret])]
async fn configure() {}

fn main() {
    let registry = kopf::handlers![create_fn, update_fn, tick_fn, configure];
    let yaml = kopf::rbac::rbac_manifest(&registry, ["-A"]).expect("valid options");
    assert!(yaml.contains("# Declared by create_fn: apps/deployments"));
    assert!(yaml.contains("# Declared by configure: core/secrets: get, list, watch"));
    assert!(!yaml.contains("NOT COVERED"));
}
