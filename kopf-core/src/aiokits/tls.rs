//! TLS for the operator's own servers: certificates made here (and renewed before they
//! expire) or read from PEM files, and the rustls configuration that serves them.
//!
//! Rustls runs on the process's default crypto provider when the application installed one
//! (`CryptoProvider::install_default`), else on ring, the provider kube-rs uses, so no second
//! one is compiled ([`provider`]). Only HTTP/1.1
//! is offered (ALPN `http/1.1`): kube-apiserver calls webhooks over HTTP/1.1 or HTTP/2, and
//! the operator's servers speak HTTP/1.1.
//!
//! A generated certificate is signed by a CA made with it (both ECDSA P-256, since ring makes
//! no RSA keys): the CA is what clients are told to trust. A self-signed serving certificate
//! that is its own CA, as Kopf makes, is refused by webpki-based clients (a CA used as an end
//! entity), so the two are kept apart.
//!
//! Renewal ([`Generated::renewed`]) never changes what clients trust at the moment it
//! changes what is served, so that servers and clients that learn of it at different times
//! (replicas that read a shared Secret, a cluster whose webhook configurations are written a
//! moment later) keep trusting each other:
//! 1. The serving certificate is renewed, by the same CA, when a third of its life is left.
//! 2. At half its life, the CA gets a successor (the next CA), trusted from then on but
//!    signing nothing yet; at two thirds, and no sooner than a sixth of its life after the
//!    next CA appeared, the next CA starts signing (a new serving certificate) and the old one
//!    stays trusted until it expires.

use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use time::OffsetDateTime;
use x509_parser::prelude::{FromDer as _, GeneralName, X509Certificate};

/// How far back generated certificates are valid (for clocks a little behind): an hour, or a
/// tenth of their validity when it is short.
const BACKDATED: Duration = Duration::from_secs(3600);

/// How many times longer than the serving certificates their CAs are valid.
const CA_LIFETIMES: u32 = 10;

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
    /// Generated certificates, as kept (in a Secret), cannot be read back.
    #[error("{0}")]
    Kept(String),
    /// A file holds no usable PEM item of the kind expected.
    #[error("{path} holds no {what} in PEM")]
    Pem {
        /// The file.
        path: String,
        /// What was looked for.
        what: &'static str,
    },
    /// An encrypted private key cannot be decrypted: no password given, or a wrong one.
    #[error("cannot decrypt the private key in {path}: {reason}")]
    Encrypted {
        /// The file.
        path: String,
        /// Why, and what to do.
        reason: String,
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
    /// addresses; the first DNS name is the common name), valid for a year.
    #[cfg(test)]
    pub(crate) fn generate(names: &[String]) -> Result<Identity, TlsError> {
        let validity = Duration::from_secs(365 * 24 * 3600);
        Generated::new(names, validity, OffsetDateTime::now_utc())?.identity()
    }

    /// A certificate chain and its key from PEM texts (as read from `certfile` and
    /// `pkeyfile`; an encrypted PKCS#8 key is decrypted with `password`); clients are told to
    /// trust `ca_pem`.
    pub(crate) fn from_pem(
        cert: &Pem,
        key: &Pem,
        password: Option<&str>,
        ca_pem: String,
    ) -> Result<Identity, TlsError> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert.text)
            .filter_map(Result::ok)
            .collect();
        if chain.is_empty() {
            return Err(TlsError::Pem {
                path: cert.path.clone(),
                what: "certificate",
            });
        }
        let key = match decrypted(key, password)? {
            Some(key) => key,
            None => PrivateKeyDer::from_pem_slice(&key.text).map_err(|_| TlsError::Pem {
                path: key.path.clone(),
                what: "private key",
            })?,
        };
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
        let provider = provider();
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

/// A certificate and its private key, both PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Keyed {
    pub(crate) cert: String,
    pub(crate) key: String,
}

/// Certificates made here: the CA that signs, its successor once made, the CAs that signed
/// before (trusted until they expire), and the serving certificate. What clients trust is
/// [`bundle`](Self::bundle); what is served is [`identity`](Self::identity).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Generated {
    /// The CA that signs the serving certificate.
    pub(crate) ca: Keyed,
    /// The next CA: trusted, signing nothing yet.
    pub(crate) next: Option<Keyed>,
    /// CAs that signed before, trusted until they expire.
    pub(crate) previous: Vec<String>,
    /// The serving certificate (signed by `ca`) and its key.
    pub(crate) serving: Keyed,
}

/// Validity of a certificate, from its PEM.
#[derive(Debug, Clone, Copy)]
struct Life {
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
}

impl Life {
    fn of(pem: &str) -> Result<Life, TlsError> {
        let der = first_der(pem)?;
        let (_, certificate) = X509Certificate::from_der(&der)
            .map_err(|error| TlsError::Kept(format!("a certificate cannot be parsed: {error}")))?;
        let time = |time: x509_parser::time::ASN1Time| {
            OffsetDateTime::from_unix_timestamp(time.timestamp())
                .map_err(|error| TlsError::Kept(format!("a certificate's validity: {error}")))
        };
        Ok(Life {
            not_before: time(certificate.validity().not_before)?,
            not_after: time(certificate.validity().not_after)?,
        })
    }

    /// The moment when this part of the life has passed.
    fn at(&self, part: f64) -> OffsetDateTime {
        self.not_before + (self.not_after - self.not_before) * part
    }
}

impl Generated {
    /// A new CA and a serving certificate signed by it, for these names, the serving one
    /// valid for `validity` from `now` (the CA ten times as long).
    pub(crate) fn new(
        names: &[String],
        validity: Duration,
        now: OffsetDateTime,
    ) -> Result<Generated, TlsError> {
        let ca = new_ca(validity * CA_LIFETIMES, now)?;
        let serving = sign(&ca, names, validity, now)?;
        Ok(Generated {
            ca,
            next: None,
            previous: Vec::new(),
            serving,
        })
    }

    /// What clients are told to trust: the signing CA, the next one, and the previous ones.
    pub(crate) fn bundle(&self) -> String {
        let mut bundle = self.ca.cert.clone();
        for cert in self
            .next
            .iter()
            .map(|next| &next.cert)
            .chain(&self.previous)
        {
            if !bundle.ends_with('\n') {
                bundle.push('\n');
            }
            bundle.push_str(cert);
        }
        bundle
    }

    /// What the server serves: the serving certificate, its CA after it, and its key.
    pub(crate) fn identity(&self) -> Result<Identity, TlsError> {
        let chain = [&self.serving.cert, &self.ca.cert]
            .into_iter()
            .map(|pem| first_der(pem).map(CertificateDer::from))
            .collect::<Result<Vec<_>, _>>()?;
        let key = PrivateKeyDer::from_pem_slice(self.serving.key.as_bytes())
            .map_err(|_| TlsError::Kept("the serving key is not PEM".into()))?;
        Ok(Identity {
            chain,
            key,
            ca_pem: self.bundle(),
        })
    }

    /// When something is due next: the serving certificate's renewal, the next CA, the
    /// switch to it, or the end of a previous CA.
    pub(crate) fn due(&self) -> Result<OffsetDateTime, TlsError> {
        let serving = Life::of(&self.serving.cert)?.at(2.0 / 3.0);
        let ca = Life::of(&self.ca.cert)?;
        let succession = match &self.next {
            None => ca.at(0.5),
            Some(next) => switch_time(&ca, &Life::of(&next.cert)?),
        };
        let mut due = serving.min(succession);
        for previous in &self.previous {
            due = due.min(Life::of(previous)?.not_after);
        }
        Ok(due)
    }

    /// These certificates as they must be at `now`, for these names: `None` when nothing is
    /// due; else renewed as the module's rules say (a serving certificate that lacks some of
    /// the names is made again for all of its names and these).
    pub(crate) fn renewed(
        &self,
        names: &[String],
        validity: Duration,
        now: OffsetDateTime,
    ) -> Result<Option<Generated>, TlsError> {
        let mut renewed = self.clone();
        renewed
            .previous
            .retain(|pem| Life::of(pem).is_ok_and(|life| now < life.not_after));
        let ca = Life::of(&renewed.ca.cert)?;
        let mut resign = false;
        match &renewed.next {
            None if now >= ca.at(0.5) => {
                renewed.next = Some(new_ca(validity * CA_LIFETIMES, now)?);
            }
            Some(next) if now >= switch_time(&ca, &Life::of(&next.cert)?) => {
                let old = std::mem::replace(&mut renewed.ca, next.clone());
                renewed.next = None;
                renewed.previous.insert(0, old.cert);
                resign = true;
            }
            _ => {}
        }
        let held = names_of(&renewed.serving.cert)?;
        let missing = names.iter().any(|name| !held.contains(name));
        if resign || missing || now >= Life::of(&renewed.serving.cert)?.at(2.0 / 3.0) {
            let mut all = held;
            for name in names {
                if !all.contains(name) {
                    all.push(name.clone());
                }
            }
            renewed.serving = sign(&renewed.ca, &all, validity, now)?;
        }
        Ok((renewed != *self).then_some(renewed))
    }
}

/// The keys of a `kubernetes.io/tls` Secret that keeps generated certificates.
pub(crate) const TLS_CRT: &str = "tls.crt";
pub(crate) const TLS_KEY: &str = "tls.key";
pub(crate) const CA_CRT: &str = "ca.crt";
pub(crate) const CA_KEY: &str = "ca.key";
const NEXT_CA_CRT: &str = "next-ca.crt";
const NEXT_CA_KEY: &str = "next-ca.key";

impl Generated {
    /// As a Secret's `data` (PEM texts, before base64): `tls.crt` (the serving certificate,
    /// then its CA), `tls.key`, `ca.crt` (what clients trust), `ca.key` (the signing key),
    /// and the next CA when there is one.
    pub(crate) fn to_data(&self) -> Vec<(&'static str, String)> {
        let mut chain = self.serving.cert.clone();
        if !chain.ends_with('\n') {
            chain.push('\n');
        }
        chain.push_str(&self.ca.cert);
        let mut data = vec![
            (TLS_CRT, chain),
            (TLS_KEY, self.serving.key.clone()),
            (CA_CRT, self.bundle()),
            (CA_KEY, self.ca.key.clone()),
        ];
        if let Some(next) = &self.next {
            data.push((NEXT_CA_CRT, next.cert.clone()));
            data.push((NEXT_CA_KEY, next.key.clone()));
        }
        data
    }

    /// Read back from a Secret's `data` (PEM texts by key): `None` when it holds no `ca.key`
    /// (certificates made elsewhere, e.g. by cert-manager, are not renewed here).
    pub(crate) fn from_data(
        data: &std::collections::BTreeMap<String, String>,
    ) -> Result<Option<Generated>, TlsError> {
        let Some(ca_key) = data.get(CA_KEY) else {
            return Ok(None);
        };
        let text = |key: &str| {
            data.get(key)
                .cloned()
                .ok_or_else(|| TlsError::Kept(format!("the Secret has {CA_KEY} but no {key}")))
        };
        let chain = pems(&text(TLS_CRT)?);
        let [serving, ca, ..] = chain.as_slice() else {
            return Err(TlsError::Kept(format!(
                "{TLS_CRT} must hold the serving certificate and then its CA"
            )));
        };
        let next = match (data.get(NEXT_CA_CRT), data.get(NEXT_CA_KEY)) {
            (Some(cert), Some(key)) => Some(Keyed {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ => None,
        };
        let known: Vec<Vec<u8>> = [Some(ca), next.as_ref().map(|n| &n.cert)]
            .into_iter()
            .flatten()
            .map(|pem| first_der(pem))
            .collect::<Result<_, _>>()?;
        let mut previous = Vec::new();
        for pem in pems(&data.get(CA_CRT).cloned().unwrap_or_default()) {
            if !known.contains(&first_der(&pem)?) {
                previous.push(pem);
            }
        }
        Ok(Some(Generated {
            ca: Keyed {
                cert: ca.clone(),
                key: ca_key.clone(),
            },
            next,
            previous,
            serving: Keyed {
                cert: serving.clone(),
                key: text(TLS_KEY)?,
            },
        }))
    }
}

/// The key of an `ENCRYPTED PRIVATE KEY` PEM block (PKCS#8, as `openssl genpkey -aes256`
/// writes it), decrypted with the password; `None` when the key is not encrypted.
fn decrypted(
    key: &Pem,
    password: Option<&str>,
) -> Result<Option<PrivateKeyDer<'static>>, TlsError> {
    const BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
    const END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
    let text = String::from_utf8_lossy(&key.text);
    let Some(start) = text.find(BEGIN) else {
        return Ok(None);
    };
    let failed = |reason: String| TlsError::Encrypted {
        path: key.path.clone(),
        reason,
    };
    let Some(password) = password else {
        return Err(failed(
            "it is encrypted and no password is given: set WebhookServer::password".into(),
        ));
    };
    let body = &text[start + BEGIN.len()..];
    let body = &body[..body
        .find(END)
        .ok_or_else(|| failed("its PEM block does not end".into()))?];
    let body: String = body.split_whitespace().collect();
    let der = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .map_err(|error| failed(format!("not PEM: {error}")))?
    };
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice())
        .map_err(|error| failed(format!("not an encrypted PKCS#8 key: {error}")))?;
    let document = info
        .decrypt(password)
        .map_err(|error| failed(format!("{error} (a wrong password?)")))?;
    Ok(Some(PrivateKeyDer::Pkcs8(
        document.as_bytes().to_vec().into(),
    )))
}

/// The crypto provider of the operator's TLS: the one the application installed as the
/// process's default, if any (e.g. one with post-quantum key exchange), else ring's.
pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    if let Some(installed) = rustls::crypto::CryptoProvider::get_default() {
        return installed.clone();
    }
    #[allow(
        deprecated,
        reason = "ring is the provider kube-rs builds with; rustls 0.23.48 deprecates it for \
                  lacking post-quantum key exchange, which an application gets by installing \
                  a provider with it as the process's default"
    )]
    let ring = rustls::crypto::ring::default_provider();
    Arc::new(ring)
}

/// Each certificate of a PEM text, as PEM.
fn pems(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        if line.starts_with("-----BEGIN CERTIFICATE") {
            current.clear();
        }
        current.push_str(line);
        current.push('\n');
        if line.starts_with("-----END CERTIFICATE") {
            found.push(std::mem::take(&mut current));
        }
    }
    found
}

/// When the next CA may start signing: at two thirds of the current one's life, and no
/// sooner than a sixth of that life after the next one appeared (so that it is trusted
/// everywhere first).
fn switch_time(ca: &Life, next: &Life) -> OffsetDateTime {
    let settle = (ca.not_after - ca.not_before) / 6;
    ca.at(2.0 / 3.0).max(next.not_before + settle)
}

fn backdated(validity: Duration) -> time::Duration {
    let back = BACKDATED.min(validity / 10);
    time::Duration::try_from(back).unwrap_or(time::Duration::HOUR)
}

fn lifetime(validity: Duration) -> time::Duration {
    time::Duration::try_from(validity).unwrap_or(time::Duration::MAX)
}

/// A new CA, valid for `validity` from `now`.
fn new_ca(validity: Duration, now: OffsetDateTime) -> Result<Keyed, TlsError> {
    let key = KeyPair::generate().map_err(TlsError::Generate)?;
    let params = ca_params(
        &format!("kopf-webhook-ca-{}", now.unix_timestamp()),
        validity,
        now,
    );
    let cert = params.self_signed(&key).map_err(TlsError::Generate)?;
    Ok(Keyed {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

fn ca_params(name: &str, validity: Duration, now: OffsetDateTime) -> CertificateParams {
    let mut ca = CertificateParams::default();
    ca.distinguished_name = common_name(name);
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_before = now - backdated(validity);
    ca.not_after = now + lifetime(validity);
    ca
}

/// A serving certificate for these names (DNS names or IP addresses; the first DNS name is the
/// common name), signed by `ca`, valid for `validity` from `now`.
fn sign(
    ca: &Keyed,
    names: &[String],
    validity: Duration,
    now: OffsetDateTime,
) -> Result<Keyed, TlsError> {
    let ca_key = KeyPair::from_pem(&ca.key).map_err(TlsError::Generate)?;
    // The issuer is the CA's name and key: the same as when the CA was made.
    let issuer = Issuer::new(ca_params(&subject_of(&ca.cert)?, validity, now), ca_key);
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
    serving.not_before = now - backdated(validity);
    serving.not_after = now + lifetime(validity);
    let cert = serving
        .signed_by(&key, &issuer)
        .map_err(TlsError::Generate)?;
    Ok(Keyed {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// The DER of the first certificate of a PEM text.
fn first_der(pem: &str) -> Result<Vec<u8>, TlsError> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .and_then(Result::ok)
        .map(|der| der.to_vec())
        .ok_or_else(|| TlsError::Kept("no certificate in PEM where one was kept".into()))
}

/// The common name of a certificate (as the CAs made here have it).
fn subject_of(pem: &str) -> Result<String, TlsError> {
    let der = first_der(pem)?;
    let (_, certificate) = X509Certificate::from_der(&der)
        .map_err(|error| TlsError::Kept(format!("a CA cannot be parsed: {error}")))?;
    certificate
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .map(String::from)
        .ok_or_else(|| TlsError::Kept("a CA without a common name".into()))
}

/// The DNS names and IP addresses that a certificate is for.
fn names_of(pem: &str) -> Result<Vec<String>, TlsError> {
    let der = first_der(pem)?;
    let (_, certificate) = X509Certificate::from_der(&der)
        .map_err(|error| TlsError::Kept(format!("a certificate cannot be parsed: {error}")))?;
    let Ok(Some(names)) = certificate.subject_alternative_name() else {
        return Ok(Vec::new());
    };
    Ok(names
        .value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::DNSName(dns) => Some((*dns).to_string()),
            GeneralName::IPAddress(bytes) => match bytes.len() {
                4 => <[u8; 4]>::try_from(*bytes)
                    .ok()
                    .map(|ip| std::net::IpAddr::from(ip).to_string()),
                16 => <[u8; 16]>::try_from(*bytes)
                    .ok()
                    .map(|ip| std::net::IpAddr::from(ip).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect())
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
            algorithms: provider().signature_verification_algorithms,
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
        let loaded = Identity::from_pem(&cert, &key, None, "CA".into()).unwrap();
        assert_eq!(loaded.chain, identity.chain[..1]);
        loaded.server_config(None).expect("rustls serves it");
        let error = Identity::from_pem(&key, &key, None, String::new()).unwrap_err();
        assert_eq!(error.to_string(), "tls.key holds no certificate in PEM");
    }

    const DAY: Duration = Duration::from_secs(24 * 3600);

    /// Whether a client that trusts `bundle` accepts what `generated` serves, at `at`.
    fn trusted(bundle: &str, generated: &Generated, at: OffsetDateTime) -> bool {
        use rustls::client::danger::ServerCertVerifier as _;
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(bundle.as_bytes()) {
            roots.add(ca.unwrap()).unwrap();
        }
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider(),
        )
        .build()
        .unwrap();
        let identity = generated.identity().unwrap();
        let since = Duration::from_secs(u64::try_from(at.unix_timestamp()).unwrap());
        verifier
            .verify_server_cert(
                &identity.chain[0],
                &identity.chain[1..],
                &rustls::pki_types::ServerName::try_from("localhost").unwrap(),
                &[],
                rustls::pki_types::UnixTime::since_unix_epoch(since),
            )
            .is_ok()
    }

    #[test]
    fn the_serving_certificate_is_renewed_by_the_same_ca_when_a_third_is_left() {
        let names = vec!["localhost".to_string()];
        let t0 = OffsetDateTime::now_utc();
        let first = Generated::new(&names, 90 * DAY, t0).unwrap();
        let due = first.due().unwrap();
        assert!(due > t0 + time::Duration::days(59) && due < t0 + time::Duration::days(61));
        assert_eq!(
            first
                .renewed(&names, 90 * DAY, t0 + time::Duration::days(1))
                .unwrap(),
            None
        );
        let later = t0 + time::Duration::days(61);
        let second = first
            .renewed(&names, 90 * DAY, later)
            .unwrap()
            .expect("renewed");
        assert_eq!(second.ca, first.ca, "the same CA");
        assert_eq!(
            second.bundle(),
            first.bundle(),
            "what clients trust does not change"
        );
        assert_ne!(second.serving, first.serving);
        assert!(trusted(&first.bundle(), &second, later));
        assert!(
            !trusted(&first.bundle(), &first, t0 + time::Duration::days(91)),
            "expired"
        );
        assert!(trusted(
            &first.bundle(),
            &second,
            t0 + time::Duration::days(91)
        ));
        // A name it lacks: made again for both.
        let more = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let third = second
            .renewed(&more, 90 * DAY, later)
            .unwrap()
            .expect("renewed");
        assert_eq!(
            names_of(&third.serving.cert).unwrap(),
            ["localhost", "127.0.0.1"]
        );
    }

    #[test]
    fn a_ca_is_trusted_long_before_it_signs_and_after_it_stopped_signing() {
        let names = vec!["localhost".to_string()];
        let validity = 90 * DAY; // the CA: 900 days
        let t0 = OffsetDateTime::now_utc();
        let mut generated = Generated::new(&names, validity, t0).unwrap();
        let mut bundles = vec![generated.bundle()];
        let mut day = 0;
        let mut signed_by = vec![generated.ca.cert.clone()];
        while day < 2000 {
            let at = t0 + time::Duration::days(day);
            if let Some(renewed) = generated.renewed(&names, validity, at).unwrap() {
                // Servers may switch before clients learn the new bundle, and after.
                assert!(trusted(&generated.bundle(), &renewed, at), "day {day}");
                assert!(trusted(&renewed.bundle(), &generated, at), "day {day}");
                if renewed.ca != generated.ca {
                    assert!(
                        bundles.iter().any(|b| b.contains(&renewed.ca.cert) && b.contains(&generated.ca.cert)),
                        "day {day}: the new CA was trusted before it signed"
                    );
                    signed_by.push(renewed.ca.cert.clone());
                }
                generated = renewed;
                bundles.push(generated.bundle());
            }
            assert!(trusted(&generated.bundle(), &generated, at), "day {day}");
            assert!(pems(&generated.bundle()).len() <= 3, "day {day}");
            day += 5;
        }
        assert!(
            signed_by.len() >= 3,
            "CAs took over from each other: {}",
            signed_by.len()
        );
    }

    #[test]
    fn generated_certificates_are_kept_and_read_back_from_a_secrets_data() {
        let names = vec!["localhost".to_string()];
        let t0 = OffsetDateTime::now_utc();
        let generated = Generated::new(&names, 90 * DAY, t0).unwrap();
        let generated = generated
            .renewed(&names, 90 * DAY, t0 + time::Duration::days(460))
            .unwrap()
            .expect("the next CA made");
        assert!(generated.next.is_some());
        let data: std::collections::BTreeMap<String, String> = generated
            .to_data()
            .into_iter()
            .map(|(key, value)| (key.to_string(), value))
            .collect();
        assert_eq!(
            Generated::from_data(&data).unwrap(),
            Some(generated.clone())
        );
        let mut given = data.clone();
        given.remove(CA_KEY);
        assert_eq!(
            Generated::from_data(&given).unwrap(),
            None,
            "made elsewhere"
        );
    }

    /// Whether the DER holds these bytes (a name of the certificate, as it is encoded).
    fn holds(der: &[u8], bytes: &[u8]) -> bool {
        der.windows(bytes.len()).any(|window| window == bytes)
    }
}
