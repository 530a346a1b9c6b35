//! What a write tells admission webhooks about itself: the `Attributes` of a request on a
//! resource (operation, resource and subresource, object and old object, requester, dry run,
//! options), as kube-apiserver's handlers record them.

use serde_json::{Map, Value, json};

use super::target::Target;
use crate::endpoints::request::Context;
use crate::endpoints::shared::Shared;
use crate::endpoints::webhooks::Admission;
use crate::semantics::lifecycle::{DeleteOptions, Propagation};
use crate::semantics::status::ApiResult;
use crate::semantics::webhooks::{Attributes, Operation};

/// How often a write is tried again when the object changed while its webhooks were called
/// (as kube-apiserver's `GuaranteedUpdate` does), before it gives up with a conflict.
pub(super) const ATTEMPTS: usize = 10;

/// The attributes of `context`'s request on the object `name` of `target`.
pub(super) fn attributes(
    context: &Context,
    target: &Target<'_>,
    operation: Operation,
    name: &str,
    (object, old_object): (Option<Value>, Option<Value>),
    dry_run: bool,
) -> Attributes {
    Attributes {
        operation,
        def: target.def.clone(),
        version: target.version.to_string(),
        subresource: target.path.subresource.clone().unwrap_or_default(),
        subresource_kind: None,
        namespace: target.namespace.clone(),
        name: name.to_string(),
        object,
        old_object,
        user: context.requester.clone(),
        dry_run,
        options: write_options(context, operation, dry_run),
    }
}

/// The kinds of the objects that subresources take in place of their resource's: the
/// `{group, version, kind}` webhooks are told.
pub(super) const SCALE: (&str, &str, &str) = ("autoscaling", "v1", "Scale");
pub(super) const BINDING: (&str, &str, &str) = ("", "v1", "Binding");
pub(super) const EVICTION: (&str, &str, &str) = ("policy", "v1", "Eviction");

/// Admits the object of `context`'s request on a subresource whose objects are of another kind
/// (a [`SCALE`], a [`BINDING`], an [`EVICTION`]) than its resource's, as kube-apiserver does:
/// the mutating webhooks, then `check` (the subresource's own validation) on what they made
/// of it, then the validating webhooks; all are told whether it is a `dry_run`. Answers the
/// object as admitted; warnings go to `warnings`.
pub(super) async fn admit_other_kind(
    shared: &Shared,
    request: (&Context, &Target<'_>, Operation, &str),
    dry_run: bool,
    (object, old_object): (Value, Option<Value>),
    (group, version, kind): (&str, &str, &str),
    check: impl FnOnce(&Value) -> ApiResult<()>,
    warnings: &mut Vec<String>,
) -> ApiResult<Value> {
    let (context, target, operation, name) = request;
    let Some(admission) = Admission::prepare(shared, &target.def, &target.namespace) else {
        check(&object)?;
        return Ok(object);
    };
    let objects = (Some(object), old_object);
    let mut attributes = attributes(context, target, operation, name, objects, dry_run);
    attributes.subresource_kind = Some(json!({"group": group, "version": version, "kind": kind}));
    admission
        .mutate(&mut attributes, |_| Ok(()), warnings)
        .await?;
    check(attributes.object.as_ref().unwrap_or(&Value::Null))?;
    admission.validate(&attributes, warnings).await?;
    Ok(attributes.object.unwrap_or_default())
}

/// The Create- or UpdateOptions of a write (a PATCH is admitted with UpdateOptions, or
/// CreateOptions when it creates); DeleteOptions are [`delete_options`].
fn write_options(context: &Context, operation: Operation, dry_run: bool) -> Value {
    let kind = match operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
    };
    let mut options = Map::new();
    options.insert("kind".into(), json!(kind));
    options.insert("apiVersion".into(), json!("meta.k8s.io/v1"));
    if dry_run {
        options.insert("dryRun".into(), json!(["All"]));
    }
    if operation != Operation::Delete {
        if let Some(manager) = context.query.get("fieldManager") {
            options.insert("fieldManager".into(), json!(manager));
        }
        if let Some(validation) = context.query.get("fieldValidation") {
            options.insert("fieldValidation".into(), json!(validation));
        }
    }
    Value::Object(options)
}

/// The DeleteOptions of a deletion as webhooks see them.
pub(super) fn delete_options(options: &DeleteOptions, dry_run: bool) -> Value {
    let mut value = json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"});
    if dry_run {
        value["dryRun"] = json!(["All"]);
    }
    if let Some(policy) = options.propagation {
        value["propagationPolicy"] = json!(match policy {
            Propagation::Foreground => "Foreground",
            Propagation::Background => "Background",
            Propagation::Orphan => "Orphan",
        });
    }
    let mut preconditions = Map::new();
    if let Some(uid) = &options.precondition_uid {
        preconditions.insert("uid".into(), json!(uid));
    }
    if let Some(rv) = &options.precondition_rv {
        preconditions.insert("resourceVersion".into(), json!(rv));
    }
    if !preconditions.is_empty() {
        value["preconditions"] = Value::Object(preconditions);
    }
    value
}
