//! Children with owner references (Kopf's `02-children`): each `KopfExample` gets a ConfigMap
//! that it owns. Deleting the parent deletes the child: Kubernetes' garbage collector follows
//! the child's owner reference, so the operator needs no delete handler for it.
//!
//! `kopf::hierarchies::adopt` (Kopf's `kopf.adopt`) makes the parent own the child, and puts it in
//! the parent's namespace with the parent's labels. The child is named here, not generated, so
//! that a retried handler finds the child of its earlier attempt instead of making another.
//!
//! ```sh
//! cargo run -p kopf-fake-apiserver -- --kubeconfig /tmp/kopf.kubeconfig &
//! export KUBECONFIG=/tmp/kopf.kubeconfig
//! kubectl apply -f examples/crd.yaml
//! cargo run --example children &
//! kubectl apply -f examples/obj.yaml
//! kubectl get configmap kopf-example-1-child -o yaml   # ownerReferences: the KopfExample
//! kubectl delete -f examples/obj.yaml                  # the ConfigMap goes too
//! ```

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kopf::Logger;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

/// The child of a `KopfExample` named `name`: a ConfigMap with the parent's spec, not yet
/// adopted.
pub fn child_of(name: &str, spec: &Value) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{name}-child")),
            ..ObjectMeta::default()
        },
        data: Some([("spec".to_string(), spec.to_string())].into()),
        ..ConfigMap::default()
    }
}

/// Creates the child, owned by the object; a child left by an earlier attempt is fine.
/// `owns` puts the ConfigMaps into what `children rbac` prints.
#[kopf::on_create("kopf.dev", "v1", "kopfexamples", owns = [ConfigMap])]
pub async fn create_fn(
    body: &Value,
    name: &str,
    spec: &Value,
    client: kube::Client,
    logger: &Logger,
) -> kopf::Result<Value> {
    let mut child = child_of(name, spec);
    kopf::hierarchies::adopt(&mut child, body)?;
    let child_name = child.metadata.name.clone().unwrap_or_default();
    let namespace = child.metadata.namespace.as_deref().unwrap_or("default");
    let configmaps: Api<ConfigMap> = Api::namespaced(client, namespace);
    match configmaps.create(&PostParams::default(), &child).await {
        Ok(_) => logger.info(format!("Created the child {child_name}")),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            logger.info(format!("The child {child_name} exists already"));
        }
        Err(error) => return Err(error.into()),
    }
    Ok(json!({"children": [child_name]}))
}
