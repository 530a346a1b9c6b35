//! CEL validation rules: what the apiserver says of rules that do not compile, and of objects
//! that break them (messages, reasons, field paths, transition rules, cost limits).

use super::*;

/// A root schema with one spec whose node has these rules.
fn spec_with_rules(spec: Value, rules: Value) -> Value {
    let mut spec = spec;
    spec["x-kubernetes-validations"] = rules;
    root(spec)
}

/// A plain spec: replicas, minReplicas, a name, a list of strings and a map of strings.
fn plain_spec() -> Value {
    json!({"type": "object", "properties": {
        "replicas": {"type": "integer"},
        "minReplicas": {"type": "integer"},
        "ratio": {"type": "number"},
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}}
    }})
}

/// The rule problems of a schema checked as the only version's schema.
fn problems(schema: &Value) -> Vec<String> {
    check_rules(schema, "spec.validation.openAPIV3Schema")
}

/// The apiserver's cost limits scaled down 100 times, with time enough never to matter.
const SMALL: Limits = Limits {
    per_call: 10_000,
    per_object: 100_000,
    time: std::time::Duration::from_secs(600),
};

/// The errors (as triples) and warnings of a write.
fn rule_errors(schema: &Value, object: &Value, old: Option<&Value>) -> (Vec<Triple>, Vec<String>) {
    let rules = CompiledRules::compile(schema).expect("the schema has rules");
    let outcome = validate_rules(&rules, schema, object, old, SMALL);
    let errors = outcome
        .errors
        .into_iter()
        .map(|e| (e.field, e.reason, e.message))
        .collect();
    (errors, outcome.warnings)
}

/// The errors of a creation.
fn created(schema: &Value, spec: Value) -> Vec<Triple> {
    rule_errors(schema, &cr(spec), None).0
}

#[test]
fn a_syntax_error_is_reported_as_the_apiserver_reports_it() {
    let schema = spec_with_rules(
        plain_spec(),
        json!([{"rule": "self.replicas >", "message": "m"}]),
    );
    assert_eq!(
        problems(&schema),
        vec![concat!(
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: ",
            r#"apiextensions.ValidationRule{Rule:"self.replicas >", Message:"m", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}"#,
            ": compilation failed: ERROR: <input>:1:16: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n",
            " | self.replicas >\n",
            " | ...............^",
        )]
    );
}

#[test]
fn an_undefined_field_does_not_compile() {
    let schema = spec_with_rules(
        plain_spec(),
        json!([{"rule": "self.name != 'x' || has(self.namespace)"}]),
    );
    let found = problems(&schema);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].ends_with(
            // As cel-go, at the `(` of has().
            "compilation failed: ERROR: <input>:1:24: undefined field 'namespace'\n | self.name != 'x' || has(self.namespace)\n | .......................^"
        ),
        "{}",
        found[0]
    );
    // Fields of a map, and name/generateName of a root's metadata, are fine; other metadata is not.
    let schema = spec_with_rules(
        plain_spec(),
        json!([{"rule": "self.labels.anything == 'x'"}]),
    );
    assert_eq!(problems(&schema), Vec::<String>::new());
    // A plain selection: at its dot.
    let schema = spec_with_rules(plain_spec(), json!([{"rule": "self.nmae == 'x'"}]));
    let found = problems(&schema);
    assert!(
        found[0]
            .ends_with("ERROR: <input>:1:5: undefined field 'nmae'\n | self.nmae == 'x'\n | ....^"),
        "{found:?}"
    );
    let mut root_rules = root(plain_spec());
    root_rules["x-kubernetes-validations"] = json!([{"rule": "self.metadata.name.startsWith(self.spec.name)"}, {"rule": "has(self.metadata.labels)"}]);
    let found = problems(&root_rules);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("spec.validation.openAPIV3Schema.x-kubernetes-validations[1].rule: ")
    );
    assert!(
        found[0].contains("undefined field 'labels'"),
        "{}",
        found[0]
    );
}

#[test]
fn rules_of_other_types_than_bool_do_not_compile() {
    let schema = spec_with_rules(
        plain_spec(),
        json!([{"rule": "self.replicas + 1"}, {"rule": "self.name", "messageExpression": "self.replicas"}]),
    );
    let found = problems(&schema);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(
        found[0].ends_with(": cel expression must evaluate to a bool"),
        "{}",
        found[0]
    );
    assert!(
        found[1].contains("x-kubernetes-validations[1].rule: "),
        "{}",
        found[1]
    );
    assert!(found[2].starts_with("spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].messageExpression: Invalid value: apiextensions.ValidationRule{"), "{}", found[2]);
    assert!(
        found[2].ends_with(": messageExpression must evaluate to a string"),
        "{}",
        found[2]
    );
}

#[test]
fn the_fields_of_a_rule_are_checked_before_it_is_compiled() {
    let schema = spec_with_rules(
        plain_spec(),
        json!([
            {"rule": ""},
            {"rule": "self.replicas > 0", "message": "two\nlines"},
            {"rule": "self.replicas > 0", "reason": "FieldValueWrong"},
            {"rule": "self.replicas > 0", "fieldPath": ".nope"},
            {"rule": "self.replicas >"},
        ]),
    );
    let base = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations";
    assert_eq!(
        problems(&schema),
        vec![
            format!("{base}[0].rule: Required value: rule is not specified"),
            format!(
                "{base}[1].message: Invalid value: \"two\\nlines\": must not contain line breaks"
            ),
            format!(
                "{base}[2].reason: Unsupported value: \"FieldValueWrong\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""
            ),
            format!("{base}[3].fieldPath: Invalid value: \".nope\": must be a valid path"),
        ],
        "the broken rule [4] is not compiled while its siblings' fields are wrong"
    );
}

#[test]
fn transition_rules_are_forbidden_where_items_cannot_be_matched() {
    let schema = root(json!({"type": "object", "properties": {
        "plain": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}},
        "keyed": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
                  "items": {"type": "object", "required": ["k"], "properties": {"k": {"type": "string"}},
                            "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}},
        "flag": {"type": "boolean", "x-kubernetes-validations": [{"rule": "self", "optionalOldSelf": true}]}
    }}));
    assert_eq!(
        problems(&schema),
        vec![
            "spec.validation.openAPIV3Schema.properties[spec].properties[plain].items.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within spec.validation.openAPIV3Schema.properties[spec].properties[plain]".to_string(),
            "spec.validation.openAPIV3Schema.properties[spec].properties[flag].x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule".to_string(),
        ]
    );
}

#[test]
fn a_failed_rule_names_the_node_and_its_type() {
    let schema = spec_with_rules(
        plain_spec(),
        json!([{"rule": "self.minReplicas <= self.replicas", "message": "replicas must be at least minReplicas"}]),
    );
    assert_eq!(
        created(&schema, json!({"replicas": 3, "minReplicas": 1})),
        vec![]
    );
    assert_eq!(
        created(&schema, json!({"replicas": 1, "minReplicas": 3})),
        vec![e(
            "spec",
            INVALID,
            r#"Invalid value: replicas must be at least minReplicas"#
        )]
    );
    // Without a message: the rule itself; on a scalar: its type; at the root: no field.
    let mut schema = root(json!({"type": "object", "properties": {
        "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.startsWith('kopf-')"}]}
    }}));
    schema["x-kubernetes-validations"] = json!([{"rule": "self.metadata.name == self.spec.name"}]);
    assert_eq!(
        created(&schema, json!({"name": "other"})),
        vec![
            e(
                "<nil>",
                INVALID,
                r#"Invalid value: failed rule: self.metadata.name == self.spec.name"#
            ),
            e(
                "spec.name",
                INVALID,
                r#"Invalid value: "other": failed rule: self.startsWith('kopf-')"#
            ),
        ]
    );
}

#[test]
fn rules_see_integers_doubles_lists_and_maps_as_cel_does() {
    let rules = json!([
        {"rule": "self.replicas == 3 && type(self.replicas) == int", "message": "int"},
        {"rule": "type(self.ratio) == double && self.ratio == 2.0", "message": "double"},
        {"rule": "self.tags.all(t, t.endsWith('-x')) && self.tags.exists(t, t == 'a-x') && size(self.tags) == 2", "message": "list"},
        {"rule": "self.tags.map(t, t.upperAscii()) == ['A-X', 'B-X'] && self.tags.filter(t, t.startsWith('b')).size() == 1", "message": "map/filter"},
        {"rule": "'team' in self.labels && self.labels.team.matches('^[a-z]+$') && self.labels.all(k, k.lowerAscii() == k)", "message": "map"},
        {"rule": "has(self.name) == false && !has(self.minReplicas)", "message": "has"},
        {"rule": "int('7') == 7 && string(self.replicas) == '3' && self.tags.isSorted() && self.tags.indexOf('b-x') == 1", "message": "conversions"},
        {"rule": "'%d-%s'.format([1, 'a']) == '1-a'", "message": "format"},
        {"rule": "sets.contains(['a', 'b'], ['a']) && 'abc1'.find('[0-9]') == '1' && [3, 1, 2].sort() == [1, 2, 3] && [1, 2].sum() == 3 && [1, 2].max() == 2 && [1, 2].min() == 1", "message": "library"},
    ]);
    let schema = spec_with_rules(plain_spec(), rules);
    let spec =
        json!({"replicas": 3, "ratio": 2, "tags": ["a-x", "b-x"], "labels": {"team": "kopf"}});
    assert_eq!(created(&schema, spec), vec![]);
    let spec =
        json!({"replicas": 3, "ratio": 2, "tags": ["a-x", "b-y"], "labels": {"Team": "Kopf"}});
    let messages: Vec<String> = created(&schema, spec).into_iter().map(|t| t.2).collect();
    assert_eq!(
        messages,
        vec![
            r#"Invalid value: list"#,
            r#"Invalid value: map/filter"#,
            r#"Invalid value: map"#,
            r#"Invalid value: conversions"#,
        ]
    );
}

#[test]
fn message_expressions_make_the_message_when_they_can() {
    let schema = spec_with_rules(
        plain_spec(),
        json!([
            {"rule": "self.replicas < 10", "message": "too many", "messageExpression": "'replicas is ' + string(self.replicas) + ', must be below 10'"},
            {"rule": "self.replicas < 5", "message": "fallback", "messageExpression": "self.name + 'x'"},
            {"rule": "self.replicas < 5", "messageExpression": "''"},
        ]),
    );
    assert_eq!(
        created(&schema, json!({"replicas": 12})),
        vec![
            e(
                "spec",
                INVALID,
                r#"Invalid value: replicas is 12, must be below 10"#
            ),
            // The message expression fails (no name): the message stands.
            e("spec", INVALID, r#"Invalid value: fallback"#),
            // An empty message: the default one.
            e(
                "spec",
                INVALID,
                r#"Invalid value: failed rule: self.replicas < 5"#
            ),
        ]
    );
}

#[test]
fn reasons_choose_the_error_type() {
    let schema = spec_with_rules(
        plain_spec(),
        json!([
            {"rule": "has(self.name)", "reason": "FieldValueRequired", "message": "name is required"},
            {"rule": "self.replicas != 13", "reason": "FieldValueForbidden", "message": "13 is unlucky"},
            {"rule": "self.tags.distinct().size() == self.tags.size()", "reason": "FieldValueInvalid"},
            {"rule": "false", "reason": "FieldValueDuplicate", "message": "ignored"},
        ]),
    );
    assert_eq!(
        created(&schema, json!({"replicas": 13, "tags": ["a", "b"]})),
        vec![
            e("spec", REQUIRED, "Required value: name is required"),
            e("spec", FORBIDDEN, "Forbidden: 13 is unlucky"),
            e("spec", DUPLICATE, "Duplicate value"),
        ]
    );
}

#[test]
fn field_paths_move_the_error() {
    let schema = spec_with_rules(
        plain_spec(),
        json!([
            {"rule": "self.replicas >= self.minReplicas", "fieldPath": ".minReplicas", "message": "above replicas"},
            {"rule": "self.labels.team != 'x'", "fieldPath": ".labels['team']", "message": "no x team"},
        ]),
    );
    assert_eq!(
        created(
            &schema,
            json!({"replicas": 1, "minReplicas": 2, "labels": {"team": "x"}})
        ),
        vec![
            e(
                "spec.minReplicas",
                INVALID,
                r#"Invalid value: above replicas"#
            ),
            e("spec.labels[team]", INVALID, r#"Invalid value: no x team"#),
        ]
    );
}

#[test]
fn transition_rules_run_only_on_updates_with_an_old_value() {
    let schema = root(json!({"type": "object", "properties": {
        "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "name is immutable"}]},
        "replicas": {"type": "integer", "x-kubernetes-validations": [
            {"rule": "!oldSelf.hasValue() || self >= oldSelf.value()", "message": "replicas may not shrink", "optionalOldSelf": true},
            {"rule": "self > 0", "message": "replicas must be positive"}
        ]}
    }}));
    // Creation: the transition rule does not run; the optional one does, without an old value.
    assert_eq!(
        created(&schema, json!({"name": "a", "replicas": 2})),
        vec![]
    );
    let old = cr(json!({"name": "a", "replicas": 2}));
    let (errors, warnings) = rule_errors(
        &schema,
        &cr(json!({"name": "b", "replicas": 1})),
        Some(&old),
    );
    assert_eq!(
        errors,
        vec![
            e(
                "spec.name",
                INVALID,
                r#"Invalid value: "b": name is immutable"#
            ),
            e(
                "spec.replicas",
                INVALID,
                r#"Invalid value: 1: replicas may not shrink"#
            ),
        ]
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    // A field added by the update has no old value: its transition rule does not run.
    let old = cr(json!({"replicas": 2}));
    assert_eq!(
        rule_errors(
            &schema,
            &cr(json!({"name": "b", "replicas": 2})),
            Some(&old)
        )
        .0,
        vec![]
    );
}

#[test]
fn failures_on_unchanged_values_are_ratcheted_into_warnings() {
    let schema = spec_with_rules(
        plain_spec(),
        json!([{"rule": "self.replicas > 5", "message": "too few"}]),
    );
    let old = cr(json!({"replicas": 1}));
    let (errors, warnings) = rule_errors(&schema, &cr(json!({"replicas": 1})), Some(&old));
    assert_eq!(errors, vec![]);
    assert_eq!(
        warnings,
        vec![r#"spec: Invalid value: too few"#.to_string()]
    );
    let (errors, _) = rule_errors(&schema, &cr(json!({"replicas": 2})), Some(&old));
    assert_eq!(errors.len(), 1);
}

#[test]
fn rules_of_list_items_and_map_values_run_per_element() {
    let schema = root(json!({"type": "object", "properties": {
        "ports": {"type": "array", "items": {"type": "object", "properties": {"port": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.port < 1024", "message": "privileged ports only"}]}},
        "limits": {"type": "object", "additionalProperties": {"type": "integer",
            "x-kubernetes-validations": [{"rule": "self >= 0"}]}}
    }}));
    assert_eq!(
        created(
            &schema,
            json!({"ports": [{"port": 80}, {"port": 8080}], "limits": {"cpu": -1}})
        ),
        vec![
            e(
                "spec.ports[1]",
                INVALID,
                r#"Invalid value: privileged ports only"#
            ),
            e(
                "spec.limits[cpu]",
                INVALID,
                r#"Invalid value: -1: failed rule: self >= 0"#
            ),
        ]
    );
}

#[test]
fn runtime_errors_name_the_rule() {
    let schema = spec_with_rules(
        plain_spec(),
        json!([{"rule": "self.name == 'a'"}, {"rule": "self.replicas / 0 == 1", "message": "ratio"}]),
    );
    assert_eq!(
        created(&schema, json!({"replicas": 1})),
        vec![
            e(
                "spec",
                INVALID,
                r#"Invalid value: "object": no such key: name evaluating rule: self.name == 'a'"#
            ),
            e(
                "spec",
                INVALID,
                r#"Invalid value: "object": division by zero evaluating rule: ratio"#
            ),
        ]
    );
}

#[test]
fn an_expensive_rule_is_stopped_at_the_per_call_limit() {
    // 100 × 100 iterations of a 10-node body: 100,000 units, over the (scaled) 10,000 limit.
    let schema = spec_with_rules(
        plain_spec(),
        json!([
            {"rule": "self.tags.all(a, self.tags.all(b, a == b || a != b))"},
            {"rule": "self.replicas > 100", "message": "not reached"},
        ]),
    );
    let tags: Vec<String> = (0..100).map(|i| format!("t{i}")).collect();
    let errors = created(&schema, json!({"replicas": 1, "tags": tags}));
    assert_eq!(
        errors,
        vec![e(
            "spec",
            INVALID,
            r#"Invalid value: "object": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.tags.all(a, self.tags.all(b, a == b || a != b))"#
        )]
    );
    // The same rule on few items is cheap enough.
    assert_eq!(
        created(&schema, json!({"replicas": 101, "tags": ["a", "b"]})),
        vec![]
    );
}

#[test]
fn many_cheap_evaluations_run_out_of_the_objects_budget() {
    // Each item's rule is under the per-call limit (25 × 25 iterations of 8 nodes), but the
    // (scaled) 100,000 units in all are spent long before the last of 40 items.
    let schema = root(json!({"type": "object", "properties": {
        "groups": {"type": "array", "items": {"type": "array", "items": {"type": "integer"},
            "x-kubernetes-validations": [{"rule": "self.all(a, self.all(b, a + b >= 0))"}]}}
    }}));
    let group: Vec<i64> = (0..25).collect();
    let groups: Vec<Vec<i64>> = (0..40).map(|_| group.clone()).collect();
    let errors = created(&schema, json!({"groups": groups}));
    let last = errors.last().expect("an error");
    assert_eq!(
        last.2,
        r#"Invalid value: "array": validation failed due to running out of cost budget, no further validation rules will be run"#
    );
    assert_eq!(
        errors.len(),
        1,
        "the rules ran without errors until the budget ran out"
    );
}

#[test]
fn rules_of_embedded_resources_see_their_metadata() {
    let schema = root(json!({"type": "object", "properties": {
        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
            "x-kubernetes-preserve-unknown-fields": true,
            "x-kubernetes-validations": [{"rule": "self.kind == 'Pod' && self.metadata.name.startsWith('p')"}]}
    }}));
    assert_eq!(problems(&schema), Vec::<String>::new());
    let template = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod"}});
    assert_eq!(created(&schema, json!({"template": template})), vec![]);
}

#[test]
fn rules_past_the_time_limit_stop_as_if_over_budget() {
    let schema = spec_with_rules(plain_spec(), json!([{"rule": "self.tags.all(t, t != '')"}]));
    let rules = CompiledRules::compile(&schema).expect("the schema has rules");
    let no_time = Limits {
        time: std::time::Duration::ZERO,
        ..SMALL
    };
    let outcome = validate_rules(&rules, &schema, &cr(json!({"tags": ["a"]})), None, no_time);
    let messages: Vec<String> = outcome.errors.into_iter().map(|e| e.message).collect();
    assert_eq!(
        messages,
        vec![
            r#"Invalid value: "object": validation failed due to running out of cost budget, no further validation rules will be run"#
        ]
    );
}

#[test]
fn rules_are_structural_except_inside_all_of_and_friends() {
    let schema = spec_with_rules(plain_spec(), json!([{"rule": "self.replicas > 0"}]));
    assert_eq!(check_structural(&schema), Vec::<String>::new());
    let nested = root(
        json!({"type": "object", "properties": {"replicas": {"type": "integer"}},
        "allOf": [{"x-kubernetes-validations": [{"rule": "self.replicas > 0"}]}]}),
    );
    assert_eq!(
        check_structural(&nested),
        vec![
            "openAPIV3Schema.properties[spec].allOf[0].x-kubernetes-validations: Forbidden: must be empty to be structural"
        ]
    );
}
