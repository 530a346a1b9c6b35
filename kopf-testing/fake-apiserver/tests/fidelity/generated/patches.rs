//! The four patch kinds: JSON merge, JSON patch (a failing `test` included), strategic merge
//! on built-ins (lists merged by their keys, directives), and server-side apply with field
//! managers, conflicts and `force`; what each answers when the patch is malformed or the
//! object missing.

use serde_json::json;

use super::{CONFIGMAPS, configmap};
use crate::sequence::{Sequence, call, get, patch, post};

const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

pub(super) fn sequences() -> Vec<Sequence> {
    let cm = format!("{CONFIGMAPS}/p");
    vec![
        Sequence::new("patches/merge")
            .send("create", post(CONFIGMAPS, configmap("p", json!({"a": "1", "b": "2"}))))
            .send(
                "change",
                patch(&cm, MERGE, json!({"data": {"a": "x", "b": null, "c": "3"},
                                         "metadata": {"labels": {"l": "v"}}})),
            )
            .send(
                "with-current-version",
                patch(&cm, MERGE, json!({"metadata": {"resourceVersion": "{{change.rv}}"},
                                         "data": {"d": "4"}})),
            )
            .send(
                "with-stale-version",
                patch(&cm, MERGE, json!({"metadata": {"resourceVersion": "{{change.rv}}"},
                                         "data": {"e": "5"}})),
            )
            .send("change-name", patch(&cm, MERGE, json!({"metadata": {"name": "other"}})))
            .send("missing", patch(&format!("{CONFIGMAPS}/nope"), MERGE, json!({"data": {}})))
            .send("malformed", call("PATCH", &cm).text(MERGE, "{not json"))
            .send("not-an-object", call("PATCH", &cm).text(MERGE, "[]"))
            .send("empty", call("PATCH", &cm).text(MERGE, ""))
            .send("no-content-type", call("PATCH", &cm).text("", "{}"))
            .send("unknown-type", call("PATCH", &cm).text("application/xml", "<x/>"))
            .send("invalid-result", patch(&cm, MERGE, json!({"data": {"bad key": "x"}}))),
        Sequence::new("patches/json-patch")
            .send("create", post(CONFIGMAPS, configmap("p", json!({"a": "1"}))))
            .send(
                "operations",
                patch(&cm, JSON_PATCH, json!([
                    {"op": "add", "path": "/data/b", "value": "2"},
                    {"op": "replace", "path": "/data/a", "value": "x"},
                    {"op": "copy", "from": "/data/a", "path": "/data/c"},
                    {"op": "move", "from": "/data/c", "path": "/data/d"},
                    {"op": "test", "path": "/data/b", "value": "2"},
                    {"op": "add", "path": "/metadata/labels", "value": {"k": "v"}},
                ])),
            )
            .send(
                "failing-test",
                patch(&cm, JSON_PATCH, json!([
                    {"op": "test", "path": "/data/a", "value": "nope"},
                    {"op": "add", "path": "/data/z", "value": "never"},
                ])),
            )
            .send(
                "remove-missing",
                patch(&cm, JSON_PATCH, json!([{"op": "remove", "path": "/data/absent"}])),
            )
            .send(
                "replace-missing",
                patch(&cm, JSON_PATCH, json!([{"op": "replace", "path": "/spec/x", "value": 1}])),
            )
            .send(
                "bad-op",
                patch(&cm, JSON_PATCH, json!([{"op": "frobnicate", "path": "/data/a"}])),
            )
            .send("not-a-list", patch(&cm, JSON_PATCH, json!({"op": "add"})))
            .send(
                "test-version",
                patch(&cm, JSON_PATCH, json!([
                    {"op": "test", "path": "/metadata/resourceVersion", "value": "{{operations.rv}}"},
                    {"op": "add", "path": "/data/t", "value": "1"},
                ])),
            )
            .send("get", get(&cm)),
        Sequence::new("patches/strategic")
            .send(
                "create",
                post(
                    "/api/v1/namespaces/{{ns}}/podtemplates",
                    json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                           "template": {"spec": {"containers": [
                               {"name": "a", "image": "i", "env": [{"name": "X", "value": "1"}]},
                               {"name": "b", "image": "i"},
                           ]}}}),
                ),
            )
            .send(
                "merge-by-key",
                patch(
                    "/api/v1/namespaces/{{ns}}/podtemplates/t",
                    STRATEGIC,
                    json!({"template": {"spec": {"containers": [
                        {"name": "b", "image": "j"},
                        {"name": "c", "image": "k"},
                    ]}}}),
                ),
            )
            .send(
                "delete-directive",
                patch(
                    "/api/v1/namespaces/{{ns}}/podtemplates/t",
                    STRATEGIC,
                    json!({"template": {"spec": {"containers": [
                        {"name": "a", "$patch": "delete"},
                    ]}}}),
                ),
            )
            .send(
                "replace-directive",
                patch(
                    "/api/v1/namespaces/{{ns}}/podtemplates/t",
                    STRATEGIC,
                    json!({"template": {"spec": {"containers": [
                        {"name": "z", "image": "z"}, {"$patch": "replace"},
                    ]}}}),
                ),
            )
            .send(
                "set-element-order",
                patch(
                    "/api/v1/namespaces/{{ns}}/podtemplates/t",
                    STRATEGIC,
                    json!({"template": {"spec": {
                        "$setElementOrder/containers": [{"name": "z"}],
                        "containers": [{"name": "z", "image": "zz"}],
                    }}}),
                ),
            )
            .send(
                "bad-directive",
                patch(
                    "/api/v1/namespaces/{{ns}}/podtemplates/t",
                    STRATEGIC,
                    json!({"template": {"$patch": "explode"}}),
                ),
            )
            .send("configmap", post(CONFIGMAPS, configmap("p", json!({"a": "1"}))))
            .send(
                "configmap-strategic",
                patch(&cm, STRATEGIC, json!({"data": {"b": "2"}, "metadata": {"labels": {"x": "y"}}})),
            ),
        Sequence::new("patches/apply")
            .send(
                "first",
                call("PATCH", &format!("{cm}?fieldManager=one"))
                    .text(APPLY, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\ndata:\n  a: \"1\"\n  b: \"2\"\n"),
            )
            .send(
                "conflict",
                call("PATCH", &format!("{cm}?fieldManager=two"))
                    .text(APPLY, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\ndata:\n  a: \"9\"\n"),
            )
            .send(
                "forced",
                call("PATCH", &format!("{cm}?fieldManager=two&force=true"))
                    .text(APPLY, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\ndata:\n  a: \"9\"\n"),
            )
            .send(
                "shrink",
                call("PATCH", &format!("{cm}?fieldManager=one"))
                    .text(APPLY, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\ndata:\n  b: \"2\"\n"),
            )
            .send(
                "no-manager",
                call("PATCH", &cm).text(APPLY, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\n"),
            )
            .send(
                "json-body",
                call("PATCH", &format!("{cm}?fieldManager=three")).json_as(
                    APPLY,
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"},
                           "data": {"c": "3"}}),
                ),
            )
            .send(
                "wrong-name",
                call("PATCH", &format!("{cm}?fieldManager=one"))
                    .text(APPLY, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: q\n"),
            )
            .send(
                "no-kind",
                call("PATCH", &format!("{cm}?fieldManager=one"))
                    .text(APPLY, "metadata:\n  name: p\n"),
            )
            .send(
                "malformed-yaml",
                call("PATCH", &format!("{cm}?fieldManager=one")).text(APPLY, "a: [b\n"),
            )
            .send(
                "update-manager",
                patch(&format!("{cm}?fieldManager=four"), MERGE, json!({"data": {"d": "4"}})),
            )
            .send(
                "apply-status-subresource",
                call("PATCH", &format!("{cm}/status?fieldManager=one"))
                    .text(APPLY, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\n"),
            )
            .send("get", get(&cm)),
    ]
}
