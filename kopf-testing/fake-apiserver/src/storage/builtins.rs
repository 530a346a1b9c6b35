//! The built-in resources: every kind a default cluster serves, read from k8s-openapi's own
//! metadata of its types (group, version, kind, plural, scope), with what that metadata does
//! not say (short names, categories, subresources, whether `generation` is tracked) from the
//! real server's registry, kind by kind.

use std::any::TypeId;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::catalog::{
    ALL_VERBS, Builtin, Catalog, Derived, ResourceDef, RoundTrip, ScalePaths, VersionDef,
};
use super::columns::PrinterColumn;

/// The verbs of a review: it is created, answered, and never stored.
pub(crate) const CREATE_ONLY: &[&str] = &["create"];

/// The verbs of a resource the server computes and only lists (`componentstatuses`).
pub(crate) const READ_ONLY: &[&str] = &["get", "list"];

fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(typed).map_err(|e| e.to_string())
}

/// What k8s-openapi says of one type.
struct TypeFacts {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    round_trip: RoundTrip,
}

fn facts<T>() -> TypeFacts
where
    T: k8s_openapi::Resource + DeserializeOwned + Serialize + 'static,
    T::Scope: 'static,
{
    TypeFacts {
        group: T::GROUP,
        version: T::VERSION,
        kind: T::KIND,
        plural: T::URL_PATH_SEGMENT,
        namespaced: TypeId::of::<T::Scope>() == TypeId::of::<k8s_openapi::NamespaceResourceScope>(),
        round_trip: round_trip::<T>,
    }
}

/// The facts of every type listed, by its path under `k8s_openapi`.
macro_rules! types {
    ($($path:path),* $(,)?) => {
        vec![$(facts::<$path>()),*]
    };
}

/// The resources a default cluster serves: its GA APIs, and the reviews.
fn served_types() -> Vec<TypeFacts> {
    use k8s_openapi::api;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
    types![
        api::core::v1::Binding,
        api::core::v1::ComponentStatus,
        api::core::v1::ConfigMap,
        api::core::v1::Endpoints,
        api::core::v1::Event,
        api::core::v1::LimitRange,
        api::core::v1::Namespace,
        api::core::v1::Node,
        api::core::v1::PersistentVolume,
        api::core::v1::PersistentVolumeClaim,
        api::core::v1::Pod,
        api::core::v1::PodTemplate,
        api::core::v1::ReplicationController,
        api::core::v1::ResourceQuota,
        api::core::v1::Secret,
        api::core::v1::Service,
        api::core::v1::ServiceAccount,
        api::admissionregistration::v1::MutatingWebhookConfiguration,
        api::admissionregistration::v1::ValidatingAdmissionPolicy,
        api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
        api::admissionregistration::v1::ValidatingWebhookConfiguration,
        apiextensions::CustomResourceDefinition,
        apiregistration::APIService,
        api::apps::v1::ControllerRevision,
        api::apps::v1::DaemonSet,
        api::apps::v1::Deployment,
        api::apps::v1::ReplicaSet,
        api::apps::v1::StatefulSet,
        api::authentication::v1::SelfSubjectReview,
        api::authentication::v1::TokenReview,
        api::authorization::v1::LocalSubjectAccessReview,
        api::authorization::v1::SelfSubjectAccessReview,
        api::authorization::v1::SelfSubjectRulesReview,
        api::authorization::v1::SubjectAccessReview,
        api::autoscaling::v2::HorizontalPodAutoscaler,
        api::batch::v1::CronJob,
        api::batch::v1::Job,
        api::certificates::v1::CertificateSigningRequest,
        api::coordination::v1::Lease,
        api::discovery::v1::EndpointSlice,
        api::events::v1::Event,
        api::flowcontrol::v1::FlowSchema,
        api::flowcontrol::v1::PriorityLevelConfiguration,
        api::networking::v1::Ingress,
        api::networking::v1::IngressClass,
        api::networking::v1::IPAddress,
        api::networking::v1::NetworkPolicy,
        api::networking::v1::ServiceCIDR,
        api::node::v1::RuntimeClass,
        api::policy::v1::PodDisruptionBudget,
        api::rbac::v1::ClusterRole,
        api::rbac::v1::ClusterRoleBinding,
        api::rbac::v1::Role,
        api::rbac::v1::RoleBinding,
        api::scheduling::v1::PriorityClass,
        api::storage::v1::CSIDriver,
        api::storage::v1::CSINode,
        api::storage::v1::CSIStorageCapacity,
        api::storage::v1::StorageClass,
        api::storage::v1::VolumeAttachment,
    ]
}

/// The kinds the server gives behaviour beyond storing them, by `(group, kind)`.
fn special(group: &str, kind: &str) -> Option<Builtin> {
    use Builtin::*;
    Some(match (group, kind) {
        ("", "Namespace") => Namespace,
        ("", "ConfigMap") => ConfigMap,
        ("", "Secret") => Secret,
        ("", "Pod") => Pod,
        ("", "Node") => Node,
        ("", "Service") => Service,
        ("", "ServiceAccount") => ServiceAccount,
        ("", "Event") => Event,
        ("", "Binding") => Binding,
        ("", "ComponentStatus") => ComponentStatus,
        ("events.k8s.io", "Event") => EventsV1,
        ("coordination.k8s.io", "Lease") => Lease,
        ("certificates.k8s.io", "CertificateSigningRequest") => CertificateSigningRequest,
        ("apps", "Deployment") => Deployment,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => CustomResourceDefinition,
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            ValidatingWebhookConfiguration
        }
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            MutatingWebhookConfiguration
        }
        ("rbac.authorization.k8s.io", "ClusterRole") => ClusterRole,
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => ClusterRoleBinding,
        ("rbac.authorization.k8s.io", "Role") => Role,
        ("rbac.authorization.k8s.io", "RoleBinding") => RoleBinding,
        ("authorization.k8s.io", "SubjectAccessReview") => SubjectAccessReview,
        ("authorization.k8s.io", "LocalSubjectAccessReview") => LocalSubjectAccessReview,
        ("authorization.k8s.io", "SelfSubjectAccessReview") => SelfSubjectAccessReview,
        ("authorization.k8s.io", "SelfSubjectRulesReview") => SelfSubjectRulesReview,
        ("authentication.k8s.io", "TokenReview") => TokenReview,
        ("authentication.k8s.io", "SelfSubjectReview") => SelfSubjectReview,
        _ => return None,
    })
}

/// Short names, as `kubectl api-resources` shows them.
fn short_names(group: &str, plural: &str) -> &'static [&'static str] {
    match (group, plural) {
        ("", "componentstatuses") => &["cs"],
        ("", "configmaps") => &["cm"],
        ("", "endpoints") => &["ep"],
        ("", "events") | ("events.k8s.io", "events") => &["ev"],
        ("", "limitranges") => &["limits"],
        ("", "namespaces") => &["ns"],
        ("", "nodes") => &["no"],
        ("", "persistentvolumeclaims") => &["pvc"],
        ("", "persistentvolumes") => &["pv"],
        ("", "pods") => &["po"],
        ("", "replicationcontrollers") => &["rc"],
        ("", "resourcequotas") => &["quota"],
        ("", "serviceaccounts") => &["sa"],
        ("", "services") => &["svc"],
        ("apiextensions.k8s.io", "customresourcedefinitions") => &["crd", "crds"],
        ("apps", "daemonsets") => &["ds"],
        ("apps", "deployments") => &["deploy"],
        ("apps", "replicasets") => &["rs"],
        ("apps", "statefulsets") => &["sts"],
        ("autoscaling", "horizontalpodautoscalers") => &["hpa"],
        ("batch", "cronjobs") => &["cj"],
        ("certificates.k8s.io", "certificatesigningrequests") => &["csr"],
        ("networking.k8s.io", "ingresses") => &["ing"],
        ("networking.k8s.io", "ipaddresses") => &["ip"],
        ("networking.k8s.io", "networkpolicies") => &["netpol"],
        ("policy", "poddisruptionbudgets") => &["pdb"],
        ("scheduling.k8s.io", "priorityclasses") => &["pc"],
        ("storage.k8s.io", "storageclasses") => &["sc"],
        _ => &[],
    }
}

/// The resources of the `all` category (`kubectl get all`).
fn in_category_all(group: &str, plural: &str) -> bool {
    matches!(
        (group, plural),
        ("", "pods" | "services" | "replicationcontrollers")
            | (
                "apps",
                "daemonsets" | "deployments" | "replicasets" | "statefulsets"
            )
            | ("autoscaling", "horizontalpodautoscalers")
            | ("batch", "cronjobs" | "jobs")
    )
}

/// Resources with a `status` subresource.
fn has_status(group: &str, plural: &str) -> bool {
    matches!(
        (group, plural),
        (
            "",
            "namespaces"
                | "nodes"
                | "persistentvolumeclaims"
                | "persistentvolumes"
                | "pods"
                | "replicationcontrollers"
                | "resourcequotas"
                | "services"
        ) | (
            "admissionregistration.k8s.io",
            "validatingadmissionpolicies"
        ) | ("apiextensions.k8s.io", "customresourcedefinitions")
            | ("apiregistration.k8s.io", "apiservices")
            | (
                "apps",
                "daemonsets" | "deployments" | "replicasets" | "statefulsets"
            )
            | ("autoscaling", "horizontalpodautoscalers")
            | ("batch", "cronjobs" | "jobs")
            | ("certificates.k8s.io", "certificatesigningrequests")
            | (
                "flowcontrol.apiserver.k8s.io",
                "flowschemas" | "prioritylevelconfigurations"
            )
            | ("networking.k8s.io", "ingresses" | "servicecidrs")
            | ("policy", "poddisruptionbudgets")
            | ("storage.k8s.io", "volumeattachments")
    )
}

/// Resources whose registry sets `metadata.generation` and bumps it when the spec changes
/// (the others have none).
fn tracks_generation(group: &str, plural: &str) -> bool {
    matches!(
        (group, plural),
        ("", "pods" | "podtemplates" | "replicationcontrollers")
            | (
                "admissionregistration.k8s.io",
                "mutatingwebhookconfigurations"
                    | "validatingwebhookconfigurations"
                    | "validatingadmissionpolicies"
                    | "validatingadmissionpolicybindings"
            )
            | ("apiextensions.k8s.io", "customresourcedefinitions")
            | (
                "apps",
                "daemonsets" | "deployments" | "replicasets" | "statefulsets"
            )
            | ("batch", "cronjobs" | "jobs")
            | ("discovery.k8s.io", "endpointslices")
            | (
                "flowcontrol.apiserver.k8s.io",
                "flowschemas" | "prioritylevelconfigurations"
            )
            | ("networking.k8s.io", "ingresses" | "networkpolicies")
            | ("policy", "poddisruptionbudgets")
    )
}

/// The workloads whose `scale` subresource reads `spec.replicas` and `status.replicas`.
fn scale(group: &str, plural: &str) -> Option<ScalePaths> {
    let workload = matches!(
        (group, plural),
        ("apps", "deployments" | "replicasets" | "statefulsets")
    );
    workload.then(|| ScalePaths {
        spec_replicas: ".spec.replicas".into(),
        status_replicas: ".status.replicas".into(),
        label_selector: Some(".status.selector".into()),
    })
}

/// A subresource beyond `status` and `scale`: its name, the kind it takes and answers
/// (`group`, `version`, `kind`), and its verbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Subresource {
    pub(crate) name: &'static str,
    pub(crate) group: &'static str,
    pub(crate) version: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) verbs: &'static [&'static str],
}

/// The subresources of a built-in resource beyond `status` and `scale`.
pub(crate) fn subresources(group: &str, plural: &str) -> &'static [Subresource] {
    const POD: &[Subresource] = &[
        Subresource {
            name: "binding",
            group: "",
            version: "v1",
            kind: "Binding",
            verbs: CREATE_ONLY,
        },
        Subresource {
            name: "eviction",
            group: "policy",
            version: "v1",
            kind: "Eviction",
            verbs: CREATE_ONLY,
        },
        Subresource {
            name: "ephemeralcontainers",
            group: "",
            version: "v1",
            kind: "Pod",
            verbs: &["get", "patch", "update"],
        },
        // Served by the kubelet of the pod's node, which the fake server does not run: they
        // answer what the real server answers for a pod on no node.
        Subresource {
            name: "attach",
            group: "",
            version: "v1",
            kind: "PodAttachOptions",
            verbs: &["create", "get"],
        },
        Subresource {
            name: "exec",
            group: "",
            version: "v1",
            kind: "PodExecOptions",
            verbs: &["create", "get"],
        },
        Subresource {
            name: "log",
            group: "",
            version: "v1",
            kind: "Pod",
            verbs: &["get"],
        },
        Subresource {
            name: "portforward",
            group: "",
            version: "v1",
            kind: "PodPortForwardOptions",
            verbs: &["create", "get"],
        },
    ];
    const SERVICE_ACCOUNT: &[Subresource] = &[Subresource {
        name: "token",
        group: "authentication.k8s.io",
        version: "v1",
        kind: "TokenRequest",
        verbs: CREATE_ONLY,
    }];
    const CERTIFICATE_SIGNING_REQUEST: &[Subresource] = &[Subresource {
        name: "approval",
        group: "certificates.k8s.io",
        version: "v1",
        kind: "CertificateSigningRequest",
        verbs: &["get", "patch", "update"],
    }];
    match (group, plural) {
        ("", "pods") => POD,
        ("certificates.k8s.io", "certificatesigningrequests") => CERTIFICATE_SIGNING_REQUEST,
        ("", "serviceaccounts") => SERVICE_ACCOUNT,
        _ => &[],
    }
}

fn printer_columns(group: &str, plural: &str) -> Vec<PrinterColumn> {
    let column = |name: &str, type_: &str, path: &str| PrinterColumn {
        name: name.into(),
        type_: type_.into(),
        format: String::new(),
        description: String::new(),
        priority: 0,
        json_path: path.into(),
    };
    match (group, plural) {
        ("", "namespaces" | "pods") => vec![
            column("Status", "string", ".status.phase"),
            column("Age", "date", ".metadata.creationTimestamp"),
        ],
        // As the real server's printer, short of its computed `kind/name` object.
        ("", "events") => vec![
            column("Last Seen", "date", ".lastTimestamp"),
            column("Type", "string", ".type"),
            column("Reason", "string", ".reason"),
            column("Object", "string", ".involvedObject.name"),
            column("Message", "string", ".message"),
        ],
        _ => Vec::new(),
    }
}

/// The catalog of a fresh cluster: every built-in resource, no CRD yet.
pub(crate) fn catalog() -> Catalog {
    let mut catalog = Catalog::default();
    for def in builtins() {
        catalog.insert(def);
    }
    catalog
}

/// Every built-in resource, as served before any CRD exists.
pub(crate) fn builtins() -> Vec<ResourceDef> {
    served_types()
        .into_iter()
        .map(|facts| {
            let TypeFacts {
                group,
                version,
                kind,
                plural,
                namespaced,
                round_trip,
            } = facts;
            let version = version.rsplit('/').next().unwrap_or(version);
            let builtin = special(group, kind);
            let verbs = match builtin {
                Some(b) if b.is_review() || b == Builtin::Binding => CREATE_ONLY,
                Some(Builtin::ComponentStatus) => READ_ONLY,
                _ => ALL_VERBS,
            };
            ResourceDef {
                group: group.into(),
                plural: plural.into(),
                singular: kind.to_lowercase(),
                kind: kind.into(),
                list_kind: format!("{kind}List"),
                short_names: short_names(group, plural)
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                categories: if in_category_all(group, plural) {
                    vec!["all".into()]
                } else {
                    Vec::new()
                },
                namespaced,
                versions: vec![VersionDef {
                    name: version.into(),
                    served: true,
                    storage: true,
                    schema: None,
                    printer_columns: printer_columns(group, plural),
                    status: has_status(group, plural),
                    scale: scale(group, plural),
                    derived: Derived::default(),
                }],
                builtin,
                round_trip: Some(round_trip),
                verbs,
                tracks_generation: tracks_generation(group, plural),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_comes_from_the_types() {
        let all = builtins();
        let find = |group: &str, plural: &str| {
            all.iter()
                .find(|d| d.group == group && d.plural == plural)
                .unwrap_or_else(|| panic!("{group}/{plural} is served"))
        };
        let jobs = find("batch", "jobs");
        assert_eq!((jobs.kind.as_str(), jobs.namespaced), ("Job", true));
        assert_eq!(jobs.versions[0].name, "v1");
        let nodes = find("", "nodes");
        assert!(!nodes.namespaced);
        assert_eq!(nodes.short_names, vec!["no"]);
        let reviews = find("authorization.k8s.io", "selfsubjectaccessreviews");
        assert_eq!(reviews.verbs, CREATE_ONLY);
        assert!(find("", "configmaps").round_trip.is_some());
        assert!(!find("", "configmaps").tracks_generation);
        assert!(find("apps", "deployments").tracks_generation);
        let mut keys: Vec<_> = all.iter().map(|d| d.key()).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), all.len(), "no resource is listed twice");
    }
}
