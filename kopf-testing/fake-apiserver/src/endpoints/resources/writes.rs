//! Writing objects: create, update, patch (JSON, merge, strategic, server-side apply), delete
//! and deletecollection, with dry runs, admission and managed fields.

use std::sync::Arc;

use http::StatusCode;
use serde_json::{Value, json};

use super::admitting;
use super::selectors::Selectors;
use super::target::{Target, current};
use crate::endpoints::reply::Reply;
use crate::endpoints::request::{Context, Format, ObjectPath, Verb};
use crate::endpoints::shared::Shared;
use crate::endpoints::webhooks::Admission;
use crate::semantics::admission::{self, FieldValidation};
use crate::semantics::lifecycle::{self, DeleteOptions, Deletion, Scope};
use crate::semantics::limits;
use crate::semantics::patch::{self, PatchError, Updater};
use crate::semantics::protobuf::{self, ProtobufError};
use crate::semantics::status::{self, ApiError, ApiResult};
use crate::semantics::webhooks::{self, Operation};
use crate::storage::object::{self, ObjectKey};
use crate::storage::state::State;

/// The author of a write that is not an apply, for its `Update` entry in managedFields: the
/// `fieldManager` parameter or the User-Agent's product, the request's apiVersion and
/// subresource.
pub(super) fn updater(context: &Context, target: &Target<'_>) -> Updater {
    Updater {
        manager: patch::manager_or_user_agent(
            context.query.get("fieldManager"),
            context.user_agent.as_deref(),
        ),
        api_version: target.def.api_version(target.version),
        subresource: target.path.subresource.clone().unwrap_or_default(),
    }
}

/// The media type of Kubernetes' protobuf encoding.
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The media types a body of an object may be in.
const OBJECT_TYPES: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// The patch types custom resources take (no strategic merge).
const PATCH_TYPES_OF_CUSTOM_RESOURCES: &str =
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

/// Parses a JSON body; a malformed one is a `400 BadRequest`.
pub(super) fn parse_json(body: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("json parse error: {e}")))
}

/// Parses an object for create or update (JSON, or the protobuf kubectl sends for built-ins)
/// and checks what the path says about it.
pub(super) fn parse_body(context: &Context, target: &Target<'_>, body: &[u8]) -> ApiResult<Value> {
    let mut object = parse_object(context, body)?;
    check_identity(target, &mut object)?;
    Ok(object)
}

/// Parses a request object in the body's media type: JSON, or the protobuf kubectl sends for
/// built-ins; it must be a JSON object.
pub(super) fn parse_object(context: &Context, body: &[u8]) -> ApiResult<Value> {
    let media = context.content_type.as_deref().unwrap_or_default();
    let essence = media.split(';').next().unwrap_or_default().trim();
    // A patch's media type is its patch type, checked by the patch handler.
    if context.verb != Verb::Patch
        && !essence.is_empty()
        && !matches!(essence, "application/json" | "application/yaml" | "*/*")
        && !essence.starts_with(PROTOBUF)
    {
        return Err(ApiError::unsupported_media_type(OBJECT_TYPES));
    }
    let object = if media.starts_with(PROTOBUF) {
        protobuf::decode(body).map_err(|e| match e {
            ProtobufError::UnsupportedKind { .. } => ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "UnsupportedMediaType",
                e.to_string(),
            ),
            _ => ApiError::bad_request(format!("protobuf decoding error: {e}")),
        })?
    } else {
        parse_json(body)?
    };
    if !object.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    }
    Ok(object)
}

/// The body's apiVersion, kind, namespace and name must agree with the path.
fn check_identity(target: &Target<'_>, object: &mut Value) -> ApiResult<()> {
    let expected_version = target.def.api_version(target.version);
    if let Some(given) = object["apiVersion"].as_str()
        && given != expected_version
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({given}) does not match the expected API version ({expected_version})"
        )));
    }
    if let Some(given) = object["kind"].as_str()
        && given != target.def.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({given}) does not match the expected kind ({})",
            target.def.kind
        )));
    }
    let meta = object::meta_mut(object);
    if target.def.namespaced {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != target.namespace => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), json!(target.namespace));
            }
        }
    } else {
        meta.remove("namespace");
    }
    if let Some(name) = &target.path.name {
        match meta.get("name").and_then(Value::as_str) {
            Some(given) if given != name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({given}) does not match the name on the URL ({name})"
                )));
            }
            _ => {
                meta.insert("name".into(), json!(name));
            }
        }
    }
    Ok(())
}

fn field_validation(context: &Context) -> ApiResult<FieldValidation> {
    FieldValidation::parse(context.query.get("fieldValidation"), options_kind(context))
}

/// The kind of the options a write takes, as kube-apiserver names them in its errors.
fn options_kind(context: &Context) -> &'static str {
    match context.verb {
        Verb::Create => "CreateOptions",
        Verb::Update => "UpdateOptions",
        Verb::Patch => "PatchOptions",
        _ => "DeleteOptions",
    }
}

/// `?dryRun=All` (`kubectl diff`, `--dry-run=server`): the write is checked and answered as
/// usual, but nothing is stored.
pub(super) fn dry_run(context: &Context) -> ApiResult<bool> {
    match context.query.get("dryRun") {
        None => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::invalid_options(
            options_kind(context),
            "FieldValueNotSupported",
            "dryRun",
            &format!("Unsupported value: [\"{other}\"]: supported values: \"All\""),
        )),
    }
}

/// Runs a write on the state; for a dry run, on a copy of it that is then thrown away (so no
/// controller runs and no watch sees it).
pub(super) fn commit<T>(shared: &Shared, dry_run: bool, f: impl FnOnce(&mut State) -> T) -> T {
    if dry_run {
        let mut copy = shared.read(State::scratch);
        f(&mut copy)
    } else {
        shared.write(f)
    }
}

/// A dry run stores nothing, so its answer keeps the stored object's resourceVersion (none
/// for a creation).
fn unstored(object: &Value, resource_version: Option<&str>) -> Arc<Value> {
    let mut object = object.clone();
    let meta = object::meta_mut(&mut object);
    match resource_version {
        Some(rv) => meta.insert("resourceVersion".into(), json!(rv)),
        None => meta.remove("resourceVersion"),
    };
    Arc::new(object)
}

pub(super) async fn create(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    body: &[u8],
) -> ApiResult<Reply> {
    let validation = field_validation(context)?;
    let dry_run = dry_run(context)?;
    let object = parse_body(context, target, body)?;
    let object = target.for_storage(object);
    let updater = updater(context, target);
    let write = (validation, dry_run, Some(&updater));
    create_object(shared, Some(context), target, object, write).await
}

/// Creates an object, after admission (with the webhooks of `context`'s request, if any);
/// the updater, if any, records an `Update` entry in managedFields.
async fn create_object(
    shared: &Shared,
    context: Option<&Context>,
    target: &Target<'_>,
    mut object: Value,
    (validation, dry_run, updater): (FieldValidation, bool, Option<&Updater>),
) -> ApiResult<Reply> {
    let def = &target.def;
    let admission = context
        .and_then(|context| Some((context, Admission::prepare(shared, def, &target.namespace)?)));
    let unknown = admission::decode(def, target.version, &mut object)?;
    let mut warnings = Vec::new();
    if let Some((context, admission)) = &admission {
        let name = object::name(&object).to_string();
        let objects = (Some(object), None);
        let mut attributes =
            admitting::attributes(context, target, Operation::Create, &name, objects, dry_run);
        let redecode = |o: &mut Value| admission::decode(def, target.version, o).map(drop);
        admission
            .mutate(&mut attributes, redecode, &mut warnings)
            .await?;
        object = attributes.object.take().unwrap_or_default();
    }
    lifecycle::before_create(def, &mut object);
    if object::name(&object).is_empty() {
        let prefix = object["metadata"]["generateName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if prefix.is_empty() {
            return Err(ApiError::invalid_field(
                target.subject(""),
                &def.kind,
                "FieldValueRequired",
                "metadata.name",
                "Required value: name or generateName is required",
            ));
        }
        let name =
            shared.read(|state| lifecycle::generate_name(state, def, &target.namespace, &prefix));
        object::meta_mut(&mut object).insert("name".into(), json!(name));
    }
    let admitted = admission::validate(def, target.version, &mut object, None, validation, unknown)
        .map_err(|e| with_warnings(e, &warnings))?;
    webhooks::record_warnings(&mut warnings, admitted);
    if let Some((context, admission)) = &admission {
        let name = object::name(&object).to_string();
        let objects = (Some(object.clone()), None);
        let attributes =
            admitting::attributes(context, target, Operation::Create, &name, objects, dry_run);
        admission.validate(&attributes, &mut warnings).await?;
    }
    let stored = commit(shared, dry_run, |state| {
        let stored = lifecycle::create(state, def, object, updater)?;
        Ok::<_, ApiError>(if dry_run {
            unstored(&stored, None)
        } else {
            stored
        })
    })
    .map_err(|e| with_warnings(e, &warnings))?;
    Ok(Reply::json(StatusCode::CREATED, &target.answer(&stored)).with_warnings(warnings))
}

/// `error` with the warnings of the write so far, which are answered even when it fails.
fn with_warnings(mut error: ApiError, warnings: &[String]) -> ApiError {
    let mut all = warnings.to_vec();
    webhooks::record_warnings(&mut all, std::mem::take(&mut error.warnings));
    error.warnings = all;
    error
}

pub(super) async fn update(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    body: &[u8],
    scope: Scope,
) -> ApiResult<Reply> {
    let validation = field_validation(context)?;
    let dry_run = dry_run(context)?;
    let object = parse_body(context, target, body)?;
    let object = target.for_storage(object);
    let name = target.name().to_string();
    let updater = updater(context, target);
    write_object(
        shared,
        Some(context),
        target,
        &name,
        (scope, Some(&updater)),
        (validation, dry_run),
        |_| Ok(object.clone()),
    )
    .await
}

/// Replaces an object with what `change` makes of its current state, after admission (with
/// the webhooks of `context`'s request, if any), in `scope`; the updater, if any, records an
/// `Update` entry in managedFields.
///
/// As kube-apiserver's `GuaranteedUpdate`, the state's lock is not held while the object is
/// admitted: the write commits only if the object is still the one `change` saw, and starts
/// again from the new one otherwise (so `change` may run more than once).
pub(super) async fn write_object(
    shared: &Shared,
    context: Option<&Context>,
    target: &Target<'_>,
    name: &str,
    (scope, updater): (Scope, Option<&Updater>),
    (validation, dry_run): (FieldValidation, bool),
    mut change: impl FnMut(&Value) -> ApiResult<Value>,
) -> ApiResult<Reply> {
    let def = &target.def;
    let admission = context
        .and_then(|context| Some((context, Admission::prepare(shared, def, &target.namespace)?)));
    for _ in 0..admitting::ATTEMPTS {
        let old = current(shared, target, name)?;
        let rendered = target.render(&old);
        let mut new = change(&rendered)?;
        check_identity(target, &mut new)?;
        let mut new = target.for_storage(new);
        let unknown = admission::decode(def, target.version, &mut new)?;
        let mut warnings = Vec::new();
        if let Some((context, admission)) = &admission {
            let objects = (Some(new), Some((*old).clone()));
            let mut attributes =
                admitting::attributes(context, target, Operation::Update, name, objects, dry_run);
            let redecode = |o: &mut Value| admission::decode(def, target.version, o).map(drop);
            admission
                .mutate(&mut attributes, redecode, &mut warnings)
                .await?;
            new = attributes.object.take().unwrap_or_default();
        }
        // What the write may change of it, as validation and validating webhooks see it.
        let mut new = lifecycle::scoped(def, &old, new, scope);
        let admitted = admission::validate(
            def,
            target.version,
            &mut new,
            Some(&rendered),
            validation,
            unknown,
        )
        .map_err(|e| with_warnings(e, &warnings))?;
        webhooks::record_warnings(&mut warnings, admitted);
        if let Some((context, admission)) = &admission {
            let objects = (Some(new.clone()), Some((*old).clone()));
            let attributes =
                admitting::attributes(context, target, Operation::Update, name, objects, dry_run);
            admission.validate(&attributes, &mut warnings).await?;
        }
        let stored = commit(shared, dry_run, |state| {
            if !still(state, target, name, &old) {
                return Ok(None);
            }
            let stored = lifecycle::update(state, def, &old, new, scope, updater)?;
            Ok::<_, ApiError>(Some(if dry_run {
                unstored(&stored, Some(object::resource_version(&old)))
            } else {
                stored
            }))
        })
        .map_err(|e| with_warnings(e, &warnings))?;
        if let Some(stored) = stored {
            return Ok(Reply::json(StatusCode::OK, &target.answer(&stored)).with_warnings(warnings));
        }
    }
    Err(ApiError::stale(target.subject(name)))
}

/// Whether `object` is still the stored version of the object `name`.
fn still(state: &State, target: &Target<'_>, name: &str, object: &Value) -> bool {
    state
        .get(&target.def.key(), &target.key(name))
        .is_some_and(|stored| object::resource_version(stored) == object::resource_version(object))
}

/// The kinds of PATCH bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PatchKind {
    Json,
    Merge,
    Strategic,
    Apply,
}

pub(super) fn patch_kind(content_type: Option<&str>) -> ApiResult<PatchKind> {
    let media = content_type
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim();
    match media {
        "application/json-patch+json" => Ok(PatchKind::Json),
        "application/merge-patch+json" => Ok(PatchKind::Merge),
        "application/strategic-merge-patch+json" => Ok(PatchKind::Strategic),
        "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchKind::Apply),
        // Not a patch type at all: the router's answer, which names none.
        _ => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            "415: Unsupported Media Type",
        )
        .with_details(json!({}))),
    }
}

/// The answer to a patch that could not be applied, as kube-apiserver's patch handler gives
/// it: a JSON patch that fails on the object is a bare 422 (its reason is not told), an apply
/// conflict names the fields, a malformed patch is a 400 with no details.
pub(super) fn patch_error(error: PatchError) -> ApiError {
    let code = StatusCode::from_u16(error.code()).unwrap_or(StatusCode::UNPROCESSABLE_ENTITY);
    match &error {
        PatchError::Invalid(_) => ApiError::new(
            code,
            "Invalid",
            "the server rejected our request due to an error in our request",
        )
        .with_details(json!({})),
        PatchError::Conflict { conflicts, .. } => {
            let causes: Vec<Value> = conflicts
                .iter()
                .map(|c| json!({"reason": "FieldManagerConflict", "message": c.message, "field": c.field}))
                .collect();
            ApiError::new(code, error.reason(), error.to_string())
                .with_details(json!({"causes": causes}))
        }
        _ => ApiError::new(code, error.reason(), error.to_string()),
    }
}

pub(super) async fn patch(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    body: &[u8],
    scope: Scope,
) -> ApiResult<Reply> {
    let validation = field_validation(context)?;
    let kind = patch_kind(context.content_type.as_deref())?;
    let name = target.name().to_string();
    if kind == PatchKind::Strategic && target.def.is_custom() {
        return Err(ApiError::unsupported_media_type(
            PATCH_TYPES_OF_CUSTOM_RESOURCES,
        ));
    }
    if kind == PatchKind::Apply {
        return apply(shared, context, target, body, scope, validation).await;
    }
    let dry_run = dry_run(context)?;
    let document = parse_json(body)?;
    if kind != PatchKind::Json && !document.is_object() {
        return Err(ApiError::bad_request("the patch must be a JSON object"));
    }
    let updater = updater(context, target);
    write_object(
        shared,
        Some(context),
        target,
        &name,
        (scope, Some(&updater)),
        (validation, dry_run),
        |current| {
            let patched = patched(target, kind, current, &document)?;
            if !patched.is_object() {
                return Err(ApiError::bad_request(
                    "the patched object must be a JSON object",
                ));
            }
            Ok(patched)
        },
    )
    .await
}

/// `current` with a JSON, merge or strategic merge patch applied (server-side apply has its
/// own path).
pub(super) fn patched(
    target: &Target<'_>,
    kind: PatchKind,
    current: &Value,
    document: &Value,
) -> ApiResult<Value> {
    let mut patched = current.clone();
    match kind {
        PatchKind::Json => patch::json_patch(&mut patched, document),
        PatchKind::Merge => {
            patch::merge_patch(&mut patched, document);
            Ok(())
        }
        PatchKind::Strategic => {
            patch::strategic_merge_patch(&target.def.kind, &mut patched, document)
        }
        PatchKind::Apply => {
            return Err(ApiError::unsupported_media_type(
                PATCH_TYPES_OF_CUSTOM_RESOURCES,
            ));
        }
    }
    .map_err(patch_error)?;
    Ok(patched)
}

/// Server-side apply: creates the object or merges the applied configuration into it.
async fn apply(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    body: &[u8],
    scope: Scope,
    validation: FieldValidation,
) -> ApiResult<Reply> {
    let name = target.name().to_string();
    let manager = context.query.get("fieldManager").ok_or_else(|| {
        ApiError::invalid_options(
            "PatchOptions",
            "FieldValueRequired",
            "fieldManager",
            "Required value: is required for apply patch",
        )
    })?;
    let force = context.query.flag("force");
    let dry_run = dry_run(context)?;
    let applied: Value = serde_norway::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    if !applied.is_object() {
        return Err(ApiError::bad_request(
            "the applied configuration must be an object",
        ));
    }
    // The YAML parser nests one level deeper than the JSON one; no object may.
    if limits::depth(&applied) > limits::MAX_OBJECT_DEPTH {
        return Err(ApiError::bad_request(
            "error decoding YAML: recursion limit exceeded",
        ));
    }
    // As kube-apiserver decodes an applied configuration: its type first, then its name.
    let (api_version, kind) = (
        applied["apiVersion"].as_str().unwrap_or_default(),
        applied["kind"].as_str().unwrap_or_default(),
    );
    if api_version.is_empty() || kind.is_empty() {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        return Err(ApiError::bad_request(format!(
            "invalid object type: {group}/{version}, Kind={kind}"
        )));
    }
    if let Some(given) = applied["metadata"]["name"].as_str()
        && given != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({given}) does not match the name on the URL ({name})"
        )));
    }
    let exists = shared.read(|s| s.get(&target.def.key(), &target.key(&name)).is_some());
    let now = object::now_timestamp();
    if !exists {
        let mut object =
            patch::server_side_apply(Some(&target.def.kind), None, &applied, manager, force, &now)
                .map_err(patch_error)?;
        check_identity(target, &mut object)?;
        let object = target.for_storage(object);
        let write = (validation, dry_run, None);
        return create_object(shared, Some(context), target, object, write).await;
    }
    write_object(
        shared,
        Some(context),
        target,
        &name,
        (scope, None),
        (validation, dry_run),
        |current| {
            patch::server_side_apply(
                Some(&target.def.kind),
                Some(current),
                &applied,
                manager,
                force,
                &now,
            )
            .map_err(patch_error)
        },
    )
    .await
}

/// The `DeleteOptions` of a deletion, and whether it is a dry run (kubectl asks for that in
/// the body, other clients in the query).
pub(super) fn delete_options(context: &Context, body: &[u8]) -> ApiResult<(DeleteOptions, bool)> {
    let options = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        parse_json(body)?
    };
    let mut dry_run = dry_run(context)?;
    for value in options["dryRun"].as_array().into_iter().flatten() {
        match value.as_str() {
            Some("All") => dry_run = true,
            _ => {
                return Err(ApiError::bad_request(format!(
                    "dryRun: Unsupported value: {value}: supported values: \"All\""
                )));
            }
        }
    }
    let options = DeleteOptions::parse(&options, context.query.get("propagationPolicy"))?;
    Ok((options, dry_run))
}

pub(super) async fn delete(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    body: &[u8],
) -> ApiResult<Reply> {
    let (options, dry_run) = delete_options(context, body)?;
    let admission = Admission::prepare(shared, &target.def, &target.namespace);
    let (deleted, removed) = delete_object(
        shared,
        (context, admission.as_ref()),
        target,
        &target.key(target.name()),
        (&options, dry_run),
    )
    .await?;
    let answer = if removed && !lifecycle::returns_deleted_object(&target.def) {
        status::deleted(target.subject(target.name()), object::uid(&deleted))
    } else {
        target.answer(&deleted)
    };
    Ok(Reply::json(StatusCode::OK, &answer))
}

/// Deletes one object (removes it, or marks it when finalizers hold it), after the webhooks
/// of `admission`, if any, admitted its deletion; answers its last state, and whether it was
/// removed (or, for a dry run, would have been).
async fn delete_object(
    shared: &Shared,
    (context, admission): (&Context, Option<&Admission>),
    target: &Target<'_>,
    key: &ObjectKey,
    (options, dry_run): (&DeleteOptions, bool),
) -> ApiResult<(Arc<Value>, bool)> {
    for _ in 0..admitting::ATTEMPTS {
        let old = current(shared, target, &key.1)?;
        if let Some(admission) = admission {
            let objects = (None, Some((*old).clone()));
            let mut attributes =
                admitting::attributes(context, target, Operation::Delete, &key.1, objects, dry_run);
            attributes.options = admitting::delete_options(options, dry_run);
            let mut warnings = Vec::new();
            let redecode = |_: &mut Value| Ok(());
            admission
                .mutate(&mut attributes, redecode, &mut warnings)
                .await?;
            admission.validate(&attributes, &mut warnings).await?;
        }
        let deletion = commit(shared, dry_run, |state| {
            if admission.is_some() && !still(state, target, &key.1, &old) {
                return Ok(None);
            }
            let stored_rv = state
                .get(&target.def.key(), key)
                .map(|o| object::resource_version(o).to_string());
            let (object, removed) = match lifecycle::delete(state, &target.def, key, options)? {
                Deletion::Gone(object) => (object, true),
                Deletion::Pending(object) => (object, false),
            };
            let object = if dry_run {
                unstored(&object, stored_rv.as_deref())
            } else {
                object
            };
            Ok::<_, ApiError>(Some((object, removed)))
        })?;
        if let Some(deletion) = deletion {
            return Ok(deletion);
        }
    }
    Err(ApiError::stale(target.subject(&key.1)))
}

/// The annotation a competing writer (an injected conflict) sets.
const COMPETING_WRITER: &str = "fake.kopf.dev/competing-writer";

/// A write by someone else, for an injected conflict: the annotation [`COMPETING_WRITER`] is
/// set to the version of this write, so the object's resourceVersion moves on.
pub(super) fn competing_write(shared: &Shared, target: &Target<'_>, name: &str) -> ApiResult<()> {
    shared.write(|state| {
        let old = state
            .get(&target.def.key(), &target.key(name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(target.subject(name)))?;
        let mut new = (*old).clone();
        let version = (state.resource_version() + 1).to_string();
        let annotations = object::meta_mut(&mut new)
            .entry("annotations")
            .or_insert_with(|| json!({}));
        if !annotations.is_object() {
            *annotations = json!({});
        }
        annotations[COMPETING_WRITER] = json!(version);
        let updater = Updater {
            manager: "fake-competing-writer".into(),
            api_version: old["apiVersion"].as_str().unwrap_or_default().to_string(),
            subresource: String::new(),
        };
        lifecycle::update(state, &target.def, &old, new, Scope::Main, Some(&updater))?;
        Ok(())
    })
}

pub(super) async fn delete_collection(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    body: &[u8],
) -> ApiResult<Reply> {
    let (options, dry_run) = delete_options(context, body)?;
    let selectors = Selectors::parse(context, &target.def, shared.sharded_watches)?;
    let keys: Vec<ObjectKey> = shared.read(|state| {
        state
            .objects(&target.def.key())
            .into_iter()
            .flat_map(|o| o.iter())
            .filter(|(key, object)| {
                (target.namespace.is_empty() || key.0 == target.namespace)
                    && selectors.matches(object)
            })
            .map(|(key, _)| key.clone())
            .collect()
    });
    // Each item is deleted (and admitted) on its own, as kube-apiserver does; the first
    // refusal by a webhook fails the request, and what was deleted before it stays deleted.
    let admission = Admission::prepare(shared, &target.def, &target.namespace);
    let mut deleted = Vec::new();
    for key in keys {
        let admitted = (context, admission.as_ref());
        match delete_object(shared, admitted, target, &key, (&options, dry_run)).await {
            Ok((object, _)) => deleted.push(target.answer(&object)),
            Err(error) if admission.is_some() && error.code != StatusCode::NOT_FOUND => {
                return Err(error);
            }
            Err(error) => tracing::debug!(?error, "deletecollection skipped an object"),
        }
    }
    let rv = shared.read(State::resource_version);
    let list = target.list_of(deleted, json!({"resourceVersion": rv.to_string()}));
    Ok(Reply::json(StatusCode::OK, &list))
}

/// Re-creates an object under its name with a new uid (`FakeApiServer::recreate`): the stored
/// one is removed for good, whatever its finalizers, and `object` (whose apiVersion and kind
/// name the resource) is created in its place after admission. Both happen in one write, so
/// watchers see DELETED then ADDED and nothing in between; when either fails, nothing changes.
///
/// What the server sets on an object (uid, resourceVersion, creationTimestamp, generation,
/// managedFields, deletion marks) is dropped from `object`, so a served object can be given.
pub(crate) fn recreate(shared: &Shared, mut object: Value) -> ApiResult<Value> {
    let api_version = object["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let (group, version) = api_version
        .rsplit_once('/')
        .unwrap_or(("", api_version.as_str()));
    let def = shared
        .read(|s| {
            s.catalog
                .iter()
                .find(|d| d.group == group && d.kind == kind && d.version(version).is_some())
                .cloned()
        })
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "cannot re-create the object: no resource of kind {kind:?} is served in {api_version:?} (apiVersion and kind are required)"
            ))
        })?;
    let name = object::name(&object).to_string();
    if name.is_empty() {
        return Err(ApiError::bad_request(
            "cannot re-create the object: metadata.name is required",
        ));
    }
    let namespace = if def.namespaced {
        let namespace = object::namespace(&object).to_string();
        if namespace.is_empty() {
            return Err(ApiError::bad_request(format!(
                "cannot re-create {} {name:?}: metadata.namespace is required for a namespaced resource",
                def.kind
            )));
        }
        namespace
    } else {
        String::new()
    };
    let path = ObjectPath {
        group: group.to_string(),
        version: version.to_string(),
        namespace: def.namespaced.then(|| namespace.clone()),
        plural: def.plural.clone(),
        name: Some(name.clone()),
        subresource: None,
    };
    let target = Target {
        def,
        version,
        path: &path,
        namespace,
        format: Format::Json,
    };
    let meta = object::meta_mut(&mut object);
    for field in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        meta.remove(field);
    }
    check_identity(&target, &mut object)?;
    let mut object = target.for_storage(object);
    admission::admit(
        &target.def,
        target.version,
        &mut object,
        None,
        FieldValidation::Strict,
    )?;
    let updater = Updater {
        manager: "kopf-testing".into(),
        api_version: target.def.api_version(target.version),
        subresource: String::new(),
    };
    let stored = shared.write(|state| {
        // On a copy first, so that a failed creation does not leave the object removed.
        let mut trial = state.clone();
        trial
            .remove(&target.def, &target.key(&name))
            .ok_or_else(|| ApiError::not_found(target.subject(&name)))?;
        let stored = lifecycle::create(&mut trial, &target.def, object, Some(&updater))?;
        *state = trial;
        Ok::<_, ApiError>(stored)
    })?;
    Ok(target.render(&stored))
}
