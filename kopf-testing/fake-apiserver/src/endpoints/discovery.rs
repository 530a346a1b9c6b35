//! Discovery: `/version`, the legacy and aggregated group and resource lists, and the OpenAPI
//! v3 documents kubectl reads to learn that the server validates fields itself.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash as _, Hasher as _};

use base64::Engine as _;
use http::StatusCode;
use serde_json::{Value, json};

use super::reply::Reply;
use super::request::Format;
use super::shared::Shared;
use crate::semantics::status::{ApiError, ApiResult};
use crate::storage::builtins;
use crate::storage::catalog::{Catalog, ResourceDef};

/// The Kubernetes version the server reports (kubectl picks its behaviour from it).
pub(crate) const KUBERNETES_VERSION: &str = "v1.33.0";

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

pub(crate) fn version() -> Reply {
    Reply::json(
        StatusCode::OK,
        &json!({
            "major": "1",
            "minor": "33",
            "gitVersion": KUBERNETES_VERSION,
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2025-04-23T00:00:00Z",
            "goVersion": "go1.24.2",
            "compiler": "gc",
            "platform": "linux/amd64",
        }),
    )
}

pub(crate) fn core_versions(shared: &Shared, format: Format) -> ApiResult<Reply> {
    if format == Format::AggregatedDiscovery {
        let list = shared.read(|s| aggregated(&s.catalog, |g| g.is_empty()));
        return Ok(Reply::json_as(StatusCode::OK, &list, AGGREGATED));
    }
    Ok(Reply::json(
        StatusCode::OK,
        &json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": shared.host}],
        }),
    ))
}

pub(crate) fn groups(shared: &Shared, format: Format) -> ApiResult<Reply> {
    if format == Format::AggregatedDiscovery {
        let list = shared.read(|s| aggregated(&s.catalog, |g| !g.is_empty()));
        return Ok(Reply::json_as(StatusCode::OK, &list, AGGREGATED));
    }
    let groups: Vec<Value> = shared.read(|s| {
        s.catalog
            .groups()
            .into_iter()
            .filter(|g| !g.is_empty())
            .map(|g| api_group(&s.catalog, &g))
            .collect()
    });
    Ok(Reply::json(
        StatusCode::OK,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
    ))
}

pub(crate) fn group(shared: &Shared, group: &str) -> ApiResult<Reply> {
    let found = shared.read(|s| {
        s.catalog
            .groups()
            .iter()
            .any(|g| g == group)
            .then(|| api_group(&s.catalog, group))
    });
    let mut body = found.ok_or_else(|| ApiError::no_route(&format!("/apis/{group}")))?;
    body["kind"] = json!("APIGroup");
    body["apiVersion"] = json!("v1");
    Ok(Reply::json(StatusCode::OK, &body))
}

fn api_group(catalog: &Catalog, group: &str) -> Value {
    let versions: Vec<Value> = catalog
        .group_versions(group)
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": versions, "preferredVersion": versions.first().cloned().unwrap_or(Value::Null)})
}

fn served_in<'a>(
    catalog: &'a Catalog,
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'a ResourceDef> {
    catalog
        .iter()
        .map(|d| &**d)
        .filter(move |d| d.group == group && d.version(version).is_some())
}

const SUB_VERBS: [&str; 3] = ["get", "patch", "update"];

/// apimachinery's `StorageVersionHash`: the first 8 bytes of the SHA-256 of
/// `group/version/kind` (of the version stored), in base64, by which clients tell that a
/// resource's storage changed.
fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{group}/{version}/{kind}").as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(&digest.as_ref()[..8])
}

pub(crate) fn resources(shared: &Shared, group: &str, version: &str) -> ApiResult<Reply> {
    let resources: Vec<Value> = shared.read(|s| {
        let mut list = Vec::new();
        for def in served_in(&s.catalog, group, version) {
            list.push(json!({
                "name": def.plural,
                "singularName": def.singular,
                "namespaced": def.namespaced,
                "kind": def.kind,
                "verbs": def.verbs,
                "shortNames": def.short_names,
                "categories": def.categories,
            }));
            if def.is_custom()
                && let Some(storage) = def.versions.iter().find(|v| v.storage)
                && let Some(entry) = list.last_mut()
            {
                entry["storageVersionHash"] =
                    json!(storage_version_hash(&def.group, &storage.name, &def.kind));
            }
            let served = def.version(version).expect("filtered on served versions");
            if served.status {
                list.push(json!({"name": format!("{}/status", def.plural), "singularName": "", "namespaced": def.namespaced, "kind": def.kind, "verbs": SUB_VERBS}));
            }
            if served.scale.is_some() {
                list.push(json!({"name": format!("{}/scale", def.plural), "singularName": "", "namespaced": def.namespaced, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": SUB_VERBS}));
            }
            for sub in builtins::subresources(&def.group, &def.plural) {
                let mut entry = json!({"name": format!("{}/{}", def.plural, sub.name), "singularName": "", "namespaced": def.namespaced, "kind": sub.kind, "verbs": sub.verbs});
                if sub.group != def.group {
                    entry["group"] = json!(sub.group);
                    entry["version"] = json!(sub.version);
                }
                list.push(entry);
            }
        }
        list
    });
    if resources.is_empty() {
        return Err(ApiError::no_route(&format!("{group}/{version}")));
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Ok(Reply::json(
        StatusCode::OK,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
    ))
}

/// `apidiscovery.k8s.io/v2` `APIGroupDiscoveryList` of the groups chosen by `wanted`.
fn aggregated(catalog: &Catalog, wanted: impl Fn(&str) -> bool) -> Value {
    let mut items = Vec::new();
    for group in catalog.groups().into_iter().filter(|g| wanted(g)) {
        let versions: Vec<Value> = catalog
            .group_versions(&group)
            .iter()
            .map(|version| {
                let resources: Vec<Value> = served_in(catalog, &group, version)
                    .map(|def| {
                        let served = def.version(version).expect("filtered on served versions");
                        let kind = json!({"group": def.group, "version": version, "kind": def.kind});
                        let mut subresources = Vec::new();
                        if served.scale.is_some() {
                            subresources.push(json!({"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": SUB_VERBS}));
                        }
                        if served.status {
                            subresources.push(json!({"subresource": "status", "responseKind": kind, "verbs": SUB_VERBS}));
                        }
                        for sub in builtins::subresources(&def.group, &def.plural) {
                            subresources.push(json!({"subresource": sub.name, "responseKind": {"group": sub.group, "version": sub.version, "kind": sub.kind}, "verbs": sub.verbs}));
                        }
                        let mut resource = json!({
                            "resource": def.plural,
                            "responseKind": kind,
                            "scope": if def.namespaced { "Namespaced" } else { "Cluster" },
                            "singularResource": def.singular,
                            "verbs": def.verbs,
                        });
                        if !def.short_names.is_empty() {
                            resource["shortNames"] = json!(def.short_names);
                        }
                        if !def.categories.is_empty() {
                            resource["categories"] = json!(def.categories);
                        }
                        if !subresources.is_empty() {
                            resource["subresources"] = json!(subresources);
                        }
                        resource
                    })
                    .collect();
                json!({"version": version, "resources": resources, "freshness": "Current"})
            })
            .collect();
        let metadata = if group.is_empty() {
            json!({"creationTimestamp": null})
        } else {
            json!({"name": group, "creationTimestamp": null})
        };
        items.push(json!({"metadata": metadata, "versions": versions}));
    }
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

/// `/openapi/v3`: where each group-version's document is, with a hash that changes with it.
pub(crate) fn openapi_root(shared: &Shared) -> Reply {
    let paths: serde_json::Map<String, Value> = shared.read(|s| {
        let mut paths = serde_json::Map::new();
        for group in s.catalog.groups() {
            for version in s.catalog.group_versions(&group) {
                let key = if group.is_empty() {
                    format!("api/{version}")
                } else {
                    format!("apis/{group}/{version}")
                };
                let document = document(&s.catalog, &group, &version);
                let mut hasher = DefaultHasher::new();
                document.to_string().hash(&mut hasher);
                let url = format!("/openapi/v3/{key}?hash={:016X}", hasher.finish());
                paths.insert(key, json!({"serverRelativeURL": url}));
            }
        }
        paths
    });
    Reply::json(StatusCode::OK, &json!({"paths": paths}))
}

pub(crate) fn openapi_document(shared: &Shared, group: &str, version: &str) -> ApiResult<Reply> {
    let document = shared.read(|s| {
        served_in(&s.catalog, group, version)
            .next()
            .is_some()
            .then(|| document(&s.catalog, group, version))
    });
    let document =
        document.ok_or_else(|| ApiError::no_route(&format!("/openapi/v3/{group}/{version}")))?;
    Ok(Reply::json(StatusCode::OK, &document))
}

/// The OpenAPI v3 document of one group-version: each resource's paths with their operations
/// (tagged with `x-kubernetes-group-version-kind` and accepting `fieldValidation`, which is
/// what kubectl looks for) and each kind's schema (the CRD's, or an open object for built-ins).
fn document(catalog: &Catalog, group: &str, version: &str) -> Value {
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    for def in served_in(catalog, group, version) {
        let gvk = json!({"group": def.group, "version": version, "kind": def.kind});
        let schema_name = format!(
            "{}.{}.{}",
            if def.group.is_empty() {
                "io.k8s.api.core"
            } else {
                &def.group
            },
            version,
            def.kind
        );
        let reference = json!({"$ref": format!("#/components/schemas/{schema_name}")});
        let mut schema = def
            .version(version)
            .and_then(|v| v.schema.clone())
            .unwrap_or_else(
                || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            );
        schema["x-kubernetes-group-version-kind"] = json!([gvk]);
        schemas.insert(schema_name, schema);

        let ok = json!({"200": {"description": "OK", "content": {"application/json": {"schema": reference}}}});
        let query = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
        let write_params = json!([
            query("dryRun"),
            query("fieldManager"),
            query("fieldValidation")
        ]);
        let operation = |action: &str, params: &Value| {
            json!({
                "operationId": format!("{action}{}", def.kind),
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": params,
                "responses": ok,
            })
        };
        let mut post = operation("post", &write_params);
        post["requestBody"] = json!({"content": {"application/json": {"schema": reference}}});
        let mut put = operation("put", &write_params);
        put["requestBody"] = post["requestBody"].clone();
        let mut patch_params = write_params.clone();
        patch_params
            .as_array_mut()
            .expect("an array")
            .push(query("force"));
        let mut patch = operation("patch", &patch_params);
        let patch_body = json!({"schema": {"type": "object"}});
        // No strategic-merge entry, as the real server for CRDs: for built-ins, kubectl then
        // computes strategic patches from its own compiled-in types.
        let content = json!({
            "application/json-patch+json": patch_body,
            "application/merge-patch+json": patch_body,
            "application/apply-patch+yaml": patch_body,
        });
        patch["requestBody"] = json!({"content": content});
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let scope = if def.namespaced {
            "/namespaces/{namespace}"
        } else {
            ""
        };
        let collection = format!("{prefix}{scope}/{}", def.plural);
        paths.insert(
            collection.clone(),
            json!({"get": operation("list", &json!([query("labelSelector"), query("fieldSelector")])), "post": post, "delete": operation("deletecollection", &json!([]))}),
        );
        paths.insert(
            format!("{collection}/{{name}}"),
            json!({"get": operation("get", &json!([])), "put": put, "patch": patch, "delete": operation("delete", &json!([]))}),
        );
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

#[cfg(test)]
mod tests {
    use super::storage_version_hash;

    #[test]
    fn storage_version_hashes_are_the_real_servers() {
        // As a real kube-apiserver lists ConfigMaps and a custom resource of the fidelity suite.
        assert_eq!(storage_version_hash("", "v1", "ConfigMap"), "qFsyl6wFWjQ=");
        assert_eq!(
            storage_version_hash("f33-crds-widgets.fidelity.example", "v1", "Widget"),
            "e7ovNO7c09E="
        );
    }
}
