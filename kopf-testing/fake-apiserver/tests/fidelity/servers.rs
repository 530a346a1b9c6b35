//! The servers compared: each one's clients (as the admin, or with no credentials) and what
//! only the fake server can be asked (to forget its history).

use std::sync::Arc;

use kopf_fake_apiserver::{FakeApiServer, RealApiServer};

/// One of the two servers a sequence runs on.
pub(crate) struct Server {
    /// `fake` or `real`, for the reports.
    pub(crate) side: &'static str,
    /// The admin's client: `system:masters` on the real server, the admin on the fake one.
    admin: kube::Client,
    /// A client that sends no credentials (requests that carry a token add it themselves).
    bare: kube::Client,
    fake: Option<Arc<FakeApiServer>>,
}

impl Server {
    /// A fake server as the suite runs it: HTTPS (as every real server is: the root CA's
    /// ConfigMap then holds a certificate) and RBAC enforced for ServiceAccounts.
    pub(crate) async fn fake(side: &'static str) -> Server {
        let server = FakeApiServer::builder()
            .tls()
            .enforce_rbac()
            .start()
            .await
            .expect("the fake server starts");
        let config = server.config();
        Server::new(side, config, Some(Arc::new(server)))
    }

    pub(crate) async fn real(server: &RealApiServer) -> Server {
        Server::new("real", server.config().await, None)
    }

    fn new(
        side: &'static str,
        mut config: kube::Config,
        fake: Option<Arc<FakeApiServer>>,
    ) -> Server {
        // Every answer is to be seen: kube's client retries 429, 503 and 504 by default.
        config.default_retry = false;
        let admin = kube::Client::try_from(config.clone()).expect("a client builds");
        config.auth_info = Default::default();
        let bare = kube::Client::try_from(config).expect("a client builds");
        Server {
            side,
            admin,
            bare,
            fake,
        }
    }

    /// Sends a request as the admin, or (`bare`) with no credentials but its own headers.
    pub(crate) async fn send(
        &self,
        bare: bool,
        request: http::Request<Vec<u8>>,
    ) -> Result<http::Response<kube::client::Body>, String> {
        let client = if bare { &self.bare } else { &self.admin };
        let (parts, body) = request.into_parts();
        let request = http::Request::from_parts(parts, kube::client::Body::from(body));
        client.send(request).await.map_err(|e| e.to_string())
    }

    /// Forgets the fake server's watch history; nothing on the real one, whose history of a
    /// resource begins when its watch cache does.
    pub(crate) fn forget(&self) {
        if let Some(fake) = &self.fake {
            fake.compact();
        }
    }
}
