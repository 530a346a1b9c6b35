//! Where and how the admission webhooks are served (Kopf's `kopf.WebhookServer` and its
//! flavours), and what the cluster is told to call: the client config of the webhook
//! configurations.
//!
//! Plain options: the server that runs them is in `engines::webhooks`.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

/// The operator's HTTPS server for admission webhooks (Kopf's `kopf.WebhookServer`), as
/// [`AdmissionSettings::server`](crate::settings::AdmissionSettings::server) selects it.
///
/// It listens on `addr:port`; the cluster calls it at `https://host:port/path/<handler-id>`
/// (or through a Kubernetes Service, see [`service`](Self::service)). Without a certificate
/// given, it makes a CA and a serving certificate at every start, for the host, the address
/// and the extra names, and tells the cluster to trust that CA (`caBundle`). With
/// [`certificate`](Self::certificate) files, it serves them and reloads them when they
/// change (checked every [`reload_interval`](Self::reload_interval)). With a
/// [`secret`](Self::secret), replicas share one certificate: the first makes it and keeps it
/// in the Secret, the others read it from there.
///
/// Generated certificates are renewed before they expire (when a third of their
/// [`certificate_validity`](Self::certificate_validity) is left), on the same CA, so the
/// cluster's trust does not change; the CA itself (valid ten times as long) is renewed by
/// publishing the next CA long before it signs anything. The verification CA of client
/// certificates ([`verify_clients`](Self::verify_clients)) is read again when it changes.
///
/// ```
/// let mut settings = kopf::Settings::default();
/// // A cluster in k3d reaches the host as `host.k3d.internal`.
/// settings.admission.server = Some(kopf::admission::WebhookServer::k3d().port(9443));
/// settings.admission.managed = Some("auto.kopf.dev".into());
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WebhookServer {
    /// The address to listen on; `None` (the default) is every interface.
    pub addr: Option<IpAddr>,
    /// The port to listen on; `None` (the default) is a free port picked at the start.
    pub port: Option<u16>,
    /// The host the cluster calls; `None` is derived from `addr`: `localhost` when it is
    /// `None`, `127.0.0.1` for `0.0.0.0`, `::1` for `::`, else the address itself.
    pub host: Option<String>,
    /// The path prefix of the webhooks' URLs (none by default): a handler is called at
    /// `<path>/<handler-id>`.
    pub path: String,
    /// The serving certificate (its chain) and its private key, as PEM files; `None` (the
    /// default) makes a self-signed CA and certificate at every start.
    pub certificate: Option<CertificateFiles>,
    /// What the cluster is told to trust (`caBundle`) for the given
    /// [`certificate`](Self::certificate) files, as PEM: `None` (the default) is `cafile`, or
    /// the certificate file itself. Ignored when the certificate is generated: the cluster is
    /// then told to trust the generated CA (as in Kopf).
    pub cadata: Option<String>,
    /// A PEM file of what the cluster is told to trust for the given certificate files, read
    /// at every (re)load; ignored when the certificate is generated, as `cadata` is.
    pub cafile: Option<PathBuf>,
    /// More names (DNS names or IP addresses) for the generated certificate.
    pub extra_sans: Vec<String>,
    /// Call the webhooks through this Service rather than a URL.
    pub service: Option<WebhookService>,
    /// How often the certificate files are checked for changes (Kopf: 60 s).
    pub reload_interval: Duration,
    /// Require a client certificate issued by a CA of this PEM file, read at the start and
    /// again every reload interval (Kopf's `verify_cafile`); `None` (the default) takes any
    /// client certificate, or none, and passes it on to the handlers unverified.
    pub verify_cafile: Option<PathBuf>,
    /// Keep the certificate in this Secret, shared by every replica of the operator; `None`
    /// (the default) keeps it in memory, one per process. Ignored with certificate files.
    pub secret: Option<WebhookSecret>,
    /// How long generated serving certificates are valid (365 days by default; their CA ten
    /// times as long); they are renewed when a third of it is left.
    pub certificate_validity: Duration,
    /// Serve plain HTTP, no TLS (Kopf's `insecure`): for a server behind a proxy that
    /// terminates TLS (kube-apiserver itself calls only `https://`). No certificate is made;
    /// the cluster is told `http://` URLs, and to trust `cadata` or `cafile` if given.
    pub insecure: bool,
    /// Write what the cluster is told to trust (the CA bundle, PEM) to this file at the start
    /// and whenever it changes (Kopf's `cadump`), e.g. for `curl --cacert`. Never the key.
    pub cadump: Option<PathBuf>,
    /// The password of an encrypted `pkeyfile` (PKCS#8, `ENCRYPTED PRIVATE KEY`), as Kopf's
    /// `password`. Generated keys are never written to a file here (a Secret holds them
    /// unencrypted, as `kubernetes.io/tls` requires), so it applies to given files only.
    pub password: Option<String>,
    /// Guess the host the cluster calls from the cluster itself, at the start (Kopf's
    /// `WebhookAutoServer`; see [`auto`](Self::auto)). A `host` given wins.
    pub detect_host: bool,
}

impl std::fmt::Debug for WebhookServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Every field but the password's value.
        f.debug_struct("WebhookServer")
            .field("addr", &self.addr)
            .field("port", &self.port)
            .field("host", &self.host)
            .field("path", &self.path)
            .field("certificate", &self.certificate)
            .field("cadata", &self.cadata)
            .field("cafile", &self.cafile)
            .field("extra_sans", &self.extra_sans)
            .field("service", &self.service)
            .field("reload_interval", &self.reload_interval)
            .field("verify_cafile", &self.verify_cafile)
            .field("secret", &self.secret)
            .field("certificate_validity", &self.certificate_validity)
            .field("insecure", &self.insecure)
            .field("cadump", &self.cadump)
            .field("password", &self.password.as_ref().map(|_| "<hidden>"))
            .field("detect_host", &self.detect_host)
            .finish()
    }
}

/// A Secret that keeps the webhook server's certificate for every replica of the operator.
///
/// If it is missing, the first replica makes a CA and a serving certificate and creates it
/// (type `kubernetes.io/tls`: `tls.crt`, `tls.key`, plus `ca.crt`, the CAs to trust, and
/// `ca.key`, the key that signs); the others read it. Whichever replica sees a certificate due
/// for renewal renews it in the Secret (guarded by its resourceVersion), and every replica
/// serves what the Secret holds within a reload interval. A Secret made by someone else (e.g.
/// cert-manager, without `ca.key`) is served as it is and never renewed here: `tls.crt` and
/// `tls.key`, with `ca.crt` (or the certificate itself) as what the cluster trusts. RBAC:
/// `get`, `create` and `update` on that Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookSecret {
    /// The Secret's namespace; empty is the client's default namespace (the pod's own).
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
}

/// A serving certificate and its key, as PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateFiles {
    /// The certificate, or a chain beginning with it.
    pub certfile: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub pkeyfile: PathBuf,
}

/// A Kubernetes Service in front of the operator (`clientConfig.service`): the cluster calls
/// `https://<name>.<namespace>.svc:<port><path>/<handler-id>`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WebhookService {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub name: String,
    /// The Service's port (443 by default).
    pub port: u16,
}

impl Default for WebhookServer {
    fn default() -> Self {
        WebhookServer {
            addr: None,
            port: None,
            host: None,
            path: String::new(),
            certificate: None,
            cadata: None,
            cafile: None,
            extra_sans: Vec::new(),
            service: None,
            reload_interval: Duration::from_secs(60),
            verify_cafile: None,
            secret: None,
            certificate_validity: Duration::from_secs(365 * 24 * 3600),
            insecure: false,
            cadump: None,
            password: None,
            detect_host: false,
        }
    }
}

impl WebhookServer {
    /// On every interface, a free port, a self-signed certificate, called as `localhost`.
    pub fn new() -> WebhookServer {
        WebhookServer::default()
    }

    /// For a cluster in k3d, which reaches the host as `host.k3d.internal` (Kopf's
    /// `WebhookK3dServer`): every interface, a free port, a self-signed certificate for that
    /// name. A [`host`](Self::host) given later wins, as Kopf's `host=` wins over its default.
    ///
    /// ```
    /// use kopf::admission::WebhookServer;
    ///
    /// let server = WebhookServer::k3d().port(9443);
    /// assert_eq!(server.host.as_deref(), Some("host.k3d.internal"));
    /// assert!(!server.insecure);
    /// let mut settings = kopf::Settings::default();
    /// settings.admission.server = Some(server);
    /// ```
    pub fn k3d() -> WebhookServer {
        WebhookServer::new().host("host.k3d.internal")
    }

    /// For a cluster in minikube, which reaches the host as `host.minikube.internal` (Kopf's
    /// `WebhookMinikubeServer`): otherwise as [`new`](Self::new).
    ///
    /// ```
    /// let server = kopf::admission::WebhookServer::minikube();
    /// assert_eq!(server.host.as_deref(), Some("host.minikube.internal"));
    /// assert_eq!((server.addr, server.port), (None, None));
    /// ```
    pub fn minikube() -> WebhookServer {
        WebhookServer::new().host("host.minikube.internal")
    }

    /// For a cluster in Docker Desktop (or kind on it), which reaches the host as
    /// `host.docker.internal` (Kopf's `WebhookDockerDesktopServer`): otherwise as
    /// [`new`](Self::new).
    ///
    /// ```
    /// let server = kopf::admission::WebhookServer::docker_desktop().port(9443);
    /// assert_eq!(server.host.as_deref(), Some("host.docker.internal"));
    /// assert_eq!(server.port, Some(9443));
    /// ```
    pub fn docker_desktop() -> WebhookServer {
        WebhookServer::new().host("host.docker.internal")
    }

    /// A server that guesses at the start how the cluster reaches this host (Kopf's
    /// `WebhookAutoServer`), as Kopf guesses it: from the API server's TLS certificate, read
    /// without trusting it (a subject or organization `k3s`, or an issuer `k3s-…`: k3d's
    /// `host.k3d.internal`; a subject `minikube` or an issuer `minikubeCA`: minikube's
    /// `host.minikube.internal`; a name `docker-for-desktop`: `host.docker.internal`), else
    /// from its version (`+k3s`: k3d's). Otherwise, a plain local server ([`new`](Self::new)).
    ///
    /// The certificate is read where the operator knows the API server's URL (its kubeconfig
    /// or in-cluster configuration, or a login handler's credentials); with a client given
    /// by the embedder, only the version is asked.
    pub fn auto() -> WebhookServer {
        WebhookServer {
            detect_host: true,
            ..WebhookServer::new()
        }
    }

    /// Serve plain HTTP (Kopf's `insecure=True`), for a server behind a proxy that
    /// terminates TLS; see [`insecure`](Self#structfield.insecure).
    pub fn insecure(mut self) -> WebhookServer {
        self.insecure = true;
        self
    }

    /// Decrypt the given `pkeyfile` with this password (Kopf's `password`).
    pub fn password(mut self, password: impl Into<String>) -> WebhookServer {
        self.password = Some(password.into());
        self
    }

    /// Write the CA bundle that the cluster is told to trust to this file (Kopf's `cadump`).
    pub fn cadump(mut self, path: impl Into<PathBuf>) -> WebhookServer {
        self.cadump = Some(path.into());
        self
    }

    /// Listen on this address (e.g. `127.0.0.1`).
    pub fn addr(mut self, addr: IpAddr) -> WebhookServer {
        self.addr = Some(addr);
        self
    }

    /// Listen on this port.
    pub fn port(mut self, port: u16) -> WebhookServer {
        self.port = Some(port);
        self
    }

    /// The host the cluster calls, and a name of the generated certificate.
    pub fn host(mut self, host: impl Into<String>) -> WebhookServer {
        self.host = Some(host.into());
        self
    }

    /// The path prefix of the webhooks' URLs, e.g. `/webhooks`.
    pub fn path(mut self, path: impl Into<String>) -> WebhookServer {
        self.path = path.into();
        self
    }

    /// Serve this certificate (PEM; a chain beginning with it) and key, reloaded when the
    /// files change.
    pub fn certificate(
        mut self,
        certfile: impl Into<PathBuf>,
        pkeyfile: impl Into<PathBuf>,
    ) -> WebhookServer {
        self.certificate = Some(CertificateFiles {
            certfile: certfile.into(),
            pkeyfile: pkeyfile.into(),
        });
        self
    }

    /// Tell the cluster to trust the CA of this PEM file, for the given certificate files.
    pub fn cafile(mut self, cafile: impl Into<PathBuf>) -> WebhookServer {
        self.cafile = Some(cafile.into());
        self
    }

    /// Tell the cluster to trust this CA (PEM), for the given certificate files.
    pub fn cadata(mut self, cadata: impl Into<String>) -> WebhookServer {
        self.cadata = Some(cadata.into());
        self
    }

    /// More names (DNS names or IP addresses) for the generated certificate.
    pub fn extra_sans<S: Into<String>>(mut self, sans: impl IntoIterator<Item = S>) -> Self {
        self.extra_sans.extend(sans.into_iter().map(Into::into));
        self
    }

    /// Require a client certificate issued by a CA of this PEM file: kube-apiserver presents
    /// one when its admission configuration (`--admission-control-config-file`) gives it one.
    pub fn verify_clients(mut self, cafile: impl Into<PathBuf>) -> WebhookServer {
        self.verify_cafile = Some(cafile.into());
        self
    }

    /// Keep the certificate in this Secret, shared by every replica (see [`WebhookSecret`]).
    ///
    /// ```
    /// let server = kopf::admission::WebhookServer::service("operators", "my-operator")
    ///     .secret("operators", "my-operator-webhook-tls");
    /// ```
    pub fn secret(mut self, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        self.secret = Some(WebhookSecret {
            namespace: namespace.into(),
            name: name.into(),
        });
        self
    }

    /// Generated serving certificates are valid this long (their CA ten times as long), and
    /// renewed when a third of it is left.
    pub fn certificate_validity(mut self, validity: Duration) -> WebhookServer {
        self.certificate_validity = validity;
        self
    }

    /// Check the certificate files (or Secret, or client CA file) for changes this often.
    pub fn reload_interval(mut self, interval: Duration) -> WebhookServer {
        self.reload_interval = interval;
        self
    }

    /// Called through this Service (its port 443) rather than a URL: the Service must route
    /// to this server's port. The generated certificate names `<name>.<namespace>.svc` and
    /// `<name>.<namespace>.svc.cluster.local`.
    ///
    /// ```
    /// let server = kopf::admission::WebhookServer::service("operators", "my-operator").port(9443);
    /// ```
    pub fn service(namespace: impl Into<String>, name: impl Into<String>) -> WebhookServer {
        WebhookServer {
            service: Some(WebhookService {
                namespace: namespace.into(),
                name: name.into(),
                port: 443,
            }),
            ..WebhookServer::new()
        }
    }

    /// The Service's port, when called through a Service (443 by default).
    pub fn service_port(mut self, port: u16) -> WebhookServer {
        if let Some(service) = &mut self.service {
            service.port = port;
        }
        self
    }

    /// The server of a `--webhook-server` URL, `https://ADDRESS[:PORT][/PATH]`: listening on
    /// the IP address (`0.0.0.0`, `[::]`, `127.0.0.1`…), on the port (none or 0: a free one),
    /// serving the path; `http://` serves plain HTTP ([`insecure`](Self::insecure)); the error
    /// says what is wrong with the URL.
    pub(crate) fn from_url(url: &str) -> Result<WebhookServer, String> {
        let invalid = |reason: &str| {
            format!(
                "{url:?} is not a webhook server URL: {reason} (expected https://ADDRESS[:PORT][/PATH], e.g. https://0.0.0.0:9443/webhooks, or http:// behind a proxy that terminates TLS)"
            )
        };
        let uri: http::Uri = url.parse().map_err(|_| invalid("not a URL"))?;
        let insecure = match uri.scheme_str() {
            Some("https") => false,
            Some("http") => true,
            _ => {
                return Err(invalid(
                    "the scheme must be https (kube-apiserver calls only https), or http behind a proxy that terminates TLS",
                ));
            }
        };
        let host = uri.host().unwrap_or_default();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let addr: IpAddr = host
            .parse()
            .map_err(|_| invalid("the host must be an IP address to listen on"))?;
        let mut server = WebhookServer::new().addr(addr).path(uri.path());
        server.port = uri.port_u16().filter(|port| *port != 0);
        server.insecure = insecure;
        Ok(server)
    }

    /// The host the cluster calls: the given one, or a form of the address that reaches it.
    pub(crate) fn reported_host(&self) -> String {
        if let Some(host) = &self.host {
            return host.clone();
        }
        match self.addr {
            None => "localhost".into(),
            Some(addr) if addr.is_unspecified() && addr.is_ipv4() => "127.0.0.1".into(),
            Some(addr) if addr.is_unspecified() => "::1".into(),
            Some(addr) => addr.to_string(),
        }
    }

    /// The names of the generated certificate: the host, the address (unless unspecified),
    /// the Service's names, and the extra ones, each once.
    pub(crate) fn subject_names(&self) -> Vec<String> {
        let mut names = vec![self.reported_host()];
        if let Some(addr) = self.addr.filter(|addr| !addr.is_unspecified()) {
            names.push(addr.to_string());
        }
        if let Some(service) = &self.service {
            let svc = format!("{}.{}.svc", service.name, service.namespace);
            names.push(format!("{svc}.cluster.local"));
            names.insert(0, svc);
        }
        names.extend(self.extra_sans.iter().cloned());
        let mut unique = Vec::new();
        for name in names {
            if !unique.contains(&name) {
                unique.push(name);
            }
        }
        unique
    }

    /// The path prefix without a trailing slash, with a leading one unless empty.
    pub(crate) fn path_prefix(&self) -> String {
        let path = self.path.trim_end_matches('/');
        match path {
            "" => String::new(),
            path if path.starts_with('/') => path.to_string(),
            path => format!("/{path}"),
        }
    }

    /// What the cluster is told to call, given the port listened on and the CA to trust.
    pub(crate) fn client_config(&self, port: u16, ca_bundle: Option<String>) -> ClientConfig {
        let path = self.path_prefix();
        let target = match &self.service {
            Some(service) => Target::Service {
                namespace: service.namespace.clone(),
                name: service.name.clone(),
                port: service.port,
                path,
            },
            None => {
                let host = self.reported_host();
                let host = match host.parse::<IpAddr>() {
                    Ok(IpAddr::V6(v6)) => format!("[{v6}]"),
                    _ => host,
                };
                let scheme = if self.insecure { "http" } else { "https" };
                Target::Url(format!("{scheme}://{host}:{port}{path}"))
            }
        };
        ClientConfig { target, ca_bundle }
    }
}

/// What the cluster is told to call: a webhook configuration's `clientConfig` without the
/// handler's part (Kopf's `WebhookClientConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientConfig {
    /// Where the server is.
    pub(crate) target: Target,
    /// What the cluster trusts when it calls (PEM); `None` is the cluster's system roots.
    pub(crate) ca_bundle: Option<String>,
}

/// Where the cluster reaches the webhook server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// At this `https://` URL (with no trailing slash).
    Url(String),
    /// Through this Service.
    Service {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
        /// The Service's port.
        port: u16,
        /// The path prefix (empty, or with a leading slash).
        path: String,
    },
}

impl ClientConfig {
    /// The `clientConfig` of one handler's webhook: the URL or the Service's path with the
    /// handler's id appended (URL-encoded), and the `caBundle` in base64.
    pub(crate) fn for_handler(&self, id: &str) -> Value {
        let id = url_quoted(id);
        let mut config = match &self.target {
            Target::Url(url) => json!({"url": format!("{url}/{id}")}),
            Target::Service {
                namespace,
                name,
                port,
                path,
            } => json!({"service": {
                "namespace": namespace,
                "name": name,
                "port": port,
                "path": format!("{path}/{id}"),
            }}),
        };
        if let Some(bundle) = &self.ca_bundle {
            config["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(bundle));
        }
        config
    }
}

/// A handler's id as one path segment: what is not unreserved in RFC 3986 (or `/`, which
/// Python's `urllib.parse.quote` keeps, as Kopf does) is percent-encoded.
fn url_quoted(id: &str) -> String {
    let mut quoted = String::new();
    for byte in id.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                quoted.push(byte as char);
            }
            _ => quoted.push_str(&format!("%{byte:02X}")),
        }
    }
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reported_host_is_given_or_reaches_the_address() {
        let server = WebhookServer::new();
        assert_eq!(server.reported_host(), "localhost");
        let v4: IpAddr = "0.0.0.0".parse().unwrap();
        assert_eq!(server.clone().addr(v4).reported_host(), "127.0.0.1");
        let v6: IpAddr = "::".parse().unwrap();
        assert_eq!(server.clone().addr(v6).reported_host(), "::1");
        let one: IpAddr = "10.1.2.3".parse().unwrap();
        assert_eq!(server.clone().addr(one).reported_host(), "10.1.2.3");
        assert_eq!(WebhookServer::k3d().reported_host(), "host.k3d.internal");
        assert_eq!(
            WebhookServer::minikube().reported_host(),
            "host.minikube.internal"
        );
        assert_eq!(
            WebhookServer::docker_desktop().reported_host(),
            "host.docker.internal"
        );
    }

    #[test]
    fn webhook_server_urls_give_the_address_port_and_path() {
        let server = WebhookServer::from_url("https://0.0.0.0:9443/hooks").unwrap();
        assert_eq!(server.addr, Some("0.0.0.0".parse().unwrap()));
        assert_eq!(
            (server.port, server.path_prefix().as_str()),
            (Some(9443), "/hooks")
        );
        let server = WebhookServer::from_url("https://[::1]").unwrap();
        assert_eq!((server.port, server.path_prefix().as_str()), (None, ""));
        assert_eq!(server.reported_host(), "::1");
        let plain = WebhookServer::from_url("http://0.0.0.0:8080/hooks").unwrap();
        assert!(plain.insecure, "http serves plain HTTP");
        assert!(!server.insecure);
        assert_eq!(
            plain.client_config(8080, None).target,
            Target::Url("http://127.0.0.1:8080/hooks".into())
        );
        for bad in [
            "ftp://0.0.0.0:9443/",
            "https://localhost:9443/",
            "0.0.0.0:9443",
        ] {
            let error = WebhookServer::from_url(bad).unwrap_err();
            assert!(
                error.contains("expected https://ADDRESS[:PORT][/PATH]"),
                "{error}"
            );
        }
    }

    #[test]
    fn the_names_are_the_host_the_address_the_service_and_the_extra_ones() {
        let server = WebhookServer::new()
            .addr("0.0.0.0".parse().unwrap())
            .extra_sans(["example.com", "127.0.0.1"]);
        assert_eq!(server.subject_names(), ["127.0.0.1", "example.com"]);
        let server = WebhookServer::k3d().addr("10.0.0.1".parse().unwrap());
        assert_eq!(server.subject_names(), ["host.k3d.internal", "10.0.0.1"]);
        let server = WebhookServer::service("ops", "op");
        assert_eq!(
            server.subject_names(),
            ["op.ops.svc", "localhost", "op.ops.svc.cluster.local"]
        );
    }

    #[test]
    fn client_configs_append_the_quoted_id_to_the_url_or_the_service_path() {
        let server = WebhookServer::new()
            .addr("::".parse().unwrap())
            .path("hooks/");
        let config = server.client_config(9443, Some("PEM".into()));
        assert_eq!(
            config.for_handler("check/spec.x y"),
            json!({"url": "https://[::1]:9443/hooks/check/spec.x%20y", "caBundle": "UEVN"})
        );
        let server = WebhookServer::service("ops", "op").service_port(8443);
        assert_eq!(
            server.client_config(1, None).for_handler("fn"),
            json!({"service": {"namespace": "ops", "name": "op", "port": 8443, "path": "/fn"}})
        );
    }
}
