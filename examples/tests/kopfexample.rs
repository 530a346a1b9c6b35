//! The `kopfexample` example as a process, as its documentation runs it: with `-A` and
//! `--log-format plain` against a cluster (the fake API server's, by `KUBECONFIG`), it creates,
//! updates and deletes `examples/obj.yaml`'s object, and exits with 0 on SIGTERM; `--help`
//! lists the options.
//!
//! The process under test runs the example's own code (`../kopfexample.rs`, compiled into this
//! test as a module) in this very test binary, started again with [`CHILD`] set (see
//! `stoppable.rs` for why not the example's binary). Unlike there, the child gets the
//! operator's real command line (`-A --log-format plain`, `--help`), which libtest would
//! reject as its own: so this test has no harness (`harness = false` in `Cargo.toml`), and its
//! `main` is either the operator's (in the child) or runs the scenarios (in the parent).
//!
//! The example's handlers are registered in this binary too (`#[kopf::on_*]` collects them
//! wherever they are compiled): only the child runs an operator, so only it uses them.

#![cfg(unix)]

#[path = "../kopfexample.rs"]
#[allow(
    dead_code,
    reason = "the example's `main` belongs to its binary; the child process runs `kopf::run`, \
              which finds the module's handlers"
)]
mod kopfexample;

mod support;

use std::process::{ExitCode, Stdio};

use kopf_testing::{ApiRequest, FakeApiServer, PatchType, TestClient, fixtures, wait};
use serde_json::{Value, json};
use support::{OperatorProcess, child_command, kubeconfig_for};

/// Set in the environment of the child process: run the operator there.
const CHILD: &str = "KOPF_EXAMPLES_KOPFEXAMPLE_CHILD";

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const COLLECTION: &str = fixtures::KOPFEXAMPLES;
/// `metadata.name` in `examples/obj.yaml`.
const NAME: &str = "kopf-example-1";

fn main() -> ExitCode {
    if std::env::var_os(CHILD).is_some() {
        // As the example's `main`: the command line is the operator's.
        return tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(kopf::run());
    }
    // Parent: libtest's options (`--list`, filters, `--nocapture`, ...) do not apply here.
    if std::env::args().any(|arg| arg == "--list") {
        return ExitCode::SUCCESS;
    }
    scenario("help_lists_the_options", help_lists_the_options);
    scenario(
        "the_operator_handles_an_object_from_creation_to_deletion_and_stops_on_sigterm",
        || on_runtime(the_operator_handles_an_object_from_creation_to_deletion()),
    );
    scenario(
        "freeze_pauses_the_operator_and_resume_ends_the_pause",
        || on_runtime(freeze_pauses_the_operator_and_resume_ends_the_pause()),
    );
    scenario(
        "a_lease_elects_the_leader_and_is_released_on_sigterm",
        || on_runtime(a_lease_elects_the_leader_and_is_released_on_sigterm()),
    );
    println!("\ntest result: ok. 4 passed; 0 failed\n");
    ExitCode::SUCCESS
}

/// Runs an async scenario on a runtime of its own.
fn on_runtime(scenario: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(scenario);
}

/// Runs one scenario, reporting it as libtest would; a failure panics (exit code 101).
fn scenario(name: &str, body: impl FnOnce()) {
    println!("test {name} ...");
    body();
    println!("test {name} ... ok");
}

fn help_lists_the_options() {
    let output = child_command(CHILD, &["--help"])
        .stdin(Stdio::null())
        .output()
        .expect("the operator's process runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("--namespace"), "{stdout}");
    assert!(stdout.contains("--all-namespaces"), "{stdout}");
}

async fn the_operator_handles_an_object_from_creation_to_deletion() {
    let server = server_with_crd().await;
    let client = server.test_client();
    let kubeconfig = kubeconfig_for(&server);
    let port = free_port();
    let liveness = format!("http://127.0.0.1:{port}/healthz");
    let mut operator = {
        let mut command = child_command(
            CHILD,
            &["-A", "--log-format", "plain", "--liveness", &liveness],
        );
        command.env("KUBECONFIG", &kubeconfig);
        OperatorProcess::spawn(command, Vec::new())
    };
    operator.wait_until_watching(&server).await;
    operator
        .wait_for_log("Starting up: nothing is watched yet")
        .await;
    wait("the readiness check to pass", || async {
        (http_get(port, "/readyz").await?.0 == 200).then_some(())
    })
    .await;
    let (status, probes) = http_get(port, "/healthz")
        .await
        .expect("the liveness endpoint");
    assert_eq!(status, 200, "{probes}");
    let probes: Value = serde_json::from_str(&probes).expect("the probes' results as JSON");
    assert!(probes["now_fn"].is_string(), "{probes}");

    create_example_and_wait_for_its_handling(&client).await;
    operator
        .wait_for_log("Handler 'create_fn' succeeded.")
        .await;

    let change = json!({"spec": {"field": "changed"}});
    client.patch("kopfexamples", "default", NAME, change).await;
    client
        .wait_for("kopfexamples", "default", NAME, |o| {
            o["status"]["updated"] == true
        })
        .await;

    client.delete("kopfexamples", "default", NAME).await;
    client
        .wait_for_deletion("kopfexamples", "default", NAME)
        .await;
    operator.wait_for_log("Deletion is processed").await;
    let log = operator.log();
    assert!(log.contains("Creating kopf-example-1 with spec"), "{log}");
    assert!(log.contains("Handler 'update_fn' succeeded."), "{log}");
    assert!(log.contains("Deleting kopf-example-1"), "{log}");
    assert!(
        !log.contains("Absence of either namespaces or cluster-wide flag"),
        "-A was understood: {log}"
    );

    operator.signal("TERM");
    assert_eq!(operator.exit_code().await, 0, "{}", operator.log());
    let log = operator.log();
    assert!(
        log.contains("Cleaning up: every handler has stopped"),
        "{log}"
    );
    drop(client);
    wait("the operator's watches to close", || async {
        (server.stats().open_watches == 0).then_some(())
    })
    .await;
    server.stop().await;
}

/// `kopfexample freeze` and `resume` write what Kopf's do: a running operator of a lower
/// priority pauses while the freeze's entry lives, and resumes when `resume` removes it.
async fn freeze_pauses_the_operator_and_resume_ends_the_pause() {
    let server = server_with_crd().await;
    let client = server.test_client();
    // Kopf's peering CRDs, as the `crd` subcommand prints them, and the `default` object.
    let printed = child_command(CHILD, &["crd"])
        .stdin(Stdio::null())
        .output()
        .expect("the `crd` subcommand runs");
    assert_eq!(printed.status.code(), Some(0));
    let printed = String::from_utf8_lossy(&printed.stdout);
    let documents = printed.split("---\n").filter(|d| d.contains("kind:"));
    for document in documents {
        let crd: Value = serde_norway::from_str(document).expect("a printed CRD");
        let name = crd["metadata"]["name"].as_str().expect("the CRD's name");
        apply(&client, &format!("{CRDS}/{name}"), document).await;
        client.wait_for_crd(name).await;
    }
    let peering = "/apis/kopf.dev/v1/clusterkopfpeerings/default";
    apply(
        &client,
        peering,
        "{apiVersion: kopf.dev/v1, kind: ClusterKopfPeering, metadata: {name: default}}",
    )
    .await;
    let entries = |object: Option<Value>| object.map(|o| o["status"].clone());
    let kubeconfig = kubeconfig_for(&server);
    let mut operator = {
        let mut command = child_command(CHILD, &["-A", "--log-format", "plain"]);
        command.env("KUBECONFIG", &kubeconfig);
        OperatorProcess::spawn(command, Vec::new())
    };
    operator.wait_until_watching(&server).await;

    let subcommand = |args: &[&str]| {
        let mut command = child_command(CHILD, args);
        command.env("KUBECONFIG", &kubeconfig).env_remove("POD_ID");
        let output = command
            .stdin(Stdio::null())
            .output()
            .expect("the subcommand runs");
        let log = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(0), "{args:?}: {log}");
        log
    };
    let frozen = subcommand(&["freeze", "-P", "default", "-t", "600", "-i", "maintenance"]);
    assert!(frozen.contains("Frozen as \"maintenance\""), "{frozen}");
    let status = entries(get_path(&client, peering).await).expect("the peering object");
    assert_eq!(status["maintenance"]["priority"], 100, "{status}");
    assert_eq!(status["maintenance"]["lifetime"], 600, "{status}");
    operator
        .wait_for_log("Pausing operations in favour of")
        .await;

    let resumed = subcommand(&["resume", "-P", "default", "-i", "maintenance"]);
    assert!(resumed.contains("Resumed as \"maintenance\""), "{resumed}");
    wait("the freeze's entry to be gone", || async {
        let status = entries(get_path(&client, peering).await)?;
        status.get("maintenance").is_none().then_some(())
    })
    .await;
    operator.wait_for_log("Resuming operations").await;
    // Resumed for real: a new object is handled.
    create_example_and_wait_for_its_handling(&client).await;

    operator.signal("TERM");
    assert_eq!(operator.exit_code().await, 0, "{}", operator.log());
    drop(client);
    server.stop().await;
}

/// `kopfexample --lease NAMESPACE/NAME` elects its leader with that Lease (created and held
/// in the operator's identity), serves once it leads, and releases the Lease on SIGTERM.
async fn a_lease_elects_the_leader_and_is_released_on_sigterm() {
    let server = server_with_crd().await;
    let client = server.test_client();
    let kubeconfig = kubeconfig_for(&server);
    let mut operator = {
        let args = [
            "-A",
            "--log-format",
            "plain",
            "--lease",
            "default/kopfexample",
        ];
        let mut command = child_command(CHILD, &args);
        command
            .env("KUBECONFIG", &kubeconfig)
            .env("POD_ID", "kopfexample-0");
        OperatorProcess::spawn(command, Vec::new())
    };
    operator
        .wait_for_log("successfully acquired lease default/kopfexample")
        .await;
    let lease = "/apis/coordination.k8s.io/v1/namespaces/default/leases/kopfexample";
    let held = get_path(&client, lease).await.expect("the Lease");
    assert_eq!(held["spec"]["holderIdentity"], "kopfexample-0", "{held}");
    assert_eq!(
        held["spec"]["leaseDurationSeconds"], 15,
        "client-go's default"
    );
    create_example_and_wait_for_its_handling(&client).await;

    operator.signal("TERM");
    assert_eq!(operator.exit_code().await, 0, "{}", operator.log());
    let released = get_path(&client, lease).await.expect("the Lease");
    assert_eq!(released["spec"]["holderIdentity"], "", "{released}");
    drop(client);
    server.stop().await;
}

/// A server on a runtime of its own, with `examples/crd.yaml` applied as `kubectl apply
/// --server-side` sends it: YAML, as it is.
async fn server_with_crd() -> FakeApiServer {
    let server = kopf_testing::ApiServer::from_env()
        .start(FakeApiServer::builder())
        .await;
    let client = server.test_client();
    let name = "kopfexamples.kopf.dev";
    apply(
        &client,
        &format!("{CRDS}/{name}"),
        fixtures::KOPFEXAMPLE_CRD,
    )
    .await;
    client.wait_for_crd(name).await;
    server
}

/// Applies `examples/obj.yaml` and waits until its creation is handled: the create handler's
/// result stored, and the diff-base that ends the creation (after the field handler, in a
/// later cycle). A change made before that would be part of the creation, not an update.
async fn create_example_and_wait_for_its_handling(client: &TestClient) {
    apply(
        client,
        &format!("{COLLECTION}/{NAME}"),
        include_str!("../obj.yaml"),
    )
    .await;
    client
        .wait_for("kopfexamples", "default", NAME, |object| {
            let handled =
                &object["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"];
            object["status"]["create_fn"]["message"] == "hello world" && handled.is_string()
        })
        .await;
}

/// A port free on 127.0.0.1 (for the liveness endpoint, which takes a URL).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// `GET path` on 127.0.0.1: the status code and the body; `None` while nothing listens.
async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n")?.1.to_string();
    Some((status, body))
}

/// Server-side apply of a YAML manifest, as `kubectl apply --server-side`: YAML, as it is.
async fn apply(client: &TestClient, path: &str, yaml: &str) -> Value {
    let request = ApiRequest::new("PATCH", format!("{path}?fieldManager=test"))
        .patch_type(PatchType::Apply)
        .bytes(yaml);
    let answer = client.send(request).await;
    assert!(answer.status.is_success(), "{path}: {}", answer.json());
    answer.json()
}

/// The object at `path`, if there is one.
async fn get_path(client: &TestClient, path: &str) -> Option<Value> {
    let (status, object) = client.request("GET", path, None).await;
    status.is_success().then_some(object)
}
