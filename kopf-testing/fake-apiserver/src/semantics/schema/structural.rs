//! Structural checks of a CRD's schema, worded as the apiserver words them, so that a CRD with
//! a schema it could not serve is rejected.

use serde_json::{Map, Value};

use super::defaults::pruned_default;
use super::errors::raw_field;
use super::keywords::{
    Additional, EMBEDDED, INT_OR_STRING, LIST_MAP_KEYS, LIST_TYPE, MAP_TYPE, MAX_DEPTH, PRESERVE,
    additional, default_of, is_true, items_schema, kw, prop, props, str_kw, type_str,
};
use super::validation::{Validator, compile_pattern};
use crate::semantics::go_format::{go_json, go_quote, go_value};

/// Checks that a schema is structural enough to serve (returns human-readable problems, e.g. a missing `type` where required); used to reject bad CRDs with 422.
///
/// Each problem reads like the apiserver's, with a path relative to the version's
/// `schema`, e.g. `openAPIV3Schema.properties[spec].type: Required value: must not be
/// empty for specified object fields`; prefix `spec.versions[N].schema.` for the full
/// field. Sorted and without duplicates; empty when the schema is fine.
pub(crate) fn check_structural(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let path = "openAPIV3Schema";
    if is_true(schema, "nullable") {
        out.push(format!(
            "{path}.nullable: Forbidden: nullable cannot be true at the root"
        ));
    }
    check_schema(schema, path, Level::Root, false, &mut out, 0);
    out.sort();
    out.dedup();
    out
}

/// Where a schema node sits, for the wording of a missing type.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    /// openAPIV3Schema itself.
    Root,
    /// An array's items.
    Item,
    /// A property or additionalProperties.
    Field,
}

/// Checks one structural schema node and everything below it.
fn check_schema(
    s: &Value,
    path: &str,
    level: Level,
    in_meta: bool,
    out: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let Some(m) = s.as_object() else {
        out.push(format!(
            "{path}: Invalid value: {}: must be a schema object",
            go_value(s)
        ));
        return;
    };
    check_shapes(m, path, out);
    let ty = type_str(s);
    if let Some(t) = ty {
        if !matches!(
            t,
            "array" | "boolean" | "integer" | "number" | "object" | "string"
        ) {
            out.push(format!("{path}.type: Unsupported value: {}: supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\"", go_quote(t)));
        }
        if t == "null" {
            out.push(format!(
                "{path}.type: Forbidden: type cannot be set to null, use nullable as an alternative"
            ));
        }
    }
    for (key, detail) in [
        ("id", "id is not supported"),
        ("additionalItems", "additionalItems is not supported"),
        ("patternProperties", "patternProperties is not supported"),
        ("definitions", "definitions is not supported"),
        ("dependencies", "dependencies is not supported"),
        ("$ref", "$ref is not supported"),
    ] {
        if m.get(key).is_some_and(|v| !is_empty_json(v)) {
            out.push(format!("{path}.{key}: Forbidden: {detail}"));
        }
    }
    if let Some(Value::Array(_)) = m.get("items") {
        out.push(format!(
            "{path}.items: Forbidden: items must be a schema object and not an array"
        ));
    }
    if is_true(s, "uniqueItems") {
        out.push(format!("{path}.uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"));
    }
    let addl = additional(s);
    let has_props = props(s).is_some_and(|p| !p.is_empty());
    if has_props && matches!(addl, Additional::Allows(false) | Additional::Schema(_)) {
        out.push(format!("{path}.additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"));
    }
    let has_addl = !matches!(addl, Additional::Absent);
    if has_addl && level == Level::Root {
        out.push(format!(
            "{path}.additionalProperties: Forbidden: must not be used at the root"
        ));
    }
    if let Some(Value::Bool(false)) = m.get(PRESERVE) {
        out.push(format!(
            "{path}.{PRESERVE}: Invalid value: false: must be true or undefined"
        ));
    }
    check_list_and_map_types(s, ty, path, out);

    let embedded = is_true(s, EMBEDDED);
    let int_or_string = is_true(s, INT_OR_STRING);
    let preserve = is_true(s, PRESERVE);
    if ty == Some("array") && kw(s, "items").is_none() {
        out.push(format!("{path}.items: Required value: must be specified"));
    }
    if embedded && ty != Some("object") {
        match ty {
            None => out.push(format!("{path}.type: Required value: must be object if x-kubernetes-embedded-resource is true")),
            Some(t) => out.push(format!("{path}.type: Invalid value: {}: must be object if x-kubernetes-embedded-resource is true", go_quote(t))),
        }
    } else if ty.is_none() && !int_or_string && !preserve {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        out.push(format!("{path}.type: Required value: {detail}"));
    }
    if embedded && has_addl {
        out.push(format!("{path}.additionalProperties: Forbidden: must not be used if x-kubernetes-embedded-resource is set"));
    }
    if level == Level::Root
        && let Some(t) = ty
        && t != "object"
    {
        out.push(format!(
            "{path}.type: Invalid value: {}: must be object at the root",
            go_quote(t)
        ));
    }
    if int_or_string && preserve {
        out.push(format!("{path}.{PRESERVE}: Invalid value: true: must be false if x-kubernetes-int-or-string is true"));
    }
    if int_or_string && embedded {
        out.push(format!("{path}.{EMBEDDED}: Invalid value: true: must be false if x-kubernetes-int-or-string is true"));
    }
    let check_meta = level == Level::Root || embedded;
    if check_meta {
        for key in ["kind", "apiVersion"] {
            if let Some(p) = prop(s, key)
                && type_str(p) != Some("string")
            {
                out.push(format!(
                    "{path}.properties[{key}].type: Invalid value: {}: must be string",
                    go_quote(type_str(p).unwrap_or(""))
                ));
            }
        }
    }
    if let Some(md) = prop(s, "metadata") {
        if check_meta && type_str(md) != Some("object") {
            out.push(format!(
                "{path}.properties[metadata].type: Invalid value: {}: must be object",
                go_quote(type_str(md).unwrap_or(""))
            ));
        }
        if level == Level::Root && !is_plain_metadata(md) {
            out.push(format!("{path}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"));
        }
    }
    if embedded && !preserve && !has_props {
        out.push(format!("{path}.properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"));
    }
    check_pattern(s, path, out);
    if let Some(d) = default_of(s)
        && !in_meta
    {
        check_default(d, s, path, out);
    }
    check_value_validations(s, path, out, depth);
    check_completeness(s, s, path, path, out, depth);

    if let Some(it) = items_schema(s) {
        check_schema(
            it,
            &format!("{path}.items"),
            Level::Item,
            in_meta,
            out,
            depth + 1,
        );
    }
    if let Some(ps) = props(s) {
        for (k, p) in ps {
            let meta = in_meta || (level == Level::Root && k == "metadata");
            check_schema(
                p,
                &format!("{path}.properties[{k}]"),
                Level::Field,
                meta,
                out,
                depth + 1,
            );
        }
    }
    if let Additional::Schema(a) = addl {
        check_schema(
            a,
            &format!("{path}.additionalProperties"),
            Level::Field,
            in_meta,
            out,
            depth + 1,
        );
    }
}

/// Whether a JSON value is empty (null, false, "", [], {}), i.e. as good as absent.
fn is_empty_json(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::String(text) => text.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        Value::Bool(true) | Value::Number(_) => false,
    }
}

/// Whether the root's metadata schema says nothing beyond type, default, name and generateName.
fn is_plain_metadata(md: &Value) -> bool {
    let Some(m) = md.as_object() else {
        return true;
    };
    m.iter().all(|(k, v)| match k.as_str() {
        "type" | "default" => true,
        "properties" => v
            .as_object()
            .is_none_or(|p| p.keys().all(|k| k == "name" || k == "generateName")),
        _ => is_empty_json(v),
    })
}

/// Keywords whose JSON type is wrong (the apiserver would refuse to decode them).
fn check_shapes(m: &Map<String, Value>, path: &str, out: &mut Vec<String>) {
    for (key, v) in m {
        let expected = match key.as_str() {
            "properties" | "not" => (!v.is_object()).then_some("an object"),
            "required" | LIST_MAP_KEYS => {
                (!v.as_array().is_some_and(|a| a.iter().all(Value::is_string)))
                    .then_some("a list of strings")
            }
            "enum" | "allOf" | "anyOf" | "oneOf" => (!v.is_array()).then_some("a list"),
            "minimum" | "maximum" | "multipleOf" => (!v.is_number()).then_some("a number"),
            "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties"
            | "maxProperties" => {
                (!v.as_f64().is_some_and(|f| f.fract() == 0.0)).then_some("an integer")
            }
            "type" | "format" | "pattern" | "description" | "title" | LIST_TYPE | MAP_TYPE => {
                (!v.is_string()).then_some("a string")
            }
            "nullable" | "exclusiveMinimum" | "exclusiveMaximum" | "uniqueItems" | PRESERVE
            | EMBEDDED | INT_OR_STRING => (!v.is_boolean()).then_some("a boolean"),
            "items" => (!(v.is_object() || v.is_array())).then_some("an object or a list"),
            "additionalProperties" => {
                (!(v.is_object() || v.is_boolean())).then_some("an object or a boolean")
            }
            _ => None,
        };
        if let Some(expected) = expected {
            out.push(format!(
                "{path}.{key}: Invalid value: {}: must be {expected}",
                go_value(v)
            ));
        }
    }
}

/// x-kubernetes-list-type, x-kubernetes-list-map-keys and x-kubernetes-map-type.
fn check_list_and_map_types(s: &Value, ty: Option<&str>, path: &str, out: &mut Vec<String>) {
    let must_be = |out: &mut Vec<String>, wanted: &str, why: &str| match ty {
        None => out.push(format!(
            "{path}.type: Required value: must be {wanted} if {why} is specified"
        )),
        Some(t) => out.push(format!(
            "{path}.type: Invalid value: {}: must be {wanted} if {why} is specified",
            go_quote(t)
        )),
    };
    if let Some(mt) = kw(s, MAP_TYPE) {
        if ty != Some("object") {
            must_be(out, "object", MAP_TYPE);
        }
        if !matches!(mt.as_str(), Some("atomic" | "granular")) {
            out.push(format!(
                "{path}.{MAP_TYPE}: Unsupported value: {}: supported values: \"atomic\", \"granular\"",
                go_value(mt)
            ));
        }
    }
    let list_type = kw(s, LIST_TYPE);
    if let Some(lt) = list_type {
        if ty != Some("array") {
            must_be(out, "array", LIST_TYPE);
        }
        if !matches!(lt.as_str(), Some("atomic" | "set" | "map")) {
            out.push(format!(
                "{path}.{LIST_TYPE}: Unsupported value: {}: supported values: \"atomic\", \"map\", \"set\"",
                go_value(lt)
            ));
        }
    }
    let keys: Vec<&str> = match kw(s, LIST_MAP_KEYS) {
        Some(Value::Array(keys)) => keys.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let is_map = list_type.and_then(Value::as_str) == Some("map");
    if !keys.is_empty() && !is_map {
        match list_type {
            None => out.push(format!("{path}.{LIST_TYPE}: Required value: must be map if x-kubernetes-list-map-keys is non-empty")),
            Some(lt) => out.push(format!("{path}.{LIST_TYPE}: Invalid value: {}: must be map if x-kubernetes-list-map-keys is non-empty", go_value(lt))),
        }
    }
    if is_map {
        if keys.is_empty() {
            out.push(format!("{path}.{LIST_MAP_KEYS}: Required value: must not be empty if x-kubernetes-list-type is map"));
        }
        match items_schema(s) {
            None => out.push(format!(
                "{path}.items: Required value: must have a schema if x-kubernetes-list-type is map"
            )),
            Some(it) => {
                if type_str(it) != Some("object") {
                    out.push(format!("{path}.items.type: Invalid value: {}: must be object if parent array's x-kubernetes-list-type is map", go_quote(type_str(it).unwrap_or(""))));
                }
                let shown = go_json(&Value::from(keys.clone()));
                if keys.iter().any(|k| prop(it, k).is_none()) {
                    out.push(format!("{path}.{LIST_MAP_KEYS}: Invalid value: {shown}: entries must all be names of item properties"));
                }
                if keys.iter().enumerate().any(|(i, k)| keys[..i].contains(k)) {
                    out.push(format!("{path}.{LIST_MAP_KEYS}: Invalid value: {shown}: must not contain duplicate entries"));
                }
                for k in &keys {
                    if let Some(p) = prop(it, k)
                        && matches!(type_str(p), Some("object" | "array"))
                    {
                        out.push(format!("{path}.items.properties[{k}].type: Invalid value: {}: must be a scalar type if parent array's x-kubernetes-list-type is map", go_quote(type_str(p).unwrap_or(""))));
                    }
                }
            }
        }
    }
}

/// A `pattern` that does not compile.
fn check_pattern(s: &Value, path: &str, out: &mut Vec<String>) {
    if let Some(p) = str_kw(s, "pattern")
        && !p.is_empty()
        && let Err(e) = compile_pattern(p)
    {
        out.push(format!(
            "{path}.pattern: Invalid value: {}: must be a valid regular expression, but isn't: {e}",
            go_quote(p)
        ));
    }
}

/// A default must be pruned already and valid against its own schema.
fn check_default(d: &Value, s: &Value, path: &str, out: &mut Vec<String>) {
    let base = format!("{path}.default");
    if pruned_default(d, s) != *d {
        out.push(format!(
            "{base}: Invalid value: {}: must not have unknown fields",
            go_value(d)
        ));
    }
    let mut raw = Vec::new();
    Validator::new().node(d, s, "", false, 0, &mut raw);
    for r in raw {
        let field = match raw_field(r.name.as_deref()) {
            Some(name) => format!("{base}.{name}"),
            None => base.clone(),
        };
        out.push(format!("{field}: {}", r.message));
    }
}

/// Whether anyOf is exactly int-or-string's `[{type: integer}, {type: string}]`.
fn is_int_or_string_any_of(any_of: Option<&Value>) -> bool {
    matches!(any_of, Some(Value::Array(a))
        if a.len() == 2
            && a[0] == serde_json::json!({"type": "integer"})
            && a[1] == serde_json::json!({"type": "string"}))
}

/// The allOf/anyOf/oneOf/not of a structural node.
fn check_value_validations(s: &Value, path: &str, out: &mut Vec<String>, depth: usize) {
    let skip_any_of = is_int_or_string_any_of(kw(s, "anyOf"));
    let skip_first_all_of_any_of = match kw(s, "allOf") {
        Some(Value::Array(all)) => all
            .first()
            .is_some_and(|f| is_int_or_string_any_of(kw(f, "anyOf"))),
        _ => false,
    };
    check_combinator_lists(s, path, skip_any_of, skip_first_all_of_any_of, out, depth);
}

/// Checks the nested schemas of allOf/anyOf/oneOf/not under one node.
fn check_combinator_lists(
    s: &Value,
    path: &str,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    out: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    for key in ["anyOf", "allOf", "oneOf"] {
        if key == "anyOf" && skip_any_of {
            continue;
        }
        if let Some(Value::Array(list)) = kw(s, key) {
            for (i, n) in list.iter().enumerate() {
                let skip = key == "allOf" && i == 0 && skip_first_all_of_any_of;
                check_nested(n, &format!("{path}.{key}[{i}]"), skip, out, depth + 1);
            }
        }
    }
    if let Some(n) = kw(s, "not") {
        check_nested(n, &format!("{path}.not"), false, out, depth + 1);
    }
}

/// A schema inside allOf/anyOf/oneOf/not: value validations only.
fn check_nested(v: &Value, path: &str, skip_any_of: bool, out: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let Some(m) = v.as_object() else {
        out.push(format!(
            "{path}: Invalid value: {}: must be a schema object",
            go_value(v)
        ));
        return;
    };
    check_shapes(m, path, out);
    check_combinator_lists(v, path, skip_any_of, false, out, depth);
    check_pattern(v, path, out);
    if let Some(it) = items_schema(v) {
        check_nested(it, &format!("{path}.items"), false, out, depth + 1);
    }
    if let Some(ps) = props(v) {
        for (k, p) in ps {
            check_nested(p, &format!("{path}.properties[{k}]"), false, out, depth + 1);
        }
    }
    let mut forbid =
        |key: &str, detail: &str| out.push(format!("{path}.{key}: Forbidden: {detail}"));
    let non_empty = |key: &str| m.get(key).is_some_and(|v| !is_empty_json(v));
    if non_empty("type") {
        forbid("type", "must be empty to be structural");
    }
    if m.contains_key("additionalProperties") {
        forbid("additionalProperties", "must be undefined to be structural");
    }
    if m.get("default").is_some_and(|d| !d.is_null()) {
        forbid("default", "must be undefined to be structural");
    }
    for key in ["title", "description"] {
        if non_empty(key) {
            forbid(key, "must be empty to be structural");
        }
    }
    for key in ["nullable", PRESERVE, EMBEDDED, INT_OR_STRING] {
        if is_true(v, key) {
            forbid(key, "must be false to be structural");
        }
    }
    if non_empty(LIST_MAP_KEYS) {
        forbid(LIST_MAP_KEYS, "must be empty to be structural");
    }
    for key in [LIST_TYPE, MAP_TYPE] {
        if m.get(key).is_some_and(|v| !v.is_null()) {
            forbid(key, "must be undefined to be structural");
        }
    }
    if non_empty("x-kubernetes-validations") {
        forbid("x-kubernetes-validations", "must be empty to be structural");
    }
    if prop(v, "metadata").is_some() {
        out.push(format!(
            "{path}.properties[metadata]: Forbidden: must not be specified in a nested context"
        ));
    }
}

/// Every property named in allOf/anyOf/oneOf/not must exist in the structural part.
fn check_completeness(
    v: &Value,
    s: &Value,
    s_path: &str,
    v_path: &str,
    out: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    for key in ["not", "allOf", "anyOf", "oneOf"] {
        match kw(v, key) {
            Some(n @ Value::Object(_)) if key == "not" => {
                nested_completeness(n, Some(s), s_path, &format!("{v_path}.not"), out, depth + 1);
            }
            Some(Value::Array(list)) if key != "not" => {
                for (i, n) in list.iter().enumerate() {
                    let vp = format!("{v_path}.{key}[{i}]");
                    nested_completeness(n, Some(s), s_path, &vp, out, depth + 1);
                }
            }
            _ => {}
        }
    }
}

/// Completeness of one nested schema against the structural node at the same place.
fn nested_completeness(
    v: &Value,
    s: Option<&Value>,
    s_path: &str,
    v_path: &str,
    out: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH || !v.is_object() {
        return;
    }
    let Some(s) = s.filter(|s| s.is_object()) else {
        out.push(format!(
            "{s_path}: Required value: because it is defined in {v_path}"
        ));
        return;
    };
    check_completeness(v, s, s_path, v_path, out, depth);
    if let Some(it) = items_schema(v) {
        nested_completeness(
            it,
            items_schema(s),
            &format!("{s_path}.items"),
            &format!("{v_path}.items"),
            out,
            depth + 1,
        );
    }
    if let Some(ps) = props(v) {
        for (k, p) in ps {
            let sp = format!("{s_path}.properties[{k}]");
            let vp = format!("{v_path}.properties[{k}]");
            match prop(s, k) {
                Some(sf) => nested_completeness(p, Some(sf), &sp, &vp, out, depth + 1),
                None => out.push(format!(
                    "{sp}: Required value: because it is defined in {vp}"
                )),
            }
        }
    }
}
