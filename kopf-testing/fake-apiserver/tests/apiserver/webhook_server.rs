//! A small HTTPS admission webhook for tests: its own CA and serving certificate (for
//! `127.0.0.1` and `localhost`), every review it gets recorded, and answers from a script.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

/// What the webhook answers: an HTTP status, a body, and how long it waits first (a delay,
/// and a gate that the test opens).
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: String,
    pub(crate) delay: Duration,
    pub(crate) gate: Option<Arc<Semaphore>>,
}

impl Answer {
    /// An AdmissionReview answer to `review` with `response` (its uid filled in).
    pub(crate) fn review(review: &Value, mut response: Value) -> Answer {
        response["uid"] = review["request"]["uid"].clone();
        let body = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": response,
        });
        Answer::raw(200, body.to_string())
    }

    pub(crate) fn allow(review: &Value) -> Answer {
        Answer::review(review, json!({"allowed": true}))
    }

    pub(crate) fn deny(review: &Value, message: &str, code: u16) -> Answer {
        Answer::review(
            review,
            json!({"allowed": false, "status": {"message": message, "code": code}}),
        )
    }

    /// Allows with a JSON Patch.
    pub(crate) fn patch(review: &Value, operations: Value) -> Answer {
        let patch = base64::engine::general_purpose::STANDARD.encode(operations.to_string());
        Answer::review(
            review,
            json!({"allowed": true, "patchType": "JSONPatch", "patch": patch}),
        )
    }

    pub(crate) fn raw(status: u16, body: impl Into<String>) -> Answer {
        Answer {
            status,
            body: body.into(),
            delay: Duration::ZERO,
            gate: None,
        }
    }

    pub(crate) fn after(mut self, delay: Duration) -> Answer {
        self.delay = delay;
        self
    }

    /// Answers only once `gate` has a permit (`Semaphore::add_permits`); the permit is given
    /// back, so an opened gate stays open.
    pub(crate) fn when_open(mut self, gate: &Arc<Semaphore>) -> Answer {
        self.gate = Some(gate.clone());
        self
    }
}

/// Decides the answer to a review sent to a path.
pub(crate) type Script = Arc<dyn Fn(&str, &Value) -> Answer + Send + Sync>;

/// A review as received: the path with its query, and the body.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) path: String,
    pub(crate) review: Value,
}

/// The running webhook; stops when dropped.
pub(crate) struct WebhookServer {
    pub(crate) port: u16,
    ca_pem: String,
    received: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl WebhookServer {
    /// A webhook with a CA of its own, whose certificate is the caBundle.
    pub(crate) async fn start(script: Script) -> WebhookServer {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::default();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().unwrap();
        let serving = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        let chain = vec![
            serving.der().clone(),
            CertificateDer::from(ca_cert.der().to_vec()),
        ];
        WebhookServer::serve(chain, &key, ca_cert.pem(), script).await
    }

    /// A webhook as Kopf's local servers make them: one self-signed certificate for `names`
    /// that is a CA's too, and is the caBundle.
    pub(crate) async fn self_signed(names: &[&str], script: Script) -> WebhookServer {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let certificate = params.self_signed(&key).unwrap();
        let chain = vec![certificate.der().clone()];
        WebhookServer::serve(chain, &key, certificate.pem(), script).await
    }

    async fn serve(
        chain: Vec<CertificateDer<'static>>,
        key: &KeyPair,
        ca_pem: String,
        script: Script,
    ) -> WebhookServer {
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(ring()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, PrivateKeyDer::try_from(key.serialize_der()).unwrap())
            .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let recorded = received.clone();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let (acceptor, script, recorded) =
                    (acceptor.clone(), script.clone(), recorded.clone());
                connections.spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service =
                        service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                            let (script, recorded) = (script.clone(), recorded.clone());
                            async move {
                                let path = request
                                    .uri()
                                    .path_and_query()
                                    .map(|p| p.to_string())
                                    .unwrap_or_default();
                                let body = request.into_body().collect().await?.to_bytes();
                                let review: Value =
                                    serde_json::from_slice(&body).unwrap_or(Value::Null);
                                recorded.lock().unwrap().push(Received {
                                    path: path.clone(),
                                    review: review.clone(),
                                });
                                let answer = script(&path, &review);
                                tokio::time::sleep(answer.delay).await;
                                if let Some(gate) = &answer.gate {
                                    drop(gate.acquire().await);
                                }
                                let mut response =
                                    hyper::Response::new(Full::new(Bytes::from(answer.body)));
                                *response.status_mut() =
                                    http::StatusCode::from_u16(answer.status).unwrap();
                                response.headers_mut().insert(
                                    http::header::CONTENT_TYPE,
                                    http::HeaderValue::from_static("application/json"),
                                );
                                Ok::<_, hyper::Error>(response)
                            }
                        });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        WebhookServer {
            port,
            ca_pem,
            received,
            task,
        }
    }

    /// The `clientConfig` for a path of this webhook.
    pub(crate) fn client_config(&self, path: &str) -> Value {
        json!({
            "url": format!("https://127.0.0.1:{}{path}", self.port),
            "caBundle": base64::engine::general_purpose::STANDARD.encode(&self.ca_pem),
        })
    }

    /// The reviews received so far at paths starting with `prefix`.
    pub(crate) fn received(&self, prefix: &str) -> Vec<Received> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path.starts_with(prefix))
            .cloned()
            .collect()
    }
}

/// Ring's crypto provider, which kube-rs builds with.
#[allow(
    deprecated,
    reason = "rustls 0.23.48 deprecates it only for lacking post-quantum key exchange, which \
              calls on 127.0.0.1 do not need"
)]
fn ring() -> rustls::crypto::CryptoProvider {
    rustls::crypto::ring::default_provider()
}
