//! stub
#![allow(dead_code, unused_variables)]
use serde_json::Value;
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PrinterColumn { pub(crate) name: String, pub(crate) type_: String, pub(crate) format: String, pub(crate) description: String, pub(crate) priority: i64, pub(crate) json_path: String }
impl PrinterColumn { pub(crate) fn from_crd(value: &Value) -> Option<Self> { None } }
pub(crate) fn build_table(objects: &[Value], columns: &[PrinterColumn], list_meta: Value, now: time::OffsetDateTime) -> Value { Value::Null }
