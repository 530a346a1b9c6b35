//! The operator's own HTTP endpoints (the liveness probe, the metrics) and its HTTPS ones (the
//! admission webhooks): their URLs, and one listener with its connections, served as tasks of
//! one node of the operator's tree, within the bounds of `settings.serving`
//! ([`ServingSettings`]).
//!
//! Invariants:
//! 1. When the node is cancelled, the listener is closed and every connection ends after its
//!    response in flight (those waiting for a request, however slowly it comes, and
//!    unfinished handshakes at once), so nothing of an endpoint outlives the operator's
//!    `run()`.
//! 2. Over TLS, each connection's handshake uses the configuration current when it was
//!    accepted: a new certificate serves new connections at once, on the same port.
//! 3. No client holds a connection for long without sending: the handshake and each
//!    request's head have the header timeout (so does an idle keep-alive connection), a
//!    request's body and answer the request timeout, and a write that the client does not
//!    read fails after as long.
//! 4. At most `max_connections` are open ([`Slots`]); the accept loop never waits for room.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::aiokits::slots::{Busy, Slot, Slots};
use crate::aiokits::tasks::Tasks;
use crate::configs::settings::ServingSettings;

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

/// The certificate a client presented in its TLS handshake (DER), in the extensions of its
/// requests when it presented one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PeerCertificate(pub(crate) Vec<u8>);

/// What one server is, for logs, and the bounds of its clients.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// The server, for logs: `the liveness endpoint`.
    pub(crate) name: &'static str,
    pub(crate) header_timeout: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) max_connections: usize,
}

impl Limits {
    /// The settings' bounds for the server `name`.
    pub(crate) fn of(name: &'static str, settings: &ServingSettings) -> Limits {
        Limits {
            name,
            header_timeout: settings.header_timeout,
            request_timeout: settings.request_timeout,
            max_connections: settings.max_connections,
        }
    }
}

/// Serves the listener's connections with `respond`, each in a task of `node`, until the node
/// is cancelled.
pub(crate) fn serve<F, Fut>(listener: TcpListener, node: Tasks, limits: Limits, respond: F)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    accept(listener, node, limits, None, respond);
}

/// Serves the listener's connections over TLS with the newest configuration that `tls`
/// holds, as [`serve`] does; requests carry the client's [`PeerCertificate`] if it sent one.
pub(crate) fn serve_tls<F, Fut>(
    listener: TcpListener,
    node: Tasks,
    limits: Limits,
    tls: watch::Receiver<Arc<rustls::ServerConfig>>,
    respond: F,
) where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    accept(listener, node, limits, Some(tls), respond);
}

fn accept<F, Fut>(
    listener: TcpListener,
    node: Tasks,
    limits: Limits,
    tls: Option<watch::Receiver<Arc<rustls::ServerConfig>>>,
    respond: F,
) where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let accepting = node.clone();
    let slots = Slots::new(limits.name, limits.max_connections);
    let limits = Arc::new(limits);
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
            // No room, every connection busy: closed at once (dropped).
            let Some(slot) = slots.admit() else {
                continue;
            };
            let stream = Bounded::new(stream, limits.request_timeout);
            let (respond, token, limits) = (respond.clone(), token.clone(), limits.clone());
            let Some(tls) = &tls else {
                node.spawn(connection(stream, None, slot, limits, token, respond));
                continue;
            };
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.borrow().clone());
            node.spawn(async move {
                let handshake =
                    tokio::time::timeout(limits.header_timeout, acceptor.accept(stream));
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
                    _ = slot.taken().cancelled() => return,
                };
                let peer = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|chain| chain.first())
                    .map(|der| PeerCertificate(der.to_vec()));
                connection(stream, peer, slot, limits, token, respond).await;
            });
        }
    });
}

/// Serves one connection until it ends, its place is taken, or the token asks (after the
/// response in flight).
async fn connection<S, F, Fut>(
    stream: S,
    peer: Option<PeerCertificate>,
    slot: Slot,
    limits: Arc<Limits>,
    token: CancellationToken,
    respond: F,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let slot = Arc::new(slot);
    let (taken, ours) = (slot.taken().clone(), slot.clone());
    let request_timeout = limits.request_timeout;
    let service = service_fn(move |mut request: Request<Incoming>| {
        let busy = ours.busy();
        if let Some(peer) = &peer {
            request.extensions_mut().insert(peer.clone());
        }
        let answer = tokio::time::timeout(request_timeout, respond(request));
        async move {
            let response = answer.await.unwrap_or_else(|_| too_slow(request_timeout));
            // Busy until the answer is written: its place is not taken meanwhile.
            Ok::<_, Infallible>(response.map(|body| Written { body, _busy: busy }))
        }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        _ = taken.cancelled() => {}
        // Closed at once while it waits for a request (however slowly it comes); else
        // after the response in flight.
        _ = token.cancelled() => if !slot.is_waiting() {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}

/// The answer to a request not answered within the request timeout (its body came too
/// slowly, or its handlers took too long): the connection closes after it.
fn too_slow(timeout: Duration) -> Response<Full<Bytes>> {
    let message = format!(
        "the request was not answered within {timeout:?} (settings.serving.request_timeout)"
    );
    let body = serde_json::json!({ "error": message }).to_string();
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    headers.insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    response
}

/// An answer's body that keeps its connection's slot busy until it is written (dropped by
/// hyper); its size is its body's, so a whole answer still goes with a `Content-Length`.
struct Written<B> {
    body: B,
    _busy: Busy,
}

impl<B: hyper::body::Body + Unpin> hyper::body::Body for Written<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// A connection's stream whose writes fail once they have made no progress for `stall`: a
/// client that does not read its answers cannot hold the connection.
struct Bounded<S> {
    inner: S,
    stall: Duration,
    /// Since the first write that could not proceed.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> Bounded<S> {
    fn new(inner: S, stall: Duration) -> Bounded<S> {
        Bounded {
            inner,
            stall,
            stalled: None,
        }
    }

    /// After a write that could not proceed: fails once it has not for `stall`.
    fn pending<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let stall = self.stall;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(stall)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {stall:?}"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progressed<T>(
        &mut self,
        written: Poll<io::Result<T>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        match written {
            Poll::Pending => self.pending(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Bounded<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Bounded<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.progressed(written, cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.progressed(written, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let flushed = Pin::new(&mut this.inner).poll_flush(cx);
        this.progressed(flushed, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let shut = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.progressed(shut, cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client that does not read its answer holds the connection no longer than the stall
    /// allows: the write fails, and the connection ends.
    #[tokio::test(start_paused = true)]
    async fn a_write_that_nobody_reads_fails_after_the_stall() {
        use tokio::io::AsyncWriteExt as _;
        let (ours, _theirs) = tokio::io::duplex(64);
        let mut bounded = Bounded::new(ours, Duration::from_secs(30));
        let started = tokio::time::Instant::now();
        let error = bounded
            .write_all(&[0; 4096])
            .await
            .expect_err("nobody reads");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn writes_that_progress_never_stall() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut bounded = Bounded::new(ours, Duration::from_secs(1));
        let reading = tokio::spawn(async move {
            let mut all = Vec::new();
            let mut chunk = [0; 16];
            loop {
                // Slower than the stall in total, never within one write.
                tokio::time::sleep(Duration::from_millis(500)).await;
                match theirs.read(&mut chunk).await {
                    Ok(0) | Err(_) => return all,
                    Ok(n) => all.extend_from_slice(&chunk[..n]),
                }
            }
        });
        bounded.write_all(&[7; 256]).await.expect("read in time");
        bounded.shutdown().await.expect("closed");
        drop(bounded);
        assert_eq!(reading.await.unwrap(), vec![7; 256]);
    }

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
