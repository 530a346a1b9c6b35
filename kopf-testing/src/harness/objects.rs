//! Objects in a test, through the harness's [`TestClient`](crate::TestClient): apply YAML, create typed values,
//! get, patch, delete, send requests, and wait for an object to reach a state or to be gone.
//! Resources are named as kubectl names them (plural, singular, kind, or `plural.group`).
//!
//! The helpers panic with a message naming the object or the request: they are for tests,
//! where a failed step should fail the test and say why.

use http::StatusCode;
use kopf_fake_apiserver::{Answer, ApiRequest};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::operator::OperatorHarness;

impl OperatorHarness {
    /// Creates, or replaces if they exist, the objects of one or more YAML (or JSON)
    /// documents separated by `---`; returns them as stored. Namespaced objects without a
    /// namespace go to `default`. For a CRD, waits until it is established. See
    /// [`TestClient::apply`](crate::TestClient::apply).
    pub async fn apply(&self, documents: &str) -> Vec<Value> {
        self.test_client.apply(documents).await
    }

    /// Creates, or replaces if it exists, one object given as JSON; returns it as stored.
    /// See [`TestClient::apply_value`](crate::TestClient::apply_value).
    pub async fn apply_value(&self, object: Value) -> Value {
        self.test_client.apply_value(object).await
    }

    /// Creates a typed object, e.g. of a `#[derive(kube::CustomResource)]` type (in the
    /// `default` namespace unless it names one); returns it as stored. See
    /// [`TestClient::create`](crate::TestClient::create).
    pub async fn create<K>(&self, object: &K) -> K
    where
        K: kube::Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    {
        self.test_client.create(object).await
    }

    /// Installs the CRD of a typed custom resource and waits until it is established. See
    /// [`TestClient::apply_crd`](crate::TestClient::apply_crd).
    pub async fn apply_crd<K: kube::CustomResourceExt>(&self) -> Value {
        self.test_client.apply_crd::<K>().await
    }

    /// Sends `method path` with a JSON body (a merge patch for PATCH); returns the answer's
    /// status and JSON. See [`TestClient::request`](crate::TestClient::request).
    pub async fn request(
        &self,
        method: impl AsRef<str>,
        path: &str,
        body: impl Into<Option<Value>>,
    ) -> (StatusCode, Value) {
        self.test_client.request(method, path, body).await
    }

    /// Sends a request with another patch type, headers or a raw body; returns the whole
    /// answer. See [`TestClient::send`](crate::TestClient::send).
    pub async fn send(&self, request: ApiRequest) -> Answer {
        self.test_client.send(request).await
    }

    /// The object now, or `None` if there is none. See [`TestClient::get`](crate::TestClient::get).
    pub async fn get<'a>(
        &self,
        resource: &str,
        namespace: impl Into<Option<&'a str>>,
        name: &str,
    ) -> Option<Value> {
        self.test_client.get(resource, namespace, name).await
    }

    /// Merge-patches the object (as `kubectl patch --type=merge`); returns it as stored. See
    /// [`TestClient::patch`](crate::TestClient::patch).
    pub async fn patch<'a>(
        &self,
        resource: &str,
        namespace: impl Into<Option<&'a str>>,
        name: &str,
        patch: Value,
    ) -> Value {
        self.test_client
            .patch(resource, namespace, name, patch)
            .await
    }

    /// Asks to delete the object (it stays while finalizers hold it: see
    /// [`OperatorHarness::wait_for_deletion`]).
    pub async fn delete<'a>(
        &self,
        resource: &str,
        namespace: impl Into<Option<&'a str>>,
        name: &str,
    ) {
        self.test_client.delete(resource, namespace, name).await;
    }

    /// Waits until the object exists and `condition` holds for it; returns it.
    ///
    /// # Panics
    ///
    /// After [`DEADLINE`](kopf_fake_apiserver::DEADLINE), with the object's last state seen.
    pub async fn wait_for<'a>(
        &self,
        resource: &str,
        namespace: impl Into<Option<&'a str>>,
        name: &str,
        condition: impl Fn(&Value) -> bool,
    ) -> Value {
        self.test_client
            .wait_for(resource, namespace, name, condition)
            .await
    }

    /// Waits until the object is gone (deleted, its finalizers released).
    ///
    /// # Panics
    ///
    /// After [`DEADLINE`](kopf_fake_apiserver::DEADLINE), with the object's last state seen.
    pub async fn wait_for_deletion<'a>(
        &self,
        resource: &str,
        namespace: impl Into<Option<&'a str>>,
        name: &str,
    ) {
        self.test_client
            .wait_for_deletion(resource, namespace, name)
            .await;
    }
}
