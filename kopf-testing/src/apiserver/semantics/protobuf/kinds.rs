//! The decodable kinds (Namespace, ConfigMap, Secret, ServiceAccount, Service, Pod, Deployment,
//! Lease) and the schemas of `apps/v1` and `coordination.k8s.io/v1`.

use super::core::{CONFIG_MAP, NAMESPACE, SECRET, SERVICE, SERVICE_ACCOUNT};
use super::meta::{LABEL_SELECTOR, OBJECT_META};
use super::pod::{POD, POD_TEMPLATE_SPEC};
use super::schema::Kind::{Bool, Int32, Message, String as Str};
use super::schema::{Kind, Schema, keep, omit};

/// The decodable kinds: (apiVersion, kind, schema).
pub(crate) static KINDS: &[(&str, &str, &Schema)] = &[
    ("v1", "Namespace", &NAMESPACE),
    ("v1", "ConfigMap", &CONFIG_MAP),
    ("v1", "Secret", &SECRET),
    ("v1", "ServiceAccount", &SERVICE_ACCOUNT),
    ("v1", "Service", &SERVICE),
    ("v1", "Pod", &POD),
    ("apps/v1", "Deployment", &DEPLOYMENT),
    ("coordination.k8s.io/v1", "Lease", &LEASE),
];

// --- k8s.io/api/apps/v1 ---

/// apps/v1 Deployment (status is skipped).
pub(crate) static DEPLOYMENT: Schema = Schema {
    name: "Deployment",
    fields: &[
        keep(1, "metadata", Message(&OBJECT_META)),
        keep(2, "spec", Message(&DEPLOYMENT_SPEC)),
    ],
};

/// apps/v1 DeploymentSpec.
pub(crate) static DEPLOYMENT_SPEC: Schema = Schema {
    name: "DeploymentSpec",
    fields: &[
        keep(1, "replicas", Int32),
        keep(2, "selector", Message(&LABEL_SELECTOR)),
        keep(3, "template", Message(&POD_TEMPLATE_SPEC)),
        keep(4, "strategy", Message(&DEPLOYMENT_STRATEGY)),
        omit(5, "minReadySeconds", Int32),
        keep(6, "revisionHistoryLimit", Int32),
        omit(7, "paused", Bool),
        keep(9, "progressDeadlineSeconds", Int32),
    ],
};

/// apps/v1 DeploymentStrategy.
pub(crate) static DEPLOYMENT_STRATEGY: Schema = Schema {
    name: "DeploymentStrategy",
    fields: &[
        omit(1, "type", Str),
        keep(2, "rollingUpdate", Message(&ROLLING_UPDATE_DEPLOYMENT)),
    ],
};

/// apps/v1 RollingUpdateDeployment.
pub(crate) static ROLLING_UPDATE_DEPLOYMENT: Schema = Schema {
    name: "RollingUpdateDeployment",
    fields: &[
        keep(1, "maxUnavailable", Kind::IntOrString),
        keep(2, "maxSurge", Kind::IntOrString),
    ],
};

// --- k8s.io/api/coordination/v1 ---

/// coordination/v1 Lease.
pub(crate) static LEASE: Schema = Schema {
    name: "Lease",
    fields: &[
        keep(1, "metadata", Message(&OBJECT_META)),
        keep(2, "spec", Message(&LEASE_SPEC)),
    ],
};

/// coordination/v1 LeaseSpec.
pub(crate) static LEASE_SPEC: Schema = Schema {
    name: "LeaseSpec",
    fields: &[
        keep(1, "holderIdentity", Str),
        keep(2, "leaseDurationSeconds", Int32),
        keep(3, "acquireTime", Kind::MicroTime),
        keep(4, "renewTime", Kind::MicroTime),
        keep(5, "leaseTransitions", Int32),
        keep(6, "strategy", Str),
        keep(7, "preferredHolder", Str),
    ],
};
