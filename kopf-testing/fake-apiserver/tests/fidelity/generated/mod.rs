//! The generated sequences, by topic: each topic module gives its sequences, named
//! `topic/what`.

mod crds;
mod deletion;
mod known;
mod lists;
mod objects;
mod patches;
mod rbac;
mod shards;
mod watches;
mod webhooks;

use super::sequence::Sequence;

/// Every generated sequence.
pub(crate) fn sequences() -> Vec<Sequence> {
    [
        objects::sequences(),
        patches::sequences(),
        lists::sequences(),
        watches::sequences(),
        deletion::sequences(),
        rbac::sequences(),
        crds::sequences(),
        shards::sequences(),
        webhooks::sequences(),
        known::sequences(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The sequence's ConfigMaps.
const CONFIGMAPS: &str = "/api/v1/namespaces/{{ns}}/configmaps";

/// A ConfigMap named `name` with `data`.
fn configmap(name: &str, data: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": data,
    })
}

/// A namespaced CustomResourceDefinition of the sequence's own group (`{{u}}.fidelity.example`)
/// for `plural` (its kind: the singular, capitalized), served at `v1`, with a `status`
/// subresource and specs of any shape.
fn crd(plural: &str) -> serde_json::Value {
    let singular = plural.trim_end_matches('s');
    let kind = format!("{}{}", singular[..1].to_uppercase(), &singular[1..]);
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{{{{u}}}}.fidelity.example")},
        "spec": {
            "group": "{{u}}.fidelity.example",
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": singular, "kind": kind},
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
