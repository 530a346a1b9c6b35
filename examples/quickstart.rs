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
use std::time::Duration;

use kopf::Memo;
use kopf::diff::Diff;
use kopf::operator::Operator;
use kopf_testing::FakeApiServer;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const CRD: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const EXAMPLES: &str = "/apis/kopf.dev/v1/namespaces/default/kopfexamples";

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
    let client = server.client();
    send(&client, "POST", CRD, crd()).await?;
    println!("created the CRD kopfexamples.kopf.dev");

    let memo = Memo::new().with(Seen::default());
    let handlers = kopf::handlers![create_fn, update_fn, field_fn, delete_fn];
    let operator = Operator::new(handlers)
        .memo(memo.clone())
        .client(server.client());
    let ready = operator.ready();
    let stop = CancellationToken::new();
    let scenario = async {
        let result = scenario(&client, &ready, keep_running, &server).await;
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
    drop(client);
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

async fn scenario(
    client: &kube::Client,
    ready: &kopf::operator::Ready,
    keep_running: bool,
    server: &FakeApiServer,
) -> Result<(), Box<dyn std::error::Error>> {
    ready.wait().await;
    println!("the operator is ready\n");

    let object = json!({
        "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
        "metadata": {"name": "kopf-example-1", "labels": {"somelabel": "somevalue"}},
        "spec": {"duration": "1m", "field": "value", "items": ["item1", "item2"]},
    });
    send(client, "POST", EXAMPLES, object).await?;
    println!("created kopf-example-1");
    // Handled once the creation's diff-base is stored (after every create-time handler): a
    // change before that would be part of the creation rather than an update.
    let created = wait_for(client, "kopf-example-1", |o| {
        !o["status"]["create_fn"].is_null()
            && o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"]
                .is_string()
    })
    .await?;
    println!("  status.create_fn = {}", created["status"]["create_fn"]);

    let change = json!({"spec": {"field": "changed"}});
    send(
        client,
        "PATCH",
        &format!("{EXAMPLES}/kopf-example-1"),
        change,
    )
    .await?;
    println!("changed spec.field");
    wait_for(client, "kopf-example-1", |o| {
        o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"]
            .as_str()
            .is_some_and(|c| c.contains("changed"))
    })
    .await?;

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

    send(
        client,
        "DELETE",
        &format!("{EXAMPLES}/kopf-example-1"),
        json!({}),
    )
    .await?;
    println!("deleted kopf-example-1");
    for _ in 0..500 {
        if get(client, "kopf-example-1").await.is_none() {
            println!("  gone (the delete handler ran, the finalizer was removed)");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err("the object was not deleted in time".into())
}

async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Value,
) -> Result<Value, kube::Error> {
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(serde_json::to_vec(&body).expect("JSON serializes"))
        .expect("a valid request");
    client.request(request).await
}

async fn get(client: &kube::Client, name: &str) -> Option<Value> {
    let request = http::Request::get(format!("{EXAMPLES}/{name}"))
        .body(Vec::new())
        .expect("a valid request");
    client.request(request).await.ok()
}

async fn wait_for(
    client: &kube::Client,
    name: &str,
    condition: impl Fn(&Value) -> bool,
) -> Result<Value, Box<dyn std::error::Error>> {
    for _ in 0..500 {
        if let Some(object) = get(client, name).await.filter(|o| condition(o)) {
            return Ok(object);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("{name} did not reach the expected state in time").into())
}

/// Kopf's classic example CRD.
fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "kopfexamples.kopf.dev"},
        "spec": {
            "scope": "Namespaced",
            "group": "kopf.dev",
            "names": {"kind": "KopfExample", "plural": "kopfexamples", "singular": "kopfexample",
                      "shortNames": ["kopfexes", "kopfex", "kexes", "kex"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                }}},
                "additionalPrinterColumns": [
                    {"name": "Duration", "type": "string", "priority": 0, "jsonPath": ".spec.duration"},
                    {"name": "Children", "type": "string", "priority": 0, "jsonPath": ".status.create_fn.children"},
                    {"name": "Message", "type": "string", "priority": 0, "jsonPath": ".status.create_fn.message"},
                ],
            }],
        },
    })
}
