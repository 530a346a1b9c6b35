//! The resources the server serves: the built-in ones and those that CRDs define.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::columns::PrinterColumn;

/// A kind's typed round trip: decoded into its k8s-openapi type and encoded again, as the real
/// server decodes and encodes it (unknown fields dropped, wrong types refused).
pub(crate) type RoundTrip = fn(&Value) -> Result<Value, String>;

/// The verbs of a stored resource.
pub(crate) const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The verbs of a custom resource, in the order the real server's discovery lists them.
pub(crate) const CUSTOM_VERBS: &[&str] = &[
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];

/// Identifies a resource regardless of its version: `(group, plural)`.
pub(crate) type ResourceKey = (String, String);

/// The built-in kinds that the server gives behaviour beyond storing them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    Namespace,
    ConfigMap,
    Secret,
    Pod,
    /// Selectable by `spec.unschedulable` (what `kubectl cordon` sets).
    Node,
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
    /// Has the `approval` subresource, which writes only `status.conditions`.
    CertificateSigningRequest,
    /// `pods/binding`'s top-level twin: assigns a pod to a node.
    Binding,
    /// Computed health of the control plane's components; listed, never written.
    ComponentStatus,
    SubjectAccessReview,
    LocalSubjectAccessReview,
    SelfSubjectAccessReview,
    SelfSubjectRulesReview,
    TokenReview,
    SelfSubjectReview,
}

impl Builtin {
    /// Whether this is a review: created, answered, never stored.
    pub(crate) fn is_review(self) -> bool {
        use Builtin::*;
        matches!(
            self,
            SubjectAccessReview
                | LocalSubjectAccessReview
                | SelfSubjectAccessReview
                | SelfSubjectRulesReview
                | TokenReview
                | SelfSubjectReview
        )
    }
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
    /// The behaviour the server gives this built-in kind beyond storing it, if any.
    pub(crate) builtin: Option<Builtin>,
    /// A built-in kind's typed round trip; `None` for custom resources.
    pub(crate) round_trip: Option<RoundTrip>,
    /// The verbs served (discovery and routing).
    pub(crate) verbs: &'static [&'static str],
    /// Whether `metadata.generation` is set and bumped on spec changes.
    pub(crate) tracks_generation: bool,
}

impl ResourceDef {
    /// Whether a CRD defines this resource.
    pub(crate) fn is_custom(&self) -> bool {
        self.round_trip.is_none()
    }

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

    /// The object as served in `version`: `apiVersion` and `kind` first, then the rest. As the
    /// real server writes them: `kind` before `apiVersion` for built-in kinds (Go's typed
    /// structs), `apiVersion` before `kind` for custom resources (sorted keys).
    pub(crate) fn render(&self, version: &str, object: &Value) -> Value {
        let mut rendered = serde_json::Map::new();
        let api_version = Value::from(self.api_version(version));
        let kind = Value::from(self.kind.clone());
        if self.is_custom() {
            rendered.insert("apiVersion".into(), api_version);
            rendered.insert("kind".into(), kind);
        } else {
            rendered.insert("kind".into(), kind);
            rendered.insert("apiVersion".into(), api_version);
        }
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
            round_trip: None,
            verbs: CUSTOM_VERBS,
            tracks_generation: true,
        })
    }
}

/// All resources currently served, by `(group, plural)`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Catalog {
    resources: BTreeMap<ResourceKey, Arc<ResourceDef>>,
}

impl Catalog {
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
            .any(|d| d.group == group && !d.is_custom())
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
