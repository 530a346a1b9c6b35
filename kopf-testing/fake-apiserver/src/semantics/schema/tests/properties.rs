//! The pipeline as the server runs it, depth limits, malformed schemas, and properties: no
//! input panics.

use super::*;

#[test]
fn malformed_schemas_do_not_panic() {
    let schemas = [
        json!(null),
        json!(true),
        json!("object"),
        json!([]),
        json!({"type": 5}),
        json!({"type": ["object", "null"]}),
        json!({"type": "object", "properties": []}),
        json!({"type": "object", "properties": {"spec": 7}}),
        json!({"type": "object", "properties": {"spec": {"type": "object", "required": "a", "enum": {}, "items": 3}}}),
        json!({"type": "object", "properties": {"spec": {"type": "integer", "minimum": "1", "maximum": null, "multipleOf": 0}}}),
        json!({"type": "object", "properties": {"spec": {"type": "integer", "multipleOf": -2.5, "minimum": 1.5}}}),
        json!({"type": "object", "properties": {"spec": {"type": "string", "pattern": "(((", "minLength": -1, "maxLength": -1}}}),
        json!({"type": "object", "properties": {"spec": {"type": "array", "items": [{"type": "string"}, 5], "minItems": 1.5}}}),
        json!({"type": "object", "properties": {"spec": {"allOf": "x", "anyOf": [1, null], "oneOf": [{}], "not": []}}}),
        json!({"type": "object", "properties": {"spec": {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [1, "a"], "type": "array"}}}),
        json!({"type": "object", "properties": {"spec": {"additionalProperties": "yes", "default": {"a": [null]}}}}),
        json!({"type": "object", "properties": {"spec": {"format": "int32", "type": "boolean"}}}),
    ];
    let objects = [
        cr(json!({"a": [1, null, {"b": "c"}], "n": -9223372036854775808i64})),
        cr(json!(-5)),
        cr(json!("x")),
        cr(json!(null)),
        cr(json!([[], {}, 1.5e300])),
        json!([1, 2]),
        json!(null),
    ];
    for schema in &schemas {
        let _ = check_structural(schema);
        for object in &objects {
            let mut o = object.clone();
            let _ = prune(&mut o, schema);
            apply_defaults(&mut o, schema);
            let _ = validate(&o, schema);
            let _ = validate(object, schema);
        }
    }
}

#[test]
fn pipeline_as_the_server_runs_it() {
    let schema = root(
        json!({"type": "object", "required": ["size"], "properties": {
            "size": {"type": "integer", "minimum": 1},
            "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
        }}),
    );
    let mut object = cr(json!({"size": 0, "typo": true}));
    let unknown = prune(&mut object, &schema);
    assert_eq!(unknown, vec!["spec.typo"]);
    apply_defaults(&mut object, &schema);
    assert_eq!(object["spec"], json!({"size": 0, "mode": "fast"}));
    let errors = validate(&object, &schema);
    assert_eq!(
        invalid_message("KopfExample.kopf.dev", "x", &errors),
        r#"KopfExample.kopf.dev "x" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"#
    );
    assert_eq!(errors[0].reason, "FieldValueInvalid");
}

#[test]
fn deep_values_stop_at_the_depth_limit() {
    let mut deep = json!("leaf");
    for _ in 0..(MAX_DEPTH * 2) {
        deep = json!({"a": [deep]});
    }
    let schema =
        root(json!({"type": "object", "properties": {"a": {"type": "string"}}, "enum": ["x"]}));
    let mut object = cr(deep.clone());
    let _ = prune(&mut object, &schema);
    apply_defaults(&mut object, &schema);
    let errors = validate(&cr(deep.clone()), &schema);
    assert!(!errors.is_empty());
    let preserve = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                          "properties": {"spec": {"type": "object", "properties": {"a": {"type": "array"}}}}});
    let mut object = cr(deep);
    let _ = prune(&mut object, &preserve);
    let _ = go_json(&object);
}

/// Arbitrary small JSON values, with keys likely to meet schema property names.
fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-5i64..5).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
        "[a-c]{0,3}".prop_map(Value::String),
        ".{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec(("[a-c]|apiVersion|kind|metadata|spec", inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// One keyword with a plausible (sometimes wrong) value.
fn arb_keyword() -> impl Strategy<Value = (String, Value)> {
    let names = prop::collection::vec("[a-c]", 0..3).prop_map(|v| json!(v));
    prop_oneof![
        names.clone().prop_map(|v| ("required".to_string(), v)),
        prop::collection::vec(arb_json(), 0..3).prop_map(|v| ("enum".to_string(), Value::Array(v))),
        prop_oneof![
            "minimum",
            "maximum",
            "multipleOf",
            "minLength",
            "maxLength",
            "minItems",
            "maxItems",
            "minProperties",
            "maxProperties"
        ]
        .prop_flat_map(|k| (
            Just(k.to_string()),
            prop_oneof![
                (-3i64..4).prop_map(Value::from),
                Just(json!(0.5)),
                Just(json!(-1.5)),
                Just(json!("x"))
            ]
        )),
        prop_oneof![
            "exclusiveMinimum",
            "exclusiveMaximum",
            "uniqueItems",
            "nullable",
            PRESERVE,
            EMBEDDED,
            INT_OR_STRING
        ]
        .prop_flat_map(|k| (Just(k.to_string()), any::<bool>().prop_map(Value::Bool))),
        prop_oneof![Just("^a"), Just("("), Just("b+"), Just(""), Just("[a-")]
            .prop_map(|p| ("pattern".to_string(), json!(p))),
        prop_oneof![
            Just("int32"),
            Just("int64"),
            Just("date-time"),
            Just("date"),
            Just("uuid"),
            Just("ipv4"),
            Just("ipv6"),
            Just("cidr"),
            Just("mac"),
            Just("byte"),
            Just("hostname"),
            Just("email"),
            Just("uri"),
            Just("duration"),
            Just("float"),
            Just("bogus")
        ]
        .prop_map(|f| ("format".to_string(), json!(f))),
        arb_json().prop_map(|d| ("default".to_string(), d)),
        prop_oneof![Just("set"), Just("map"), Just("atomic"), Just("nope")]
            .prop_map(|t| (LIST_TYPE.to_string(), json!(t))),
        names.prop_map(|v| (LIST_MAP_KEYS.to_string(), v)),
        (
            prop_oneof![
                "properties",
                "items",
                "additionalProperties",
                "type",
                "anyOf",
                "not"
            ],
            arb_json()
        )
            .prop_map(|(k, v)| (k.to_string(), v)),
    ]
}

/// A type name, sometimes a wrong one.
fn arb_type() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("object")),
        Just(json!("array")),
        Just(json!("string")),
        Just(json!("integer")),
        Just(json!("number")),
        Just(json!("boolean")),
        Just(json!("null")),
        Just(json!("")),
        Just(json!(3)),
    ]
}

/// Arbitrary small schemas: mostly schema-shaped, sometimes junk.
fn arb_schema() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({})),
        arb_type().prop_map(|t| json!({"type": t})),
        arb_json(),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        (
            prop::option::of(arb_type()),
            prop::option::of(prop::collection::vec(
                ("[a-c]|spec|metadata|kind", inner.clone()),
                0..4,
            )),
            prop::option::of(inner.clone()),
            prop::option::of(prop_oneof![
                any::<bool>().prop_map(Value::Bool),
                inner.clone()
            ]),
            prop::collection::vec(arb_keyword(), 0..4),
            prop::option::of(prop::collection::vec(inner, 1..3)),
            0..3usize,
        )
            .prop_map(
                |(ty, properties, items, additional, keywords, branches, which)| {
                    let mut m = Map::new();
                    if let Some(t) = ty {
                        m.insert("type".into(), t);
                    }
                    if let Some(p) = properties {
                        m.insert("properties".into(), Value::Object(p.into_iter().collect()));
                    }
                    if let Some(i) = items {
                        m.insert("items".into(), i);
                    }
                    if let Some(a) = additional {
                        m.insert("additionalProperties".into(), a);
                    }
                    for (k, v) in keywords {
                        m.insert(k, v);
                    }
                    if let Some(b) = branches {
                        let key = ["anyOf", "oneOf", "allOf"][which];
                        m.insert(key.into(), Value::Array(b));
                    }
                    Value::Object(m)
                },
            )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn nothing_panics(object in arb_json(), schema in arb_schema()) {
        let _ = check_structural(&schema);
        let _ = validate(&object, &schema);
        let mut o = object.clone();
        let _ = prune(&mut o, &schema);
        apply_defaults(&mut o, &schema);
        let errors = validate(&o, &schema);
        let _ = invalid_message("K.g", "n", &errors);
    }

    #[test]
    fn prune_is_idempotent(object in arb_json(), schema in arb_schema()) {
        let mut once = object.clone();
        prune(&mut once, &schema);
        let mut twice = once.clone();
        let again = prune(&mut twice, &schema);
        prop_assert!(again.is_empty(), "second prune reported {again:?}");
        prop_assert_eq!(once, twice);
    }

    #[test]
    fn pruned_objects_have_no_unknown_fields(object in arb_json(), schema in arb_schema()) {
        let mut o = object.clone();
        prune(&mut o, &schema);
        for error in validate(&o, &schema) {
            prop_assert!(!error.message.contains("is a forbidden property"), "{error}");
        }
    }

    #[test]
    fn preserved_root_is_never_pruned(
        entries in prop::collection::vec(("[a-z]{1,3}|apiVersion|kind|metadata", arb_json()), 0..6),
        keywords in prop::collection::vec(arb_keyword(), 0..3),
    ) {
        let mut m: Map<String, Value> = keywords
            .into_iter()
            .filter(|(k, _)| !matches!(k.as_str(), "properties" | "items" | "additionalProperties"))
            .collect();
        m.insert("type".into(), json!("object"));
        m.insert(PRESERVE.into(), json!(true));
        let schema = Value::Object(m);
        let object = Value::Object(entries.into_iter().collect());
        let mut o = object.clone();
        let pruned = prune(&mut o, &schema);
        prop_assert!(pruned.is_empty());
        prop_assert_eq!(o, object);
    }

    #[test]
    fn defaults_are_idempotent(object in arb_json(), schema in arb_schema()) {
        let mut once = object.clone();
        prune(&mut once, &schema);
        apply_defaults(&mut once, &schema);
        let mut twice = once.clone();
        apply_defaults(&mut twice, &schema);
        prop_assert_eq!(once, twice);
    }
}
