//! The resources the server serves: the built-in ones and those that CRDs define.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::columns::PrinterColumn;

/// Identifies a resource regardless of its version: `(group, plural)`.
pub(crate) type ResourceKey = (String, String);

/// How a built-in kind is normalised (typed round-trip) on writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    Namespace,
    ConfigMap,
    Secret,
    Pod,
    Service,
    ServiceAccount,
    Event,
    EventsV1,
    Lease,
    Deployment,
    CustomResourceDefinition,
    ValidatingWebhookConfiguration,
    MutatingWebhookConfiguration,
    ClusterRole,
    ClusterRoleBinding,
    Role,
    RoleBinding,
}

/// Where the `scale` subresource reads and writes its numbers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ScalePaths {
    pub(crate) spec_replicas: String,
    pub(crate) status_replicas: String,
    pub(crate) label_selector: Option<String>,
}

/// One served version of a resource.
#[derive(Debug, Clone)]
pub(crate) struct VersionDef {
    pub(crate) name: String,
    pub(crate) served: bool,
    pub(crate) storage: bool,
    pub(crate) schema: Option<Value>,
    pub(crate) printer_columns: Vec<PrinterColumn>,
    pub(crate) status: bool,
    pub(crate) scale: Option<ScalePaths>,
    /// What the API semantics derive from the schema once per CRD change (the compiled CEL
    /// validation rules), rather than on every request.
    pub(crate) derived: Derived,
}

/// A value derived once from a version's schema by an upper layer, of a type this layer
/// does not know. Clones share it; it prints as nothing, so that a resource's definition
/// compares by what the CRD says.
#[derive(Clone, Default)]
pub(crate) struct Derived(Arc<OnceLock<Option<Arc<dyn Any + Send + Sync>>>>);

impl Derived {
    /// The value, made by `make` on first use (`None` when there is nothing to derive).
    pub(crate) fn get_or_init<T: Any + Send + Sync>(
        &self,
        make: impl FnOnce() -> Option<T>,
    ) -> Option<Arc<T>> {
        let value = self
            .0
            .get_or_init(|| make().map(|value| Arc::new(value) as Arc<dyn Any + Send + Sync>));
        value.clone()?.downcast::<T>().ok()
    }
}

impl fmt::Debug for Derived {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Derived")
    }
}

/// A resource: names, scope, versions and subresources.
#[derive(Debug, Clone)]
pub(crate) struct ResourceDef {
    pub(crate) group: String,
    pub(crate) plural: String,
    pub(crate) singular: String,
    pub(crate) kind: String,
    pub(crate) list_kind: String,
    pub(crate) short_names: Vec<String>,
    pub(crate) categories: Vec<String>,
    pub(crate) namespaced: bool,
    pub(crate) versions: Vec<VersionDef>,
    pub(crate) builtin: Option<Builtin>,
}

impl ResourceDef {
    pub(crate) fn key(&self) -> ResourceKey {
        (self.group.clone(), self.plural.clone())
    }

    pub(crate) fn version(&self, name: &str) -> Option<&VersionDef> {
        self.versions.iter().find(|v| v.served && v.name == name)
    }

    pub(crate) fn served_versions(&self) -> impl Iterator<Item = &VersionDef> {
        self.versions.iter().filter(|v| v.served)
    }

    /// The version clients should prefer: the storage version if served, else the first served.
    pub(crate) fn preferred_version(&self) -> Option<&VersionDef> {
        self.served_versions()
            .find(|v| v.storage)
            .or_else(|| self.served_versions().next())
    }

    pub(crate) fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{}", self.group, version)
        }
    }

    /// `Kind.group` as used in 422 messages (`Kind` alone for core).
    pub(crate) fn kind_group(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// The object as served in `version`: `apiVersion` and `kind` first, then the rest.
    pub(crate) fn render(&self, version: &str, object: &Value) -> Value {
        let mut rendered = serde_json::Map::new();
        rendered.insert("apiVersion".into(), Value::from(self.api_version(version)));
        rendered.insert("kind".into(), Value::from(self.kind.clone()));
        for (key, value) in object.as_object().into_iter().flatten() {
            if key != "apiVersion" && key != "kind" {
                rendered.insert(key.clone(), value.clone());
            }
        }
        Value::Object(rendered)
    }

    pub(crate) fn has_status(&self) -> bool {
        self.versions.iter().any(|v| v.status)
    }

    /// A built-in resource; `[group, version, plural, kind]` name it.
    fn builtin(
        builtin: Builtin,
        [group, version, plural, kind]: [&str; 4],
        namespaced: bool,
        short_names: &[&str],
        status: bool,
    ) -> Self {
        ResourceDef {
            group: group.into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            kind: kind.into(),
            list_kind: format!("{kind}List"),
            short_names: short_names.iter().map(|s| s.to_string()).collect(),
            categories: Vec::new(),
            namespaced,
            versions: vec![VersionDef {
                name: version.into(),
                served: true,
                storage: true,
                schema: None,
                printer_columns: Vec::new(),
                status,
                scale: None,
                derived: Derived::default(),
            }],
            builtin: Some(builtin),
        }
    }

    /// Everything served before any CRD exists.
    pub(crate) fn builtins() -> Vec<ResourceDef> {
        use Builtin::*;
        let mut all = vec![
            Self::builtin(
                Namespace,
                ["", "v1", "namespaces", "Namespace"],
                false,
                &["ns"],
                true,
            ),
            Self::builtin(
                ConfigMap,
                ["", "v1", "configmaps", "ConfigMap"],
                true,
                &["cm"],
                false,
            ),
            Self::builtin(Secret, ["", "v1", "secrets", "Secret"], true, &[], false),
            Self::builtin(Pod, ["", "v1", "pods", "Pod"], true, &["po"], true),
            Self::builtin(
                Service,
                ["", "v1", "services", "Service"],
                true,
                &["svc"],
                true,
            ),
            Self::builtin(
                ServiceAccount,
                ["", "v1", "serviceaccounts", "ServiceAccount"],
                true,
                &["sa"],
                false,
            ),
            Self::builtin(Event, ["", "v1", "events", "Event"], true, &["ev"], false),
            Self::builtin(
                EventsV1,
                ["events.k8s.io", "v1", "events", "Event"],
                true,
                &["ev"],
                false,
            ),
            Self::builtin(
                Lease,
                ["coordination.k8s.io", "v1", "leases", "Lease"],
                true,
                &[],
                false,
            ),
            Self::builtin(
                Deployment,
                ["apps", "v1", "deployments", "Deployment"],
                true,
                &["deploy"],
                true,
            ),
            Self::builtin(
                CustomResourceDefinition,
                [
                    "apiextensions.k8s.io",
                    "v1",
                    "customresourcedefinitions",
                    "CustomResourceDefinition",
                ],
                false,
                &["crd", "crds"],
                true,
            ),
            Self::builtin(
                ValidatingWebhookConfiguration,
                [
                    "admissionregistration.k8s.io",
                    "v1",
                    "validatingwebhookconfigurations",
                    "ValidatingWebhookConfiguration",
                ],
                false,
                &[],
                false,
            ),
            Self::builtin(
                MutatingWebhookConfiguration,
                [
                    "admissionregistration.k8s.io",
                    "v1",
                    "mutatingwebhookconfigurations",
                    "MutatingWebhookConfiguration",
                ],
                false,
                &[],
                false,
            ),
            Self::builtin(
                ClusterRole,
                [
                    "rbac.authorization.k8s.io",
                    "v1",
                    "clusterroles",
                    "ClusterRole",
                ],
                false,
                &[],
                false,
            ),
            Self::builtin(
                ClusterRoleBinding,
                [
                    "rbac.authorization.k8s.io",
                    "v1",
                    "clusterrolebindings",
                    "ClusterRoleBinding",
                ],
                false,
                &[],
                false,
            ),
            Self::builtin(
                Role,
                ["rbac.authorization.k8s.io", "v1", "roles", "Role"],
                true,
                &[],
                false,
            ),
            Self::builtin(
                RoleBinding,
                [
                    "rbac.authorization.k8s.io",
                    "v1",
                    "rolebindings",
                    "RoleBinding",
                ],
                true,
                &[],
                false,
            ),
        ];
        for def in &mut all {
            if matches!(def.builtin, Some(Pod | Service | Deployment)) {
                def.categories = vec!["all".into()];
            }
            let column = |name: &str, type_: &str, path: &str| PrinterColumn {
                name: name.into(),
                type_: type_.into(),
                format: String::new(),
                description: String::new(),
                priority: 0,
                json_path: path.into(),
            };
            if matches!(def.builtin, Some(Namespace | Pod)) {
                def.versions[0].printer_columns = vec![
                    column("Status", "string", ".status.phase"),
                    column("Age", "date", ".metadata.creationTimestamp"),
                ];
            }
            if def.builtin == Some(Event) {
                // As the real server's printer, short of its computed `kind/name` object.
                def.versions[0].printer_columns = vec![
                    column("Last Seen", "date", ".lastTimestamp"),
                    column("Type", "string", ".type"),
                    column("Reason", "string", ".reason"),
                    column("Object", "string", ".involvedObject.name"),
                    column("Message", "string", ".message"),
                ];
            }
            if def.builtin == Some(Deployment) {
                def.versions[0].scale = Some(ScalePaths {
                    spec_replicas: ".spec.replicas".into(),
                    status_replicas: ".status.replicas".into(),
                    label_selector: Some(".status.selector".into()),
                });
            }
        }
        all
    }

    /// The resource a CRD defines, or why it cannot be served.
    pub(crate) fn from_crd(crd: &Value) -> Result<ResourceDef, String> {
        let spec = &crd["spec"];
        let names = &spec["names"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        let group = text(&spec["group"]);
        let plural = text(&names["plural"]);
        let kind = text(&names["kind"]);
        if group.is_empty() || plural.is_empty() || kind.is_empty() {
            return Err("spec.group, spec.names.plural and spec.names.kind are required".into());
        }
        let scope = spec["scope"].as_str().unwrap_or("Namespaced");
        let mut versions = Vec::new();
        for version in spec["versions"].as_array().into_iter().flatten() {
            let subresources = &version["subresources"];
            let scale = subresources
                .get("scale")
                .filter(|s| s.is_object())
                .map(|s| ScalePaths {
                    spec_replicas: text(&s["specReplicasPath"]),
                    status_replicas: text(&s["statusReplicasPath"]),
                    label_selector: s["labelSelectorPath"].as_str().map(String::from),
                });
            versions.push(VersionDef {
                name: text(&version["name"]),
                served: version["served"].as_bool().unwrap_or(false),
                storage: version["storage"].as_bool().unwrap_or(false),
                schema: version["schema"].get("openAPIV3Schema").cloned(),
                printer_columns: version["additionalPrinterColumns"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(PrinterColumn::from_crd)
                    .collect(),
                status: subresources.get("status").is_some_and(|s| s.is_object()),
                scale,
                derived: Derived::default(),
            });
        }
        if versions.is_empty() {
            return Err("spec.versions must have at least one version".into());
        }
        if versions.iter().filter(|v| v.storage).count() != 1 {
            return Err(
                "spec.versions must have exactly one version marked as storage version".into(),
            );
        }
        let singular = names["singular"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| kind.to_lowercase());
        Ok(ResourceDef {
            list_kind: names["listKind"]
                .as_str()
                .map(String::from)
                .unwrap_or_else(|| format!("{kind}List")),
            group,
            plural,
            singular,
            kind,
            short_names: strings(&names["shortNames"]),
            categories: strings(&names["categories"]),
            namespaced: scope != "Cluster",
            versions,
            builtin: None,
        })
    }
}

/// All resources currently served, by `(group, plural)`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Catalog {
    resources: BTreeMap<ResourceKey, Arc<ResourceDef>>,
}

impl Catalog {
    pub(crate) fn with_builtins() -> Self {
        let mut catalog = Catalog::default();
        for def in ResourceDef::builtins() {
            catalog.insert(def);
        }
        catalog
    }

    pub(crate) fn insert(&mut self, def: ResourceDef) {
        self.resources.insert(def.key(), Arc::new(def));
    }

    pub(crate) fn remove(&mut self, key: &ResourceKey) {
        self.resources.remove(key);
    }

    pub(crate) fn get(&self, group: &str, plural: &str) -> Option<&Arc<ResourceDef>> {
        self.resources.get(&(group.to_string(), plural.to_string()))
    }

    /// The resource served at `group/version/plural`.
    pub(crate) fn lookup(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<Arc<ResourceDef>> {
        self.get(group, plural)
            .filter(|d| d.version(version).is_some())
            .cloned()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<ResourceDef>> {
        self.resources.values()
    }

    /// Groups in discovery order: core first, then built-in groups, then CRD groups by name.
    pub(crate) fn groups(&self) -> Vec<String> {
        let mut groups: Vec<String> = Vec::new();
        for def in self.resources.values() {
            if !groups.contains(&def.group) {
                groups.push(def.group.clone());
            }
        }
        groups.sort_by_key(|g| (!g.is_empty(), !self.is_builtin_group(g), g.clone()));
        groups
    }

    fn is_builtin_group(&self, group: &str) -> bool {
        self.resources
            .values()
            .any(|d| d.group == group && d.builtin.is_some())
    }

    /// Versions served in a group, preferred first.
    pub(crate) fn group_versions(&self, group: &str) -> Vec<String> {
        let mut versions: Vec<String> = Vec::new();
        let mut preferred = None;
        for def in self.resources.values().filter(|d| d.group == group) {
            if preferred.is_none() {
                preferred = def.preferred_version().map(|v| v.name.clone());
            }
            for v in def.served_versions() {
                if !versions.contains(&v.name) {
                    versions.push(v.name.clone());
                }
            }
        }
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        if let Some(p) = preferred
            && let Some(pos) = versions.iter().position(|v| *v == p)
        {
            let v = versions.remove(pos);
            versions.insert(0, v);
        }
        versions
    }
}

/// Kubernetes' version ordering: GA > beta > alpha, higher numbers first.
fn version_priority(version: &str) -> (u8, u32, u32) {
    let rest = version.strip_prefix('v').unwrap_or(version);
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (stage, minor) = if tail.is_empty() {
        (3, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (stage, major, minor)
}
