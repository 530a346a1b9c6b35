//! `certificatesigningrequests/approval`: where approvers (`kubectl certificate approve`,
//! controllers) write a CSR's `Approved` or `Denied` condition. As the real server's approval
//! strategy, a write here changes only `status.conditions`; everything else stays as stored.

use serde_json::{Value, json};

use super::partial;
use super::target::Target;
use crate::endpoints::reply::Reply;
use crate::endpoints::request::{Context, Verb};
use crate::endpoints::shared::Shared;
use crate::semantics::lifecycle::Scope;
use crate::semantics::status::ApiResult;
use crate::storage::object;

/// GET, PUT or PATCH `.../certificatesigningrequests/NAME/approval`.
pub(super) async fn approval(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    verb: Verb,
    body: &[u8],
) -> ApiResult<Reply> {
    partial::serve(
        shared,
        context,
        target,
        (verb, Scope::Status),
        body,
        |csr, proposed| {
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
            Ok(csr)
        },
    )
    .await
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
