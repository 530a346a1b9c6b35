//! TLS for the operator's own servers: certificates made at the start or read from PEM files,
//! and the rustls configuration that serves them.
//!
//! Rustls runs on ring, the provider kube-rs uses, so no second one is compiled. Only HTTP/1.1
//! is offered (ALPN `http/1.1`): kube-apiserver calls webhooks over HTTP/1.1 or HTTP/2, and
//! the operator's servers speak HTTP/1.1.
//!
//! A generated certificate is signed by a CA made with it (both ECDSA P-256, since ring makes
//! no RSA keys): the CA is what clients are told to trust. A self-signed serving certificate
//! that is its own CA, as Kopf makes, is refused by webpki-based clients (a CA used as an end
//! entity), so the two are kept apart.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// How long generated certificates are valid: from an hour ago (for clocks a little behind)
/// for a year, far longer than an operator runs between restarts.
const BACKDATED: time::Duration = time::Duration::hours(1);
const VALIDITY: time::Duration = time::Duration::days(365);

/// Why the certificate of a server could not be made, read or served.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate could not be generated (e.g. a name that is not a DNS name).
    #[error("cannot generate a certificate: {0}")]
    Generate(#[source] rcgen::Error),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file holds no usable PEM item of the kind expected.
    #[error("{path} holds no {what} in PEM")]
    Pem {
        /// The file.
        path: String,
        /// What was looked for.
        what: &'static str,
    },
    /// Rustls refused the certificate or key (e.g. a key that does not match).
    #[error("cannot serve the certificate: {0}")]
    Config(#[source] rustls::Error),
}

/// A serving certificate with its key, and what clients are told to trust.
#[derive(Debug)]
pub(crate) struct Identity {
    /// The serving certificate first, then its issuers.
    pub(crate) chain: Vec<CertificateDer<'static>>,
    pub(crate) key: PrivateKeyDer<'static>,
    /// The CA to trust, PEM.
    pub(crate) ca_pem: String,
}

impl Identity {
    /// A CA and a serving certificate signed by it, for these names (DNS names or IP
    /// addresses; the first DNS name is the common name).
    pub(crate) fn generate(names: &[String]) -> Result<Identity, TlsError> {
        let now = time::OffsetDateTime::now_utc();
        let ca_key = KeyPair::generate().map_err(TlsError::Generate)?;
        let mut ca = CertificateParams::default();
        ca.distinguished_name = common_name("kopf-webhook-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        ca.not_before = now - BACKDATED;
        ca.not_after = now + VALIDITY;
        let ca_cert = ca.self_signed(&ca_key).map_err(TlsError::Generate)?;
        let issuer = Issuer::new(ca, ca_key);

        let key = KeyPair::generate().map_err(TlsError::Generate)?;
        let mut serving = CertificateParams::new(names.to_vec()).map_err(TlsError::Generate)?;
        let cn = names
            .iter()
            .find(|name| name.parse::<std::net::IpAddr>().is_err())
            .or(names.first())
            .map_or("kopf-webhook", String::as_str);
        serving.distinguished_name = common_name(cn);
        serving.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        serving.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        serving.use_authority_key_identifier_extension = true;
        serving.not_before = now - BACKDATED;
        serving.not_after = now + VALIDITY;
        let serving_cert = serving
            .signed_by(&key, &issuer)
            .map_err(TlsError::Generate)?;
        Ok(Identity {
            chain: vec![
                serving_cert.der().clone(),
                CertificateDer::from(ca_cert.der().to_vec()),
            ],
            key: PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            ca_pem: ca_cert.pem(),
        })
    }

    /// A certificate chain and its key from PEM texts (as read from `certfile` and
    /// `pkeyfile`); clients are told to trust `ca_pem`.
    pub(crate) fn from_pem(cert: &Pem, key: &Pem, ca_pem: String) -> Result<Identity, TlsError> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert.text)
            .filter_map(Result::ok)
            .collect();
        if chain.is_empty() {
            return Err(TlsError::Pem {
                path: cert.path.clone(),
                what: "certificate",
            });
        }
        let key = PrivateKeyDer::from_pem_slice(&key.text).map_err(|_| TlsError::Pem {
            path: key.path.clone(),
            what: "private key",
        })?;
        Ok(Identity { chain, key, ca_pem })
    }

    /// The rustls configuration that serves this identity over HTTP/1.1. Without `clients`,
    /// it asks clients for a certificate but does not require one (it is passed on,
    /// unverified, to whoever answers); with them (PEM CAs), it requires a client certificate
    /// that they issued.
    pub(crate) fn server_config(
        self,
        clients: Option<&Pem>,
    ) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier: Arc<dyn rustls::server::danger::ClientCertVerifier> = match clients {
            None => Arc::new(AnyClientCertificate::new()),
            Some(cas) => {
                let mut roots = rustls::RootCertStore::empty();
                for ca in CertificateDer::pem_slice_iter(&cas.text).filter_map(Result::ok) {
                    roots.add(ca).map_err(TlsError::Config)?;
                }
                if roots.is_empty() {
                    return Err(TlsError::Pem {
                        path: cas.path.clone(),
                        what: "certificate",
                    });
                }
                rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider.clone(),
                )
                .build()
                .map_err(|error| TlsError::Config(rustls::Error::General(error.to_string())))?
            }
        };
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.chain, self.key)
            .map_err(TlsError::Config)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// A PEM file's text, with its path for errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pem {
    pub(crate) path: String,
    pub(crate) text: Vec<u8>,
}

impl Pem {
    /// Reads the file without blocking the runtime.
    pub(crate) async fn read(path: &std::path::Path) -> Result<Pem, TlsError> {
        let shown = path.display().to_string();
        match tokio::fs::read(path).await {
            Ok(text) => Ok(Pem { path: shown, text }),
            Err(source) => Err(TlsError::Read {
                path: shown,
                source,
            }),
        }
    }
}

fn common_name(name: &str) -> rcgen::DistinguishedName {
    let mut distinguished = rcgen::DistinguishedName::new();
    distinguished.push(DnType::CommonName, name);
    distinguished
}

/// Accepts any client certificate, or none: the peer's certificate is only passed on to the
/// handlers (Kopf's `sslpeer`), whose business it is to judge it.
#[derive(Debug)]
struct AnyClientCertificate {
    /// Ring's, which check the client's handshake signatures (made once, not per handshake).
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl AnyClientCertificate {
    fn new() -> AnyClientCertificate {
        AnyClientCertificate {
            algorithms: rustls::crypto::ring::default_provider().signature_verification_algorithms,
        }
    }
}

impl rustls::server::danger::ClientCertVerifier for AnyClientCertificate {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        Ok(rustls::server::danger::ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_certificates_name_the_hosts_and_are_issued_by_the_reported_ca() {
        let names = vec!["127.0.0.1".to_string(), "op.ops.svc".to_string()];
        let identity = Identity::generate(&names).unwrap();
        assert_eq!(identity.chain.len(), 2);
        assert!(identity.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        let ca = CertificateDer::from_pem_slice(identity.ca_pem.as_bytes()).unwrap();
        assert_eq!(
            ca, identity.chain[1],
            "the reported CA issued the serving one"
        );
        // An IP SAN is the address's 4 bytes (tag 0x87, length 4); a DNS SAN is the name.
        assert!(holds(&identity.chain[0], &[0x87, 4, 127, 0, 0, 1]));
        assert!(holds(&identity.chain[0], b"op.ops.svc"));
        identity.server_config(None).expect("rustls serves it");
    }

    #[test]
    fn pem_files_give_a_chain_and_a_key_or_say_what_is_missing() {
        let identity = Identity::generate(&["localhost".to_string()]).unwrap();
        let key = match &identity.key {
            PrivateKeyDer::Pkcs8(key) => key.secret_pkcs8_der().to_vec(),
            _ => unreachable!(),
        };
        let pem = |label: &str, der: &[u8]| {
            use base64::Engine as _;
            let body = base64::engine::general_purpose::STANDARD.encode(der);
            format!("-----BEGIN {label}-----\n{body}\n-----END {label}-----\n").into_bytes()
        };
        let cert = Pem {
            path: "tls.crt".into(),
            text: pem("CERTIFICATE", &identity.chain[0]),
        };
        let key = Pem {
            path: "tls.key".into(),
            text: pem("PRIVATE KEY", &key),
        };
        let loaded = Identity::from_pem(&cert, &key, "CA".into()).unwrap();
        assert_eq!(loaded.chain, identity.chain[..1]);
        loaded.server_config(None).expect("rustls serves it");
        let error = Identity::from_pem(&key, &key, String::new()).unwrap_err();
        assert_eq!(error.to_string(), "tls.key holds no certificate in PEM");
    }

    /// Whether the DER holds these bytes (a name of the certificate, as it is encoded).
    fn holds(der: &[u8], bytes: &[u8]) -> bool {
        der.windows(bytes.len()).any(|window| window == bytes)
    }
}
