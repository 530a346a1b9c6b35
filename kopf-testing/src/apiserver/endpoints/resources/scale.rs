//! The `scale` subresource: an `autoscaling/v1` `Scale` view of the replicas.

use http::StatusCode;
use serde_json::{Value, json};

use super::admitting;
use super::target::{Target, current, method_not_allowed};
use super::writes::{
    PatchKind, dry_run, parse_json, patch_error, patch_kind, updater, write_object,
};
use crate::apiserver::endpoints::reply::Reply;
use crate::apiserver::endpoints::request::{Context, Verb};
use crate::apiserver::endpoints::shared::Shared;
use crate::apiserver::endpoints::webhooks::Admission;
use crate::apiserver::semantics::admission::FieldValidation;
use crate::apiserver::semantics::lifecycle::Scope;
use crate::apiserver::semantics::status::{ApiError, ApiResult};
use crate::apiserver::semantics::webhooks::Operation;
use crate::apiserver::semantics::{patch, table};
use crate::apiserver::storage::object;

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
                    Some(PatchKind::Json) => patch::json_patch(&mut scale, &document)
                        .map_err(|e| patch_error(target, &name, e))?,
                    Some(_) => patch::merge_patch(&mut scale, &document),
                }
                Ok(scale)
            };
            // Webhooks for `<resource>/scale` see the Scale, and may change it.
            let mut warnings = Vec::new();
            let mut admitted = None;
            if let Some(admission) = Admission::prepare(shared, &target.def, &target.namespace) {
                let stored = current(shared, target, &name)?;
                let objects = (Some(proposal(&stored)?), Some(view(&stored)));
                let mut attributes = admitting::attributes(
                    context,
                    target,
                    Operation::Update,
                    &name,
                    objects,
                    dry_run,
                );
                attributes.subresource_kind =
                    Some(json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}));
                admission
                    .mutate(&mut attributes, |_| Ok(()), &mut warnings)
                    .await?;
                admission.validate(&attributes, &mut warnings).await?;
                admitted = attributes.object;
            }
            let mut proposed = None;
            let updater = updater(context, target);
            write_object(
                shared,
                None,
                target,
                &name,
                (Scope::Main, Some(&updater)),
                (FieldValidation::Ignore, dry_run),
                |current| {
                    let scale = match &admitted {
                        Some(scale) => scale.clone(),
                        None => proposal(current)?,
                    };
                    let replicas = scale["spec"]["replicas"].as_i64().ok_or_else(|| {
                        ApiError::bad_request("spec.replicas of a Scale must be an integer")
                    })?;
                    let mut object = current.clone();
                    let pointer = format!(
                        "/{}",
                        paths
                            .spec_replicas
                            .trim_start_matches('.')
                            .replace('.', "/")
                    );
                    set_pointer(&mut object, &pointer, json!(replicas));
                    if let Some(rv) = scale["metadata"]["resourceVersion"].as_str() {
                        object::meta_mut(&mut object).insert("resourceVersion".into(), json!(rv));
                    }
                    proposed = Some(object.clone());
                    Ok(object)
                },
            )
            .await?;
            let object = match proposed.filter(|_| dry_run) {
                Some(object) => object,
                None => (*current(shared, target, &name)?).clone(),
            };
            Ok(Reply::json(StatusCode::OK, &view(&object)).with_warnings(warnings))
        }
        _ => Err(method_not_allowed()),
    }
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
