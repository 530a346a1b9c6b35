//! stub
#![allow(dead_code, unused_variables, missing_docs, unreachable_pub)]
use serde_json::Value;
#[derive(Debug, thiserror::Error)]
pub(crate) enum PatchError { #[error("conflict {0}")] Conflict(String), #[error("malformed {0}")] Malformed(String), #[error("invalid {0}")] Invalid(String) }
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) { json_patch::merge(target, patch) }
pub(crate) fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> { let p: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|e| PatchError::Malformed(e.to_string()))?; json_patch::patch(target, &p).map_err(|e| PatchError::Invalid(e.to_string())) }
pub(crate) fn strategic_merge_patch(kind: &str, target: &mut Value, patch: &Value) -> Result<(), PatchError> { merge_patch(target, patch); Ok(()) }
pub(crate) fn server_side_apply(kind: Option<&str>, live: Option<&Value>, applied: &Value, field_manager: &str, force: bool, now: &str) -> Result<Value, PatchError> { let mut v = live.cloned().unwrap_or_default(); merge_patch(&mut v, applied); Ok(v) }
