//! The list table: which lists merge how (by a key, as a set, or atomically), by kind and
//! field path, for strategic merge patches and for server-side apply.

/// How a strategic merge patch treats a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SmpList {
    /// Replaced as a whole (no patch strategy).
    Atomic,
    /// `patchStrategy=merge` without a key: merged as a set of scalars.
    Primitive,
    /// `patchStrategy=merge` with this `patchMergeKey`.
    Keyed(&'static str),
}

/// How server-side apply treats a list (`x-kubernetes-list-type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SsaList {
    /// `atomic`: owned and replaced as a whole.
    Atomic,
    /// `set`: items are scalars, owned one by one.
    Set,
    /// `map` with these `x-kubernetes-list-map-keys`.
    Map(&'static [&'static str]),
}

/// The strategies of one list field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ListRule {
    /// Strategic merge patch strategy.
    pub(super) smp: SmpList,
    /// Server-side apply list type.
    pub(super) ssa: SsaList,
}

/// A list with no strategy.
pub(super) const ATOMIC: ListRule = ListRule {
    smp: SmpList::Atomic,
    ssa: SsaList::Atomic,
};

/// A list of scalars merged as a set.
pub(super) const SET: ListRule = ListRule {
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
pub(super) fn list_rule(kind: Option<&str>, segments: &[String]) -> ListRule {
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
pub(super) fn show(segments: &[String]) -> String {
    if segments.is_empty() {
        "the object root".to_string()
    } else {
        segments.join(".")
    }
}
