//! The metrics endpoint: the operator's Prometheus series in the OpenMetrics text format at the
//! URL of [`Operator::metrics`](crate::operator::Operator::metrics) (`--metrics URL`). Off by
//! default.
//!
//! The endpoint is a node of the operator's task tree: it listens from the start of
//! [`Operator::run`](crate::operator::Operator::run) until its end.

use std::net::SocketAddr;
use std::sync::Arc;

use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::aiokits::metrics::Metrics;
use crate::aiokits::serving::{self, HttpUrl, Limits};
use crate::aiokits::tasks::Tasks;
use crate::configs::settings::ServingSettings;

/// Why the metrics endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The URL is not `http://HOST:PORT/PATH`.
    #[error(
        "invalid metrics URL {url:?}: {reason} (expected http://HOST:PORT/PATH, e.g. http://0.0.0.0:9090/metrics)"
    )]
    Url {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The address cannot be listened on.
    #[error("cannot listen for metrics on {address}: {source}")]
    Listen {
        /// `host:port`.
        address: String,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
}

/// Where the metrics are served, once they are: see
/// [`Operator::metrics_endpoint`](crate::operator::Operator::metrics_endpoint).
#[derive(Debug, Clone)]
pub struct MetricsEndpoint(pub(crate) watch::Receiver<Option<String>>);

impl MetricsEndpoint {
    /// The URL the endpoint listens on, with the real port (useful with port 0). Waits until
    /// it listens; never returns if the operator serves no metrics or stops before.
    pub async fn url(&self) -> String {
        let mut receiver = self.0.clone();
        match receiver.wait_for(Option::is_some).await {
            Ok(url) => url.clone().unwrap_or_default(),
            Err(_) => std::future::pending().await,
        }
    }
}

/// A parsed `--metrics` URL: where to listen and the path to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MetricsUrl {
    host: String,
    port: u16,
    path: String,
}

impl MetricsUrl {
    pub(crate) fn parse(url: &str) -> Result<MetricsUrl, MetricsError> {
        let invalid = |reason: &str| MetricsError::Url {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let parsed = HttpUrl::parse(url).map_err(invalid)?;
        let port = parsed.port.ok_or_else(|| invalid("the port is missing"))?;
        let path = match parsed.path.as_str() {
            "" | "/" => "/metrics".to_string(),
            path => path.to_string(),
        };
        Ok(MetricsUrl {
            host: parsed.host,
            port,
            path,
        })
    }
}

/// Checks a `--metrics` URL (for the command line): the URL itself, or what is wrong with it.
pub(crate) fn check_url(url: &str) -> Result<String, MetricsError> {
    MetricsUrl::parse(url).map(|_| url.to_string())
}

/// Listens at the URL and serves the metrics there (within the bounds of `serving`) until
/// the node is cancelled; `endpoint` learns the URL with the real port once it listens.
pub(crate) async fn serve(
    metrics: Metrics,
    url: &MetricsUrl,
    serving: &ServingSettings,
    tasks: &Tasks,
    endpoint: &watch::Sender<Option<String>>,
) -> Result<(), MetricsError> {
    let listener = TcpListener::bind((url.host.as_str(), url.port))
        .await
        .map_err(|source| MetricsError::Listen {
            address: format!("{}:{}", url.host, url.port),
            source,
        })?;
    let address = listener
        .local_addr()
        .map_err(|source| MetricsError::Listen {
            address: format!("{}:{}", url.host, url.port),
            source,
        })?;
    let shown = match address {
        SocketAddr::V6(v6) => format!("[{}]:{}", v6.ip(), v6.port()),
        SocketAddr::V4(v4) => v4.to_string(),
    };
    tracing::info!(target: "kopf::metrics", "serving metrics at http://{shown}{}", url.path);
    endpoint.send_replace(Some(format!("http://{shown}{}", url.path)));
    let path: Arc<str> = url.path.as_str().into();
    let limits = Limits::of("the metrics endpoint", serving);
    serving::serve(listener, tasks.child(), limits, move |request| {
        let answer = answer(&metrics, &path, &request);
        async move { answer }
    });
    Ok(())
}

fn answer(metrics: &Metrics, path: &str, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let (status, content_type, body) = if request.uri().path() != path {
        (
            StatusCode::NOT_FOUND,
            "text/plain",
            format!("not found; the metrics are at {path}\n"),
        )
    } else if request.method() != Method::GET && request.method() != Method::HEAD {
        (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET\n".to_string(),
        )
    } else {
        (
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.encode(),
        )
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = http::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_urls() {
        let url = MetricsUrl::parse("http://0.0.0.0:9090/metrics").unwrap();
        assert_eq!(
            (url.host.as_str(), url.port, url.path.as_str()),
            ("0.0.0.0", 9090, "/metrics")
        );
        let url = MetricsUrl::parse("http://[::1]:0").unwrap();
        assert_eq!((url.host.as_str(), url.path.as_str()), ("::1", "/metrics"));
        for bad in [
            "https://0.0.0.0:9090/",
            "0.0.0.0:9090",
            "http://localhost/metrics",
            "::",
        ] {
            let error = MetricsUrl::parse(bad).unwrap_err().to_string();
            assert!(
                error.contains("expected http://HOST:PORT/PATH"),
                "{bad}: {error}"
            );
        }
    }
}
