//! The `scale` subresource: an `autoscaling/v1` `Scale` view of the replicas.

use http::StatusCode;
use serde_json::{Value, json};

use super::admitting;
use super::target::{Target, current, method_not_allowed};
use super::writes::{
    PatchKind, dry_run, parse_json, patch_error, patch_kind, updater, write_object,
};
use crate::endpoints::reply::Reply;
use crate::endpoints::request::{Context, Verb};
use crate::endpoints::shared::Shared;
use crate::semantics::admission::FieldValidation;
use crate::semantics::lifecycle::Scope;
use crate::semantics::status::{ApiError, ApiResult};
use crate::semantics::webhooks::Operation;
use crate::semantics::{patch, table};
use crate::storage::object;

/// The `scale` subresource: an `autoscaling/v1` `Scale` view of the replicas.
pub(super) async fn scale(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    verb: Verb,
    body: &[u8],
) -> ApiResult<Reply> {
    let paths = target
        .def
        .version(target.version)
        .and_then(|v| v.scale.clone())
        .ok_or_else(method_not_allowed)?;
    let name = target.name().to_string();
    let read_path = |object: &Value, path: &str| -> Value {
        table::json_path(object, path)
            .into_iter()
            .next()
            .unwrap_or(Value::Null)
    };
    let view = |object: &Value| -> Value {
        let meta = object::meta(object);
        let mut scale = json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": meta["name"], "uid": meta["uid"], "resourceVersion": meta["resourceVersion"],
                "creationTimestamp": meta["creationTimestamp"],
            },
            "spec": {"replicas": read_path(object, &paths.spec_replicas)},
            "status": {"replicas": read_path(object, &paths.status_replicas).as_i64().unwrap_or(0)},
        });
        if target.def.namespaced {
            scale["metadata"]["namespace"] = meta["namespace"].clone();
        }
        if let Some(selector) = &paths.label_selector {
            let value = read_path(object, selector);
            if !value.is_null() {
                scale["status"]["selector"] = value;
            }
        }
        scale
    };
    match verb {
        Verb::Get => {
            let object = current(shared, target, &name)?;
            Ok(Reply::json(StatusCode::OK, &view(&object)))
        }
        Verb::Update | Verb::Patch => {
            let kind = if verb == Verb::Patch {
                Some(patch_kind(context.content_type.as_deref())?)
            } else {
                None
            };
            let document = parse_json(body)?;
            let dry_run = dry_run(context)?;
            let proposal = |current: &Value| -> ApiResult<Value> {
                let mut scale = view(current);
                match kind {
                    None => scale = document.clone(),
                    Some(PatchKind::Json) => {
                        patch::json_patch(&mut scale, &document).map_err(patch_error)?
                    }
                    Some(_) => patch::merge_patch(&mut scale, &document),
                }
                Ok(scale)
            };
            let updater = updater(context, target);
            let mut proposed = None;
            let mut warnings = Vec::new();
            for attempt in 1..=admitting::ATTEMPTS {
                // Webhooks for `<resource>/scale` see the Scale, and may change it; the write
                // commits only if the object is still the one they saw, and they are asked
                // again otherwise (as for every other write).
                let seen = target.render(&*current(shared, target, &name)?);
                let request = (context, target, Operation::Update, name.as_str());
                let admitted = admitting::admit_other_kind(
                    shared,
                    request,
                    dry_run,
                    (proposal(&seen)?, Some(view(&seen))),
                    admitting::SCALE,
                    |scale| replicas(scale).map(drop),
                    &mut warnings,
                )
                .await?;
                let mut moved = false;
                let write = write_object(
                    shared,
                    None,
                    target,
                    &name,
                    (Scope::Main, Some(&updater)),
                    (FieldValidation::Ignore, dry_run),
                    |current| {
                        if object::resource_version(current) != object::resource_version(&seen) {
                            moved = true;
                            return Err(ApiError::stale(target.subject(&name)));
                        }
                        let object = scaled(current, &paths.spec_replicas, &admitted)?;
                        proposed = Some(object.clone());
                        Ok(object)
                    },
                )
                .await;
                if moved && attempt < admitting::ATTEMPTS {
                    continue;
                }
                write?;
                break;
            }
            let object = match proposed.filter(|_| dry_run) {
                Some(object) => object,
                None => (*current(shared, target, &name)?).clone(),
            };
            Ok(Reply::json(StatusCode::OK, &view(&object)).with_warnings(warnings))
        }
        _ => Err(method_not_allowed()),
    }
}

/// `object` with the replicas of `scale` at `spec_replicas` (a path such as `.spec.replicas`),
/// and the resourceVersion of `scale` if it has one (a precondition).
fn scaled(object: &Value, spec_replicas: &str, scale: &Value) -> ApiResult<Value> {
    let replicas = replicas(scale)?;
    let mut object = object.clone();
    let pointer = format!(
        "/{}",
        spec_replicas.trim_start_matches('.').replace('.', "/")
    );
    set_pointer(&mut object, &pointer, json!(replicas));
    if let Some(rv) = scale["metadata"]["resourceVersion"].as_str() {
        object::meta_mut(&mut object).insert("resourceVersion".into(), json!(rv));
    }
    Ok(object)
}

/// The replicas a Scale asks for.
fn replicas(scale: &Value) -> ApiResult<i64> {
    scale["spec"]["replicas"]
        .as_i64()
        .ok_or_else(|| ApiError::bad_request("spec.replicas of a Scale must be an integer"))
}

/// Sets the value at a JSON pointer, creating objects on the way.
fn set_pointer(target: &mut Value, pointer: &str, value: Value) {
    let mut node = target;
    let parts: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        if !node.is_object() {
            *node = json!({});
        }
        let map = node.as_object_mut().expect("made an object above");
        if i == parts.len() - 1 {
            map.insert(part.to_string(), value);
            return;
        }
        node = map.entry(part.to_string()).or_insert_with(|| json!({}));
    }
}
