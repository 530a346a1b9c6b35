//! Custom resources: a CRD with a structural schema (types, formats, enums, bounds),
//! defaults, pruning, CEL rules (`x-kubernetes-validations`, transition rules with
//! `oldSelf`), the status subresource, generation, printer columns; invalid CRDs; strategic
//! merge refused; field validation.

use serde_json::json;

use crate::sequence::{Sequence, call, get, patch, post, put};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/{{u}}.fidelity.example/v1/namespaces/{{ns}}/widgets";
const MERGE: &str = "application/merge-patch+json";

/// The widgets' spec: types, formats, enums, bounds, defaults, list types and CEL rules (one
/// of them a transition rule).
fn widget_spec_schema() -> serde_json::Value {
    let properties = json!({
        "size": {"type": "integer", "minimum": 0},
        "max": {"type": "integer", "default": 10},
        "color": {"type": "string", "enum": ["red", "green"], "default": "red"},
        "name": {"type": "string", "maxLength": 8, "pattern": "^[a-z]+$"},
        "frozen": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"},
                 "x-kubernetes-list-type": "set", "maxItems": 3},
        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "required": ["name"],
                            "properties": {"name": {"type": "string"},
                                           "port": {"type": "integer"}}}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "when": {"type": "string", "format": "date-time"},
        "immutable": {"type": "string",
                      "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]},
    });
    json!({
        "type": "object",
        "required": ["size"],
        "x-kubernetes-validations": [
            {"rule": "self.size <= self.max", "message": "size must not exceed max"},
            {"rule": "!has(self.frozen) || !self.frozen || self.size == oldSelf.size",
             "message": "a frozen widget keeps its size"},
        ],
        "properties": properties,
    })
}

/// The widgets' CRD: that schema, a status subresource and printer columns.
fn widgets() -> serde_json::Value {
    let schema = json!({
        "type": "object",
        "properties": {
            "spec": widget_spec_schema(),
            "status": {"type": "object", "properties": {
                "observedGeneration": {"type": "integer"},
                "phase": {"type": "string"},
            }},
        },
    });
    let columns = json!([
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
        {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]);
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.{{u}}.fidelity.example"},
        "spec": {
            "group": "{{u}}.fidelity.example",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                      "shortNames": ["wd"], "categories": ["fidelity"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": columns,
                "schema": {"openAPIV3Schema": schema},
            }],
        },
    })
}

fn widget(name: &str, spec: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "{{u}}.fidelity.example/v1", "kind": "Widget",
           "metadata": {"name": name}, "spec": spec})
}

pub(super) fn sequences() -> Vec<Sequence> {
    let w = format!("{WIDGETS}/w");
    vec![
        Sequence::new("crds/widgets")
            .send("crd", post(CRDS, widgets()))
            .established("widgets.{{u}}.fidelity.example")
            .send(
                "crd-get",
                get(&format!("{CRDS}/widgets.{{{{u}}}}.fidelity.example")),
            )
            .send(
                "create",
                post(WIDGETS, widget("w", json!({"size": 3, "unknown": 1}))),
            )
            .send("get", get(&w))
            .send(
                "missing-required",
                post(WIDGETS, widget("r", json!({"max": 3}))),
            )
            .send(
                "wrong-type",
                post(WIDGETS, widget("t", json!({"size": "three"}))),
            )
            .send(
                "below-minimum",
                post(WIDGETS, widget("m", json!({"size": -1}))),
            )
            .send(
                "not-in-enum",
                post(WIDGETS, widget("e", json!({"size": 1, "color": "blue"}))),
            )
            .send(
                "pattern-and-length",
                post(
                    WIDGETS,
                    widget("p", json!({"size": 1, "name": "Too-Long-Name"})),
                ),
            )
            .send(
                "set-duplicates",
                post(WIDGETS, widget("s", json!({"size": 1, "tags": ["a", "a"]}))),
            )
            .send(
                "too-many-items",
                post(
                    WIDGETS,
                    widget("i", json!({"size": 1, "tags": ["a", "b", "c", "d"]})),
                ),
            )
            .send(
                "map-duplicates",
                post(
                    WIDGETS,
                    widget(
                        "k",
                        json!({"size": 1, "ports": [{"name": "a"}, {"name": "a"}]}),
                    ),
                ),
            )
            .send(
                "bad-date",
                post(
                    WIDGETS,
                    widget("d", json!({"size": 1, "when": "yesterday"})),
                ),
            )
            .send("cel-rule", post(WIDGETS, widget("c", json!({"size": 20}))))
            .send(
                "several-errors",
                post(
                    WIDGETS,
                    widget("x", json!({"size": -5, "color": "blue", "max": "many"})),
                ),
            )
            .send(
                "strict-unknown",
                post(
                    &format!("{WIDGETS}?fieldValidation=Strict"),
                    widget("u", json!({"size": 1, "extra": true})),
                ),
            )
            .send(
                "warn-unknown",
                post(
                    &format!("{WIDGETS}?fieldValidation=Warn"),
                    widget("v", json!({"size": 1, "extra": true})),
                ),
            )
            .send(
                "unknown-top-level",
                post(
                    WIDGETS,
                    json!({"apiVersion": "{{u}}.fidelity.example/v1", "kind": "Widget",
                                     "metadata": {"name": "top"}, "spec": {"size": 1}, "other": 1}),
                ),
            )
            .send(
                "spec-change",
                patch(&w, MERGE, json!({"spec": {"size": 4}})),
            )
            .send(
                "label-change",
                patch(&w, MERGE, json!({"metadata": {"labels": {"a": "b"}}})),
            )
            .send(
                "status-through-main",
                patch(&w, MERGE, json!({"status": {"phase": "Ignored"}})),
            )
            .send(
                "status",
                patch(
                    &format!("{w}/status"),
                    MERGE,
                    json!({"status": {"observedGeneration": 2, "phase": "Ready"}}),
                ),
            )
            .send(
                "spec-through-status",
                patch(&format!("{w}/status"), MERGE, json!({"spec": {"size": 9}})),
            )
            .send(
                "status-invalid",
                patch(
                    &format!("{w}/status"),
                    MERGE,
                    json!({"status": {"phase": 5}}),
                ),
            )
            .send(
                "freeze",
                patch(
                    &w,
                    MERGE,
                    json!({"spec": {"frozen": true, "immutable": "x"}}),
                ),
            )
            .send(
                "resize-frozen",
                patch(&w, MERGE, json!({"spec": {"size": 5}})),
            )
            .send(
                "change-immutable",
                patch(&w, MERGE, json!({"spec": {"immutable": "y"}})),
            )
            .send(
                "strategic",
                patch(
                    &w,
                    "application/strategic-merge-patch+json",
                    json!({"spec": {"size": 1}}),
                ),
            )
            .send(
                "put",
                put(
                    &w,
                    json!({"apiVersion": "{{u}}.fidelity.example/v1", "kind": "Widget",
                               "metadata": {"name": "w", "resourceVersion": "{{freeze.rv}}"},
                               "spec": {"size": 4, "frozen": false, "immutable": "x"}}),
                ),
            )
            .send(
                "table",
                get(WIDGETS).header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io"),
            )
            .send("scale-missing", get(&format!("{w}/scale")))
            .send(
                "wrong-version",
                get("/apis/{{u}}.fidelity.example/v2/namespaces/{{ns}}/widgets"),
            )
            .send("discovery", get("/apis/{{u}}.fidelity.example/v1"))
            .send(
                "delete-crd",
                call(
                    "DELETE",
                    &format!("{CRDS}/widgets.{{{{u}}}}.fidelity.example"),
                ),
            ),
        Sequence::new("crds/invalid")
            .send(
                "not-structural",
                post(CRDS, {
                    let mut crd = widgets();
                    crd["metadata"]["name"] = "things.{{u}}.fidelity.example".into();
                    crd["spec"]["names"] =
                        json!({"plural": "things", "singular": "thing", "kind": "Thing"});
                    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] =
                        json!({"type": "object", "properties": {"spec": {}}});
                    crd
                }),
            )
            .send(
                "bad-cel",
                post(CRDS, {
                    let mut crd = widgets();
                    crd["metadata"]["name"] = "gadgets.{{u}}.fidelity.example".into();
                    crd["spec"]["names"] =
                        json!({"plural": "gadgets", "singular": "gadget", "kind": "Gadget"});
                    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
                        ["x-kubernetes-validations"] = json!([{"rule": "self.size >"}]);
                    crd
                }),
            )
            .send(
                "name-mismatch",
                post(CRDS, {
                    let mut crd = widgets();
                    crd["metadata"]["name"] = "others.{{u}}.fidelity.example".into();
                    crd
                }),
            )
            .send(
                "no-storage-version",
                post(CRDS, {
                    let mut crd = widgets();
                    crd["metadata"]["name"] = "bits.{{u}}.fidelity.example".into();
                    crd["spec"]["names"] =
                        json!({"plural": "bits", "singular": "bit", "kind": "Bit"});
                    crd["spec"]["versions"][0]["storage"] = false.into();
                    crd
                }),
            )
            .send(
                "bad-default",
                post(CRDS, {
                    let mut crd = widgets();
                    crd["metadata"]["name"] = "bolts.{{u}}.fidelity.example".into();
                    crd["spec"]["names"] =
                        json!({"plural": "bolts", "singular": "bolt", "kind": "Bolt"});
                    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
                        ["properties"]["max"]["default"] = "ten".into();
                    crd
                }),
            ),
    ]
}
