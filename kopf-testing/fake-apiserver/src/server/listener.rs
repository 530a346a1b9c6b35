//! Listening: the accept loop and one task per connection (its TLS handshake first, when the
//! server serves TLS), each ended by the server's stop or a restart.

use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::tls::Tls;
use crate::endpoints::control::{Counters, lock};
use crate::endpoints::router;
use crate::endpoints::shared::Shared;

pub(crate) async fn accept(
    listener: TcpListener,
    tls: Option<Tls>,
    shared: Arc<Shared>,
    tracker: TaskTracker,
    root: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            _ = root.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                let token = lock(&shared.connections).clone();
                tracker.spawn(serve_connection(stream, tls.clone(), shared.clone(), token));
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
    token: CancellationToken,
) {
    let _open = Counters::gauge(&shared.counters.open_connections);
    let serving = async {
        match tls {
            None => serve_http(stream, shared.clone()).await,
            Some(tls) => {
                if let Some(stream) = tls.handshake(stream).await {
                    serve_http(stream, shared.clone()).await;
                }
            }
        }
    };
    tokio::select! {
        _ = serving => {}
        _ = token.cancelled() => {}
    }
}

async fn serve_http<S>(stream: S, shared: Arc<Shared>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| router::handle(shared.clone(), request));
    let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    if let Err(error) = connection.await {
        tracing::debug!(%error, "connection ended with an error");
    }
}
