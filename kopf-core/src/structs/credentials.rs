//! Credentials for the API server: what login handlers return, and why they may not do.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// How to reach and authenticate to the API server: what an `on_login` handler returns (Kopf's
/// `kopf.ConnectionInfo`). PEM data is given as text; paths name files read at login.
///
/// ```
/// let info = kopf::login::ConnectionInfo::new("https://10.0.0.1:6443")
///     .token("secret-token")
///     .ca_data("-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n")
///     .default_namespace("operators");
/// ```
///
/// A handler that already has a whole [`kube::Config`] returns that instead (see
/// [`Credentials`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionInfo {
    /// The API server's URL, e.g. `https://10.0.0.1:6443`.
    pub server: String,
    /// The CA certificate(s) to trust, in PEM.
    pub ca_data: Option<String>,
    /// A file with the CA certificate(s) to trust, in PEM.
    pub ca_path: Option<String>,
    /// Skip verifying the server's certificate (for development only).
    pub insecure: bool,
    /// A bearer token.
    pub token: Option<String>,
    /// A user name for basic authentication.
    pub username: Option<String>,
    /// A password for basic authentication.
    pub password: Option<String>,
    /// A client certificate, in PEM.
    pub certificate_data: Option<String>,
    /// A file with a client certificate, in PEM.
    pub certificate_path: Option<String>,
    /// The client certificate's private key, in PEM.
    pub private_key_data: Option<String>,
    /// A file with the client certificate's private key, in PEM.
    pub private_key_path: Option<String>,
    /// The namespace of requests that name none (default `default`).
    pub default_namespace: Option<String>,
    /// The proxy to reach the server through (a kubeconfig's `proxy-url`); `None` is the
    /// environment's, if `settings.networking.trust_env`.
    pub proxy_url: Option<String>,
}

impl ConnectionInfo {
    /// The server's URL; add credentials with the other methods.
    pub fn new(server: impl Into<String>) -> ConnectionInfo {
        ConnectionInfo {
            server: server.into(),
            ..ConnectionInfo::default()
        }
    }

    /// Authenticate with a bearer token.
    pub fn token(mut self, token: impl Into<String>) -> ConnectionInfo {
        self.token = Some(token.into());
        self
    }

    /// Authenticate with a user name and a password (basic authentication).
    pub fn basic(
        mut self,
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> ConnectionInfo {
        self.username = Some(username.into());
        self.password = Some(password.into());
        self
    }

    /// Authenticate with a client certificate and its private key, both in PEM.
    pub fn client_certificate(
        mut self,
        certificate: impl Into<String>,
        private_key: impl Into<String>,
    ) -> ConnectionInfo {
        self.certificate_data = Some(certificate.into());
        self.private_key_data = Some(private_key.into());
        self
    }

    /// Trust these CA certificates (PEM).
    pub fn ca_data(mut self, pem: impl Into<String>) -> ConnectionInfo {
        self.ca_data = Some(pem.into());
        self
    }

    /// Do not verify the server's certificate (for development only).
    pub fn insecure(mut self) -> ConnectionInfo {
        self.insecure = true;
        self
    }

    /// The namespace of requests that name none.
    pub fn default_namespace(mut self, namespace: impl Into<String>) -> ConnectionInfo {
        self.default_namespace = Some(namespace.into());
        self
    }

    /// The kube-client configuration for these credentials.
    pub async fn into_config(self) -> std::result::Result<kube::Config, LoginError> {
        use base64::Engine as _;
        let encode = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
        let mut cluster = serde_json::Map::new();
        cluster.insert("server".into(), self.server.clone().into());
        if let Some(pem) = &self.ca_data {
            cluster.insert("certificate-authority-data".into(), encode(pem).into());
        }
        if let Some(path) = &self.ca_path {
            cluster.insert("certificate-authority".into(), path.clone().into());
        }
        if self.insecure {
            cluster.insert("insecure-skip-tls-verify".into(), true.into());
        }
        if let Some(url) = self.proxy_url.as_ref().filter(|url| !url.is_empty()) {
            cluster.insert("proxy-url".into(), url.clone().into());
        }
        let mut user = serde_json::Map::new();
        let mut put = |key: &str, value: Option<String>| {
            if let Some(value) = value {
                user.insert(key.into(), value.into());
            }
        };
        put("token", self.token);
        put("username", self.username);
        put("password", self.password);
        put(
            "client-certificate-data",
            self.certificate_data.as_deref().map(encode),
        );
        put("client-certificate", self.certificate_path);
        put(
            "client-key-data",
            self.private_key_data.as_deref().map(encode),
        );
        put("client-key", self.private_key_path);
        let mut context = serde_json::json!({"cluster": "login", "user": "login"});
        if let Some(namespace) = self.default_namespace {
            context["namespace"] = namespace.into();
        }
        let kubeconfig = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "login", "cluster": cluster}],
            "users": [{"name": "login", "user": user}],
            "contexts": [{"name": "login", "context": context}],
            "current-context": "login",
        });
        let invalid = |reason: String| LoginError::Invalid {
            server: self.server.clone(),
            reason,
        };
        let kubeconfig: kube::config::Kubeconfig =
            serde_json::from_value(kubeconfig).map_err(|e| invalid(e.to_string()))?;
        kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .map_err(|e| invalid(e.to_string()))
    }
}

/// What a login handler returns: Kopf-style [`ConnectionInfo`], or a whole [`kube::Config`].
#[derive(Debug, Clone)]
pub enum Credentials {
    /// Kopf's connection info.
    Info(Box<ConnectionInfo>),
    /// A kube-client configuration, used as it is.
    Config(Box<kube::Config>),
}

impl From<ConnectionInfo> for Credentials {
    fn from(info: ConnectionInfo) -> Self {
        Credentials::Info(Box::new(info))
    }
}

impl From<kube::Config> for Credentials {
    fn from(config: kube::Config) -> Self {
        Credentials::Config(Box::new(config))
    }
}

impl Credentials {
    /// A client for these credentials, whose connections run on `executor`; Kopf-style
    /// connection info connects within `connect_timeout` (a whole configuration is used as
    /// it is).
    pub(crate) async fn into_client<E: ConnectionExecutor>(
        self,
        executor: E,
        connect_timeout: Option<Duration>,
        trust_env: bool,
    ) -> std::result::Result<kube::Client, LoginError> {
        let config = match self {
            Credentials::Info(info) => {
                let named = info.proxy_url.clone().filter(|url| !url.is_empty());
                let mut config = info.into_config().await?;
                config.connect_timeout = connect_timeout;
                // Its own proxy, or else the environment's, if trusted.
                config.proxy_url = proxy(&config.cluster_url, named.as_deref(), trust_env, env_var)
                    .map_err(|reason| LoginError::Invalid {
                        server: config.cluster_url.to_string(),
                        reason,
                    })?;
                config.default_retry = false;
                config
            }
            Credentials::Config(config) => *config,
        };
        let config = with_user_agent(config);
        let server = config.cluster_url.to_string();
        client(config, executor).map_err(|e| LoginError::Invalid {
            server,
            reason: e.to_string(),
        })
    }
}

/// The operator's `User-Agent` (`kopf-rs/VERSION`), unless the configuration sets one: API
/// servers' audit logs and `managedFields` then name the operator (as `kopf/VERSION` names
/// Python Kopf), and tests can aim faults at its requests.
pub(crate) fn with_user_agent(mut config: kube::Config) -> kube::Config {
    let set = config
        .headers
        .iter()
        .any(|(name, _)| name == http::header::USER_AGENT);
    if !set {
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static(concat!("kopf-rs/", env!("CARGO_PKG_VERSION"))),
        ));
    }
    config
}

/// What runs a client's connections: hyper's executor, as kube-client's `ClientBuilder`
/// takes it (the operator gives its own, whose connections end with its run).
pub(crate) trait ConnectionExecutor:
    hyper::rt::Executor<Pin<Box<dyn Future<Output = ()> + Send>>> + Send + Sync + Clone + 'static
{
}

impl<E> ConnectionExecutor for E where
    E: hyper::rt::Executor<Pin<Box<dyn Future<Output = ()> + Send>>>
        + Send
        + Sync
        + Clone
        + 'static
{
}

/// kube-client's default client (`Client::try_default`: the kubeconfig or the in-cluster
/// environment), sending the operator's `User-Agent`, its connections run on `executor` and
/// made within `connect_timeout` (Kopf's `settings.networking.connect_timeout`), through the
/// kubeconfig's `proxy-url`, or the environment's proxy if `trust_env` (Kopf's
/// `settings.networking.trust_env`); and the API server's URL, which the client does not tell.
///
/// kube-client's own retries (of `429`, `503` and `504`, up to 15 times) are off: the
/// operator retries as Kopf does (`error_backoffs`, `posting.default_backoffs`, the
/// `Retry-After` of `429`s), and hidden retries would multiply those and delay its stops.
pub(crate) async fn default_client<E: ConnectionExecutor>(
    executor: E,
    connect_timeout: Option<Duration>,
    trust_env: bool,
) -> kube::Result<(kube::Client, http::Uri)> {
    let mut config = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    config.connect_timeout = connect_timeout;
    config.default_retry = false;
    // kube-client takes `HTTPS_PROXY` from the environment where the kubeconfig names no
    // proxy: Kopf does not, unless it trusts the environment.
    let named = kubeconfig_proxy_url();
    config.proxy_url = proxy(&config.cluster_url, named.as_deref(), trust_env, env_var)
        .map_err(|reason| kube::Error::Service(reason.into()))?;
    let url = config.cluster_url.clone();
    Ok((client(with_user_agent(config), executor)?, url))
}

/// The proxy of the kubeconfig's current context, if its cluster names one (`proxy-url`).
fn kubeconfig_proxy_url() -> Option<String> {
    let kubeconfig = kube::config::Kubeconfig::read().ok()?;
    let context = kubeconfig.current_context.as_deref()?;
    let cluster = kubeconfig
        .contexts
        .iter()
        .find(|named| named.name == context)?
        .context
        .as_ref()?
        .cluster
        .clone();
    kubeconfig
        .clusters
        .iter()
        .find(|named| named.name == cluster)?
        .cluster
        .as_ref()?
        .proxy_url
        .clone()
        .filter(|url| !url.is_empty())
}

/// An environment variable, if set and not empty.
fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

/// The proxy of a client to `server`, as Kopf's aiohttp sessions choose it: the kubeconfig's
/// `proxy-url` if it names one; else, only if `trust_env`, the environment's
/// (`HTTPS_PROXY`/`https_proxy` for an HTTPS server, `HTTP_PROXY`/`http_proxy` for plain
/// HTTP), unless `NO_PROXY`/`no_proxy` exempts the server's host (`*`, a host name, or a
/// domain and its subdomains, with or without a leading dot).
pub(crate) fn proxy(
    server: &http::Uri,
    kubeconfig: Option<&str>,
    trust_env: bool,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<http::Uri>, String> {
    let parse = |url: &str, whence: &str| {
        url.parse::<http::Uri>()
            .map(Some)
            .map_err(|error| format!("the proxy {url:?} ({whence}) is not a URL: {error}"))
    };
    if let Some(url) = kubeconfig {
        return parse(url, "the kubeconfig's proxy-url");
    }
    if !trust_env {
        return Ok(None);
    }
    let names: [&str; 2] = if server.scheme_str() == Some("http") {
        ["HTTP_PROXY", "http_proxy"]
    } else {
        ["HTTPS_PROXY", "https_proxy"]
    };
    let Some((name, url)) = names
        .into_iter()
        .find_map(|name| env(name).map(|url| (name, url)))
    else {
        return Ok(None);
    };
    let host = server.host().unwrap_or_default().to_ascii_lowercase();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let exempt = env("NO_PROXY")
        .or_else(|| env("no_proxy"))
        .is_some_and(|list| {
            list.split(',').map(str::trim).any(|entry| {
                let entry = entry.trim_start_matches('.').to_ascii_lowercase();
                // A port is cut off; an IPv6 address (colons in it) is kept whole.
                let entry = match entry.matches(':').count() {
                    1 => entry.split(':').next().unwrap_or_default(),
                    _ => entry.trim_start_matches('[').trim_end_matches(']'),
                };
                entry == "*"
                    || (!entry.is_empty()
                        && (host == entry || host.ends_with(&format!(".{entry}"))))
            })
        });
    if exempt {
        return Ok(None);
    }
    parse(&url, name)
}

/// kube-client's default stack for `config`, its connections run on `executor`.
fn client<E: ConnectionExecutor>(config: kube::Config, executor: E) -> kube::Result<kube::Client> {
    Ok(kube::client::ClientBuilder::try_from((config, executor))?.build())
}

/// Why the operator could not log in.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// No login handler gave credentials: each failed for good or returned none.
    #[error("no credentials: every login handler failed or returned none ({0}); check their logs")]
    NoCredentials(String),
    /// The credentials cannot make a client.
    #[error("the credentials for {server} are invalid: {reason}")]
    Invalid {
        /// The server the credentials are for.
        server: String,
        /// What is wrong.
        reason: String,
    },
    /// The operator stopped during the login.
    #[error("the operator stopped during the login")]
    Stopped,
    /// The files of the credentials (a kubeconfig, a service account's) cannot be read or
    /// make no sense ([`login_with_kubeconfig`](crate::login::login_with_kubeconfig)).
    #[error("cannot log in with {path}: {reason}")]
    Files {
        /// The file or files.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_string())
        }
    }

    /// Kopf's `trust_env`: off, only the kubeconfig's `proxy-url` is used, never the
    /// environment's; on, the environment's by the server's scheme, unless `NO_PROXY`
    /// exempts the host.
    #[test]
    fn the_environments_proxy_is_used_only_when_trusted() {
        let https: http::Uri = "https://api.example.com:6443".parse().unwrap();
        let plain: http::Uri = "http://127.0.0.1:8080".parse().unwrap();
        let vars = [
            ("HTTPS_PROXY", "http://secure-proxy:3128"),
            ("http_proxy", "http://plain-proxy:3128"),
        ];
        let proxied = |server: &http::Uri, named, trust, vars: &[(&str, &str)]| {
            proxy(server, named, trust, env(vars)).map(|uri| uri.map(|uri| uri.to_string()))
        };
        assert_eq!(proxied(&https, None, false, &vars), Ok(None));
        assert_eq!(
            proxied(&https, Some("http://named:1"), false, &vars),
            Ok(Some("http://named:1/".into())),
            "the kubeconfig's proxy whatever trust_env says"
        );
        assert_eq!(
            proxied(&https, None, true, &vars),
            Ok(Some("http://secure-proxy:3128/".into()))
        );
        assert_eq!(
            proxied(&plain, None, true, &vars),
            Ok(Some("http://plain-proxy:3128/".into()))
        );
        for exempting in [
            "*",
            "example.com",
            ".example.com",
            "api.example.com:6443",
            "a, example.com",
        ] {
            let with = [vars[0], ("NO_PROXY", exempting)];
            assert_eq!(proxied(&https, None, true, &with), Ok(None), "{exempting}");
        }
        for not_exempting in ["ample.com", "other.com", ""] {
            let with = [vars[0], ("no_proxy", not_exempting)];
            assert!(
                proxied(&https, None, true, &with).unwrap().is_some(),
                "{not_exempting}"
            );
        }
        let ipv6: http::Uri = "https://[::1]:6443".parse().unwrap();
        let with = [vars[0], ("NO_PROXY", "::1")];
        assert_eq!(proxied(&ipv6, None, true, &with), Ok(None));
        let broken = [("HTTPS_PROXY", "not a url")];
        let error = proxied(&https, None, true, &broken).unwrap_err();
        assert!(error.contains("HTTPS_PROXY"), "{error}");
    }
}
