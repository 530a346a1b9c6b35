//! Subresources that show the whole object and write only a part of it
//! (`pods/ephemeralcontainers`, `certificatesigningrequests/approval`): GET answers the object;
//! PUT and PATCH propose a new object, from which the subresource keeps its part.

use http::StatusCode;
use serde_json::{Value, json};

use super::target::{Target, current, method_not_allowed};
use super::writes::{dry_run, parse_object, patch_kind, patched, updater, write_object};
use crate::endpoints::reply::Reply;
use crate::endpoints::request::{Context, Verb};
use crate::endpoints::shared::Shared;
use crate::semantics::admission::FieldValidation;
use crate::semantics::lifecycle::Scope;
use crate::semantics::status::ApiResult;
use crate::storage::object;

/// Serves such a subresource; `keep(stored, proposed)` is the object to store: the stored one
/// with the subresource's part taken from the proposal, or why that part may not change so.
pub(super) async fn serve(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    (verb, scope): (Verb, Scope),
    body: &[u8],
    keep: impl Fn(&Value, &Value) -> ApiResult<Value>,
) -> ApiResult<Reply> {
    let name = target.name().to_string();
    let kind = match verb {
        Verb::Get => {
            let stored = current(shared, target, &name)?;
            return Ok(Reply::json(StatusCode::OK, &target.answer(&stored)));
        }
        Verb::Update => None,
        Verb::Patch => Some(patch_kind(context.content_type.as_deref())?),
        _ => return Err(method_not_allowed()),
    };
    let document = parse_object(context, body)?;
    let updater = updater(context, target);
    write_object(
        shared,
        Some(context),
        target,
        &name,
        (scope, Some(&updater)),
        (FieldValidation::Strict, dry_run(context)?),
        |stored| {
            let proposed = match kind {
                None => document.clone(),
                Some(kind) => patched(target, kind, stored, &document)?,
            };
            let mut kept = keep(stored, &proposed)?;
            // A precondition on the version travels with the proposal.
            if let Some(rv) = proposed["metadata"]["resourceVersion"].as_str() {
                object::meta_mut(&mut kept).insert("resourceVersion".into(), json!(rv));
            }
            Ok(kept)
        },
    )
    .await
}
