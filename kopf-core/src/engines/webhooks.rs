//! The admission webhook server (Kopf's `kopf.WebhookServer`): HTTPS at the address of
//! [`WebhookServer`], `POST <path>/<handler-id>` answered by the admission reviews, and the
//! client config that tells the cluster where to call and what to trust.
//!
//! Invariants:
//! 1. The server runs in a tree of its own, so that it answers until the very end of a stop:
//!    the operator's own writes (handlers finishing, cleanup handlers) may need its webhooks.
//!    It is stopped explicitly ([`Webhooks::stop`]), after the managed configurations shrank:
//!    it stops accepting, reviews in flight finish, then it is gone.
//! 2. The client config is published before [`Webhooks::start`] returns (and the CA bundle
//!    written to `cadump`), and again whenever
//!    what clients must trust changes: given PEM files (and a shared Secret) are read again
//!    every reload interval (without blocking the runtime), generated certificates are
//!    renewed when due, and a change that makes a valid certificate serves new connections at
//!    once, on the same port. An invalid change (e.g. a file half-written) is logged and
//!    retried at the next check; the old certificate serves meanwhile
//!    ([`certificates`](self::certificates)).
//! 3. An `insecure` server serves plain HTTP: no certificate is made, read or reloaded.
//! 4. `WebhookServer::auto()` guesses its host before it listens ([`detection`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::aiokits::serving::{self, Limits, PeerCertificate};
use crate::aiokits::tasks::{StopReason, Tasks};
use crate::aiokits::tls::{Pem, TlsError};
use crate::configs::settings::ServingSettings;
use crate::configs::webhooks::{ClientConfig, Target, WebhookServer};
use crate::engines::admission::{WebhookRequest, WebhookResponse};

mod certificates;
mod detection;

use certificates::{CertificateError, Certificates};

/// The largest AdmissionReview accepted: two objects (old and new) of the API's largest size
/// (1.5 MiB each, etcd's default limit), with room to spare.
const MAX_BODY: usize = 8 * 1024 * 1024;

/// Why the webhook server could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The address cannot be listened on (e.g. the port is taken: choose another).
    #[error("cannot listen on {address}: {source}")]
    Listen {
        /// `addr:port`.
        address: String,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// The certificate cannot be made, read or served.
    #[error(transparent)]
    Tls(TlsError),
    /// The CA bundle cannot be written to the `cadump` file.
    #[error("cannot write the webhooks' CA bundle to {path} (cadump): {source}")]
    Dump {
        /// The file.
        path: String,
        /// The error writing it.
        #[source]
        source: std::io::Error,
    },
    /// The Secret that keeps the certificate cannot be read or written.
    #[error("cannot keep the webhook certificate in the Secret {secret}: {message}")]
    Secret {
        /// The Secret, as `namespace/name`.
        secret: String,
        /// What went wrong, and what to do.
        message: String,
    },
}

impl From<CertificateError> for WebhookError {
    fn from(error: CertificateError) -> Self {
        match error {
            CertificateError::Tls(error) => WebhookError::Tls(error),
            CertificateError::Secret { secret, message } => {
                WebhookError::Secret { secret, message }
            }
        }
    }
}

/// What answers the calls: the admission review.
pub(crate) type Review =
    Arc<dyn Fn(WebhookRequest) -> BoxFuture<'static, WebhookResponse> + Send + Sync>;

/// The running webhook server.
pub(crate) struct Webhooks {
    tree: Tasks,
    config: watch::Receiver<ClientConfig>,
    address: SocketAddr,
}

impl std::fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhooks")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl Webhooks {
    /// Listens, makes or reads the certificate, publishes the client config and serves (within
    /// the bounds of `serving`) with the review that `review` makes: it gets the server's own
    /// tree (with at most `max_threads` threads for sync handlers), where the reviews' work
    /// must run. The `client` reads and writes the Secret of a shared certificate (required
    /// with one), and with the API server's URL (`cluster`), detects the cluster for
    /// `WebhookServer::auto()`.
    pub(crate) async fn start(
        server: &WebhookServer,
        serving: &ServingSettings,
        max_threads: usize,
        client: Option<&kube::Client>,
        cluster: Option<&http::Uri>,
        review: impl FnOnce(Tasks) -> Review,
    ) -> Result<Webhooks, WebhookError> {
        let mut server = server.clone();
        if server.detect_host && server.host.is_none() {
            match detection::detect(client, cluster).await {
                Some(host) => {
                    tracing::info!(target: "kopf::admission", "cluster detection found the hostname: {host}");
                    server.host = Some(host.into());
                }
                None => {
                    tracing::info!(target: "kopf::admission", "cluster detection failed, running a simple local server");
                }
            }
        }
        let server = &server;
        let listener = listen(server).await?;
        let address = listener
            .local_addr()
            .map_err(|source| WebhookError::Listen {
                address: shown_address(server),
                source,
            })?;
        let (certificates, tls, ca_bundle) = if server.insecure {
            // The cluster trusts what it is told (e.g. the proxy's CA), if anything.
            let ca_bundle = match (&server.cadata, &server.cafile) {
                (Some(cadata), _) => Some(cadata.clone()),
                (None, Some(cafile)) => {
                    let pem = Pem::read(cafile).await.map_err(WebhookError::Tls)?;
                    Some(String::from_utf8_lossy(&pem.text).into_owned())
                }
                (None, None) => None,
            };
            (None, None, ca_bundle)
        } else {
            let certificates = Certificates::load(server, client).await?;
            let (served, ca_bundle) = certificates.served()?;
            (
                Some(certificates),
                Some(watch::Sender::new(served)),
                Some(ca_bundle),
            )
        };
        if let (Some(path), Some(bundle)) = (&server.cadump, &ca_bundle) {
            dump(path, bundle).await?;
        }
        let config = watch::Sender::new(server.client_config(address.port(), ca_bundle));
        let tree = Tasks::root(max_threads);
        let review = review(tree.child());
        match &config.borrow().target {
            Target::Url(url) => {
                tracing::info!(target: "kopf::admission", "serving admission webhooks at {url} (listening on {address})");
            }
            Target::Service {
                namespace, name, ..
            } => {
                tracing::info!(target: "kopf::admission", "serving admission webhooks for the service {namespace}/{name} (listening on {address})");
            }
        }
        let receiver = config.subscribe();
        let prefix: Arc<str> = server.path_prefix().into();
        let limits = Limits::of("the admission webhook server", serving);
        let respond = move |request| answer(request, prefix.clone(), review.clone());
        match (certificates, tls) {
            (Some(certificates), Some(tls)) => {
                serving::serve_tls(listener, tree.child(), limits, tls.subscribe(), respond);
                let reloading = Reloading {
                    server: server.clone(),
                    port: address.port(),
                    certificates,
                    tls,
                    config,
                };
                tree.spawn(reloading.run(tree.token().clone()));
            }
            _ => serving::serve(listener, tree.child(), limits, respond),
        }
        Ok(Webhooks {
            tree,
            config: receiver,
            address,
        })
    }

    /// The client config, now and as it changes.
    pub(crate) fn client_config(&self) -> watch::Receiver<ClientConfig> {
        self.config.clone()
    }

    /// The address listened on.
    #[cfg_attr(not(test), allow(dead_code, reason = "for tests and logs"))]
    pub(crate) fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stops accepting, lets the reviews in flight finish (within the grace period, or until
    /// `abort`), and returns when nothing of the server is left: `false` if reviews had to be
    /// aborted.
    pub(crate) async fn stop(&self, grace: Duration, abort: &CancellationToken) -> bool {
        self.tree.cancel(StopReason::OperatorExiting);
        let finished = tokio::select! {
            finished = tokio::time::timeout(grace, self.tree.wait()) => finished.is_ok(),
            _ = abort.cancelled() => false,
        };
        if !finished {
            tracing::warn!(target: "kopf::admission", "aborting the admission reviews in flight");
            self.tree.abort();
            self.tree.wait().await;
        }
        self.tree.threads().close();
        self.tree.threads().exited().await;
        finished
    }
}

/// Writes the CA bundle to the `cadump` file, without blocking the runtime.
async fn dump(path: &std::path::Path, bundle: &str) -> Result<(), WebhookError> {
    tokio::fs::write(path, bundle)
        .await
        .map_err(|source| WebhookError::Dump {
            path: path.display().to_string(),
            source,
        })
}

/// Binds the server's address: every interface (IPv6 and IPv4, or IPv4 alone where there is
/// no IPv6) when none is given; a free port when none is given.
async fn listen(server: &WebhookServer) -> Result<TcpListener, WebhookError> {
    let port = server.port.unwrap_or(0);
    let bound = match server.addr {
        Some(addr) => TcpListener::bind((addr, port)).await,
        None => match TcpListener::bind((IpAddr::V6(Ipv6Addr::UNSPECIFIED), port)).await {
            Ok(listener) => Ok(listener),
            Err(_) => TcpListener::bind((IpAddr::V4(Ipv4Addr::UNSPECIFIED), port)).await,
        },
    };
    bound.map_err(|source| WebhookError::Listen {
        address: shown_address(server),
        source,
    })
}

fn shown_address(server: &WebhookServer) -> String {
    let host = server.addr.map_or("*".to_string(), |addr| match addr {
        IpAddr::V6(v6) => format!("[{v6}]"),
        IpAddr::V4(v4) => v4.to_string(),
    });
    format!("{host}:{}", server.port.unwrap_or(0))
}

/// Answers one request: `POST <prefix>[/<handler-id>]` goes to the review; anything else is
/// an error in JSON.
async fn answer(
    request: Request<Incoming>,
    prefix: Arc<str>,
    review: Review,
) -> Response<Full<Bytes>> {
    let Some(handler_id) = handler_id(request.uri().path(), &prefix) else {
        let message = format!(
            "no webhook at {}; they are at POST {prefix}/<handler-id>",
            request.uri().path()
        );
        return respond(StatusCode::NOT_FOUND, &json!({"error": message}));
    };
    if request.method() != Method::POST {
        let message = format!("{} is not allowed; webhooks take POST", request.method());
        let mut response = respond(StatusCode::METHOD_NOT_ALLOWED, &json!({"error": message}));
        response
            .headers_mut()
            .insert(http::header::ALLOW, http::HeaderValue::from_static("POST"));
        return response;
    }
    let peer_certificate = request
        .extensions()
        .get::<PeerCertificate>()
        .map(|peer| peer.0.clone());
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            let (status, message) = if error.is::<http_body_util::LengthLimitError>() {
                (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the request is larger than {MAX_BODY} bytes"),
                )
            } else {
                (
                    StatusCode::BAD_REQUEST,
                    format!("cannot read the request: {error}"),
                )
            };
            return respond(status, &json!({"error": message}));
        }
    };
    let call = WebhookRequest {
        body,
        handler_id,
        headers: parts.headers,
        peer_certificate,
    };
    let answer = review(call).await;
    respond(answer.status, &answer.body)
}

/// The handler id of a webhook's path: `None` when the path is not under the prefix,
/// `Some(None)` for the prefix itself (every handler), `Some(Some(id))` for one handler (its
/// percent-encoding decoded).
fn handler_id(path: &str, prefix: &str) -> Option<Option<String>> {
    let rest = path.strip_prefix(prefix)?;
    match rest {
        "" | "/" => Some(None),
        rest => {
            let id = rest.strip_prefix('/')?;
            Some(Some(percent_decoded(id)))
        }
    }
}

fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&high), Some(&low)) if hex(high).is_some() && hex(low).is_some() => {
                let value = hex(high).unwrap_or(0) * 16 + hex(low).unwrap_or(0);
                decoded.push(value as u8);
                i += 3;
            }
            (byte, _, _) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

fn respond(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// Looks at the certificates again when due (the reload interval, or a renewal), and serves
/// and announces what changed.
struct Reloading {
    server: WebhookServer,
    port: u16,
    certificates: Certificates,
    tls: watch::Sender<Arc<rustls::ServerConfig>>,
    config: watch::Sender<ClientConfig>,
}

impl Reloading {
    async fn run(mut self, token: CancellationToken) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.certificates.next_look()) => {}
                _ = token.cancelled() => return,
            }
            let refreshed = tokio::select! {
                refreshed = self.certificates.refresh() => refreshed,
                _ = token.cancelled() => return,
            };
            match refreshed
                .and_then(|changed| changed.then(|| self.certificates.served()).transpose())
            {
                Ok(None) => {}
                Ok(Some((served, ca_pem))) => {
                    tracing::info!(target: "kopf::admission", "the webhook certificate changed: serving the new one");
                    self.tls.send_replace(served);
                    if let Some(path) = &self.server.cadump
                        && let Err(error) = dump(path, &ca_pem).await
                    {
                        tracing::warn!(target: "kopf::admission", %error, "the CA bundle in the cadump file is outdated");
                    }
                    let config = self.server.client_config(self.port, Some(ca_pem));
                    self.config.send_if_modified(|current| {
                        let changed = *current != config;
                        *current = config;
                        changed
                    });
                }
                Err(error) => {
                    let error = WebhookError::from(error);
                    tracing::warn!(target: "kopf::admission", %error, "cannot read the webhook certificate again; serving the previous one");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
