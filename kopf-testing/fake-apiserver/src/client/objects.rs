//! Objects in a test: apply YAML, create typed values, get, patch, delete, and wait for an
//! object to reach a state or to be gone. Resources are named as kubectl names them (plural,
//! singular, kind, or `plural.group`), resolved through the server's discovery.
//!
//! The helpers panic with a message naming the object: they are for tests, where a failed
//! step should fail the test and say why.

use std::cell::RefCell;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::Scope;
use serde::de::DeserializeOwned;
use serde::{Deserialize as _, Serialize};
use serde_json::Value;

use super::resolutions::Resolved;
use super::test_client::TestClient;
use super::waiting::{DEADLINE, try_wait, wait};

impl TestClient {
    /// Creates, or replaces if they exist, the objects of one or more YAML (or JSON)
    /// documents separated by `---`; returns them as stored. Namespaced objects without a
    /// namespace go to `default`. For a CRD, waits until it is established and discovery
    /// serves its resources. The lines'
    /// common indentation is removed first, so YAML can be indented along with the test.
    ///
    /// ```no_run
    /// # async fn example(client: kopf_fake_apiserver::TestClient) {
    /// use kopf_fake_apiserver::fixtures::KOPFEXAMPLE_CRD;
    ///
    /// client.apply(KOPFEXAMPLE_CRD).await;
    /// let applied = client
    ///     .apply(
    ///         r#"
    ///         apiVersion: kopf.dev/v1
    ///         kind: KopfExample
    ///         metadata: {name: kex}
    ///         spec: {field: value}
    ///         ---
    ///         {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}
    ///         "#,
    ///     )
    ///     .await;
    /// assert_eq!(applied[0]["metadata"]["namespace"], "default");
    /// # }
    /// ```
    ///
    /// # Panics
    ///
    /// When the YAML does not parse, a kind is not served, or the server rejects an object.
    pub async fn apply(&self, documents: &str) -> Vec<Value> {
        let mut applied = Vec::new();
        let yaml = dedent(documents);
        for document in serde_norway::Deserializer::from_str(&yaml) {
            let object = Value::deserialize(document)
                .unwrap_or_else(|error| panic!("the YAML to apply does not parse: {error}"));
            if !object.is_null() {
                applied.push(self.apply_value(object).await);
            }
        }
        applied
    }

    /// Creates, or replaces if it exists, one object given as JSON; returns it as stored.
    /// See [`TestClient::apply`].
    pub async fn apply_value(&self, mut object: Value) -> Value {
        let api_version = object["apiVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            !api_version.is_empty() && !kind.is_empty() && !name.is_empty(),
            "an object to apply needs apiVersion, kind and metadata.name: {object}"
        );
        let resolved = self.resolve_kind(&api_version, &kind).await;
        let namespace = object["metadata"]["namespace"].as_str().map(String::from);
        let api = self.api(&resolved, namespace.as_deref());
        let what = describe(&kind, namespace.as_deref(), &name);
        let existing = api
            .get_opt(&name)
            .await
            .unwrap_or_else(|error| panic!("reading {what} failed: {error}"));
        let stored = match existing {
            None => {
                let dynamic = to_dynamic(object, &what);
                api.create(&PostParams::default(), &dynamic).await
            }
            Some(existing) => {
                object["metadata"]["resourceVersion"] =
                    existing.metadata.resource_version.clone().into();
                let dynamic = to_dynamic(object, &what);
                api.replace(&name, &PostParams::default(), &dynamic).await
            }
        };
        let stored = stored.unwrap_or_else(|error| panic!("applying {what} failed: {error}"));
        let stored = serde_json::to_value(stored).expect("objects serialize");
        if resolved.resource.kind == "CustomResourceDefinition" {
            self.wait_for_crd(&name).await
        } else {
            stored
        }
    }

    /// Creates a typed object, e.g. of a `#[derive(kube::CustomResource)]` type (in the
    /// `default` namespace unless it names one); returns it as stored.
    ///
    /// # Panics
    ///
    /// When the kind is not served or the server rejects the object (one that exists
    /// already, too).
    pub async fn create<K>(&self, object: &K) -> K
    where
        K: kube::Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    {
        let mut value = serde_json::to_value(object).expect("objects serialize");
        value["apiVersion"] = K::api_version(&()).into();
        value["kind"] = K::kind(&()).into();
        let resolved = self.resolve_kind(&K::api_version(&()), &K::kind(&())).await;
        let meta = object.meta();
        let name = meta.name.as_deref().unwrap_or_default();
        let what = describe(&K::kind(&()), meta.namespace.as_deref(), name);
        let api = self.api(&resolved, meta.namespace.as_deref());
        let stored = api
            .create(&PostParams::default(), &to_dynamic(value, &what))
            .await
            .unwrap_or_else(|error| panic!("creating {what} failed: {error}"));
        let stored = serde_json::to_value(stored).expect("objects serialize");
        serde_json::from_value(stored)
            .unwrap_or_else(|error| panic!("{what} as stored does not fit its type: {error}"))
    }

    /// Installs the CRD of a typed custom resource (`kube::CustomResourceExt`, as
    /// `#[derive(kube::CustomResource)]` implements it) and waits until it is established.
    pub async fn apply_crd<K: kube::CustomResourceExt>(&self) -> Value {
        self.apply_value(serde_json::to_value(K::crd()).expect("CRDs serialize"))
            .await
    }

    /// The object now, or `None` if there is none. `resource` is named as in kubectl
    /// (`kopfexamples`, `kopfexample`, `KopfExample`, `kopfexamples.kopf.dev`, `configmaps`);
    /// `namespace` is a name, or `None` for `default` (ignored for cluster-wide resources).
    pub async fn get<'a>(
        &self,
        resource: &str,
        namespace: impl Into<Option<&'a str>>,
        name: &str,
    ) -> Option<Value> {
        let namespace = namespace.into();
        let resolved = self.resolve_name(resource).await.unwrap_or_else(|| {
            panic!("no resource named {resource:?} is served by the API server")
        });
        self.api(&resolved, namespace)
            .get_opt(name)
            .await
            .unwrap_or_else(|error| {
                panic!(
                    "reading {} failed: {error}",
                    describe(resource, namespace, name)
                )
            })
            .map(|object| serde_json::to_value(object).expect("objects serialize"))
    }

    /// Merge-patches the object (as `kubectl patch --type=merge`); returns it as stored.
    pub async fn patch<'a>(
        &self,
        resource: &str,
        namespace: impl Into<Option<&'a str>>,
        name: &str,
        patch: Value,
    ) -> Value {
        let namespace = namespace.into();
        let resolved = self.resolve_name(resource).await.unwrap_or_else(|| {
            panic!("no resource named {resource:?} is served by the API server")
        });
        let stored = self
            .api(&resolved, namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|error| {
                panic!(
                    "patching {} failed: {error}",
                    describe(resource, namespace, name)
                )
            });
        serde_json::to_value(stored).expect("objects serialize")
    }

    /// Asks to delete the object (it stays while finalizers hold it: see
    /// [`TestClient::wait_for_deletion`]).
    pub async fn delete<'a>(
        &self,
        resource: &str,
        namespace: impl Into<Option<&'a str>>,
        name: &str,
    ) {
        let namespace = namespace.into();
        let resolved = self.resolve_name(resource).await.unwrap_or_else(|| {
            panic!("no resource named {resource:?} is served by the API server")
        });
        self.api(&resolved, namespace)
            .delete(name, &DeleteParams::default())
            .await
            .unwrap_or_else(|error| {
                panic!(
                    "deleting {} failed: {error}",
                    describe(resource, namespace, name)
                )
            });
    }

    /// Waits until the object exists and `condition` holds for it; returns it. Errors while
    /// reading it (a server restarting, a resource not served yet) count as "not yet".
    ///
    /// ```no_run
    /// # async fn example(client: kopf_fake_apiserver::TestClient) {
    /// let kex = client
    ///     .wait_for("kopfexamples", "default", "kex", |o| o["status"]["create_fn"] == "done")
    ///     .await;
    /// # }
    /// ```
    ///
    /// # Panics
    ///
    /// After [`DEADLINE`], with the object's last state seen.
    pub async fn wait_for<'a>(
        &self,
        resource: &str,
        namespace: impl Into<Option<&'a str>>,
        name: &str,
        condition: impl Fn(&Value) -> bool,
    ) -> Value {
        let namespace = namespace.into();
        let last = RefCell::new(None);
        let found = try_wait(|| async {
            let object = self.try_get(resource, namespace, name).await?;
            let holds = condition(&object);
            *last.borrow_mut() = Some(object.clone());
            holds.then_some(object)
        })
        .await;
        found.unwrap_or_else(|| {
            panic!(
                "timed out after {DEADLINE:?} waiting for a condition on {}; last seen: {}",
                describe(resource, namespace, name),
                shown(last.into_inner().as_ref()),
            )
        })
    }

    /// Waits until the object is gone (deleted, its finalizers released).
    ///
    /// # Panics
    ///
    /// After [`DEADLINE`], with the object's last state seen.
    pub async fn wait_for_deletion<'a>(
        &self,
        resource: &str,
        namespace: impl Into<Option<&'a str>>,
        name: &str,
    ) {
        let namespace = namespace.into();
        let last = RefCell::new(None);
        let gone = try_wait(|| async {
            let object = self.try_get(resource, namespace, name).await;
            let gone = object.is_none();
            *last.borrow_mut() = object;
            gone.then_some(())
        })
        .await;
        if gone.is_none() {
            panic!(
                "timed out after {DEADLINE:?} waiting for {} to be deleted; last seen: {}",
                describe(resource, namespace, name),
                shown(last.into_inner().as_ref()),
            );
        }
    }

    /// The object, or `None` when it or its resource is not there (yet).
    async fn try_get(&self, resource: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let resolved = self.resolve_name(resource).await?;
        let object = self.api(&resolved, namespace).get_opt(name).await.ok()??;
        Some(serde_json::to_value(object).expect("objects serialize"))
    }

    /// Waits until the CRD `name` (`plural.group`) is established and discovery serves each
    /// of its served versions; returns it. A real API server serves a new CRD's resources a
    /// moment after it is established, and an operator that starts in that moment would not
    /// find them: wait for this after creating a CRD other than with [`TestClient::apply`].
    ///
    /// ```no_run
    /// # async fn example(client: kopf_fake_apiserver::TestClient) {
    /// let crd = client.wait_for_crd("kopfexamples.kopf.dev").await;
    /// assert_eq!(crd["spec"]["group"], "kopf.dev");
    /// # }
    /// ```
    pub async fn wait_for_crd(&self, name: &str) -> Value {
        let established = self.wait_until_established(name).await;
        self.wait_until_discovered(&established).await;
        established
    }

    async fn wait_until_established(&self, name: &str) -> Value {
        self.wait_for(
            "customresourcedefinitions.apiextensions.k8s.io",
            None,
            name,
            |crd| {
                crd["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            },
        )
        .await
    }

    /// Waits until discovery serves each served version of a CRD's resource: a real API
    /// server serves a new CRD's resources a moment after it is established, and an operator
    /// that starts in that moment would not find them.
    async fn wait_until_discovered(&self, crd: &Value) {
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
        let versions = crd["spec"]["versions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for version in versions.iter().filter(|v| v["served"] == true) {
            let version = version["name"].as_str().unwrap_or_default();
            let path = format!("/apis/{group}/{version}");
            wait(
                &format!("{plural}.{group}/{version} to be discovered"),
                || async {
                    let request = http::Request::get(&path)
                        .body(Vec::new())
                        .expect("a GET request");
                    let list: Value = self.client.request(request).await.ok()?;
                    list["resources"]
                        .as_array()?
                        .iter()
                        .any(|r| r["name"] == plural)
                        .then_some(())
                },
            )
            .await;
        }
    }

    fn api(&self, resolved: &Resolved, namespace: Option<&str>) -> Api<DynamicObject> {
        if resolved.namespaced {
            let namespace = namespace.unwrap_or("default");
            Api::namespaced_with(self.client.clone(), namespace, &resolved.resource)
        } else {
            Api::all_with(self.client.clone(), &resolved.resource)
        }
    }

    /// The resource of an object's `apiVersion` and `kind`.
    async fn resolve_kind(&self, api_version: &str, kind: &str) -> Resolved {
        let key = format!("{api_version}/{kind}");
        if let Some(resolved) = self.resolutions.get(&key) {
            return resolved;
        }
        let (group, version) = match api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", api_version),
        };
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        let (resource, capabilities) = kube::discovery::pinned_kind(&self.client.clone(), &gvk)
            .await
            .unwrap_or_else(|error| {
                panic!("the API server does not serve {kind} in {api_version}: {error}")
            });
        let resolved = Resolved {
            resource,
            namespaced: capabilities.scope == Scope::Namespaced,
        };
        self.resolutions.insert(key, resolved.clone());
        resolved
    }

    /// The resource that kubectl would understand by `name`, if one is served.
    async fn resolve_name(&self, name: &str) -> Option<Resolved> {
        if let Some(resolved) = self.resolutions.get(name) {
            return Some(resolved);
        }
        let discovery = kube::Discovery::new(self.client.clone()).run().await.ok()?;
        let wanted = name.to_lowercase();
        let resolved = discovery.groups().find_map(|group| {
            group
                .recommended_resources()
                .into_iter()
                .find(|(resource, _)| {
                    let plural = resource.plural.to_lowercase();
                    let kind = resource.kind.to_lowercase();
                    [
                        plural.clone(),
                        kind.clone(),
                        format!("{plural}.{}", resource.group),
                        format!("{kind}.{}", resource.group),
                    ]
                    .contains(&wanted)
                })
                .map(|(resource, capabilities)| Resolved {
                    resource,
                    namespaced: capabilities.scope == Scope::Namespaced,
                })
        })?;
        self.resolutions.insert(name.to_string(), resolved.clone());
        Some(resolved)
    }
}

/// The text without the indentation common to its non-blank lines.
fn dedent(text: &str) -> String {
    let indent = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.len() - line.trim_start().len())
        .min()
        .unwrap_or(0);
    text.lines()
        .map(|line| line.get(indent..).unwrap_or_else(|| line.trim_start()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn to_dynamic(object: Value, what: &str) -> DynamicObject {
    serde_json::from_value(object)
        .unwrap_or_else(|error| panic!("{what} is not a Kubernetes object: {error}"))
}

/// `kind namespace/name`, or `kind name` without a namespace.
fn describe(resource: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(namespace) => format!("{resource} {namespace}/{name}"),
        None => format!("{resource} {name}"),
    }
}

fn shown(object: Option<&Value>) -> String {
    match object {
        Some(object) => serde_json::to_string_pretty(object).expect("JSON prints"),
        None => "nothing (it does not exist)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::dedent;

    #[test]
    fn indented_yaml_is_dedented_as_a_block() {
        let yaml = "\n    a: 1\n    b:\n      c: 2\n\n    ---\n    d: 3\n  ";
        assert_eq!(dedent(yaml), "\na: 1\nb:\n  c: 2\n\n---\nd: 3\n");
    }
}
