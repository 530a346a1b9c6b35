//! Validation, keyword by keyword, with the apiserver's paths, reasons and messages.

use super::*;

#[test]
fn keyword_table() {
    let cases: Vec<(Value, Value, Vec<Triple>)> = vec![
        // type
        (
            json!({"type": "object", "properties": {"replicas": {"type": "integer"}}}),
            json!({"replicas": "3"}),
            vec![e(
                "spec.replicas",
                TYPE_INVALID,
                r#"Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
            )],
        ),
        (
            json!({"type": "object", "properties": {"on": {"type": "boolean"}}}),
            json!({"on": 1}),
            vec![e(
                "spec.on",
                TYPE_INVALID,
                r#"Invalid value: "integer": spec.on in body must be of type boolean: "integer""#,
            )],
        ),
        (
            json!({"type": "object", "properties": {"o": {"type": "object"}}}),
            json!({"o": [1]}),
            vec![e(
                "spec.o",
                TYPE_INVALID,
                r#"Invalid value: "array": spec.o in body must be of type object: "array""#,
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}}),
            json!({"a": {"x": 1}}),
            vec![e(
                "spec.a",
                TYPE_INVALID,
                r#"Invalid value: "object": spec.a in body must be of type array: "object""#,
            )],
        ),
        // numbers: integers pass as numbers, integral floats as integers
        (
            json!({"type": "object", "properties": {"n": {"type": "number"}, "i": {"type": "integer"}}}),
            json!({"n": 3, "i": 4.0}),
            vec![],
        ),
        // a fractional number for an integer: the type error, then the range error as kube-openapi adds it
        (
            json!({"type": "object", "properties": {"i": {"type": "integer"}}}),
            json!({"i": 1.5}),
            vec![
                e(
                    "spec.i",
                    TYPE_INVALID,
                    r#"Invalid value: "number": spec.i in body must be of type integer: "number""#,
                ),
                e(
                    "<nil>",
                    INVALID,
                    r#"Invalid value: "": Checked value must be of type integer (default format) in spec.i"#,
                ),
            ],
        ),
        // null
        (
            json!({"type": "object", "properties": {"s": {"type": "string"}}}),
            json!({"s": null}),
            vec![e(
                "spec.s",
                TYPE_INVALID,
                r#"Invalid value: "null": spec.s in body must be of type string: "null""#,
            )],
        ),
        (
            json!({"type": "object", "properties": {"s": {"type": "string", "nullable": true}}}),
            json!({"s": null}),
            vec![],
        ),
        // required
        (
            json!({"type": "object", "required": ["name", "size"], "properties": {"name": {"type": "string"}}}),
            json!({"name": "a"}),
            vec![e("spec.size", REQUIRED, "Required value")],
        ),
        // enum
        (
            json!({"type": "object", "properties": {"mode": {"type": "string", "enum": ["a", "b"]}}}),
            json!({"mode": "x"}),
            vec![e(
                "spec.mode",
                NOT_SUPPORTED,
                r#"Unsupported value: "x": supported values: "a", "b""#,
            )],
        ),
        (
            json!({"type": "object", "properties": {"n": {"type": "integer", "enum": [1, 2.5, {"k": "v"}]}}}),
            json!({"n": 3}),
            vec![e(
                "spec.n",
                NOT_SUPPORTED,
                r#"Unsupported value: 3: supported values: "1", "2.5", "{\"k\":\"v\"}""#,
            )],
        ),
        (
            json!({"type": "object", "properties": {"n": {"type": "number", "enum": [1, 2]}}}),
            json!({"n": 2.0}),
            vec![],
        ),
        // minimum / maximum / exclusive
        (
            json!({"type": "object", "properties": {"replicas": {"type": "integer", "minimum": 1}}}),
            json!({"replicas": 0}),
            vec![e(
                "spec.replicas",
                INVALID,
                "Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
            )],
        ),
        (
            json!({"type": "object", "properties": {"r": {"type": "integer", "minimum": 1, "exclusiveMinimum": true}}}),
            json!({"r": 1}),
            vec![e(
                "spec.r",
                INVALID,
                "Invalid value: 1: spec.r in body should be greater than 1",
            )],
        ),
        (
            json!({"type": "object", "properties": {"r": {"type": "integer", "maximum": 10}}}),
            json!({"r": 11}),
            vec![e(
                "spec.r",
                INVALID,
                "Invalid value: 11: spec.r in body should be less than or equal to 10",
            )],
        ),
        (
            json!({"type": "object", "properties": {"r": {"type": "number", "maximum": 1.5, "exclusiveMaximum": true}}}),
            json!({"r": 1.5}),
            vec![e(
                "spec.r",
                INVALID,
                "Invalid value: 1.5: spec.r in body should be less than 1.5",
            )],
        ),
        (
            json!({"type": "object", "properties": {"r": {"type": "number", "minimum": 0.5}}}),
            json!({"r": 0.25}),
            vec![e(
                "spec.r",
                INVALID,
                "Invalid value: 0.25: spec.r in body should be greater than or equal to 0.5",
            )],
        ),
        // multipleOf
        (
            json!({"type": "object", "properties": {"m": {"type": "integer", "multipleOf": 5}}}),
            json!({"m": 7}),
            vec![e(
                "spec.m",
                INVALID,
                "Invalid value: 7: spec.m in body should be a multiple of 5",
            )],
        ),
        (
            json!({"type": "object", "properties": {"m": {"type": "number", "multipleOf": 0.5}}}),
            json!({"m": 1.5}),
            vec![],
        ),
        // strings
        (
            json!({"type": "object", "properties": {"n": {"type": "string", "minLength": 3}}}),
            json!({"n": "ab"}),
            vec![e(
                "spec.n",
                INVALID,
                r#"Invalid value: "ab": spec.n in body should be at least 3 chars long"#,
            )],
        ),
        (
            json!({"type": "object", "properties": {"n": {"type": "string", "maxLength": 3}}}),
            json!({"n": "abcd"}),
            vec![e(
                "spec.n",
                TOO_LONG,
                "Too long: may not be more than 3 bytes",
            )],
        ),
        (
            json!({"type": "object", "properties": {"n": {"type": "string", "maxLength": 1}}}),
            json!({"n": "ab"}),
            vec![e(
                "spec.n",
                TOO_LONG,
                "Too long: may not be more than 1 byte",
            )],
        ),
        (
            json!({"type": "object", "properties": {"n": {"type": "string", "maxLength": 2}}}),
            json!({"n": "éé"}),
            vec![],
        ),
        (
            json!({"type": "object", "properties": {"n": {"type": "string", "pattern": "^[a-z]+$"}}}),
            json!({"n": "A1"}),
            vec![e(
                "spec.n",
                INVALID,
                r#"Invalid value: "A1": spec.n in body should match '^[a-z]+$'"#,
            )],
        ),
        // arrays
        (
            json!({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "string"}, "minItems": 1}}}),
            json!({"l": []}),
            vec![e(
                "spec.l",
                INVALID,
                "Invalid value: 0: spec.l in body should have at least 1 items",
            )],
        ),
        (
            json!({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "string"}, "maxItems": 2}}}),
            json!({"l": ["a", "b", "c"]}),
            vec![e(
                "spec.l",
                TOO_MANY,
                "Too many: 3: must have at most 2 items",
            )],
        ),
        (
            json!({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "integer"}, "uniqueItems": true}}}),
            json!({"l": [1, 2, 1]}),
            vec![e(
                "spec.l",
                INVALID,
                r#"Invalid value: "": spec.l in body shouldn't contain duplicates"#,
            )],
        ),
        // objects
        (
            json!({"type": "object", "properties": {"o": {"type": "object", "minProperties": 2, "additionalProperties": {"type": "string"}}}}),
            json!({"o": {"a": "x"}}),
            vec![e(
                "spec.o",
                INVALID,
                "Invalid value: 1: spec.o in body should have at least 2 properties",
            )],
        ),
        (
            json!({"type": "object", "properties": {"o": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}}}}),
            json!({"o": {"a": "x", "b": "y"}}),
            vec![e(
                "spec.o",
                TOO_MANY,
                "Too many: 2: must have at most 1 item",
            )],
        ),
        (
            json!({"type": "object", "properties": {"o": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false}}}),
            json!({"o": {"a": "x", "b": "y"}}),
            vec![e(
                "spec.o",
                INVALID,
                r#"Invalid value: "b": spec.o.b in body is a forbidden property"#,
            )],
        ),
        // formats
        (
            json!({"type": "object", "properties": {"i": {"type": "integer", "format": "int32"}}}),
            json!({"i": 2147483648i64}),
            vec![e(
                "<nil>",
                INVALID,
                r#"Invalid value: "": Checked value must be of type integer with format int32 in spec.i"#,
            )],
        ),
        (
            json!({"type": "object", "properties": {"i": {"type": "integer", "format": "int32"}}}),
            json!({"i": 2147483647}),
            vec![],
        ),
        (
            json!({"type": "object", "properties": {"i": {"type": "integer", "format": "int64"}}}),
            json!({"i": 1e19}),
            vec![e(
                "<nil>",
                INVALID,
                r#"Invalid value: "": Checked value must be of type integer with format int64 in spec.i"#,
            )],
        ),
        (
            json!({"type": "object", "properties": {"t": {"type": "string", "format": "date-time"}}}),
            json!({"t": "2024-02-30T10:00:00Z"}),
            vec![e(
                "spec.t",
                TYPE_INVALID,
                r#"Invalid value: "2024-02-30T10:00:00Z": spec.t in body must be of type date-time: "2024-02-30T10:00:00Z""#,
            )],
        ),
        (
            json!({"type": "object", "properties": {"t": {"type": "string", "format": "date-time"}}}),
            json!({"t": "2024-02-29T10:00:00.123+02:00"}),
            vec![],
        ),
        (
            json!({"type": "object", "properties": {"t": {"type": "string", "format": "no-such-format"}}}),
            json!({"t": "anything"}),
            vec![],
        ),
        (
            json!({"type": "object", "properties": {"u": {"type": "string", "format": "uuid"}, "ip": {"type": "string", "format": "ipv4"}}}),
            json!({"u": "not-a-uuid", "ip": "10.0.0.1"}),
            vec![e(
                "spec.u",
                TYPE_INVALID,
                r#"Invalid value: "not-a-uuid": spec.u in body must be of type uuid: "not-a-uuid""#,
            )],
        ),
        // int-or-string
        (
            json!({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": true}}}),
            json!({"p": 80}),
            vec![],
        ),
        (
            json!({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": true}}}),
            json!({"p": "http"}),
            vec![],
        ),
        (
            json!({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": true}}}),
            json!({"p": true}),
            vec![e(
                "spec.p",
                TYPE_INVALID,
                r#"Invalid value: "boolean": spec.p in body must be of type integer,string: "boolean""#,
            )],
        ),
        (
            json!({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": "^\\d+%$"}}}),
            json!({"p": "50"}),
            vec![e(
                "spec.p",
                INVALID,
                r#"Invalid value: "50": spec.p in body should match '^\d+%$'"#,
            )],
        ),
        // combinators
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            json!({}),
            vec![
                e(
                    "<nil>",
                    INVALID,
                    r#"Invalid value: "": "spec" must validate at least one schema (anyOf)"#,
                ),
                e("spec.a", REQUIRED, "Required value"),
            ],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            json!({"a": "x", "b": "y"}),
            vec![e(
                "<nil>",
                INVALID,
                r#"Invalid value: "": "spec" must validate one and only one schema (oneOf). Found 2 valid alternatives"#,
            )],
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "not": {"required": ["a"]}}),
            json!({"a": "x"}),
            vec![e(
                "<nil>",
                INVALID,
                r#"Invalid value: "": "spec" must not validate the schema (not)"#,
            )],
        ),
    ];
    for (i, (spec_schema, spec, expected)) in cases.into_iter().enumerate() {
        let schema = root(spec_schema);
        let got = errs(&cr(spec.clone()), &schema);
        assert_eq!(got, expected, "case {i}: {spec}");
    }
}

#[test]
fn brief_examples_render_as_the_apiserver_does() {
    let schema = root(
        json!({"type": "object", "required": ["name"], "properties": {
            "replicas": {"type": "integer", "minimum": 1},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "name": {"type": "string"},
        }}),
    );
    let errors = validate(&cr(json!({"replicas": 0, "mode": "x"})), &schema);
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        vec![
            "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
            r#"spec.mode: Unsupported value: "x": supported values: "a", "b""#,
            "spec.name: Required value",
        ]
    );
}

#[test]
fn nested_paths_use_dots_and_indices() {
    let schema = root(json!({"type": "object", "properties": {
        "items": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "maxLength": 2},
            "ports": {"type": "array", "items": {"type": "integer"}},
        }}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    }}));
    let object = cr(json!({
        "items": [{"name": "ok"}, {"name": "ok", "ports": [1, "x"]}, {"name": "long"}, {}],
        "labels": {"a": "b", "c": 1},
    }));
    assert_eq!(
        errs(&object, &schema),
        vec![
            e(
                "spec.items[1].ports[1]",
                TYPE_INVALID,
                r#"Invalid value: "string": spec.items[1].ports[1] in body must be of type integer: "string""#
            ),
            e(
                "spec.items[2].name",
                TOO_LONG,
                "Too long: may not be more than 2 bytes"
            ),
            e("spec.items[3].name", REQUIRED, "Required value"),
            e(
                "spec.labels.c",
                TYPE_INVALID,
                r#"Invalid value: "integer": spec.labels.c in body must be of type string: "integer""#
            ),
        ]
    );
}

#[test]
fn root_meta_fields_are_not_validated() {
    let schema = json!({"type": "object", "required": ["spec"], "properties": {
        "apiVersion": {"type": "integer"},
        "kind": {"type": "integer"},
        "metadata": {"type": "string"},
        "spec": {"type": "object"},
    }});
    let object = cr(json!({}));
    assert_eq!(errs(&object, &schema), vec![]);
    let missing = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {}});
    assert_eq!(
        errs(&missing, &schema),
        vec![e("spec", REQUIRED, "Required value")]
    );
}

#[test]
fn embedded_resources_need_api_version_and_kind() {
    let schema = root(json!({"type": "object", "properties": {
        "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
        "others": {"type": "array", "items": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}},
    }}));
    let object = cr(json!({
        "template": {"metadata": {"name": "x"}},
        "others": [{"apiVersion": "v1", "kind": "ConfigMap"}, {"apiVersion": "a/b/c", "kind": "Bad_Kind"}, {"apiVersion": 1, "kind": ""}],
    }));
    let text: Vec<String> = validate(&object, &schema)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        text,
        vec![
            "spec.template.apiVersion: Required value",
            "spec.template.kind: Required value",
            r#"spec.others[1].apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#,
            r#"spec.others[1].kind: Invalid value: "Bad_Kind": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#,
            "spec.others[2].apiVersion: Invalid value: 1: must be a string",
            r#"spec.others[2].kind: Invalid value: "": must not be empty"#,
        ]
    );
}

#[test]
fn list_types_report_duplicates() {
    let schema = root(json!({"type": "object", "properties": {
        "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "map": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "v": {"type": "integer"}}}},
        "map2": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a", "b"],
                "items": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}},
    }}));
    let object = cr(json!({
        "set": ["a", "b", "a", "a"],
        "map": [{"name": "x", "v": 1}, {"name": "x", "v": 2}, {"v": 3}],
        "map2": [{"a": "1", "b": "2"}, {"b": "2", "a": "1"}],
    }));
    let text: Vec<String> = validate(&object, &schema)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        text,
        vec![
            r#"spec.set[2]: Duplicate value: "a""#,
            r#"spec.map[1]: Duplicate value: {"name":"x"}"#,
            r#"spec.map2[1]: Duplicate value: {"a":"1","b":"2"}"#,
        ]
    );
}

#[test]
fn date_and_time_formats() {
    for good in [
        "2024-01-01T00:00:00Z",
        "2024-12-31t23:59:59.999999z",
        "2000-02-29T12:00:00-07:30",
    ] {
        assert!(is_date_time(good), "{good}");
    }
    for bad in [
        "2023-02-29T00:00:00Z",
        "2024-01-01",
        "2024-01-01T24:00:00Z",
        "2024-01-01T00:00:00",
        "2024-01-01T00:00:00+0100",
        "",
        "zzzz",
    ] {
        assert!(!is_date_time(bad), "{bad}");
    }
    assert!(is_date("1900-02-28") && !is_date("1900-02-29") && !is_date("24-01-01"));
    assert!(
        is_cidr("10.0.0.0/8")
            && is_cidr("fd00::/64")
            && !is_cidr("10.0.0.0/33")
            && !is_cidr("10.0.0.0")
    );
    assert!(is_mac("00:1a:2B:3c:4d:5e") && is_mac("001a.2b3c.4d5e") && !is_mac("00:1a:2b"));
    assert!(is_email("a@b.c") && is_email("Name <a@b.c>") && !is_email("a b@c") && !is_email("@b"));
}

#[test]
fn int_minimum_against_int64_extremes() {
    let schema = root(json!({"type": "object", "properties": {
        "n": {"type": "integer", "minimum": -1e300, "maximum": 1e300, "multipleOf": 3},
    }}));
    for n in [i64::MIN, i64::MAX, 0] {
        let _ = validate(&cr(json!({"n": n})), &schema);
    }
}

/// A schema's pattern is compiled once for all requests, not once per request.
#[test]
fn patterns_are_compiled_once_across_requests() {
    use crate::semantics::schema::validation::cached_pattern;
    let first = cached_pattern("^kopf-[a-z]+-cached$");
    let again = cached_pattern("^kopf-[a-z]+-cached$");
    assert!(std::sync::Arc::ptr_eq(&first, &again));
    // A pattern too large to compile fails quickly instead of hanging a request.
    let started = std::time::Instant::now();
    assert!(cached_pattern("(\\w{500}){500}").is_err());
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}
