//! Helpers shared by the fake API server's tests.

use std::path::{Path, PathBuf};

use http::Request;
use kopf_fake_apiserver::FakeApiServer;
use tokio::sync::{OnceCell, Semaphore, SemaphorePermit};

/// Every namespace holds the `kube-root-ca.crt` ConfigMap, as in a real cluster; tests that
/// count ConfigMaps leave it out with this field selector.
pub(crate) const NOT_ROOT_CA: &str = "metadata.name!=kube-root-ca.crt";

/// The waits of every test: one generous deadline.
pub(crate) use kopf_fake_apiserver::{DEADLINE, wait};

/// Whether we run under CI, where a missing tool is a failure rather than a skip.
pub(crate) fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// Says loudly that a test cannot run here; fails under CI.
pub(crate) fn skip(test: &str, why: &str) {
    if in_ci() {
        panic!("{test}: {why} (CI is set, so this is a failure, not a skip)");
    }
    eprintln!("\n!!! SKIPPED {test}: {why}\n");
}

/// The path of `kubectl`, or a loud skip.
pub(crate) fn kubectl(test: &str) -> Option<PathBuf> {
    match find_in_path("kubectl") {
        Some(path) => Some(path),
        None => {
            skip(test, "kubectl is not installed (not found in PATH)");
            None
        }
    }
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// The project's root folder.
pub(crate) fn project_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The virtualenv's python with kopf and the kubernetes client (made by `scripts/python-env`
/// on first use), or a loud skip.
pub(crate) async fn python(test: &str) -> Option<PathBuf> {
    static PYTHON: OnceCell<Result<PathBuf, String>> = OnceCell::const_new();
    let found = PYTHON
        .get_or_init(|| async {
            if find_in_path("python3").is_none() && std::env::var_os("PYTHON").is_none() {
                return Err("python3 is not installed (not found in PATH)".to_string());
            }
            let script = project_root().join("scripts/python-env");
            let output = tokio::process::Command::new("bash")
                .arg(&script)
                .output()
                .await
                .map_err(|e| format!("running {}: {e}", script.display()))?;
            if !output.status.success() {
                return Err(format!(
                    "{} failed (pip could not install kopf?): {}",
                    script.display(),
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
            Ok(PathBuf::from(
                String::from_utf8_lossy(&output.stdout).trim(),
            ))
        })
        .await;
    match found {
        Ok(path) => Some(path.clone()),
        Err(why) => {
            skip(test, why);
            None
        }
    }
}

/// Slow tests that run external processes take turns, so they do not starve each other of
/// the machine's cores and time out.
pub(crate) async fn serial() -> SemaphorePermit<'static> {
    static SLOW: Semaphore = Semaphore::const_new(1);
    SLOW.acquire().await.expect("the semaphore is never closed")
}

/// Sends a request on a fresh connection with a plain HTTP client: no retries, no buffering,
/// so tests see exactly what the server answers.
pub(crate) async fn send(
    server: &FakeApiServer,
    request: Request<http_body_util::Full<bytes::Bytes>>,
) -> http::Response<hyper::body::Incoming> {
    let stream = tokio::net::TcpStream::connect(server.addr())
        .await
        .expect("the server listens");
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .expect("a handshake");
    tokio::spawn(connection);
    sender
        .send_request(request)
        .await
        .expect("the request went through")
}

/// A kube-rs client that does not retry (kube's default one retries 429, 503 and 504), so
/// tests see every answer.
pub(crate) fn client_without_retries(server: &FakeApiServer) -> kube::Client {
    let mut config = server.config();
    config.default_retry = false;
    kube::Client::try_from(config).expect("a client of the fake server always builds")
}

/// Creates the deployment `d` (one container, `replicas` if given) in `default`.
pub(crate) async fn create_deployment(
    deployments: &kube::Api<k8s_openapi::api::apps::v1::Deployment>,
    replicas: Option<i32>,
) -> k8s_openapi::api::apps::v1::Deployment {
    let deployment = serde_json::json!({
        "metadata": {"name": "d"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
    });
    deployments
        .create(
            &kube::api::PostParams::default(),
            &serde_json::from_value(deployment).expect("a Deployment"),
        )
        .await
        .expect("the deployment is created")
}
