//! The operator's own HTTP endpoints (the liveness probe, the metrics) and its HTTPS ones (the
//! admission webhooks): their URLs, and one listener with its connections, served as tasks of
//! one node of the operator's tree.
//!
//! Invariants:
//! 1. When the node is cancelled, the listener is closed and every connection ends after its
//!    response in flight (idle keep-alive connections and unfinished handshakes at once), so
//!    nothing of an endpoint outlives the operator's `run()`.
//! 2. Over TLS, each connection's handshake uses the configuration current when it was
//!    accepted: a new certificate serves new connections at once, on the same port.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::aiokits::tasks::Tasks;

/// The parts of an `http://host[:port][/path]` URL that an endpoint is served at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpUrl {
    /// Without the brackets of an IPv6 address.
    pub(crate) host: String,
    pub(crate) port: Option<u16>,
    /// `/` when the URL has none.
    pub(crate) path: String,
}

impl HttpUrl {
    /// Parses a plain-HTTP URL; the error says what is wrong with it.
    pub(crate) fn parse(url: &str) -> Result<HttpUrl, &'static str> {
        let uri: http::Uri = url.parse().map_err(|_| "not a URL")?;
        match uri.scheme_str() {
            Some("http") => {}
            Some(_) => return Err("only http:// is served (no TLS, as Kopf)"),
            None => return Err("the scheme is missing"),
        }
        let host = uri.host().unwrap_or_default();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if host.is_empty() {
            return Err("the host is missing");
        }
        Ok(HttpUrl {
            host: host.to_string(),
            port: uri.port_u16(),
            path: uri.path().to_string(),
        })
    }
}

/// How long a client has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The certificate a client presented in its TLS handshake (DER), in the extensions of its
/// requests when it presented one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PeerCertificate(pub(crate) Vec<u8>);

/// Serves the listener's connections with `respond`, each in a task of `node`, until the node
/// is cancelled.
pub(crate) fn serve<F, Fut>(listener: TcpListener, node: Tasks, respond: F)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    accept(listener, node, None, respond);
}

/// Serves the listener's connections over TLS with the newest configuration that `tls`
/// holds, as [`serve`] does; requests carry the client's [`PeerCertificate`] if it sent one.
pub(crate) fn serve_tls<F, Fut>(
    listener: TcpListener,
    node: Tasks,
    tls: watch::Receiver<Arc<rustls::ServerConfig>>,
    respond: F,
) where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    accept(listener, node, Some(tls), respond);
}

fn accept<F, Fut>(
    listener: TcpListener,
    node: Tasks,
    tls: Option<watch::Receiver<Arc<rustls::ServerConfig>>>,
    respond: F,
) where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let accepting = node.clone();
    accepting.spawn(async move {
        let token = node.token().clone();
        loop {
            let stream = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        // E.g. out of file descriptors: wait rather than spin.
                        tracing::warn!(target: "kopf::serving", %error, "cannot accept a connection");
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_millis(100)) => continue,
                            _ = token.cancelled() => break,
                        }
                    }
                },
                _ = token.cancelled() => break,
            };
            let respond = respond.clone();
            let token = token.clone();
            let Some(tls) = &tls else {
                node.spawn(connection(stream, None, token, respond));
                continue;
            };
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.borrow().clone());
            node.spawn(async move {
                let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream));
                let stream = tokio::select! {
                    shaken = handshake => match shaken {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(error)) => {
                            tracing::debug!(target: "kopf::serving", %error, "a TLS handshake failed");
                            return;
                        }
                        Err(_) => return,
                    },
                    _ = token.cancelled() => return,
                };
                let peer = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|chain| chain.first())
                    .map(|der| PeerCertificate(der.to_vec()));
                connection(stream, peer, token, respond).await;
            });
        }
    });
}

/// Serves one connection until it ends, or until the token asks (after the response in
/// flight).
async fn connection<S, F, Fut>(
    stream: S,
    peer: Option<PeerCertificate>,
    token: CancellationToken,
    respond: F,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let service = service_fn(move |mut request: Request<Incoming>| {
        if let Some(peer) = &peer {
            request.extensions_mut().insert(peer.clone());
        }
        let answer = respond(request);
        async move { Ok::<_, Infallible>(answer.await) }
    });
    let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        _ = token.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_host_port_and_path() {
        let url = HttpUrl::parse("http://[::1]:8080/healthz").unwrap();
        assert_eq!(
            (url.host.as_str(), url.port, url.path.as_str()),
            ("::1", Some(8080), "/healthz")
        );
        let url = HttpUrl::parse("http://0.0.0.0").unwrap();
        assert_eq!((url.port, url.path.as_str()), (None, "/"));
        assert!(HttpUrl::parse("https://0.0.0.0:1/").is_err());
        assert!(HttpUrl::parse("0.0.0.0:1").is_err());
    }
}
