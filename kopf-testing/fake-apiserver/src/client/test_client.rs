//! The test's client of an API server: a `kube::Client` with what tests do with it.

use std::sync::Arc;

use super::resolutions::Resolutions;

/// A test's client of an API server: requests answered with their status and JSON
/// ([`TestClient::request`]), objects applied from YAML, read, patched and deleted by the
/// names kubectl knows them by ([`TestClient::apply`]), and waits for objects' states with a
/// generous deadline ([`TestClient::wait_for`]).
///
/// It wraps any `kube::Client`: of a [`FakeApiServer`](crate::FakeApiServer) (see
/// [`FakeApiServer::test_client`](crate::FakeApiServer::test_client), whose `apply`,
/// `request`, `wait_for` and the rest are shortcuts to these), or of a real kube-apiserver.
/// The client's own settings stay as they are: its retries (kube's default client retries
/// `429`, `503` and `504`), timeouts, credentials and headers.
///
/// The helpers panic with a message naming the request or the object: in a test, a failed
/// step should fail the test and say why. [`TestClient::try_request`] and
/// [`TestClient::try_send`] return the error instead, for code that goes on when the server
/// is away (restarting, say).
///
/// Clones share the client and what discovery told about resources' names.
///
/// ```no_run
/// # async fn example(client: kube::Client) {
/// use kopf_fake_apiserver::{TestClient, fixtures};
///
/// let client = TestClient::new(client);
/// client.apply(fixtures::KOPFEXAMPLE_CRD).await; // waits until the CRD is established
/// client.apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: kex}}").await;
/// let (status, kex) = client.request("GET", &fixtures::kopfexample_path("default", "kex"), None).await;
/// assert_eq!(status, 200, "{kex}");
/// client.wait_for("kopfexamples", "default", "kex", |o| o["metadata"]["uid"].is_string()).await;
/// # }
/// ```
#[derive(Clone)]
pub struct TestClient {
    pub(super) client: kube::Client,
    /// Resource names resolved through discovery.
    pub(super) resolutions: Arc<Resolutions>,
}

impl TestClient {
    /// A test's client making its requests with `client`.
    pub fn new(client: kube::Client) -> TestClient {
        TestClient {
            client,
            resolutions: Arc::default(),
        }
    }

    /// The `kube::Client` it makes its requests with.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }
}

impl std::fmt::Debug for TestClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestClient")
            .field("default_namespace", &self.client.default_namespace())
            .field("resolutions", &self.resolutions)
            .finish_non_exhaustive()
    }
}

impl From<kube::Client> for TestClient {
    fn from(client: kube::Client) -> TestClient {
        TestClient::new(client)
    }
}
