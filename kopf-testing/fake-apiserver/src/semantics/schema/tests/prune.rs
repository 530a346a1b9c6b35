//! Pruning and defaulting.

use super::*;

#[test]
fn prune_drops_unknown_fields_and_reports_paths() {
    let schema = root(json!({"type": "object", "properties": {
        "keep": {"type": "string"},
        "list": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "integer"}}}},
        "map": {"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {"type": "string"}}}},
    }}));
    let mut object = cr(json!({
        "keep": "k", "foo": 1,
        "list": [{"a": 1, "b": 2}, {"c": {"d": 1}}],
        "map": {"m1": {"x": "y", "z": 1}},
    }));
    object["status"] = json!({"s": 1});
    object["metadata"]["whatever"] = json!(1);
    let pruned = prune(&mut object, &schema);
    assert_eq!(
        pruned,
        vec![
            "spec.foo",
            "spec.list[0].b",
            "spec.list[1].c",
            "spec.map.m1.z",
            "status"
        ]
    );
    assert_eq!(
        object,
        json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "x", "whatever": 1},
               "spec": {"keep": "k", "list": [{"a": 1}, {}], "map": {"m1": {"x": "y"}}}})
    );
}

#[test]
fn prune_keeps_field_order() {
    let schema = root(
        json!({"type": "object", "properties": {"a": {"type": "string"}, "c": {"type": "string"}, "e": {"type": "string"}}}),
    );
    let mut object = cr(json!({"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}));
    prune(&mut object, &schema);
    let keys: Vec<&String> = object["spec"].as_object().unwrap().keys().collect();
    assert_eq!(keys, vec!["a", "c", "e"]);
}

#[test]
fn prune_honours_preserve_unknown_fields() {
    // At the root: nothing unknown is dropped, known parts still are.
    let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
        "spec": {"type": "object", "properties": {"a": {"type": "string"}}},
    }});
    let mut object = cr(json!({"a": "x", "b": "y"}));
    object["extra"] = json!({"deep": [1, {"x": 2}]});
    let pruned = prune(&mut object, &schema);
    assert_eq!(pruned, vec!["spec.b"]);
    assert_eq!(object["extra"], json!({"deep": [1, {"x": 2}]}));

    // Nested, with known fields inside still pruned.
    let schema = root(json!({"type": "object", "properties": {
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
            "typed": {"type": "object", "properties": {"k": {"type": "string"}}},
        }},
    }}));
    let mut object =
        cr(json!({"free": {"any": {"thing": [1]}, "typed": {"k": "v", "junk": 1}}, "junk": 2}));
    let pruned = prune(&mut object, &schema);
    assert_eq!(pruned, vec!["spec.free.typed.junk", "spec.junk"]);
    assert_eq!(
        object["spec"],
        json!({"free": {"any": {"thing": [1]}, "typed": {"k": "v"}}})
    );
}

#[test]
fn prune_embedded_resources_keep_type_meta() {
    let schema = root(json!({"type": "object", "properties": {
        "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {
            "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        }},
    }}));
    let mut object = cr(json!({"template": {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"a": "b"}},
        "spec": {"replicas": 1, "unknown": true}, "status": {},
    }}));
    let pruned = prune(&mut object, &schema);
    assert_eq!(
        pruned,
        vec!["spec.template.spec.unknown", "spec.template.status"]
    );
    assert_eq!(
        object["spec"]["template"],
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"a": "b"}}, "spec": {"replicas": 1}})
    );
}

#[test]
fn prune_root_meta_fields_survive_any_schema() {
    for schema in [
        json!({}),
        json!({"type": "object"}),
        json!(42),
        json!({"properties": {"metadata": {"type": "string"}}}),
    ] {
        let mut object = cr(json!({"a": 1}));
        prune(&mut object, &schema);
        assert_eq!(object["apiVersion"], "kopf.dev/v1");
        assert_eq!(object["kind"], "KopfExample");
        assert_eq!(object["metadata"], json!({"name": "x"}));
    }
}

#[test]
fn prune_drops_non_nullable_nulls_without_defaults() {
    let schema = root(json!({"type": "object", "properties": {
        "plain": {"type": "string"},
        "nullable": {"type": "string", "nullable": true},
        "defaulted": {"type": "string", "default": "d"},
        "map": {"type": "object", "additionalProperties": {"type": "string"}},
    }}));
    let mut object =
        cr(json!({"plain": null, "nullable": null, "defaulted": null, "map": {"k": null}}));
    let pruned = prune(&mut object, &schema);
    assert!(pruned.is_empty());
    assert_eq!(
        object["spec"],
        json!({"nullable": null, "defaulted": null, "map": {}})
    );
    apply_defaults(&mut object, &schema);
    assert_eq!(
        object["spec"],
        json!({"nullable": null, "defaulted": "d", "map": {}})
    );
    assert_eq!(errs(&object, &schema), vec![]);
}

#[test]
fn prune_without_items_or_with_additional_false() {
    let schema = root(json!({"type": "object", "properties": {
        "list": {"type": "array"},
        "closed": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false},
    }}));
    let mut object = cr(json!({"list": [1, {"a": 1}, [{"b": 2}]], "closed": {"a": "x", "b": "y"}}));
    let pruned = prune(&mut object, &schema);
    assert_eq!(
        pruned,
        vec!["spec.closed.b", "spec.list[1].a", "spec.list[2][0].b"]
    );
    assert_eq!(
        object["spec"],
        json!({"list": [1, {}, [{}]], "closed": {"a": "x"}})
    );
}

// ---------------- defaulting

#[test]
fn defaults_fill_absent_fields_only() {
    let schema = root(json!({"type": "object", "default": {}, "properties": {
        "replicas": {"type": "integer", "default": 1},
        "mode": {"type": "string", "default": "auto"},
        "nested": {"type": "object", "default": {}, "properties": {
            "deep": {"type": "object", "default": {"x": 1, "junk": true}, "properties": {
                "x": {"type": "integer"},
                "y": {"type": "string", "default": "yy"},
            }},
        }},
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "port": {"type": "integer", "default": 80},
            "proto": {"type": "string", "default": "TCP"},
        }}},
        "nullable": {"type": "string", "nullable": true, "default": "n"},
        "labels": {"type": "object", "additionalProperties": {"type": "string", "default": "v"}},
    }}));
    let mut object = cr(json!({
        "mode": "manual",
        "items": [{"port": 8080}, {}, {"proto": "UDP"}],
        "nullable": null,
        "labels": {"a": null, "b": "x"},
    }));
    apply_defaults(&mut object, &schema);
    assert_eq!(
        object["spec"],
        json!({
            "mode": "manual",
            "items": [{"port": 8080, "proto": "TCP"}, {"port": 80, "proto": "TCP"}, {"proto": "UDP", "port": 80}],
            "nullable": null,
            "labels": {"a": "v", "b": "x"},
            "replicas": 1,
            "nested": {"deep": {"x": 1, "y": "yy"}},
        })
    );

    // A missing spec is created from its default, with defaults inside it.
    let mut bare = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {}});
    apply_defaults(&mut bare, &schema);
    assert_eq!(
        bare["spec"],
        json!({"replicas": 1, "mode": "auto", "nested": {"deep": {"x": 1, "y": "yy"}}, "nullable": "n"})
    );
}

#[test]
fn defaults_replace_null_items_and_skip_root_meta() {
    let schema = json!({"type": "object", "properties": {
        "metadata": {"type": "object", "default": {"name": "nope"}},
        "kind": {"type": "string", "default": "Nope"},
        "spec": {"type": "object", "properties": {
            "list": {"type": "array", "items": {"type": "string", "default": "d"}},
        }},
    }});
    let mut object = json!({"apiVersion": "a/v1", "spec": {"list": ["a", null]}});
    apply_defaults(&mut object, &schema);
    assert_eq!(
        object,
        json!({"apiVersion": "a/v1", "spec": {"list": ["a", "d"]}})
    );
}
