//! The `kopf-fake-apiserver` binary: its URL on stdout, its kubeconfig, its state file, a
//! clean exit on SIGTERM, and, as a real cluster, HTTPS with credentials by default, plain
//! HTTP only when asked, and files only their owner may read.

use std::process::Stdio;

use base64::Engine as _;

use tokio::io::{AsyncBufReadExt as _, BufReader};

use crate::support::{DEADLINE, kubectl, serial};

/// Starts the binary and returns it with the URL it printed.
pub(crate) async fn start(args: &[&std::ffi::OsStr]) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kopf-fake-apiserver"))
        .args(args)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the binary starts");
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(DEADLINE, lines.next_line())
        .await
        .expect("it prints its address in time")
        .expect("stdout is readable")
        .expect("a line");
    let url = line
        .strip_prefix("listening on ")
        .expect("`listening on URL`")
        .to_string();
    assert!(
        url.starts_with("http://127.0.0.1:") || url.starts_with("https://127.0.0.1:"),
        "{url}"
    );
    (child, url)
}

async fn terminate(mut child: tokio::process::Child) {
    let pid = child.id().expect("still running").to_string();
    let status = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let exit = tokio::time::timeout(DEADLINE, child.wait())
        .await
        .expect("it exits in time")
        .unwrap();
    assert!(exit.success(), "SIGTERM is a clean exit: {exit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_kubectl_and_keeps_its_state() {
    let Some(kubectl) = kubectl("the_binary_serves_kubectl_and_keeps_its_state") else {
        return;
    };
    let _turn = serial().await;
    let dir = std::env::temp_dir().join(format!("kopf-fake-binary-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let state = dir.join("state.json");
    let run_kubectl = |args: &'static [&'static str]| {
        let kubectl = kubectl.clone();
        let kubeconfig = kubeconfig.clone();
        let cache = dir.join("cache");
        async move {
            let output = tokio::process::Command::new(kubectl)
                .args(args)
                .arg("--cache-dir")
                .arg(cache)
                .env("KUBECONFIG", kubeconfig)
                .output()
                .await
                .unwrap();
            assert!(
                output.status.success(),
                "kubectl {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            String::from_utf8_lossy(&output.stdout).into_owned()
        }
    };

    let args = [
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
        "--state-file".as_ref(),
        state.as_os_str(),
    ];
    let (child, _) = start(&args).await;
    run_kubectl(&["create", "configmap", "survivor", "--from-literal=k=v"]).await;
    terminate(child).await;
    assert!(state.exists(), "the state is saved on exit");

    let (child, _) = start(&args).await;
    let value = run_kubectl(&["get", "configmap", "survivor", "-o", "jsonpath={.data.k}"]).await;
    assert_eq!(value, "v");
    terminate(child).await;
    std::fs::remove_dir_all(&dir).ok();
}

/// Runs kubectl with this kubeconfig (and a cache of its own).
async fn run_kubectl(
    kubectl: &std::path::Path,
    kubeconfig: &std::path::Path,
    args: &[&str],
) -> std::process::Output {
    let cache = kubeconfig.with_file_name("cache");
    tokio::process::Command::new(kubectl)
        .args(args)
        .arg("--cache-dir")
        .arg(cache)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .await
        .expect("kubectl runs")
}

/// With `--token`, kubectl gets and creates with the kubeconfig written; with a wrong token,
/// it is `401 Unauthorized`; without one, `403 Forbidden` to `system:anonymous`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sends_the_token_over_tls_and_a_wrong_one_is_unauthorized() {
    let test = "kubectl_sends_the_token_over_tls_and_a_wrong_one_is_unauthorized";
    let Some(kubectl) = kubectl(test) else {
        return;
    };
    let _turn = serial().await;
    let dir = tempfile::tempdir().expect("a temporary folder");
    let kubeconfig = dir.path().join("kubeconfig");
    let ca_file = dir.path().join("ca.pem");
    let (child, url) = start(&[
        "--token".as_ref(),
        "s3cret".as_ref(),
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
        "--ca-file".as_ref(),
        ca_file.as_os_str(),
    ])
    .await;
    assert!(url.starts_with("https://"), "a token implies TLS: {url}");

    let succeed = |output: std::process::Output, what: &str| {
        assert!(
            output.status.success(),
            "kubectl {what}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let created = run_kubectl(
        &kubectl,
        &kubeconfig,
        &["create", "configmap", "with-token", "--from-literal=k=v"],
    )
    .await;
    succeed(created, "create");
    let got = run_kubectl(
        &kubectl,
        &kubeconfig,
        &["get", "configmap", "with-token", "-o", "jsonpath={.data.k}"],
    )
    .await;
    assert_eq!(succeed(got, "get"), "v");

    let refused = run_kubectl(
        &kubectl,
        &kubeconfig,
        &["--token", "wrong", "get", "configmaps"],
    )
    .await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "a wrong token is refused");
    assert!(
        stderr.contains("You must be logged in to the server (Unauthorized)"),
        "{stderr}"
    );

    // kube-rs with the same kubeconfig; the CA file holds the kubeconfig's CA.
    let parsed = kube::config::Kubeconfig::read_from(&kubeconfig).expect("a kubeconfig");
    let ca_data = parsed.clusters[0]
        .cluster
        .as_ref()
        .and_then(|cluster| cluster.certificate_authority_data.clone())
        .expect("the kubeconfig carries the CA");
    let ca = base64::engine::general_purpose::STANDARD
        .decode(ca_data)
        .expect("base64");
    assert_eq!(std::fs::read(&ca_file).expect("the CA file"), ca);
    let config = kube::Config::from_custom_kubeconfig(parsed, &Default::default())
        .await
        .expect("kube-rs reads it");
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::default_namespaced(kube::Client::try_from(config.clone()).unwrap());
    api.get("with-token").await.expect("with the token");
    // Without a token, a client is system:anonymous, whom no role lets read ConfigMaps.
    let mut anonymous = config;
    anonymous.auth_info.token = None;
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::default_namespaced(kube::Client::try_from(anonymous).unwrap());
    let error = api.get("with-token").await.unwrap_err();
    assert!(
        matches!(&error, kube::Error::Api(status) if status.code == 403
            && status.message.contains("User \"system:anonymous\" cannot get resource \"configmaps\"")),
        "{error:?}"
    );
    drop(api);
    terminate(child).await;
}

/// The mode bits of a file.
fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// The token of the kubeconfig's user, if any.
fn kubeconfig_token(kubeconfig: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(kubeconfig).expect("the kubeconfig");
    let parsed: serde_json::Value = serde_norway::from_str(&text).expect("YAML");
    parsed["users"][0]["user"]["token"]
        .as_str()
        .map(String::from)
}

/// As a real cluster: HTTPS by default (`--tls` asks for what is the default), with an admin
/// token made at start that the kubeconfig carries, so kubectl never has to prompt for a
/// password; the kubeconfig, the CA file and the state file are their owner's only. Plain HTTP
/// only with `--insecure-http`, which no token or CA file goes with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_https_with_credentials_unless_asked_for_plain_http() {
    let test = "the_binary_serves_https_with_credentials_unless_asked_for_plain_http";
    let Some(kubectl) = kubectl(test) else {
        return;
    };
    let _turn = serial().await;
    let dir = tempfile::tempdir().expect("a temporary folder");
    let kubeconfig = dir.path().join("kubeconfig");
    let ca_file = dir.path().join("ca.pem");
    let state = dir.path().join("state");
    for extra in [None, Some("--tls")] {
        let mut args = vec![
            "--kubeconfig".as_ref(),
            kubeconfig.as_os_str(),
            "--ca-file".as_ref(),
            ca_file.as_os_str(),
            "--state-file".as_ref(),
            state.as_os_str(),
        ];
        args.extend(extra.map(std::ffi::OsStr::new));
        let (child, url) = start(&args).await;
        assert!(url.starts_with("https://"), "{extra:?}: {url}");
        let token = kubeconfig_token(&kubeconfig).expect("the kubeconfig carries a token");
        assert!(token.len() >= 32, "a token nobody guesses: {token:?}");
        for file in [&kubeconfig, &ca_file, &state] {
            assert_eq!(mode(file), 0o600, "{extra:?}: {}", file.display());
        }
        let listed = run_kubectl(&kubectl, &kubeconfig, &["get", "namespaces", "-o", "name"]).await;
        assert!(
            listed.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&listed.stderr)
        );
        assert!(String::from_utf8_lossy(&listed.stdout).contains("namespace/default"));
        // Without the token (kubectl would prompt for a password: a kube-rs client), a
        // client is system:anonymous.
        let parsed = kube::config::Kubeconfig::read_from(&kubeconfig).expect("a kubeconfig");
        let mut config = kube::Config::from_custom_kubeconfig(parsed, &Default::default())
            .await
            .expect("kube-rs reads it");
        config.auth_info.token = None;
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
            kube::Api::all(kube::Client::try_from(config).unwrap());
        let error = namespaces.list(&Default::default()).await.unwrap_err();
        assert!(
            matches!(&error, kube::Error::Api(status) if status.code == 403
                && status.message.contains("User \"system:anonymous\" cannot list resource \"namespaces\"")),
            "{extra:?}: {error:?}"
        );
        drop(namespaces);
        terminate(child).await;
    }

    let (child, url) = start(&[
        "--insecure-http".as_ref(),
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
    ])
    .await;
    assert!(url.starts_with("http://"), "{url}");
    assert_eq!(mode(&kubeconfig), 0o600);
    let listed = run_kubectl(&kubectl, &kubeconfig, &["get", "namespaces", "-o", "name"]).await;
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    terminate(child).await;

    for conflicting in [
        &["--token", "s3cret"][..],
        &["--ca-file", "ca.pem"],
        &["--tls"],
        &["--enforce-rbac"],
    ] {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_kopf-fake-apiserver"))
            .arg("--insecure-http")
            .args(conflicting)
            .output()
            .await
            .expect("the binary runs");
        assert_eq!(
            output.status.code(),
            Some(2),
            "--insecure-http with {conflicting:?}"
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("cannot be used with"), "{stderr}");
    }
}
