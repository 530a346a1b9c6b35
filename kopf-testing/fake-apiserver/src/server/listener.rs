//! Listening: the accept loop and one task per connection (its TLS handshake first, when the
//! server serves TLS), each ended by the server's stop or a restart.
//!
//! No client holds a connection for long without sending (as kube-apiserver's
//! `ReadHeaderTimeout`): the TLS handshake and each request's head (an idle keep-alive too)
//! have the header timeout, a request's body the body timeout (in the router). At most
//! `max_connections` are open ([`Slots`]); the accept loop never waits for room.

use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::slots::{Busy, Slot, Slots};
use super::tls::Tls;
use crate::endpoints::control::{Counters, lock};
use crate::endpoints::reply::Cut;
use crate::endpoints::router;
use crate::endpoints::shared::Shared;

/// The bounds of the server's clients.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) header_timeout: Duration,
    pub(crate) max_connections: usize,
}

pub(crate) async fn accept(
    listener: TcpListener,
    tls: Option<Tls>,
    shared: Arc<Shared>,
    limits: Limits,
    tracker: TaskTracker,
    root: CancellationToken,
) {
    let slots = Slots::new(limits.max_connections);
    loop {
        let accepted = tokio::select! {
            _ = root.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                // No room, every connection busy: closed at once (dropped).
                let Some(slot) = slots.admit() else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let token = lock(&shared.connections).clone();
                let connection =
                    serve_connection(stream, tls.clone(), shared.clone(), slot, limits);
                tracker.spawn(async move {
                    tokio::select! {
                        _ = connection => {}
                        _ = token.cancelled() => {}
                    }
                });
            }
            Err(error) => {
                tracing::warn!(%error, "accepting a connection failed");
                tokio::select! {
                    _ = root.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
            }
        }
    }
}

async fn serve_connection(
    stream: TcpStream,
    tls: Option<Tls>,
    shared: Arc<Shared>,
    slot: Slot,
    limits: Limits,
) {
    let _open = Counters::gauge(&shared.counters.open_connections);
    let taken = slot.taken().clone();
    let serving = async {
        match tls {
            None => serve_http(stream, shared.clone(), slot, limits).await,
            Some(tls) => {
                let handshake = tokio::time::timeout(limits.header_timeout, tls.handshake(stream));
                if let Ok(Some(stream)) = handshake.await {
                    serve_http(stream, shared.clone(), slot, limits).await;
                }
            }
        }
    };
    tokio::select! {
        _ = serving => {}
        _ = taken.cancelled() => {}
    }
}

async fn serve_http<S>(stream: S, shared: Arc<Shared>, slot: Slot, limits: Limits)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let slot = Arc::new(slot);
    let service = service_fn(move |request| {
        // Busy until the answer's body is done: a watch keeps its place while it streams.
        let busy = slot.busy();
        let handled = router::handle(shared.clone(), request);
        async move {
            let response = handled.await?;
            Ok::<_, Cut>(response.map(|body| Written { body, _busy: busy }))
        }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .serve_connection(TokioIo::new(stream), service);
    if let Err(error) = connection.await {
        tracing::debug!(%error, "connection ended with an error");
    }
}

/// An answer's body that keeps its connection's slot busy until it is written or, for a
/// watch, until it ends; its size is its body's, so a whole answer still goes with a
/// `Content-Length`.
struct Written<B> {
    body: B,
    _busy: Busy,
}

impl<B: hyper::body::Body + Unpin> hyper::body::Body for Written<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<B::Data>, B::Error>>> {
        std::pin::Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}
