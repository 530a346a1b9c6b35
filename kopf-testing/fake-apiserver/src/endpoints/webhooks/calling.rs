//! One call of an admission webhook: the `AdmissionReview` POSTed as JSON over HTTPS to the
//! webhook's URL with `?timeout=<N>s`, trusting exactly its `caBundle` (or, without one, the
//! system's roots, found where Go's TLS finds them on Linux), the name checked against the
//! certificate's SANs, HTTP/1.1, one connection per call, within the webhook's timeout.
//!
//! A `service` reference cannot be called: the fake server has no cluster network behind its
//! Services, so such a webhook fails to be called (and its `failurePolicy` decides); give it
//! a `url` instead (`https://127.0.0.1:<port>/...`, as Kopf's local servers do).
//!
//! The call is a plain future awaited within the request that needs it: it spawns nothing,
//! and dropping it (the client went away, the server stops) drops its connection.

use std::net::IpAddr;
use std::pin::pin;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::semantics::webhooks::{Endpoint, Webhook};

/// The largest answer read from a webhook (kube-apiserver's limit on response bodies).
const MAX_ANSWER: usize = 3 * 1024 * 1024;

/// Where the system's trusted roots are on Linux, in the order Go's `crypto/x509` looks.
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// Calls `webhook` with `review`; the answer's body, or why there is none (the cause in
/// `failed calling webhook "<name>": <cause>`).
///
/// # Cancellation safety
///
/// Cancel-safe: dropping it closes the connection; nothing else is left.
pub(crate) async fn call(webhook: &Webhook, review: &serde_json::Value) -> Result<Bytes, String> {
    let url = match &webhook.endpoint {
        Endpoint::Url(url) => url.clone(),
        Endpoint::Service {
            namespace, name, ..
        } => {
            return Err(format!(
                "failed to call webhook: service \"{namespace}/{name}\" is not reachable: the fake API server runs no cluster network; give the webhook a clientConfig.url instead"
            ));
        }
    };
    let seconds = webhook.timeout.as_secs().max(1);
    let separator = if url.contains('?') { '&' } else { '?' };
    let full_url = format!("{url}{separator}timeout={seconds}s");
    let post = |why: String| format!("failed to call webhook: Post \"{full_url}\": {why}");
    let body = serde_json::to_vec(review).map_err(|e| post(e.to_string()))?;
    let exchange = exchange(webhook, &full_url, body);
    match tokio::time::timeout(webhook.timeout, exchange).await {
        Ok(Ok((StatusCode::OK, answer))) => Ok(answer),
        Ok(Ok((status, answer))) => Err(format!(
            "failed to call webhook: the server responded with the status code {} ({}): {}",
            status.as_u16(),
            status.canonical_reason().unwrap_or("unknown"),
            String::from_utf8_lossy(&answer[..answer.len().min(1024)]).trim()
        )),
        Ok(Err(why)) => Err(post(why)),
        Err(_) => Err(post(
            "context deadline exceeded (Client.Timeout exceeded while awaiting headers)".into(),
        )),
    }
}

/// Connects, shakes hands, POSTs `body` and reads the answer.
async fn exchange(
    webhook: &Webhook,
    url: &str,
    body: Vec<u8>,
) -> Result<(StatusCode, Bytes), String> {
    let uri: Uri = url.parse().map_err(|e| format!("invalid URL: {e}"))?;
    if uri.scheme_str() != Some("https") {
        return Err(format!(
            "unsupported protocol scheme {:?}: webhooks are called over https only",
            uri.scheme_str().unwrap_or_default()
        ));
    }
    let host = uri.host().ok_or("the URL has no host")?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(443);
    let connector = TlsConnector::from(Arc::new(tls_config(webhook).await?));
    let server_name = match host.parse::<IpAddr>() {
        Ok(ip) => ServerName::IpAddress(ip.into()),
        Err(_) => ServerName::try_from(host.clone()).map_err(|e| format!("invalid host: {e}"))?,
    };
    let tcp = TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("dial tcp {host}:{port}: {}", go_dial_error(&e)))?;
    let tls = connector
        .connect(server_name, tcp)
        .await
        .map_err(|e| format!("tls: {e}"))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    let path = uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let request = Request::builder()
        .method(Method::POST)
        .uri(path)
        .header(
            header::HOST,
            uri.authority().map(|a| a.as_str()).unwrap_or(&host),
        )
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, */*")
        .header(header::USER_AGENT, "kube-apiserver-admission")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let answer = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| format!("reading the answer: {e}"))?
            .to_bytes();
        Ok::<_, String>((status, body))
    };
    // The connection is driven here, beside the exchange, rather than spawned.
    let mut answer = pin!(answer);
    let mut connection = pin!(connection);
    tokio::select! {
        result = &mut answer => result,
        ended = &mut connection => match ended {
            Ok(()) => answer.await,
            Err(e) => Err(e.to_string()),
        },
    }
}

/// A failed connection as Go's `net` package words it (`connect: connection refused`).
fn go_dial_error(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".into(),
        std::io::ErrorKind::TimedOut => "i/o timeout".into(),
        _ => error.to_string(),
    }
}

/// TLS that trusts exactly the webhook's `caBundle`, or the system's roots without one.
async fn tls_config(webhook: &Webhook) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    let bundle = match &webhook.ca_bundle {
        Some(bundle) => bundle.clone(),
        None => system_roots().await,
    };
    let mut trusted = Vec::new();
    for certificate in CertificateDer::pem_slice_iter(&bundle) {
        let certificate = certificate.map_err(|e| format!("the caBundle is not PEM: {e}"))?;
        trusted.push(certificate.clone());
        roots
            .add(certificate)
            .map_err(|e| format!("the caBundle holds an unusable certificate: {e}"))?;
    }
    if webhook.ca_bundle.is_some() && roots.is_empty() {
        return Err("the caBundle holds no certificate".into());
    }
    #[allow(
        deprecated,
        reason = "ring is the provider kube-rs builds with; rustls 0.23.48 deprecates it only \
                  for lacking post-quantum key exchange, which calls on 127.0.0.1 do not need"
    )]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| format!("configuring TLS failed: {e}"))?;
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("configuring TLS failed: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AsGoVerifies { verifier, trusted }))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Checks a webhook's certificate as Go's TLS (kube-apiserver's) does: as rustls does, except
/// that a certificate that is itself in the trusted bundle is its own chain, even when it is a
/// CA's (Kopf's self-signed serving certificate is both, and is given as the caBundle); its
/// names are still checked.
#[derive(Debug)]
struct AsGoVerifies {
    verifier: Arc<WebPkiServerVerifier>,
    trusted: Vec<CertificateDer<'static>>,
}

impl ServerCertVerifier for AsGoVerifies {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified = self.verifier.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        );
        match verified {
            Err(_)
                if self
                    .trusted
                    .iter()
                    .any(|t| t.as_ref() == end_entity.as_ref()) =>
            {
                let invalid = rustls::Error::InvalidCertificate;
                let certificate = webpki::EndEntityCert::try_from(end_entity)
                    .map_err(|_| invalid(CertificateError::BadEncoding))?;
                certificate
                    .verify_is_valid_for_subject_name(server_name)
                    .map_err(|_| invalid(CertificateError::NotValidForName))?;
                Ok(ServerCertVerified::assertion())
            }
            verified => verified,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier
            .verify_tls12_signature(message, certificate, signature)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier
            .verify_tls13_signature(message, certificate, signature)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.verifier.supported_verify_schemes()
    }
}

/// The system's trusted roots (PEM): `SSL_CERT_FILE`, else the first bundle that exists.
async fn system_roots() -> Vec<u8> {
    let given = std::env::var("SSL_CERT_FILE").ok();
    for path in given
        .iter()
        .map(String::as_str)
        .chain(SYSTEM_BUNDLES.iter().copied())
    {
        if let Ok(bundle) = tokio::fs::read(path).await {
            return bundle;
        }
    }
    Vec::new()
}
