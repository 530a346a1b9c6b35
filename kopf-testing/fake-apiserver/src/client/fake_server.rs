//! The test's helpers on the fake server itself: `server.apply(..)`, `server.request(..)`,
//! `server.wait_for(..)`, each through a fresh [`TestClient`] of it.

use http::StatusCode;
use serde_json::Value;

use super::requests::{Answer, ApiRequest};
use super::test_client::TestClient;
use crate::server::FakeApiServer;

/// Shortcuts to a [`TestClient`] of this server, for tests that need no client of their own.
///
/// Each call makes its requests with a fresh client ([`FakeApiServer::test_client`]), whose
/// connections close when the call returns: nothing of it stays open to be counted by
/// [`FakeApiServer::stats`], and a restart between two calls breaks neither. For many
/// requests in a row, keep one [`TestClient`].
///
/// ```no_run
/// # async fn example() -> std::io::Result<()> {
/// use kopf_fake_apiserver::{FakeApiServer, fixtures};
/// use serde_json::json;
///
/// let server = FakeApiServer::start().await?;
/// server.apply(fixtures::KOPFEXAMPLE_CRD).await;
/// let kex = fixtures::kopfexample("kex", json!({"field": "value"}));
/// let (status, created) = server.request("POST", &fixtures::kopfexamples_in("default"), kex).await;
/// assert_eq!(status, 201, "{created}");
/// server.patch("kopfexamples", "default", "kex", json!({"spec": {"field": "changed"}})).await;
/// server.wait_for("kopfexamples", "default", "kex", |o| o["spec"]["field"] == "changed").await;
/// server.stop().await;
/// # Ok(()) }
/// ```
impl FakeApiServer {
    /// A test's client of this server, without retries (kube's default client retries
    /// `429`, `503` and `504`): a test sees every answer, those of the faults it injected
    /// too.
    pub fn test_client(&self) -> TestClient {
        let mut config = self.config();
        config.default_retry = false;
        TestClient::new(
            kube::Client::try_from(config).expect("a client of the fake server always builds"),
        )
    }

    /// [`TestClient::apply`]: creates or replaces the objects of YAML or JSON documents; a
    /// CRD is waited for until established.
    pub async fn apply(&self, documents: &str) -> Vec<Value> {
        self.test_client().apply(documents).await
    }

    /// [`TestClient::apply_value`]: creates or replaces one object given as JSON.
    pub async fn apply_value(&self, object: Value) -> Value {
        self.test_client().apply_value(object).await
    }

    /// [`TestClient::request`]: `method path` with a JSON body (a merge patch for PATCH);
    /// the answer's status and JSON.
    pub async fn request(
        &self,
        method: impl AsRef<str>,
        path: &str,
        body: impl Into<Option<Value>>,
    ) -> (StatusCode, Value) {
        self.test_client().request(method, path, body).await
    }

    /// [`TestClient::send`]: a request with another patch type, headers or a raw body; the
    /// whole answer.
    pub async fn send(&self, request: ApiRequest) -> Answer {
        self.test_client().send(request).await
    }

    /// [`TestClient::get`]: the object now, or `None`.
    pub async fn get<'a>(
        &self,
        resource: &str,
        namespace: impl Into<Option<&'a str>>,
        name: &str,
    ) -> Option<Value> {
        self.test_client().get(resource, namespace, name).await
    }

    /// [`TestClient::patch`]: merge-patches the object; returns it as stored.
    pub async fn patch<'a>(
        &self,
        resource: &str,
        namespace: impl Into<Option<&'a str>>,
        name: &str,
        patch: Value,
    ) -> Value {
        self.test_client()
            .patch(resource, namespace, name, patch)
            .await
    }

    /// [`TestClient::delete`]: asks to delete the object.
    pub async fn delete<'a>(
        &self,
        resource: &str,
        namespace: impl Into<Option<&'a str>>,
        name: &str,
    ) {
        self.test_client().delete(resource, namespace, name).await;
    }

    /// [`TestClient::wait_for`]: waits until the object exists and `condition` holds for
    /// it; returns it.
    pub async fn wait_for<'a>(
        &self,
        resource: &str,
        namespace: impl Into<Option<&'a str>>,
        name: &str,
        condition: impl Fn(&Value) -> bool,
    ) -> Value {
        self.test_client()
            .wait_for(resource, namespace, name, condition)
            .await
    }

    /// [`TestClient::wait_for_deletion`]: waits until the object is gone.
    pub async fn wait_for_deletion<'a>(
        &self,
        resource: &str,
        namespace: impl Into<Option<&'a str>>,
        name: &str,
    ) {
        self.test_client()
            .wait_for_deletion(resource, namespace, name)
            .await;
    }
}
