//! The test's client of a real kube-apiserver: the same helpers as on the fake server.

use super::test_client::TestClient;
use crate::real::RealApiServer;

impl RealApiServer {
    /// A test's client of this server (its admin kubeconfig, without retries, as the fake
    /// server's [`FakeApiServer::test_client`](crate::FakeApiServer::test_client)): the same
    /// `apply`, `request`, `wait_for` and the rest that tests use on the fake server.
    ///
    /// ```no_run
    /// # async fn example() {
    /// use kopf_fake_apiserver::{RealApiServer, fixtures};
    ///
    /// let Some(server) = RealApiServer::for_test("my_test").await else { return };
    /// let client = server.test_client().await;
    /// client.apply(fixtures::KOPFEXAMPLE_CRD).await; // established on the real server too
    /// # }
    /// ```
    pub async fn test_client(&self) -> TestClient {
        let mut config = self.config().await;
        config.default_retry = false;
        TestClient::new(kube::Client::try_from(config).expect("a client of the real server builds"))
    }
}
