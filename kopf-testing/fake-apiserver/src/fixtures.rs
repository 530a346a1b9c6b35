//! What tests share: Kopf's classic example resource, `KopfExample`
//! (`kopfexamples.kopf.dev/v1`, the one of Kopf's `examples/crd.yaml`), its CRD, its objects
//! and their paths; and CRDs of the same shape for other kinds.
//!
//! The CRD's YAML is `fixtures/kopfexample-crd.yaml` in this package; the workspace's
//! `examples/crd.yaml` links to it, for `kubectl apply -f examples/crd.yaml`.
//!
//! ```no_run
//! # async fn example(server: kopf_fake_apiserver::FakeApiServer) {
//! use kopf_fake_apiserver::fixtures;
//! use serde_json::json;
//!
//! server.apply(fixtures::KOPFEXAMPLE_CRD).await;
//! let kex = fixtures::kopfexample("kex", json!({"field": "value"}));
//! server.request("POST", fixtures::KOPFEXAMPLES, kex).await;
//! let (_, kex) = server.request("GET", &fixtures::kopfexample_path("default", "kex"), None).await;
//! # }
//! ```

use serde_json::{Value, json};

/// The CRD of Kopf's example resource, `kopfexamples.kopf.dev/v1`, as YAML: namespaced, with
/// a status subresource, free-form `spec` and `status`, Kopf's short names (`kex`, ...) and
/// printer columns.
pub const KOPFEXAMPLE_CRD: &str = include_str!("../fixtures/kopfexample-crd.yaml");

/// The path of the KopfExamples in the namespace `default`.
pub const KOPFEXAMPLES: &str = "/apis/kopf.dev/v1/namespaces/default/kopfexamples";

/// [`KOPFEXAMPLE_CRD`] as JSON.
pub fn kopfexample_crd() -> Value {
    serde_norway::from_str(KOPFEXAMPLE_CRD).expect("the KopfExample CRD is valid YAML")
}

/// The OpenAPI schema of KopfExamples in [`KOPFEXAMPLE_CRD`]: an object whose `spec` and
/// `status` are free-form objects.
pub fn kopfexample_schema() -> Value {
    kopfexample_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"].take()
}

/// The KopfExample CRD with this OpenAPI schema of its objects instead of the free-form one:
/// for tests of validation, pruning and defaults.
///
/// ```
/// # use serde_json::json;
/// let schema = json!({"type": "object", "properties": {
///     "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
/// }});
/// let crd = kopf_fake_apiserver::fixtures::kopfexample_crd_with_schema(schema.clone());
/// assert_eq!(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"], schema);
/// ```
pub fn kopfexample_crd_with_schema(schema: Value) -> Value {
    let mut crd = kopfexample_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = schema;
    crd
}

/// A KopfExample named `name` with this `spec` (in the namespace it is posted to, or
/// `default` when applied).
///
/// ```
/// # use serde_json::json;
/// let kex = kopf_fake_apiserver::fixtures::kopfexample("kex", json!({"field": "value"}));
/// assert_eq!(kex["kind"], "KopfExample");
/// assert_eq!(kex["metadata"]["name"], "kex");
/// ```
pub fn kopfexample(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "kopf.dev/v1",
        "kind": "KopfExample",
        "metadata": {"name": name},
        "spec": spec,
    })
}

/// The path of the KopfExamples in `namespace` (to list, watch, or post to).
///
/// ```
/// # use kopf_fake_apiserver::fixtures::{KOPFEXAMPLES, kopfexamples_in};
/// assert_eq!(kopfexamples_in("default"), KOPFEXAMPLES);
/// ```
pub fn kopfexamples_in(namespace: &str) -> String {
    format!("/apis/kopf.dev/v1/namespaces/{namespace}/kopfexamples")
}

/// The path of the KopfExample `name` in `namespace`.
///
/// ```
/// let path = kopf_fake_apiserver::fixtures::kopfexample_path("default", "kex");
/// assert_eq!(path, "/apis/kopf.dev/v1/namespaces/default/kopfexamples/kex");
/// ```
pub fn kopfexample_path(namespace: &str, name: &str) -> String {
    format!("{}/{name}", kopfexamples_in(namespace))
}

/// A CRD of the KopfExample's shape for another kind: `kind` in `group`, namespaced, version
/// `v1` with a status subresource, free-form `spec` and `status`, its plural the kind in
/// lower case with an `s` (`Widget`: `widgets.<group>`). Add what a test needs to the JSON
/// (short names, categories).
///
/// ```
/// let crd = kopf_fake_apiserver::fixtures::free_form_crd("example.com", "Widget");
/// assert_eq!(crd["metadata"]["name"], "widgets.example.com");
/// ```
pub fn free_form_crd(group: &str, kind: &str) -> Value {
    let singular = kind.to_lowercase();
    let plural = format!("{singular}s");
    let mut crd = kopfexample_crd();
    crd["metadata"]["name"] = format!("{plural}.{group}").into();
    crd["spec"]["group"] = group.into();
    crd["spec"]["names"] = json!({"kind": kind, "plural": plural, "singular": singular});
    crd["spec"]["versions"][0]
        .as_object_mut()
        .expect("the CRD has a version")
        .remove("additionalPrinterColumns");
    crd
}
