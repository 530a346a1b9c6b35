//! Kopf's classic example operator, for any cluster: the one of `KUBECONFIG` (or the in-cluster
//! environment), for instance the fake API server's:
//!
//! ```sh
//! cargo run -p kopf-fake-apiserver -- --kubeconfig /tmp/kopf.kubeconfig &
//! export KUBECONFIG=/tmp/kopf.kubeconfig
//! kubectl apply -f examples/crd.yaml
//! cargo run --example kopfexample -- --all-namespaces &
//! kubectl apply -f examples/obj.yaml
//! kubectl get kopfexamples        # MESSAGE: hello world
//! kubectl delete -f examples/obj.yaml
//! ```
//!
//! The command line is Kopf's `kopf run`: `--namespace`/`-n`, `--all-namespaces`/`-A`,
//! `--verbose`, `--log-format`, `--liveness` (the probe's results at that URL, readiness at
//! `/readyz` next to it), `--metrics`; `--help` lists them.
//!
//! Besides the change handlers: a daemon and a timer per object, startup and cleanup
//! handlers, and a probe.

use std::process::ExitCode;
use std::time::Duration;

use kopf::diff::Diff;
use kopf::{Logger, Patch};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn create_fn(name: &str, spec: &Value, logger: &Logger) -> Value {
    logger.info(format!("Creating {name} with spec {spec}"));
    json!({"message": "hello world"})
}

#[kopf::on_update("kopf.dev", "v1", "kopfexamples")]
async fn update_fn(diff: &Diff, logger: &Logger, patch: &mut Patch) {
    logger.info(format!("Updated: {} change(s)", diff.len()));
    patch.status().insert("updated".into(), json!(true));
}

#[kopf::on_field("kopf.dev", "v1", "kopfexamples", field = "spec.field")]
async fn field_fn(old: Option<String>, new: Option<String>, logger: &Logger) {
    logger.info(format!("spec.field: {old:?} -> {new:?}"));
}

#[kopf::on_delete("kopf.dev", "v1", "kopfexamples")]
async fn delete_fn(name: &str, logger: &Logger) {
    logger.info(format!("Deleting {name}"));
}

/// Runs for as long as the object exists; stops when it is deleted or the operator exits.
#[kopf::daemon("kopf.dev", "v1", "kopfexamples", cancellation_backoff = "5s")]
async fn daemon_fn(name: &str, stopped: &CancellationToken, logger: &Logger) {
    logger.info(format!("Monitoring {name}"));
    while !stopped.is_cancelled() {
        tokio::select! {
            _ = stopped.cancelled() => {}
            _ = tokio::time::sleep(Duration::from_secs(30)) => logger.info(format!("{name} is still there")),
        }
    }
    logger.info(format!("Stopped monitoring {name}"));
}

/// Every minute, once the object has been left alone for 10 seconds.
#[kopf::timer("kopf.dev", "v1", "kopfexamples", interval = "1m", idle = "10s")]
async fn timer_fn(spec: &Value) -> Value {
    json!({"checked": spec.get("field")})
}

#[kopf::on_startup]
async fn startup_fn(logger: &Logger) {
    logger.info("Starting up: nothing is watched yet");
}

#[kopf::on_cleanup]
async fn cleanup_fn(logger: &Logger) {
    logger.info("Cleaning up: every handler has stopped");
}

/// Served at the `--liveness` URL, e.g. `-L http://0.0.0.0:8080/healthz`.
#[kopf::on_probe]
async fn now_fn() -> String {
    format!("{:?}", std::time::SystemTime::now())
}

#[tokio::main]
async fn main() -> ExitCode {
    kopf::run().await
}
