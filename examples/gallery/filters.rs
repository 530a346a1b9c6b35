//! Filters (Kopf's `11-filtering-handlers`): handlers that run only for some objects, chosen
//! by labels, annotations, a predicate, or a field's value. Each stores `"matched"` at
//! `status.<handler>`, so an object's status shows which handlers ran for it.
//!
//! ```sh
//! cargo run --example filters &   # with KUBECONFIG and the CRD as for `children`
//! kubectl apply -f examples/obj.yaml  # labelled somelabel=somevalue, annotated likewise
//! kubectl get kopfexample kopf-example-1 -o jsonpath='{.status}'
//! ```

use kopf::Invocation;

/// Runs for objects labelled `somelabel: somevalue`.
#[kopf::on_create("kopf.dev", "v1", "kopfexamples", labels("somelabel" = "somevalue"))]
pub async fn create_with_label_value() -> &'static str {
    "matched"
}

/// Runs for objects with a `somelabel` label, whatever its value.
#[kopf::on_create("kopf.dev", "v1", "kopfexamples", labels("somelabel" = present))]
pub async fn create_with_label_present() -> &'static str {
    "matched"
}

/// Runs for objects without a `somelabel` label.
#[kopf::on_create("kopf.dev", "v1", "kopfexamples", labels("somelabel" = absent))]
pub async fn create_with_label_absent() -> &'static str {
    "matched"
}

/// Runs for objects whose `someannotation` annotation passes a callable.
#[kopf::on_create(
    "kopf.dev",
    "v1",
    "kopfexamples",
    annotations("someannotation" = |value: Option<&str>| value.is_some_and(|v| v.starts_with("some")))
)]
pub async fn create_with_annotation_callable() -> &'static str {
    "matched"
}

/// Whether the object's spec asks for the `when` handler.
pub fn is_good_enough(invocation: &Invocation) -> bool {
    invocation.spec()["field"] == "good"
}

/// Runs for objects that [`is_good_enough`] accepts.
#[kopf::on_create("kopf.dev", "v1", "kopfexamples", when = is_good_enough)]
pub async fn create_when_good_enough() -> &'static str {
    "matched"
}

/// Runs when `spec.field` changes to `"value"`, with the field's old and new values.
#[kopf::on_update("kopf.dev", "v1", "kopfexamples", field = "spec.field", new = "value")]
pub async fn update_to_value(old: Option<String>, new: Option<String>) -> String {
    format!("{} -> {}", old.unwrap_or_default(), new.unwrap_or_default())
}
