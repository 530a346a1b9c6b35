//! `certificatesigningrequests/approval`: where approvers (`kubectl certificate approve`,
//! controllers) write a CSR's `Approved` or `Denied` condition. As the real server's approval
//! strategy, a write here changes only `status.conditions`; everything else stays as stored.

use http::StatusCode;
use serde_json::{Value, json};

use super::target::{Target, current, method_not_allowed};
use super::writes::{
    PatchKind, dry_run, parse_object, patch_error, patch_kind, updater, write_object,
};
use crate::apiserver::endpoints::reply::Reply;
use crate::apiserver::endpoints::request::{Context, Verb};
use crate::apiserver::endpoints::shared::Shared;
use crate::apiserver::semantics::admission::FieldValidation;
use crate::apiserver::semantics::lifecycle::Scope;
use crate::apiserver::semantics::patch;
use crate::apiserver::semantics::status::{ApiError, ApiResult};
use crate::apiserver::storage::object;

/// GET, PUT or PATCH `.../certificatesigningrequests/NAME/approval`.
pub(super) fn approval(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    verb: Verb,
    body: &[u8],
) -> ApiResult<Reply> {
    let name = target.name().to_string();
    let kind = match verb {
        Verb::Get => {
            let csr = current(shared, target, &name)?;
            return Ok(Reply::json(StatusCode::OK, &target.answer(&csr)));
        }
        Verb::Update => None,
        Verb::Patch => Some(patch_kind(context.content_type.as_deref())?),
        _ => return Err(method_not_allowed()),
    };
    let document = parse_object(context, body)?;
    let updater = updater(context, target);
    write_object(
        shared,
        target,
        &name,
        (Scope::Status, Some(&updater)),
        FieldValidation::Strict,
        dry_run(context)?,
        |csr| {
            let mut proposed = csr.clone();
            match kind {
                None => proposed = document.clone(),
                Some(PatchKind::Json) => patch::json_patch(&mut proposed, &document)
                    .map_err(|e| patch_error(target, &name, e))?,
                Some(PatchKind::Merge | PatchKind::Strategic) => {
                    patch::merge_patch(&mut proposed, &document)
                }
                Some(PatchKind::Apply) => {
                    return Err(ApiError::unsupported_media_type(
                        "application/apply-patch+yaml",
                    ));
                }
            }
            let mut conditions = match &proposed["status"]["conditions"] {
                Value::Array(conditions) => conditions.clone(),
                _ => Vec::new(),
            };
            stamp(&mut conditions, &csr["status"]["conditions"]);
            let mut csr = csr.clone();
            if !csr["status"].is_object() {
                csr["status"] = json!({});
            }
            csr["status"]["conditions"] = Value::Array(conditions);
            if let Some(rv) = proposed["metadata"]["resourceVersion"].as_str() {
                object::meta_mut(&mut csr).insert("resourceVersion".into(), json!(rv));
            }
            Ok(csr)
        },
    )
}

/// Fills the times a condition leaves out, as the real server does: `lastUpdateTime` now, and
/// `lastTransitionTime` kept from the stored condition of the same type and status, else now.
fn stamp(conditions: &mut [Value], stored: &Value) {
    let now = object::now_timestamp();
    for condition in conditions.iter_mut().filter(|c| c.is_object()) {
        if condition["lastUpdateTime"].is_null() {
            condition["lastUpdateTime"] = json!(now);
        }
        if condition["lastTransitionTime"].is_null() {
            let same = stored.as_array().and_then(|stored| {
                stored.iter().find(|old| {
                    old["type"] == condition["type"] && old["status"] == condition["status"]
                })
            });
            condition["lastTransitionTime"] = same
                .map(|old| old["lastTransitionTime"].clone())
                .filter(|time| !time.is_null())
                .unwrap_or_else(|| json!(now));
        }
    }
}
