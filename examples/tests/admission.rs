//! The `admission` gallery example as a process, against the fake API server and driven by a
//! real kubectl: the fake server calls the operator's webhooks as kube-apiserver does, so
//! kubectl prints the operator's denials and warnings, and stores what its mutating handlers
//! change. On SIGTERM the operator shrinks its webhook configurations to the persistent
//! entries; with the operator gone, the one that fails closed blocks what it guards (with the
//! real API server's message) and the one that fails open lets everything through.
//!
//! The process under test runs the example's own handlers in this very test binary, started
//! again with [`CHILD`] set (see `stoppable.rs` for why not the example's binary).

#![cfg(unix)]

mod support;

use std::path::Path;

use kopf_examples::gallery::admission;
use kopf_testing::{FakeApiServer, wait};
use serde_json::Value;
use support::kubectl::{Kubectl, Printed};
use support::spawn_against;

/// Set in the environment of the child process: run the operator there.
const CHILD: &str = "KOPF_EXAMPLES_ADMISSION_CHILD";

/// Not a scenario: the operator's process. Started by the scenario (with [`CHILD`] set) to run
/// the example's operator and exit with its exit code; a no-op otherwise.
#[test]
fn operator_process() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let code = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(async {
            tracing_subscriber::fmt()
                .with_env_filter("info")
                .with_writer(std::io::stderr)
                .init();
            // The client comes from the kubeconfig (`KUBECONFIG`).
            match kopf::operator::Operator::new(admission::registry())
                .run_until_signalled()
                .await
            {
                Ok(()) => 0,
                Err(error) => {
                    eprintln!("{error}");
                    1
                }
            }
        });
    std::process::exit(code);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_meets_the_operators_webhooks_and_the_persistent_ones_outlive_it() {
    let test = "kubectl_meets_the_operators_webhooks_and_the_persistent_ones_outlive_it";
    let server = kopf_testing::ApiServer::from_env()
        .start(FakeApiServer::builder())
        .await;
    let Some(kubectl) = Kubectl::for_server(test, &server) else {
        return;
    };
    let crd = Path::new(env!("CARGO_MANIFEST_DIR")).join("crd.yaml");
    kubectl
        .ok(&["apply", "-f", &crd.display().to_string()])
        .await;
    let args = ["operator_process", "--exact", "--nocapture", "--quiet"];
    let mut operator = spawn_against(&server, CHILD, &args, |_| {});

    // At start, the operator's configurations list its webhooks, served over HTTPS.
    let validating = entries(&kubectl, "validatingwebhookconfiguration", 4).await;
    let mutating = entries(&kubectl, "mutatingwebhookconfiguration", 2).await;
    assert_eq!(
        names(&validating),
        [
            "say-hello.auto.kopf.dev",
            "check-numbers.auto.kopf.dev",
            "keep-protected.auto.kopf.dev",
            "note-deletions.auto.kopf.dev",
        ]
    );
    assert_eq!(
        names(&mutating),
        [
            "default-numbers.auto.kopf.dev",
            "convert-numbers.auto.kopf.dev"
        ]
    );
    for entry in validating.iter().chain(&mutating) {
        let url = entry["clientConfig"]["url"].as_str().unwrap_or_default();
        assert!(url.starts_with("https://127.0.0.1:"), "{entry}");
        assert!(entry["clientConfig"]["caBundle"].is_string(), "{entry}");
    }

    // A validating handler denies, and kubectl prints its message; nothing is stored.
    let denied = create(&kubectl, "wrong", "{}", "{numbers: seven}").await;
    assert!(!denied.success, "{}", denied.stdout);
    assert!(
        denied.stderr.contains(
            "admission webhook \"check-numbers.auto.kopf.dev\" denied the request: \
             spec.numbers must be a list if present."
        ),
        "{}",
        denied.stderr
    );
    assert!(!get(&kubectl, "wrong").await.success);

    // Mutating handlers fix and default; the warning reaches kubectl.
    let created = create(&kubectl, "mixed", "{}", "{numbers: [1, \"2\"]}").await;
    assert!(created.success, "{}", created.stderr);
    assert!(
        created
            .stderr
            .contains("Warning: Verified with the operator's hook."),
        "{}",
        created.stderr
    );
    assert_eq!(numbers(&kubectl, "mixed").await, "[1,2]");
    let created = create(&kubectl, "plain", "{}", "{}").await;
    assert!(created.success, "{}", created.stderr);
    assert_eq!(numbers(&kubectl, "plain").await, "[1,2,3]");

    // A protected object cannot be deleted; the deletion of another is noted.
    let created = create(&kubectl, "guarded", "{protected: \"yes\"}", "{}").await;
    assert!(created.success, "{}", created.stderr);
    let refused = kubectl.run(&["delete", "kex", "guarded"], None).await;
    assert!(!refused.success, "{}", refused.stdout);
    assert!(
        refused.stderr.contains(
            "admission webhook \"keep-protected.auto.kopf.dev\" denied the request: \
             guarded is protected"
        ),
        "{}",
        refused.stderr
    );
    kubectl.ok(&["delete", "kex", "mixed"]).await;
    operator.wait_for_log("deletes mixed").await;

    // SIGTERM: only the persistent webhooks stay.
    operator.signal("TERM");
    assert_eq!(operator.exit_code().await, 0, "{}", operator.log());
    let validating = entries(&kubectl, "validatingwebhookconfiguration", 2).await;
    assert_eq!(
        names(&validating),
        [
            "keep-protected.auto.kopf.dev",
            "note-deletions.auto.kopf.dev"
        ]
    );
    entries(&kubectl, "mutatingwebhookconfiguration", 0).await;

    // With the operator gone, the webhook that fails closed blocks the deletion it guards,
    // with the API server's message for a webhook it cannot call ...
    let blocked = kubectl.run(&["delete", "kex", "guarded"], None).await;
    assert!(!blocked.success, "{}", blocked.stdout);
    assert!(
        blocked.stderr.contains(
            "Internal error occurred: failed calling webhook \"keep-protected.auto.kopf.dev\""
        ),
        "{}",
        blocked.stderr
    );
    // ... and the one that fails open lets other deletions through; creations meet no
    // webhook at all.
    kubectl.ok(&["delete", "kex", "plain"]).await;
    let created = create(&kubectl, "unchecked", "{}", "{numbers: seven}").await;
    assert!(created.success, "{}", created.stderr);

    drop(kubectl);
    wait("every connection to close", || async {
        (server.stats().open_connections == 0).then_some(())
    })
    .await;
    server.stop().await;
}

/// Creates a KopfExample with kubectl (`labels` and `spec` in YAML's flow style).
async fn create(kubectl: &Kubectl, name: &str, labels: &str, spec: &str) -> Printed {
    let yaml = format!(
        "apiVersion: kopf.dev/v1\nkind: KopfExample\n\
         metadata: {{name: {name}, labels: {labels}}}\nspec: {spec}\n"
    );
    kubectl.run(&["create", "-f", "-"], Some(&yaml)).await
}

async fn get(kubectl: &Kubectl, name: &str) -> Printed {
    kubectl.run(&["get", "kex", name, "-o", "json"], None).await
}

/// `spec.numbers` of the object, as kubectl prints it.
async fn numbers(kubectl: &Kubectl, name: &str) -> String {
    kubectl
        .ok(&["get", "kex", name, "-o", "jsonpath={.spec.numbers}"])
        .await
}

/// The entries of the managed configuration of `kind`, once there are `count` of them.
async fn entries(kubectl: &Kubectl, kind: &str, count: usize) -> Vec<Value> {
    wait(&format!("{count} entries in the {kind}"), || async {
        let printed = kubectl
            .run(&["get", kind, admission::MANAGED, "-o", "json"], None)
            .await;
        if !printed.success {
            return None;
        }
        let object: Value = serde_json::from_str(&printed.stdout).expect("kubectl prints JSON");
        let entries = object["webhooks"].as_array().cloned().unwrap_or_default();
        (entries.len() == count).then_some(entries)
    })
    .await
}

/// The entries' names.
fn names(entries: &[Value]) -> Vec<&str> {
    entries
        .iter()
        .map(|entry| entry["name"].as_str().unwrap_or_default())
        .collect()
}
