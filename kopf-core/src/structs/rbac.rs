//! What handlers touch through their own API calls, declared for the `rbac` subcommand: one
//! [`RbacRule`] is one rule of a Role or ClusterRole.
//!
//! The framework knows what it does itself (it watches and patches the handled resources,
//! posts events); what handlers do with their `client` it cannot see, so they declare it:
//! `owns = [..]` and `reads = [..]` on the handler attributes, or [`RbacRule`]s given to
//! [`Registry::rbac_rule`](crate::registry::Registry::rbac_rule) and the handlers' own setters.

use std::any::TypeId;

use serde_json::{Value, json};

/// The verbs of a resource that a handler creates and keeps in shape (`owns`).
pub const OWNING_VERBS: &[&str] = &[
    "get", "list", "watch", "create", "update", "patch", "delete",
];

/// The verbs of a resource that a handler only reads (`reads`).
pub const READING_VERBS: &[&str] = &["get", "list", "watch"];

/// One rule of a Role or ClusterRole: verbs on resources of an API group, optionally only on
/// some objects by name.
///
/// Rules of namespaced resources go where the operator's own rules go (a Role per served
/// namespace, or the ClusterRole when it serves the cluster); rules of cluster-scoped ones
/// always go to the ClusterRole.
///
/// ```
/// use k8s_openapi::api::apps::v1::Deployment;
/// use kopf::rbac::RbacRule;
///
/// let owned = RbacRule::owns::<Deployment>(); // get, list, watch, create, update, patch, delete
/// let scaled = RbacRule::new("apps", ["deployments/scale"], ["get", "update"]);
/// let one_secret = RbacRule::new("", ["secrets"], ["get"]).names(["operator-credentials"]);
/// let nodes = RbacRule::new("", ["nodes"], ["list"]).cluster_scoped();
/// let registry = kopf::registry::Registry::new()
///     .rbac_rule(owned)
///     .rbac_rule(scaled)
///     .rbac_rule(one_secret)
///     .rbac_rule(nodes);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RbacRule {
    /// The API group (`""` for the core group, `"apps"`, `"kopf.dev"`).
    pub group: String,
    /// Plural resource names, subresources as `deployments/scale`.
    pub resources: Vec<String>,
    /// Kubernetes verbs: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, or `*`.
    pub verbs: Vec<String>,
    /// Only these objects (`resourceNames`); every object when empty. Kubernetes cannot limit
    /// `create`, `list`, `watch` or `deletecollection` to names.
    pub names: Vec<String>,
    /// A cluster-scoped resource: the rule goes to the ClusterRole.
    pub cluster_scoped: bool,
}

impl RbacRule {
    /// Verbs on resources of a group (`""` is the core group), of namespaced resources.
    pub fn new<R, V>(
        group: &str,
        resources: impl IntoIterator<Item = R>,
        verbs: impl IntoIterator<Item = V>,
    ) -> Self
    where
        R: Into<String>,
        V: Into<String>,
    {
        RbacRule {
            group: group.into(),
            resources: resources.into_iter().map(Into::into).collect(),
            verbs: verbs.into_iter().map(Into::into).collect(),
            names: Vec::new(),
            cluster_scoped: false,
        }
    }

    /// Verbs on a typed resource (a `k8s_openapi` type or a `#[derive(CustomResource)]` one),
    /// in the resource's own scope.
    pub fn of<K>(verbs: &[&str]) -> Self
    where
        K: kube::Resource<DynamicType = ()>,
        K::Scope: 'static,
    {
        RbacRule {
            cluster_scoped: TypeId::of::<K::Scope>()
                == TypeId::of::<k8s_openapi::ClusterResourceScope>(),
            ..RbacRule::new(&K::group(&()), [K::plural(&())], verbs.iter().copied())
        }
    }

    /// What a handler needs for children it creates and keeps in shape: every verb but
    /// `deletecollection` ([`OWNING_VERBS`]).
    pub fn owns<K>() -> Self
    where
        K: kube::Resource<DynamicType = ()>,
        K::Scope: 'static,
    {
        Self::of::<K>(OWNING_VERBS)
    }

    /// What a handler needs to read a resource: `get`, `list`, `watch` ([`READING_VERBS`]).
    pub fn reads<K>() -> Self
    where
        K: kube::Resource<DynamicType = ()>,
        K::Scope: 'static,
    {
        Self::of::<K>(READING_VERBS)
    }

    /// Only these objects, by name (`resourceNames`).
    pub fn names<N: Into<String>>(mut self, names: impl IntoIterator<Item = N>) -> Self {
        self.names = names.into_iter().map(Into::into).collect();
        self
    }

    /// Of a cluster-scoped resource: the rule goes to the ClusterRole.
    pub fn cluster_scoped(mut self) -> Self {
        self.cluster_scoped = true;
        self
    }

    /// The rule as a Role's rule in JSON.
    pub(crate) fn to_value(&self) -> Value {
        let mut rule = json!({
            "apiGroups": [self.group],
            "resources": self.resources,
            "verbs": self.verbs,
        });
        if !self.names.is_empty() {
            rule["resourceNames"] = json!(self.names);
        }
        rule
    }

    /// `apps/deployments: get, list`, for the `rbac` output's comments.
    pub(crate) fn describe(&self) -> String {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        let names = if self.names.is_empty() {
            String::new()
        } else {
            format!(" named {}", self.names.join(", "))
        };
        format!(
            "{group}/{}{names}: {}",
            self.resources.join(", "),
            self.verbs.join(", ")
        )
    }
}

/// The declarations of one handler: its rules, and whether it takes a `client` (whose calls
/// are not covered unless it declares rules).
#[derive(Debug, Clone, Default)]
pub(crate) struct RbacNeeds {
    pub(crate) rules: Vec<RbacRule>,
    pub(crate) takes_client: bool,
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

    use super::*;

    #[test]
    fn typed_rules_know_their_group_plural_and_scope() {
        let deployments = RbacRule::owns::<Deployment>();
        assert_eq!(deployments.group, "apps");
        assert_eq!(deployments.resources, ["deployments"]);
        assert!(!deployments.cluster_scoped);
        assert_eq!(deployments.verbs.len(), OWNING_VERBS.len());
        let configmaps = RbacRule::reads::<ConfigMap>();
        assert_eq!(configmaps.group, "");
        assert_eq!(configmaps.verbs, READING_VERBS);
        assert!(RbacRule::reads::<Namespace>().cluster_scoped);
    }

    #[test]
    fn names_go_to_resource_names() {
        let rule = RbacRule::new("", ["secrets"], ["get"]).names(["one"]);
        assert_eq!(
            rule.to_value(),
            json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["one"]})
        );
        assert_eq!(rule.describe(), "core/secrets named one: get");
    }
}
