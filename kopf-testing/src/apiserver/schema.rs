//! stub
#![allow(dead_code, unused_variables)]
use serde_json::Value;
pub(crate) struct FieldError { pub(crate) field: String, pub(crate) reason: &'static str, pub(crate) message: String }
pub(crate) fn prune(object: &mut Value, schema: &Value) -> Vec<String> { vec![] }
pub(crate) fn apply_defaults(object: &mut Value, schema: &Value) {}
pub(crate) fn validate(object: &Value, schema: &Value) -> Vec<FieldError> { vec![] }
pub(crate) fn check_structural(schema: &Value) -> Vec<String> { vec![] }
pub(crate) fn invalid_message(kind_group: &str, name: &str, errors: &[FieldError]) -> String { String::new() }
