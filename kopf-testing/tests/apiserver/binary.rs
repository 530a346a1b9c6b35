//! The `kopf-fake-apiserver` binary: its URL on stdout, its kubeconfig, its state file, and a
//! clean exit on SIGTERM.

use std::process::Stdio;

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
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_requires_its_token() {
    let (child, url) = start(&["--token".as_ref(), "s3cret".as_ref()]).await;
    let config = kube::Config::new(url.parse().unwrap());
    let anonymous = kube::Client::try_from(config.clone()).unwrap();
    let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(anonymous);
    let error = api.get("default").await.unwrap_err();
    assert!(
        matches!(&error, kube::Error::Api(status) if status.code == 401),
        "{error:?}"
    );
    let mut config = config;
    config.auth_info.token = Some("s3cret".to_string().into());
    let api: kube::Api<k8s_openapi::api::core::v1::Namespace> =
        kube::Api::all(kube::Client::try_from(config).unwrap());
    api.get("default").await.expect("with the token");
    terminate(child).await;
}
