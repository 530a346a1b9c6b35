//! Kopf's cluster detection (`ClusterDetector`), behind `WebhookServer::auto()`: the host by
//! which a local cluster (k3d or k3s, minikube, Docker Desktop) reaches the machine the
//! operator runs on, guessed with the least permissions: first from the API server's own TLS
//! certificate (read, not trusted: it only names the cluster), then from its version.

use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::aiokits::tls;

/// How long reading the API server's certificate may take.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The host of k3d's (and k3s') clusters, Kopf's `WebhookK3dServer.DEFAULT_HOST`.
const K3D: &str = "host.k3d.internal";
/// Kopf's `WebhookMinikubeServer.DEFAULT_HOST`.
const MINIKUBE: &str = "host.minikube.internal";
/// Kopf's `WebhookDockerDesktopServer.DEFAULT_HOST`.
const DOCKER_DESKTOP: &str = "host.docker.internal";

/// What the API server's certificate says of the cluster.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Names {
    pub(super) subject_cn: String,
    pub(super) subject_org: String,
    pub(super) issuer_cn: String,
    /// The subject's alternative names (DNS names).
    pub(super) alt_names: Vec<String>,
}

/// The host by Kopf's rules of the certificate's names.
pub(super) fn by_certificate(names: &Names) -> Option<&'static str> {
    if names.subject_cn == "k3s"
        || names.subject_org == "k3s"
        || names.issuer_cn.starts_with("k3s-")
    {
        Some(K3D)
    } else if names.subject_cn == "minikube" || names.issuer_cn == "minikubeCA" {
        Some(MINIKUBE)
    } else if names
        .alt_names
        .iter()
        .any(|name| name == "docker-for-desktop")
    {
        Some(DOCKER_DESKTOP)
    } else {
        None
    }
}

/// The host by the API server's `gitVersion` (`v1.31.1+k3s1`: k3s).
pub(super) fn by_version(git_version: &str) -> Option<&'static str> {
    git_version.contains("+k3s").then_some(K3D)
}

/// The host the cluster reaches this machine by, if it is a known local cluster: by the
/// certificate of the API server at `cluster` (when known), else by the version that
/// `client` reads. Failures are logged and mean "not known".
pub(super) async fn detect(
    client: Option<&kube::Client>,
    cluster: Option<&http::Uri>,
) -> Option<&'static str> {
    if let Some(cluster) = cluster.filter(|url| url.scheme_str() == Some("https")) {
        match tokio::time::timeout(READ_TIMEOUT, certificate_names(cluster)).await {
            Ok(Ok(names)) => {
                if let Some(host) = by_certificate(&names) {
                    return Some(host);
                }
            }
            Ok(Err(error)) => {
                tracing::debug!(target: "kopf::admission", %error, "cannot read the API server's certificate to detect the cluster");
            }
            Err(_) => {
                tracing::debug!(target: "kopf::admission", "the API server's certificate was not read within {READ_TIMEOUT:?}");
            }
        }
    }
    let client = client?;
    match client.apiserver_version().await {
        Ok(info) => by_version(&info.git_version),
        Err(error) => {
            tracing::debug!(target: "kopf::admission", %error, "cannot read the API server's version to detect the cluster");
            None
        }
    }
}

/// The names in the certificate that the API server at `url` presents.
async fn certificate_names(url: &http::Uri) -> Result<Names, String> {
    let host = url.host().ok_or("no host in the API server's URL")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = url.port_u16().unwrap_or(443);
    let name = ServerName::try_from(host.to_string()).map_err(|error| error.to_string())?;
    let provider = tls::provider();
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| error.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Unverified(provider)))
        .with_no_client_auth();
    let stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|error| error.to_string())?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let stream = connector
        .connect(name, stream)
        .await
        .map_err(|error| error.to_string())?;
    let (_, connection) = stream.get_ref();
    let der = connection
        .peer_certificates()
        .and_then(|chain| chain.first())
        .ok_or("the API server presented no certificate")?;
    names(der)
}

/// The names of a certificate (DER).
pub(super) fn names(der: &[u8]) -> Result<Names, String> {
    let (_, certificate) =
        x509_parser::parse_x509_certificate(der).map_err(|error| error.to_string())?;
    let first = |name: &x509_parser::x509::X509Name<'_>, org: bool| {
        let value = if org {
            name.iter_organization().next()
        } else {
            name.iter_common_name().next()
        };
        value
            .and_then(|value| value.as_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let alt_names = match certificate.subject_alternative_name() {
        Ok(Some(extension)) => extension
            .value
            .general_names
            .iter()
            .filter_map(|name| match name {
                x509_parser::extensions::GeneralName::DNSName(dns) => Some(dns.to_string()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Ok(Names {
        subject_cn: first(certificate.subject(), false),
        subject_org: first(certificate.subject(), true),
        issuer_cn: first(certificate.issuer(), false),
        alt_names,
    })
}

/// Accepts any certificate: it is read for its names, and nothing is sent over the
/// connection. Its signatures are still checked, as any handshake's.
#[derive(Debug)]
struct Unverified(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(subject_cn: &str, subject_org: &str, issuer_cn: &str, alt: &[&str]) -> Names {
        Names {
            subject_cn: subject_cn.into(),
            subject_org: subject_org.into(),
            issuer_cn: issuer_cn.into(),
            alt_names: alt.iter().map(|name| name.to_string()).collect(),
        }
    }

    #[test]
    fn known_local_clusters_are_told_by_their_certificates_as_kopf_tells_them() {
        let cases = [
            (named("k3s", "", "", &[]), Some(K3D)),
            (named("kube-apiserver", "k3s", "", &[]), Some(K3D)),
            (named("", "", "k3s-server-ca@1700000000", &[]), Some(K3D)),
            (named("minikube", "", "", &[]), Some(MINIKUBE)),
            (named("", "", "minikubeCA", &[]), Some(MINIKUBE)),
            (
                named("kube-apiserver", "", "kubernetes", &["docker-for-desktop"]),
                Some(DOCKER_DESKTOP),
            ),
            (
                named("kube-apiserver", "", "kubernetes", &["kubernetes"]),
                None,
            ),
        ];
        for (names, host) in cases {
            assert_eq!(by_certificate(&names), host, "{names:?}");
        }
        assert_eq!(by_version("v1.31.4+k3s1"), Some(K3D));
        assert_eq!(by_version("v1.31.4"), None);
    }

    #[test]
    fn a_certificates_names_are_read_from_its_der() {
        let mut params =
            rcgen::CertificateParams::new(vec!["docker-for-desktop".to_string()]).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "k3s");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "k3s-org");
        let key = rcgen::KeyPair::generate().unwrap();
        let certificate = params.self_signed(&key).unwrap();
        let names = names(certificate.der()).unwrap();
        assert_eq!(
            names,
            named("k3s", "k3s-org", "k3s", &["docker-for-desktop"]),
            "self-signed: the issuer is the subject"
        );
    }
}
