//! Patch application for the fake API server: RFC 7386 merge patch, RFC 6902 JSON patch,
//! Kubernetes strategic merge patch, a simplified server-side apply, and the managed-fields
//! bookkeeping of all other writes.
//!
//! All functions work on plain [`serde_json::Value`] documents and never panic on any input.
//! They are recursive in the nesting depth of their inputs; documents that come from
//! `serde_json::from_slice` are limited to 128 levels, which keeps the stack small.
//!
//! # Errors
//!
//! [`PatchError`] tells the caller which HTTP answer Kubernetes would give:
//! [`PatchError::BadRequest`] (400) for a malformed patch document,
//! [`PatchError::Invalid`] (422) for a well-formed patch that cannot be applied (a failed
//! JSON-patch `test`, a path that does not exist, a list of lists in a strategic merge patch),
//! [`PatchError::Conflict`] (409) for server-side apply conflicts.
//! [`PatchError::code`] and [`PatchError::reason`] give the status code and the
//! Kubernetes `reason`; the `Display` text is the Status `message`.
//!
//! # Strategic merge patch
//!
//! [`strategic_merge_patch`] follows `k8s.io/apimachinery/pkg/util/strategicpatch`
//! (`StrategicMergeMapPatch`), with the Go struct tags replaced by a static table of list
//! strategies per kind and field path (indices left out):
//!
//! | where | lists |
//! | --- | --- |
//! | every kind | `metadata.finalizers` (primitive, merged as a set), `metadata.ownerReferences` (key `uid`) |
//! | built-in kinds | `status.conditions` (key `type`) |
//! | pod spec (`spec` of a Pod, `template.spec` of a PodTemplate, `spec.template.spec` of Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job, `spec.jobTemplate.spec.template.spec` of a CronJob) | `containers`, `initContainers`, `ephemeralContainers` (key `name`); in each of them `ports` (key `containerPort`), `env` (key `name`), `volumeMounts` (key `mountPath`), `volumeDevices` (key `devicePath`); `volumes`, `imagePullSecrets`, `schedulingGates`, `resourceClaims` (key `name`), `hostAliases` (key `ip`), `topologySpreadConstraints` (key `topologyKey`); `tolerations` atomic |
//! | Pod | `status.podIPs`, `status.hostIPs` (key `ip`) |
//! | Service | `spec.ports` (key `port`) |
//! | ServiceAccount | `secrets` (key `name`) |
//!
//! Every other list is replaced as a whole, as Kubernetes does for fields without a patch
//! strategy (and for custom resources). Maps merge recursively and `null` deletes a key.
//! The directives are those of Kubernetes: `$patch: replace|delete` in maps and list
//! items, `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>` (the merged list
//! follows that order; live-only items keep their place relative to the ordered items, as
//! in Kubernetes' `mergeSortedSlice`) and `$retainKeys`. Directive keys never reach the
//! result. Differences from the Go code, all on inputs Kubernetes clients never send:
//!
//! - `$patch: merge` is accepted as the explicit default (Kubernetes rejects it): a map or
//!   a keyed list item marked with it is merged as usual, a bare `{"$patch": "merge"}` list
//!   item does nothing;
//! - values added where the live object has nothing are merged into an empty value rather
//!   than copied verbatim, so nested directives and `null`s are handled the same way as in
//!   existing fields (for instance a `$patch: replace` map under a new key keeps its content,
//!   and duplicate items of a new merging list are merged);
//! - error cases that the Go code reports as internal errors (500), such as a list item
//!   without its merge key, are reported as [`PatchError::BadRequest`].
//!
//! # Server-side apply
//!
//! [`server_side_apply`] follows the structured-merge-diff algorithm that backs
//! `kubectl apply --server-side`, without OpenAPI schemas:
//!
//! 1. `applied` must be an object with `apiVersion` and `kind` (equal to `kind` when that is
//!    given), and `field_manager` must not be empty; its `metadata.managedFields`
//!    and the server-owned metadata (`resourceVersion`, `uid`, `creationTimestamp`,
//!    `generation`, `selfLink`, `deletionTimestamp`, `deletionGracePeriodSeconds`) are
//!    dropped. The result carries those fields, and `metadata.name`/`namespace`, from `live`.
//! 2. The applied field set is computed as Kubernetes does (`ToFieldSet`), minus `apiVersion`,
//!    `kind`, and the metadata fields above, and is encoded as FieldsV1 (`f:<field>`,
//!    `k:{"key":value}` for keyed list items, `v:<json>` for set items, `.` for an item or
//!    map that is owned itself).
//! 3. `applied` is merged into `live`: maps recursively, keyed and set lists item by item
//!    (same ordering rules as structured-merge-diff), every other list atomically. The list
//!    table is the strategic-merge table above, with the keys Kubernetes uses for apply:
//!    container ports and Service ports are keyed by `(port, protocol)` with `protocol`
//!    defaulting to `"TCP"`, `topologySpreadConstraints` by `(topologyKey,
//!    whenUnsatisfiable)`, `finalizers` are a set, and Pod `podIPs`/`hostIPs` are atomic.
//! 4. Fields that this manager applied last time (its `Apply` entry) and no longer applies
//!    are removed, unless some other manager's set (or the new applied set) still owns them
//!    or something below them.
//! 5. A field owned by another manager whose value changes, which is added, or which the
//!    applied object removes (by setting it or a parent to `null` or to a value of another
//!    type), is a conflict. Without `force` the whole apply fails
//!    with [`PatchError::Conflict`] and a Kubernetes-style message; with `force` those fields
//!    move to this manager. Other managers also lose fields that were removed. The message
//!    keeps Kubernetes' exact wording (`Apply failed with 1 conflict: conflict with
//!    "alice": .spec.replicas`; several conflicts are grouped by manager, one path a line),
//!    and [`PatchError::Conflict`] also lists each field for the Status `causes`.
//! 6. The switch from client-side to server-side apply (Kubernetes' `lastAppliedManager`):
//!    for the manager `kubectl` only, the conflicts on fields of the live object's
//!    `kubectl.kubernetes.io/last-applied-configuration` annotation are forgiven when the
//!    annotation is a JSON object with a `kind` and the applied `apiVersion`, and the field
//!    still has its last-applied value (fields the live object changed, added or removed
//!    since are not forgiven). When every conflict is forgiven, the apply goes on as forced;
//!    otherwise only the other conflicts are reported.
//! 7. After an apply by `kubectl` (`lastAppliedUpdater`), an existing non-empty annotation is
//!    rewritten to the applied object without that annotation, as Go's JSON encoder writes it
//!    (sorted keys, `<`, `>` and `&` escaped, a final newline); it is dropped if the
//!    annotations would exceed 256 KiB. Its ownership does not change.
//! 8. `metadata.managedFields` is rewritten: entries whose set became empty disappear, the
//!    manager's `Apply` entry gets `time: now` when the object changed (it keeps its old
//!    time on a no-op apply), and entries are sorted as Kubernetes sorts them.
//!
//! Simplifications, compared with a real API server:
//!
//! - There is no OpenAPI schema: every map is treated as a struct with granular fields
//!   (so `LabelSelector`s and other atomic structs are merged key by key), and every list
//!   not in the table is atomic, which is also the default for custom resources. `kind` is
//!   `None` for custom resources: then only the `metadata` lists are keyed.
//! - No defaulting, validation, or version conversion; `apiVersion` is not checked against
//!   the live object or the URL. Every managed-fields entry is compared at face value,
//!   whatever its `apiVersion`.
//! - A `null` in `applied` removes the field from the result (the manager still owns it),
//!   instead of being stored and later dropped by decoding into a Go struct.
//! - `status` is treated like any other field: subresource semantics (ignoring `status` on
//!   the main resource, or everything else on `/status`) are the caller's job, as are
//!   preconditions such as `metadata.resourceVersion` in the applied object.
//! - `metadata.managedFields` in `applied` is ignored (Kubernetes answers 400), and live
//!   entries that cannot be decoded are dropped instead of failing the request. When the
//!   live object has no managed fields at all, its current fields are given to a
//!   `before-first-apply` `Update` manager, as Kubernetes does, so changing them is a
//!   conflict (one that the last-applied exception above may forgive).
//! - Live list items that cannot be keyed (no key field) are never owned by anyone.
//! - An apply adds no `Update` entry besides `before-first-apply`, so the cap on `Update`
//!   entries (below) is applied by [`record_update`] only.
//!
//! # Update operations
//!
//! Every write that is not an apply (create, update, any other patch, on the main resource or
//! a subresource) records its author in `metadata.managedFields`, as Kubernetes' field
//! manager does; [`record_update`] does it on the object as it will be stored:
//!
//! 1. The author ([`Updater`]) is the `fieldManager` parameter or, without one, the
//!    User-Agent up to its first `/` ([`manager_or_user_agent`]: `kubectl/v1.32 (...)`
//!    gives `kubectl`; kubectl itself sends `fieldManager=kubectl-client-side-apply` for
//!    `kubectl apply`, `kubectl-create`, `kubectl-edit` and so on), the request's apiVersion,
//!    and the subresource (`status`, `scale`, ...). An `Update` entry's identity is all three;
//!    an entry with an empty manager has no `manager` key.
//! 2. The starting entries are the live object's, except on the main resource when the
//!    written object carries `metadata.managedFields` itself (`decodeLiveOrNew`): an empty
//!    list, or a list of one empty entry, resets them to none; a non-empty list whose
//!    entries all decode replaces them (this is how kubectl migrates a client-side-applied
//!    object to server-side apply, with a JSON patch of `metadata.managedFields`); anything
//!    else is ignored.
//! 3. An existing object without entries stays untracked, until its first apply
//!    (`skipNonAppliedManager`); a new object is always tracked (Kubernetes tracks creations
//!    with probability 1).
//! 4. The old and new objects (an empty one for a creation) are compared as server-side
//!    apply compares them (structured-merge-diff `Updater.Update`): fields changed or added
//!    by the write leave every entry, the author's own included, and go to the author's
//!    entry; removed fields leave every entry. The author's new fields exclude `apiVersion`,
//!    `kind` and the server's metadata, as for apply. So a creation owns every field, maps
//!    themselves included (`f:data: {".": {}, ...}`).
//! 5. Only when the author got fields does its entry get `time: now`, merged with its
//!    previous set; a write that changes nothing changes no entry. Empty entries disappear.
//! 6. At most ten `Update` entries are kept (`capManagersManager`): beyond that, the oldest
//!    ones (by time, then identity) are merged per apiVersion into an `ancient-changes`
//!    `Update` entry, which takes the time of the last entry merged into it; the oldest entry
//!    of each apiVersion only moves into it when a second one of that apiVersion joins.
//!    `Apply` entries never count.
//! 7. Entries are sorted as for apply.
//!
//! The server's own controllers record their writes too: `kube-apiserver` for a CRD's
//! `status` (subresource `status`) and its cleanup finalizer, `kube-controller-manager` for
//! the garbage collector and namespace finalization (subresource `finalize`). Deletions mark
//! objects without recording anything, as in Kubernetes.
//!
//! Simplifications, compared with a real API server:
//!
//! - The bookkeeping runs on the object as it will be stored, after admission and the
//!   server's rules for updates (status copied from the live object, server-owned metadata
//!   restored), instead of before the registry's strategy with per-resource reset fields; the
//!   effect is the same for the fields the fake server resets. A namespace's creator owns its
//!   `kubernetes.io/metadata.name` label (set by defaulting in Kubernetes too), but not
//!   `spec.finalizers` and `status.phase`, which the create strategy sets.
//! - Given `metadata.managedFields` that do not decode are ignored rather than rejected
//!   with 422; `fieldManager` is not validated; the User-Agent's non-printable characters
//!   are approximated by control characters and whitespace other than spaces.
//! - No version conversion: entries of every apiVersion are compared at face value.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::go_format::go_json;

/// The `$patch` directive key of strategic merge patches.
const PATCH_DIRECTIVE: &str = "$patch";
/// The `$retainKeys` directive key of strategic merge patches.
const RETAIN_KEYS: &str = "$retainKeys";
/// The prefix of `$setElementOrder/<field>` directive keys.
const SET_ELEMENT_ORDER: &str = "$setElementOrder";
/// The prefix of `$deleteFromPrimitiveList/<field>` directive keys.
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/// One field of a server-side apply conflict, ready for a Status `details.causes` entry
/// of type `FieldManagerConflict`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ApplyConflict {
    /// The name of the manager that owns the field.
    pub(crate) manager: String,
    /// The cause message, such as `conflict with "kubectl" using apps/v1`.
    pub(crate) message: String,
    /// The field path, such as `.spec.replicas`.
    pub(crate) field: String,
}

/// Why a patch could not be applied; each variant maps to one HTTP answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PatchError {
    /// The patch document is malformed: answer 400 BadRequest.
    #[error("{0}")]
    BadRequest(String),
    /// The patch is well formed but cannot be applied to this object (failed `test`
    /// operation, missing path): answer 422 Invalid.
    #[error("{0}")]
    Invalid(String),
    /// Server-side apply conflicts with other field managers: answer 409 Conflict.
    #[error("{message}")]
    Conflict {
        /// The Kubernetes message, such as
        /// `Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas`.
        message: String,
        /// Every conflicting field with its manager.
        conflicts: Vec<ApplyConflict>,
    },
}

/// Status code and reason for the HTTP answer.
impl PatchError {
    /// The HTTP status code for this error.
    pub(crate) fn code(&self) -> u16 {
        match self {
            PatchError::BadRequest(_) => 400,
            PatchError::Invalid(_) => 422,
            PatchError::Conflict { .. } => 409,
        }
    }

    /// The Kubernetes Status `reason` for this error.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            PatchError::BadRequest(_) => "BadRequest",
            PatchError::Invalid(_) => "Invalid",
            PatchError::Conflict { .. } => "Conflict",
        }
    }
}

/// Shorthand for a [`PatchError::BadRequest`].
fn bad(message: impl Into<String>) -> PatchError {
    PatchError::BadRequest(message.into())
}

// ---------------------------------------------------------------------------------------
// RFC 7386 and RFC 6902
// ---------------------------------------------------------------------------------------

/// RFC 7386 merge patch, in place.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// RFC 6902 JSON patch (`patch` must be an array of operations; include `test`). Atomic: on error `target` is unchanged.
pub(crate) fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    if !patch.is_array() {
        return Err(bad("json patch must be an array of operations"));
    }
    let operations: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|error| bad(format!("invalid json patch: {error}")))?;
    let mut document = target.clone();
    for (index, operation) in operations.0.iter().enumerate() {
        // As the apiserver: testing for `null` passes where the field is absent (its parent
        // exists); kube-rs's finalizer helper relies on it.
        if let json_patch::PatchOperation::Test(test) = operation {
            let path = test.path.to_string();
            let parent = path
                .rsplit_once('/')
                .map(|(parent, _)| parent)
                .unwrap_or_default();
            if test.value.is_null()
                && document.pointer(&path).is_none()
                && document.pointer(parent).is_some()
            {
                continue;
            }
        }
        json_patch::patch_unsafe(&mut document, std::slice::from_ref(operation)).map_err(
            |mut error| {
                error.operation = index;
                describe_json_patch_error(&operations, &error)
            },
        )?;
    }
    *target = document;
    Ok(())
}

/// Turns an error of the `json-patch` crate into a 422 message naming the operation.
fn describe_json_patch_error(
    operations: &json_patch::Patch,
    error: &json_patch::PatchError,
) -> PatchError {
    use json_patch::{PatchErrorKind, PatchOperation};
    let index = error.operation;
    let operation = operations.0.get(index);
    let name = match operation {
        Some(PatchOperation::Add(_)) => "add",
        Some(PatchOperation::Remove(_)) => "remove",
        Some(PatchOperation::Replace(_)) => "replace",
        Some(PatchOperation::Move(_)) => "move",
        Some(PatchOperation::Copy(_)) => "copy",
        Some(PatchOperation::Test(_)) => "test",
        None => "json patch",
    };
    let from = match operation {
        Some(PatchOperation::Move(op)) => op.from.to_string(),
        Some(PatchOperation::Copy(op)) => op.from.to_string(),
        _ => String::new(),
    };
    let path = error.path.to_string();
    let message = match error.kind {
        PatchErrorKind::TestFailed => {
            format!(
                "test operation at index {index} failed: the value at path {path:?} does not match"
            )
        }
        PatchErrorKind::InvalidPointer => format!(
            "{name} operation at index {index} failed: path {path:?} does not exist or is not a valid location"
        ),
        PatchErrorKind::InvalidFromPointer => {
            format!("{name} operation at index {index} failed: from path {from:?} does not exist")
        }
        PatchErrorKind::CannotMoveInsideItself => format!(
            "move operation at index {index} failed: cannot move {from:?} into one of its own children"
        ),
        ref other => format!("{name} operation at index {index} failed at path {path:?}: {other}"),
    };
    PatchError::Invalid(message)
}

// ---------------------------------------------------------------------------------------
// The list table
// ---------------------------------------------------------------------------------------

/// How a strategic merge patch treats a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SmpList {
    /// Replaced as a whole (no patch strategy).
    Atomic,
    /// `patchStrategy=merge` without a key: merged as a set of scalars.
    Primitive,
    /// `patchStrategy=merge` with this `patchMergeKey`.
    Keyed(&'static str),
}

/// How server-side apply treats a list (`x-kubernetes-list-type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SsaList {
    /// `atomic`: owned and replaced as a whole.
    Atomic,
    /// `set`: items are scalars, owned one by one.
    Set,
    /// `map` with these `x-kubernetes-list-map-keys`.
    Map(&'static [&'static str]),
}

/// The strategies of one list field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ListRule {
    /// Strategic merge patch strategy.
    smp: SmpList,
    /// Server-side apply list type.
    ssa: SsaList,
}

/// A list with no strategy.
const ATOMIC: ListRule = ListRule {
    smp: SmpList::Atomic,
    ssa: SsaList::Atomic,
};

/// A list of scalars merged as a set.
const SET: ListRule = ListRule {
    smp: SmpList::Primitive,
    ssa: SsaList::Set,
};

/// A list keyed by `name` for both patch kinds.
const BY_NAME: ListRule = ListRule {
    smp: SmpList::Keyed("name"),
    ssa: SsaList::Map(&["name"]),
};

/// A list keyed by `ip` in strategic merge patches, atomic for apply.
const BY_IP_ATOMIC_APPLY: ListRule = ListRule {
    smp: SmpList::Keyed("ip"),
    ssa: SsaList::Atomic,
};

/// Lists under `metadata`, for every kind.
const METADATA_RULES: &[(&str, ListRule)] = &[
    ("finalizers", SET),
    (
        "ownerReferences",
        ListRule {
            smp: SmpList::Keyed("uid"),
            ssa: SsaList::Map(&["uid"]),
        },
    ),
];

/// Lists inside a container (`containers`, `initContainers`, `ephemeralContainers`).
const CONTAINER_RULES: &[(&str, ListRule)] = &[
    (
        "ports",
        ListRule {
            smp: SmpList::Keyed("containerPort"),
            ssa: SsaList::Map(&["containerPort", "protocol"]),
        },
    ),
    ("env", BY_NAME),
    (
        "volumeMounts",
        ListRule {
            smp: SmpList::Keyed("mountPath"),
            ssa: SsaList::Map(&["mountPath"]),
        },
    ),
    (
        "volumeDevices",
        ListRule {
            smp: SmpList::Keyed("devicePath"),
            ssa: SsaList::Map(&["devicePath"]),
        },
    ),
];

/// The container lists of a pod spec.
const CONTAINER_LISTS: &[&str] = &["containers", "initContainers", "ephemeralContainers"];

/// Lists directly inside a pod spec.
const POD_SPEC_RULES: &[(&str, ListRule)] = &[
    ("containers", BY_NAME),
    ("initContainers", BY_NAME),
    ("ephemeralContainers", BY_NAME),
    ("volumes", BY_NAME),
    ("imagePullSecrets", BY_NAME),
    ("schedulingGates", BY_NAME),
    ("resourceClaims", BY_NAME),
    (
        "hostAliases",
        ListRule {
            smp: SmpList::Keyed("ip"),
            ssa: SsaList::Map(&["ip"]),
        },
    ),
    (
        "topologySpreadConstraints",
        ListRule {
            smp: SmpList::Keyed("topologyKey"),
            ssa: SsaList::Map(&["topologyKey", "whenUnsatisfiable"]),
        },
    ),
    ("tolerations", ATOMIC),
];

/// Kind-specific lists, by kind and dotted path.
const KIND_RULES: &[(&str, &str, ListRule)] = &[
    (
        "Service",
        "spec.ports",
        ListRule {
            smp: SmpList::Keyed("port"),
            ssa: SsaList::Map(&["port", "protocol"]),
        },
    ),
    ("ServiceAccount", "secrets", BY_NAME),
    ("Pod", "status.podIPs", BY_IP_ATOMIC_APPLY),
    ("Pod", "status.hostIPs", BY_IP_ATOMIC_APPLY),
];

/// Kinds whose `status.conditions` are keyed by `type`.
const BUILTIN_KINDS: &[&str] = &[
    "Pod",
    "PodTemplate",
    "ReplicationController",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "Job",
    "CronJob",
    "Service",
    "Endpoints",
    "ConfigMap",
    "Secret",
    "Namespace",
    "Node",
    "ServiceAccount",
    "Event",
    "Lease",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Ingress",
    "NetworkPolicy",
    "HorizontalPodAutoscaler",
    "PodDisruptionBudget",
    "CustomResourceDefinition",
    "APIService",
];

/// Where the pod spec sits in objects of `kind`, if they have one.
fn pod_spec_root(kind: &str) -> Option<&'static [&'static str]> {
    match kind {
        "Pod" => Some(&["spec"]),
        "PodTemplate" => Some(&["template", "spec"]),
        "Deployment"
        | "StatefulSet"
        | "DaemonSet"
        | "ReplicaSet"
        | "ReplicationController"
        | "Job" => Some(&["spec", "template", "spec"]),
        "CronJob" => Some(&["spec", "jobTemplate", "spec", "template", "spec"]),
        _ => None,
    }
}

/// Looks `name` up in a table of rules.
fn find_rule(table: &[(&str, ListRule)], name: &str) -> Option<ListRule> {
    table
        .iter()
        .find(|(field, _)| *field == name)
        .map(|(_, rule)| *rule)
}

/// The strategies of the list at field path `segments` (no indices) in objects of `kind`.
fn list_rule(kind: Option<&str>, segments: &[String]) -> ListRule {
    if let [first, field] = segments
        && first == "metadata"
    {
        return find_rule(METADATA_RULES, field).unwrap_or(ATOMIC);
    }
    let Some(kind) = kind else { return ATOMIC };
    if BUILTIN_KINDS.contains(&kind) && segments == ["status", "conditions"] {
        return ListRule {
            smp: SmpList::Keyed("type"),
            ssa: SsaList::Map(&["type"]),
        };
    }
    let dotted = segments.join(".");
    if let Some((_, _, rule)) = KIND_RULES
        .iter()
        .find(|(rule_kind, path, _)| *rule_kind == kind && *path == dotted)
    {
        return *rule;
    }
    if let Some(root) = pod_spec_root(kind)
        && segments.len() > root.len()
        && segments.iter().zip(root.iter()).all(|(a, b)| a == b)
    {
        match segments.get(root.len()..) {
            Some([field]) => return find_rule(POD_SPEC_RULES, field).unwrap_or(ATOMIC),
            Some([container, field]) if CONTAINER_LISTS.contains(&container.as_str()) => {
                return find_rule(CONTAINER_RULES, field).unwrap_or(ATOMIC);
            }
            _ => {}
        }
    }
    ATOMIC
}

/// A field path for messages, such as `spec.containers`.
fn show(segments: &[String]) -> String {
    if segments.is_empty() {
        "the object root".to_string()
    } else {
        segments.join(".")
    }
}

// ---------------------------------------------------------------------------------------
// Strategic merge patch
// ---------------------------------------------------------------------------------------

/// Kubernetes strategic merge patch for built-in kinds. `kind` is the object's kind ("Pod", "Deployment", "Service", "ConfigMap", "Secret", "Namespace", "ServiceAccount", "Event", "Lease", ...).
///
/// Atomic: on error `target` is unchanged.
pub(crate) fn strategic_merge_patch(
    kind: &str,
    target: &mut Value,
    patch: &Value,
) -> Result<(), PatchError> {
    let Value::Object(patch) = patch else {
        return Err(bad("strategic merge patch must be a JSON object"));
    };
    let original = match target {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    let merged = Smp { kind }.merge_map(original, patch, &mut Vec::new())?;
    *target = Value::Object(merged);
    Ok(())
}

/// Strategic merge patch state: the kind that selects the list table.
struct Smp<'k> {
    /// The object's kind.
    kind: &'k str,
}

/// Splits `key` as `<prefix>/<field>`: `Ok(None)` when `key` has another prefix.
fn directive_field<'a>(
    key: &'a str,
    prefix: &str,
    error: &str,
) -> Result<Option<&'a str>, PatchError> {
    let Some(rest) = key.strip_prefix(prefix) else {
        return Ok(None);
    };
    match rest.strip_prefix('/') {
        Some(field) if !field.is_empty() => Ok(Some(field)),
        _ => Err(bad(format!(
            "{error}: {key:?} must be followed by /<field name>"
        ))),
    }
}

/// The JSON type of a value, for the list element checks.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

/// Removes directives and `null` map values from a patch value that is stored as is.
/// Returns `None` when the value is a `$patch: delete` map or a bare `$patch` marker.
fn clean(value: &Value) -> Option<Value> {
    match value {
        Value::Object(map) => {
            let is_marker = map.len() == 1 && map.contains_key(PATCH_DIRECTIVE);
            if is_marker || map.get(PATCH_DIRECTIVE).and_then(Value::as_str) == Some("delete") {
                return None;
            }
            Some(Value::Object(clean_map(map)))
        }
        Value::Array(items) => Some(Value::Array(clean_list(items))),
        other => Some(other.clone()),
    }
}

/// [`clean`] for the entries of a map.
fn clean_map(map: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, value) in map {
        if is_directive_key(key) || value.is_null() {
            continue;
        }
        if let Some(value) = clean(value) {
            out.insert(key.clone(), value);
        }
    }
    out
}

/// [`clean`] for the items of a list.
fn clean_list(items: &[Value]) -> Vec<Value> {
    items.iter().filter_map(clean).collect()
}

/// Whether a map key is a strategic merge patch directive.
fn is_directive_key(key: &str) -> bool {
    key == PATCH_DIRECTIVE
        || key == RETAIN_KEYS
        || key.starts_with(SET_ELEMENT_ORDER)
        || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
}

/// Position of the item identified by `id` in a list of identities.
fn position(order: &[Option<Value>], id: Option<&Value>) -> Option<usize> {
    let id = id?;
    order
        .iter()
        .position(|candidate| candidate.as_ref() == Some(id))
}

/// The identity of a list item: its merge key value, or the item itself for scalars.
fn identity<'v>(item: &'v Value, key: Option<&str>) -> Option<&'v Value> {
    match key {
        Some(key) => item.get(key),
        None => Some(item),
    }
}

/// Identities of all items of a list.
fn identities(items: &[Value], key: Option<&str>) -> Vec<Option<Value>> {
    items
        .iter()
        .map(|item| identity(item, key).cloned())
        .collect()
}

/// Kubernetes' `normalizeElementOrder`: sorts the patch items by `patch_order` and the
/// server-only items by `server_order`, then interleaves them (`mergeSortedSlice`).
fn normalize_order(
    mut patch_items: Vec<Value>,
    mut server_only: Vec<Value>,
    patch_order: &[Option<Value>],
    server_order: &[Option<Value>],
    key: Option<&str>,
) -> Vec<Value> {
    patch_items
        .sort_by_key(|item| position(patch_order, identity(item, key)).unwrap_or(usize::MAX));
    server_only
        .sort_by_key(|item| position(server_order, identity(item, key)).unwrap_or(usize::MAX));
    let mut out = Vec::with_capacity(patch_items.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = patch_items.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => {
                let li = position(server_order, identity(l, key));
                let ri = position(server_order, identity(r, key));
                matches!((li, ri), (Some(li), Some(ri)) if li < ri)
            }
        };
        let next = if take_left { left.next() } else { right.next() };
        if let Some(item) = next {
            out.push(item);
        }
    }
    out
}

/// The strategic merge algorithm.
impl Smp<'_> {
    /// The strategic merge strategy of the list at `segments`.
    fn rule(&self, segments: &[String]) -> SmpList {
        list_rule(Some(self.kind), segments).smp
    }

    /// Kubernetes' `mergeMap`: merges `patch` into `original`.
    fn merge_map(
        &self,
        mut original: Map<String, Value>,
        patch: &Map<String, Value>,
        segments: &mut Vec<String>,
    ) -> Result<Map<String, Value>, PatchError> {
        if let Some(directive) = patch.get(PATCH_DIRECTIVE) {
            match directive.as_str() {
                Some("replace") => return Ok(clean_map(patch)),
                Some("delete") => return Ok(Map::new()),
                Some("merge") => {}
                _ => {
                    return Err(bad(format!(
                        "unknown patch type {directive} in map at {}",
                        show(segments)
                    )));
                }
            }
        }
        if let Some(retain) = patch.get(RETAIN_KEYS) {
            apply_retain_keys(&mut original, patch, retain, segments)?;
        }
        let mut ordered: Vec<&str> = Vec::new();
        for (key, order) in patch {
            let Some(field) = directive_field(
                key,
                SET_ELEMENT_ORDER,
                "invalid patch format of setElementOrder list",
            )?
            else {
                continue;
            };
            segments.push(field.to_string());
            let result =
                self.set_element_order(&mut original, field, order, patch.get(field), segments);
            segments.pop();
            if result? {
                ordered.push(field);
            }
        }
        for (key, value) in patch {
            if key == PATCH_DIRECTIVE || key == RETAIN_KEYS || key.starts_with(SET_ELEMENT_ORDER) {
                continue;
            }
            let (field, delete_list) = match directive_field(
                key,
                DELETE_FROM_PRIMITIVE_LIST,
                "invalid patch format of primitive list",
            )? {
                Some(field) => (field, true),
                None => (key.as_str(), false),
            };
            if !delete_list && ordered.contains(&field) {
                continue;
            }
            segments.push(field.to_string());
            let result = self.merge_field(&mut original, field, value, delete_list, segments);
            segments.pop();
            result?;
        }
        Ok(original)
    }

    /// Merges one patch entry into `original[field]`.
    fn merge_field(
        &self,
        original: &mut Map<String, Value>,
        field: &str,
        value: &Value,
        delete_list: bool,
        segments: &mut Vec<String>,
    ) -> Result<(), PatchError> {
        if delete_list {
            let Value::Array(to_delete) = value else {
                return Err(bad(format!(
                    "invalid patch format of primitive list: $deleteFromPrimitiveList/{field} must be a list"
                )));
            };
            if let Some(Value::Array(current)) = original.get_mut(field) {
                current.retain(|item| !to_delete.contains(item));
            }
            return Ok(());
        }
        match value {
            Value::Null => {
                original.shift_remove(field);
            }
            Value::Object(patch) => {
                if let Some(Value::Object(current)) = original.get_mut(field) {
                    let current = std::mem::take(current);
                    let merged = self.merge_map(current, patch, segments)?;
                    original.insert(field.to_string(), Value::Object(merged));
                } else if patch.get(PATCH_DIRECTIVE).and_then(Value::as_str) == Some("delete") {
                    original.shift_remove(field);
                } else {
                    let merged = self.merge_map(Map::new(), patch, segments)?;
                    original.insert(field.to_string(), Value::Object(merged));
                }
            }
            Value::Array(patch) => {
                let rule = self.rule(segments);
                let current = match original.get_mut(field) {
                    Some(Value::Array(current)) => std::mem::take(current),
                    _ => Vec::new(),
                };
                let merged = self.merge_list(current, patch, rule, segments)?;
                original.insert(field.to_string(), Value::Array(merged));
            }
            scalar => {
                original.insert(field.to_string(), scalar.clone());
            }
        }
        Ok(())
    }

    /// Kubernetes' `mergeSlice`: merges a patch list into a live list.
    fn merge_list(
        &self,
        original: Vec<Value>,
        patch: &[Value],
        rule: SmpList,
        segments: &mut Vec<String>,
    ) -> Result<Vec<Value>, PatchError> {
        let merge_key = match rule {
            SmpList::Atomic => return Ok(clean_list(patch)),
            SmpList::Primitive => None,
            SmpList::Keyed(key) => Some(key),
        };
        if original.is_empty() && patch.is_empty() {
            return Ok(original);
        }
        let element_type = list_element_type(&original, patch, segments)?;
        if element_type != "map" {
            let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
            for item in original.iter().chain(patch) {
                if !merged.contains(item) {
                    merged.push(item.clone());
                }
            }
            let (in_patch, server_only): (Vec<Value>, Vec<Value>) =
                merged.into_iter().partition(|item| patch.contains(item));
            let patch_order = identities(patch, None);
            let server_order = identities(&original, None);
            return Ok(normalize_order(
                in_patch,
                server_only,
                &patch_order,
                &server_order,
                None,
            ));
        }
        let Some(key) = merge_key else {
            return Err(bad(format!(
                "cannot merge lists without merge key for {}",
                show(segments)
            )));
        };
        let mut original = original;
        let mut plain: Vec<&Map<String, Value>> = Vec::new();
        let mut replace = false;
        for item in patch {
            let Value::Object(map) = item else {
                return Err(bad(format!(
                    "list element types are not identical in {}",
                    show(segments)
                )));
            };
            let Some(directive) = map.get(PATCH_DIRECTIVE) else {
                plain.push(map);
                continue;
            };
            match directive.as_str() {
                Some("delete") => {
                    let Some(value) = map.get(key) else {
                        return Err(missing_merge_key(segments, key));
                    };
                    original.retain(|live| live.get(key) != Some(value));
                }
                Some("replace") => replace = true,
                // An item marked `merge` is merged like any other; a bare marker is a no-op.
                Some("merge") if map.contains_key(key) => plain.push(map),
                Some("merge") => {}
                _ => {
                    return Err(bad(format!(
                        "unknown patch type {directive} in list {}",
                        show(segments)
                    )));
                }
            }
        }
        if replace {
            return Ok(plain
                .iter()
                .map(|map| Value::Object(clean_map(map)))
                .collect());
        }
        let server_order = identities(&original, Some(key));
        let mut patch_order = Vec::with_capacity(plain.len());
        for map in &plain {
            let Some(value) = map.get(key) else {
                return Err(missing_merge_key(segments, key));
            };
            patch_order.push(Some(value.clone()));
            match original
                .iter()
                .position(|live| live.get(key) == Some(value))
            {
                Some(index) => {
                    let current = match original.get_mut(index) {
                        Some(Value::Object(current)) => std::mem::take(current),
                        _ => Map::new(),
                    };
                    let merged = self.merge_map(current, map, segments)?;
                    if let Some(slot) = original.get_mut(index) {
                        *slot = Value::Object(merged);
                    }
                }
                None => {
                    let merged = self.merge_map(Map::new(), map, segments)?;
                    original.push(Value::Object(merged));
                }
            }
        }
        let (in_patch, server_only): (Vec<Value>, Vec<Value>) = original
            .into_iter()
            .partition(|item| position(&patch_order, item.get(key)).is_some());
        Ok(normalize_order(
            in_patch,
            server_only,
            &patch_order,
            &server_order,
            Some(key),
        ))
    }

    /// Kubernetes' `mergePatchIntoOriginal` for one `$setElementOrder/<field>` directive.
    /// Returns whether the list was produced (so the main loop must skip `field`).
    fn set_element_order(
        &self,
        original: &mut Map<String, Value>,
        field: &str,
        order: &Value,
        patch_list: Option<&Value>,
        segments: &mut Vec<String>,
    ) -> Result<bool, PatchError> {
        let format_error = || {
            bad(format!(
                "invalid patch format of setElementOrder list: $setElementOrder/{field} and {field} must be lists"
            ))
        };
        let Value::Array(order) = order else {
            return Err(format_error());
        };
        let patch_list = match patch_list {
            None => None,
            Some(Value::Array(items)) => Some(items.as_slice()),
            Some(_) => return Err(format_error()),
        };
        let rule = self.rule(segments);
        let key = match rule {
            SmpList::Keyed(key) => Some(key),
            _ => None,
        };
        if let Some(patch_list) = patch_list {
            validate_set_element_order(patch_list, order, key, segments)?;
        }
        let live = match original.get(field) {
            Some(Value::Array(items)) => Some(items.clone()),
            _ => None,
        };
        let merged = match (live.clone(), patch_list) {
            (Some(live), None) => live,
            (live, Some(patch_list)) => {
                self.merge_list(live.unwrap_or_default(), patch_list, rule, segments)?
            }
            (None, None) => return Ok(false),
        };
        if rule == SmpList::Atomic {
            original.insert(field.to_string(), Value::Array(merged));
            return Ok(true);
        }
        let order_ids = identities(order, key);
        let (in_order, server_only): (Vec<Value>, Vec<Value>) = merged
            .into_iter()
            .partition(|item| position(&order_ids, identity(item, key)).is_some());
        let server_order = identities(live.as_deref().unwrap_or_default(), key);
        let sorted = normalize_order(in_order, server_only, &order_ids, &server_order, key);
        original.insert(field.to_string(), Value::Array(sorted));
        Ok(true)
    }
}

/// The error for a list item without its merge key.
fn missing_merge_key(segments: &[String], key: &str) -> PatchError {
    bad(format!(
        "an item of {} does not contain the declared merge key {key:?}",
        show(segments)
    ))
}

/// Kubernetes' `sliceElementType`: all items must have one JSON type, and not be lists.
fn list_element_type(
    original: &[Value],
    patch: &[Value],
    segments: &[String],
) -> Result<&'static str, PatchError> {
    let mut found: Option<&'static str> = None;
    for item in original.iter().chain(patch) {
        let kind = json_type(item);
        if kind == "list" {
            return Err(PatchError::Invalid(format!(
                "lists of lists are not supported (at {})",
                show(segments)
            )));
        }
        match found {
            None => found = Some(kind),
            Some(previous) if previous != kind => {
                return Err(bad(format!(
                    "list element types are not identical in {}: {previous} and {kind}",
                    show(segments)
                )));
            }
            Some(_) => {}
        }
    }
    Ok(found.unwrap_or("null"))
}

/// Kubernetes' `applyRetainKeysDirective`.
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    retain: &Value,
    segments: &[String],
) -> Result<(), PatchError> {
    let Value::Array(retain) = retain else {
        return Err(bad(format!(
            "invalid patch format of retainKeys: $retainKeys at {} must be a list",
            show(segments)
        )));
    };
    let keeps = |key: &str| retain.iter().any(|kept| kept.as_str() == Some(key));
    for (key, value) in patch {
        if value.is_null() || is_directive_key(key) {
            continue;
        }
        if !keeps(key) {
            return Err(bad(format!(
                "invalid patch format of retainKeys: {key:?} is in the patch but not in $retainKeys at {}",
                show(segments)
            )));
        }
    }
    original.retain(|key, _| keeps(key));
    Ok(())
}

/// Kubernetes' `validatePatchWithSetOrderList`: the patch list must follow the order list.
fn validate_set_element_order(
    patch_list: &[Value],
    order: &[Value],
    key: Option<&str>,
    segments: &[String],
) -> Result<(), PatchError> {
    if patch_list.is_empty() || order.is_empty() {
        return Ok(());
    }
    let items: Vec<&Value> = patch_list
        .iter()
        .filter(|item| {
            key.is_none() || item.get(PATCH_DIRECTIVE).and_then(Value::as_str) != Some("delete")
        })
        .collect();
    let (mut patch_index, mut order_index) = (0, 0);
    while let (Some(item), Some(wanted)) = (items.get(patch_index), order.get(order_index)) {
        if item.get(PATCH_DIRECTIVE).is_some() {
            patch_index += 1;
            continue;
        }
        let equal = match key {
            None => item == &wanted,
            Some(key) => match (item.get(key), wanted.get(key)) {
                (Some(a), Some(b)) => a == b,
                _ => return Err(missing_merge_key(segments, key)),
            },
        };
        if equal {
            patch_index += 1;
        }
        order_index += 1;
    }
    if patch_index < items.len() {
        return Err(bad(format!(
            "the order of the items in {} doesn't match $setElementOrder/{}",
            show(segments),
            segments.last().map(String::as_str).unwrap_or_default()
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Field sets (structured-merge-diff paths and the FieldsV1 encoding)
// ---------------------------------------------------------------------------------------

/// One path element, kept in its FieldsV1 text form (`f:name`, `k:{..}`, `v:..`, `i:3`);
/// ordered as structured-merge-diff orders them: fields, keys, values, indices.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Pe {
    /// 0 for a field, 1 for a key, 2 for a value, 3 for an index, 4 for an unkeyable item.
    rank: u8,
    /// The FieldsV1 text, with canonical JSON for keys and values.
    text: String,
}

/// A field path.
type FieldPath = Vec<Pe>;
/// A set of field paths.
type FieldSet = BTreeSet<FieldPath>;

/// JSON text with object keys sorted, as structured-merge-diff writes keys and values.
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let inner: Vec<String> = entries
                .into_iter()
                .map(|(key, value)| format!("{}:{}", Value::String(key.clone()), canonical(value)))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", inner.join(","))
        }
        scalar => scalar.to_string(),
    }
}

/// Constructors, parsing and display of path elements.
impl Pe {
    /// A field name element.
    fn field(name: &str) -> Pe {
        Pe {
            rank: 0,
            text: format!("f:{name}"),
        }
    }

    /// A keyed list item element.
    fn key(fields: &Map<String, Value>) -> Pe {
        Pe {
            rank: 1,
            text: format!("k:{}", canonical(&Value::Object(fields.clone()))),
        }
    }

    /// A set item element.
    fn value(value: &Value) -> Pe {
        Pe {
            rank: 2,
            text: format!("v:{}", canonical(value)),
        }
    }

    /// A list index element.
    fn index(index: usize) -> Pe {
        Pe {
            rank: 3,
            text: format!("i:{index}"),
        }
    }

    /// A live list item that cannot be keyed: never matches anything applied.
    fn unkeyable(index: usize) -> Pe {
        Pe {
            rank: 4,
            text: format!("#{index}"),
        }
    }

    /// Parses a FieldsV1 key, normalizing the JSON of keys and values.
    fn parse(text: &str) -> Option<Pe> {
        let (kind, rest) = (text.get(..2)?, text.get(2..)?);
        match kind {
            "f:" => Some(Pe::field(rest)),
            "k:" => match serde_json::from_str::<Value>(rest).ok()? {
                Value::Object(map) => Some(Pe::key(&map)),
                _ => None,
            },
            "v:" => Some(Pe::value(&serde_json::from_str::<Value>(rest).ok()?)),
            "i:" => Some(Pe::index(rest.parse().ok()?)),
            _ => None,
        }
    }

    /// The field name of a field element.
    fn field_name(&self) -> Option<&str> {
        if self.rank == 0 {
            self.text.get(2..)
        } else {
            None
        }
    }

    /// The key fields of a key element.
    fn key_fields(&self) -> Option<Map<String, Value>> {
        if self.rank != 1 {
            return None;
        }
        match serde_json::from_str::<Value>(self.text.get(2..)?).ok()? {
            Value::Object(map) => Some(map),
            _ => None,
        }
    }

    /// The element as structured-merge-diff prints it: `.name`, `[name="x"]`, `[="v"]`, `[3]`.
    fn display(&self) -> String {
        let rest = self.text.get(2..).unwrap_or_default();
        match self.rank {
            0 => format!(".{rest}"),
            1 => {
                let fields = self.key_fields().unwrap_or_default();
                let mut parts: Vec<(String, String)> = fields
                    .iter()
                    .map(|(name, value)| (name.clone(), canonical(value)))
                    .collect();
                parts.sort();
                let inner: Vec<String> = parts
                    .into_iter()
                    .map(|(name, value)| format!("{name}={value}"))
                    .collect();
                format!("[{}]", inner.join(","))
            }
            2 => format!("[={rest}]"),
            3 => format!("[{rest}]"),
            _ => format!("[{}]", self.text),
        }
    }
}

/// A path as structured-merge-diff prints it, such as `.spec.containers[name="app"].image`.
fn display_path(path: &[Pe]) -> String {
    path.iter().map(Pe::display).collect()
}

/// A node of the FieldsV1 tree.
#[derive(Default)]
struct Node {
    /// Whether the path to this node is in the set.
    member: bool,
    /// Child elements.
    children: BTreeMap<Pe, Node>,
}

/// Encodes a field set as a FieldsV1 object.
fn encode_fields(set: &FieldSet) -> Value {
    let mut root = Node::default();
    for path in set {
        let mut node = &mut root;
        for pe in path {
            node = node.children.entry(pe.clone()).or_default();
        }
        node.member = true;
    }
    encode_node(&root, false)
}

/// Encodes one FieldsV1 node; `.` marks a member that also has children.
fn encode_node(node: &Node, include_self: bool) -> Value {
    let mut map = Map::new();
    if include_self && node.member && !node.children.is_empty() {
        map.insert(".".to_string(), Value::Object(Map::new()));
    }
    for (pe, child) in &node.children {
        let value = if child.children.is_empty() {
            Value::Object(Map::new())
        } else {
            encode_node(child, true)
        };
        map.insert(pe.text.clone(), value);
    }
    Value::Object(map)
}

/// Decodes a FieldsV1 object into `out`; `None` when it is malformed.
fn decode_fields(value: &Value, prefix: &mut FieldPath, out: &mut FieldSet) -> Option<()> {
    let Value::Object(map) = value else {
        return None;
    };
    for (key, child) in map {
        if key == "." {
            if !prefix.is_empty() {
                out.insert(prefix.clone());
            }
            continue;
        }
        prefix.push(Pe::parse(key)?);
        let result = match child {
            Value::Object(inner) if inner.is_empty() => {
                out.insert(prefix.clone());
                Some(())
            }
            _ => decode_fields(child, prefix, out),
        };
        prefix.pop();
        result?;
    }
    Some(())
}

/// Every non-empty prefix of every path of `set`.
fn closure<'a>(sets: impl IntoIterator<Item = &'a FieldSet>) -> FieldSet {
    let mut out = FieldSet::new();
    for set in sets {
        for path in set {
            for end in 1..=path.len() {
                if let Some(prefix) = path.get(..end) {
                    out.insert(prefix.to_vec());
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Managed fields entries
// ---------------------------------------------------------------------------------------

/// The annotation of client-side `kubectl apply`.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The manager of `kubectl apply --server-side`, the only one that Kubernetes lets take
/// over client-side-applied fields and that keeps [`LAST_APPLIED`] up to date.
const KUBECTL: &str = "kubectl";

/// The limit on the total size of an object's annotations (keys and values), in bytes.
const MAX_ANNOTATIONS_SIZE: usize = 256 * 1024;

/// Metadata fields set by the server: dropped from applied objects, copied from live.
const SERVER_OWNED_METADATA: &[&str] = &[
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Metadata fields that are never in a manager's set (Kubernetes' `stripMetaManager`).
const IGNORED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "clusterName",
    "generation",
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Whether a path is never tracked in managed fields.
fn is_ignored_path(path: &[Pe]) -> bool {
    let names: Vec<Option<&str>> = path.iter().take(2).map(Pe::field_name).collect();
    match names.as_slice() {
        [Some("apiVersion" | "kind" | "metadata")] => true,
        [Some("metadata"), Some("managedFields")] => true,
        [Some("metadata"), Some(field)] => path.len() == 2 && IGNORED_METADATA.contains(field),
        _ => false,
    }
}

/// Whether a path can be owned: not an ignored one, and with no live list item that has no
/// key (such an item has no FieldsV1 name).
fn is_trackable(path: &[Pe]) -> bool {
    !is_ignored_path(path) && path.iter().all(|pe| pe.rank != 4)
}

/// One entry of `metadata.managedFields`.
#[derive(Clone, Debug)]
struct Entry {
    /// The manager name.
    manager: String,
    /// `Apply` or `Update`.
    operation: String,
    /// The apiVersion the fields were recorded with.
    api_version: String,
    /// The subresource, empty for the main resource.
    subresource: String,
    /// When the entry last changed the object.
    time: Option<String>,
    /// The owned fields.
    set: FieldSet,
}

/// Decoding, identity, display and encoding of entries.
impl Entry {
    /// Decodes an entry; `None` when it is malformed.
    fn decode(value: &Value) -> Option<Entry> {
        let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
        let operation = text("operation")?;
        if operation != "Apply" && operation != "Update" {
            return None;
        }
        if value.get("fieldsType").and_then(Value::as_str) != Some("FieldsV1") {
            return None;
        }
        let mut set = FieldSet::new();
        match value.get("fieldsV1") {
            None | Some(Value::Null) => {}
            Some(fields) => decode_fields(fields, &mut Vec::new(), &mut set)?,
        }
        Some(Entry {
            manager: text("manager").unwrap_or_default(),
            operation,
            api_version: text("apiVersion").filter(|v| !v.is_empty())?,
            subresource: text("subresource").unwrap_or_default(),
            time: text("time"),
            set,
        })
    }

    /// Kubernetes' `BuildManagerIdentifier`: the apiVersion counts only for updates.
    fn same_manager(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == "Apply" || self.api_version == other.api_version)
    }

    /// Kubernetes' `printManager`.
    fn describe(&self) -> String {
        let mut out = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            out.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == "Update" {
            out.push_str(&format!(" using {}", self.api_version));
            if let Some(time) = &self.time {
                out.push_str(&format!(" at {time}"));
            }
        }
        out
    }

    /// Encodes the entry in the field order of `metav1.ManagedFieldsEntry` (an empty
    /// manager is left out, as Go's `omitempty` does).
    fn encode(&self) -> Value {
        let mut map = Map::new();
        if !self.manager.is_empty() {
            map.insert("manager".into(), Value::String(self.manager.clone()));
        }
        map.insert("operation".into(), Value::String(self.operation.clone()));
        map.insert("apiVersion".into(), Value::String(self.api_version.clone()));
        if let Some(time) = &self.time {
            map.insert("time".into(), Value::String(time.clone()));
        }
        map.insert("fieldsType".into(), Value::String("FieldsV1".into()));
        map.insert("fieldsV1".into(), encode_fields(&self.set));
        if !self.subresource.is_empty() {
            map.insert(
                "subresource".into(),
                Value::String(self.subresource.clone()),
            );
        }
        Value::Object(map)
    }
}

/// Decodes `metadata.managedFields`, dropping malformed entries and merging duplicates.
fn decode_entries(object: &Value) -> Vec<Entry> {
    match object.pointer("/metadata/managedFields") {
        Some(Value::Array(items)) => decode_entry_list(items, false).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Decodes a list of managed-fields entries, merging duplicates; a malformed entry is
/// dropped, or makes the whole list `None` when `strict`.
fn decode_entry_list(items: &[Value], strict: bool) -> Option<Vec<Entry>> {
    let mut entries: Vec<Entry> = Vec::new();
    for item in items {
        let Some(entry) = Entry::decode(item) else {
            if strict {
                return None;
            }
            continue;
        };
        match entries.iter_mut().find(|known| known.same_manager(&entry)) {
            Some(known) => known.set.extend(entry.set),
            None => entries.push(entry),
        }
    }
    Some(entries)
}

/// Sorts entries as Kubernetes sorts `metadata.managedFields`: by operation (`Apply` first),
/// time, manager, apiVersion and subresource.
fn sort_entries(entries: &mut [Entry]) {
    entries.sort_by(|a, b| {
        (
            &a.operation,
            a.time.as_deref().unwrap_or_default(),
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                b.time.as_deref().unwrap_or_default(),
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
}

/// Stores `entries` as `metadata.managedFields` (removed when there are none).
fn store_entries(object: &mut Value, entries: &[Entry]) {
    let Value::Object(map) = object else {
        return;
    };
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(meta) = meta else {
        return;
    };
    if entries.is_empty() {
        meta.shift_remove("managedFields");
    } else {
        meta.insert(
            "managedFields".to_string(),
            Value::Array(entries.iter().map(Entry::encode).collect()),
        );
    }
}

// ---------------------------------------------------------------------------------------
// Server-side apply
// ---------------------------------------------------------------------------------------

/// Server-side apply (simplified, documented in the module docs): see below.
///
/// `kind` selects the list table (`None` for custom resources), `live` is the stored
/// object (`None` to create it), `applied` the apply configuration, `now` the RFC 3339
/// time written into the manager's entry. Returns the object to store, with its
/// `metadata.managedFields`.
pub(crate) fn server_side_apply(
    kind: Option<&str>,
    live: Option<&Value>,
    applied: &Value,
    field_manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, PatchError> {
    if field_manager.is_empty() {
        return Err(bad("fieldManager is required for apply patches"));
    }
    let Value::Object(applied_map) = applied else {
        return Err(bad("apply patch must be a JSON object"));
    };
    let required = |key: &str| {
        applied_map
            .get(key)
            .and_then(Value::as_str)
            .filter(|value| !value.is_empty())
            .ok_or_else(|| bad(format!("apply patch must set {key}")))
    };
    let api_version = required("apiVersion")?;
    let applied_kind = required("kind")?;
    if let Some(kind) = kind
        && kind != applied_kind
    {
        return Err(bad(format!(
            "apply patch kind {applied_kind:?} does not match the object's kind {kind:?}"
        )));
    }
    let ssa = Ssa { kind };

    let mut config = applied.clone();
    strip_server_metadata(&mut config);
    let mut config_set = FieldSet::new();
    ssa.apply_set(&config, &mut Vec::new(), &mut Vec::new(), &mut config_set)
        .map_err(bad)?;
    config_set.retain(|path| !is_ignored_path(path));

    let live_object = live.filter(|value| value.is_object());
    let mut live_content = live_object
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    if let Some(Value::Object(meta)) = live_content.get_mut("metadata") {
        meta.shift_remove("managedFields");
    }
    let mut entries = live_object.map(decode_entries).unwrap_or_default();
    if live_object.is_some() && entries.is_empty() {
        let mut set = FieldSet::new();
        ssa.all_paths(&live_content, &mut Vec::new(), &mut Vec::new(), &mut set);
        set.retain(|path| is_trackable(path));
        if !set.is_empty() {
            let live_version = live_content.get("apiVersion").and_then(Value::as_str);
            entries.push(Entry {
                manager: "before-first-apply".into(),
                operation: "Update".into(),
                api_version: live_version.unwrap_or(api_version).to_string(),
                subresource: String::new(),
                time: Some(now.to_string()),
                set,
            });
        }
    }

    let me = Entry {
        manager: field_manager.to_string(),
        operation: "Apply".into(),
        api_version: api_version.to_string(),
        subresource: String::new(),
        time: None,
        set: config_set.clone(),
    };
    let previous = entries
        .iter()
        .position(|entry| entry.same_manager(&me))
        .map(|index| entries.remove(index));

    let mut result = ssa
        .merge(&live_content, &config, &mut Vec::new())
        .map_err(bad)?;

    if let Some(last) = previous
        .as_ref()
        .map(|entry| &entry.set)
        .filter(|set| !set.is_empty())
    {
        let owned = closure(entries.iter().map(|entry| &entry.set).chain([&config_set]));
        let candidates: Vec<FieldPath> = closure([last]).difference(&owned).cloned().collect();
        let mut removals: Vec<FieldPath> = Vec::new();
        for path in candidates {
            if removals.iter().any(|done| path.starts_with(done))
                || is_key_of_kept_item(&path, &owned)
            {
                continue;
            }
            removals.push(path);
        }
        for path in &removals {
            ssa.remove_path(&mut result, path, &mut Vec::new());
        }
    }

    let mut comparison = Comparison::default();
    ssa.compare(
        &live_content,
        &result,
        &mut Vec::new(),
        &mut Vec::new(),
        &mut comparison,
    );
    let mut changed: FieldSet = comparison
        .modified
        .union(&comparison.added)
        .cloned()
        .collect();
    // Fields removed because the applied object set them (or a parent) to something else,
    // such as `null`, count as modified.
    changed.extend(
        comparison
            .removed
            .iter()
            .filter(|path| {
                (1..=path.len()).any(|end| {
                    path.get(..end)
                        .is_some_and(|prefix| config_set.contains(prefix))
                })
            })
            .cloned(),
    );

    let mut conflicts: Vec<(usize, FieldSet)> = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let overlap: FieldSet = entry.set.intersection(&changed).cloned().collect();
        if !overlap.is_empty() {
            conflicts.push((index, overlap));
        }
    }
    if !conflicts.is_empty() && !force {
        // Kubernetes' `lastAppliedManager`: for `kubectl`, fields that the last client-side
        // apply set, and that still have those values, do not conflict; when nothing else
        // does, the apply is forced.
        let allowed = (field_manager == KUBECTL)
            .then(|| ssa.last_applied_fields(&live_content, api_version))
            .flatten()
            .unwrap_or_default();
        let remaining: Vec<(usize, FieldSet)> = conflicts
            .iter()
            .map(|(index, set)| (*index, set.difference(&allowed).cloned().collect()))
            .filter(|(_, set): &(usize, FieldSet)| !set.is_empty())
            .collect();
        if !remaining.is_empty() {
            return Err(conflict_error(&entries, &remaining));
        }
    }
    for (index, overlap) in &conflicts {
        if let Some(entry) = entries.get_mut(*index) {
            entry.set.retain(|path| !overlap.contains(path));
        }
    }
    for entry in &mut entries {
        entry.set.retain(|path| !comparison.removed.contains(path));
    }
    entries.retain(|entry| !entry.set.is_empty());

    if field_manager == KUBECTL {
        sync_last_applied(&mut result, applied);
    }

    let object_changed = live_object.is_none() || result != live_content;
    if !config_set.is_empty() {
        let time = match previous.and_then(|entry| entry.time) {
            Some(time) if !object_changed => time,
            _ => now.to_string(),
        };
        entries.push(Entry {
            time: Some(time),
            ..me
        });
    }
    sort_entries(&mut entries);

    finish_metadata(&mut result, live_object, &entries);
    Ok(result)
}

/// Removes `metadata.managedFields` and the server-owned metadata from an applied object.
fn strip_server_metadata(object: &mut Value) {
    if let Some(Value::Object(meta)) = object.get_mut("metadata") {
        meta.shift_remove("managedFields");
        for field in SERVER_OWNED_METADATA {
            meta.shift_remove(*field);
        }
    }
}

/// Kubernetes' `lastAppliedUpdater`: after an apply by `kubectl`, an existing
/// last-applied-configuration annotation is rewritten to the applied object (without the
/// annotation), as Go's JSON encoder writes it; it is dropped if the annotations grow
/// beyond their 256 KiB limit.
fn sync_last_applied(result: &mut Value, applied: &Value) {
    let Some(Value::Object(annotations)) = result.pointer_mut("/metadata/annotations") else {
        return;
    };
    if annotations
        .get(LAST_APPLIED)
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return;
    }
    let mut config = applied.clone();
    if let Some(Value::Object(own)) = config.pointer_mut("/metadata/annotations") {
        own.shift_remove(LAST_APPLIED);
    }
    let text = format!("{}\n", go_json(&config));
    annotations.insert(LAST_APPLIED.to_string(), Value::String(text));
    let size: usize = annotations
        .iter()
        .map(|(key, value)| key.len() + value.as_str().map_or(0, str::len))
        .sum();
    if size > MAX_ANNOTATIONS_SIZE {
        annotations.shift_remove(LAST_APPLIED);
    }
}

/// Copies the server-owned metadata (and name/namespace) from `live` and stores the
/// managed fields.
fn finish_metadata(result: &mut Value, live: Option<&Value>, entries: &[Entry]) {
    let Value::Object(object) = result else {
        return;
    };
    let meta_value = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta_value.is_object() {
        *meta_value = Value::Object(Map::new());
    }
    let Value::Object(meta) = meta_value else {
        return;
    };
    let live_meta = live.and_then(|live| live.get("metadata"));
    for field in SERVER_OWNED_METADATA {
        match live_meta.and_then(|live_meta| live_meta.get(*field)) {
            Some(value) => {
                meta.insert((*field).to_string(), value.clone());
            }
            None => {
                meta.shift_remove(*field);
            }
        }
    }
    if let Some(live_meta) = live_meta {
        for field in ["name", "namespace"] {
            if let Some(value) = live_meta.get(field) {
                meta.insert(field.to_string(), value.clone());
            }
        }
    }
    store_entries(result, entries);
}

/// Whether `path` is a key field of a keyed list item that stays owned: pruning must not
/// strip the key of an item that survives.
fn is_key_of_kept_item(path: &[Pe], owned: &FieldSet) -> bool {
    let [item_path @ .., last] = path else {
        return false;
    };
    let (Some(item), Some(name)) = (item_path.last(), last.field_name()) else {
        return false;
    };
    item.key_fields()
        .is_some_and(|fields| fields.contains_key(name))
        && owned.contains(item_path)
}

/// Builds the 409 error for apply conflicts, worded as Kubernetes words it.
fn conflict_error(entries: &[Entry], conflicts: &[(usize, FieldSet)]) -> PatchError {
    let mut groups: Vec<(&Entry, &FieldSet)> = conflicts
        .iter()
        .filter_map(|(index, set)| entries.get(*index).map(|entry| (entry, set)))
        .collect();
    groups.sort_by(|a, b| {
        (
            &a.0.manager,
            &a.0.operation,
            &a.0.api_version,
            &a.0.subresource,
        )
            .cmp(&(
                &b.0.manager,
                &b.0.operation,
                &b.0.api_version,
                &b.0.subresource,
            ))
    });
    let mut causes = Vec::new();
    let mut lines = Vec::new();
    for (entry, set) in &groups {
        let manager = entry.describe();
        lines.push(format!("conflicts with {manager}:"));
        for path in *set {
            let field = display_path(path);
            lines.push(format!("- {field}"));
            causes.push(ApplyConflict {
                manager: entry.manager.clone(),
                message: format!("conflict with {manager}"),
                field,
            });
        }
    }
    let message = match causes.as_slice() {
        [only] => format!(
            "Apply failed with 1 conflict: {}: {}",
            only.message, only.field
        ),
        _ => format!(
            "Apply failed with {} conflicts: {}",
            causes.len(),
            lines.join("\n")
        ),
    };
    PatchError::Conflict {
        message,
        conflicts: causes,
    }
}

/// Added, modified and removed paths between two objects (structured-merge-diff `Compare`).
#[derive(Default)]
struct Comparison {
    /// Paths in both objects whose leaf values differ.
    modified: FieldSet,
    /// Paths only in the new object.
    added: FieldSet,
    /// Paths only in the old object.
    removed: FieldSet,
}

/// Server-side apply state: the kind that selects the list table.
struct Ssa<'k> {
    /// The object's kind, `None` for custom resources.
    kind: Option<&'k str>,
}

/// Removes `null` map values, recursively: a `null` in an applied object removes the field.
fn strip_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, value)| !value.is_null())
                .map(|(key, value)| (key.clone(), strip_nulls(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_nulls).collect()),
        scalar => scalar.clone(),
    }
}

/// The server-side apply algorithm: field sets, merge, prune and compare.
impl Ssa<'_> {
    /// The apply list type of the list at `segments`.
    fn rule(&self, segments: &[String]) -> SsaList {
        list_rule(self.kind, segments).ssa
    }

    /// The path element of an applied list item.
    fn item_pe(rule: SsaList, item: &Value) -> Result<Pe, String> {
        match rule {
            SsaList::Map(keys) => {
                let Value::Object(map) = item else {
                    return Err(
                        "associative list with keys has an element that is not a map".to_string(),
                    );
                };
                let mut fields = Map::new();
                for key in keys {
                    match map.get(*key) {
                        Some(value) if !value.is_null() => {
                            fields.insert((*key).to_string(), strip_nulls(value));
                        }
                        _ if *key == "protocol" => {
                            fields.insert((*key).to_string(), Value::String("TCP".into()));
                        }
                        _ => {
                            return Err(format!(
                                "associative list with keys has an element that omits key field {key:?} (and doesn't have default value)"
                            ));
                        }
                    }
                }
                Ok(Pe::key(&fields))
            }
            _ => Ok(Pe::value(&strip_nulls(item))),
        }
    }

    /// The path element of a live list item, tolerating items without keys.
    fn live_item_pe(rule: SsaList, item: &Value, index: usize) -> Pe {
        match rule {
            SsaList::Atomic => Pe::index(index),
            _ => Ssa::item_pe(rule, item).unwrap_or_else(|_| Pe::unkeyable(index)),
        }
    }

    /// Path elements of the items of a live list, first occurrence of each.
    fn live_items(rule: SsaList, items: &[Value]) -> Vec<(Pe, &Value)> {
        let mut out: Vec<(Pe, &Value)> = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let pe = Ssa::live_item_pe(rule, item, index);
            if !out.iter().any(|(known, _)| *known == pe) {
                out.push((pe, item));
            }
        }
        out
    }

    /// The fields set by an applied object (structured-merge-diff `ToFieldSet`); also
    /// validates its keyed lists.
    fn apply_set(
        &self,
        value: &Value,
        segments: &mut Vec<String>,
        path: &mut FieldPath,
        out: &mut FieldSet,
    ) -> Result<(), String> {
        match value {
            Value::Object(map) if map.is_empty() => {
                if !path.is_empty() {
                    out.insert(path.clone());
                }
            }
            Value::Object(map) => self.apply_set_fields(map, segments, path, out)?,
            Value::Array(items) => {
                let rule = self.rule(segments);
                if rule == SsaList::Atomic {
                    out.insert(path.clone());
                    return Ok(());
                }
                let mut seen: Vec<Pe> = Vec::with_capacity(items.len());
                for (index, item) in items.iter().enumerate() {
                    let pe = Ssa::item_pe(rule, item).map_err(|error| {
                        format!("{}: element {index}: {error}", display_path(path))
                    })?;
                    if seen.contains(&pe) {
                        return Err(format!(
                            "{}: duplicate entries for key {}",
                            display_path(path),
                            pe.display()
                        ));
                    }
                    seen.push(pe.clone());
                    path.push(pe);
                    out.insert(path.clone());
                    if let (SsaList::Map(_), Value::Object(map)) = (rule, item) {
                        self.apply_set_fields(map, segments, path, out)?;
                    }
                    path.pop();
                }
            }
            _ => {
                if !path.is_empty() {
                    out.insert(path.clone());
                }
            }
        }
        Ok(())
    }

    /// [`Ssa::apply_set`] for the fields of a map.
    fn apply_set_fields(
        &self,
        map: &Map<String, Value>,
        segments: &mut Vec<String>,
        path: &mut FieldPath,
        out: &mut FieldSet,
    ) -> Result<(), String> {
        for (key, child) in map {
            segments.push(key.clone());
            path.push(Pe::field(key));
            let result = if child.is_null() {
                out.insert(path.clone());
                Ok(())
            } else {
                self.apply_set(child, segments, path, out)
            };
            path.pop();
            segments.pop();
            result?;
        }
        Ok(())
    }

    /// Every path of an object, containers included (what an `Update` from nothing owns).
    fn all_paths(
        &self,
        value: &Value,
        segments: &mut Vec<String>,
        path: &mut FieldPath,
        out: &mut FieldSet,
    ) {
        if !path.is_empty() {
            out.insert(path.clone());
        }
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    segments.push(key.clone());
                    path.push(Pe::field(key));
                    self.all_paths(child, segments, path, out);
                    path.pop();
                    segments.pop();
                }
            }
            Value::Array(items) => {
                let rule = self.rule(segments);
                if rule == SsaList::Atomic {
                    return;
                }
                for (pe, item) in Ssa::live_items(rule, items) {
                    path.push(pe);
                    if let SsaList::Map(_) = rule {
                        self.all_paths(item, segments, path, out);
                    } else {
                        out.insert(path.clone());
                    }
                    path.pop();
                }
            }
            _ => {}
        }
    }

    /// The fields of the live object's last-applied-configuration annotation that still have
    /// their last-applied values (`lastAppliedManager`'s allowed conflicts); `None` without
    /// a usable annotation (missing, not a JSON object with a `kind`, another apiVersion
    /// than the applied one, or malformed keyed lists).
    fn last_applied_fields(&self, live: &Value, api_version: &str) -> Option<FieldSet> {
        let text = live
            .pointer("/metadata/annotations")?
            .get(LAST_APPLIED)?
            .as_str()
            .filter(|text| !text.is_empty())?;
        let last: Value = serde_json::from_str(text).ok()?;
        last.get("kind")
            .and_then(Value::as_str)
            .filter(|kind| !kind.is_empty())?;
        if last.get("apiVersion").and_then(Value::as_str) != Some(api_version) {
            return None;
        }
        let mut set = FieldSet::new();
        self.apply_set(&last, &mut Vec::new(), &mut Vec::new(), &mut set)
            .ok()?;
        let mut comparison = Comparison::default();
        self.compare(
            &last,
            live,
            &mut Vec::new(),
            &mut Vec::new(),
            &mut comparison,
        );
        set.retain(|path| {
            !comparison.modified.contains(path)
                && !comparison.added.contains(path)
                && !comparison.removed.contains(path)
        });
        Some(set)
    }

    /// Merges an applied value into a live one (structured-merge-diff `Merge`).
    fn merge(
        &self,
        live: &Value,
        applied: &Value,
        segments: &mut Vec<String>,
    ) -> Result<Value, String> {
        match (live, applied) {
            (Value::Object(live_map), Value::Object(applied_map)) => {
                let mut out = live_map.clone();
                for (key, value) in applied_map {
                    if value.is_null() {
                        out.shift_remove(key);
                        continue;
                    }
                    segments.push(key.clone());
                    let merged = match out.get(key) {
                        Some(current) => self.merge(current, value, segments),
                        None => Ok(strip_nulls(value)),
                    };
                    segments.pop();
                    out.insert(key.clone(), merged?);
                }
                Ok(Value::Object(out))
            }
            (Value::Array(live_items), Value::Array(applied_items)) => {
                let rule = self.rule(segments);
                if rule == SsaList::Atomic || (live_items.is_empty() && applied_items.is_empty()) {
                    return Ok(strip_nulls(applied));
                }
                self.merge_items(rule, live_items, applied_items, segments)
            }
            _ => Ok(strip_nulls(applied)),
        }
    }

    /// Merges the items of a keyed or set list, in structured-merge-diff's order.
    fn merge_items(
        &self,
        rule: SsaList,
        live: &[Value],
        applied: &[Value],
        segments: &mut Vec<String>,
    ) -> Result<Value, String> {
        let mut rhs: Vec<(Pe, &Value)> = Vec::with_capacity(applied.len());
        for item in applied {
            rhs.push((Ssa::item_pe(rule, item)?, item));
        }
        let lhs: Vec<(Pe, &Value)> = live
            .iter()
            .enumerate()
            .map(|(index, item)| (Ssa::live_item_pe(rule, item, index), item))
            .collect();
        let in_lhs = |pe: &Pe| {
            lhs.iter()
                .find(|(known, _)| known == pe)
                .map(|(_, item)| *item)
        };
        let in_rhs = |pe: &Pe| rhs.iter().any(|(known, _)| known == pe);
        let mut shared = rhs
            .iter()
            .map(|(pe, _)| pe)
            .filter(|pe| in_lhs(pe).is_some());
        let mut next_shared = shared.next();
        let mut merged_rhs: Vec<&Pe> = Vec::new();
        let mut out: Vec<Value> = Vec::with_capacity(live.len() + applied.len());
        let (mut li, mut ri) = (0, 0);
        while li < lhs.len() || ri < rhs.len() {
            if let (Some((lpe, litem)), Some((rpe, ritem))) = (lhs.get(li), rhs.get(ri)) {
                if lpe == rpe {
                    merged_rhs.push(rpe);
                    out.push(self.merge_item(rule, Some(litem), ritem, segments)?);
                    li += 1;
                    ri += 1;
                    next_shared = shared.next();
                    continue;
                }
                if in_rhs(lpe) && next_shared.is_some_and(|next| next != lpe) {
                    li += 1;
                    continue;
                }
            }
            if let Some((lpe, litem)) = lhs.get(li) {
                if !in_rhs(lpe) {
                    out.push((*litem).clone());
                    li += 1;
                    continue;
                } else if merged_rhs.contains(&lpe) {
                    li += 1;
                }
            }
            if let Some((rpe, ritem)) = rhs.get(ri) {
                merged_rhs.push(rpe);
                out.push(self.merge_item(rule, in_lhs(rpe), ritem, segments)?);
                ri += 1;
                if next_shared == Some(rpe) {
                    next_shared = shared.next();
                }
            }
        }
        Ok(Value::Array(out))
    }

    /// Merges one applied list item with its live counterpart.
    fn merge_item(
        &self,
        rule: SsaList,
        live: Option<&Value>,
        applied: &Value,
        segments: &mut Vec<String>,
    ) -> Result<Value, String> {
        match (rule, live) {
            (SsaList::Map(_), Some(live)) => self.merge(live, applied, segments),
            _ => Ok(strip_nulls(applied)),
        }
    }

    /// Removes the value at `path`, if present.
    fn remove_path(&self, value: &mut Value, path: &[Pe], segments: &mut Vec<String>) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        if let Some(name) = first.field_name() {
            let Value::Object(map) = value else { return };
            if rest.is_empty() {
                map.shift_remove(name);
            } else if let Some(child) = map.get_mut(name) {
                segments.push(name.to_string());
                self.remove_path(child, rest, segments);
                segments.pop();
            }
            return;
        }
        let Value::Array(items) = value else { return };
        let rule = self.rule(segments);
        if rest.is_empty() {
            let mut index = 0;
            items.retain(|item| {
                let keep = Ssa::live_item_pe(rule, item, index) != *first;
                index += 1;
                keep
            });
        } else if let Some(child) = items
            .iter_mut()
            .enumerate()
            .find(|(index, item)| Ssa::live_item_pe(rule, item, *index) == *first)
            .map(|(_, item)| item)
        {
            self.remove_path(child, rest, segments);
        }
    }

    /// Structured-merge-diff `Compare` between the live and the new object.
    fn compare(
        &self,
        old: &Value,
        new: &Value,
        segments: &mut Vec<String>,
        path: &mut FieldPath,
        out: &mut Comparison,
    ) {
        match (old, new) {
            (Value::Object(old_map), Value::Object(new_map))
                if !(old_map.is_empty() && new_map.is_empty()) =>
            {
                for (key, old_child) in old_map {
                    segments.push(key.clone());
                    path.push(Pe::field(key));
                    match new_map.get(key) {
                        Some(new_child) => self.compare(old_child, new_child, segments, path, out),
                        None => self.all_paths(old_child, segments, path, &mut out.removed),
                    }
                    path.pop();
                    segments.pop();
                }
                for (key, new_child) in new_map {
                    if old_map.contains_key(key) {
                        continue;
                    }
                    segments.push(key.clone());
                    path.push(Pe::field(key));
                    self.all_paths(new_child, segments, path, &mut out.added);
                    path.pop();
                    segments.pop();
                }
            }
            (Value::Array(old_items), Value::Array(new_items))
                if self.rule(segments) != SsaList::Atomic
                    && !(old_items.is_empty() && new_items.is_empty()) =>
            {
                let rule = self.rule(segments);
                let old_items = Ssa::live_items(rule, old_items);
                let new_items = Ssa::live_items(rule, new_items);
                for (pe, old_item) in &old_items {
                    path.push(pe.clone());
                    match new_items.iter().find(|(known, _)| known == pe) {
                        Some((_, new_item)) => {
                            self.compare(old_item, new_item, segments, path, out)
                        }
                        None => self.all_paths(old_item, segments, path, &mut out.removed),
                    }
                    path.pop();
                }
                for (pe, new_item) in &new_items {
                    if old_items.iter().any(|(known, _)| known == pe) {
                        continue;
                    }
                    path.push(pe.clone());
                    self.all_paths(new_item, segments, path, &mut out.added);
                    path.pop();
                }
            }
            _ => {
                if old == new {
                    return;
                }
                if !path.is_empty() {
                    out.modified.insert(path.clone());
                }
                // A container replaced by another type: its children go away or appear.
                let keyed = self.rule(segments) != SsaList::Atomic;
                let structural = |value: &Value| match value {
                    Value::Object(map) => !map.is_empty(),
                    Value::Array(items) => !items.is_empty() && keyed,
                    _ => false,
                };
                if json_type(old) != json_type(new) {
                    for (value, set) in [(old, &mut out.removed), (new, &mut out.added)] {
                        if structural(value) {
                            let mut below = FieldSet::new();
                            self.all_paths(value, segments, path, &mut below);
                            below.remove(path.as_slice());
                            set.extend(below);
                        }
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Update operations
// ---------------------------------------------------------------------------------------

/// Kubernetes keeps at most this many `Update` entries (`DefaultMaxUpdateManagers`).
const MAX_UPDATE_MANAGERS: usize = 10;

/// The manager that the oldest `Update` entries are merged into beyond the cap.
const ANCIENT_CHANGES: &str = "ancient-changes";

/// The longest manager name Kubernetes accepts (`FieldManagerMaxLength`), in bytes.
const MAX_MANAGER_LENGTH: usize = 128;

/// The author of a create or update (any write but an apply): the identity of its `Update`
/// entry in `metadata.managedFields`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Updater {
    /// The manager name; may be empty (then the entry has no `manager`).
    pub(crate) manager: String,
    /// The apiVersion of the request (`group/version`).
    pub(crate) api_version: String,
    /// The subresource written (`status`, `scale`, ...), empty for the main resource.
    pub(crate) subresource: String,
}

/// Kubernetes' `managerOrUserAgent`: the `fieldManager` parameter if given, or else the
/// User-Agent up to its first `/`, without control and whitespace characters other than
/// spaces, cut to 128 bytes.
pub(crate) fn manager_or_user_agent(
    field_manager: Option<&str>,
    user_agent: Option<&str>,
) -> String {
    if let Some(manager) = field_manager.filter(|manager| !manager.is_empty()) {
        return manager.to_string();
    }
    let prefix = user_agent
        .unwrap_or_default()
        .split('/')
        .next()
        .unwrap_or_default();
    let mut out = String::new();
    for c in prefix.chars() {
        if c.is_control() || (c.is_whitespace() && c != ' ') {
            continue;
        }
        if out.len() + c.len_utf8() > MAX_MANAGER_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

/// Whether a `metadata.managedFields` value given by a client asks for a reset: an empty
/// list, or a list of one empty entry.
fn is_reset(value: &Value) -> bool {
    let empty = |item: &Value| match item {
        Value::Object(map) => map
            .values()
            .all(|value| value.is_null() || value.as_str() == Some("")),
        _ => false,
    };
    match value {
        Value::Array(items) => match items.as_slice() {
            [] => true,
            [only] => empty(only),
            _ => false,
        },
        _ => false,
    }
}

/// Records a create (`live` is `None`) or an update of `live` into `new` by `updater` in
/// `new`'s `metadata.managedFields`, as Kubernetes' field manager does for every write that
/// is not an apply (see the module docs). `kind` selects the list table, `now` is the RFC 3339
/// time of a changed entry.
pub(crate) fn record_update(
    kind: Option<&str>,
    live: Option<&Value>,
    new: &mut Value,
    updater: &Updater,
    now: &str,
) {
    if !new.is_object() {
        return;
    }
    let live = live.filter(|live| live.is_object());
    let live_entries = || live.map(decode_entries).unwrap_or_default();
    let given = new.pointer("/metadata/managedFields").cloned();
    let mut entries = match given {
        // Subresources never take managed fields from the request.
        _ if !updater.subresource.is_empty() => live_entries(),
        None | Some(Value::Null) => live_entries(),
        Some(value) if is_reset(&value) => Vec::new(),
        Some(Value::Array(items)) => match decode_entry_list(&items, true) {
            Some(entries) if !entries.is_empty() => entries,
            _ => live_entries(),
        },
        Some(_) => live_entries(),
    };
    let without_managed = |object: &Value| {
        let mut copy = object.clone();
        if let Some(Value::Object(meta)) = copy.get_mut("metadata") {
            meta.shift_remove("managedFields");
        }
        copy
    };
    let new_content = without_managed(new);
    // An existing object without managed fields stays untracked until its first apply
    // (`skipNonAppliedManager`); a new one is always tracked.
    if live.is_some() && entries.is_empty() {
        store_entries(new, &[]);
        return;
    }
    let live_content = live
        .map(without_managed)
        .unwrap_or_else(|| Value::Object(Map::new()));

    let ssa = Ssa { kind };
    let mut comparison = Comparison::default();
    ssa.compare(
        &live_content,
        &new_content,
        &mut Vec::new(),
        &mut Vec::new(),
        &mut comparison,
    );
    let changed: FieldSet = comparison
        .modified
        .union(&comparison.added)
        .cloned()
        .collect();
    for entry in &mut entries {
        entry
            .set
            .retain(|path| !changed.contains(path) && !comparison.removed.contains(path));
    }
    let mine: FieldSet = changed
        .into_iter()
        .filter(|path| is_trackable(path))
        .collect();
    if !mine.is_empty() {
        let me = Entry {
            manager: updater.manager.clone(),
            operation: "Update".into(),
            api_version: updater.api_version.clone(),
            subresource: updater.subresource.clone(),
            time: Some(now.to_string()),
            set: mine,
        };
        match entries.iter_mut().find(|entry| entry.same_manager(&me)) {
            Some(known) => {
                known.set.extend(me.set);
                known.time = me.time;
            }
            None => entries.push(me),
        }
    }
    entries.retain(|entry| !entry.set.is_empty());
    cap_update_managers(&mut entries);
    sort_entries(&mut entries);
    store_entries(new, &entries);
}

/// Kubernetes' `capManagersManager`: beyond [`MAX_UPDATE_MANAGERS`] `Update` entries, the
/// oldest ones (by time, then identity) are merged, per apiVersion, into an
/// `ancient-changes` entry that takes the time of the last one merged into it. The first
/// oldest entry of each apiVersion only moves into the bucket when a second one joins it.
fn cap_update_managers(entries: &mut Vec<Entry>) {
    let mut updaters: Vec<usize> = (0..entries.len())
        .filter(|&index| entries.get(index).is_some_and(|e| e.operation == "Update"))
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    let order = |entry: &Entry| {
        (
            entry.time.clone().unwrap_or_default(),
            entry.manager.clone(),
            entry.api_version.clone(),
            entry.subresource.clone(),
        )
    };
    updaters.sort_by_key(|&index| entries.get(index).map(order));
    let mut dropped = vec![false; entries.len()];
    let mut first_of_version: BTreeMap<String, usize> = BTreeMap::new();
    let mut length = updaters.len();
    for index in updaters {
        if length <= MAX_UPDATE_MANAGERS {
            break;
        }
        let Some(version) = entries.get(index).map(|e| e.api_version.clone()) else {
            continue;
        };
        let Some(&first) = first_of_version.get(&version) else {
            first_of_version.insert(version, index);
            continue;
        };
        let existing = (0..entries.len()).find(|&other| {
            !dropped.get(other).copied().unwrap_or(true)
                && entries.get(other).is_some_and(|e| {
                    e.manager == ANCIENT_CHANGES
                        && e.operation == "Update"
                        && e.api_version == version
                        && e.subresource.is_empty()
                })
        });
        let bucket = match existing {
            Some(bucket) if bucket == index => continue,
            Some(bucket) => bucket,
            None => {
                if let Some(entry) = entries.get_mut(first) {
                    entry.manager = ANCIENT_CHANGES.to_string();
                    entry.subresource = String::new();
                }
                first
            }
        };
        let Some((set, time)) = entries
            .get_mut(index)
            .map(|e| (std::mem::take(&mut e.set), e.time.clone()))
        else {
            continue;
        };
        if let Some(entry) = entries.get_mut(bucket) {
            entry.set.extend(set);
            entry.time = time;
        }
        if let Some(flag) = dropped.get_mut(index) {
            *flag = true;
        }
        length -= 1;
    }
    let mut index = 0;
    entries.retain(|_| {
        let keep = !dropped.get(index).copied().unwrap_or(false);
        index += 1;
        keep
    });
}

/// Table tests and property tests.
#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// The time of the first apply.
    const NOW: &str = "2024-05-01T10:00:00Z";
    /// The time of later applies.
    const LATER: &str = "2024-05-01T11:00:00Z";

    /// Applies a strategic merge patch that must succeed.
    fn smp(kind: &str, target: Value, patch: Value) -> Value {
        let mut target = target;
        strategic_merge_patch(kind, &mut target, &patch).expect("patch applies");
        target
    }

    /// Applies a strategic merge patch that must fail, checking that the target is unchanged.
    fn smp_err(kind: &str, target: Value, patch: Value) -> PatchError {
        let mut copy = target.clone();
        let error = strategic_merge_patch(kind, &mut copy, &patch).expect_err("patch fails");
        assert_eq!(copy, target, "target must be unchanged on error");
        error
    }

    /// The `name` of each item of a list (or the item itself for strings).
    fn names(list: &Value) -> Vec<String> {
        list.as_array()
            .expect("a list")
            .iter()
            .map(|item| match item.get("name") {
                Some(name) => name.as_str().unwrap_or_default().to_string(),
                None => item.as_str().unwrap_or_default().to_string(),
            })
            .collect()
    }

    /// The `metadata.managedFields` entries of an object.
    fn managed(object: &Value) -> Vec<Value> {
        object
            .pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    }

    /// The managed-fields entry of `manager`.
    fn entry_of<'a>(object: &'a Value, manager: &str) -> Option<&'a Value> {
        object
            .pointer("/metadata/managedFields")?
            .as_array()?
            .iter()
            .find(|entry| entry["manager"] == manager)
    }

    // ------------------------------------------------------------------ merge patch

    /// RFC 7386 appendix A examples.
    #[test]
    fn merge_patch_rfc7386_appendix_a() {
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (
                json!({"a":"b","b":"c"}),
                json!({"a":null}),
                json!({"b":"c"}),
            ),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (
                json!({"a":{"b":"c"}}),
                json!({"a":{"b":"d","c":null}}),
                json!({"a":{"b":"d"}}),
            ),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (
                json!({}),
                json!({"a":{"bb":{"ccc":null}}}),
                json!({"a":{"bb":{}}}),
            ),
        ];
        for (target, patch, expected) in cases {
            let mut doc = target.clone();
            merge_patch(&mut doc, &patch);
            assert_eq!(doc, expected, "{target} + {patch}");
        }
    }

    // ------------------------------------------------------------------ json patch

    /// Every RFC 6902 operation, with passing `test`s.
    #[test]
    fn json_patch_operations_and_test_success() {
        let mut doc = json!({"metadata":{"name":"x","labels":{"a":"1"}},"spec":{"items":[1,2,3]}});
        let patch = json!([
            {"op":"test","path":"/metadata/name","value":"x"},
            {"op":"add","path":"/metadata/labels/b","value":"2"},
            {"op":"remove","path":"/metadata/labels/a"},
            {"op":"replace","path":"/spec/items/0","value":10},
            {"op":"add","path":"/spec/items/-","value":4},
            {"op":"copy","from":"/metadata/name","path":"/spec/name"},
            {"op":"move","from":"/spec/name","path":"/spec/moved"},
            {"op":"test","path":"/spec/items","value":[10,2,3,4]}
        ]);
        json_patch(&mut doc, &patch).expect("applies");
        assert_eq!(
            doc,
            json!({"metadata":{"name":"x","labels":{"b":"2"}},"spec":{"items":[10,2,3,4],"moved":"x"}})
        );
    }

    /// A failing `test` is a 422 and undoes earlier operations.
    #[test]
    fn json_patch_failed_test_is_invalid_and_atomic() {
        let original = json!({"spec":{"replicas":1}});
        let mut doc = original.clone();
        let patch = json!([
            {"op":"replace","path":"/spec/replicas","value":5},
            {"op":"test","path":"/spec/replicas","value":1}
        ]);
        let error = json_patch(&mut doc, &patch).expect_err("test fails");
        assert_eq!(doc, original);
        assert_eq!(error.code(), 422);
        assert_eq!(error.reason(), "Invalid");
        assert_eq!(
            error.to_string(),
            "test operation at index 1 failed: the value at path \"/spec/replicas\" does not match"
        );
    }

    /// A missing path is a 422 and undoes earlier operations.
    #[test]
    fn json_patch_missing_path_is_invalid_and_atomic() {
        let original = json!({"a":1});
        let mut doc = original.clone();
        let patch = json!([
            {"op":"add","path":"/b","value":2},
            {"op":"remove","path":"/nope"}
        ]);
        let error = json_patch(&mut doc, &patch).expect_err("path missing");
        assert_eq!(doc, original);
        assert!(matches!(error, PatchError::Invalid(_)));
        assert!(
            error.to_string().contains("remove operation at index 1"),
            "{error}"
        );
        assert!(error.to_string().contains("\"/nope\""), "{error}");
        let error = json_patch(&mut doc, &json!([{"op":"replace","path":"/x/y","value":1}]))
            .expect_err("missing");
        assert!(matches!(error, PatchError::Invalid(_)));
        let error = json_patch(&mut doc, &json!([{"op":"move","from":"/zz","path":"/y"}]))
            .expect_err("missing");
        assert!(error.to_string().contains("from path \"/zz\""), "{error}");
    }

    /// Malformed JSON patches are 400s.
    #[test]
    fn json_patch_malformed_is_bad_request() {
        let mut doc = json!({"a":1});
        for patch in [
            json!({"op":"add","path":"/a","value":1}),
            json!([{"op":"frobnicate","path":"/a"}]),
            json!([{"op":"add","value":1}]),
            json!([{"op":"add","path":"a","value":1}]),
            json!([1]),
        ] {
            let error = json_patch(&mut doc, &patch).expect_err("malformed");
            assert_eq!(error.code(), 400, "{patch}: {error}");
            assert_eq!(error.reason(), "BadRequest");
        }
        assert_eq!(doc, json!({"a":1}));
    }

    /// An empty JSON patch changes nothing.
    #[test]
    fn json_patch_empty_is_identity() {
        let mut doc = json!({"a":[1,{"b":null}]});
        json_patch(&mut doc, &json!([])).expect("empty patch");
        assert_eq!(doc, json!({"a":[1,{"b":null}]}));
    }

    // ------------------------------------------------------------------ strategic merge patch

    /// A Deployment with the given containers.
    fn deployment(containers: Value) -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "patch-demo"},
            "spec": {"replicas": 2, "template": {"spec": {"containers": containers}}}
        })
    }

    /// Containers merge by name (kubectl patch documentation example).
    #[test]
    fn smp_containers_merge_by_name_docs_example() {
        // https://kubernetes.io/docs/tasks/manage-kubernetes-objects/update-api-object-kubectl-patch/
        let live = deployment(json!([{"name": "patch-demo-ctr", "image": "nginx"}]));
        let patch = json!({"spec":{"template":{"spec":{"containers":[{"name":"patch-demo-ctr-2","image":"redis"}]}}}});
        let out = smp("Deployment", live, patch);
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"],
            json!([{"name":"patch-demo-ctr-2","image":"redis"},{"name":"patch-demo-ctr","image":"nginx"}])
        );
        assert_eq!(out["spec"]["replicas"], 2);
    }

    /// Matching containers merge field by field, with their ports, env and mounts.
    #[test]
    fn smp_merges_fields_of_matching_container_and_nested_lists() {
        let live = json!({"spec":{"containers":[{
            "name":"app","image":"a:1",
            "ports":[{"containerPort":80,"name":"http"}],
            "env":[{"name":"A","value":"1"},{"name":"B","value":"2"}],
            "volumeMounts":[{"mountPath":"/data","name":"data"}],
            "args":["x","y"]
        }]}});
        let patch = json!({"spec":{"containers":[{
            "name":"app","image":"a:2",
            "ports":[{"containerPort":80,"protocol":"TCP"},{"containerPort":443}],
            "env":[{"name":"B","value":"3"}],
            "volumeMounts":[{"mountPath":"/data","readOnly":true}],
            "args":["z"]
        }]}});
        let out = smp("Pod", live, patch);
        let container = &out["spec"]["containers"][0];
        assert_eq!(container["image"], "a:2");
        assert_eq!(
            container["ports"],
            json!([{"containerPort":80,"name":"http","protocol":"TCP"},{"containerPort":443}])
        );
        assert_eq!(
            container["env"],
            json!([{"name":"A","value":"1"},{"name":"B","value":"3"}])
        );
        assert_eq!(
            container["volumeMounts"],
            json!([{"mountPath":"/data","name":"data","readOnly":true}])
        );
        assert_eq!(
            container["args"],
            json!(["z"]),
            "lists without a strategy are replaced"
        );
    }

    /// The pod spec table applies wherever the kind keeps its pod spec.
    #[test]
    fn smp_pod_spec_lists_by_kind() {
        let volumes = json!([{"name":"a","emptyDir":{}}]);
        for (kind, pointer, wrap) in [
            ("Pod", "/spec/volumes", json!({"spec":{"volumes":volumes}})),
            (
                "StatefulSet",
                "/spec/template/spec/volumes",
                json!({"spec":{"template":{"spec":{"volumes":volumes}}}}),
            ),
            (
                "CronJob",
                "/spec/jobTemplate/spec/template/spec/volumes",
                json!({"spec":{"jobTemplate":{"spec":{"template":{"spec":{"volumes":volumes}}}}}}),
            ),
        ] {
            let mut patch = wrap.clone();
            if let Some(list) = patch.pointer_mut(pointer) {
                *list = json!([{"name":"b","emptyDir":{}}]);
            }
            let out = smp(kind, wrap, patch);
            assert_eq!(
                names(out.pointer(pointer).expect("volumes")),
                ["b", "a"],
                "{kind}"
            );
        }
    }

    /// Tolerations are replaced (kubectl patch documentation example).
    #[test]
    fn smp_tolerations_are_replaced_docs_example() {
        let live = json!({"spec":{"template":{"spec":{
            "containers":[{"name":"c","image":"nginx"}],
            "tolerations":[{"effect":"NoSchedule","key":"dedicated","value":"test-team"}]}}}});
        let patch = json!({"spec":{"template":{"spec":{"tolerations":[{"effect":"NoSchedule","key":"disktype","value":"ssd"}]}}}});
        let out = smp("Deployment", live, patch);
        assert_eq!(
            out["spec"]["template"]["spec"]["tolerations"],
            json!([{"effect":"NoSchedule","key":"disktype","value":"ssd"}])
        );
    }

    /// `$retainKeys` clears other keys (kubectl patch documentation example).
    #[test]
    fn smp_retain_keys_docs_example() {
        let live = json!({"spec":{"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%","maxUnavailable":"25%"}}}});
        let patch = json!({"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate"}}});
        let out = smp("Deployment", live, patch);
        assert_eq!(out, json!({"spec":{"strategy":{"type":"Recreate"}}}));
    }

    /// `$retainKeys` must list every key of the patch and be a list.
    #[test]
    fn smp_retain_keys_rejects_unlisted_patch_keys() {
        let live = json!({"spec":{"strategy":{"type":"RollingUpdate"}}});
        let error = smp_err(
            "Deployment",
            live,
            json!({"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate","other":1}}}),
        );
        assert_eq!(error.code(), 400);
        let error = smp_err(
            "Deployment",
            json!({}),
            json!({"spec":{"$retainKeys":"type"}}),
        );
        assert_eq!(error.code(), 400);
    }

    /// `$retainKeys` inside a merged list item.
    #[test]
    fn smp_retain_keys_in_list_item() {
        // k8s: "retainKeys list of maps adds a field and clear a field", with volumes.
        let live = json!({"spec":{"volumes":[{"name":"bar"},{"name":"foo","other":"x"}]}});
        let patch = json!({"spec":{
            "$setElementOrder/volumes":[{"name":"bar"},{"name":"foo"}],
            "volumes":[{"$retainKeys":["name","value"],"name":"foo","value":"a"}]}});
        let out = smp("Pod", live, patch);
        assert_eq!(
            out,
            json!({"spec":{"volumes":[{"name":"bar"},{"name":"foo","value":"a"}]}})
        );
    }

    /// `$patch: replace` as a list item replaces the list.
    #[test]
    fn smp_patch_replace_in_list() {
        let live =
            json!({"spec":{"containers":[{"name":"a","image":"a"},{"name":"b","image":"b"}]}});
        let patch = json!({"spec":{"containers":[{"name":"c","image":"c","env":[{"name":"X","value":null}]},{"$patch":"replace"}]}});
        let out = smp("Pod", live, patch);
        assert_eq!(
            out,
            json!({"spec":{"containers":[{"name":"c","image":"c","env":[{"name":"X"}]}]}})
        );
    }

    /// `$patch: delete` in a list item deletes the matching item.
    #[test]
    fn smp_patch_delete_in_list() {
        let live =
            json!({"spec":{"containers":[{"name":"a","image":"a"},{"name":"b","image":"b"}]}});
        let patch = json!({"spec":{"containers":[{"name":"a","$patch":"delete"}]}});
        let out = smp("Pod", live, patch);
        assert_eq!(
            out,
            json!({"spec":{"containers":[{"name":"b","image":"b"}]}})
        );
        let error = smp_err(
            "Pod",
            out,
            json!({"spec":{"containers":[{"$patch":"delete"}]}}),
        );
        assert_eq!(error.code(), 400);
    }

    /// `$patch: replace|delete|merge` in maps, including the root.
    #[test]
    fn smp_patch_replace_and_delete_in_maps() {
        let live = json!({"metadata":{"labels":{"a":"1","b":"2"}},"spec":{"strategy":{"type":"RollingUpdate"}}});
        let patch = json!({
            "metadata":{"labels":{"$patch":"replace","c":"3"}},
            "spec":{"strategy":{"$patch":"delete"}}
        });
        let out = smp("Deployment", live, patch);
        assert_eq!(
            out,
            json!({"metadata":{"labels":{"c":"3"}},"spec":{"strategy":{}}})
        );
        // `$patch: delete` of an absent map adds nothing; `merge` is the explicit default.
        let out = smp(
            "Deployment",
            out,
            json!({"status":{"$patch":"delete"},"metadata":{"$patch":"merge","labels":{"d":"4"}}}),
        );
        assert_eq!(
            out,
            json!({"metadata":{"labels":{"c":"3","d":"4"}},"spec":{"strategy":{}}})
        );
        // The root itself.
        assert_eq!(
            smp("Pod", json!({"a":1}), json!({"$patch":"replace","b":2})),
            json!({"b":2})
        );
        assert_eq!(
            smp("Pod", json!({"a":1}), json!({"$patch":"delete"})),
            json!({})
        );
        assert_eq!(
            smp_err("Pod", json!({"a":1}), json!({"$patch":"frobnicate"})).code(),
            400
        );
        assert_eq!(
            smp_err(
                "Pod",
                json!({"a":[{"n":1}]}),
                json!({"spec":{"containers":[{"name":"x","$patch":"nope"}]}})
            )
            .code(),
            400
        );
    }

    /// Finalizers merge as a set; `$deleteFromPrimitiveList` removes items.
    #[test]
    fn smp_finalizers_merge_as_a_set_and_delete_from_primitive_list() {
        let live = json!({"metadata":{"finalizers":["a","b"]}});
        let out = smp(
            "ConfigMap",
            live.clone(),
            json!({"metadata":{"finalizers":["b","c"]}}),
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b", "c"]));
        let out = smp(
            "ConfigMap",
            live.clone(),
            json!({"metadata":{"finalizers":["c"]}}),
        );
        assert_eq!(
            out["metadata"]["finalizers"],
            json!(["c", "a", "b"]),
            "new items first, as in Kubernetes"
        );
        let out = smp(
            "ConfigMap",
            live.clone(),
            json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["a","zzz"]}}),
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
        // Works on lists without a strategy too, and never creates a list.
        let out = smp(
            "Pod",
            json!({"spec":{"containers":[{"name":"c","args":["1","2","3"]}]}}),
            json!({"spec":{"containers":[{"name":"c","$deleteFromPrimitiveList/args":["2"]}]}}),
        );
        assert_eq!(out["spec"]["containers"][0]["args"], json!(["1", "3"]));
        let out = smp(
            "Pod",
            json!({"metadata":{}}),
            json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["x"]}}),
        );
        assert_eq!(out, json!({"metadata":{}}));
        assert_eq!(
            smp_err(
                "Pod",
                live.clone(),
                json!({"metadata":{"$deleteFromPrimitiveList/finalizers":"a"}})
            )
            .code(),
            400
        );
        assert_eq!(
            smp_err(
                "Pod",
                live,
                json!({"metadata":{"$deleteFromPrimitiveList":["a"]}})
            )
            .code(),
            400
        );
    }

    /// Owner references merge by uid, conditions by type (built-in kinds only).
    #[test]
    fn smp_owner_references_by_uid_and_conditions_by_type() {
        let live = json!({
            "metadata":{"ownerReferences":[{"uid":"1","name":"a","kind":"X"}]},
            "status":{"conditions":[{"type":"Ready","status":"False"},{"type":"Available","status":"True"}]}
        });
        let patch = json!({
            "metadata":{"ownerReferences":[{"uid":"2","name":"b","kind":"X"},{"uid":"1","controller":true}]},
            "status":{"conditions":[{"type":"Ready","status":"True"}]}
        });
        let out = smp("Deployment", live.clone(), patch.clone());
        assert_eq!(
            out["metadata"]["ownerReferences"],
            json!([{"uid":"2","name":"b","kind":"X"},{"uid":"1","name":"a","kind":"X","controller":true}])
        );
        assert_eq!(
            out["status"]["conditions"],
            json!([{"type":"Ready","status":"True"},{"type":"Available","status":"True"}])
        );
        // A custom resource has no strategy for status.conditions: replaced.
        let out = smp("KopfExample", live, patch);
        assert_eq!(
            out["status"]["conditions"],
            json!([{"type":"Ready","status":"True"}])
        );
        assert_eq!(
            out["metadata"]["ownerReferences"].as_array().map(Vec::len),
            Some(2)
        );
    }

    /// Service ports merge by port, ServiceAccount secrets by name.
    #[test]
    fn smp_service_ports_and_service_account_secrets() {
        let live = json!({"spec":{"ports":[{"port":80,"targetPort":8080},{"port":443}],"selector":{"app":"a"}}});
        let patch =
            json!({"spec":{"ports":[{"port":80,"targetPort":9090}],"selector":{"tier":"web"}}});
        let out = smp("Service", live, patch);
        assert_eq!(
            out,
            json!({"spec":{"ports":[{"port":80,"targetPort":9090},{"port":443}],"selector":{"app":"a","tier":"web"}}})
        );
        let out = smp(
            "ServiceAccount",
            json!({"secrets":[{"name":"a"}]}),
            json!({"secrets":[{"name":"b"}]}),
        );
        assert_eq!(names(&out["secrets"]), ["b", "a"]);
        let out = smp(
            "ConfigMap",
            json!({"secrets":[{"name":"a"}]}),
            json!({"secrets":[{"name":"b"}]}),
        );
        assert_eq!(names(&out["secrets"]), ["b"]);
    }

    /// The other keyed lists of a pod spec.
    #[test]
    fn smp_pod_spec_other_keyed_lists() {
        let live = json!({"spec":{
            "imagePullSecrets":[{"name":"a"}],
            "hostAliases":[{"ip":"1.1.1.1","hostnames":["a"]}],
            "initContainers":[{"name":"init","image":"i"}],
            "ephemeralContainers":[{"name":"dbg","image":"d"}],
            "containers":[{"name":"c","volumeDevices":[{"devicePath":"/dev/x","name":"x"}]}]
        }});
        let patch = json!({"spec":{
            "imagePullSecrets":[{"name":"b"}],
            "hostAliases":[{"ip":"1.1.1.1","hostnames":["b"]}],
            "initContainers":[{"name":"init","image":"j"}],
            "ephemeralContainers":[{"name":"dbg2","image":"d"}],
            "containers":[{"name":"c","volumeDevices":[{"devicePath":"/dev/y","name":"y"}]}]
        }});
        let out = smp("Pod", live, patch);
        assert_eq!(names(&out["spec"]["imagePullSecrets"]), ["b", "a"]);
        assert_eq!(
            out["spec"]["hostAliases"],
            json!([{"ip":"1.1.1.1","hostnames":["b"]}])
        );
        assert_eq!(
            out["spec"]["initContainers"],
            json!([{"name":"init","image":"j"}])
        );
        assert_eq!(names(&out["spec"]["ephemeralContainers"]), ["dbg2", "dbg"]);
        assert_eq!(
            out["spec"]["containers"][0]["volumeDevices"]
                .as_array()
                .map(Vec::len),
            Some(2)
        );
    }

    /// Maps merge recursively and `null` deletes.
    #[test]
    fn smp_maps_merge_and_null_deletes() {
        let live = json!({"data":{"a":"1","b":"2"},"metadata":{"labels":{"x":"1"},"annotations":{"y":"2"}}});
        let patch = json!({"data":{"a":null,"c":"3"},"metadata":{"annotations":null,"labels":{"z":"3"}},"new":{"k":null,"v":1}});
        let out = smp("ConfigMap", live, patch);
        assert_eq!(
            out,
            json!({"data":{"b":"2","c":"3"},"metadata":{"labels":{"x":"1","z":"3"}},"new":{"v":1}})
        );
    }

    /// Directives inside new fields never reach the result.
    #[test]
    fn smp_directives_never_leak_into_new_fields() {
        let patch = json!({"spec":{
            "$setElementOrder/containers":[{"name":"b"},{"name":"a"}],
            "containers":[
                {"name":"b","env":[{"name":"X","$patch":"delete"}],"$deleteFromPrimitiveList/args":["q"]},
                {"name":"gone","$patch":"delete"},
                {"name":"a","image":"a","$retainKeys":["name","image"]}
            ],
            "volumes":[{"name":"v","$patch":"merge"}],
            "nodeSelector":{"$patch":"replace","disk":"ssd","bad":null}
        }});
        let out = smp("Pod", json!({}), patch);
        assert_eq!(
            out,
            json!({"spec":{
                "containers":[{"name":"b","env":[]},{"name":"a","image":"a"}],
                "volumes":[{"name":"v"}],
                "nodeSelector":{"disk":"ssd"}
            }})
        );
        let text = out.to_string();
        assert!(!text.contains('$'), "{text}");
    }

    /// `$setElementOrder` with live-only items (Kubernetes' own test cases).
    #[test]
    fn smp_set_element_order_kubernetes_cases() {
        // k8s strategicpatch tests "set elements order in a list with server-only items" 1-3
        // (Current + ThreeWay = Result), with `mergingList` as a Pod's containers.
        let cases = [
            (
                json!([{"name":"1","other":"a"},{"name":"3","value":"3"},{"name":"4","value":"4"},{"name":"2","value":"2"},{"name":"9"}]),
                json!(["4", "2", "3", "1"]),
                vec!["4", "2", "3", "1", "9"],
            ),
            (
                json!([{"name":"1","other":"a"},{"name":"2","value":"2"},{"name":"9"},{"name":"3","value":"3"},{"name":"4","value":"4"}]),
                json!(["2", "1", "4", "3"]),
                vec!["2", "1", "9", "4", "3"],
            ),
            (
                json!([{"name":"1","other":"a"},{"name":"2"},{"name":"7"},{"name":"9"},{"name":"8"},{"name":"3"},{"name":"4"}]),
                json!(["2", "1", "4", "3"]),
                vec!["2", "1", "7", "9", "8", "4", "3"],
            ),
        ];
        for (live, order, expected) in cases {
            let order_items: Vec<Value> = order
                .as_array()
                .into_iter()
                .flatten()
                .map(|name| json!({"name": name}))
                .collect();
            let out = smp(
                "Pod",
                json!({"spec":{"containers":live.clone()}}),
                json!({"spec":{"$setElementOrder/containers":order_items}}),
            );
            assert_eq!(names(&out["spec"]["containers"]), expected, "{live}");
            assert_eq!(
                out["spec"]["containers"][expected.iter().position(|n| *n == "1").unwrap_or(0)]["other"],
                "a"
            );
            // The same with a primitive list.
            let live_names: Vec<String> = names(&live);
            let out = smp(
                "Pod",
                json!({"metadata":{"finalizers":live_names}}),
                json!({"metadata":{"$setElementOrder/finalizers":order}}),
            );
            assert_eq!(names(&out["metadata"]["finalizers"]), expected);
        }
    }

    /// `$setElementOrder` together with patch items and deletions.
    #[test]
    fn smp_set_element_order_with_patch_items() {
        // k8s: "add an item in a list of primitives and preserve order".
        let out = smp(
            "Pod",
            json!({"metadata":{"finalizers":["1","4","2"]}}),
            json!({"metadata":{"$setElementOrder/finalizers":["3","1","2"],"finalizers":["3"]}}),
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["3", "1", "4", "2"]));
        // k8s: "delete an item in a list of primitives and preserve order".
        let out = smp(
            "Pod",
            json!({"metadata":{"finalizers":["1","2","3"]}}),
            json!({"metadata":{"$setElementOrder/finalizers":["2","1"],"$deleteFromPrimitiveList/finalizers":["3"]}}),
        );
        assert_eq!(out["metadata"]["finalizers"], json!(["2", "1"]));
        // k8s: "$setElementOrder contains item that is not present in the list to be merged".
        let out = smp(
            "Pod",
            json!({"spec":{"containers":[{"name":"1"},{"name":"3"}]}}),
            json!({"spec":{
                "$setElementOrder/containers":[{"name":"3"},{"name":"2"},{"name":"1"}],
                "containers":[{"name":"3","value":"3"},{"name":"1","value":"1"}]}}),
        );
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name":"3","value":"3"},{"name":"1","value":"1"}])
        );
    }

    /// A patch list out of `$setElementOrder` order is a 400.
    #[test]
    fn smp_set_element_order_must_match_patch_order() {
        let error = smp_err(
            "Pod",
            json!({"spec":{"containers":[{"name":"1"},{"name":"3"},{"name":"2"}]}}),
            json!({"spec":{
                "$setElementOrder/containers":[{"name":"1"},{"name":"2"},{"name":"3"}],
                "containers":[{"name":"3","value":"3"},{"name":"1","value":"1"}]}}),
        );
        assert_eq!(error.code(), 400);
        assert!(error.to_string().contains("doesn't match"), "{error}");
        let error = smp_err(
            "Pod",
            json!({"metadata":{"finalizers":["1","3","2"]}}),
            json!({"metadata":{"$setElementOrder/finalizers":["1","2","3"],"finalizers":["3","1"]}}),
        );
        assert!(error.to_string().contains("doesn't match"), "{error}");
        assert_eq!(
            smp_err(
                "Pod",
                json!({}),
                json!({"metadata":{"$setElementOrder/finalizers":"x"}})
            )
            .code(),
            400
        );
    }

    /// Malformed strategic merge patches are rejected without changes.
    #[test]
    fn smp_malformed_patches() {
        let live = json!({"spec":{"containers":[{"name":"a","image":"a"}]}});
        let error = smp_err(
            "Pod",
            live.clone(),
            json!({"spec":{"containers":[{"image":"b"}]}}),
        );
        assert_eq!(error.code(), 400);
        assert!(error.to_string().contains("merge key \"name\""), "{error}");
        let error = smp_err(
            "Pod",
            live.clone(),
            json!({"spec":{"containers":[["nested"]]}}),
        );
        assert_eq!(error.code(), 422);
        assert_eq!(error.reason(), "Invalid");
        let error = smp_err(
            "Pod",
            live.clone(),
            json!({"spec":{"containers":["a", {"name":"b"}]}}),
        );
        assert_eq!(error.code(), 400);
        let error = smp_err(
            "Pod",
            live.clone(),
            json!({"metadata":{"finalizers":[{"a":1}]}}),
        );
        assert!(error.to_string().contains("without merge key"), "{error}");
        let mut target = live.clone();
        let error = strategic_merge_patch("Pod", &mut target, &json!(["not", "a", "map"]))
            .expect_err("not a map");
        assert_eq!(error.code(), 400);
        assert_eq!(target, live);
    }

    /// Lists of unknown kinds are atomic.
    #[test]
    fn smp_unknown_lists_are_atomic_and_scalars_replace() {
        let live = json!({"spec":{"items":[1,2],"nested":{"list":[{"name":"a"}]},"replicas":1}});
        let patch = json!({"spec":{"items":[3],"nested":{"list":[{"name":"b"}]},"replicas":"two"}});
        let out = smp("KopfExample", live, patch);
        assert_eq!(
            out,
            json!({"spec":{"items":[3],"nested":{"list":[{"name":"b"}]},"replicas":"two"}})
        );
    }

    // ------------------------------------------------------------------ server-side apply

    /// A Deployment apply configuration.
    fn web(replicas: i64) -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}
                }
            }
        })
    }

    /// Adds the metadata a server sets on stored objects.
    fn stored(mut object: Value) -> Value {
        if let Some(Value::Object(meta)) = object.get_mut("metadata") {
            meta.insert("resourceVersion".into(), json!("7"));
            meta.insert("uid".into(), json!("u-1"));
            meta.insert("creationTimestamp".into(), json!("2024-01-01T00:00:00Z"));
            meta.insert("generation".into(), json!(1));
        }
        object
    }

    /// Creating by apply records the Kubernetes FieldsV1 encoding.
    #[test]
    fn ssa_create_records_fieldsv1() {
        let out = server_side_apply(Some("Deployment"), None, &web(2), "kubectl", false, NOW)
            .expect("created");
        let entries = managed(&out);
        assert_eq!(entries.len(), 1);
        let expected_fields = json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {"f:matchLabels": {"f:app": {}}},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                        ".": {},
                        "f:image": {},
                        "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
                    }}}
                }
            }
        });
        assert_eq!(
            entries[0],
            json!({"manager":"kubectl","operation":"Apply","apiVersion":"apps/v1","time":NOW,"fieldsType":"FieldsV1","fieldsV1":expected_fields})
        );
        // Key order as Kubernetes writes it: "." first, then sorted elements.
        let text = entries[0]["fieldsV1"].to_string();
        assert!(
            text.contains(r#"{".":{},"f:image":{},"f:name":{},"f:ports":"#),
            "{text}"
        );
        let mut without = out.clone();
        if let Some(Value::Object(meta)) = without.get_mut("metadata") {
            meta.shift_remove("managedFields");
        }
        assert_eq!(without, web(2));
    }

    /// Applied managedFields and server metadata are dropped; sets are `v:` items.
    #[test]
    fn ssa_create_drops_managed_fields_and_server_metadata_from_applied() {
        let mut applied = web(1);
        if let Some(Value::Object(meta)) = applied.get_mut("metadata") {
            meta.insert(
                "managedFields".into(),
                json!([{"manager":"forged","operation":"Apply"}]),
            );
            meta.insert("resourceVersion".into(), json!("99"));
            meta.insert("creationTimestamp".into(), Value::Null);
            meta.insert("finalizers".into(), json!(["a", "b"]));
        }
        let out = server_side_apply(None, None, &applied, "me", false, NOW).expect("created");
        assert_eq!(out["metadata"].get("resourceVersion"), None);
        assert_eq!(out["metadata"].get("creationTimestamp"), None);
        let entries = managed(&out);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0]["manager"], "me");
        assert_eq!(
            entries[0]["fieldsV1"]["f:metadata"]["f:finalizers"],
            json!({"v:\"a\"": {}, "v:\"b\"": {}})
        );
        // Without a kind (custom resource) the containers list is atomic.
        assert_eq!(
            entries[0]["fieldsV1"]["f:spec"]["f:template"]["f:spec"],
            json!({"f:containers": {}})
        );
    }

    /// Re-applying without a field removes it.
    #[test]
    fn ssa_reapply_removes_fields_no_longer_applied() {
        let mut first = web(2);
        first["spec"]["paused"] = json!(true);
        first["metadata"]["labels"]["tier"] = json!("front");
        first["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .expect("containers")
            .push(json!({"name": "sidecar", "image": "envoy"}));
        let live = stored(
            server_side_apply(Some("Deployment"), None, &first, "kubectl", false, NOW)
                .expect("created"),
        );
        let out = server_side_apply(
            Some("Deployment"),
            Some(&live),
            &web(2),
            "kubectl",
            false,
            LATER,
        )
        .expect("applied");
        assert_eq!(out["spec"].get("paused"), None);
        assert_eq!(out["metadata"]["labels"], json!({"app": "web"}));
        assert_eq!(
            names(&out["spec"]["template"]["spec"]["containers"]),
            ["nginx"]
        );
        assert_eq!(
            out["metadata"]["resourceVersion"], "7",
            "server-owned metadata comes from live"
        );
        assert_eq!(out["metadata"]["uid"], "u-1");
        let entries = managed(&out);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0]["time"], LATER);
        assert_eq!(entries[0]["fieldsV1"]["f:spec"].get("f:paused"), None);
        // Removing a whole subtree removes its parent map too.
        let mut bare = web(2);
        if let Some(Value::Object(meta)) = bare.get_mut("metadata") {
            meta.shift_remove("labels");
        }
        let out = server_side_apply(
            Some("Deployment"),
            Some(&stored(out)),
            &bare,
            "kubectl",
            false,
            LATER,
        )
        .expect("applied");
        assert_eq!(out["metadata"].get("labels"), None);
    }

    /// A no-op apply leaves the object, times included, unchanged.
    #[test]
    fn ssa_noop_reapply_keeps_time_and_object() {
        let live = stored(
            server_side_apply(Some("Deployment"), None, &web(2), "kubectl", false, NOW)
                .expect("created"),
        );
        let out = server_side_apply(
            Some("Deployment"),
            Some(&live),
            &web(2),
            "kubectl",
            false,
            LATER,
        )
        .expect("applied");
        assert_eq!(out, live);
    }

    /// Changing another applier's field conflicts; equal values are shared.
    #[test]
    fn ssa_conflict_with_another_applier() {
        let live = stored(
            server_side_apply(Some("Deployment"), None, &web(2), "alice", false, NOW)
                .expect("created"),
        );
        let error = server_side_apply(
            Some("Deployment"),
            Some(&live),
            &web(5),
            "bob",
            false,
            LATER,
        )
        .expect_err("conflict");
        assert_eq!(error.code(), 409);
        assert_eq!(error.reason(), "Conflict");
        assert_eq!(
            error.to_string(),
            "Apply failed with 1 conflict: conflict with \"alice\": .spec.replicas"
        );
        let PatchError::Conflict { conflicts, .. } = error else {
            panic!("not a conflict")
        };
        assert_eq!(
            conflicts,
            vec![ApplyConflict {
                manager: "alice".into(),
                message: "conflict with \"alice\"".into(),
                field: ".spec.replicas".into()
            }]
        );
        // Same values are shared, not conflicting.
        let out = server_side_apply(
            Some("Deployment"),
            Some(&live),
            &web(2),
            "bob",
            false,
            LATER,
        )
        .expect("shared");
        assert_eq!(managed(&out).len(), 2);
        assert_eq!(out["spec"]["replicas"], 2);
    }

    /// `force` moves ownership of conflicting fields.
    #[test]
    fn ssa_force_moves_ownership() {
        let live = stored(
            server_side_apply(Some("Deployment"), None, &web(2), "alice", false, NOW)
                .expect("created"),
        );
        let out = server_side_apply(Some("Deployment"), Some(&live), &web(5), "bob", true, LATER)
            .expect("forced");
        assert_eq!(out["spec"]["replicas"], 5);
        let alice = entry_of(&out, "alice").expect("alice keeps other fields");
        assert_eq!(alice["fieldsV1"]["f:spec"].get("f:replicas"), None);
        assert!(alice["fieldsV1"]["f:spec"].get("f:template").is_some());
        assert_eq!(alice["time"], NOW);
        let bob = entry_of(&out, "bob").expect("bob");
        assert_eq!(bob["fieldsV1"]["f:spec"]["f:replicas"], json!({}));
        assert_eq!(bob["time"], LATER);
        // Now alice conflicts with bob.
        let error = server_side_apply(
            Some("Deployment"),
            Some(&stored(out)),
            &web(2),
            "alice",
            false,
            LATER,
        )
        .expect_err("conflict");
        assert_eq!(
            error.to_string(),
            "Apply failed with 1 conflict: conflict with \"bob\": .spec.replicas"
        );
    }

    /// Conflict messages for Update managers and for `null`s.
    #[test]
    fn ssa_conflict_with_update_manager_message() {
        let mut live = stored(web(3));
        live["metadata"]["managedFields"] = json!([{
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "apiVersion": "apps/v1",
            "time": "2024-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:replicas": {}, "f:paused": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}}
        }]);
        let mut applied = web(5);
        applied["spec"]["paused"] = json!(true);
        let error = server_side_apply(
            Some("Deployment"),
            Some(&live),
            &applied,
            "kubectl",
            false,
            NOW,
        )
        .expect_err("conflict");
        assert_eq!(
            error.to_string(),
            "Apply failed with 2 conflicts: conflicts with \"kubectl-client-side-apply\" using apps/v1 at 2024-01-01T00:00:00Z:\n- .spec.paused\n- .spec.replicas"
        );
        // A null in the applied object removes the field: a conflict too.
        let mut applied = web(3);
        applied["spec"]["replicas"] = Value::Null;
        let error = server_side_apply(
            Some("Deployment"),
            Some(&live),
            &applied,
            "kubectl",
            false,
            NOW,
        )
        .expect_err("conflict");
        assert!(error.to_string().ends_with(".spec.replicas"), "{error}");
        let out = server_side_apply(
            Some("Deployment"),
            Some(&live),
            &applied,
            "kubectl",
            true,
            NOW,
        )
        .expect("forced");
        assert_eq!(out["spec"].get("replicas"), None);
    }

    /// Replacing a map owned field by field by another manager conflicts.
    #[test]
    fn ssa_replacing_a_map_owned_by_another_manager_conflicts() {
        let live = stored(
            server_side_apply(Some("Deployment"), None, &web(2), "alice", false, NOW)
                .expect("created"),
        );
        let mut applied = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": null}});
        let error = server_side_apply(
            Some("Deployment"),
            Some(&live),
            &applied,
            "bob",
            false,
            LATER,
        )
        .expect_err("conflict");
        assert_eq!(
            error.to_string(),
            "Apply failed with 1 conflict: conflict with \"alice\": .metadata.labels.app"
        );
        applied["metadata"]["labels"] = json!("oops");
        let error = server_side_apply(
            Some("Deployment"),
            Some(&live),
            &applied,
            "bob",
            false,
            LATER,
        )
        .expect_err("conflict");
        assert!(
            error.to_string().ends_with(".metadata.labels.app"),
            "{error}"
        );
    }

    /// Two appliers own different fields and prune only their own.
    #[test]
    fn ssa_two_managers_owning_different_fields() {
        let live = stored(
            server_side_apply(Some("Deployment"), None, &web(2), "alice", false, NOW)
                .expect("created"),
        );
        let bob_config = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"team": "b"}},
            "spec": {"paused": true, "template": {"spec": {"containers": [{"name": "sidecar", "image": "envoy"}]}}}
        });
        let both = stored(
            server_side_apply(
                Some("Deployment"),
                Some(&live),
                &bob_config,
                "bob",
                false,
                LATER,
            )
            .expect("bob"),
        );
        assert_eq!(
            both["metadata"]["labels"],
            json!({"app": "web", "team": "b"})
        );
        assert_eq!(
            names(&both["spec"]["template"]["spec"]["containers"]),
            ["nginx", "sidecar"]
        );
        assert_eq!(managed(&both).len(), 2);
        // Alice drops her containers and labels: bob's stay, hers go.
        let alice_config = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 4}});
        let out = server_side_apply(
            Some("Deployment"),
            Some(&both),
            &alice_config,
            "alice",
            false,
            LATER,
        )
        .expect("alice");
        assert_eq!(out["metadata"]["labels"], json!({"team": "b"}));
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"],
            json!([{"name": "sidecar", "image": "envoy"}])
        );
        assert_eq!(out["spec"]["paused"], true);
        assert_eq!(out["spec"]["replicas"], 4);
        assert_eq!(out["spec"].get("selector"), None);
        // Bob drops everything: he loses his entry and his fields.
        let bob_empty =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}});
        let out = server_side_apply(
            Some("Deployment"),
            Some(&stored(out)),
            &bob_empty,
            "bob",
            false,
            LATER,
        )
        .expect("bob");
        assert!(entry_of(&out, "bob").is_none());
        assert_eq!(out["spec"], json!({"replicas": 4}));
        assert_eq!(out["metadata"].get("labels"), None);
    }

    /// A shared field survives when one owner stops applying it.
    #[test]
    fn ssa_shared_field_survives_when_one_owner_leaves() {
        let live = stored(
            server_side_apply(Some("Deployment"), None, &web(2), "alice", false, NOW)
                .expect("created"),
        );
        let shared = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 2}});
        let live = stored(
            server_side_apply(Some("Deployment"), Some(&live), &shared, "bob", false, NOW)
                .expect("bob"),
        );
        let mut without = web(2);
        if let Some(Value::Object(spec)) = without.get_mut("spec") {
            spec.shift_remove("replicas");
        }
        let out = server_side_apply(
            Some("Deployment"),
            Some(&live),
            &without,
            "alice",
            false,
            LATER,
        )
        .expect("alice");
        assert_eq!(out["spec"]["replicas"], 2);
    }

    /// Unmanaged live fields belong to `before-first-apply`.
    #[test]
    fn ssa_before_first_apply_owns_unmanaged_fields() {
        let live = stored(web(3));
        let error = server_side_apply(
            Some("Deployment"),
            Some(&live),
            &web(5),
            "kubectl",
            false,
            NOW,
        )
        .expect_err("conflict");
        assert_eq!(
            error.to_string(),
            format!(
                "Apply failed with 1 conflict: conflict with \"before-first-apply\" using apps/v1 at {NOW}: .spec.replicas"
            )
        );
        let out = server_side_apply(
            Some("Deployment"),
            Some(&live),
            &web(3),
            "kubectl",
            false,
            NOW,
        )
        .expect("same values");
        let before = entry_of(&out, "before-first-apply").expect("before-first-apply entry");
        assert_eq!(before["operation"], "Update");
        assert_eq!(
            before["fieldsV1"]["f:metadata"]["f:labels"],
            json!({".": {}, "f:app": {}})
        );
        assert_eq!(
            out["metadata"]["managedFields"][0]["manager"], "kubectl",
            "Apply entries sort first"
        );
    }

    /// Keyed and set lists merge item by item across managers.
    #[test]
    fn ssa_keyed_and_set_lists_merge_item_by_item() {
        let live = stored(
            server_side_apply(Some("Deployment"), None, &web(2), "alice", false, NOW)
                .expect("created"),
        );
        let bob = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "finalizers": ["x"]},
            "spec": {"template": {"spec": {"containers": [{"name": "nginx", "ports": [{"containerPort": 443}], "env": [{"name": "A", "value": "1"}]}]}}}
        });
        let out = server_side_apply(Some("Deployment"), Some(&live), &bob, "bob", false, NOW)
            .expect("bob");
        let container = &out["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "nginx:1.25");
        assert_eq!(
            container["ports"],
            json!([{"containerPort": 80}, {"containerPort": 443}])
        );
        assert_eq!(container["env"], json!([{"name": "A", "value": "1"}]));
        assert_eq!(out["metadata"]["finalizers"], json!(["x"]));
        let bob_fields = &entry_of(&out, "bob").expect("bob")["fieldsV1"];
        assert_eq!(
            bob_fields["f:metadata"]["f:finalizers"],
            json!({"v:\"x\"": {}})
        );
        assert_eq!(
            bob_fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"]
                ["f:ports"],
            json!({"k:{\"containerPort\":443,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}})
        );
    }

    /// Malformed apply configurations are 400s.
    #[test]
    fn ssa_rejects_malformed_applied_objects() {
        let cases = [
            json!("nope"),
            json!({"kind": "Deployment", "metadata": {"name": "x"}}),
            json!({"apiVersion": "apps/v1", "metadata": {"name": "x"}}),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": {"containers": ["a"]}}}}),
        ];
        for applied in cases {
            let error = server_side_apply(Some("Deployment"), None, &applied, "m", false, NOW)
                .expect_err("malformed");
            assert_eq!(error.code(), 400, "{applied}: {error}");
        }
        let error = server_side_apply(Some("Deployment"), None, &web(1), "", false, NOW)
            .expect_err("no manager");
        assert_eq!(error.code(), 400);
        let error = server_side_apply(
            Some("Deployment"),
            None,
            &json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}}}),
            "m",
            false,
            NOW,
        )
        .expect_err("duplicate");
        assert_eq!(
            error.to_string(),
            ".spec.template.spec.containers: duplicate entries for key [name=\"a\"]"
        );
    }

    /// Malformed live managedFields entries are dropped.
    #[test]
    fn ssa_tolerates_malformed_live_managed_fields() {
        let mut live = stored(web(2));
        live["metadata"]["managedFields"] = json!([
            {"manager": "x", "operation": "Bogus", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {}},
            {"manager": "y", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1", "fieldsV1": {"zz": {}}},
            {"manager": "alice", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1", "time": NOW,
             "fieldsV1": {"f:spec": {"f:replicas": {}}}}
        ]);
        let out = server_side_apply(
            Some("Deployment"),
            Some(&live),
            &web(2),
            "bob",
            false,
            LATER,
        )
        .expect("applied");
        let managers: Vec<Value> = managed(&out)
            .iter()
            .map(|entry| entry["manager"].clone())
            .collect();
        assert_eq!(managers, vec![json!("alice"), json!("bob")]);
    }

    /// FieldsV1 decoding, encoding and path display.
    #[test]
    fn fieldsv1_round_trip_and_display() {
        let fields = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:ports": {"k:{\"protocol\":\"TCP\",\"port\":80}": {".": {}, "f:port": {}}}, "f:list": {"i:3": {}}, "f:set": {"v:1": {}}}
        });
        let mut set = FieldSet::new();
        assert!(decode_fields(&fields, &mut Vec::new(), &mut set).is_some());
        let displayed: Vec<String> = set.iter().map(|path| display_path(path)).collect();
        assert!(
            displayed.contains(&".spec.ports[port=80,protocol=\"TCP\"].port".to_string()),
            "{displayed:?}"
        );
        assert!(
            displayed.contains(&".spec.list[3]".to_string()),
            "{displayed:?}"
        );
        assert!(
            displayed.contains(&".spec.set[=1]".to_string()),
            "{displayed:?}"
        );
        assert!(
            displayed.contains(&".metadata.labels".to_string()),
            "{displayed:?}"
        );
        let encoded = encode_fields(&set);
        assert_eq!(
            encoded["f:spec"]["f:ports"],
            json!({"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}}})
        );
        let mut again = FieldSet::new();
        assert!(decode_fields(&encoded, &mut Vec::new(), &mut again).is_some());
        assert_eq!(again, set);
        assert!(
            decode_fields(&json!({"x:1": {}}), &mut Vec::new(), &mut FieldSet::new()).is_none()
        );
        assert!(
            decode_fields(&json!({"k:[1]": {}}), &mut Vec::new(), &mut FieldSet::new()).is_none()
        );
    }

    /// The list table lookups.
    #[test]
    fn list_table_lookups() {
        let segs = |path: &str| path.split('.').map(str::to_string).collect::<Vec<_>>();
        assert_eq!(
            list_rule(Some("Job"), &segs("spec.template.spec.containers.env")).smp,
            SmpList::Keyed("name")
        );
        assert_eq!(
            list_rule(Some("Job"), &segs("spec.template.spec.containers.args")),
            ATOMIC
        );
        assert_eq!(list_rule(Some("Pod"), &segs("spec.tolerations")), ATOMIC);
        assert_eq!(list_rule(None, &segs("metadata.finalizers")), SET);
        assert_eq!(
            list_rule(Some("Pod"), &segs("spec.template.spec.containers")),
            ATOMIC
        );
        assert_eq!(
            list_rule(Some("Service"), &segs("spec.ports")).ssa,
            SsaList::Map(&["port", "protocol"])
        );
        assert_eq!(list_rule(None, &segs("status.conditions")), ATOMIC);
        assert_eq!(
            list_rule(Some("Lease"), &segs("status.conditions")).smp,
            SmpList::Keyed("type")
        );
    }

    // ------------------------------------------------------------------ update operations

    /// An `Update` author of the main resource in `v1`.
    fn updater(manager: &str) -> Updater {
        Updater {
            manager: manager.into(),
            api_version: "v1".into(),
            subresource: String::new(),
        }
    }

    /// A ConfigMap with the given data.
    fn config_map(data: Value) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default", "labels": {"app": "web"}},
            "data": data,
        })
    }

    /// `new` after `updater` wrote it over `live` (`None` to create it).
    fn updated(live: Option<&Value>, mut new: Value, updater: &Updater, now: &str) -> Value {
        record_update(Some("ConfigMap"), live, &mut new, updater, now);
        new
    }

    /// The (manager, operation, subresource, time) of each entry, in order.
    fn identities(object: &Value) -> Vec<(String, String, String, String)> {
        managed(object)
            .iter()
            .map(|entry| {
                let text = |key: &str| entry[key].as_str().unwrap_or_default().to_string();
                (
                    text("manager"),
                    text("operation"),
                    text("subresource"),
                    text("time"),
                )
            })
            .collect()
    }

    /// A creation gives the creator every field, maps included, but not the server's metadata.
    #[test]
    fn update_create_owns_every_field() {
        let mut new = config_map(json!({"x": "1", "y": "2"}));
        new["metadata"]["uid"] = json!("u-1");
        new["metadata"]["generation"] = json!(1);
        let out = updated(None, new.clone(), &updater("kubectl-create"), NOW);
        assert_eq!(
            managed(&out),
            [json!({
                "manager": "kubectl-create",
                "operation": "Update",
                "apiVersion": "v1",
                "time": NOW,
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:data": {".": {}, "f:x": {}, "f:y": {}},
                    "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                },
            })]
        );
        let text = managed(&out)[0]["fieldsV1"].to_string();
        assert!(text.starts_with(r#"{"f:data":{".":{},"#), "{text}");
        let mut without = out.clone();
        if let Some(Value::Object(meta)) = without.get_mut("metadata") {
            meta.shift_remove("managedFields");
        }
        assert_eq!(without, new, "nothing else changes");
    }

    /// Changed and added fields move to the writer; removed ones leave every owner; the
    /// writer's entry takes the time, the others keep theirs.
    #[test]
    fn update_moves_changed_fields_and_forgets_removed_ones() {
        let live = updated(
            None,
            config_map(json!({"x": "1", "y": "2", "w": "0"})),
            &updater("alice"),
            NOW,
        );
        let out = updated(
            Some(&live),
            config_map(json!({"x": "changed", "z": "3", "w": "0"})),
            &updater("bob"),
            LATER,
        );
        assert_eq!(
            entry_of(&out, "alice").expect("alice")["fieldsV1"],
            json!({"f:data": {".": {}, "f:w": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
        );
        assert_eq!(
            entry_of(&out, "bob").expect("bob")["fieldsV1"],
            json!({"f:data": {"f:x": {}, "f:z": {}}})
        );
        assert_eq!(
            identities(&out),
            [
                ("alice".into(), "Update".into(), String::new(), NOW.into()),
                ("bob".into(), "Update".into(), String::new(), LATER.into()),
            ]
        );

        // The same manager again: one entry, the union of its fields, the new time.
        let later = "2024-05-01T12:00:00Z";
        let again = updated(
            Some(&out),
            config_map(json!({"x": "changed", "z": "3", "w": "1"})),
            &updater("bob"),
            later,
        );
        assert_eq!(
            entry_of(&again, "bob").expect("bob")["fieldsV1"],
            json!({"f:data": {"f:w": {}, "f:x": {}, "f:z": {}}})
        );
        assert_eq!(entry_of(&again, "bob").expect("bob")["time"], later);
        assert_eq!(
            entry_of(&again, "alice").expect("alice")["fieldsV1"],
            json!({"f:data": {}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}}),
            "alice still owns the map itself"
        );

        // A write that changes nothing changes no entry, not even a time.
        let noop = updated(
            Some(&again),
            again.clone(),
            &updater("carol"),
            "2025-01-01T00:00:00Z",
        );
        assert_eq!(noop, again);
        // Removing a whole map removes it, and everything below it, from its owners.
        let mut gone = config_map(json!({}));
        if let Value::Object(map) = &mut gone {
            map.shift_remove("data");
        }
        let out = updated(Some(&again), gone, &updater("carol"), later);
        assert_eq!(
            identities(&out),
            [("alice".into(), "Update".into(), String::new(), NOW.into())],
            "bob owned only data fields, carol changed nothing it could own"
        );
        assert_eq!(
            entry_of(&out, "alice").expect("alice")["fieldsV1"],
            json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
        );
    }

    /// Keyed lists: a changed item field moves, the item stays with its owner.
    #[test]
    fn update_tracks_keyed_list_items() {
        let live = stored(
            server_side_apply(Some("Deployment"), None, &web(2), "alice", false, NOW)
                .expect("created"),
        );
        let mut new = live.clone();
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.26");
        new["spec"]["replicas"] = json!(3);
        let updater = Updater {
            manager: "kubectl-edit".into(),
            api_version: "apps/v1".into(),
            subresource: String::new(),
        };
        record_update(Some("Deployment"), Some(&live), &mut new, &updater, LATER);
        assert_eq!(
            entry_of(&new, "kubectl-edit").expect("edit")["fieldsV1"],
            json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"nginx\"}": {"f:image": {}}
            }}}}})
        );
        let alice = &entry_of(&new, "alice").expect("alice")["fieldsV1"];
        assert_eq!(alice["f:spec"].get("f:replicas"), None);
        assert_eq!(
            alice["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"]
                .get("f:image"),
            None
        );
        assert!(
            alice["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"]
                .get(".")
                .is_some()
        );
        // The Apply entry sorts before the Update entry.
        assert_eq!(managed(&new)[0]["operation"], "Apply");

        // The applier now conflicts with the editor on the fields it changed.
        let error = server_side_apply(
            Some("Deployment"),
            Some(&stored(new.clone())),
            &web(2),
            "alice",
            false,
            LATER,
        )
        .expect_err("conflict");
        assert_eq!(
            error.to_string(),
            format!(
                "Apply failed with 2 conflicts: conflicts with \"kubectl-edit\" using apps/v1 at {LATER}:\n- .spec.replicas\n- .spec.template.spec.containers[name=\"nginx\"].image"
            )
        );
    }

    /// An existing object without managed fields stays untracked; a request's managed fields
    /// replace the live ones, and an empty list resets them.
    #[test]
    fn update_decides_which_managed_fields_to_start_from() {
        let untracked = stored(config_map(json!({"x": "1"})));
        let out = updated(
            Some(&untracked),
            config_map(json!({"x": "2"})),
            &updater("bob"),
            LATER,
        );
        assert_eq!(out.pointer("/metadata/managedFields"), None);

        let live = updated(None, config_map(json!({"x": "1"})), &updater("alice"), NOW);
        // Given entries (as kubectl's client-side to server-side migration sends them).
        let mut new = live.clone();
        new["metadata"]["managedFields"] = json!([{
            "manager": "kubectl", "operation": "Apply", "apiVersion": "v1", "time": NOW,
            "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:x": {}}},
        }]);
        let out = updated(Some(&live), new.clone(), &updater("kubectl"), LATER);
        assert_eq!(
            identities(&out),
            [("kubectl".into(), "Apply".into(), String::new(), NOW.into())]
        );
        // A malformed list is ignored: the live entries stay.
        new["metadata"]["managedFields"] = json!([{"manager": "x", "operation": "Sideways"}]);
        let out = updated(Some(&live), new.clone(), &updater("bob"), LATER);
        assert_eq!(managed(&out), managed(&live));
        // An empty list (or one empty entry) resets: the object is no longer tracked.
        for reset in [json!([]), json!([{}])] {
            new["metadata"]["managedFields"] = reset;
            let out = updated(Some(&live), new.clone(), &updater("bob"), LATER);
            assert_eq!(out.pointer("/metadata/managedFields"), None);
        }
        // A subresource write never takes the request's entries.
        new["metadata"]["managedFields"] = json!([]);
        new["data"]["x"] = json!("2");
        let status = Updater {
            subresource: "status".into(),
            ..updater("bob")
        };
        let out = updated(Some(&live), new, &status, LATER);
        assert_eq!(
            identities(&out),
            [
                ("alice".into(), "Update".into(), String::new(), NOW.into()),
                ("bob".into(), "Update".into(), "status".into(), LATER.into()),
            ]
        );
        assert_eq!(
            managed(&out)[1]["subresource"],
            "status",
            "subresource is written last"
        );
    }

    /// Identity of `Update` entries: manager, apiVersion and subresource; an empty manager is
    /// left out of the entry.
    #[test]
    fn update_entries_are_per_manager_version_and_subresource() {
        let live = updated(None, config_map(json!({"x": "1"})), &updater("alice"), NOW);
        let other_version = Updater {
            api_version: "v2".into(),
            ..updater("alice")
        };
        let out = updated(
            Some(&live),
            config_map(json!({"x": "2"})),
            &other_version,
            LATER,
        );
        let versions: Vec<Value> = managed(&out)
            .iter()
            .map(|entry| entry["apiVersion"].clone())
            .collect();
        assert_eq!(versions, [json!("v1"), json!("v2")]);

        let anonymous = updated(None, config_map(json!({})), &updater(""), NOW);
        let entry = &managed(&anonymous)[0];
        assert_eq!(entry.get("manager"), None, "{entry}");
        assert_eq!(
            decode_entries(&anonymous)
                .first()
                .map(|e| e.manager.as_str()),
            Some("")
        );
    }

    /// Beyond ten `Update` entries the oldest ones merge, per apiVersion, into
    /// `ancient-changes`; `Apply` entries do not count.
    #[test]
    fn update_caps_update_managers_at_ten() {
        let keys: Vec<String> = (0..11).map(|i| format!("k{i:02}")).collect();
        let mut object = server_side_apply(
            None,
            None,
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"applied": "a"}}),
            "applier",
            false,
            NOW,
        )
        .expect("created");
        // Ten managers, the second oldest in another apiVersion.
        for (i, key) in keys.iter().take(10).enumerate() {
            let mut new = object.clone();
            new["data"][key.as_str()] = json!("1");
            let updater = Updater {
                api_version: if i == 1 { "v2" } else { "v1" }.into(),
                ..updater(&format!("m{i:02}"))
            };
            record_update(
                None,
                Some(&object),
                &mut new,
                &updater,
                &format!("2024-05-01T10:00:{i:02}Z"),
            );
            object = new;
        }
        assert_eq!(managed(&object).len(), 11, "ten updaters and the applier");
        let mut new = object.clone();
        new["data"]["k10"] = json!("1");
        record_update(
            None,
            Some(&object),
            &mut new,
            &updater("m10"),
            "2024-05-01T10:00:10Z",
        );
        let managers: Vec<(String, String)> = managed(&new)
            .iter()
            .map(|e| {
                (
                    e["manager"].as_str().unwrap_or_default().to_string(),
                    e["apiVersion"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        let expected: Vec<(String, String)> = [
            ("applier", "v1"),
            ("m01", "v2"),
            ("ancient-changes", "v1"),
            ("m03", "v1"),
            ("m04", "v1"),
            ("m05", "v1"),
            ("m06", "v1"),
            ("m07", "v1"),
            ("m08", "v1"),
            ("m09", "v1"),
            ("m10", "v1"),
        ]
        .iter()
        .map(|(m, v)| (m.to_string(), v.to_string()))
        .collect();
        assert_eq!(managers, expected);
        let ancient = entry_of(&new, "ancient-changes").expect("bucket");
        assert_eq!(
            ancient["fieldsV1"],
            json!({"f:data": {"f:k00": {}, "f:k02": {}}})
        );
        assert_eq!(
            ancient["time"], "2024-05-01T10:00:02Z",
            "the time of the last entry merged"
        );
    }

    /// The manager of a write: `fieldManager`, or else the User-Agent's product name.
    #[test]
    fn managers_from_field_manager_or_user_agent() {
        let cases = [
            (Some("mine"), Some("kubectl/v1.32.4 (linux/amd64)"), "mine"),
            (Some(""), Some("kubectl/v1.32.4 (linux/amd64)"), "kubectl"),
            (None, Some("kube-rs/0.99.0"), "kube-rs"),
            (
                None,
                Some("OpenAPI-Generator/31.0.0/python"),
                "OpenAPI-Generator",
            ),
            (None, Some("my tool\t\u{7}x/1"), "my toolx"),
            (None, None, ""),
        ];
        for (field_manager, user_agent, expected) in cases {
            assert_eq!(
                manager_or_user_agent(field_manager, user_agent),
                expected,
                "{field_manager:?} {user_agent:?}"
            );
        }
        let long = "é".repeat(100);
        let manager = manager_or_user_agent(None, Some(&long));
        assert_eq!(manager.len(), 128);
        assert_eq!(manager, "é".repeat(64));
    }

    /// A Deployment as `kubectl apply` (client-side) creates it: the annotation and an `Update`
    /// entry of `kubectl-client-side-apply`.
    fn client_side_applied(replicas: i64) -> Value {
        let mut object = web(replicas);
        let annotation = format!("{}\n", web(replicas));
        object["metadata"]["annotations"] =
            json!({"kubectl.kubernetes.io/last-applied-configuration": annotation});
        let updater = Updater {
            manager: "kubectl-client-side-apply".into(),
            api_version: "apps/v1".into(),
            subresource: String::new(),
        };
        record_update(Some("Deployment"), None, &mut object, &updater, NOW);
        stored(object)
    }

    /// `kubectl` may take over fields that still have their last-applied values; the server
    /// then rewrites the annotation as Go's encoder writes the applied object.
    #[test]
    fn ssa_kubectl_takes_over_last_applied_fields() {
        let live = client_side_applied(3);
        let mut applied = web(5);
        applied["metadata"]["labels"]["tier"] = json!("<front&end>");
        let out = server_side_apply(
            Some("Deployment"),
            Some(&live),
            &applied,
            "kubectl",
            false,
            LATER,
        )
        .expect("no conflict for kubectl");
        assert_eq!(out["spec"]["replicas"], 5);
        let kubectl = entry_of(&out, "kubectl").expect("kubectl");
        assert_eq!(kubectl["operation"], "Apply");
        assert_eq!(kubectl["fieldsV1"]["f:spec"]["f:replicas"], json!({}));
        let csa = entry_of(&out, "kubectl-client-side-apply").expect("csa");
        assert_eq!(csa["fieldsV1"]["f:spec"].get("f:replicas"), None);
        assert_eq!(
            csa["fieldsV1"]["f:metadata"]["f:annotations"],
            json!({".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}),
            "the annotation stays with the client-side manager"
        );
        let annotation =
            out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
                .as_str()
                .expect("annotation");
        assert_eq!(
            annotation,
            concat!(
                r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"labels":{"app":"web","tier":"\u003cfront\u0026end\u003e"},"name":"web","namespace":"default"},"#,
                r#""spec":{"replicas":5,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"#,
                r#""spec":{"containers":[{"image":"nginx:1.25","name":"nginx","ports":[{"containerPort":80}]}]}}}}"#,
                "\n"
            )
        );

        // Other managers get the conflict.
        let error = server_side_apply(
            Some("Deployment"),
            Some(&live),
            &web(5),
            "alice",
            false,
            LATER,
        )
        .expect_err("conflict");
        assert!(
            error.to_string().starts_with(
                "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\""
            ),
            "{error}"
        );
        // An apply by another manager leaves the annotation alone.
        let out = server_side_apply(
            Some("Deployment"),
            Some(&live),
            &web(5),
            "alice",
            true,
            LATER,
        )
        .expect("forced");
        assert_eq!(
            out["metadata"]["annotations"],
            live["metadata"]["annotations"]
        );
    }

    /// Fields changed since the last client-side apply still conflict, and only those are
    /// reported; an annotation for another apiVersion, or none, allows nothing.
    #[test]
    fn ssa_last_applied_exception_covers_only_unchanged_fields() {
        let mut live = client_side_applied(3);
        live["spec"]["paused"] = json!(true);
        live["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.26");
        let mut entries = managed(&live);
        entries[0]["fieldsV1"]["f:spec"]["f:paused"] = json!({});
        live["metadata"]["managedFields"] = Value::Array(entries);
        let mut applied = web(5);
        applied["spec"]["paused"] = json!(false);
        applied["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.27");
        let error = server_side_apply(
            Some("Deployment"),
            Some(&live),
            &applied,
            "kubectl",
            false,
            LATER,
        )
        .expect_err("conflict");
        assert_eq!(
            error.to_string(),
            format!(
                "Apply failed with 2 conflicts: conflicts with \"kubectl-client-side-apply\" using apps/v1 at {NOW}:\n- .spec.paused\n- .spec.template.spec.containers[name=\"nginx\"].image"
            ),
            ".spec.replicas still has its last-applied value"
        );

        let mut other = client_side_applied(3);
        other["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
            json!(web(3).to_string().replace("apps/v1", "apps/v1beta1"));
        let error = server_side_apply(
            Some("Deployment"),
            Some(&other),
            &web(5),
            "kubectl",
            false,
            LATER,
        )
        .expect_err("another apiVersion");
        assert!(error.to_string().ends_with(".spec.replicas"), "{error}");

        // Without managed fields, `before-first-apply` conflicts are forgiven as well; the
        // annotation is not added where there was none.
        let mut unmanaged = client_side_applied(3);
        if let Some(Value::Object(meta)) = unmanaged.get_mut("metadata") {
            meta.shift_remove("managedFields");
        }
        let out = server_side_apply(
            Some("Deployment"),
            Some(&unmanaged),
            &web(5),
            "kubectl",
            false,
            LATER,
        )
        .expect("forgiven");
        assert_eq!(out["spec"]["replicas"], 5);
        let out = server_side_apply(
            Some("Deployment"),
            Some(&stored(web(3))),
            &web(3),
            "kubectl",
            false,
            LATER,
        )
        .expect("same values");
        assert_eq!(out["metadata"].get("annotations"), None);
    }

    // ------------------------------------------------------------------ property tests

    /// Keys that hit the list table.
    const PLAIN_KEYS: &[&str] = &[
        "a",
        "b",
        "name",
        "uid",
        "type",
        "port",
        "containerPort",
        "spec",
        "metadata",
        "status",
        "template",
        "containers",
        "finalizers",
        "conditions",
        "ports",
        "env",
        "managedFields",
    ];

    /// Directive keys.
    const DIRECTIVE_KEYS: &[&str] = &[
        "$patch",
        "$retainKeys",
        "$setElementOrder/containers",
        "$setElementOrder/finalizers",
        "$deleteFromPrimitiveList/finalizers",
        "$deleteFromPrimitiveList/containers",
    ];

    /// Arbitrary JSON over keys that hit the list table, with or without nulls and directives.
    fn arb_json_with(directives: bool) -> impl Strategy<Value = Value> {
        let mut leaves = vec![
            any::<bool>().prop_map(Value::Bool).boxed(),
            (-5i64..5).prop_map(Value::from).boxed(),
            prop::sample::select(vec!["a", "b", "replace", "delete", "merge", "TCP", "name"])
                .prop_map(Value::from)
                .boxed(),
        ];
        let mut keys: Vec<&'static str> = PLAIN_KEYS.to_vec();
        if directives {
            leaves.push(Just(Value::Null).boxed());
            keys.extend_from_slice(DIRECTIVE_KEYS);
        }
        let leaf = prop::strategy::Union::new(leaves);
        leaf.prop_recursive(4, 48, 6, move |inner| {
            let keys = prop::sample::select(keys.clone());
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((keys, inner), 0..5).prop_map(|entries| Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect()
                )),
            ]
        })
    }

    /// Arbitrary JSON with nulls and directives.
    fn arb_json() -> impl Strategy<Value = Value> {
        arb_json_with(true)
    }

    /// Null-free, directive-free maps.
    fn arb_plain_map() -> impl Strategy<Value = Value> {
        prop::collection::vec(
            (
                prop::sample::select(PLAIN_KEYS.to_vec()),
                arb_json_with(false),
            ),
            0..5,
        )
        .prop_map(|entries| {
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            )
        })
    }

    /// Whether every list has distinct items, and distinct merge keys among its maps.
    fn lists_are_sets(value: &Value) -> bool {
        match value {
            Value::Array(items) => {
                let distinct = items.iter().enumerate().all(|(i, item)| {
                    items.iter().skip(i + 1).all(|other| {
                        other != item
                            && ["name", "uid", "type", "port", "containerPort"]
                                .iter()
                                .all(|key| {
                                    item.get(key).is_none() || item.get(key) != other.get(key)
                                })
                    })
                });
                distinct && items.iter().all(lists_are_sets)
            }
            Value::Object(map) => map.values().all(lists_are_sets),
            _ => true,
        }
    }

    /// A kind, built-in or not.
    fn arb_kind() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "Pod",
            "Deployment",
            "Service",
            "ConfigMap",
            "KopfExample",
            "CronJob",
        ])
    }

    /// An object of `kind` with arbitrary metadata, spec and status.
    fn arb_object(kind: &'static str) -> impl Strategy<Value = Value> {
        (arb_json(), arb_json(), arb_json()).prop_map(move |(meta, spec, status)| {
            let mut object =
                json!({"apiVersion": "v1", "kind": kind, "spec": spec, "status": status});
            let mut metadata = match meta {
                Value::Object(map) => map,
                _ => Map::new(),
            };
            metadata.insert("name".into(), json!("x"));
            object["metadata"] = Value::Object(metadata);
            object
        })
    }

    /// Whether a value contains `null`.
    fn has_null(value: &Value) -> bool {
        match value {
            Value::Null => true,
            Value::Array(items) => items.iter().any(has_null),
            Value::Object(map) => map.values().any(has_null),
            _ => false,
        }
    }

    /// Whether a value contains a `$` key.
    fn has_directive(value: &Value) -> bool {
        match value {
            Value::Array(items) => items.iter().any(has_directive),
            Value::Object(map) => map
                .iter()
                .any(|(key, value)| key.starts_with('$') || has_directive(value)),
            _ => false,
        }
    }

    /// Deployment apply configurations drawn from small pools, so that managers overlap.
    fn arb_deployment_config() -> impl Strategy<Value = Value> {
        let container = (
            prop::sample::select(vec!["a", "b", "c"]),
            prop::option::of(prop::sample::select(vec!["i1", "i2"])),
            prop::collection::btree_set(prop::sample::select(vec![80, 443, 8080]), 0..3),
            prop::collection::btree_map(
                prop::sample::select(vec!["X", "Y"]),
                prop::sample::select(vec!["1", "2"]),
                0..3,
            ),
        );
        (
            prop::collection::vec(container, 0..3),
            prop::collection::btree_map(
                prop::sample::select(vec!["app", "tier"]),
                prop::sample::select(vec!["1", "2"]),
                0..3,
            ),
            prop::collection::btree_set(prop::sample::select(vec!["f1", "f2"]), 0..3),
            prop::option::of(1i64..3),
        )
            .prop_map(|(containers, labels, finalizers, replicas)| {
                let mut seen = BTreeSet::new();
                let containers: Vec<Value> = containers
                    .into_iter()
                    .filter(|(name, ..)| seen.insert(*name))
                    .map(|(name, image, ports, env)| {
                        let mut container = json!({"name": name});
                        if let Some(image) = image {
                            container["image"] = json!(image);
                        }
                        if !ports.is_empty() {
                            let ports: Vec<Value> = ports
                                .into_iter()
                                .map(|port| json!({"containerPort": port}))
                                .collect();
                            container["ports"] = Value::Array(ports);
                        }
                        if !env.is_empty() {
                            let env: Vec<Value> = env
                                .into_iter()
                                .map(|(name, value)| json!({"name": name, "value": value}))
                                .collect();
                            container["env"] = Value::Array(env);
                        }
                        container
                    })
                    .collect();
                let mut metadata = json!({"name": "web"});
                if !labels.is_empty() {
                    metadata["labels"] = json!(labels);
                }
                if !finalizers.is_empty() {
                    metadata["finalizers"] = json!(finalizers);
                }
                let mut config =
                    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata});
                if let Some(replicas) = replicas {
                    config["spec"]["replicas"] = json!(replicas);
                }
                if !containers.is_empty() {
                    config["spec"]["template"]["spec"]["containers"] = Value::Array(containers);
                }
                config
            })
    }

    /// Checks that every value set by `config` is in `result`.
    fn applied_values_win(config: &Value, result: &Value) -> Result<(), String> {
        let check = |ok: bool, what: &str| {
            if ok {
                Ok(())
            } else {
                Err(format!("{what}: {result}"))
            }
        };
        if let Some(replicas) = config.pointer("/spec/replicas") {
            check(
                result.pointer("/spec/replicas") == Some(replicas),
                "replicas",
            )?;
        }
        if let Some(Value::Object(labels)) = config.pointer("/metadata/labels") {
            for (key, value) in labels {
                check(
                    result["metadata"]["labels"].get(key) == Some(value),
                    "label",
                )?;
            }
        }
        if let Some(Value::Array(finalizers)) = config.pointer("/metadata/finalizers") {
            let live = result
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array);
            for finalizer in finalizers {
                check(
                    live.is_some_and(|live| live.contains(finalizer)),
                    "finalizer",
                )?;
            }
        }
        let live_containers = result
            .pointer("/spec/template/spec/containers")
            .and_then(Value::as_array);
        for container in config
            .pointer("/spec/template/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let live = live_containers
                .and_then(|list| list.iter().find(|live| live["name"] == container["name"]))
                .ok_or_else(|| format!("container {} missing: {result}", container["name"]))?;
            if let Some(image) = container.get("image") {
                check(live.get("image") == Some(image), "image")?;
            }
            for port in container
                .get("ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let ports = live.get("ports").and_then(Value::as_array);
                check(
                    ports.is_some_and(|ports| {
                        ports
                            .iter()
                            .any(|p| p["containerPort"] == port["containerPort"])
                    }),
                    "port",
                )?;
            }
            for env in container
                .get("env")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let envs = live.get("env").and_then(Value::as_array);
                check(envs.is_some_and(|envs| envs.contains(env)), "env")?;
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, max_global_rejects: 100_000, ..ProptestConfig::default() })]

        /// No function panics on arbitrary JSON.
        #[test]
        fn prop_nothing_panics(kind in arb_kind(), target in arb_json(), patch in arb_json(), force: bool) {
            let mut doc = target.clone();
            merge_patch(&mut doc, &patch);
            let mut doc = target.clone();
            let _ = json_patch(&mut doc, &patch);
            let mut doc = target.clone();
            if strategic_merge_patch(kind, &mut doc, &patch).is_err() {
                prop_assert_eq!(&doc, &target);
            }
            let _ = server_side_apply(Some(kind), Some(&target), &patch, "m", force, NOW);
            let _ = server_side_apply(None, None, &patch, "m", force, NOW);
        }

        /// Strategic merge patches on a realistic object never panic or leak directives.
        #[test]
        fn prop_smp_on_objects_never_panics(kind in arb_kind(), patch in arb_json()) {
            let live = json!({"metadata": {"finalizers": ["a", "b"], "ownerReferences": [{"uid": "a"}]},
                "spec": {"containers": [{"name": "a", "ports": [{"containerPort": 1}]}, {"name": "b"}],
                    "template": {"spec": {"containers": [{"name": "a"}]}}, "ports": [{"port": 1}]},
                "status": {"conditions": [{"type": "a"}]}});
            let wrapped = json!({"spec": patch.clone(), "metadata": patch.clone(), "status": {"conditions": patch.clone()}});
            for candidate in [&patch, &wrapped] {
                let mut doc = live.clone();
                if strategic_merge_patch(kind, &mut doc, candidate).is_ok() {
                    prop_assert!(!doc.to_string().contains("\"$"), "directive leaked: {}", doc);
                } else {
                    prop_assert_eq!(&doc, &live);
                }
            }
        }

        /// Apply sequences on arbitrary objects never panic.
        #[test]
        fn prop_ssa_sequences_never_panic(
            kind in arb_kind(),
            first in arb_kind().prop_flat_map(arb_object),
            second in arb_kind().prop_flat_map(arb_object),
            forces in prop::collection::vec(any::<bool>(), 3),
        ) {
            let mut live: Option<Value> = None;
            for (index, (applied, manager)) in [(&first, "a"), (&second, "b"), (&first, "a")].into_iter().enumerate() {
                let mut applied = applied.clone();
                applied["kind"] = json!(kind);
                let force = forces.get(index).copied().unwrap_or(false);
                match server_side_apply(Some(kind), live.as_ref(), &applied, manager, force, NOW) {
                    Ok(out) => {
                        prop_assert!(out.is_object());
                        live = Some(out);
                    }
                    Err(PatchError::Conflict { conflicts, .. }) => prop_assert!(!conflicts.is_empty()),
                    Err(other) => prop_assert_eq!(other.code(), 400),
                }
            }
        }

        /// Re-applying what created an object changes nothing.
        #[test]
        fn prop_ssa_reapply_is_a_noop(kind in arb_kind(), applied in arb_kind().prop_flat_map(arb_object)) {
            let mut applied = applied;
            applied["kind"] = json!(kind);
            if let Ok(created) = server_side_apply(Some(kind), None, &applied, "m", false, NOW) {
                let again = server_side_apply(Some(kind), Some(&created), &applied, "m", false, LATER);
                prop_assert_eq!(again.ok(), Some(created));
            }
        }

        /// Managers taking turns: applied values win, re-applies are no-ops.
        #[test]
        fn prop_ssa_managers_take_turns(
            steps in prop::collection::vec(
                (arb_deployment_config(), prop::sample::select(vec!["alice", "bob", "carol"]), any::<bool>()),
                1..6,
            ),
            start_unmanaged: bool,
        ) {
            let mut live: Option<Value> = None;
            for (index, (config, manager, force)) in steps.iter().enumerate() {
                let now = format!("2024-05-01T10:00:0{index}Z");
                let result = server_side_apply(Some("Deployment"), live.as_ref(), config, manager, *force, &now);
                let out = match result {
                    Ok(out) => out,
                    Err(PatchError::Conflict { conflicts, .. }) => {
                        prop_assert!(!*force);
                        prop_assert!(!conflicts.is_empty());
                        continue;
                    }
                    Err(other) => return Err(TestCaseError::fail(format!("unexpected error {other}"))),
                };
                if let Err(message) = applied_values_win(config, &out) {
                    return Err(TestCaseError::fail(message));
                }
                let entries = managed(&out);
                for entry in &entries {
                    prop_assert!(entry["fieldsV1"].as_object().is_some_and(|fields| !fields.is_empty()), "{}", out);
                }
                let again = server_side_apply(Some("Deployment"), Some(&out), config, manager, false, "2030-01-01T00:00:00Z");
                prop_assert_eq!(again.as_ref().ok(), Some(&out), "re-apply is a no-op");
                let mut stored = out;
                if start_unmanaged
                    && index == 0
                    && let Some(Value::Object(meta)) = stored.get_mut("metadata")
                {
                    meta.shift_remove("managedFields");
                }
                live = Some(stored);
            }
        }

        /// A sequence of writes by different managers: the owned fields are exactly the
        /// object's trackable fields, every entry decodes, and writing the same object again
        /// changes nothing.
        #[test]
        fn prop_update_owners_cover_the_object(
            kind in arb_kind(),
            objects in prop::collection::vec(arb_kind().prop_flat_map(arb_object), 1..5),
            managers in prop::collection::vec(prop::sample::select(vec!["alice", "bob", "carol"]), 5),
        ) {
            let mut live: Option<Value> = None;
            for (index, object) in objects.iter().enumerate() {
                let mut new = object.clone();
                new["kind"] = json!(kind);
                if let Some(Value::Object(meta)) = new.get_mut("metadata") {
                    meta.shift_remove("managedFields");
                }
                let manager = managers.get(index).copied().unwrap_or("alice");
                let now = format!("2024-05-01T10:00:0{index}Z");
                record_update(Some(kind), live.as_ref(), &mut new, &updater(manager), &now);
                let items = managed(&new);
                let entries = decode_entry_list(&items, true);
                prop_assert!(entries.is_some(), "{}", new);
                let entries = entries.unwrap_or_default();
                prop_assert_eq!(entries.len(), items.len());
                let owned: FieldSet = entries.iter().flat_map(|e| e.set.iter().cloned()).collect();
                let mut content = new.clone();
                if let Some(Value::Object(meta)) = content.get_mut("metadata") {
                    meta.shift_remove("managedFields");
                }
                let mut expected = FieldSet::new();
                Ssa { kind: Some(kind) }.all_paths(&content, &mut Vec::new(), &mut Vec::new(), &mut expected);
                expected.retain(|path| is_trackable(path));
                prop_assert_eq!(owned, expected);
                let mut again = new.clone();
                record_update(Some(kind), Some(&new), &mut again, &updater("dave"), "2030-01-01T00:00:00Z");
                prop_assert_eq!(&again, &new);
                live = Some(new);
            }
        }

        /// `merge_patch(x, x)` is `x` when `x` has no nulls.
        #[test]
        fn prop_merge_patch_with_itself_is_identity(value in arb_json_with(false)) {
            prop_assert!(!has_null(&value));
            let mut doc = value.clone();
            merge_patch(&mut doc, &value);
            prop_assert_eq!(doc, value);
        }

        /// An empty JSON patch is the identity.
        #[test]
        fn prop_json_patch_empty_is_identity(value in arb_json()) {
            let mut doc = value.clone();
            prop_assert!(json_patch(&mut doc, &json!([])).is_ok());
            prop_assert_eq!(doc, value);
        }

        /// Applying a null-free map twice is applying it once.
        #[test]
        fn prop_smp_null_free_map_is_idempotent(kind in arb_kind(), target in arb_json(), patch in arb_plain_map()) {
            prop_assert!(!has_null(&patch) && !has_directive(&patch));
            let mut once = target.clone();
            if strategic_merge_patch(kind, &mut once, &patch).is_ok() {
                let mut twice = once.clone();
                prop_assert!(strategic_merge_patch(kind, &mut twice, &patch).is_ok());
                prop_assert_eq!(&twice, &once);
            }
        }

        /// A null-free map patched with itself is unchanged.
        #[test]
        fn prop_smp_with_itself_is_identity(kind in arb_kind(), value in arb_plain_map()) {
            prop_assume!(lists_are_sets(&value));
            let mut doc = value.clone();
            if strategic_merge_patch(kind, &mut doc, &value).is_ok() {
                prop_assert_eq!(doc, value);
            }
        }
    }
}
