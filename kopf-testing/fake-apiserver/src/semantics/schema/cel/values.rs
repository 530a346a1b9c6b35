//! JSON values as CEL sees them through their schema: objects with properties as maps of the
//! declared fields, maps, lists, and scalars typed by the schema (`integer` is `int`, `number`
//! is `double` even when written without a fraction).

use std::collections::HashMap;
use std::sync::Arc;

use cel::objects::{Key, Value as Cel};
use serde_json::Value;

use super::super::keywords::{
    Additional, EMBEDDED, INT_OR_STRING, MAX_DEPTH, additional, is_true, items_schema, prop, props,
    type_str,
};

/// The fields of `metadata` that rules at a resource's root may read.
pub(super) const ROOT_METADATA_FIELDS: [&str; 2] = ["name", "generateName"];

/// The value `self` is bound to for a schema node; `resource_root` for the root of the custom
/// resource or of an embedded resource, where apiVersion, kind and metadata.name and
/// metadata.generateName are visible too.
pub(super) fn to_cel(value: &Value, schema: &Value, resource_root: bool) -> Cel {
    convert(value, Some(schema), resource_root, 0)
}

fn convert(value: &Value, schema: Option<&Value>, resource_root: bool, depth: usize) -> Cel {
    if depth > MAX_DEPTH {
        return Cel::Null;
    }
    let Some(schema) = schema.filter(|s| s.is_object()) else {
        return untyped(value, depth);
    };
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::String(text) => Cel::String(Arc::new(text.clone())),
        Value::Number(n) => match type_str(schema) {
            Some("number") => Cel::Float(n.as_f64().unwrap_or(0.0)),
            _ if is_true(schema, INT_OR_STRING) || type_str(schema) == Some("integer") => {
                integer(n)
            }
            _ => number(n),
        },
        Value::Array(items) => {
            let item_schema = items_schema(schema);
            Cel::List(Arc::new(
                items
                    .iter()
                    .map(|item| {
                        let embedded = item_schema.is_some_and(|s| is_true(s, EMBEDDED));
                        convert(item, item_schema, embedded, depth + 1)
                    })
                    .collect(),
            ))
        }
        Value::Object(map) => {
            let mut out: HashMap<Key, Cel> = HashMap::new();
            let declared = props(schema).is_some_and(|p| !p.is_empty());
            let addl = match additional(schema) {
                Additional::Schema(a) => Some(a),
                _ => None,
            };
            for (key, field) in map {
                let field_schema = prop(schema, key).or(addl);
                let visible = if resource_root && matches!(key.as_str(), "apiVersion" | "kind") {
                    true
                } else if resource_root && key == "metadata" {
                    out.insert(key_of(key), metadata(field));
                    continue;
                } else {
                    field_schema.is_some() || (!declared && addl.is_none())
                };
                if !visible {
                    continue;
                }
                let embedded = field_schema.is_some_and(|s| is_true(s, EMBEDDED));
                out.insert(
                    key_of(key),
                    convert(field, field_schema, embedded, depth + 1),
                );
            }
            Cel::Map(out.into())
        }
    }
}

/// `metadata` at a resource's root: only its name and generateName.
fn metadata(value: &Value) -> Cel {
    let mut out: HashMap<Key, Cel> = HashMap::new();
    if let Value::Object(map) = value {
        for field in ROOT_METADATA_FIELDS {
            if let Some(Value::String(text)) = map.get(field) {
                out.insert(key_of(field), Cel::String(Arc::new(text.clone())));
            }
        }
    }
    Cel::Map(out.into())
}

/// A JSON value with no schema to type it (numbers are ints when they have no fraction).
pub(super) fn untyped_value(value: &Value) -> Cel {
    untyped(value, 0)
}

/// A value under `x-kubernetes-preserve-unknown-fields` or of no type: numbers are ints when
/// they have no fraction.
fn untyped(value: &Value, depth: usize) -> Cel {
    if depth > MAX_DEPTH {
        return Cel::Null;
    }
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::String(text) => Cel::String(Arc::new(text.clone())),
        Value::Number(n) => number(n),
        Value::Array(items) => Cel::List(Arc::new(
            items.iter().map(|i| untyped(i, depth + 1)).collect(),
        )),
        Value::Object(map) => {
            let out: HashMap<Key, Cel> = map
                .iter()
                .map(|(k, v)| (key_of(k), untyped(v, depth + 1)))
                .collect();
            Cel::Map(out.into())
        }
    }
}

fn key_of(key: &str) -> Key {
    Key::String(Arc::new(key.to_string()))
}

/// An `integer` field's value (an integral float counts as an int).
fn integer(n: &serde_json::Number) -> Cel {
    match n.as_i64() {
        Some(i) => Cel::Int(i),
        None => number(n),
    }
}

/// A number of unknown type: an int when it is one, else a double.
fn number(n: &serde_json::Number) -> Cel {
    match n.as_i64() {
        Some(i) => Cel::Int(i),
        None => {
            let f = n.as_f64().unwrap_or(0.0);
            if f.fract() == 0.0 && f.abs() < 9.0e18 {
                Cel::Int(f as i64)
            } else {
                Cel::Float(f)
            }
        }
    }
}
