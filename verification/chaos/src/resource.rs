//! The resource the chaos operator serves, and its objects.

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
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "chaosobjects.kopf.dev"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": "ChaosObject", "plural": PLURAL, "singular": "chaosobject"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    },
                }},
            }],
        },
    })
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
