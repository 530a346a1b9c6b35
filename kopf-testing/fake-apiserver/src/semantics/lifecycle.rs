//! Objects' lives: creation, updates with `generation` and finalizer rules, deletion with
//! finalizers and propagation policies, and the controllers a real cluster runs behind the API
//! (garbage collection, namespace termination, CRD establishment and cleanup).
//!
//! The controllers run synchronously after every write (`settle`), so a client sees their
//! effects as ordinary watch events right after its own, and tests need no waiting for them.

use std::sync::Arc;

use rand::Rng as _;
use serde_json::{Value, json};

use super::limits;
use super::patch::{self, Updater};
use super::schema;
use super::status::{ApiError, ApiResult, Subject};
use super::{allocation, defaults, go_format};
use crate::storage::catalog::{Builtin, ResourceDef};
use crate::storage::object::{self, ObjectKey};
use crate::storage::state::{State, key_of};

pub(super) const FOREGROUND: &str = "foregroundDeletion";
pub(super) const ORPHAN: &str = "orphan";
const CRD_CLEANUP: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The namespaces that may not be deleted (kube-apiserver's NamespaceLifecycle plugin).
const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// `propagationPolicy` of a deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Propagation {
    Background,
    Foreground,
    Orphan,
}

/// What `DeleteOptions` asks for.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeleteOptions {
    pub(crate) propagation: Option<Propagation>,
    pub(crate) precondition_uid: Option<String>,
    pub(crate) precondition_rv: Option<String>,
}

impl DeleteOptions {
    /// From a `DeleteOptions` body and the query (`propagationPolicy`, `orphanDependents`).
    pub(crate) fn parse(body: &Value, query_policy: Option<&str>) -> ApiResult<Self> {
        let policy = body["propagationPolicy"].as_str().or(query_policy);
        let propagation = match policy {
            None => match body["orphanDependents"].as_bool() {
                Some(true) => Some(Propagation::Orphan),
                _ => None,
            },
            Some("Background") => Some(Propagation::Background),
            Some("Foreground") => Some(Propagation::Foreground),
            Some("Orphan") => Some(Propagation::Orphan),
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "propagationPolicy: Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
                )));
            }
        };
        let preconditions = &body["preconditions"];
        Ok(DeleteOptions {
            propagation,
            precondition_uid: preconditions["uid"].as_str().map(String::from),
            precondition_rv: preconditions["resourceVersion"].as_str().map(String::from),
        })
    }
}

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Everything but `status` (when the resource has a status subresource).
    Main,
    /// Only `status`.
    Status,
}

fn subject<'a>(def: &'a ResourceDef, name: &'a str) -> Subject<'a> {
    Subject {
        group: &def.group,
        plural: &def.plural,
        name,
    }
}

/// Checks a CRD before it is stored: it must define a servable resource with a usable schema.
fn check_crd(state: &State, crd: &Value, is_new: bool) -> ApiResult<()> {
    let name = object::name(crd);
    let crd_def = state
        .catalog
        .get("apiextensions.k8s.io", "customresourcedefinitions")
        .cloned();
    let invalid = |field: &str, detail: String| match &crd_def {
        Some(d) => ApiError::invalid_field(
            subject(d, name),
            &d.kind,
            "FieldValueInvalid",
            field,
            &detail,
        ),
        None => ApiError::bad_request(detail),
    };
    let def =
        ResourceDef::from_crd(crd).map_err(|e| invalid("spec", format!("Invalid value: {e}")))?;
    let expected = format!("{}.{}", def.plural, def.group);
    if name != expected {
        return Err(invalid(
            "metadata.name",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if is_new
        && let Some(existing) = state.catalog.get(&def.group, &def.plural)
        && !existing.is_custom()
    {
        return Err(invalid(
            "spec.group",
            format!("Invalid value: \"{}\": is a built-in resource", def.group),
        ));
    }
    let problems = schema_problems(crd);
    if problems.is_empty() {
        return Ok(());
    }
    let Some(crd_def) = &crd_def else {
        return Err(ApiError::bad_request(problems.join(", ")));
    };
    let causes: Vec<(String, String, String)> = problems
        .iter()
        .map(|problem| {
            let (field, body) = problem.split_once(": ").unwrap_or(("", problem));
            (
                cause_type(body).to_string(),
                body.to_string(),
                field.to_string(),
            )
        })
        .collect();
    let shown = match problems.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let message = format!(
        "{} {} is invalid: {shown}",
        crd_def.kind_group(),
        crate::semantics::go_format::go_quote(name)
    );
    Err(ApiError::invalid(
        subject(crd_def, name),
        &crd_def.kind,
        message,
        causes,
    ))
}

/// The problems of a CRD's schemas: structural ones, then (for a structural schema) those of
/// its validation rules. As in the apiserver, versions with identical schemas are checked
/// once, as `spec.validation.openAPIV3Schema`, and others as
/// `spec.versions[i].schema.openAPIV3Schema`.
fn schema_problems(crd: &Value) -> Vec<String> {
    let versions = crd["spec"]["versions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let schemas: Vec<(usize, &Value)> = versions
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v["schema"].get("openAPIV3Schema").map(|s| (i, s)))
        .collect();
    let identical = !versions.is_empty()
        && versions
            .iter()
            .all(|v| v["schema"] == versions[0]["schema"]);
    let checked: Vec<(String, &Value)> = if identical {
        schemas
            .first()
            .map(|(_, s)| ("spec.validation.openAPIV3Schema".to_string(), *s))
            .into_iter()
            .collect()
    } else {
        schemas
            .iter()
            .map(|(i, s)| (format!("spec.versions[{i}].schema.openAPIV3Schema"), *s))
            .collect()
    };
    let mut out = Vec::new();
    for (base, schema) in checked {
        let structural = schema::check_structural(schema);
        if structural.is_empty() {
            out.extend(schema::check_rules(schema, &base));
        }
        let parent = base.trim_end_matches("openAPIV3Schema");
        out.extend(structural.into_iter().map(|p| format!("{parent}{p}")));
    }
    out
}

/// The cause type of a field error by the start of its message.
fn cause_type(body: &str) -> &'static str {
    [
        ("Required value", "FieldValueRequired"),
        ("Forbidden", "FieldValueForbidden"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Too long", "FieldValueTooLong"),
        ("Too many", "FieldValueTooMany"),
        ("Internal error", "InternalError"),
    ]
    .into_iter()
    .find(|(start, _)| body.starts_with(start))
    .map_or("FieldValueInvalid", |(_, reason)| reason)
}

/// The `Update` entry of one of the cluster's own controllers, in the object's own apiVersion.
pub(super) fn controller(object: &Value, manager: &str, subresource: &str) -> Updater {
    Updater {
        manager: manager.to_string(),
        api_version: object["apiVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        subresource: subresource.to_string(),
    }
}

/// The manager of the fake cluster's API-server-side controllers (CRD status and cleanup).
const KUBE_APISERVER: &str = "kube-apiserver";
/// The manager of the fake cluster's garbage collector and namespace controller.
pub(super) const KUBE_CONTROLLER_MANAGER: &str = "kube-controller-manager";

/// What kube-apiserver's `BeforeCreate` gives a new object before it is validated (by its
/// schema and by validating webhooks, which mutating webhooks run before): a new uid, the
/// creation time, and the first generation of a resource that counts them. [`create`] stores
/// them as they are, so what validating webhooks saw is what is stored.
pub(crate) fn before_create(def: &ResourceDef, object: &mut Value) {
    let meta = object::meta_mut(object);
    meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    meta.insert("creationTimestamp".into(), json!(object::now_timestamp()));
    first_generation(def, object);
}

/// The generation a new object starts with: 1 where the resource counts them, none elsewhere.
fn first_generation(def: &ResourceDef, object: &mut Value) {
    let meta = object::meta_mut(object);
    if def.tracks_generation {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
}

/// Stores a new object. `object` has been admitted already; it keeps the uid and creation
/// time [`before_create`] gave it, and gets them here (with its generation) when it has none.
/// `updater`, if any, gets the object's fields in an `Update` entry of
/// `metadata.managedFields` (creations by apply have their managed fields already and pass
/// `None`).
pub(crate) fn create(
    state: &mut State,
    def: &ResourceDef,
    mut object: Value,
    updater: Option<&Updater>,
) -> ApiResult<Arc<Value>> {
    let namespace = object::namespace(&object).to_string();
    if def.namespaced {
        let ns_def = state.catalog.get("", "namespaces").cloned();
        let ns = ns_def
            .as_ref()
            .and_then(|d| state.get(&d.key(), &(String::new(), namespace.clone())));
        match (ns, &ns_def) {
            (None, Some(d)) => return Err(ApiError::not_found(subject(d, &namespace))),
            (Some(ns), _) if object::is_terminating(ns) => {
                return Err(ApiError::forbidden(format!(
                    "{} \"{}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
                    def.plural,
                    object::name(&object)
                )));
            }
            _ => {}
        }
    }
    if def.builtin == Some(Builtin::CustomResourceDefinition) {
        check_crd(state, &object, true)?;
    }
    let name = object::name(&object).to_string();
    if state
        .get(&def.key(), &(namespace.clone(), name.clone()))
        .is_some()
    {
        return Err(ApiError::already_exists(subject(def, &name)));
    }
    if def.has_status()
        && let Some(map) = object.as_object_mut()
    {
        map.remove("status");
    }
    if let Some(status) = defaults::initial_status(def, &object) {
        object["status"] = status;
    }
    allocation::allocate(state, def, &mut object)?;
    let meta = object::meta_mut(&mut object);
    for field in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "resourceVersion",
        "selfLink",
    ] {
        meta.remove(field);
    }
    let given = |field: &str| {
        meta.get(field)
            .and_then(Value::as_str)
            .is_some_and(|v| !v.is_empty())
    };
    if given("uid") && given("creationTimestamp") {
        first_generation(def, &mut object);
    } else {
        before_create(def, &mut object);
    }
    if def.builtin == Some(Builtin::Namespace) {
        let name = object::name(&object).to_string();
        let labels = object::meta_mut(&mut object)
            .entry("labels")
            .or_insert_with(|| json!({}));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert("kubernetes.io/metadata.name".into(), json!(name));
        }
    }
    // As in Kubernetes, the creator owns what it sent and what defaulting added, but not
    // what the server's create strategy sets afterwards.
    if let Some(updater) = updater {
        patch::record_update(
            Some(&def.kind),
            None,
            &mut object,
            updater,
            &object::now_timestamp(),
        );
    }
    if def.builtin == Some(Builtin::Namespace) {
        object["spec"] = json!({"finalizers": ["kubernetes"]});
        object["status"] = json!({"phase": "Active"});
    }
    if def.builtin == Some(Builtin::CustomResourceDefinition) {
        object["status"] = initial_crd_status(&object);
    }
    limits::check_stored_size(&object)?;
    Ok(state.put(def, object))
}

/// A new CRD's status until its names are accepted: its storage version stored, nothing more.
fn initial_crd_status(crd: &Value) -> Value {
    let storage: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["storage"] == true)
        .map(|v| v["name"].clone())
        .collect();
    // `conditions` is not `omitempty` in Go: an empty list is written as `null`.
    json!({"conditions": null, "acceptedNames": {"plural": "", "kind": ""}, "storedVersions": storage})
}

/// A name for `metadata.generateName`: the prefix and five random characters, as the real
/// server makes them (no vowels, no confusable characters).
pub(crate) fn generate_name(
    state: &State,
    def: &ResourceDef,
    namespace: &str,
    prefix: &str,
) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    loop {
        let suffix: String = (0..5)
            .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
            .collect();
        let name = format!("{prefix}{suffix}");
        if state
            .get(&def.key(), &(namespace.to_string(), name.clone()))
            .is_none()
        {
            return name;
        }
    }
}

/// What of `new` a write in `scope` may change, as the update strategies keep it: only its
/// `status` on the status subresource, all but its `status` on the main resource (when the
/// resource has a status subresource). A resourceVersion `new` gives is kept, as a
/// precondition.
pub(crate) fn scoped(def: &ResourceDef, old: &Value, new: Value, scope: Scope) -> Value {
    let (mut scoped, status) = match scope {
        Scope::Status => {
            let status = new.get("status").cloned();
            let mut scoped = old.clone();
            let meta = object::meta_mut(&mut scoped);
            match object::meta(&new).get("resourceVersion") {
                Some(rv) => meta.insert("resourceVersion".into(), rv.clone()),
                None => meta.remove("resourceVersion"),
            };
            (scoped, status)
        }
        Scope::Main if def.has_status() => (new, old.get("status").cloned()),
        Scope::Main => return new,
    };
    match status {
        Some(status) => scoped["status"] = status,
        None => {
            if let Some(map) = scoped.as_object_mut() {
                map.remove("status");
            }
        }
    }
    scoped
}

/// Stores a new version of an existing object. `new` has been admitted already; its
/// resourceVersion, if any, must be the current one. `updater`, if any, records the change in
/// an `Update` entry of `metadata.managedFields` (applies have done their bookkeeping already
/// and pass `None`).
pub(crate) fn update(
    state: &mut State,
    def: &ResourceDef,
    old: &Arc<Value>,
    mut new: Value,
    scope: Scope,
    updater: Option<&Updater>,
) -> ApiResult<Arc<Value>> {
    let name = object::name(old).to_string();
    allocation::keep_allocations(def, old, &mut new);
    let given_rv = object::resource_version(&new);
    if !given_rv.is_empty() && given_rv != object::resource_version(old) {
        return Err(ApiError::stale(subject(def, &name)));
    }
    if def.builtin == Some(Builtin::CustomResourceDefinition) && scope == Scope::Main {
        check_crd(state, &new, false)?;
    }
    new = scoped(def, old, new, scope);
    // Fields the server owns: clients cannot change them.
    let old_meta = object::meta(old);
    let meta = object::meta_mut(&mut new);
    for field in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "name",
        "namespace",
    ] {
        match old_meta.get(field) {
            Some(value) => meta.insert(field.into(), value.clone()),
            None => meta.remove(field),
        };
    }
    meta.remove("resourceVersion");
    if object::is_terminating(old) {
        let old_finalizers = object::finalizers(old);
        // Sorted and once each, as Go's `sets.String.List()`.
        let added: std::collections::BTreeSet<String> = object::finalizers(&new)
            .into_iter()
            .filter(|f| !old_finalizers.contains(f))
            .collect();
        if !added.is_empty() {
            return Err(ApiError::invalid_field(
                subject(def, &name),
                &def.kind,
                "FieldValueForbidden",
                "metadata.finalizers",
                &format!(
                    "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    added
                        .iter()
                        .map(|f| go_format::go_quote(f))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    if let Some(updater) = updater {
        patch::record_update(
            Some(&def.kind),
            Some(old),
            &mut new,
            updater,
            &object::now_timestamp(),
        );
    }
    let mut unchanged = (**old).clone();
    object::meta_mut(&mut unchanged).remove("resourceVersion");
    if unchanged == new {
        return Ok(old.clone());
    }
    if def.tracks_generation
        && object::spec_part(&new, def.has_status())
            != object::spec_part(&unchanged, def.has_status())
    {
        let generation = object::generation(old) + 1;
        object::meta_mut(&mut new).insert("generation".into(), json!(generation));
    }
    if object::is_terminating(&new) && !has_blocking_finalizers(def, &new) {
        // As the real server: the answer (and the DELETED event) is the object as updated,
        // its last finalizer gone.
        let key = key_of(&new);
        return Ok(state
            .remove_as(def, &key, Some(new))
            .unwrap_or_else(|| old.clone()));
    }
    limits::check_stored_size(&new)?;
    Ok(state.put(def, new))
}

fn has_blocking_finalizers(def: &ResourceDef, object: &Value) -> bool {
    !object::finalizers(object).is_empty()
        || (def.builtin == Some(Builtin::Namespace)
            && object["spec"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty()))
}

/// The result of a deletion request.
#[derive(Debug)]
pub(crate) enum Deletion {
    /// Gone now; the object's last state.
    Gone(Arc<Value>),
    /// Marked for deletion; finalizers hold it.
    Pending(Arc<Value>),
}

/// The built-in resources whose storage sets `ReturnDeletedObject` (Kubernetes 1.36): a
/// deletion that removes one of them answers the object as it was; the others' answer a
/// `Status` naming it ([`status::deleted`](super::status::deleted)). A deletion that only
/// marks the object (finalizers hold it) answers the object, whatever the kind.
const RETURN_DELETED_OBJECT: &[(&str, &str)] = &[
    ("", "namespaces"),
    ("", "persistentvolumeclaims"),
    ("", "persistentvolumes"),
    ("", "pods"),
    ("", "podtemplates"),
    ("", "resourcequotas"),
    ("", "serviceaccounts"),
    ("", "services"),
    ("resource.k8s.io", "deviceclasses"),
    ("resource.k8s.io", "devicetaintrules"),
    ("resource.k8s.io", "resourceclaims"),
    ("resource.k8s.io", "resourceclaimtemplates"),
    ("resource.k8s.io", "resourcepoolstatusrequests"),
    ("resource.k8s.io", "resourceslices"),
    ("storage.k8s.io", "csidrivers"),
    ("storage.k8s.io", "csinodes"),
    ("storage.k8s.io", "storageclasses"),
    ("storage.k8s.io", "volumeattachments"),
    ("storage.k8s.io", "volumeattributesclasses"),
];

/// Whether removing an object of this resource answers the object (rather than a `Status`).
pub(crate) fn returns_deleted_object(def: &ResourceDef) -> bool {
    !def.is_custom() && RETURN_DELETED_OBJECT.contains(&(def.group.as_str(), def.plural.as_str()))
}

/// Deletes an object: removes it, or marks it when finalizers (or the policy) hold it.
pub(crate) fn delete(
    state: &mut State,
    def: &ResourceDef,
    key: &ObjectKey,
    options: &DeleteOptions,
) -> ApiResult<Deletion> {
    let Some(current) = state.get(&def.key(), key).cloned() else {
        return Err(ApiError::not_found(subject(def, &key.1)));
    };
    // The NamespaceLifecycle admission plugin keeps the namespaces a cluster needs.
    if def.builtin == Some(Builtin::Namespace) && IMMORTAL_NAMESPACES.contains(&key.1.as_str()) {
        let subject = subject(def, &key.1);
        return Err(ApiError::forbidden(format!(
            "{} \"{}\" is forbidden: this namespace may not be deleted",
            subject.qualified(),
            key.1
        ))
        .with_details(json!({"name": key.1, "kind": def.plural})));
    }
    if let Some(uid) = &options.precondition_uid
        && uid != object::uid(&current)
    {
        return Err(ApiError::conflict(
            subject(def, &key.1),
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                object::uid(&current)
            ),
        ));
    }
    if let Some(rv) = &options.precondition_rv
        && rv != object::resource_version(&current)
    {
        return Err(ApiError::conflict(
            subject(def, &key.1),
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                object::resource_version(&current)
            ),
        ));
    }
    let mut marked = (*current).clone();
    let mut finalizers = object::finalizers(&marked);
    match options.propagation {
        Some(Propagation::Foreground) if !finalizers.iter().any(|f| f == FOREGROUND) => {
            finalizers.push(FOREGROUND.into())
        }
        Some(Propagation::Orphan) if !finalizers.iter().any(|f| f == ORPHAN) => {
            finalizers.push(ORPHAN.into())
        }
        _ => {}
    }
    // A CRD's deletion first removes its objects: the registry adds this finalizer as it
    // marks the CRD (not at its creation).
    let custom_registry = matches!(
        def.builtin,
        Some(Builtin::CustomResourceDefinition | Builtin::Namespace)
    );
    if def.builtin == Some(Builtin::CustomResourceDefinition)
        && !finalizers.iter().any(|f| f == CRD_CLEANUP)
    {
        finalizers.push(CRD_CLEANUP.into());
    }
    object::set_finalizers(&mut marked, finalizers);
    if !has_blocking_finalizers(def, &marked) {
        let gone = state.remove(def, key).unwrap_or(current);
        return Ok(Deletion::Gone(gone));
    }
    if !object::is_terminating(&marked) {
        let generation = object::generation(&marked);
        let meta = object::meta_mut(&mut marked);
        meta.insert("deletionTimestamp".into(), json!(object::now_timestamp()));
        // Namespaces and CRDs are deleted by registries of their own, which set neither a
        // grace period nor a new generation; the generic one does both (the generation only
        // for kinds that track it).
        if !custom_registry {
            meta.insert("deletionGracePeriodSeconds".into(), json!(0));
            if generation > 0 {
                meta.insert("generation".into(), json!(generation + 1));
            }
        }
        if def.builtin == Some(Builtin::Namespace) {
            marked["status"]["phase"] = json!("Terminating");
        }
        // The CRD registry says so in the CRD's conditions as it marks it (its finalizer's
        // controller then words the deletion as in progress, which nobody waits to see).
        if def.builtin == Some(Builtin::CustomResourceDefinition) {
            let terminating = json!({
                "type": "Terminating", "status": "True",
                "lastTransitionTime": object::now_timestamp(),
                "reason": "InstanceDeletionPending",
                "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
            });
            match marked["status"]["conditions"].as_array_mut() {
                Some(conditions) => conditions.push(terminating),
                None => marked["status"]["conditions"] = json!([terminating]),
            }
        }
    }
    object::meta_mut(&mut marked).remove("resourceVersion");
    let mut unchanged = (*current).clone();
    object::meta_mut(&mut unchanged).remove("resourceVersion");
    if marked == unchanged {
        return Ok(Deletion::Pending(current));
    }
    Ok(Deletion::Pending(state.put(def, marked)))
}

fn builtin_def(state: &State, group: &str, plural: &str) -> Option<Arc<ResourceDef>> {
    state.catalog.get(group, plural).cloned()
}

/// Serves the resources of CRDs, sets their conditions, and cleans up deleted ones.
pub(crate) fn establish_crds(state: &mut State) -> bool {
    if !std::mem::take(&mut state.pending.crds) {
        return false;
    }
    let Some(crd_def) = builtin_def(state, "apiextensions.k8s.io", "customresourcedefinitions")
    else {
        return false;
    };
    let crds: Vec<Arc<Value>> = state
        .objects(&crd_def.key())
        .map(|o| o.values().cloned().collect())
        .unwrap_or_default();
    let mut progressed = false;
    let mut served = std::collections::HashSet::new();
    for crd in crds {
        let Ok(def) = ResourceDef::from_crd(&crd) else {
            continue;
        };
        served.insert(def.key());
        let current = state.catalog.get(&def.group, &def.plural);
        let changed = current.is_none_or(|c| format!("{:?}", **c) != format!("{def:?}"));
        if changed {
            state.catalog.insert(def.clone());
        }
        if object::is_terminating(&crd) {
            let keys: Vec<ObjectKey> = state
                .objects(&def.key())
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default();
            if keys.is_empty() {
                let mut done = (*crd).clone();
                object::set_finalizers(
                    &mut done,
                    object::finalizers(&crd)
                        .into_iter()
                        .filter(|f| f != CRD_CLEANUP)
                        .collect(),
                );
                let updater = controller(&crd, KUBE_APISERVER, "");
                if update(state, &crd_def, &crd, done, Scope::Main, Some(&updater)).is_ok() {
                    progressed = true;
                }
            } else {
                for key in keys {
                    let already = state
                        .get(&def.key(), &key)
                        .is_some_and(|o| object::is_terminating(o));
                    if !already && delete(state, &def, &key, &DeleteOptions::default()).is_ok() {
                        progressed = true;
                    }
                }
            }
            continue;
        }
        let status = crd_status(&crd, &def);
        if crd["status"] != status {
            let mut established = (*crd).clone();
            established["status"] = status;
            let updater = controller(&crd, KUBE_APISERVER, "status");
            if update(
                state,
                &crd_def,
                &crd,
                established,
                Scope::Status,
                Some(&updater),
            )
            .is_ok()
            {
                progressed = true;
            }
        }
    }
    let gone: Vec<_> = state
        .catalog
        .iter()
        .filter(|d| d.is_custom() && !served.contains(&d.key()))
        .map(|d| d.key())
        .collect();
    for key in gone {
        state.catalog.remove(&key);
        state.drop_resource(&key);
        progressed = true;
    }
    progressed
}

fn crd_status(crd: &Value, def: &ResourceDef) -> Value {
    let previous = &crd["status"]["conditions"];
    let since = |kind: &str| {
        previous
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == kind)
            .and_then(|c| c["lastTransitionTime"].as_str().map(String::from))
            .unwrap_or_else(object::now_timestamp)
    };
    let mut accepted = crd["spec"]["names"].clone();
    accepted["singular"] = json!(def.singular);
    accepted["listKind"] = json!(def.list_kind);
    let storage: Vec<&str> = def
        .versions
        .iter()
        .filter(|v| v.storage)
        .map(|v| v.name.as_str())
        .collect();
    let mut stored: Vec<Value> = crd["status"]["storedVersions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for version in storage {
        if !stored.iter().any(|v| v == version) {
            stored.push(json!(version));
        }
    }
    json!({
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": since("NamesAccepted"),
             "reason": "NoConflicts", "message": "no conflicts found"},
            {"type": "Established", "status": "True", "lastTransitionTime": since("Established"),
             "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
        ],
        "acceptedNames": accepted,
        "storedVersions": stored,
    })
}

/// Empties terminating namespaces, then lets them go.
pub(crate) fn terminate_namespaces(state: &mut State) -> bool {
    if !std::mem::take(&mut state.pending.namespaces) {
        return false;
    }
    let Some(ns_def) = builtin_def(state, "", "namespaces") else {
        return false;
    };
    let terminating: Vec<Arc<Value>> = state
        .objects(&ns_def.key())
        .map(|o| {
            o.values()
                .filter(|ns| object::is_terminating(ns))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let mut progressed = false;
    for ns in terminating {
        let namespace = object::name(&ns).to_string();
        let contents: Vec<(Arc<ResourceDef>, ObjectKey, bool)> = state
            .catalog
            .iter()
            .filter(|d| d.namespaced)
            .flat_map(|d| {
                state
                    .objects(&d.key())
                    .into_iter()
                    .flat_map(|o| o.iter())
                    .filter(|(k, _)| k.0 == namespace)
                    .map(|(k, o)| (d.clone(), k.clone(), object::is_terminating(o)))
                    .collect::<Vec<_>>()
            })
            .collect();
        if contents.is_empty() {
            if ns["spec"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty())
            {
                let mut finalized = (*ns).clone();
                finalized["spec"]["finalizers"] = json!([]);
                let updater = controller(&ns, KUBE_CONTROLLER_MANAGER, "finalize");
                if update(state, &ns_def, &ns, finalized, Scope::Main, Some(&updater)).is_ok() {
                    progressed = true;
                }
            }
            continue;
        }
        for (def, key, terminating) in contents {
            if !terminating && delete(state, &def, &key, &DeleteOptions::default()).is_ok() {
                progressed = true;
            }
        }
    }
    progressed
}
