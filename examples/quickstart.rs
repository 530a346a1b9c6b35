//! The quickstart: a Kopf-style operator on an embedded fake cluster, no cluster needed.
//!
//! ```sh
//! cargo run --example quickstart                   # runs a scenario and exits
//! cargo run --example quickstart -- --keep-running # leaves the cluster up for kubectl
//! ```
//!
//! It starts kopf-testing's fake Kubernetes API server in this process, creates Kopf's classic
//! `KopfExample` CRD (`kopfexamples.kopf.dev/v1`), runs an operator with create, update, field
//! and delete handlers, then creates, changes and deletes an object and prints what each
//! handler saw.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use kopf::Memo;
use kopf::diff::Diff;
use kopf::operator::Operator;
use kopf_testing::{FakeApiServer, fixtures};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The object the scenario creates, changes and deletes.
const NAME: &str = "kopf-example-1";

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,kopf=info".into()),
        )
        .with_target(false)
        .init();
    let keep_running = std::env::args().any(|a| a == "--keep-running");
    match quickstart(keep_running).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("quickstart failed: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn quickstart(keep_running: bool) -> Result<(), Box<dyn std::error::Error>> {
    let server = FakeApiServer::start().await?;
    println!("fake Kubernetes API server: {}", server.url());
    server.apply(fixtures::KOPFEXAMPLE_CRD).await; // Kopf's `examples/crd.yaml`
    println!("created the CRD kopfexamples.kopf.dev");

    let memo = Memo::new().with(Seen::default());
    let handlers = kopf::handlers![create_fn, update_fn, field_fn, delete_fn];
    let operator = Operator::new(handlers)
        .memo(memo.clone())
        .client(server.client());
    let ready = operator.ready();
    let stop = CancellationToken::new();
    let scenario = async {
        let result = scenario(&server, &ready, keep_running).await;
        stop.cancel();
        result
    };
    let (stopped, scenario) = tokio::join!(operator.run(stop.clone()), scenario);
    stopped?;
    scenario?;

    println!("\nwhat the handlers saw:");
    for line in seen(&memo).0.lock().expect("not poisoned").iter() {
        println!("  {line}");
    }
    server.stop().await;
    println!("\nthe operator stopped and left nothing behind.");
    Ok(())
}

/// What the handlers saw, printed at the end; kept in the operator's memo.
#[derive(Debug, Default)]
struct Seen(Mutex<Vec<String>>);

impl Seen {
    fn record(&self, line: String) {
        self.0.lock().expect("not poisoned").push(line);
    }
}

/// Kopf's classic example, as Kopf users know it: handlers ask for the arguments they need.
#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn create_fn(name: &str, spec: &Value, memo: &Memo) -> Value {
    seen(memo).record(format!("create_fn: {name} with spec {spec}"));
    json!({"message": "hello world"})
}

#[kopf::on_update("kopf.dev", "v1", "kopfexamples")]
async fn update_fn(name: &str, diff: &Diff, memo: &Memo) {
    let changes: Vec<String> = diff
        .iter()
        .map(|d| {
            format!(
                "{} {}: {} -> {}",
                d.op,
                d.path.join("."),
                shown(d.old.as_ref()),
                shown(d.new.as_ref())
            )
        })
        .collect();
    seen(memo).record(format!("update_fn: {name} changed: {}", changes.join(", ")));
}

#[kopf::on_field("kopf.dev", "v1", "kopfexamples", field = "spec.field")]
async fn field_fn(old: Option<String>, new: Option<String>, memo: &Memo) {
    seen(memo).record(format!("field_fn: spec.field went from {old:?} to {new:?}"));
}

#[kopf::on_delete("kopf.dev", "v1", "kopfexamples")]
async fn delete_fn(name: &str, memo: &Memo) {
    seen(memo).record(format!("delete_fn: {name} is going away"));
}

fn seen(memo: &Memo) -> Arc<Seen> {
    memo.get::<Seen>()
        .expect("the quickstart puts its recorder into the memo")
}

/// A value as JSON, or `(absent)`.
fn shown(value: Option<&Value>) -> String {
    value.map_or_else(|| "(absent)".to_string(), Value::to_string)
}

/// Creates, changes and deletes an object, each time waiting until the operator handled it.
async fn scenario(
    server: &FakeApiServer,
    ready: &kopf::operator::Ready,
    keep_running: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    ready.wait().await;
    println!("the operator is ready\n");

    server
        .apply(
            "
            apiVersion: kopf.dev/v1
            kind: KopfExample
            metadata:
              name: kopf-example-1
              labels: {somelabel: somevalue}
            spec:
              duration: 1m
              field: value
              items: [item1, item2]
            ",
        )
        .await;
    println!("created {NAME}");
    // Handled once the creation's diff-base is stored (after every create-time handler): a
    // change before that would be part of the creation rather than an update.
    let created = server
        .wait_for("kopfexamples", "default", NAME, |o| {
            !o["status"]["create_fn"].is_null() && last_handled(o).is_some()
        })
        .await;
    println!("  status.create_fn = {}", created["status"]["create_fn"]);

    let change = json!({"spec": {"field": "changed"}});
    server.patch("kopfexamples", "default", NAME, change).await;
    println!("changed spec.field");
    server
        .wait_for("kopfexamples", "default", NAME, |o| {
            last_handled(o).is_some_and(|handled| handled.contains("changed"))
        })
        .await;

    if keep_running {
        let kubeconfig = std::env::temp_dir().join("kopf-quickstart.kubeconfig");
        server.write_kubeconfig(&kubeconfig)?;
        println!(
            "\nthe cluster keeps running; try:\n  KUBECONFIG={} kubectl get kopfexamples",
            kubeconfig.display()
        );
        println!("press Ctrl+C to stop.");
        tokio::signal::ctrl_c().await?;
    }

    server.delete("kopfexamples", "default", NAME).await;
    println!("deleted {NAME}");
    server
        .wait_for_deletion("kopfexamples", "default", NAME)
        .await;
    println!("  gone (the delete handler ran, the finalizer was removed)");
    Ok(())
}

/// The state Kopf last handled, as stored on the object.
fn last_handled(object: &Value) -> Option<&str> {
    object["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"].as_str()
}
