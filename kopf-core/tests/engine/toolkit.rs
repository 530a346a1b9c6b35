//! Kopf's toolkits used from handlers: `kopf::info/warn/exception/event` post Events through
//! the operator running the handler (async and sync handlers alike), visible through the API
//! and kubectl; `kopf::hierarchies::adopt` and `kopf::hierarchies::adopt_to_current` make children
//! that the server deletes with their parent.
//!
//! The kubectl check is skipped loudly without kubectl (and fails under CI).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::ConfigMap;
use kopf::operator::Operator;
use kopf::registry::{ChangeHandler, Registry};
use kopf_testing::{DEADLINE, OperatorHarness, test_settings, wait};
use serde_json::{Value, json};

use crate::posting::{ours, post_the_servers_own_event, run_until};
use crate::support::{COLLECTION, create, delete, examples, get, server_with_crd};

const EVENTS: &str = "/api/v1/namespaces/default/events";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

async fn list(client: &kube::Client, path: &str) -> Vec<Value> {
    let request = http::Request::get(path).body(Vec::new()).unwrap();
    let list: Value = client
        .request(request)
        .await
        .expect("the objects are listed");
    list["items"].as_array().cloned().unwrap_or_default()
}

fn by_reason<'a>(events: &'a [Value], reason: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["reason"] == reason)
        .unwrap_or_else(|| panic!("an event with reason {reason:?} in {events:#?}"))
}

/// An object other than the handler's: events about it are posted as well.
fn neighbour() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "neighbour", "namespace": "default", "uid": "uid-of-neighbour"},
    })
}

/// An async handler and a sync one posting through the free functions.
fn posting_registry() -> Registry {
    Registry::new()
        .with(ChangeHandler::on_create(
            examples(),
            "async_fn",
            |inv| async move {
                kopf::info(inv.body(), "Created", format_args!("{} is created", inv.name()));
                tokio::task::yield_now().await; // still the current handler after a suspension
                kopf::warn(&neighbour(), "Noticed", "about another object");
                kopf::exception(inv.body(), "Failed", "x".repeat(2000));
                let event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "default"}});
                kopf::info(&event, "Loop", "never posted");
                Ok(Some(json!("done")))
            },
        ))
        .with(ChangeHandler::on_create(
            examples(),
            "sync_fn",
            kopf::registry::blocking(|inv| {
                kopf::event(inv.body(), "Normal", "FromThread", "posted by a sync handler");
                Ok(Some(json!("done")))
            }),
        ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_post_events_through_the_free_functions() {
    let server = server_with_crd().await;
    let mut created = Value::Null;
    run_until(
        &server,
        Operator::new(posting_registry()).settings(test_settings()),
        async |client| {
            created = create(client, "one", json!({})).await;
            wait("both handlers to finish", || async {
                get(client, "one").await.filter(|o| {
                    o["status"]["async_fn"] == "done" && o["status"]["sync_fn"] == "done"
                })
            })
            .await;
            wait("the four events", || async {
                (ours(list(client, EVENTS).await).len() >= 4).then_some(())
            })
            .await;
        },
    )
    .await;

    // The operator has stopped, and its poster drained its queue: this is all there is.
    let events = ours(list(&server.client(), EVENTS).await);
    assert_eq!(events.len(), 4, "nothing about the Event: {events:#?}");
    let own = json!({
        "apiVersion": "kopf.dev/v1",
        "kind": "KopfExample",
        "name": "one",
        "uid": created["metadata"]["uid"],
        "namespace": "default",
    });
    let info = by_reason(&events, "Created");
    assert_eq!(info["type"], "Normal");
    assert_eq!(info["message"], "one is created");
    assert_eq!(info["involvedObject"], own);
    assert_eq!(info["metadata"]["generateName"], "kopf-event-");
    assert_eq!(info["source"], json!({"component": "kopf"}));

    let warning = by_reason(&events, "Noticed");
    assert_eq!(warning["type"], "Warning");
    assert_eq!(
        warning["involvedObject"],
        json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "neighbour", "uid": "uid-of-neighbour", "namespace": "default"})
    );

    let error = by_reason(&events, "Failed");
    assert_eq!(error["type"], "Error");
    assert_eq!(error["involvedObject"], own);
    let message = error["message"].as_str().unwrap();
    assert_eq!(message.chars().count(), 1024, "cut as Kopf cuts messages");
    assert_eq!(
        message,
        format!("{}...{}", "x".repeat(511), "x".repeat(510))
    );

    let threaded = by_reason(&events, "FromThread");
    assert_eq!(threaded["type"], "Normal");
    assert_eq!(threaded["involvedObject"], own);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_events_are_visible_through_kubectl() {
    let Some(kubectl) = kubectl("the_events_are_visible_through_kubectl") else {
        return;
    };
    let server = server_with_crd().await;
    let dir = TempDir::new("toolkit-kubectl");
    server
        .write_kubeconfig(dir.path().join("kubeconfig"))
        .expect("the kubeconfig is written");
    let operator = Operator::new(posting_registry()).settings(test_settings());
    let harness = OperatorHarness::start_on(server, operator).await;
    let client = harness.client();
    post_the_servers_own_event(&client).await;
    create(&client, "one", json!({})).await;
    wait("the four events", || async {
        (ours(list(&client, EVENTS).await).len() >= 4).then_some(())
    })
    .await;

    let json = run_kubectl(
        &kubectl,
        dir.path(),
        &["get", "events", "-n", "default", "-o", "json"],
    )
    .await;
    let listed: Value = serde_json::from_str(&json).expect("kubectl prints JSON");
    let listed = ours(
        listed["items"]
            .as_array()
            .expect("a list of events")
            .clone(),
    );
    let mut reasons: Vec<&str> = listed.iter().filter_map(|e| e["reason"].as_str()).collect();
    reasons.sort_unstable();
    assert_eq!(reasons, ["Created", "Failed", "FromThread", "Noticed"]);

    // The columns of `kubectl get events` on a real cluster (the fake server's tables have
    // only a name and an age), printed by kubectl itself.
    // The first column tells the operator's Events from the server's own.
    let columns = "SOURCE:.source.component,TYPE:.type,REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message";
    let table = run_kubectl(
        &kubectl,
        dir.path(),
        &[
            "get",
            "events",
            "-n",
            "default",
            "--sort-by",
            ".reason",
            "-o",
        ]
        .into_iter()
        .chain([format!("custom-columns={columns}").as_str()])
        .collect::<Vec<_>>(),
    )
    .await;
    let cut = format!("{}...{}", "x".repeat(511), "x".repeat(510));
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|line| line.split_whitespace().take(5).collect::<Vec<_>>())
        .filter(|row| matches!(row.first(), Some(&"SOURCE" | &"kopf")))
        .map(|row| row[1..].to_vec())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["TYPE", "REASON", "OBJECT", "MESSAGE"],
            vec!["Normal", "Created", "one", "one"],
            vec!["Error", "Failed", "one", &cut],
            vec!["Normal", "FromThread", "one", "posted"],
            vec!["Warning", "Noticed", "neighbour", "about"],
        ],
        "`kubectl get events`:\n{table}"
    );
    harness.stop().await.expect("a clean stop");
}

/// The parent's create handlers: an async one adopts a JSON config map and creates it; a sync
/// one adopts a typed config map to the current object and returns it.
fn adopting_registry() -> Registry {
    Registry::new()
        .with(ChangeHandler::on_create(
            examples(),
            "create_child",
            |inv| async move {
                let mut child = json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "data": {"parent": inv.name()},
                });
                kopf::hierarchies::adopt(&mut child, inv.body())?;
                let namespace = child["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let request =
                    http::Request::post(format!("/api/v1/namespaces/{namespace}/configmaps"))
                        .header("content-type", "application/json")
                        .body(serde_json::to_vec(&child)?)?;
                let created: Value = inv.client().request(request).await?;
                kopf::info(&created, "Adopted", format_args!("by {}", inv.name()));
                Ok(Some(created["metadata"]["name"].clone()))
            },
        ))
        .with(ChangeHandler::on_create(
            examples(),
            "adopt_typed",
            kopf::registry::blocking(|_inv| {
                let mut child = ConfigMap::default();
                kopf::hierarchies::harmonize_naming(&mut child, "exact", true)?;
                kopf::hierarchies::adopt_to_current(&mut child)?;
                Ok(Some(serde_json::to_value(child)?))
            }),
        ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopted_children_are_owned_named_placed_labelled_and_collected_with_the_parent() {
    let operator = Operator::new(adopting_registry()).settings(test_settings());
    let harness = OperatorHarness::start_on(server_with_crd().await, operator).await;
    let client = harness.client();
    let parent = harness
        .request(
            "POST",
            COLLECTION,
            json!({
                "apiVersion": "kopf.dev/v1",
                "kind": "KopfExample",
                "metadata": {"name": "parent", "labels": {"app": "demo"}},
                "spec": {},
            }),
        )
        .await
        .1;
    let uid = parent["metadata"]["uid"].clone();
    let done = wait("both handlers' results", || async {
        get(&client, "parent").await.filter(|o| {
            o["status"]["create_child"].is_string() && o["status"]["adopt_typed"].is_object()
        })
    })
    .await;
    let reference = json!({
        "controller": true,
        "blockOwnerDeletion": true,
        "apiVersion": "kopf.dev/v1",
        "kind": "KopfExample",
        "name": "parent",
        "uid": uid,
    });

    let children = list(&client, CONFIGMAPS).await;
    let child = children
        .iter()
        .find(|c| c["metadata"]["name"] == done["status"]["create_child"])
        .unwrap_or_else(|| panic!("the created child in {children:#?}"));
    let meta = &child["metadata"];
    assert_eq!(meta["generateName"], "parent-");
    assert!(
        meta["name"].as_str().unwrap().len() > "parent-".len(),
        "a generated name: {meta:#}"
    );
    assert_eq!(meta["namespace"], "default");
    assert_eq!(meta["labels"], json!({"app": "demo"}));
    assert_eq!(meta["ownerReferences"], json!([reference]));
    assert_eq!(child["data"], json!({"parent": "parent"}));

    let typed = &done["status"]["adopt_typed"]["metadata"];
    assert_eq!(typed["name"], "exact", "a name of its own is kept");
    assert_eq!(typed.get("generateName"), None);
    assert_eq!(typed["namespace"], "default");
    assert_eq!(typed["labels"], json!({"app": "demo"}));
    assert_eq!(typed["ownerReferences"], json!([reference]));

    let name = meta["name"].as_str().unwrap().to_string();
    wait("the event about the child", || async {
        let events = list(&client, EVENTS).await;
        events
            .iter()
            .any(|e| e["reason"] == "Adopted" && e["involvedObject"]["name"] == *name)
            .then_some(())
    })
    .await;

    delete(&client, "parent").await;
    // A real API server's garbage collector learns of a new custom resource's kind only at
    // its next rescan of discovery (every 30 s), so this waits longer than other waits.
    let collected = async {
        loop {
            let children = list(&client, CONFIGMAPS).await;
            if !children.iter().any(|c| c["metadata"]["name"] == *name) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(4 * kopf_testing::DEADLINE, collected)
        .await
        .expect("the child is collected with its parent");
    harness.stop().await.expect("a clean stop");
}

// ---------------------------------------------------------------------------------------------
// kubectl (after kopf-testing/fake-apiserver/tests/apiserver/support.rs).

/// Whether we run under CI, where a missing kubectl is a failure rather than a skip.
fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// The path of `kubectl`, or a loud skip (a failure under CI).
fn kubectl(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("kubectl"))
        .find(|path| path.is_file());
    if found.is_none() {
        let why = "kubectl is not installed (not found in PATH)";
        if in_ci() {
            panic!("{test}: {why} (CI is set, so this is a failure, not a skip)");
        }
        eprintln!("\n!!! SKIPPED {test}: {why}\n");
    }
    found
}

/// Runs kubectl with the folder's kubeconfig and a discovery cache of its own; it must
/// succeed within the deadline. Returns its stdout.
async fn run_kubectl(kubectl: &Path, dir: &Path, args: &[&str]) -> String {
    let mut command = Command::new(kubectl);
    command
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .args(args)
        .stdin(Stdio::null());
    let running = tokio::task::spawn_blocking(move || command.output());
    let output: Output = tokio::time::timeout(DEADLINE, running)
        .await
        .unwrap_or_else(|_| panic!("`kubectl {}` finishes in time", args.join(" ")))
        .expect("the blocking task")
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "`kubectl {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("kubectl prints UTF-8")
}

/// A fresh folder for kubectl's files; removed when the test passes, kept when it fails.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "{test}-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("creating a temporary folder");
        TempDir(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept for inspection: {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Kopf's options of the hierarchy functions in a real handler: the owner inferred from the
/// object being handled, a forced and strict naming, labels on a nested pod template, and an
/// owner reference that is not the controller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adoption_options_and_the_inferred_owner_work_in_handlers() {
    use kopf::hierarchies::{CurrentObject, Options};

    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "adopt_with_options",
        kopf::registry::blocking(|_inv| {
            let mut child = json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "mine", "namespace": "elsewhere", "labels": {"app": "mine"}},
                "spec": {"template": {"spec": {}}},
            });
            let options = Options::default()
                .forced(true)
                .strict(true)
                .nested("spec.template")
                .controller(None);
            kopf::hierarchies::adopt_with(&mut child, &CurrentObject, &options)?;
            Ok(Some(child))
        }),
    ));
    let operator = Operator::new(registry).settings(test_settings());
    let harness = OperatorHarness::start_on(server_with_crd().await, operator).await;
    let client = harness.client();
    let parent = harness
        .request(
            "POST",
            COLLECTION,
            json!({
                "apiVersion": "kopf.dev/v1",
                "kind": "KopfExample",
                "metadata": {"name": "parent", "labels": {"app": "demo"}},
                "spec": {},
            }),
        )
        .await
        .1;
    let done = wait("the handler's result", || async {
        get(&client, "parent")
            .await
            .filter(|o| o["status"]["adopt_with_options"].is_object())
    })
    .await;
    let child = &done["status"]["adopt_with_options"];
    let meta = &child["metadata"];
    assert_eq!(
        meta["name"], "parent",
        "forced and strict: the owner's name"
    );
    assert_eq!(
        meta["namespace"], "default",
        "forced: the owner's namespace"
    );
    assert_eq!(
        meta["labels"],
        json!({"app": "demo"}),
        "forced: the owner's labels"
    );
    assert_eq!(
        child["spec"]["template"]["metadata"]["labels"],
        json!({"app": "demo"}),
        "nested: the pod template is labelled too"
    );
    assert_eq!(
        meta["ownerReferences"],
        json!([{
            "blockOwnerDeletion": true,
            "apiVersion": "kopf.dev/v1",
            "kind": "KopfExample",
            "name": "parent",
            "uid": parent["metadata"]["uid"],
        }]),
        "no controller key: Options::controller(None)"
    );
    harness.stop().await.expect("a clean stop");
}
