//! The schemas of `k8s.io/api/core/v1` kinds but Pod: Namespace, ConfigMap, Secret,
//! ServiceAccount, object references, Service.

use super::meta::OBJECT_META;
use super::schema::Kind::{Bool, Int32, Message, String as Str};
use super::schema::{Kind, Schema, keep, omit, rep};

// --- k8s.io/api/core/v1: Namespace, ConfigMap, Secret, ServiceAccount ---

/// core/v1 Namespace.
pub(crate) static NAMESPACE: Schema = Schema {
    name: "Namespace",
    fields: &[
        keep(1, "metadata", Message(&OBJECT_META)),
        keep(2, "spec", Message(&NAMESPACE_SPEC)),
        keep(3, "status", Message(&NAMESPACE_STATUS)),
    ],
};

/// core/v1 NamespaceSpec.
pub(crate) static NAMESPACE_SPEC: Schema = Schema {
    name: "NamespaceSpec",
    fields: &[rep(1, "finalizers", Str)],
};

/// core/v1 NamespaceStatus.
pub(crate) static NAMESPACE_STATUS: Schema = Schema {
    name: "NamespaceStatus",
    fields: &[
        omit(1, "phase", Str),
        rep(2, "conditions", Message(&NAMESPACE_CONDITION)),
    ],
};

/// core/v1 NamespaceCondition.
pub(crate) static NAMESPACE_CONDITION: Schema = Schema {
    name: "NamespaceCondition",
    fields: &[
        keep(1, "type", Str),
        keep(2, "status", Str),
        keep(4, "lastTransitionTime", Kind::Time),
        omit(5, "reason", Str),
        omit(6, "message", Str),
    ],
};

/// core/v1 ConfigMap.
pub(crate) static CONFIG_MAP: Schema = Schema {
    name: "ConfigMap",
    fields: &[
        keep(1, "metadata", Message(&OBJECT_META)),
        keep(4, "immutable", Bool),
        keep(2, "data", Kind::StringMap),
        keep(3, "binaryData", Kind::BytesMap),
    ],
};

/// core/v1 Secret.
pub(crate) static SECRET: Schema = Schema {
    name: "Secret",
    fields: &[
        keep(1, "metadata", Message(&OBJECT_META)),
        keep(5, "immutable", Bool),
        keep(2, "data", Kind::BytesMap),
        keep(4, "stringData", Kind::StringMap),
        omit(3, "type", Str),
    ],
};

/// core/v1 ServiceAccount.
pub(crate) static SERVICE_ACCOUNT: Schema = Schema {
    name: "ServiceAccount",
    fields: &[
        keep(1, "metadata", Message(&OBJECT_META)),
        rep(2, "secrets", Message(&OBJECT_REFERENCE)),
        rep(3, "imagePullSecrets", Message(&LOCAL_OBJECT_REFERENCE)),
        keep(4, "automountServiceAccountToken", Bool),
    ],
};

/// core/v1 ObjectReference.
pub(crate) static OBJECT_REFERENCE: Schema = Schema {
    name: "ObjectReference",
    fields: &[
        omit(1, "kind", Str),
        omit(2, "namespace", Str),
        omit(3, "name", Str),
        omit(4, "uid", Str),
        omit(5, "apiVersion", Str),
        omit(6, "resourceVersion", Str),
        omit(7, "fieldPath", Str),
    ],
};

/// core/v1 LocalObjectReference.
pub(crate) static LOCAL_OBJECT_REFERENCE: Schema = Schema {
    name: "LocalObjectReference",
    fields: &[omit(1, "name", Str)],
};

// --- k8s.io/api/core/v1: Service ---

/// core/v1 Service (status is skipped).
pub(crate) static SERVICE: Schema = Schema {
    name: "Service",
    fields: &[
        keep(1, "metadata", Message(&OBJECT_META)),
        keep(2, "spec", Message(&SERVICE_SPEC)),
    ],
};

/// core/v1 ServiceSpec.
pub(crate) static SERVICE_SPEC: Schema = Schema {
    name: "ServiceSpec",
    fields: &[
        rep(1, "ports", Message(&SERVICE_PORT)),
        keep(2, "selector", Kind::StringMap),
        omit(3, "clusterIP", Str),
        rep(18, "clusterIPs", Str),
        omit(4, "type", Str),
        rep(5, "externalIPs", Str),
        omit(7, "sessionAffinity", Str),
        omit(8, "loadBalancerIP", Str),
        rep(9, "loadBalancerSourceRanges", Str),
        omit(10, "externalName", Str),
        omit(11, "externalTrafficPolicy", Str),
        omit(12, "healthCheckNodePort", Int32),
        omit(13, "publishNotReadyAddresses", Bool),
        keep(
            14,
            "sessionAffinityConfig",
            Message(&SESSION_AFFINITY_CONFIG),
        ),
        rep(19, "ipFamilies", Str),
        keep(17, "ipFamilyPolicy", Str),
        keep(20, "allocateLoadBalancerNodePorts", Bool),
        keep(21, "loadBalancerClass", Str),
        keep(22, "internalTrafficPolicy", Str),
        keep(23, "trafficDistribution", Str),
    ],
};

/// core/v1 ServicePort.
pub(crate) static SERVICE_PORT: Schema = Schema {
    name: "ServicePort",
    fields: &[
        omit(1, "name", Str),
        omit(2, "protocol", Str),
        keep(6, "appProtocol", Str),
        keep(3, "port", Int32),
        omit(4, "targetPort", Kind::IntOrString),
        omit(5, "nodePort", Int32),
    ],
};

/// core/v1 SessionAffinityConfig.
pub(crate) static SESSION_AFFINITY_CONFIG: Schema = Schema {
    name: "SessionAffinityConfig",
    fields: &[keep(1, "clientIP", Message(&CLIENT_IP_CONFIG))],
};

/// core/v1 ClientIPConfig.
pub(crate) static CLIENT_IP_CONFIG: Schema = Schema {
    name: "ClientIPConfig",
    fields: &[keep(1, "timeoutSeconds", Int32)],
};
