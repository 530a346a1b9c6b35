//! Deletions: finalizers holding an object, the three propagation policies with owners and
//! dependents (the garbage collector's work), preconditions, grace periods, collections.

use serde_json::json;

use super::{CONFIGMAPS, configmap};
use crate::sequence::{Condition, Sequence, call, delete, get, patch, post};

const MERGE: &str = "application/merge-patch+json";

/// The owner `o` and its dependent `d` (blocking the owner's deletion when `block`).
fn owned(name: &str, block: bool) -> Sequence {
    Sequence::new(name)
        .send("owner", post(CONFIGMAPS, configmap("o", json!({}))))
        .send(
            "dependent",
            post(
                CONFIGMAPS,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                    "name": "d",
                    "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o",
                                         "uid": "{{owner.uid}}", "blockOwnerDeletion": block}],
                }}),
            ),
        )
}

/// Deletes with a body of DeleteOptions.
fn delete_with(path: &str, options: serde_json::Value) -> crate::sequence::Call {
    call("DELETE", path).json(options)
}

pub(super) fn sequences() -> Vec<Sequence> {
    let o = format!("{CONFIGMAPS}/o");
    let d = format!("{CONFIGMAPS}/d");
    vec![
        Sequence::new("deletion/finalizers")
            .send(
                "create",
                post(
                    CONFIGMAPS,
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "f", "finalizers": ["fidelity.example/hold"]}}),
                ),
            )
            .send("delete", delete(&format!("{CONFIGMAPS}/f")))
            .send("get-held", get(&format!("{CONFIGMAPS}/f")))
            .send("delete-again", delete(&format!("{CONFIGMAPS}/f")))
            .send(
                "add-finalizer-while-deleting",
                patch(&format!("{CONFIGMAPS}/f"), MERGE,
                      json!({"metadata": {"finalizers": ["fidelity.example/hold", "fidelity.example/more"]}})),
            )
            .send(
                "change-data-while-deleting",
                patch(&format!("{CONFIGMAPS}/f"), MERGE, json!({"data": {"x": "y"}})),
            )
            .send(
                "clear-deletion-timestamp",
                patch(&format!("{CONFIGMAPS}/f"), MERGE, json!({"metadata": {"deletionTimestamp": null}})),
            )
            .send(
                "release",
                patch(&format!("{CONFIGMAPS}/f"), MERGE, json!({"metadata": {"finalizers": null}})),
            )
            .send("get-gone", get(&format!("{CONFIGMAPS}/f")))
            .send(
                "bad-finalizer",
                post(
                    CONFIGMAPS,
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "g", "finalizers": ["no slash"]}}),
                ),
            ),
        owned("deletion/background", false)
            .send(
                "delete-owner",
                delete_with(&o, json!({"kind": "DeleteOptions", "apiVersion": "v1",
                                       "propagationPolicy": "Background"})),
            )
            .poll("dependent-gone", get(&d), Condition::Code(404))
            .send("owner-gone", get(&o)),
        owned("deletion/foreground", true)
            .send("delete-owner", delete(&format!("{o}?propagationPolicy=Foreground")))
            .poll("dependent-gone", get(&d), Condition::Code(404))
            .poll("owner-gone", get(&o), Condition::Code(404)),
        owned("deletion/orphan", false)
            .send("delete-owner", delete(&format!("{o}?propagationPolicy=Orphan")))
            .poll("owner-gone", get(&o), Condition::Code(404))
            .poll(
                "dependent-orphaned",
                get(&d),
                Condition::Absent("/metadata/ownerReferences".into()),
            ),
        (1..=7)
            .fold(Sequence::new("deletion/options"), |s, i| {
                s.send(&format!("create-{i}"), post(CONFIGMAPS, configmap(&format!("o{i}"), json!({"k": "v"}))))
            })
            .send("bad-policy", delete(&format!("{CONFIGMAPS}/o1?propagationPolicy=Sideways")))
            .send(
                "both-orphan-and-policy",
                delete_with(&format!("{CONFIGMAPS}/o2"), json!({"orphanDependents": true, "propagationPolicy": "Background"})),
            )
            .send(
                "uid-precondition",
                delete_with(&format!("{CONFIGMAPS}/o3"), json!({"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})),
            )
            .send(
                "version-precondition",
                delete_with(&format!("{CONFIGMAPS}/o4"), json!({"preconditions": {"resourceVersion": "1"}})),
            )
            .send("negative-grace", delete(&format!("{CONFIGMAPS}/o5?gracePeriodSeconds=-1")))
            .send("bad-body", call("DELETE", &format!("{CONFIGMAPS}/o6")).text("application/json", "{nope"))
            .send(
                "wrong-kind-body",
                delete_with(&format!("{CONFIGMAPS}/o6"), json!({"kind": "ConfigMap", "apiVersion": "v1"})),
            )
            .send(
                "matching-preconditions",
                delete_with(&format!("{CONFIGMAPS}/o7"), json!({"preconditions": {"uid": "{{create-7.uid}}",
                                                                    "resourceVersion": "{{create-7.rv}}"}})),
            )
            .send("left", get(&format!("{CONFIGMAPS}?fieldSelector=metadata.name!%3Dkube-root-ca.crt"))),
        Sequence::new("deletion/pods")
            .send(
                "create",
                post(
                    "/api/v1/namespaces/{{ns}}/pods",
                    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
                ),
            )
            .send(
                "graceful",
                delete("/api/v1/namespaces/{{ns}}/pods/p?gracePeriodSeconds=30"),
            )
            .poll("gone", get("/api/v1/namespaces/{{ns}}/pods/p"), Condition::Code(404))
            .send(
                "create-bound",
                post(
                    "/api/v1/namespaces/{{ns}}/pods",
                    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"},
                           "spec": {"nodeName": "node-1",
                                    "containers": [{"name": "c", "image": "busybox"}]}}),
                ),
            )
            .send(
                "graceful-bound",
                delete("/api/v1/namespaces/{{ns}}/pods/b?gracePeriodSeconds=30"),
            )
            .send("get-terminating", get("/api/v1/namespaces/{{ns}}/pods/b"))
            .send(
                "immediate-bound",
                delete("/api/v1/namespaces/{{ns}}/pods/b?gracePeriodSeconds=0"),
            )
            .poll("bound-gone", get("/api/v1/namespaces/{{ns}}/pods/b"), Condition::Code(404)),
        Sequence::new("deletion/collection")
            .send(
                "create-a",
                post(CONFIGMAPS, json!({"apiVersion": "v1", "kind": "ConfigMap",
                                        "metadata": {"name": "a", "labels": {"g": "1"}}})),
            )
            .send(
                "create-b",
                post(CONFIGMAPS, json!({"apiVersion": "v1", "kind": "ConfigMap",
                                        "metadata": {"name": "b", "labels": {"g": "1"},
                                                     "finalizers": ["fidelity.example/hold"]}})),
            )
            .send(
                "create-c",
                post(CONFIGMAPS, configmap("c", json!({}))),
            )
            .send("dry-run", delete(&format!("{CONFIGMAPS}?labelSelector=g&dryRun=All")))
            .send("delete", delete(&format!("{CONFIGMAPS}?labelSelector=g")))
            .send("left", get(&format!("{CONFIGMAPS}?fieldSelector=metadata.name!%3Dkube-root-ca.crt")))
            .send(
                "release",
                patch(&format!("{CONFIGMAPS}/b"), MERGE, json!({"metadata": {"finalizers": null}})),
            )
            .send("bad-selector", delete(&format!("{CONFIGMAPS}?labelSelector=a%20in%20b"))),
    ]
}
