//! Which resources handlers serve: selectors as handlers write them, resources as the API
//! serves them (found by discovery, see `scanning`), and which resources a selector selects.
//!
//! A selector names one resource ([`Selector::new`], [`Selector::named`],
//! [`Selector::named_in`]) or several: a category, everything, or whatever a predicate
//! accepts. The semantics are Kopf's (`kopf/_cogs/structs/references.py`): versionless
//! selectors serve the preferred version; names prefer the core group (as kubectl does) and
//! serve nothing when still ambiguous; everything and predicates never select events.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// How a handler names the resources it serves.
///
/// ```
/// use kopf::resources::Selector;
///
/// let exact = Selector::new("kopf.dev", "v1", "kopfexamples");
/// let by_short_name = Selector::named("kex");
/// let in_a_group = Selector::named("kopfexamples.kopf.dev");
/// let in_a_version = Selector::named_in("kopf.dev/v1", "KopfExample");
/// let all = Selector::category("all");
/// let everything = kopf::resources::EVERYTHING;
/// let custom = Selector::matching(|resource| resource.group.ends_with(".example.com"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Selector {
    /// Exactly this group, version and plural (`""` is the core group).
    Exact {
        /// The API group (`""` for core resources).
        group: String,
        /// The version, e.g. `v1`.
        version: String,
        /// The plural name, e.g. `kopfexamples`.
        plural: String,
    },
    /// A plural, singular, kind or short name (`kex`, `KopfExample`, `pods`; case-insensitive),
    /// in one group or any, in one version or the preferred one. When several groups serve the
    /// name, the core group wins; if it is still ambiguous, nothing is served (with a warning).
    Name {
        /// Only in this group (`""` for core); any group when `None`.
        group: Option<String>,
        /// Only in this version; the preferred version of its group when `None`.
        version: Option<String>,
        /// The name.
        name: String,
    },
    /// Every resource of a discovery category (`categories`, e.g. `all`), in its preferred
    /// version.
    Category(String),
    /// Every resource that can be listed and watched, in its preferred version, except events
    /// (Kopf's `EVERYTHING`: events are produced while handling, so handling them would only
    /// cause more handling). See [`EVERYTHING`].
    Everything,
    /// Every resource, in any version, that the predicate accepts, except events (Kopf 1.42.5's
    /// callable selector). Resources that cannot be listed and watched are skipped.
    Matching(ResourcePredicate),
}

/// Every resource that can be listed and watched, except events: Kopf's `kopf.EVERYTHING`.
pub const EVERYTHING: Selector = Selector::Everything;

impl Selector {
    /// `group/version/plural`, as `@kopf.on.create('kopf.dev', 'v1', 'kopfexamples')`.
    pub fn new(group: &str, version: &str, plural: &str) -> Self {
        Selector::Exact {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
        }
    }

    /// A name in Kopf's one-argument forms: `kex` (any name: plural, singular, kind, short
    /// name), `kopfexamples.kopf.dev` or `KopfExample.kopf.dev` (in a group),
    /// `kopfexamples.v1.kopf.dev` (in a group and version), `pods.v1` (in a version).
    ///
    /// ```
    /// use kopf::resources::Selector;
    ///
    /// assert_eq!(
    ///     Selector::named("kex.v1.kopf.dev"),
    ///     Selector::Name { group: Some("kopf.dev".into()), version: Some("v1".into()), name: "kex".into() },
    /// );
    /// ```
    pub fn named(name: &str) -> Self {
        let mut parts = name.splitn(3, '.');
        let first = parts.next().unwrap_or_default();
        match (parts.next(), parts.next()) {
            (Some(version), rest) if is_version(version) => Selector::Name {
                group: rest.map(Into::into),
                version: Some(version.into()),
                name: first.into(),
            },
            (Some(_), _) => Selector::Name {
                group: name.split_once('.').map(|(_, group)| group.into()),
                version: None,
                name: first.into(),
            },
            (None, _) => Selector::Name {
                group: None,
                version: None,
                name: name.into(),
            },
        }
    }

    /// A name in a group, a group and version, or the core version, as Kopf's two-argument
    /// forms: `("kopf.dev/v1", "kex")`, `("kopf.dev", "kex")` (preferred version),
    /// `("v1", "pods")` (core).
    pub fn named_in(group_version: &str, name: &str) -> Self {
        let (group, version) = match group_version.rsplit_once('/') {
            Some((group, version)) => (group, Some(version)),
            None if group_version == "v1" => ("", Some("v1")),
            None => (group_version, None),
        };
        Selector::Name {
            group: Some(group.into()),
            version: version.map(Into::into),
            name: name.into(),
        }
    }

    /// Every resource of a discovery category, such as `all`.
    pub fn category(category: &str) -> Self {
        Selector::Category(category.into())
    }

    /// Every resource (in any version: check [`Resource::preferred`] to serve one version
    /// only) that `predicate` accepts, except events.
    ///
    /// Selectors are compared by identity: clones of one `matching` selector are equal (their
    /// handlers are one group), two calls give two selectors even with the same function.
    /// Either way, every handler whose selector matches a resource serves it.
    pub fn matching(predicate: impl Fn(&Resource) -> bool + Send + Sync + 'static) -> Self {
        Selector::Matching(ResourcePredicate(Arc::new(predicate)))
    }

    /// The resource of a typed `kube::Resource`, e.g. a `#[derive(CustomResource)]` type.
    pub fn of<K: kube::Resource<DynamicType = ()>>() -> Self {
        Selector::new(&K::group(&()), &K::version(&()), &K::plural(&()))
    }

    /// Whether the resource matches this selector by itself (Kopf's `Selector.check`).
    pub(crate) fn check(&self, resource: &Resource) -> bool {
        match self {
            Selector::Exact {
                group,
                version,
                plural,
            } => {
                resource.group == *group
                    && resource.version == *version
                    && resource.plural == *plural
            }
            Selector::Name {
                group,
                version,
                name,
            } => {
                group.as_ref().is_none_or(|g| *g == resource.group)
                    && version
                        .as_ref()
                        .map_or(resource.preferred, |v| *v == resource.version)
                    && resource.is_named(name)
            }
            Selector::Category(category) => {
                resource.preferred && resource.categories.contains(category)
            }
            Selector::Everything => resource.preferred && !resource.is_event(),
            Selector::Matching(predicate) => !resource.is_event() && (predicate.0)(resource),
        }
    }

    /// The resources this selector selects among those served (Kopf's `Selector.select`): a
    /// name served by the core group and others means the core one, as in kubectl.
    pub(crate) fn select<'a>(&self, resources: &'a [Resource]) -> Vec<&'a Resource> {
        let mut selected: Vec<&Resource> = resources.iter().filter(|r| self.check(r)).collect();
        if self.is_specific() && selected.iter().any(|r| r.group.is_empty()) {
            selected.retain(|r| r.group.is_empty());
        }
        selected
    }

    /// Whether this selector means one resource (so that several matches are ambiguous).
    pub(crate) fn is_specific(&self) -> bool {
        matches!(self, Selector::Exact { .. } | Selector::Name { .. })
    }

    /// The one API group this selector can match, if it is limited to one.
    pub(crate) fn group(&self) -> Option<&str> {
        match self {
            Selector::Exact { group, .. } => Some(group),
            Selector::Name { group, .. } => group.as_deref(),
            _ => None,
        }
    }
}

/// A version segment as Kubernetes names them: `v1`, `v2beta1`, `v1alpha3` (Kopf's
/// `K8S_GROUP_VERSION_PATTERN`), so that `kex.v1.kopf.dev` is told apart from `kex.kopf.dev`.
fn is_version(segment: &str) -> bool {
    let Some(rest) = segment.strip_prefix('v') else {
        return false;
    };
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return false;
    }
    let rest = &rest[digits..];
    match rest
        .strip_prefix("alpha")
        .or_else(|| rest.strip_prefix("beta"))
    {
        Some(number) => !number.is_empty() && number.chars().all(|c| c.is_ascii_digit()),
        None => rest.is_empty(),
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Exact {
                group,
                version,
                plural,
            } if group.is_empty() => write!(f, "{version}/{plural}"),
            Selector::Exact {
                group,
                version,
                plural,
            } => write!(f, "{plural}.{version}.{group}"),
            Selector::Name {
                group,
                version,
                name,
            } => {
                f.write_str(name)?;
                for part in [version, group].into_iter().flatten() {
                    if !part.is_empty() {
                        write!(f, ".{part}")?;
                    }
                }
                Ok(())
            }
            Selector::Category(category) => write!(f, "category {category}"),
            Selector::Everything => f.write_str("everything"),
            Selector::Matching(_) => f.write_str("a predicate"),
        }
    }
}

/// The predicate of [`Selector::Matching`]. Equal when it is the same function object (one
/// `Arc`): clones are equal, separately made predicates are not.
#[derive(Clone)]
pub struct ResourcePredicate(Arc<dyn Fn(&Resource) -> bool + Send + Sync>);

impl ResourcePredicate {
    /// Whether the predicate accepts the resource.
    pub fn accepts(&self, resource: &Resource) -> bool {
        (self.0)(resource)
    }
}

impl PartialEq for ResourcePredicate {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.0), Arc::as_ptr(&other.0))
    }
}

impl Eq for ResourcePredicate {}

impl Hash for ResourcePredicate {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.0).cast::<()>().hash(state);
    }
}

impl fmt::Debug for ResourcePredicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ResourcePredicate({:p})",
            Arc::as_ptr(&self.0).cast::<()>()
        )
    }
}

/// A resource as the API serves it: what URLs need, and what discovery tells about it (for
/// selectors and predicates).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Resource {
    /// The API group (`""` for core).
    pub group: String,
    /// The version.
    pub version: String,
    /// The plural name, used in URLs.
    pub plural: String,
    /// The kind of its objects.
    pub kind: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Whether `status` is a subresource (written with its own requests).
    pub status_subresource: bool,
    /// The singular name (the lowercased kind when discovery leaves it empty, as for
    /// built-ins).
    pub singular: String,
    /// Short names, e.g. `kex`.
    pub short_names: Vec<String>,
    /// Categories, e.g. `all`.
    pub categories: Vec<String>,
    /// The verbs the API supports for it (not what RBAC permits), e.g. `list`, `watch`.
    pub verbs: Vec<String>,
    /// Whether this is the preferred version of its group.
    pub preferred: bool,
}

impl Resource {
    /// Kopf's example resource, `kopfexamples.kopf.dev/v1` (namespaced, with a `/status`
    /// subresource), for tests.
    #[cfg(test)]
    pub(crate) fn kopf_examples() -> Resource {
        Resource {
            group: "kopf.dev".into(),
            version: "v1".into(),
            plural: "kopfexamples".into(),
            kind: "KopfExample".into(),
            namespaced: true,
            status_subresource: true,
            ..Resource::default()
        }
    }

    /// The core `namespaces` resource.
    pub(crate) fn namespaces() -> Resource {
        Resource {
            group: String::new(),
            version: "v1".into(),
            plural: "namespaces".into(),
            kind: "Namespace".into(),
            ..Resource::default()
        }
    }

    /// The `coordination.k8s.io/v1` `leases` resource.
    pub(crate) fn leases() -> Resource {
        Resource {
            group: "coordination.k8s.io".into(),
            version: "v1".into(),
            plural: "leases".into(),
            kind: "Lease".into(),
            namespaced: true,
            ..Resource::default()
        }
    }

    /// The URL path of a resource's collection: in `namespace` for a namespaced resource
    /// (all namespaces' when `None`); a cluster-scoped resource's ignores it.
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        // Built in one buffer: every write asks for it.
        let namespace = namespace.filter(|_| self.namespaced);
        let mut path = String::with_capacity(
            24 + self.group.len()
                + self.version.len()
                + self.plural.len()
                + namespace.map_or(0, str::len),
        );
        if self.group.is_empty() {
            path.push_str("/api/");
        } else {
            path.push_str("/apis/");
            path.push_str(&self.group);
            path.push('/');
        }
        path.push_str(&self.version);
        if let Some(namespace) = namespace {
            path.push_str("/namespaces/");
            path.push_str(namespace);
        }
        path.push('/');
        path.push_str(&self.plural);
        path
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// kube-rs's description of this resource, for `Api<DynamicObject>`.
    pub fn api_resource(&self) -> kube::discovery::ApiResource {
        kube::discovery::ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version: self.api_version(),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        }
    }

    /// Whether the API supports this verb for the resource.
    pub fn supports(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }

    /// Whether `name` is one of its names: plural, singular, kind, short name (any case).
    fn is_named(&self, name: &str) -> bool {
        let same = |candidate: &str| candidate.eq_ignore_ascii_case(name);
        same(&self.plural)
            || same(&self.singular)
            || same(&self.kind)
            || self.short_names.iter().any(|s| same(s))
    }

    /// Core or `events.k8s.io` events, which selectors of many resources never select.
    fn is_event(&self) -> bool {
        self.plural == "events" && (self.group.is_empty() || self.group == "events.k8s.io")
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.plural)
        } else {
            write!(f, "{}.{}.{}", self.plural, self.version, self.group)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(group: &str, version: &str, plural: &str, kind: &str) -> Resource {
        Resource {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            kind: kind.into(),
            singular: kind.to_lowercase(),
            verbs: vec!["list".into(), "watch".into(), "patch".into()],
            preferred: true,
            ..Resource::default()
        }
    }

    fn served() -> Vec<Resource> {
        let mut examples_v1 = resource("kopf.dev", "v1", "kopfexamples", "KopfExample");
        examples_v1.short_names = vec!["kex".into()];
        examples_v1.categories = vec!["kopf".into()];
        let mut examples_v2 = examples_v1.clone();
        examples_v2.version = "v2".into();
        examples_v2.preferred = false;
        let mut pods = resource("", "v1", "pods", "Pod");
        pods.short_names = vec!["po".into()];
        pods.categories = vec!["all".into()];
        vec![
            examples_v1,
            examples_v2,
            pods,
            resource("metrics.k8s.io", "v1beta1", "pods", "PodMetrics"),
            resource("", "v1", "events", "Event"),
            resource("events.k8s.io", "v1", "events", "Event"),
            resource("zalando.org", "v1", "kopfexamples", "KopfExample"),
        ]
    }

    fn selected(selector: &Selector) -> Vec<String> {
        let served = served();
        selector
            .select(&served)
            .iter()
            .map(|r| r.to_string())
            .collect()
    }

    #[test]
    fn kopfs_one_argument_name_forms() {
        let name = |group: Option<&str>, version: Option<&str>, name: &str| Selector::Name {
            group: group.map(Into::into),
            version: version.map(Into::into),
            name: name.into(),
        };
        assert_eq!(Selector::named("kex"), name(None, None, "kex"));
        assert_eq!(
            Selector::named("kopfexamples.kopf.dev"),
            name(Some("kopf.dev"), None, "kopfexamples")
        );
        assert_eq!(
            Selector::named("KopfExample.kopf.dev"),
            name(Some("kopf.dev"), None, "KopfExample")
        );
        assert_eq!(
            Selector::named("kex.v1beta2.kopf.dev"),
            name(Some("kopf.dev"), Some("v1beta2"), "kex")
        );
        assert_eq!(Selector::named("pods.v1"), name(None, Some("v1"), "pods"));
        // Not a version: a group that happens to start with a `v`.
        assert_eq!(
            Selector::named("kex.vendor.example"),
            name(Some("vendor.example"), None, "kex")
        );
        assert_eq!(
            Selector::named("kex.v1x.example"),
            name(Some("v1x.example"), None, "kex")
        );
    }

    #[test]
    fn kopfs_two_argument_name_forms() {
        assert_eq!(
            Selector::named_in("kopf.dev/v1", "kex"),
            Selector::named("kex.v1.kopf.dev")
        );
        assert_eq!(
            Selector::named_in("kopf.dev", "kex"),
            Selector::named("kex.kopf.dev")
        );
        assert_eq!(
            Selector::named_in("v1", "pods"),
            Selector::Name {
                group: Some(String::new()),
                version: Some("v1".into()),
                name: "pods".into()
            }
        );
    }

    #[test]
    fn names_select_the_preferred_version_and_prefer_the_core_group() {
        assert_eq!(
            selected(&Selector::named("kex.kopf.dev")),
            ["kopfexamples.v1.kopf.dev"]
        );
        assert_eq!(
            selected(&Selector::named("kopfexample.v2.kopf.dev")),
            ["kopfexamples.v2.kopf.dev"]
        );
        assert_eq!(
            selected(&Selector::named("KOPFEXAMPLE.kopf.dev")),
            ["kopfexamples.v1.kopf.dev"]
        );
        assert_eq!(selected(&Selector::named("pods")), ["v1/pods"]);
        assert_eq!(selected(&Selector::named("po")), ["v1/pods"]);
        assert_eq!(
            selected(&Selector::named("podmetrics")),
            ["pods.v1beta1.metrics.k8s.io"]
        );
        // Ambiguous: the caller serves none of them.
        assert_eq!(
            selected(&Selector::named("kopfexamples")),
            ["kopfexamples.v1.kopf.dev", "kopfexamples.v1.zalando.org"]
        );
        assert_eq!(
            selected(&Selector::new("kopf.dev", "v2", "kopfexamples")),
            ["kopfexamples.v2.kopf.dev"]
        );
    }

    #[test]
    fn many_resource_selectors() {
        assert_eq!(selected(&Selector::category("all")), ["v1/pods"]);
        assert_eq!(
            selected(&Selector::category("kopf")),
            ["kopfexamples.v1.kopf.dev"]
        );
        assert_eq!(
            selected(&EVERYTHING),
            [
                "kopfexamples.v1.kopf.dev",
                "v1/pods",
                "pods.v1beta1.metrics.k8s.io",
                "kopfexamples.v1.zalando.org"
            ]
        );
        // Predicates see every version, and never events.
        assert_eq!(
            selected(&Selector::matching(|r| r.kind != "Pod")),
            [
                "kopfexamples.v1.kopf.dev",
                "kopfexamples.v2.kopf.dev",
                "pods.v1beta1.metrics.k8s.io",
                "kopfexamples.v1.zalando.org"
            ]
        );
    }

    #[test]
    fn predicates_are_equal_by_identity() {
        let one = Selector::matching(|_| true);
        let other = Selector::matching(|_| true);
        assert_eq!(one, one.clone());
        assert_ne!(one, other);
        assert_eq!(one.to_string(), "a predicate");
    }

    #[test]
    fn displays() {
        assert_eq!(
            Selector::named("kex.v1.kopf.dev").to_string(),
            "kex.v1.kopf.dev"
        );
        assert_eq!(Selector::named_in("v1", "pods").to_string(), "pods.v1");
        assert_eq!(Selector::category("all").to_string(), "category all");
        assert_eq!(EVERYTHING.to_string(), "everything");
    }

    #[test]
    fn paths() {
        let resource = Resource::kopf_examples();
        assert_eq!(
            resource.collection_path(Some("ns")),
            "/apis/kopf.dev/v1/namespaces/ns/kopfexamples"
        );
        assert_eq!(
            resource.collection_path(None),
            "/apis/kopf.dev/v1/kopfexamples"
        );
        let cluster_scoped = Resource {
            namespaced: false,
            ..resource
        };
        assert_eq!(
            cluster_scoped.collection_path(Some("ns")),
            "/apis/kopf.dev/v1/kopfexamples"
        );
        let core = Resource {
            group: String::new(),
            version: "v1".into(),
            plural: "pods".into(),
            kind: "Pod".into(),
            namespaced: true,
            ..Resource::default()
        };
        assert_eq!(
            core.collection_path(Some("default")),
            "/api/v1/namespaces/default/pods"
        );
    }
}
