//! Schemas against the apiserver's behaviour: validation keyword by keyword, pruning,
//! defaulting, structural checks, and inputs that must never panic.

mod cel;
mod properties;
mod prune;
mod structural;
mod validation;

use proptest::prelude::*;
use serde_json::{Map, Number, Value, json};

use super::errors::*;
use super::keywords::*;
use super::values::*;
use super::*;
use crate::semantics::go_format::go_json;

/// A CR schema with the usual root.
fn root(spec: Value) -> Value {
    json!({"type": "object", "properties": {"spec": spec}})
}

/// A CR with the usual meta fields around a spec.
fn cr(spec: Value) -> Value {
    json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "x"}, "spec": spec})
}

/// An error as (field, reason, message), for compact assertions.
type Triple = (String, &'static str, String);

/// Validation errors as triples.
fn errs(object: &Value, schema: &Value) -> Vec<Triple> {
    validate(object, schema)
        .into_iter()
        .map(|e| (e.field, e.reason, e.message))
        .collect()
}

/// One expected error.
fn e(field: &str, reason: &'static str, message: &str) -> Triple {
    (field.to_string(), reason, message.to_string())
}
