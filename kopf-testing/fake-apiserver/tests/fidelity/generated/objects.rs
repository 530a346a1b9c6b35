//! Objects of built-in kinds, valid and invalid: create, get, update (with current, stale
//! and no resourceVersions), generated names, dry runs, field validation, the defaults of
//! Pods, Secrets' `stringData`, immutable objects, namespaces' lifecycle.

use serde_json::json;

use super::{CONFIGMAPS, configmap};
use crate::sequence::{Condition, Sequence, call, delete, get, patch, post, put};

pub(super) fn sequences() -> Vec<Sequence> {
    vec![
        Sequence::new("objects/configmap-lifecycle")
            .send("create", post(CONFIGMAPS, configmap("a", json!({"k": "v"}))))
            .send("exists", post(CONFIGMAPS, configmap("a", json!({}))))
            .send("get", get(&format!("{CONFIGMAPS}/a")))
            .send(
                "update",
                put(
                    &format!("{CONFIGMAPS}/a"),
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "a", "resourceVersion": "{{create.rv}}"},
                           "data": {"k": "w"}}),
                ),
            )
            .send(
                "update-stale",
                put(
                    &format!("{CONFIGMAPS}/a"),
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "a", "resourceVersion": "{{create.rv}}"},
                           "data": {"k": "x"}}),
                ),
            )
            .send(
                "update-unconditional",
                put(
                    &format!("{CONFIGMAPS}/a"),
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "a"}, "data": {"k": "y"}}),
                ),
            )
            .send(
                "update-missing",
                put(
                    &format!("{CONFIGMAPS}/b"),
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "b", "resourceVersion": "{{create.rv}}"}}),
                ),
            )
            .send(
                "update-name-mismatch",
                put(
                    &format!("{CONFIGMAPS}/a"),
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
                ),
            )
            .send("get-missing", get(&format!("{CONFIGMAPS}/nope")))
            .send(
                "get-old-version",
                get(&format!("{CONFIGMAPS}/a?resourceVersion=0")),
            ),
        Sequence::new("objects/configmap-invalid")
            .send("uppercase-name", post(CONFIGMAPS, configmap("Upper", json!({}))))
            .send(
                "no-name",
                post(CONFIGMAPS, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})),
            )
            .send(
                "bad-key",
                post(CONFIGMAPS, configmap("badkey", json!({"a b": "x"}))),
            )
            .send(
                "binary-and-data-key",
                post(
                    CONFIGMAPS,
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "both"},
                           "data": {"k": "v"}, "binaryData": {"k": "dg=="}}),
                ),
            )
            .send(
                "wrong-kind",
                post(
                    CONFIGMAPS,
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "w"}}),
                ),
            )
            .send(
                "other-namespace",
                post(
                    CONFIGMAPS,
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "o", "namespace": "elsewhere"}}),
                ),
            )
            .send(
                "malformed-json",
                call("POST", CONFIGMAPS).text("application/json", "{\"metadata\": "),
            )
            .send("empty-body", call("POST", CONFIGMAPS).text("application/json", ""))
            .send(
                "not-an-object",
                call("POST", CONFIGMAPS).text("application/json", "[1, 2]"),
            )
            .send(
                "unknown-content-type",
                call("POST", CONFIGMAPS).text("text/plain", "hello"),
            )
            .send(
                "long-name",
                post(CONFIGMAPS, configmap(&"n".repeat(254), json!({}))),
            )
            .send(
                "bad-label-key",
                post(
                    CONFIGMAPS,
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "l", "labels": {"a/b/c": "x"}}}),
                ),
            )
            .send(
                "bad-label-value",
                post(
                    CONFIGMAPS,
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "l", "labels": {"k": "bad value"}}}),
                ),
            )
            .send(
                "bad-label-prefix",
                post(
                    CONFIGMAPS,
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "l", "labels": {"Example.com/k": "v"}}}),
                ),
            )
            .send(
                "bad-annotation-key",
                post(
                    CONFIGMAPS,
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "an", "annotations": {"-bad": "x"}}}),
                ),
            )
            .send("missing-namespace", post(
                "/api/v1/namespaces/{{ns}}-absent/configmaps",
                configmap("m", json!({})),
            ))
            .send("unknown-resource", get("/api/v1/namespaces/{{ns}}/nothings"))
            .send("unknown-group", get("/apis/nothing.example/v1/things"))
            .send("method-not-allowed", call("PUT", CONFIGMAPS).json(json!({}))),
        Sequence::new("objects/generate-name")
            .send(
                "create",
                post(
                    CONFIGMAPS,
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"generateName": "gen-"}}),
                ),
            )
            .send("get", get(&format!("{CONFIGMAPS}/{{{{create.name}}}}")))
            .send(
                "bad-prefix",
                post(
                    CONFIGMAPS,
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"generateName": "Bad_"}}),
                ),
            ),
        Sequence::new("objects/dry-run")
            .send(
                "create",
                post(&format!("{CONFIGMAPS}?dryRun=All"), configmap("d", json!({"k": "v"}))),
            )
            .send("get-after-create", get(&format!("{CONFIGMAPS}/d")))
            .send("real-create", post(CONFIGMAPS, configmap("d", json!({"k": "v"}))))
            .send(
                "update",
                put(
                    &format!("{CONFIGMAPS}/d?dryRun=All"),
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "d", "resourceVersion": "{{real-create.rv}}"},
                           "data": {"k": "changed"}}),
                ),
            )
            .send(
                "patch",
                patch(
                    &format!("{CONFIGMAPS}/d?dryRun=All"),
                    "application/merge-patch+json",
                    json!({"data": {"more": "x"}}),
                ),
            )
            .send("delete", delete(&format!("{CONFIGMAPS}/d?dryRun=All")))
            .send("get-after-all", get(&format!("{CONFIGMAPS}/d")))
            .send(
                "bad-value",
                post(&format!("{CONFIGMAPS}?dryRun=Some"), configmap("e", json!({}))),
            ),
        Sequence::new("objects/field-validation")
            .send(
                "strict-unknown",
                post(
                    &format!("{CONFIGMAPS}?fieldValidation=Strict"),
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"},
                           "unknown": 1, "metadata2": {}}),
                ),
            )
            .send(
                "warn-unknown",
                post(
                    &format!("{CONFIGMAPS}?fieldValidation=Warn"),
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w"},
                           "unknown": 1}),
                ),
            )
            .send(
                "ignore-unknown",
                post(
                    &format!("{CONFIGMAPS}?fieldValidation=Ignore"),
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "i"},
                           "unknown": 1}),
                ),
            )
            .send(
                "default-unknown",
                post(
                    CONFIGMAPS,
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"},
                           "unknown": {"nested": true}}),
                ),
            )
            .send(
                "strict-duplicate",
                call("POST", &format!("{CONFIGMAPS}?fieldValidation=Strict")).text(
                    "application/json",
                    r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dup"}, "data": {"a": "1", "a": "2"}}"#,
                ),
            )
            .send(
                "bad-value",
                post(
                    &format!("{CONFIGMAPS}?fieldValidation=Sometimes"),
                    configmap("b", json!({})),
                ),
            )
            .send(
                "wrong-type",
                post(
                    CONFIGMAPS,
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "t"},
                           "data": {"k": 1}}),
                ),
            ),
        Sequence::new("objects/secrets")
            .send(
                "create",
                post(
                    "/api/v1/namespaces/{{ns}}/secrets",
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                           "stringData": {"user": "admin"}, "data": {"pass": "cHc="}}),
                ),
            )
            .send("get", get("/api/v1/namespaces/{{ns}}/secrets/s"))
            .send(
                "bad-base64",
                post(
                    "/api/v1/namespaces/{{ns}}/secrets",
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "b"},
                           "data": {"pass": "not base64!"}}),
                ),
            )
            .send(
                "tls-missing-keys",
                post(
                    "/api/v1/namespaces/{{ns}}/secrets",
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t"},
                           "type": "kubernetes.io/tls", "data": {}}),
                ),
            )
            .send(
                "immutable",
                post(
                    "/api/v1/namespaces/{{ns}}/secrets",
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "i"},
                           "immutable": true, "data": {"a": "YQ=="}}),
                ),
            )
            .send(
                "change-immutable",
                patch(
                    "/api/v1/namespaces/{{ns}}/secrets/i",
                    "application/merge-patch+json",
                    json!({"data": {"a": "Yg=="}}),
                ),
            )
            .send(
                "change-type",
                patch(
                    "/api/v1/namespaces/{{ns}}/secrets/s",
                    "application/merge-patch+json",
                    json!({"type": "Other"}),
                ),
            ),
        Sequence::new("objects/pods")
            .send(
                "create",
                post(
                    "/api/v1/namespaces/{{ns}}/pods",
                    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
                ),
            )
            .send("get", get("/api/v1/namespaces/{{ns}}/pods/p"))
            .send(
                "no-containers",
                post(
                    "/api/v1/namespaces/{{ns}}/pods",
                    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "q"},
                           "spec": {"containers": []}}),
                ),
            )
            .send(
                "change-image",
                patch(
                    "/api/v1/namespaces/{{ns}}/pods/p",
                    "application/strategic-merge-patch+json",
                    json!({"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}),
                ),
            )
            .send(
                "change-forbidden",
                patch(
                    "/api/v1/namespaces/{{ns}}/pods/p",
                    "application/strategic-merge-patch+json",
                    json!({"spec": {"restartPolicy": "Never"}}),
                ),
            )
            .send("delete", delete("/api/v1/namespaces/{{ns}}/pods/p"))
            .poll(
                "gone",
                get("/api/v1/namespaces/{{ns}}/pods/p"),
                Condition::Code(404),
            ),
        Sequence::new("objects/namespaces")
            .send(
                "create",
                post("/api/v1/namespaces", json!({"metadata": {"name": "{{u}}-x"}})),
            )
            .send("get", get("/api/v1/namespaces/{{u}}-x"))
            .send(
                "create-inside",
                post("/api/v1/namespaces/{{u}}-x/configmaps", configmap("c", json!({}))),
            )
            .send("delete", delete("/api/v1/namespaces/{{u}}-x"))
            .send(
                "create-while-terminating",
                post("/api/v1/namespaces/{{u}}-x/configmaps", configmap("d", json!({}))),
            )
            .poll(
                "gone",
                get("/api/v1/namespaces/{{u}}-x"),
                Condition::Code(404),
            )
            .send("bad-name", post("/api/v1/namespaces", json!({"metadata": {"name": "Bad"}})))
            .send("delete-default", delete("/api/v1/namespaces/default?dryRun=All"))
            .send("delete-kube-system", delete("/api/v1/namespaces/kube-system?dryRun=All")),
    ]
}
