//! Kopf's two minimal logins: the credentials of the kubeconfig (as kubectl reads them) and of
//! the pod's service account, as [`ConnectionInfo`] for `#[kopf::on_login]` handlers that
//! want to start from them (Kopf's `kopf.login_with_kubeconfig` and
//! `kopf.login_with_service_account`).
//!
//! Without login handlers the operator logs in as kube-client does, which understands more
//! (exec plugins, token files): these functions are for handlers that change or choose what
//! they return. They read small files, so they block: call them from a sync handler, which
//! runs on the operator's threads.
//!
//! ```no_run
//! #[kopf::on_login]
//! fn login_fn() -> kopf::Result<Option<kopf::login::ConnectionInfo>> {
//!     let info = match kopf::login::login_with_service_account()? {
//!         Some(info) => Some(info),
//!         None => kopf::login::login_with_kubeconfig()?,
//!     };
//!     Ok(info.map(|info| info.default_namespace("operators")))
//! }
//! ```

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::Value;

use crate::structs::credentials::{ConnectionInfo, LoginError};

/// Where a pod's service account is mounted.
const SERVICE_ACCOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The API server as pods reach it.
const IN_CLUSTER_SERVER: &str = "https://kubernetes.default.svc";

/// The credentials of the kubeconfig's current context (Kopf's `kopf.login_with_kubeconfig`):
/// the files of `KUBECONFIG` (merged: the first file that names something wins), or else
/// `~/.kube/config`; `None` if neither is there.
///
/// The server, its CA (`certificate-authority`, `-data`), `insecure-skip-tls-verify`, its
/// `proxy-url`, the user's token (or its auth provider's `access-token`), client certificate
/// and key (files or data), user name and password, and the context's namespace. Nothing is
/// run and no token is refreshed (no exec plugins), as in Kopf.
///
/// A file that cannot be read or parsed, a missing current context, or a context naming a
/// cluster or user that no file has, is an error ([`LoginError::Files`]).
///
/// It reads files, blocking: call it from a sync login handler (those run on a thread of
/// their own) or through `tokio::task::spawn_blocking`, not directly on the async runtime.
pub fn login_with_kubeconfig() -> Result<Option<ConnectionInfo>, LoginError> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let paths: Vec<PathBuf> = match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        Some(list) => std::env::split_paths(&list)
            .filter(|path| !path.as_os_str().is_empty())
            .map(|path| expand_home(&path, home.as_deref()))
            .collect(),
        None => match home.map(|home| home.join(".kube/config")) {
            Some(path) if path.exists() => vec![path],
            _ => return Ok(None),
        },
    };
    if paths.is_empty() {
        return Ok(None);
    }
    from_kubeconfigs(&paths).map(Some)
}

/// The credentials of the pod's service account (Kopf's `kopf.login_with_service_account`):
/// its token, namespace and CA in `/var/run/secrets/kubernetes.io/serviceaccount`, for the
/// server `https://kubernetes.default.svc`; `None` outside a pod (no token file there).
///
/// It reads files, blocking: call it from a sync login handler (those run on a thread of
/// their own) or through `tokio::task::spawn_blocking`, not directly on the async runtime.
pub fn login_with_service_account() -> Result<Option<ConnectionInfo>, LoginError> {
    from_service_account(Path::new(SERVICE_ACCOUNT))
}

/// The service account's credentials mounted in `dir`.
pub(crate) fn from_service_account(dir: &Path) -> Result<Option<ConnectionInfo>, LoginError> {
    let token_path = dir.join("token");
    if !token_path.exists() {
        return Ok(None);
    }
    let token = read(&token_path)?;
    let namespace_path = dir.join("namespace");
    let namespace = match namespace_path.exists() {
        true => Some(read(&namespace_path)?),
        false => None,
    };
    let ca_path = dir.join("ca.crt");
    let mut info = ConnectionInfo::new(IN_CLUSTER_SERVER);
    info.ca_path = ca_path
        .exists()
        .then(|| ca_path.to_string_lossy().into_owned());
    info.token = Some(token.trim().to_owned()).filter(|token| !token.is_empty());
    info.default_namespace = namespace
        .map(|namespace| namespace.trim().to_owned())
        .filter(|namespace| !namespace.is_empty());
    Ok(Some(info))
}

/// The credentials of the current context of these kubeconfig files, merged as kubectl
/// merges them: the first file that sets a value, or names an entry, wins.
pub(crate) fn from_kubeconfigs(paths: &[PathBuf]) -> Result<ConnectionInfo, LoginError> {
    let mut current_context: Option<String> = None;
    let mut contexts = Named::default();
    let mut clusters = Named::default();
    let mut users = Named::default();
    for path in paths {
        let text = read(path)?;
        let config: Value = match serde_norway::from_str::<Option<Value>>(&text) {
            Ok(config) => config.unwrap_or(Value::Null),
            Err(error) => return Err(files(path, format!("not a kubeconfig: {error}"))),
        };
        if current_context.is_none() {
            current_context = config["current-context"]
                .as_str()
                .filter(|name| !name.is_empty())
                .map(str::to_owned);
        }
        contexts.add(&config["contexts"], "context");
        clusters.add(&config["clusters"], "cluster");
        users.add(&config["users"], "user");
    }
    let whence = || {
        paths
            .iter()
            .map(|path| path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let invalid = |reason: String| LoginError::Files {
        path: whence(),
        reason,
    };
    let current = current_context
        .ok_or_else(|| invalid("the current context is not set in the kubeconfigs".into()))?;
    let context = contexts
        .get(&current)
        .ok_or_else(|| invalid(format!("no context named {current:?}")))?;
    let cluster_name = context["cluster"].as_str().unwrap_or_default();
    let cluster = clusters
        .get(cluster_name)
        .ok_or_else(|| invalid(format!("no cluster named {cluster_name:?}")))?;
    let user_name = context["user"].as_str().unwrap_or_default();
    // A context may name no user: an anonymous access.
    let user = users.get(user_name).unwrap_or(&Value::Null);
    let text = |value: &Value| value.as_str().map(str::to_owned);
    let decoded = |value: &Value, field: &str| -> Result<Option<String>, LoginError> {
        let Some(data) = value.as_str() else {
            return Ok(None);
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|error| invalid(format!("{field} is not base64: {error}")))?;
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| invalid(format!("{field} is not PEM text")))
    };
    let provider_token = &user["auth-provider"]["config"]["access-token"];
    let mut info = ConnectionInfo::new(cluster["server"].as_str().unwrap_or_default());
    info.ca_path = text(&cluster["certificate-authority"]);
    info.ca_data = decoded(
        &cluster["certificate-authority-data"],
        "certificate-authority-data",
    )?;
    info.insecure = cluster["insecure-skip-tls-verify"]
        .as_bool()
        .unwrap_or(false);
    info.proxy_url = text(&cluster["proxy-url"]);
    info.certificate_path = text(&user["client-certificate"]);
    info.certificate_data = decoded(&user["client-certificate-data"], "client-certificate-data")?;
    info.private_key_path = text(&user["client-key"]);
    info.private_key_data = decoded(&user["client-key-data"], "client-key-data")?;
    info.username = text(&user["username"]);
    info.password = text(&user["password"]);
    info.token = text(&user["token"])
        .filter(|token| !token.is_empty())
        .or_else(|| text(provider_token));
    info.default_namespace = text(&context["namespace"]);
    Ok(info)
}

/// The entries of one list of kubeconfigs (`contexts`, `clusters`, `users`) by name, the
/// first of a name kept.
#[derive(Default)]
struct Named(Vec<(String, Value)>);

impl Named {
    fn add(&mut self, list: &Value, field: &str) {
        for item in list.as_array().into_iter().flatten() {
            let Some(name) = item["name"].as_str() else {
                continue;
            };
            if self.get(name).is_none() {
                self.0.push((name.to_owned(), item[field].clone()));
            }
        }
    }

    fn get(&self, name: &str) -> Option<&Value> {
        self.0
            .iter()
            .find(|(known, _)| known == name)
            .map(|(_, value)| value)
    }
}

/// `~/...` as the shell expands it (kubeconfig lists may be written so).
fn expand_home(path: &Path, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~"), home) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path.to_owned(),
    }
}

fn read(path: &Path) -> Result<String, LoginError> {
    std::fs::read_to_string(path).map_err(|error| files(path, error.to_string()))
}

fn files(path: &Path, reason: String) -> LoginError {
    LoginError::Files {
        path: path.display().to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary directory to write files into (removed when dropped).
    struct TempDir(tempfile::TempDir);

    impl TempDir {
        fn new() -> TempDir {
            TempDir(tempfile::tempdir().unwrap())
        }

        fn path(&self) -> &Path {
            self.0.path()
        }

        fn write(&self, name: &str, text: &str) -> PathBuf {
            let path = self.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        }
    }

    fn b64(text: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(text)
    }

    /// Kopf's mapping of the current context's cluster, user and namespace; the first file
    /// that names an entry or the current context wins.
    #[test]
    fn the_current_context_of_merged_kubeconfigs_is_read_as_kopf_reads_it() {
        let dir = TempDir::new();
        let first = dir.write(
            "first",
            &format!(
                "
current-context: dev
contexts:
- name: dev
  context: {{cluster: c1, user: u1, namespace: team}}
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: {ca}
    proxy-url: http://proxy:3128
users:
- name: u1
  user:
    client-certificate-data: {cert}
    client-key: /keys/u1.key
",
                ca = b64("CA PEM"),
                cert = b64("CERT PEM"),
            ),
        );
        let second = dir.write(
            "second",
            "
current-context: prod
contexts:
- name: dev
  context: {cluster: other, user: other}
clusters:
- name: c1
  cluster: {server: https://elsewhere}
users:
- name: u2
  user: {token: t2}
",
        );
        let info = from_kubeconfigs(&[first, second]).unwrap();
        assert_eq!(info.server, "https://10.0.0.1:6443");
        assert_eq!(info.ca_data.as_deref(), Some("CA PEM"));
        assert_eq!(info.proxy_url.as_deref(), Some("http://proxy:3128"));
        assert_eq!(info.certificate_data.as_deref(), Some("CERT PEM"));
        assert_eq!(info.private_key_path.as_deref(), Some("/keys/u1.key"));
        assert_eq!(info.default_namespace.as_deref(), Some("team"));
        assert_eq!(info.token, None);
        assert!(!info.insecure);
    }

    #[test]
    fn tokens_come_from_the_user_or_its_auth_provider() {
        let dir = TempDir::new();
        let config = |user: &str| {
            format!(
                "
current-context: x
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
clusters: [{{name: c, cluster: {{server: 'https://h', insecure-skip-tls-verify: true}}}}]
users: [{{name: u, user: {user}}}]
"
            )
        };
        let plain = dir.write("plain", &config("{token: abc, username: me, password: pw}"));
        let info = from_kubeconfigs(&[plain]).unwrap();
        assert_eq!(info.token.as_deref(), Some("abc"));
        assert_eq!(info.username.as_deref(), Some("me"));
        assert_eq!(info.password.as_deref(), Some("pw"));
        assert!(info.insecure);
        let provider = dir.write(
            "provider",
            &config("{auth-provider: {name: oidc, config: {access-token: xyz}}}"),
        );
        assert_eq!(
            from_kubeconfigs(&[provider]).unwrap().token.as_deref(),
            Some("xyz")
        );
    }

    /// Bad input is a clear error naming the file, never a panic.
    #[test]
    fn broken_kubeconfigs_are_errors_that_name_the_file() {
        let dir = TempDir::new();
        let missing = dir.path().join("absent");
        let error = from_kubeconfigs(std::slice::from_ref(&missing)).unwrap_err();
        assert!(
            matches!(&error, LoginError::Files { path, .. } if *path == missing.display().to_string()),
            "{error}"
        );
        let garbage = dir.write("garbage", "current-context: [unclosed");
        assert!(from_kubeconfigs(&[garbage]).is_err());
        let no_context = dir.write("no-context", "clusters: []");
        let error = from_kubeconfigs(&[no_context]).unwrap_err().to_string();
        assert!(error.contains("current context is not set"), "{error}");
        let dangling = dir.write(
            "dangling",
            "current-context: x\ncontexts: [{name: x, context: {cluster: gone, user: u}}]",
        );
        let error = from_kubeconfigs(&[dangling]).unwrap_err().to_string();
        assert!(error.contains("no cluster named \"gone\""), "{error}");
        let bad_data = dir.write(
            "bad-data",
            "current-context: x
contexts: [{name: x, context: {cluster: c}}]
clusters: [{name: c, cluster: {server: 'https://h', certificate-authority-data: '!!!'}}]",
        );
        let error = from_kubeconfigs(&[bad_data]).unwrap_err().to_string();
        assert!(
            error.contains("certificate-authority-data is not base64"),
            "{error}"
        );
    }

    /// Kopf's service account login: the token, namespace and CA of the mounted directory,
    /// trimmed; nothing without a token file.
    #[test]
    fn the_service_account_is_read_where_it_is_mounted() {
        let dir = TempDir::new();
        assert_eq!(from_service_account(dir.path()).unwrap(), None);
        dir.write("token", "the-token\n");
        let info = from_service_account(dir.path()).unwrap().unwrap();
        assert_eq!(info.server, "https://kubernetes.default.svc");
        assert_eq!(info.token.as_deref(), Some("the-token"));
        assert_eq!(info.default_namespace, None);
        assert_eq!(info.ca_path, None);
        dir.write("namespace", "operators\n");
        let ca = dir.write("ca.crt", "PEM");
        let info = from_service_account(dir.path()).unwrap().unwrap();
        assert_eq!(info.default_namespace.as_deref(), Some("operators"));
        assert_eq!(info.ca_path, Some(ca.display().to_string()));
    }

    #[test]
    fn a_home_prefix_is_expanded() {
        let home = Path::new("/home/me");
        assert_eq!(
            expand_home(Path::new("~/.kube/x"), Some(home)),
            PathBuf::from("/home/me/.kube/x")
        );
        assert_eq!(
            expand_home(Path::new("/etc/kube"), Some(home)),
            PathBuf::from("/etc/kube")
        );
    }
}
