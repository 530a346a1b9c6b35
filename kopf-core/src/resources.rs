//! Which resources handlers serve: selectors as handlers write them, and resources as the API
//! serves them (resolved through discovery).

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;

/// How a handler names its resource.
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
    /// A plural, singular, kind or short name (`kex`, `KopfExample`, `pods`), resolved through
    /// discovery in any group; the preferred version is used.
    Name(String),
}

impl Selector {
    /// `group/version/plural`, as `@kopf.on.create('kopf.dev', 'v1', 'kopfexamples')`.
    pub fn new(group: &str, version: &str, plural: &str) -> Self {
        Selector::Exact {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
        }
    }

    /// Any name of a resource: plural, singular, kind or short name.
    pub fn named(name: &str) -> Self {
        Selector::Name(name.into())
    }

    /// The resource of a typed `kube::Resource`, e.g. a `#[derive(CustomResource)]` type.
    pub fn of<K: kube::Resource<DynamicType = ()>>() -> Self {
        Selector::new(&K::group(&()), &K::version(&()), &K::plural(&()))
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
            Selector::Name(name) => f.write_str(name),
        }
    }
}

/// A resource as the API serves it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
}

impl Resource {
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

/// Finds the resource a selector names, or `None` when the API does not serve it (yet).
pub(crate) async fn resolve(
    client: &kube::Client,
    selector: &Selector,
) -> Result<Option<Resource>, kube::Error> {
    match selector {
        Selector::Exact {
            group,
            version,
            plural,
        } => {
            let Some(list) = resources_in(client, group, version).await? else {
                return Ok(None);
            };
            Ok(find(&list, group, version, |r| r.name == *plural))
        }
        Selector::Name(name) => {
            let lowered = name.to_lowercase();
            let matches = |r: &k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource| {
                r.name == lowered
                    || r.singular_name.to_lowercase() == lowered
                    || r.kind.to_lowercase() == lowered
                    || r.short_names
                        .iter()
                        .flatten()
                        .any(|s| s.to_lowercase() == lowered)
                    || name
                        .split_once('.')
                        .is_some_and(|(plural, _)| r.name == plural)
            };
            let mut group_versions = vec![(String::new(), "v1".to_string())];
            for group in client.list_api_groups().await?.groups {
                let preferred = group.preferred_version.map(|v| v.version);
                let version =
                    preferred.or_else(|| group.versions.first().map(|v| v.version.clone()));
                if let Some(version) = version {
                    let qualified = name.split_once('.').map(|(_, g)| g);
                    if qualified.is_none_or(|g| g == group.name) {
                        group_versions.push((group.name, version));
                    }
                }
            }
            for (group, version) in group_versions {
                if let Some(list) = resources_in(client, &group, &version).await?
                    && let Some(resource) = find(&list, &group, &version, matches)
                {
                    return Ok(Some(resource));
                }
            }
            Ok(None)
        }
    }
}

async fn resources_in(
    client: &kube::Client,
    group: &str,
    version: &str,
) -> Result<Option<APIResourceList>, kube::Error> {
    let result = if group.is_empty() {
        client.list_core_api_resources(version).await
    } else {
        client
            .list_api_group_resources(&format!("{group}/{version}"))
            .await
    };
    match result {
        Ok(list) => Ok(Some(list)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(error) => Err(error),
    }
}

fn find(
    list: &APIResourceList,
    group: &str,
    version: &str,
    wanted: impl Fn(&k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource) -> bool,
) -> Option<Resource> {
    let resource = list
        .resources
        .iter()
        .find(|r| !r.name.contains('/') && wanted(r))?;
    let status = format!("{}/status", resource.name);
    Some(Resource {
        group: group.into(),
        version: version.into(),
        plural: resource.name.clone(),
        kind: resource.kind.clone(),
        namespaced: resource.namespaced,
        status_subresource: list.resources.iter().any(|r| r.name == status),
    })
}
