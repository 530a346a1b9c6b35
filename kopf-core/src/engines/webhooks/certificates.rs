//! Where the webhook server's certificate comes from, and how it is kept current: made here
//! and kept in memory, made by the first replica and kept in a Secret for all, or read from
//! files; renewed before it expires; and the CA of client certificates read again when its
//! file changes.
//!
//! Invariants:
//! 1. [`Certificates::refresh`] changes nothing when it fails: the previous certificate is
//!    served meanwhile, and the failure is logged by the caller.
//! 2. A Secret is written only guarded by the resourceVersion last read, so that of two
//!    replicas renewing at once one wins and the other adopts its result at the next read.
//! 3. What clients are told to trust changes only as `aiokits::tls` renews: never at the same
//!    moment as what is served, so that replicas that learn of it later keep being trusted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::aiokits::tls::{self, Generated, Identity, Pem, TlsError};
use crate::configs::webhooks::{WebhookSecret, WebhookServer};

/// Why the certificate cannot be loaded.
#[derive(Debug)]
pub(super) enum CertificateError {
    /// It cannot be made, read or served.
    Tls(TlsError),
    /// The Secret that keeps it cannot be read or written.
    Secret {
        /// The Secret, as `namespace/name`.
        secret: String,
        /// What went wrong, and what to do.
        message: String,
    },
}

/// Where the served certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// Made here, in memory.
    Generated(Generated),
    /// In a Secret: made by a replica (renewed by whichever sees it due) or given.
    Secret(Kept),
    /// Given files: the certificate, its key and, if set, the CA file.
    Files {
        cert: Pem,
        key: Pem,
        ca: Option<Pem>,
    },
}

/// What a Secret holds, and its resourceVersion.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Kept {
    version: String,
    held: Held,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Held {
    /// Made by a replica: renewed here when due.
    Generated(Generated),
    /// Made elsewhere (no `ca.key`): the certificate, its key, and what to trust.
    Given {
        cert: String,
        key: String,
        ca: String,
    },
}

/// The server's certificates as last loaded.
pub(super) struct Certificates {
    server: WebhookServer,
    client: Option<kube::Client>,
    source: Source,
    /// The CAs that client certificates must be issued by, if any.
    clients: Option<Pem>,
}

impl Certificates {
    /// Makes, reads or fetches the certificate, as the server's settings say.
    pub(super) async fn load(
        server: &WebhookServer,
        client: Option<&kube::Client>,
    ) -> Result<Certificates, CertificateError> {
        let source = match (&server.certificate, &server.secret) {
            (Some(_), _) => files(server).await.map_err(CertificateError::Tls)?,
            (None, Some(secret)) => {
                let Some(client) = client else {
                    return Err(CertificateError::Secret {
                        secret: shown(secret),
                        message: "no API client to read it with".into(),
                    });
                };
                Source::Secret(fetch(client, server, secret).await?)
            }
            (None, None) => Source::Generated(
                Generated::new(
                    &server.subject_names(),
                    server.certificate_validity,
                    OffsetDateTime::now_utc(),
                )
                .map_err(CertificateError::Tls)?,
            ),
        };
        let clients = match &server.verify_cafile {
            Some(cafile) => Some(Pem::read(cafile).await.map_err(CertificateError::Tls)?),
            None => None,
        };
        Ok(Certificates {
            server: server.clone(),
            client: client.cloned(),
            source,
            clients,
        })
    }

    /// The TLS configuration that serves the certificate, and what clients must trust.
    pub(super) fn served(&self) -> Result<(Arc<rustls::ServerConfig>, String), CertificateError> {
        let identity = self.identity()?;
        let ca_pem = identity.ca_pem.clone();
        let config = identity
            .server_config(self.clients.as_ref())
            .map_err(CertificateError::Tls)?;
        Ok((config, ca_pem))
    }

    fn identity(&self) -> Result<Identity, CertificateError> {
        match &self.source {
            Source::Generated(generated)
            | Source::Secret(Kept {
                held: Held::Generated(generated),
                ..
            }) => generated.identity().map_err(CertificateError::Tls),
            Source::Secret(Kept {
                held: Held::Given { cert, key, ca },
                ..
            }) => {
                let secret = self.server.secret.as_ref().map(shown).unwrap_or_default();
                let pem = |key: &str, text: &str| Pem {
                    path: format!("{key} of the Secret {secret}"),
                    text: text.as_bytes().to_vec(),
                };
                Identity::from_pem(
                    &pem(tls::TLS_CRT, cert),
                    &pem(tls::TLS_KEY, key),
                    None,
                    ca.clone(),
                )
                .map_err(CertificateError::Tls)
            }
            Source::Files { cert, key, ca } => {
                // The cluster trusts the given CA data, or the CA file, or the certificate.
                let ca_pem = match (&self.server.cadata, ca) {
                    (Some(cadata), _) => cadata.clone(),
                    (None, Some(ca)) => String::from_utf8_lossy(&ca.text).into_owned(),
                    (None, None) => String::from_utf8_lossy(&cert.text).into_owned(),
                };
                let password = self.server.password.as_deref();
                Identity::from_pem(cert, key, password, ca_pem).map_err(CertificateError::Tls)
            }
        }
    }

    /// How long until the next look: the reload interval, or sooner when a generated
    /// certificate is due for renewal.
    pub(super) fn next_look(&self) -> Duration {
        let interval = self.server.reload_interval.max(Duration::from_millis(10));
        let generated = match &self.source {
            Source::Generated(generated)
            | Source::Secret(Kept {
                held: Held::Generated(generated),
                ..
            }) => generated,
            _ => return interval,
        };
        let Ok(due) = generated.due() else {
            return interval;
        };
        let left = due - OffsetDateTime::now_utc();
        let left = Duration::try_from(left).unwrap_or_default();
        // Not sooner than every 100 ms, should renewing keep failing.
        interval.min(left.max(Duration::from_millis(100)))
    }

    /// Reads the files or the Secret again and renews what is due: whether anything changed
    /// (then [`served`](Self::served) serves it). On an error, nothing changed.
    pub(super) async fn refresh(&mut self) -> Result<bool, CertificateError> {
        let names = self.server.subject_names();
        let validity = self.server.certificate_validity;
        let source = match &self.source {
            Source::Generated(generated) => {
                let renewed = generated
                    .renewed(&names, validity, OffsetDateTime::now_utc())
                    .map_err(CertificateError::Tls)?;
                match renewed {
                    Some(renewed) => Source::Generated(renewed),
                    None => self.source.clone(),
                }
            }
            Source::Files { .. } => files(&self.server).await.map_err(CertificateError::Tls)?,
            Source::Secret(_) => match (&self.client, &self.server.secret) {
                (Some(client), Some(secret)) => {
                    Source::Secret(fetch(client, &self.server, secret).await?)
                }
                // Loaded with both, or it would not be a Secret's.
                _ => self.source.clone(),
            },
        };
        let clients = match &self.server.verify_cafile {
            Some(cafile) => Some(Pem::read(cafile).await.map_err(CertificateError::Tls)?),
            None => None,
        };
        let changed = source != self.source || clients != self.clients;
        if changed {
            // Checked before it is kept: a half-written file is retried at the next look.
            let refreshed = Certificates {
                server: self.server.clone(),
                client: self.client.clone(),
                source,
                clients,
            };
            refreshed.served()?;
            *self = refreshed;
        }
        Ok(changed)
    }
}

/// The given certificate files, read.
async fn files(server: &WebhookServer) -> Result<Source, TlsError> {
    let Some(files) = &server.certificate else {
        unreachable!("only read for given certificate files");
    };
    let cert = Pem::read(&files.certfile).await?;
    let key = Pem::read(&files.pkeyfile).await?;
    let ca = match &server.cafile {
        Some(cafile) => Some(Pem::read(cafile).await?),
        None => None,
    };
    Ok(Source::Files { cert, key, ca })
}

fn shown(secret: &WebhookSecret) -> String {
    format!("{}/{}", secret.namespace, secret.name)
}

/// The Secret's certificates: read, renewed in it if due, or made and created in it if it is
/// missing.
async fn fetch(
    client: &kube::Client,
    server: &WebhookServer,
    secret: &WebhookSecret,
) -> Result<Kept, CertificateError> {
    // No namespace given (`--webhook-secret NAME`): the client's default, the pod's own.
    let defaulted;
    let secret = if secret.namespace.is_empty() {
        defaulted = WebhookSecret {
            namespace: client.default_namespace().to_string(),
            name: secret.name.clone(),
        };
        &defaulted
    } else {
        secret
    };
    let failed = |message: String| CertificateError::Secret {
        secret: shown(secret),
        message,
    };
    let names = server.subject_names();
    let validity = server.certificate_validity;
    // A few rounds: a replica creating or renewing it at the same moment wins one of them.
    for _ in 0..3 {
        let now = OffsetDateTime::now_utc();
        let found = match send(client, secret, http::Method::GET, None).await {
            Ok(found) => found,
            Err(kube::Error::Api(status)) if status.code == 404 => {
                let generated =
                    Generated::new(&names, validity, now).map_err(CertificateError::Tls)?;
                let body = secret_body(secret, &generated, None);
                match send(client, secret, http::Method::POST, Some(body)).await {
                    Ok(created) => {
                        tracing::info!(target: "kopf::admission", "made the webhook certificate and kept it in the Secret {}", shown(secret));
                        return Ok(Kept {
                            version: version_of(&created),
                            held: Held::Generated(generated),
                        });
                    }
                    // Another replica created it meanwhile: read it.
                    Err(kube::Error::Api(status)) if status.code == 409 => continue,
                    Err(error) => return Err(failed(error_text(&error, "create"))),
                }
            }
            Err(error) => return Err(failed(error_text(&error, "get"))),
        };
        let data = decoded(&found).map_err(failed)?;
        let version = version_of(&found);
        let held = match Generated::from_data(&data).map_err(CertificateError::Tls)? {
            Some(generated) => generated,
            None => {
                let text = |key: &str| {
                    data.get(key)
                        .cloned()
                        .ok_or_else(|| failed(format!("it has no {key}")))
                };
                let cert = text(tls::TLS_CRT)?;
                let ca = data
                    .get(tls::CA_CRT)
                    .cloned()
                    .unwrap_or_else(|| cert.clone());
                let held = Held::Given {
                    key: text(tls::TLS_KEY)?,
                    cert,
                    ca,
                };
                return Ok(Kept { version, held });
            }
        };
        let Some(renewed) = held
            .renewed(&names, validity, now)
            .map_err(CertificateError::Tls)?
        else {
            return Ok(Kept {
                version,
                held: Held::Generated(held),
            });
        };
        let body = secret_body(secret, &renewed, Some(&version));
        match send(client, secret, http::Method::PUT, Some(body)).await {
            Ok(written) => {
                tracing::info!(target: "kopf::admission", "renewed the webhook certificate in the Secret {}", shown(secret));
                return Ok(Kept {
                    version: version_of(&written),
                    held: Held::Generated(renewed),
                });
            }
            // Renewed by another replica meanwhile: read it again.
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(error) => return Err(failed(error_text(&error, "update"))),
        }
    }
    Err(failed(
        "it kept changing while it was read and written; retrying later".into(),
    ))
}

fn error_text(error: &kube::Error, verb: &str) -> String {
    match error {
        kube::Error::Api(status) if status.code == 403 => format!(
            "forbidden to {verb} it; the operator's RBAC needs `get`, `create` and `update` on \
             that Secret"
        ),
        error => format!("cannot {verb} it: {error}"),
    }
}

/// The Secret that keeps these certificates (`kubernetes.io/tls`); with the resourceVersion
/// it replaces, if any.
fn secret_body(secret: &WebhookSecret, generated: &Generated, version: Option<&str>) -> Value {
    let encode = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let data: serde_json::Map<String, Value> = generated
        .to_data()
        .into_iter()
        .map(|(key, text)| (key.to_string(), json!(encode(&text))))
        .collect();
    let mut metadata = json!({"name": secret.name, "namespace": secret.namespace});
    if let Some(version) = version {
        metadata["resourceVersion"] = json!(version);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": metadata,
        "data": data,
    })
}

/// The Secret's `data`, decoded to text.
fn decoded(secret: &Value) -> Result<BTreeMap<String, String>, String> {
    let Some(data) = secret["data"].as_object() else {
        return Ok(BTreeMap::new());
    };
    data.iter()
        .map(|(key, value)| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(value.as_str().unwrap_or_default())
                .map_err(|error| format!("its {key} is not base64: {error}"))?;
            let text =
                String::from_utf8(bytes).map_err(|_| format!("its {key} is not PEM text"))?;
            Ok((key.clone(), text))
        })
        .collect()
}

fn version_of(secret: &Value) -> String {
    secret["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// One request to the Secret (GET, PUT) or its namespace's Secrets (POST).
async fn send(
    client: &kube::Client,
    secret: &WebhookSecret,
    method: http::Method,
    body: Option<Value>,
) -> Result<Value, kube::Error> {
    let collection = format!("/api/v1/namespaces/{}/secrets", secret.namespace);
    let uri = match method {
        http::Method::POST => collection,
        _ => format!("{collection}/{}", secret.name),
    };
    let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let request = http::Request::builder()
        .method(method)
        .uri(uri)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body)
        .map_err(kube::Error::HttpError)?;
    client.request::<Value>(request).await
}
