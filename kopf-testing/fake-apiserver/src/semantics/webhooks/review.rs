//! The `AdmissionReview` a webhook is sent and the answer it gives, as kube-apiserver writes
//! and checks them, and the errors a request fails with because of a webhook.

use base64::Engine as _;
use http::StatusCode;
use serde_json::{Map, Value, json};

use super::configuration::{Phase, Webhook};
use super::matching::Attributes;
use crate::semantics::status::ApiError;

/// The group of `AdmissionReview`.
const ADMISSION: &str = "admission.k8s.io";

/// The versions of `AdmissionReview` this server speaks, in its order of preference.
const KNOWN_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// The review version to call `webhook` with: the first of its `admissionReviewVersions`
/// that is known.
pub(crate) fn review_version(webhook: &Webhook) -> Result<&'static str, String> {
    webhook
        .review_versions
        .iter()
        .find_map(|given| KNOWN_VERSIONS.into_iter().find(|known| known == given))
        .ok_or_else(|| {
            format!(
                "webhook does not accept known AdmissionReview versions: {:?} (this server speaks {KNOWN_VERSIONS:?})",
                webhook.review_versions
            )
        })
}

/// The `AdmissionRequest` for a call: `object` and `old_object` already rendered in `version`,
/// the version of the resource the webhook matched.
pub(crate) fn request(
    attributes: &Attributes,
    uid: &str,
    version: &str,
    object: Option<&Value>,
    old_object: Option<&Value>,
) -> Value {
    let def = &attributes.def;
    let kind = |version: &str| match &attributes.subresource_kind {
        Some(kind) => kind.clone(),
        None => json!({"group": def.group, "version": version, "kind": def.kind}),
    };
    let resource =
        |version: &str| json!({"group": def.group, "version": version, "resource": def.plural});
    let mut request = Map::new();
    request.insert("uid".into(), json!(uid));
    request.insert("kind".into(), kind(version));
    request.insert("resource".into(), resource(version));
    if !attributes.subresource.is_empty() {
        request.insert("subResource".into(), json!(attributes.subresource));
    }
    request.insert("requestKind".into(), kind(&attributes.version));
    request.insert("requestResource".into(), resource(&attributes.version));
    if !attributes.subresource.is_empty() {
        request.insert("requestSubResource".into(), json!(attributes.subresource));
    }
    if !attributes.name.is_empty() {
        request.insert("name".into(), json!(attributes.name));
    }
    if !attributes.namespace.is_empty() {
        request.insert("namespace".into(), json!(attributes.namespace));
    }
    request.insert("operation".into(), json!(attributes.operation.as_str()));
    request.insert("userInfo".into(), attributes.user.user_info());
    request.insert("object".into(), object.cloned().unwrap_or(Value::Null));
    request.insert(
        "oldObject".into(),
        old_object.cloned().unwrap_or(Value::Null),
    );
    request.insert("dryRun".into(), json!(attributes.dry_run));
    request.insert("options".into(), attributes.options.clone());
    Value::Object(request)
}

/// The whole `AdmissionReview` body around `request`.
pub(crate) fn review(review_version: &str, request: Value) -> Value {
    json!({
        "kind": "AdmissionReview",
        "apiVersion": format!("{ADMISSION}/{review_version}"),
        "request": request,
    })
}

/// What a webhook answered.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub(crate) allowed: bool,
    /// `response.status`, read only when the request is denied.
    pub(crate) status: Value,
    /// The JSON Patch operations of a mutating webhook.
    pub(crate) patch: Option<Value>,
    pub(crate) warnings: Vec<String>,
}

/// Reads and checks a webhook's answer (`body`) to a review of `review_version` with `uid`;
/// an error (for `received invalid webhook response: ...`) when it breaks the protocol.
pub(crate) fn verdict(
    webhook: &Webhook,
    review_version: &str,
    uid: &str,
    body: &[u8],
) -> Result<Verdict, String> {
    let review: Value = serde_json::from_slice(body)
        .map_err(|e| format!("the body is not an AdmissionReview: {e}"))?;
    let expected = format!("{ADMISSION}/{review_version}");
    if review_version == "v1"
        && (review["apiVersion"] != expected.as_str() || review["kind"] != "AdmissionReview")
    {
        return Err(format!(
            "expected webhook response of {expected}, Kind=AdmissionReview, got {}, Kind={}",
            review["apiVersion"].as_str().unwrap_or_default(),
            review["kind"].as_str().unwrap_or_default(),
        ));
    }
    let Some(response) = review["response"].as_object() else {
        return Err("webhook response was absent".into());
    };
    let given_uid = response.get("uid").and_then(Value::as_str).unwrap_or("");
    if review_version == "v1" && given_uid != uid {
        return Err(format!("expected response.uid={uid:?}, got {given_uid:?}"));
    }
    let allowed = response
        .get("allowed")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let patch = response.get("patch").filter(|p| !p.is_null());
    let patch_type = response.get("patchType").filter(|p| !p.is_null());
    let patch = match (webhook.phase, patch, patch_type) {
        (Phase::Validating, Some(_), _) => {
            return Err("validating webhook may not return response.patch".into());
        }
        (Phase::Validating, None, Some(_)) => {
            return Err("validating webhook may not return response.patchType".into());
        }
        (_, None, None) => None,
        (_, Some(_), None) if review_version == "v1" => {
            return Err("webhook returned response.patch but not response.patchType".into());
        }
        (_, None, Some(_)) => {
            return Err("webhook returned response.patchType but not response.patch".into());
        }
        (_, Some(_), Some(kind)) if kind != "JSONPatch" => {
            return Err(format!(
                "webhook returned invalid response.patchType of {kind}"
            ));
        }
        (_, Some(patch), _) => {
            let encoded = patch
                .as_str()
                .ok_or("response.patch is not a base64 string")?;
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map_err(|e| format!("response.patch is not base64: {e}"))?;
            let operations: Value = serde_json::from_slice(&decoded)
                .map_err(|e| format!("response.patch is not a JSON patch: {e}"))?;
            Some(operations)
        }
    };
    let warnings = response
        .get("warnings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect();
    Ok(Verdict {
        allowed,
        status: response.get("status").cloned().unwrap_or(Value::Null),
        patch,
        warnings,
    })
}

/// The reasons of `Status` that Kubernetes defines: a denial keeps its webhook's reason when
/// it is one of them.
const REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
];

/// The error a denial is answered with: the webhook's code (400 if below 400), its reason
/// and details, and `admission webhook "<name>" denied the request: <message>`.
pub(crate) fn denial(webhook: &str, status: &Value) -> ApiError {
    let code = status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|&c| c >= 400)
        .and_then(|c| StatusCode::from_u16(c).ok())
        .unwrap_or(StatusCode::BAD_REQUEST);
    let given_reason = status["reason"].as_str().unwrap_or_default();
    let denied = format!("admission webhook \"{webhook}\" denied the request");
    let message = match status["message"].as_str().filter(|m| !m.is_empty()) {
        Some(message) => format!("{denied}: {message}"),
        None if !given_reason.is_empty() => format!("{denied}: {given_reason}"),
        None => format!("{denied} without explanation"),
    };
    let reason = REASONS
        .iter()
        .find(|known| **known == given_reason)
        .copied()
        .unwrap_or("");
    let error = ApiError::new(code, reason, message);
    match status.get("details").filter(|d| d.is_object()) {
        Some(details) => error.with_details(details.clone()),
        None => error,
    }
}

/// The error of a call that failed under `failurePolicy: Fail`.
pub(crate) fn call_failure(webhook: &str, cause: &str) -> ApiError {
    let failure = format!("failed calling webhook \"{webhook}\": {cause}");
    // Go's `NewInternalError`: the error again as the one cause.
    ApiError::internal(format!("Internal error occurred: {failure}"))
        .with_details(json!({"causes": [{"message": failure}]}))
}

/// A dry run reaching a webhook with side effects.
pub(crate) fn no_dry_run(webhook: &str) -> ApiError {
    ApiError::bad_request(format!(
        "admission webhook \"{webhook}\" does not support dry run"
    ))
}

/// A patch from a mutating webhook where there is no object to patch (deletions).
pub(crate) fn patch_without_object() -> ApiError {
    ApiError::internal(
        "Internal error occurred: attempted to modify the object, which is not supported for this operation",
    )
}

/// A patch that does not apply to the object.
pub(crate) fn unusable_patch(webhook: &str, why: &str) -> ApiError {
    ApiError::internal(format!(
        "Internal error occurred: the patch of admission webhook \"{webhook}\" does not apply: {why}"
    ))
}

/// Match conditions that could not be evaluated under `failurePolicy: Fail`.
pub(crate) fn failed_conditions(attributes: &Attributes, webhook: &str, why: &str) -> ApiError {
    let resource = if attributes.def.group.is_empty() {
        attributes.def.plural.clone()
    } else {
        format!("{}.{}", attributes.def.plural, attributes.def.group)
    };
    ApiError::forbidden(format!(
        "{resource} \"{}\" is forbidden: webhook \"{webhook}\": {why}",
        attributes.name
    ))
}

/// How many characters of warnings an answer carries in full; once more come, every warning
/// is cut to [`WARNING_CUT`] characters, as kube-apiserver's warning recorder does.
const WARNING_BUDGET: usize = 4096;
const WARNING_CUT: usize = 256;

/// Adds `new` warnings to `warnings`, dropping duplicates and keeping to the budget.
pub(crate) fn record_warnings(warnings: &mut Vec<String>, new: impl IntoIterator<Item = String>) {
    let length = |text: &String| text.chars().count();
    let cut = |text: &mut String| {
        if let Some((index, _)) = text.char_indices().nth(WARNING_CUT) {
            text.truncate(index);
        }
    };
    for warning in new {
        let mut warning: String = warning.chars().filter(|c| !c.is_control()).collect();
        if warning.is_empty() || warnings.contains(&warning) {
            continue;
        }
        if warnings.iter().map(length).sum::<usize>() + length(&warning) > WARNING_BUDGET {
            warnings.iter_mut().for_each(cut);
            cut(&mut warning);
        }
        let fits = warnings.iter().map(length).sum::<usize>() + length(&warning) <= WARNING_BUDGET;
        if fits && !warnings.contains(&warning) {
            warnings.push(warning);
        }
    }
}
