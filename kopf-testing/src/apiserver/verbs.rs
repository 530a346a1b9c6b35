//! The verbs on resources: get, list, create, update, patch, delete, deletecollection, and the
//! `status` and `scale` subresources. Watch lives in its own module.

use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use http::StatusCode;
use serde_json::{Value, json};

use super::admission::{self, FieldValidation};
use super::catalog::{Builtin, ResourceDef};
use super::handler::{Context, Reply};
use super::lifecycle::{self, DeleteOptions, Deletion, Scope};
use super::object::{self, ObjectKey};
use super::patch::{self, PatchError, Updater};
use super::protobuf::{self, ProtobufError};
use super::request::{Format, ObjectPath, Verb};
use super::selector::{FieldSelector, LabelSelector};
use super::server::Shared;
use super::state::{Objects, State};
use super::status::{ApiError, ApiResult, Subject};
use super::table;
use super::watch;

/// A request on a resource, resolved against the catalog.
#[derive(Debug)]
pub(crate) struct Target<'a> {
    pub(crate) def: Arc<ResourceDef>,
    pub(crate) version: &'a str,
    pub(crate) path: &'a ObjectPath,
    /// The namespace objects live in (`""` for cluster-scoped resources).
    pub(crate) namespace: String,
}

impl Target<'_> {
    fn subject<'s>(&'s self, name: &'s str) -> Subject<'s> {
        Subject {
            group: &self.def.group,
            plural: &self.def.plural,
            name,
        }
    }

    fn key(&self, name: &str) -> ObjectKey {
        (self.namespace.clone(), name.to_string())
    }

    fn name(&self) -> &str {
        self.path.name.as_deref().unwrap_or_default()
    }

    /// The object as served in the requested version.
    pub(crate) fn render(&self, object: &Value) -> Value {
        self.def.render(self.version, object)
    }

    /// The object as stored: in the storage version.
    fn for_storage(&self, mut object: Value) -> Value {
        let storage = self
            .def
            .versions
            .iter()
            .find(|v| v.storage)
            .map(|v| v.name.as_str())
            .unwrap_or(self.version);
        object["apiVersion"] = json!(self.def.api_version(storage));
        object["kind"] = json!(self.def.kind);
        object
    }
}

/// Serves a request on a resource path.
pub(crate) async fn serve(
    shared: &Arc<Shared>,
    context: &Context,
    path: &ObjectPath,
    body: Bytes,
) -> ApiResult<Reply> {
    let def = shared
        .read(|s| s.catalog.lookup(&path.group, &path.version, &path.plural))
        .ok_or_else(|| ApiError::no_route(&format!("{}/{}", path.version, path.plural)))?;
    if path.namespace.is_some() && !def.namespaced {
        return Err(ApiError::no_route(&path.plural));
    }
    let namespace = if def.namespaced {
        path.namespace.clone().unwrap_or_default()
    } else {
        String::new()
    };
    if def.namespaced && namespace.is_empty() && path.name.is_some() {
        return Err(ApiError::no_route(&path.plural));
    }
    let target = Target {
        def,
        version: &path.version,
        path,
        namespace,
    };
    let needs_namespace = def_needs_namespace(&target, context.verb);
    if needs_namespace {
        return Err(ApiError::bad_request(
            "the namespace of the object must be given in the request path",
        ));
    }
    match (path.subresource.as_deref(), context.verb) {
        (None, Verb::Get) => get(shared, context, &target),
        (None, Verb::List) => list(shared, context, &target),
        (None, Verb::Watch) => watch::watch(shared, context, &target),
        (None, Verb::Create) => create(shared, context, &target, &body),
        (None, Verb::Update) => update(shared, context, &target, &body, Scope::Main),
        (None, Verb::Patch) => patch(shared, context, &target, &body, Scope::Main),
        (None, Verb::Delete) => delete(shared, context, &target, &body),
        (None, Verb::DeleteCollection) => delete_collection(shared, context, &target, &body),
        (Some("status"), verb) if target.def.version(target.version).is_some_and(|v| v.status) => {
            match verb {
                Verb::Get => get(shared, context, &target),
                Verb::Update => update(shared, context, &target, &body, Scope::Status),
                Verb::Patch => patch(shared, context, &target, &body, Scope::Status),
                _ => Err(method_not_allowed()),
            }
        }
        (Some("finalize"), Verb::Update) if target.def.builtin == Some(Builtin::Namespace) => {
            update(shared, context, &target, &body, Scope::Status)
        }
        (Some("scale"), verb)
            if target
                .def
                .version(target.version)
                .is_some_and(|v| v.scale.is_some()) =>
        {
            scale(shared, context, &target, verb, &body)
        }
        (Some(sub), _) => Err(ApiError::no_route(sub)),
        (None, _) => Err(method_not_allowed()),
    }
}

fn def_needs_namespace(target: &Target<'_>, verb: Verb) -> bool {
    target.def.namespaced
        && target.namespace.is_empty()
        && matches!(verb, Verb::Create | Verb::DeleteCollection)
}

fn method_not_allowed() -> ApiError {
    ApiError::method_not_allowed("the server does not allow this method on the requested resource")
}

fn current(shared: &Shared, target: &Target<'_>, name: &str) -> ApiResult<Arc<Value>> {
    shared
        .read(|s| s.get(&target.def.key(), &target.key(name)).cloned())
        .ok_or_else(|| ApiError::not_found(target.subject(name)))
}

fn get(shared: &Shared, context: &Context, target: &Target<'_>) -> ApiResult<Reply> {
    let object = current(shared, target, target.name())?;
    if context.format == Format::Table {
        let rv = object::resource_version(&object).to_string();
        return Ok(table_reply(
            target,
            &[target.render(&object)],
            json!({"resourceVersion": rv}),
        ));
    }
    Ok(Reply::json(StatusCode::OK, &target.render(&object)))
}

fn table_reply(target: &Target<'_>, objects: &[Value], list_meta: Value) -> Reply {
    let table = table_for(target, objects, list_meta);
    Reply::json(StatusCode::OK, &table)
}

pub(crate) fn table_for(target: &Target<'_>, objects: &[Value], list_meta: Value) -> Value {
    let columns = target
        .def
        .version(target.version)
        .map(|v| v.printer_columns.as_slice())
        .unwrap_or_default();
    table::build_table(objects, columns, list_meta, time::OffsetDateTime::now_utc())
}

/// Label and field selectors of a list or watch.
#[derive(Debug, Default)]
pub(crate) struct Selectors {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Selectors {
    pub(crate) fn parse(context: &Context, def: &ResourceDef) -> ApiResult<Selectors> {
        let bad = |e: super::selector::SelectorError| ApiError::bad_request(e.to_string());
        let labels = LabelSelector::parse(context.query.get("labelSelector").unwrap_or_default())
            .map_err(bad)?;
        let fields = FieldSelector::parse(context.query.get("fieldSelector").unwrap_or_default())
            .map_err(bad)?;
        for field in fields.fields() {
            if !field_supported(def, field) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
        }
        Ok(Selectors { labels, fields })
    }

    pub(crate) fn matches(&self, object: &Value) -> bool {
        self.labels
            .matches(object["metadata"]["labels"].as_object())
            && self.fields.matches(object)
    }
}

fn field_supported(def: &ResourceDef, field: &str) -> bool {
    if matches!(field, "metadata.name" | "metadata.namespace") {
        return true;
    }
    match def.builtin {
        Some(Builtin::Pod) => matches!(
            field,
            "spec.nodeName"
                | "spec.restartPolicy"
                | "spec.schedulerName"
                | "spec.serviceAccountName"
                | "spec.hostNetwork"
                | "status.phase"
                | "status.podIP"
                | "status.nominatedNodeName"
        ),
        Some(Builtin::Event | Builtin::EventsV1) => {
            field.starts_with("involvedObject.")
                || field.starts_with("regarding.")
                || matches!(field, "reason" | "reportingComponent" | "source" | "type")
        }
        Some(Builtin::Secret) => field == "type",
        Some(Builtin::Namespace) => field == "status.phase",
        _ => false,
    }
}

/// A `continue` token: the snapshot's version and the last key served.
fn encode_continue(rv: u64, last: &ObjectKey) -> String {
    let token =
        json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{}/{}\u{0}", last.0, last.1)});
    base64::engine::general_purpose::URL_SAFE.encode(token.to_string())
}

fn decode_continue(token: &str) -> ApiResult<(u64, ObjectKey)> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token}"));
    let bytes = base64::engine::general_purpose::URL_SAFE
        .decode(token)
        .map_err(|_| bad())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let rv = value["rv"].as_u64().ok_or_else(bad)?;
    let start = value["start"]
        .as_str()
        .ok_or_else(bad)?
        .trim_end_matches('\u{0}');
    let (namespace, name) = start.split_once('/').ok_or_else(bad)?;
    Ok((rv, (namespace.to_string(), name.to_string())))
}

/// Which snapshot a list reads: its version and, for continued lists, where to start.
fn list_snapshot(
    state: &State,
    context: &Context,
    target: &Target<'_>,
) -> ApiResult<(u64, Objects, Option<ObjectKey>)> {
    let current = state.resource_version();
    if let Some(token) = context.query.get("continue") {
        let (rv, start) = decode_continue(token)?;
        let objects = state.objects_at(&target.def.key(), rv).ok_or_else(|| {
            ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
        })?;
        return Ok((rv, objects, Some(start)));
    }
    let requested = context.query.get("resourceVersion");
    let exact = context.query.get("resourceVersionMatch") == Some("Exact");
    match requested.map(|v| v.parse::<u64>()) {
        None | Some(Ok(0)) if !exact => Ok((current, state.objects(&target.def.key()).cloned().unwrap_or_default(), None)),
        Some(Ok(rv)) if rv > current => Err(ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "Timeout",
            format!("Too large resource version: {rv}, current: {current}"),
        )
        .with_details(json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}))),
        Some(Ok(rv)) if exact => {
            let objects = state.objects_at(&target.def.key(), rv).ok_or_else(|| {
                ApiError::expired(format!("too old resource version: {rv} ({})", state.compacted_rv() + 1))
            })?;
            Ok((rv, objects, None))
        }
        Some(Ok(_)) => Ok((current, state.objects(&target.def.key()).cloned().unwrap_or_default(), None)),
        _ => Err(ApiError::bad_request(format!(
            "resourceVersion: Invalid value: {:?}: must be a number",
            requested.unwrap_or_default()
        ))),
    }
}

fn list(shared: &Shared, context: &Context, target: &Target<'_>) -> ApiResult<Reply> {
    let selectors = Selectors::parse(context, &target.def)?;
    let limit = context
        .query
        .number("limit")
        .filter(|l| *l > 0)
        .map(|l| l as usize);
    let (rv, objects, start) = shared.read(|state| list_snapshot(state, context, target))?;
    let matching = objects
        .iter()
        .filter(|(key, _)| target.namespace.is_empty() || key.0 == target.namespace)
        .filter(|(key, _)| start.as_ref().is_none_or(|s| *key > s))
        .filter(|(_, object)| selectors.matches(object));
    let mut items = Vec::new();
    let mut last = None;
    let mut remaining = 0usize;
    for (key, object) in matching {
        if limit.is_some_and(|l| items.len() >= l) {
            remaining += 1;
            continue;
        }
        items.push(target.render(object));
        last = Some(key.clone());
    }
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if remaining > 0
        && let Some(last) = &last
    {
        meta["continue"] = json!(encode_continue(rv, last));
        meta["remainingItemCount"] = json!(remaining);
    }
    if context.format == Format::Table {
        return Ok(table_reply(target, &items, meta));
    }
    let list = json!({
        "kind": target.def.list_kind,
        "apiVersion": target.def.api_version(target.version),
        "metadata": meta,
        "items": items,
    });
    Ok(Reply::json(StatusCode::OK, &list))
}

/// The author of a write that is not an apply, for its `Update` entry in managedFields: the
/// `fieldManager` parameter or the User-Agent's product, the request's apiVersion and
/// subresource.
fn updater(context: &Context, target: &Target<'_>) -> Updater {
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

/// Parses a JSON body; a malformed one is a `400 BadRequest`.
fn parse_json(body: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("json parse error: {e}")))
}

/// Parses an object for create or update (JSON, or the protobuf kubectl sends for built-ins)
/// and checks what the path says about it.
fn parse_object(context: &Context, target: &Target<'_>, body: &[u8]) -> ApiResult<Value> {
    let media = context.content_type.as_deref().unwrap_or_default();
    let mut object = if media.starts_with(PROTOBUF) {
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
    check_identity(target, &mut object)?;
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
    FieldValidation::parse(context.query.get("fieldValidation"))
}

/// `?dryRun=All` (`kubectl diff`, `--dry-run=server`): the write is checked and answered as
/// usual, but nothing is stored.
fn dry_run(context: &Context) -> ApiResult<bool> {
    match context.query.get("dryRun") {
        None => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "dryRun: Unsupported value: \"{other}\": supported values: \"All\""
        ))),
    }
}

/// Runs a write on the state; for a dry run, on a copy of it that is then thrown away (so no
/// controller runs and no watch sees it).
fn commit<T>(shared: &Shared, dry_run: bool, f: impl FnOnce(&mut State) -> T) -> T {
    if dry_run {
        let mut copy = shared.read(State::clone);
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

fn create(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    body: &[u8],
) -> ApiResult<Reply> {
    let validation = field_validation(context)?;
    let dry_run = dry_run(context)?;
    let object = parse_object(context, target, body)?;
    let object = target.for_storage(object);
    let updater = updater(context, target);
    create_object(shared, target, object, validation, dry_run, Some(&updater))
}

/// Creates an object, after admission; `updater` records an `Update` entry in managedFields.
fn create_object(
    shared: &Shared,
    target: &Target<'_>,
    mut object: Value,
    validation: FieldValidation,
    dry_run: bool,
    updater: Option<&Updater>,
) -> ApiResult<Reply> {
    let (stored, warnings) = commit(shared, dry_run, |state| {
        if object::name(&object).is_empty() {
            let prefix = object["metadata"]["generateName"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if prefix.is_empty() {
                return Err(ApiError::invalid_field(
                    target.subject(""),
                    &target.def.kind,
                    "FieldValueRequired",
                    "metadata.name",
                    "Required value: name or generateName is required",
                ));
            }
            let name = lifecycle::generate_name(state, &target.def, &target.namespace, &prefix);
            object::meta_mut(&mut object).insert("name".into(), json!(name));
        }
        let warnings = admission::admit(&target.def, target.version, &mut object, validation)?;
        let mut stored = lifecycle::create(state, &target.def, object, updater)?;
        if dry_run {
            stored = unstored(&stored, None);
        }
        Ok((stored, warnings))
    })?;
    Ok(Reply::json(StatusCode::CREATED, &target.render(&stored)).with_warnings(warnings))
}

fn update(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    body: &[u8],
    scope: Scope,
) -> ApiResult<Reply> {
    let validation = field_validation(context)?;
    let dry_run = dry_run(context)?;
    let object = parse_object(context, target, body)?;
    let object = target.for_storage(object);
    let name = target.name().to_string();
    let updater = updater(context, target);
    write_object(
        shared,
        target,
        &name,
        (scope, Some(&updater)),
        validation,
        dry_run,
        |_| Ok(object),
    )
}

/// Replaces an object with what `change` makes of its current state, after admission, in
/// `scope`; the updater, if any, records an `Update` entry in managedFields.
fn write_object(
    shared: &Shared,
    target: &Target<'_>,
    name: &str,
    (scope, updater): (Scope, Option<&Updater>),
    validation: FieldValidation,
    dry_run: bool,
    change: impl FnOnce(&Value) -> ApiResult<Value>,
) -> ApiResult<Reply> {
    let (stored, warnings) = commit(shared, dry_run, |state| {
        let old = state
            .get(&target.def.key(), &target.key(name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(target.subject(name)))?;
        let mut new = change(&target.render(&old))?;
        check_identity(target, &mut new)?;
        let mut new = target.for_storage(new);
        let warnings = admission::admit(&target.def, target.version, &mut new, validation)?;
        let mut stored = lifecycle::update(state, &target.def, &old, new, scope, updater)?;
        if dry_run {
            stored = unstored(&stored, Some(object::resource_version(&old)));
        }
        Ok((stored, warnings))
    })?;
    Ok(Reply::json(StatusCode::OK, &target.render(&stored)).with_warnings(warnings))
}

/// The kinds of PATCH bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PatchKind {
    Json,
    Merge,
    Strategic,
    Apply,
}

fn patch_kind(content_type: Option<&str>) -> ApiResult<PatchKind> {
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
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

fn patch_error(target: &Target<'_>, name: &str, error: PatchError) -> ApiError {
    let code = StatusCode::from_u16(error.code()).unwrap_or(StatusCode::UNPROCESSABLE_ENTITY);
    let mut details = json!({"name": name, "group": target.def.group, "kind": target.def.plural});
    if let PatchError::Conflict { conflicts, .. } = &error {
        details["causes"] = conflicts
            .iter()
            .map(|c| json!({"reason": "FieldManagerConflict", "message": c.message, "field": c.field}))
            .collect();
    }
    ApiError::new(code, error.reason(), error.to_string()).with_details(details)
}

fn patch(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    body: &[u8],
    scope: Scope,
) -> ApiResult<Reply> {
    let validation = field_validation(context)?;
    let kind = patch_kind(context.content_type.as_deref())?;
    let name = target.name().to_string();
    if kind == PatchKind::Strategic && target.def.builtin.is_none() {
        return Err(ApiError::unsupported_media_type(
            "application/strategic-merge-patch+json",
        ));
    }
    if kind == PatchKind::Apply {
        return apply(shared, context, target, body, scope, validation);
    }
    let dry_run = dry_run(context)?;
    let document = parse_json(body)?;
    if kind != PatchKind::Json && !document.is_object() {
        return Err(ApiError::bad_request("the patch must be a JSON object"));
    }
    let updater = updater(context, target);
    write_object(
        shared,
        target,
        &name,
        (scope, Some(&updater)),
        validation,
        dry_run,
        |current| {
            let mut patched = current.clone();
            match kind {
                PatchKind::Json => patch::json_patch(&mut patched, &document),
                PatchKind::Merge => {
                    patch::merge_patch(&mut patched, &document);
                    Ok(())
                }
                PatchKind::Strategic => {
                    patch::strategic_merge_patch(&target.def.kind, &mut patched, &document)
                }
                PatchKind::Apply => unreachable!("apply patches are served above"),
            }
            .map_err(|e| patch_error(target, &name, e))?;
            if !patched.is_object() {
                return Err(ApiError::bad_request(
                    "the patched object must be a JSON object",
                ));
            }
            Ok(patched)
        },
    )
}

/// Server-side apply: creates the object or merges the applied configuration into it.
fn apply(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    body: &[u8],
    scope: Scope,
    validation: FieldValidation,
) -> ApiResult<Reply> {
    let name = target.name().to_string();
    let manager = context.query.get("fieldManager").ok_or_else(|| {
        ApiError::bad_request("PATCH /apply requires fieldManager: metadata.managedFields.fieldManager: Required value: is required for apply patch")
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
    let exists = shared.read(|s| s.get(&target.def.key(), &target.key(&name)).is_some());
    let now = object::now_timestamp();
    if !exists {
        let mut object =
            patch::server_side_apply(Some(&target.def.kind), None, &applied, manager, force, &now)
                .map_err(|e| patch_error(target, &name, e))?;
        check_identity(target, &mut object)?;
        let object = target.for_storage(object);
        return create_object(shared, target, object, validation, dry_run, None);
    }
    write_object(
        shared,
        target,
        &name,
        (scope, None),
        validation,
        dry_run,
        |current| {
            patch::server_side_apply(
                Some(&target.def.kind),
                Some(current),
                &applied,
                manager,
                force,
                &now,
            )
            .map_err(|e| patch_error(target, &name, e))
        },
    )
}

/// The `DeleteOptions` of a deletion, and whether it is a dry run (kubectl asks for that in
/// the body, other clients in the query).
fn delete_options(context: &Context, body: &[u8]) -> ApiResult<(DeleteOptions, bool)> {
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

fn delete(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    body: &[u8],
) -> ApiResult<Reply> {
    let (options, dry_run) = delete_options(context, body)?;
    let key = target.key(target.name());
    let deletion = commit(shared, dry_run, |state| {
        let stored_rv = state
            .get(&target.def.key(), &key)
            .map(|o| object::resource_version(o).to_string());
        let (Deletion::Gone(object) | Deletion::Pending(object)) =
            lifecycle::delete(state, &target.def, &key, &options)?;
        Ok::<_, ApiError>(if dry_run {
            unstored(&object, stored_rv.as_deref())
        } else {
            object
        })
    })?;
    Ok(Reply::json(StatusCode::OK, &target.render(&deletion)))
}

fn delete_collection(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    body: &[u8],
) -> ApiResult<Reply> {
    let (options, dry_run) = delete_options(context, body)?;
    let selectors = Selectors::parse(context, &target.def)?;
    let deleted = commit(shared, dry_run, |state| {
        let keys: Vec<ObjectKey> = state
            .objects(&target.def.key())
            .into_iter()
            .flat_map(|o| o.iter())
            .filter(|(key, object)| {
                (target.namespace.is_empty() || key.0 == target.namespace)
                    && selectors.matches(object)
            })
            .map(|(key, _)| key.clone())
            .collect();
        let mut deleted = Vec::new();
        for key in keys {
            let stored_rv = state
                .get(&target.def.key(), &key)
                .map(|o| object::resource_version(o).to_string());
            match lifecycle::delete(state, &target.def, &key, &options) {
                Ok(Deletion::Gone(object) | Deletion::Pending(object)) if dry_run => {
                    deleted.push(target.render(&unstored(&object, stored_rv.as_deref())))
                }
                Ok(Deletion::Gone(object) | Deletion::Pending(object)) => {
                    deleted.push(target.render(&object))
                }
                Err(error) => tracing::debug!(?error, "deletecollection skipped an object"),
            }
        }
        deleted
    });
    let rv = shared.read(State::resource_version);
    let list = json!({
        "kind": target.def.list_kind,
        "apiVersion": target.def.api_version(target.version),
        "metadata": {"resourceVersion": rv.to_string()},
        "items": deleted,
    });
    Ok(Reply::json(StatusCode::OK, &list))
}

/// The `scale` subresource: an `autoscaling/v1` `Scale` view of the replicas.
fn scale(
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
            let mut proposed = None;
            let updater = updater(context, target);
            let reply = write_object(
                shared,
                target,
                &name,
                (Scope::Main, Some(&updater)),
                FieldValidation::Ignore,
                dry_run,
                |current| {
                    let mut scale = view(current);
                    match kind {
                        None => scale = document.clone(),
                        Some(PatchKind::Json) => patch::json_patch(&mut scale, &document)
                            .map_err(|e| patch_error(target, &name, e))?,
                        Some(_) => patch::merge_patch(&mut scale, &document),
                    }
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
            )?;
            let _ = reply;
            let object = match proposed.filter(|_| dry_run) {
                Some(object) => object,
                None => (*current(shared, target, &name)?).clone(),
            };
            Ok(Reply::json(StatusCode::OK, &view(&object)))
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
