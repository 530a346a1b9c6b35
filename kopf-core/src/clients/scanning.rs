//! Discovery: every resource the API serves, with its names, categories, verbs and whether its
//! version is the preferred one (Kopf's `scanning.scan_resources`).
//!
//! Aggregated discovery (`apidiscovery.k8s.io/v2`, Kubernetes 1.26+) answers with everything in
//! two requests (`/api`, `/apis`); older servers answer those with plain lists, and then each
//! group-version is asked on its own, as Kopf does. Subresources (`pods/status`) are not
//! resources of their own.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroupList, APIResourceList, APIVersions};
use kube::api::ListParams;
use kube::core::discovery::v2::{ACCEPT_AGGREGATED_DISCOVERY_V2, APIGroupDiscoveryList};
use serde_json::Value;

use crate::clients::watching;
use crate::configs::settings::WatchingSettings;
use crate::structs::resources::Resource;

/// At most this many group-versions are asked at once on servers without aggregated discovery.
const CONCURRENT_REQUESTS: usize = 8;

/// Every namespace, page by page.
pub(crate) async fn list_namespaces(
    client: &kube::Client,
    settings: &WatchingSettings,
) -> Result<Vec<Value>, kube::Error> {
    let request = kube::core::Request::new("/api/v1/namespaces");
    let (labels, fields) =
        watching::server_selectors(settings, &Resource::namespaces(), None, None);
    let mut params = ListParams {
        limit: settings.chunk_size,
        label_selector: labels,
        field_selector: fields,
        ..ListParams::default()
    };
    let mut namespaces = Vec::new();
    loop {
        let http = request.list(&params).map_err(kube::Error::BuildRequest)?;
        let mut page: Value = client.request(http).await?;
        if let Some(items) = page["items"].as_array_mut() {
            namespaces.append(items);
        }
        match page["metadata"]["continue"]
            .as_str()
            .filter(|c| !c.is_empty())
        {
            Some(next) => params.continue_token = Some(next.to_owned()),
            None => return Ok(namespaces),
        }
    }
}

/// How long to wait after `failures` failed discoveries or namespace listings in a row: from
/// 400 ms, doubling, at most 30 s.
pub(crate) fn retry_delay(failures: u32) -> Duration {
    Duration::from_millis(200)
        .saturating_mul(2u32.saturating_pow(failures.min(8)))
        .min(Duration::from_secs(30))
}

/// Which groups to discover: `None` for all of them.
pub(crate) type Groups = Option<BTreeSet<String>>;

/// Every resource served in these groups, sorted by group, version and plural.
pub(crate) async fn scan(
    client: &kube::Client,
    groups: &Groups,
) -> Result<Vec<Resource>, kube::Error> {
    let wanted = |group: &str| groups.as_ref().is_none_or(|groups| groups.contains(group));
    let mut resources = Vec::new();
    let mut legacy: Vec<(String, String, bool)> = Vec::new();
    if wanted("") {
        let answer = discovery(client, "/api").await?;
        if is_aggregated(&answer) {
            aggregated(answer, &wanted, &mut resources)?;
        } else {
            let versions: APIVersions =
                serde_json::from_value(answer).map_err(kube::Error::SerdeError)?;
            legacy.extend(
                versions
                    .versions
                    .into_iter()
                    .map(|v| (String::new(), v, true)),
            );
        }
    }
    if groups
        .as_ref()
        .is_none_or(|groups| groups.iter().any(|g| !g.is_empty()))
    {
        let answer = discovery(client, "/apis").await?;
        if is_aggregated(&answer) {
            aggregated(answer, &wanted, &mut resources)?;
        } else {
            let list: APIGroupList =
                serde_json::from_value(answer).map_err(kube::Error::SerdeError)?;
            for group in list.groups.into_iter().filter(|g| wanted(&g.name)) {
                let preferred = group.preferred_version.map(|v| v.version);
                for version in group.versions {
                    let is_preferred = preferred.as_ref() == Some(&version.version);
                    legacy.push((group.name.clone(), version.version, is_preferred));
                }
            }
        }
    }
    let lists: Vec<Vec<Resource>> = futures::stream::iter(legacy)
        .map(|(group, version, preferred)| async move {
            group_version(client, &group, &version, preferred).await
        })
        .buffer_unordered(CONCURRENT_REQUESTS)
        .try_collect()
        .await?;
    resources.extend(lists.into_iter().flatten());
    resources
        .sort_by(|a, b| (&a.group, &a.version, &a.plural).cmp(&(&b.group, &b.version, &b.plural)));
    Ok(resources)
}

/// `/api` or `/apis`, aggregated if the server can.
async fn discovery(client: &kube::Client, path: &str) -> Result<Value, kube::Error> {
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, ACCEPT_AGGREGATED_DISCOVERY_V2)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    client.request(request).await
}

fn is_aggregated(answer: &Value) -> bool {
    answer["kind"] == "APIGroupDiscoveryList"
}

fn aggregated(
    answer: Value,
    wanted: &impl Fn(&str) -> bool,
    resources: &mut Vec<Resource>,
) -> Result<(), kube::Error> {
    let list: APIGroupDiscoveryList =
        serde_json::from_value(answer).map_err(kube::Error::SerdeError)?;
    for item in list.items {
        let group = item.metadata.and_then(|m| m.name).unwrap_or_default();
        if !wanted(&group) {
            continue;
        }
        // Versions come in order of preference.
        for (index, version) in item.versions.into_iter().enumerate() {
            let Some(version_name) = version.version else {
                continue;
            };
            for resource in version.resources {
                let Some(plural) = resource.resource else {
                    continue;
                };
                let kind = resource
                    .response_kind
                    .and_then(|k| k.kind)
                    .unwrap_or_default();
                resources.push(Resource {
                    group: group.clone(),
                    version: version_name.clone(),
                    singular: resource
                        .singular_resource
                        .filter(|s| !s.is_empty())
                        .unwrap_or_else(|| kind.to_lowercase()),
                    plural,
                    kind,
                    namespaced: resource.scope.as_deref() == Some("Namespaced"),
                    status_subresource: resource
                        .subresources
                        .iter()
                        .any(|s| s.subresource.as_deref() == Some("status")),
                    short_names: resource.short_names,
                    categories: resource.categories,
                    verbs: resource.verbs,
                    preferred: index == 0,
                });
            }
        }
    }
    Ok(())
}

/// One group-version's resources; none when it is gone (its last CRD was just deleted) or
/// unavailable (an aggregated API whose server is down).
async fn group_version(
    client: &kube::Client,
    group: &str,
    version: &str,
    preferred: bool,
) -> Result<Vec<Resource>, kube::Error> {
    let answer = if group.is_empty() {
        client.list_core_api_resources(version).await
    } else {
        client
            .list_api_group_resources(&format!("{group}/{version}"))
            .await
    };
    match answer {
        Ok(list) => Ok(listed(&list, group, version, preferred)),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 503 => {
            tracing::debug!(target: "kopf::observer", group, version, code = status.code, "a group-version is not served");
            Ok(Vec::new())
        }
        Err(error) => Err(error),
    }
}

fn listed(list: &APIResourceList, group: &str, version: &str, preferred: bool) -> Vec<Resource> {
    list.resources
        .iter()
        .filter(|r| !r.name.contains('/'))
        .map(|r| {
            let status = format!("{}/status", r.name);
            Resource {
                group: group.into(),
                version: version.into(),
                plural: r.name.clone(),
                kind: r.kind.clone(),
                namespaced: r.namespaced,
                status_subresource: list.resources.iter().any(|s| s.name == status),
                singular: Some(&r.singular_name)
                    .filter(|s| !s.is_empty())
                    .cloned()
                    .unwrap_or_else(|| r.kind.to_lowercase()),
                short_names: r.short_names.clone().unwrap_or_default(),
                categories: r.categories.clone().unwrap_or_default(),
                verbs: r.verbs.clone(),
                preferred,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn aggregated_discovery_describes_resources_and_preferred_versions() {
        let answer = json!({
            "kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2",
            "items": [{
                "metadata": {"name": "kopf.dev"},
                "versions": [
                    {"version": "v2", "resources": [{
                        "resource": "kopfexamples",
                        "responseKind": {"group": "kopf.dev", "version": "v2", "kind": "KopfExample"},
                        "scope": "Namespaced",
                        "singularResource": "kopfexample",
                        "verbs": ["list", "watch"],
                        "shortNames": ["kex"],
                        "categories": ["all"],
                        "subresources": [{"subresource": "status", "verbs": ["get"]}],
                    }]},
                    {"version": "v1", "resources": [{
                        "resource": "kopfexamples",
                        "responseKind": {"group": "kopf.dev", "version": "v1", "kind": "KopfExample"},
                        "scope": "Cluster",
                        "verbs": ["list"],
                    }]},
                ],
            }, {
                "metadata": {"name": "skipped.dev"},
                "versions": [{"version": "v1", "resources": [{"resource": "others"}]}],
            }],
        });
        assert!(is_aggregated(&answer));
        let mut resources = Vec::new();
        aggregated(answer, &|g: &str| g != "skipped.dev", &mut resources).unwrap();
        assert_eq!(
            resources,
            [
                Resource {
                    group: "kopf.dev".into(),
                    version: "v2".into(),
                    plural: "kopfexamples".into(),
                    kind: "KopfExample".into(),
                    namespaced: true,
                    status_subresource: true,
                    singular: "kopfexample".into(),
                    short_names: vec!["kex".into()],
                    categories: vec!["all".into()],
                    verbs: vec!["list".into(), "watch".into()],
                    preferred: true,
                },
                Resource {
                    group: "kopf.dev".into(),
                    version: "v1".into(),
                    plural: "kopfexamples".into(),
                    kind: "KopfExample".into(),
                    singular: "kopfexample".into(),
                    verbs: vec!["list".into()],
                    ..Resource::default()
                },
            ]
        );
    }

    #[test]
    fn legacy_discovery_skips_subresources_and_fills_empty_singulars() {
        let list: APIResourceList = serde_json::from_value(json!({
            "groupVersion": "v1",
            "resources": [
                {"name": "pods", "singularName": "", "namespaced": true, "kind": "Pod",
                 "verbs": ["list", "watch"], "shortNames": ["po"], "categories": ["all"]},
                {"name": "pods/status", "singularName": "", "namespaced": true, "kind": "Pod",
                 "verbs": ["get"]},
            ],
        }))
        .unwrap();
        let resources = listed(&list, "", "v1", true);
        assert_eq!(resources.len(), 1);
        assert_eq!(resources[0].singular, "pod");
        assert!(resources[0].status_subresource);
        assert_eq!(resources[0].short_names, ["po"]);
        assert!(resources[0].supports("watch"));
    }
}
