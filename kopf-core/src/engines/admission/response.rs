//! The `AdmissionReview` response: the decision, the one error that explains a denial, the
//! warnings, and the mutating handlers' patch as an RFC 6902 JSON patch.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::engines::admission::request::ReviewRequest;
use crate::structs::patch::Patch;

/// How a handler's error ranks when choosing the one that explains a denial (Kopf's order:
/// admission errors first, then its permanent and temporary errors, then any other).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    Admission,
    Permanent,
    Temporary,
    Other,
}

/// A handler's failure, as the response reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) rank: Rank,
    pub(crate) message: String,
    /// An [`AdmissionError`](crate::AdmissionError)'s code.
    pub(crate) code: Option<u16>,
}

/// The response to a review: `failures` in the handlers' registration order.
pub(crate) fn build(
    request: &ReviewRequest,
    failures: &[Failure],
    warnings: &[String],
    patch: &[Value],
) -> Value {
    let mut response = json!({
        "uid": request.uid,
        "allowed": failures.is_empty(),
    });
    if !warnings.is_empty() {
        response["warnings"] = json!(warnings);
    }
    if !patch.is_empty() {
        let encoded = serde_json::to_vec(patch).unwrap_or_default();
        response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(encoded));
        response["patchType"] = json!("JSONPatch");
    }
    // `min_by_key` keeps the first of equal ranks.
    if let Some(failure) = failures.iter().min_by_key(|failure| failure.rank) {
        let code = failure.code.filter(|code| *code != 0).unwrap_or(500);
        response["status"] = json!({"message": failure.message, "code": code});
    }
    json!({
        "apiVersion": request.api_version,
        "kind": request.kind,
        "response": response,
    })
}

/// The mutating handlers' changes as RFC 6902 operations: the merge patch, the JSON-patch
/// operations and then the functions applied to a copy of the body, then the difference (no
/// `test` operations).
pub(crate) fn json_patch(body: &Value, patch: &Patch) -> Result<Vec<Value>, String> {
    if patch.is_empty() {
        return Ok(Vec::new());
    }
    let mut patched = patch.applied_to(body);
    if !patch.operations().is_empty() {
        let operations: json_patch::Patch =
            serde_json::from_value(Value::Array(patch.operations().to_vec())).map_err(|error| {
                format!("the handlers' JSON-patch operations are invalid: {error}")
            })?;
        json_patch::patch(&mut patched, &operations).map_err(|error| {
            format!("the handlers' JSON-patch operations do not apply to the object: {error}")
        })?;
    }
    patch.apply_functions(&mut patched);
    let difference = json_patch::diff(body, &patched);
    match serde_json::to_value(difference) {
        Ok(Value::Array(operations)) => Ok(operations),
        _ => Ok(Vec::new()),
    }
}
