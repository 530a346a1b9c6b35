//! The liveness endpoint (Kopf's `--liveness`): an HTTP server that answers with the probe
//! handlers' results, plus a readiness check.
//!
//! - `GET <path>` of the URL runs the [probe handlers](crate::registry::ActivityHandler::on_probe)
//!   and answers 200 with `{"probe_id": result, ...}` (`null` for a probe that returns nothing),
//!   or 500 with `{"error": ...}` when one fails. As Kopf, results are kept for 10 seconds,
//!   and probes run one run at a time: requests meanwhile wait for that run's results.
//! - `GET /readyz` (beyond Kopf) answers 200 `{"ready": true}` once the operator has listed
//!   every resource it serves and its managed webhook configurations are in place, 503
//!   `{"ready": false}` before; unless the liveness path is
//!   `/readyz` itself. A replica paused in favour of a peer or of a Lease leader is ready too
//!   (`{"ready": true, "paused": true}`): it stands by as it should, and a Deployment of
//!   several replicas must not wait for it to lead (as controller-runtime's standbys).
//!
//! Invariants:
//! 1. The server and its connections are tasks of one node of the operator's tree
//!    ([`serving`](crate::aiokits::serving)).
//! 2. The probe cache's lock is held while the probes run, so that they run one at a time.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use serde_json::{Map, Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::aiokits::serving::{self, HttpUrl, Limits};
use crate::aiokits::tasks::Tasks;
use crate::configs::settings::ServingSettings;
use crate::engines::activities::Activities;
use crate::engines::pausing::Pause;

/// How long probe results are kept (Kopf: 10 s).
const CACHE_TIME: Duration = Duration::from_secs(10);

/// The readiness path, next to the liveness path.
const READINESS_PATH: &str = "/readyz";

/// Where the endpoint is served: the parts of an `http://host:port/path` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    host: String,
    port: u16,
    path: String,
}

impl Endpoint {
    /// Parses `http://host[:port][/path]` (port 80 and path `/` by default, as Kopf).
    pub(crate) fn parse(url: &str) -> Result<Endpoint, String> {
        let url = HttpUrl::parse(url).map_err(|reason| {
            format!("{reason}; expected an HTTP URL such as http://0.0.0.0:8080/healthz")
        })?;
        Ok(Endpoint {
            host: url.host,
            port: url.port.unwrap_or(80),
            path: url.path,
        })
    }
}

/// Checks a `--liveness` URL (for the command line).
pub(crate) fn check_url(url: &str) -> Result<String, String> {
    Endpoint::parse(url).map(|_| url.to_string())
}

/// Why the liveness endpoint cannot be served: a bad URL, or its address cannot be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot serve the liveness endpoint {url}: {message}")]
pub(crate) struct LivenessError {
    pub(crate) url: String,
    pub(crate) message: String,
}

/// Binds the endpoint's address and serves it (within the bounds of `serving`) in a node of
/// `tasks` until the tree stops; `ready` tells whether the operator has listed what it
/// serves, and `standby` (once set) whether it is paused (for `/readyz`).
pub(crate) async fn serve(
    url: &str,
    serving: &ServingSettings,
    activities: &Activities,
    ready: watch::Receiver<bool>,
    standby: Standby,
    tasks: &Tasks,
) -> Result<(), LivenessError> {
    let failed = |message: String| LivenessError {
        url: url.to_string(),
        message,
    };
    let endpoint = Endpoint::parse(url).map_err(failed)?;
    let listener = TcpListener::bind((endpoint.host.as_str(), endpoint.port))
        .await
        .map_err(|error| {
            failed(format!(
                "cannot listen on {}:{}: {error}",
                endpoint.host, endpoint.port
            ))
        })?;
    tracing::info!(target: "kopf::probing", "serving the liveness endpoint at {url}");
    let node = tasks.child();
    let server = Arc::new(Server {
        path: endpoint.path,
        probes: activities.clone(),
        cache: tokio::sync::Mutex::new(None),
        ready,
        standby,
        node: node.clone(),
    });
    let limits = Limits::of("the liveness endpoint", serving);
    serving::serve(listener, node, limits, move |request| {
        let server = server.clone();
        async move { server.respond(request).await }
    });
    Ok(())
}

/// What every connection shares.
struct Server {
    path: String,
    probes: Activities,
    /// The last results and when they were made.
    cache: tokio::sync::Mutex<Option<(Instant, Map<String, Value>)>>,
    ready: watch::Receiver<bool>,
    standby: Standby,
    node: Tasks,
}

/// The operator's pause, once peering and leadership have started (the endpoint is served
/// before): a paused replica is ready.
pub(crate) type Standby = Arc<OnceLock<Pause>>;

impl Server {
    async fn respond(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        if request.method() != Method::GET && request.method() != Method::HEAD {
            return answer(
                StatusCode::METHOD_NOT_ALLOWED,
                &json!({"error": "only GET is served"}),
            );
        }
        let path = request.uri().path();
        if path == self.path {
            match self.probe().await {
                Ok(results) => answer(StatusCode::OK, &Value::Object(results)),
                Err(message) => answer(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &json!({"error": message}),
                ),
            }
        } else if path == READINESS_PATH {
            let paused = self.standby.get().is_some_and(Pause::is_paused);
            let ready = paused || *self.ready.borrow();
            let status = if ready {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            let body = if paused {
                json!({"ready": ready, "paused": true})
            } else {
                json!({"ready": ready})
            };
            answer(status, &body)
        } else {
            answer(
                StatusCode::NOT_FOUND,
                &json!({"error": format!("not found; the liveness endpoint is {} and the readiness endpoint {READINESS_PATH}", self.path)}),
            )
        }
    }

    /// The probes' results: fresh ones if the last are older than [`CACHE_TIME`]. A failure
    /// is not kept, so the next request runs the probes again.
    async fn probe(&self) -> Result<Map<String, Value>, String> {
        let mut cache = self.cache.lock().await;
        if let Some((made, results)) = &*cache
            && made.elapsed() < CACHE_TIME
        {
            return Ok(results.clone());
        }
        match self.probes.probe(&self.node).await {
            Ok(results) => {
                *cache = Some((Instant::now(), results.clone()));
                Ok(results)
            }
            Err(failed) => Err(format!(
                "the probe handler {} failed: {}",
                failed.handler, failed.message
            )),
        }
    }
}

fn answer(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_as_kopf_reads_them() {
        let endpoint = Endpoint::parse("http://0.0.0.0:8080/healthz").unwrap();
        assert_eq!(
            endpoint,
            Endpoint {
                host: "0.0.0.0".into(),
                port: 8080,
                path: "/healthz".into()
            }
        );
        let defaults = Endpoint::parse("http://localhost").unwrap();
        assert_eq!((defaults.port, defaults.path.as_str()), (80, "/"));
        let v6 = Endpoint::parse("http://[::1]:9000/live").unwrap();
        assert_eq!(v6.host, "::1");
        for bad in [
            "https://0.0.0.0:8080/",
            "http://:8080/",
            "0.0.0.0:8080",
            "x y",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }
}
