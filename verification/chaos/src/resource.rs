//! The resource the chaos operator serves, and its objects.

use kopf_testing::fixtures;
use serde_json::{Value, json};

/// The group of the resource.
pub const GROUP: &str = "kopf.dev";
/// Its plural.
pub const PLURAL: &str = "chaosobjects";
/// Its path for objects in the namespace `default`.
pub const OBJECTS: &str = "/apis/kopf.dev/v1/namespaces/default/chaosobjects";
/// The finalizer kopf-rs puts on objects with delete handlers.
pub const FINALIZER: &str = "kopf.zalando.org/KopfFinalizerMarker";
/// The prefix of kopf-rs' annotations (progress records and the diff-base).
pub const ANNOTATIONS: &str = "kopf.zalando.org/";
/// The annotation with the last handled state.
pub const LAST_HANDLED: &str = "kopf.zalando.org/last-handled-configuration";

/// The CRD of `chaosobjects.kopf.dev/v1`, with a status subresource (so results and progress
/// go out in separate writes: more places for a crash to fall between).
pub fn crd() -> Value {
    fixtures::free_form_crd(GROUP, "ChaosObject")
}

/// An object: `size` for the field handler, `failures` planned temporary failures for the
/// handler `second`.
pub fn object(name: &str, size: u64, failures: u64) -> Value {
    json!({
        "apiVersion": "kopf.dev/v1",
        "kind": "ChaosObject",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"size": size, "failures": failures},
    })
}
