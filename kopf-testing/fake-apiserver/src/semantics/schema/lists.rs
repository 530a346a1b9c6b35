//! The checks the apiserver runs after the schema's: the apiVersion and kind of embedded
//! resources, and duplicates in lists of type set and map.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::errors::{DUPLICATE, FieldError, INVALID, REQUIRED};
use super::keywords::{
    Additional, EMBEDDED, LIST_MAP_KEYS, LIST_TYPE, MAX_DEPTH, additional, child, index, is_meta,
    is_true, items_schema, kw, prop, props, str_kw,
};
use crate::semantics::go_format::{Num, go_json, go_value, write_go_json, write_go_json_string};

/// apiVersion and kind of nested x-kubernetes-embedded-resource objects (k8s' objectmeta.Validate).
pub(super) fn embedded_checks(
    x: &Value,
    s: &Value,
    path: &str,
    root: bool,
    depth: usize,
    out: &mut Vec<FieldError>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    match x {
        Value::Object(map) => {
            if !root && is_true(s, EMBEDDED) {
                check_type_meta(map, path, out);
            }
            let addl = additional(s);
            for (k, v) in map {
                if root && is_meta(k) {
                    continue;
                }
                if let Some(p) = prop(s, k) {
                    embedded_checks(v, p, &child(path, k), false, depth + 1, out);
                } else if let Additional::Schema(a) = addl {
                    embedded_checks(v, a, &format!("{path}[{k}]"), false, depth + 1, out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(it) = items_schema(s) {
                for (i, v) in items.iter().enumerate() {
                    embedded_checks(v, it, &index(path, i), false, depth + 1, out);
                }
            }
        }
        _ => {}
    }
}

/// The apiVersion and kind of one embedded resource.
fn check_type_meta(map: &Map<String, Value>, path: &str, out: &mut Vec<FieldError>) {
    let mut push = |field: String, reason: &'static str, message: String| {
        out.push(FieldError {
            field,
            reason,
            message,
        })
    };
    for key in ["apiVersion", "kind"] {
        if !map.contains_key(key) {
            push(child(path, key), REQUIRED, "Required value".to_string());
        }
    }
    for (key, v) in map {
        if key != "apiVersion" && key != "kind" {
            continue;
        }
        let field = child(path, key);
        let problem = match v {
            Value::String(text) if text.is_empty() => Some("must not be empty".to_string()),
            Value::String(text) if key == "apiVersion" => (text.matches('/').count() > 1)
                .then(|| format!("unexpected GroupVersion string: {text}")),
            Value::String(text) => {
                let errors = dns1035_label_errors(&text.to_lowercase());
                (!errors.is_empty()).then(|| {
                    format!(
                        "may have mixed case, but should otherwise match: {}",
                        errors.join(",")
                    )
                })
            }
            _ => Some("must be a string".to_string()),
        };
        if let Some(problem) = problem {
            push(
                field,
                INVALID,
                format!("Invalid value: {}: {problem}", go_value(v)),
            );
        }
    }
}

/// apimachinery's IsDNS1035Label.
fn dns1035_label_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push("must be no more than 63 characters".to_string());
    }
    let b = value.as_bytes();
    let ok = b.first().is_some_and(u8::is_ascii_lowercase)
        && b.last()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
    if !ok {
        errors.push("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".to_string());
    }
    errors
}

/// k8s' ValidateListSetsAndMaps over an object.
pub(super) fn list_checks_map(
    map: &Map<String, Value>,
    s: &Value,
    path: &str,
    root: bool,
    depth: usize,
    out: &mut Vec<FieldError>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    if let Additional::Schema(a) = additional(s) {
        for (k, v) in map {
            if !(root && is_meta(k)) {
                list_checks_value(v, a, &format!("{path}[{k}]"), depth + 1, out);
            }
        }
    }
    if let Some(ps) = props(s) {
        for (k, v) in map {
            if root && is_meta(k) {
                continue;
            }
            if let Some(p) = ps.get(k) {
                list_checks_value(v, p, &child(path, k), depth + 1, out);
            }
        }
    }
}

/// List checks below one value.
fn list_checks_value(v: &Value, s: &Value, path: &str, depth: usize, out: &mut Vec<FieldError>) {
    match v {
        Value::Array(items) => list_checks_array(items, s, path, depth, out),
        Value::Object(map) => list_checks_map(map, s, path, false, depth, out),
        _ => {}
    }
}

/// Duplicates in lists of type set or map, then the items.
fn list_checks_array(
    items: &[Value],
    s: &Value,
    path: &str,
    depth: usize,
    out: &mut Vec<FieldError>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let duplicate = |i: usize, shown: String| FieldError {
        field: index(path, i),
        reason: DUPLICATE,
        message: format!("Duplicate value: {shown}"),
    };
    match str_kw(s, LIST_TYPE) {
        Some("set") => {
            for i in second_occurrences(items) {
                if let Some(v) = items.get(i) {
                    out.push(duplicate(i, go_value(v)));
                }
            }
        }
        Some("map") => {
            if let Some((i, v)) = items
                .iter()
                .enumerate()
                .find(|(_, v)| !v.is_null() && !v.is_object())
            {
                out.push(FieldError {
                    field: index(path, i),
                    reason: INVALID,
                    message: format!(
                        "Invalid value: {}: must be an object for an array of list-type map",
                        go_value(v)
                    ),
                });
            } else if items.len() > 1 {
                let keys: Vec<&str> = match kw(s, LIST_MAP_KEYS) {
                    Some(Value::Array(keys)) => keys.iter().filter_map(Value::as_str).collect(),
                    _ => Vec::new(),
                };
                let key_values: Vec<Value> = items
                    .iter()
                    .map(|item| {
                        let mut key = Map::new();
                        for k in &keys {
                            if let Some(v) = item.get(*k) {
                                key.insert((*k).to_string(), v.clone());
                            }
                        }
                        Value::Object(key)
                    })
                    .collect();
                for i in second_occurrences(&key_values) {
                    if let Some(key) = key_values.get(i) {
                        out.push(duplicate(i, go_json(key)));
                    }
                }
            }
        }
        _ => {}
    }
    if let Some(it) = items_schema(s) {
        for (i, v) in items.iter().enumerate() {
            list_checks_value(v, it, &index(path, i), depth + 1, out);
        }
    }
}

/// Indices of values seen exactly once before (k8s reports each duplicated value once).
pub(super) fn second_occurrences(values: &[Value]) -> Vec<usize> {
    let mut seen: HashMap<String, usize> = HashMap::with_capacity(values.len());
    let mut found = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let times = seen.entry(canonical(v)).or_insert(0);
        if *times == 1 {
            found.push(i);
        }
        *times += 1;
    }
    found
}

/// A key equal for equal values (keys sorted; integers and floats kept apart, as Go's types are).
fn canonical(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out, 0);
    out
}

/// Appends the canonical key of a value.
fn write_canonical(v: &Value, out: &mut String, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::Number(n) => match Num::of(n) {
            Num::Int(i) => out.push_str(&format!("i{i}")),
            Num::Float(f) => out.push_str(&format!("f{f:?}")),
        },
        Value::Array(items) => {
            out.push('[');
            for item in items {
                write_canonical(item, out, depth + 1);
                out.push(',');
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for k in keys {
                write_go_json_string(k, out);
                out.push(':');
                if let Some(item) = map.get(k) {
                    write_canonical(item, out, depth + 1);
                }
                out.push(',');
            }
            out.push('}');
        }
        other => write_go_json(other, out, depth),
    }
}
