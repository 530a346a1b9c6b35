//! Serving over TLS: a certificate authority made afresh at every start, the serving
//! certificate it signs for the names clients dial, and the handshake in front of HTTP.
//!
//! As kube-apiserver does when given no certificates, the server makes its own: a CA, and a
//! certificate for `localhost` and `127.0.0.1` (plus `::1`, the in-cluster names
//! `kubernetes.default.svc` and its kin, and the address bound, when it is a specific one).
//! The CA's key lives only in memory and dies with the server, so what trusts one run's CA
//! (a kubeconfig it wrote, say) trusts no other.
//!
//! Rustls runs on ring, the provider kube-rs uses, so no second one is compiled. Only HTTP/1.1
//! is offered (ALPN `http/1.1`), as the server speaks no HTTP/2.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// The DNS names the serving certificate is valid for: what clients on this machine dial, and
/// what clients inside a cluster would (kube-apiserver's own serving certificate lists these).
const DNS_NAMES: &[&str] = &[
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// How long the certificates are valid: from an hour ago (for clocks a little behind) for a
/// year, far longer than any server runs.
const BACKDATED: time::Duration = time::Duration::hours(1);
const VALIDITY: time::Duration = time::Duration::days(365);

/// The first byte of a TLS record that carries a handshake (a ClientHello, first of all).
const HANDSHAKE_RECORD: u8 = 0x16;

/// What Go's TLS servers, kube-apiserver's among them, answer to a plain HTTP request on their
/// TLS port, before they close the connection.
const PLAIN_HTTP_ANSWER: &[u8] =
    b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// How long a connection refused for plain HTTP is kept open to read what the client still
/// sends, so that closing it does not reset it before the client read the answer.
const LINGER: Duration = Duration::from_secs(5);

/// A server's certificates and the acceptor that serves them.
#[derive(Clone)]
pub(crate) struct Tls {
    /// The CA's certificate, PEM: what clients are given to trust.
    pub(crate) ca_pem: String,
    /// The CA's certificate, DER.
    pub(crate) ca_der: Vec<u8>,
    acceptor: TlsAcceptor,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

impl Tls {
    /// Makes a CA and a serving certificate signed by it; `bound` is the address listened on,
    /// named in the certificate too when it is neither loopback nor unspecified.
    pub(crate) fn generate(bound: IpAddr) -> std::io::Result<Tls> {
        let failed = |error: rcgen::Error| {
            std::io::Error::other(format!(
                "making the fake API server's TLS certificates failed: {error}"
            ))
        };
        let now = time::OffsetDateTime::now_utc();

        let ca_key = KeyPair::generate().map_err(failed)?;
        let mut ca = CertificateParams::default();
        ca.distinguished_name = distinguished_name("kopf-fake-apiserver-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        ca.not_before = now - BACKDATED;
        ca.not_after = now + VALIDITY;
        let ca_cert = ca.self_signed(&ca_key).map_err(failed)?;
        let issuer = Issuer::new(ca, ca_key);

        let key = KeyPair::generate().map_err(failed)?;
        let mut names: Vec<String> = DNS_NAMES.iter().map(|name| name.to_string()).collect();
        names.push(Ipv4Addr::LOCALHOST.to_string());
        names.push(Ipv6Addr::LOCALHOST.to_string());
        if !bound.is_loopback() && !bound.is_unspecified() {
            names.push(bound.to_string());
        }
        let mut serving = CertificateParams::new(names).map_err(failed)?;
        serving.distinguished_name = distinguished_name("kopf-fake-apiserver");
        serving.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        serving.use_authority_key_identifier_extension = true;
        serving.not_before = now - BACKDATED;
        serving.not_after = now + VALIDITY;
        let serving_cert = serving.signed_by(&key, &issuer).map_err(failed)?;

        let chain = vec![
            serving_cert.der().clone(),
            CertificateDer::from(ca_cert.der().to_vec()),
        ];
        #[allow(
            deprecated,
            reason = "ring is the provider kube-rs builds with; rustls 0.23.48 deprecates it \
                      only for lacking post-quantum key exchange, which a local test server does \
                      not need"
        )]
        let provider = rustls::crypto::ring::default_provider();
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
            .with_safe_default_protocol_versions()
            .map_err(|error| std::io::Error::other(format!("configuring TLS failed: {error}")))?
            .with_no_client_auth()
            .with_single_cert(chain, PrivateKeyDer::from(key))
            .map_err(|error| std::io::Error::other(format!("configuring TLS failed: {error}")))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];

        Ok(Tls {
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().to_vec(),
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }

    /// The TLS handshake on a new connection; `None` when there is no TLS session to serve
    /// (the client spoke plain HTTP and was told so, or the handshake failed).
    ///
    /// # Cancellation safety
    ///
    /// Dropping it drops the connection.
    pub(crate) async fn handshake(&self, stream: TcpStream) -> Option<TlsStream<TcpStream>> {
        let mut first = [0u8; 1];
        match stream.peek(&mut first).await {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
        if first[0] != HANDSHAKE_RECORD {
            if first[0].is_ascii_uppercase() {
                tracing::debug!("a plain HTTP request came to the TLS port; answered 400");
                refuse_plain_http(stream).await;
            } else {
                tracing::debug!("a connection that is not TLS came to the TLS port; closed");
            }
            return None;
        }
        match self.acceptor.accept(stream).await {
            Ok(stream) => Some(stream),
            Err(error) => {
                tracing::debug!(%error, "a TLS handshake failed");
                None
            }
        }
    }
}

fn distinguished_name(common_name: &str) -> rcgen::DistinguishedName {
    let mut name = rcgen::DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}

/// Answers as Go does, then reads (and drops) what the client still sends until it closes or
/// [`LINGER`] passes: closing a socket with unread data would reset it, and the client could
/// lose the answer.
async fn refuse_plain_http(mut stream: TcpStream) {
    if stream.write_all(PLAIN_HTTP_ANSWER).await.is_err() || stream.shutdown().await.is_err() {
        return;
    }
    let mut sink = [0u8; 4096];
    let drain = async { while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {} };
    let _ = tokio::time::timeout(LINGER, drain).await;
}
