//! Listening: the accept loop and one task per connection, each ended by the server's stop or a
//! restart.

use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::apiserver::endpoints::control::{Counters, lock};
use crate::apiserver::endpoints::router;
use crate::apiserver::endpoints::shared::Shared;

pub(crate) async fn accept(
    listener: TcpListener,
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
                tracker.spawn(serve_connection(stream, shared.clone(), token));
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
    stream: tokio::net::TcpStream,
    shared: Arc<Shared>,
    token: CancellationToken,
) {
    let _open = Counters::gauge(&shared.counters.open_connections);
    let service_shared = shared.clone();
    let service = service_fn(move |request| router::handle(service_shared.clone(), request));
    let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        result = connection => {
            if let Err(error) = result {
                tracing::debug!(%error, "connection ended with an error");
            }
        }
        _ = token.cancelled() => {}
    }
}
