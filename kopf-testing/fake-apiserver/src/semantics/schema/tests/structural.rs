//! Structural checks of CRD schemas, and the message of a 422 Invalid.

use super::*;

#[test]
fn structural_problems_are_worded_like_the_apiserver() {
    let schema = json!({"type": "object", "properties": {
        "spec": {"properties": {
            "list": {"type": "array"},
            "u": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
            "both": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}},
            "bad": {"type": "strnig"},
            "re": {"type": "string", "pattern": "("},
            "emb": {"type": "object", "x-kubernetes-embedded-resource": true},
            "def": {"type": "integer", "default": "one"},
            "items": {"type": "array", "items": {"properties": {}}},
        }},
        "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}},
    }, "anyOf": [{"type": "object", "properties": {"other": {"type": "string"}}}]});
    let problems = check_structural(&schema);
    let expected = [
        "openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
        "openAPIV3Schema.properties[spec].properties[list].items: Required value: must be specified",
        "openAPIV3Schema.properties[spec].properties[u].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        "openAPIV3Schema.properties[spec].properties[both].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
        r#"openAPIV3Schema.properties[spec].properties[bad].type: Unsupported value: "strnig": supported values: "array", "boolean", "integer", "number", "object", "string""#,
        "openAPIV3Schema.properties[spec].properties[emb].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        r#"openAPIV3Schema.properties[spec].properties[def].default: Invalid value: "string":  in body must be of type integer: "string""#,
        "openAPIV3Schema.properties[spec].properties[items].items.type: Required value: must not be empty for specified array items",
        "openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified",
        "openAPIV3Schema.anyOf[0].type: Forbidden: must be empty to be structural",
        "openAPIV3Schema.anyOf[0].properties[other].type: Forbidden: must be empty to be structural",
        "openAPIV3Schema.properties[other]: Required value: because it is defined in openAPIV3Schema.anyOf[0].properties[other]",
    ];
    for want in expected {
        assert!(
            problems.iter().any(|p| p == want),
            "missing {want:?} in {problems:#?}"
        );
    }
    assert!(
        problems.iter().any(|p| p.starts_with(
            r#"openAPIV3Schema.properties[spec].properties[re].pattern: Invalid value: "(": must be a valid regular expression, but isn't: error parsing regexp:"#
        )),
        "{problems:#?}"
    );
    assert_eq!(problems.len(), expected.len() + 1, "{problems:#?}");
}

#[test]
fn structural_root_rules() {
    assert_eq!(
        check_structural(&json!({"properties": {}})),
        vec!["openAPIV3Schema.type: Required value: must not be empty at the root"]
    );
    assert_eq!(
        check_structural(&json!({"type": "string"})),
        vec![r#"openAPIV3Schema.type: Invalid value: "string": must be object at the root"#]
    );
    assert_eq!(
        check_structural(
            &json!({"type": "object", "nullable": true, "additionalProperties": {"type": "string"}})
        ),
        vec![
            "openAPIV3Schema.additionalProperties: Forbidden: must not be used at the root",
            "openAPIV3Schema.nullable: Forbidden: nullable cannot be true at the root",
        ]
    );
    assert_eq!(
        check_structural(
            &json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"n": {"type": "integer", "default": 1}}, "default": {"n": 2, "zz": 1}}}})
        ),
        vec![
            r#"openAPIV3Schema.properties[spec].default: Invalid value: {"n":2,"zz":1}: must not have unknown fields"#
        ]
    );
}

#[test]
fn structural_accepts_usual_schemas() {
    let schema = json!({"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}}},
        "spec": {"type": "object", "required": ["replicas"], "properties": {
            "replicas": {"type": "integer", "minimum": 0, "default": 1, "format": "int32"},
            "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"x-kubernetes-preserve-unknown-fields": true},
            "list": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                     "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}},
            "either": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                       "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
            "tpl": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
        }},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    }});
    assert_eq!(check_structural(&schema), Vec::<String>::new());
}

// ---------------- messages and rendering

#[test]
fn invalid_message_formats_like_status_errors() {
    let one = FieldError {
        field: "spec.replicas".into(),
        reason: REQUIRED,
        message: "Required value".into(),
    };
    let two = FieldError {
        field: "spec.mode".into(),
        reason: NOT_SUPPORTED,
        message: r#"Unsupported value: "x": supported values: "a", "b""#.into(),
    };
    assert_eq!(
        invalid_message("KopfExample.kopf.dev", "name", std::slice::from_ref(&one)),
        r#"KopfExample.kopf.dev "name" is invalid: spec.replicas: Required value"#
    );
    assert_eq!(
        invalid_message(
            "KopfExample.kopf.dev",
            "name",
            &[one.clone(), two.clone(), one.clone()]
        ),
        r#"KopfExample.kopf.dev "name" is invalid: [spec.replicas: Required value, spec.mode: Unsupported value: "x": supported values: "a", "b"]"#
    );
    assert_eq!(
        invalid_message("KopfExample.kopf.dev", "name", &[one.clone(), one]),
        r#"KopfExample.kopf.dev "name" is invalid: spec.replicas: Required value"#
    );
    assert_eq!(
        invalid_message("K.g", "n\"q", &[]),
        r#"K.g "n\"q" is invalid"#
    );
}
