//! The API server behind a proxy: the connections to it, with its admin's client certificate
//! or with none (for requests that carry their own credentials), and the requests sent over
//! them.
//!
//! A fake server built with an upstream (`FakeApiServerBuilder::upstream`) serves no objects
//! of its own: the proxy (`endpoints::proxy`) forwards each request here. The connections are
//! tasks of the server's tree, ended when it stops.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, Uri, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use kube::client::ConfigExt as _;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Why a server cannot be put in front of an upstream.
#[derive(Debug, thiserror::Error)]
#[error("the upstream API server's configuration is not usable by the proxy: {0}")]
pub(crate) struct UpstreamError(String);

/// Whose credentials a forwarded request goes with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Credentials {
    /// The upstream admin's (the proxy's own).
    Admin,
    /// The request's own `Authorization` header, or none: the upstream decides who it is
    /// (a ServiceAccount's token, `system:anonymous`).
    Own,
}

/// The API server a proxy forwards to.
#[derive(Clone)]
pub(crate) struct Upstream {
    /// `https://host:port`, without a trailing slash.
    url: String,
    /// Connections presenting the admin's client certificate (if the configuration has one).
    admin: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// Connections presenting no client certificate: a certificate would win over the
    /// request's own token (the API server tries client certificates first).
    bare: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// Request headers that belong to one hop, or that the proxy sets itself: the body's length,
/// the host, and `Accept-Encoding` (the proxy reads watch streams and lists, so it asks for
/// them uncompressed).
const NOT_FORWARDED: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "accept-encoding",
];

impl Upstream {
    /// Connections to the API server of `config` (its URL, the CA it trusts, and the admin's
    /// client certificate), run as tasks of `tracker` that end with `stopped`.
    pub(crate) fn new(
        config: &kube::Config,
        tracker: TaskTracker,
        stopped: CancellationToken,
    ) -> Result<Upstream, UpstreamError> {
        let auth = &config.auth_info;
        let certificate =
            auth.client_certificate.is_some() || auth.client_certificate_data.is_some();
        let other = auth.token.is_some()
            || auth.token_file.is_some()
            || auth.exec.is_some()
            || auth.auth_provider.is_some()
            || auth.username.is_some();
        if other || !certificate {
            return Err(UpstreamError(
                "the admin's credentials must be a client certificate (and its key)".into(),
            ));
        }
        if config.proxy_url.is_some() {
            return Err(UpstreamError(
                "an HTTP proxy to the upstream is not supported".into(),
            ));
        }
        let mut bare = config.clone();
        bare.auth_info = Default::default();
        let executor = Tracked { tracker, stopped };
        let client = |config: &kube::Config| {
            let connector = config
                .rustls_https_connector()
                .map_err(|e| UpstreamError(e.to_string()))?;
            Ok::<_, UpstreamError>(
                Client::builder(executor.clone())
                    .pool_max_idle_per_host(32)
                    .build(connector),
            )
        };
        Ok(Upstream {
            url: config.cluster_url.to_string().trim_end_matches('/').into(),
            admin: client(config)?,
            bare: client(&bare)?,
        })
    }

    /// `https://host:port`.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Sends a request: `method` to `path_and_query` with the client's `headers` (but those of
    /// one hop) and `body`, with the admin's credentials or the request's own.
    pub(crate) async fn send(
        &self,
        method: http::Method,
        path_and_query: &str,
        headers: &HeaderMap,
        body: Bytes,
        credentials: Credentials,
    ) -> Result<Response<Incoming>, hyper_util::client::legacy::Error> {
        let uri: Uri = format!("{}{path_and_query}", self.url)
            .parse()
            .unwrap_or_else(|_| Uri::from_static("/"));
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        let forwarded = request.headers_mut();
        for (name, value) in headers {
            if !NOT_FORWARDED.contains(&name.as_str()) {
                forwarded.append(name, value.clone());
            }
        }
        let client = match credentials {
            Credentials::Admin => {
                forwarded.remove(header::AUTHORIZATION);
                &self.admin
            }
            Credentials::Own => &self.bare,
        };
        client.request(request).await
    }
}

/// Runs the connections' tasks in the server's tree: each ends when the server stops.
#[derive(Clone)]
struct Tracked {
    tracker: TaskTracker,
    stopped: CancellationToken,
}

impl<F> hyper::rt::Executor<F> for Tracked
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, future: F) {
        let stopped = self.stopped.clone();
        let future: Pin<Box<F>> = Box::pin(future);
        self.tracker.spawn(async move {
            tokio::select! {
                () = future => {}
                () = stopped.cancelled() => {}
            }
        });
    }
}
