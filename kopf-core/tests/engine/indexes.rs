//! Indexes (`#[kopf::index]`): pods indexed by their `app` label, read by the handlers of
//! KopfExamples; objects that existed before the operator started are in the index when the
//! first handler runs; entries follow the pods' changes and leave with them.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use kopf::operator::Operator;
use kopf::{Index, Memo};
use kopf_testing::{OperatorHarness, TestClient, wait};
use serde_json::{Value, json};

use crate::support::{create, patch, server_with_crd, wait_object};

const PODS: &str = "/api/v1/namespaces/default/pods";
const EVENTS: &str = "/api/v1/namespaces/default/events";

/// Pod names by their `app` label; pods without one are not indexed.
#[kopf::index("v1", "pods", labels("app" = present))]
async fn pods_by_app(labels: BTreeMap<String, String>, name: String) -> Option<(String, String)> {
    // Slower than the handlers of KopfExamples: without the wait for the filled indexes,
    // they would run before the pods are indexed.
    tokio::time::sleep(Duration::from_millis(100)).await;
    Some((labels.get("app")?.clone(), name))
}

/// The pods of the KopfExample's `spec.app`, sorted.
fn pods_of(index: &Index<String, String>, app: &str) -> Vec<String> {
    let mut pods: Vec<String> = index
        .get(app)
        .map(|store| store.iter().cloned().collect())
        .unwrap_or_default();
    pods.sort();
    pods
}

/// Where the create handler leaves a handle to the index, for the test to watch it.
#[derive(Default)]
struct Seen(Mutex<Option<Index<String, String>>>);

#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn count_pods(spec: &Value, pods_by_app: &Index<String, String>, memo: &Memo) -> Value {
    if let Some(seen) = memo.get::<Seen>() {
        *seen.0.lock().unwrap() = Some(pods_by_app.clone());
    }
    json!({"pods": pods_of(pods_by_app, spec["app"].as_str().unwrap_or_default())})
}

// An event handler waits for the filled indexes too; it reports what it saw when the object
// was listed at the start.
#[kopf::on_event("kopf.dev", "v1", "kopfexamples")]
async fn listed_pods(
    event_type: Option<&str>,
    spec: &Value,
    pods_by_app: &Index<String, String>,
) -> Option<Value> {
    let app = spec["app"].as_str().unwrap_or_default();
    event_type
        .is_none()
        .then(|| json!({"pods": pods_of(pods_by_app, app)}))
}

// A sync handler, taking the index by value (a handle to the same index).
#[kopf::on_update("kopf.dev", "v1", "kopfexamples")]
fn recount(spec: &Value, pods_by_app: Index<String, String>) -> Value {
    json!({"pods": pods_of(&pods_by_app, spec["app"].as_str().unwrap_or_default())})
}

async fn create_pod(client: &kube::Client, name: &str, app: &str) {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]},
    });
    let created = TestClient::new(client.clone())
        .request("POST", PODS, pod)
        .await
        .1;
    assert_eq!(created["metadata"]["name"], name, "{created}");
}

async fn patch_pod(client: &kube::Client, name: &str, body: Value) {
    let path = format!("{PODS}/{name}");
    let patched = TestClient::new(client.clone())
        .request("PATCH", &path, body)
        .await
        .1;
    assert_eq!(patched["metadata"]["name"], name, "{patched}");
}

/// Waits until the index, as the operator sees it, has these pods for the app.
async fn wait_index(index: &Index<String, String>, app: &str, pods: &[&str]) {
    wait(&format!("the index to have {pods:?} for {app}"), || async {
        (pods_of(index, app) == pods).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_read_indexes_filled_before_they_run_and_kept_up_to_date() {
    let server = server_with_crd().await;
    let client = server.client();
    create_pod(&client, "web-1", "web").await;
    create_pod(&client, "web-2", "web").await;
    create_pod(&client, "db-1", "db").await;
    create(&client, "early", json!({"app": "web"})).await;
    drop(client);

    let seen = Memo::new().with(Seen::default());
    let harness = OperatorHarness::start_on(
        server,
        Operator::new(kopf::handlers![
            pods_by_app,
            count_pods,
            listed_pods,
            recount
        ])
        .settings(kopf_testing::test_settings())
        .memo(seen.clone()),
    )
    .await;
    let client = harness.client();

    // The object that existed before the start is handled with the complete index.
    wait_object(&harness, "early", "the handlers' results", |o| {
        o["status"]["count_pods"] == json!({"pods": ["web-1", "web-2"]})
            && o["status"]["listed_pods"] == json!({"pods": ["web-1", "web-2"]})
    })
    .await;
    let index = seen
        .get::<Seen>()
        .and_then(|seen| seen.0.lock().unwrap().clone())
        .expect("the create handler kept the index");
    assert_eq!(pods_of(&index, "db"), ["db-1"]);

    // A new pod and a new object afterwards.
    create_pod(&client, "db-2", "db").await;
    wait_index(&index, "db", &["db-1", "db-2"]).await;
    create(&client, "late", json!({"app": "db"})).await;
    wait_object(&harness, "late", "the create handler's result", |o| {
        o["status"]["count_pods"] == json!({"pods": ["db-1", "db-2"]})
    })
    .await;

    // A pod's entry moves with its label, and leaves when the pod stops passing the filters.
    patch_pod(
        &client,
        "web-1",
        json!({"metadata": {"labels": {"app": "db"}}}),
    )
    .await;
    patch_pod(
        &client,
        "web-2",
        json!({"metadata": {"labels": {"app": null}}}),
    )
    .await;
    wait_index(&index, "db", &["db-1", "db-2", "web-1"]).await;
    wait_index(&index, "web", &[]).await;
    assert!(
        !index.contains_key("web"),
        "an emptied store leaves the index"
    );

    // A deleted pod leaves the index.
    let (status, deleted) = harness
        .request("DELETE", &format!("{PODS}/db-1"), json!({}))
        .await;
    assert!(status.is_success(), "{deleted}");
    wait_index(&index, "db", &["db-2", "web-1"]).await;

    // The sync update handler reads the same index.
    patch(&client, "late", json!({"spec": {"touched": true}})).await;
    wait_object(&harness, "late", "the update handler's result", |o| {
        o["status"]["recount"] == json!({"pods": ["db-2", "web-1"]})
    })
    .await;

    drop(client);
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_missing_from_the_registry_is_a_permanent_error_of_the_handler() {
    let mut settings = kopf_testing::test_settings();
    settings.posting.loggers = true;
    settings.posting.level = tracing::Level::ERROR;
    let harness = OperatorHarness::start_on(
        server_with_crd().await,
        Operator::new(kopf::handlers![count_pods]).settings(settings),
    )
    .await;
    let client = harness.client();
    create(&client, "lonely", json!({"app": "web"})).await;
    let message = wait("the handler's failure to be posted", || async {
        let events = harness.request("GET", EVENTS, None).await.1;
        let messages = events["items"].as_array().cloned().unwrap_or_default();
        messages
            .iter()
            .filter_map(|event| event["message"].as_str().map(String::from))
            .find(|message| message.contains("failed permanently"))
    })
    .await;
    assert_eq!(
        message,
        "Handler 'count_pods' failed permanently: the operator has no index `pods_by_app`: \
         add its `#[kopf::index]` function to the registry (indexes: none)"
    );
    // The operator goes on: the object is handled (the failure recorded as done).
    wait_object(&harness, "lonely", "the object to be handled", |o| {
        !o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"].is_null()
    })
    .await;
    drop(client);
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plain_api_reads_indexes_by_name() {
    use kopf::registry::{ChangeHandler, IndexHandler, Registry};
    use kopf::resources::Selector;
    let registry = Registry::new()
        .with(IndexHandler::new(
            Selector::new("", "v1", "pods"),
            "pods_by_app",
            |invocation| async move {
                let app = invocation.labels()["app"].as_str().map(String::from);
                Ok(app.map(|app| (app, invocation.name().to_string())))
            },
        ))
        .with(ChangeHandler::on_create(
            crate::support::examples(),
            "count",
            |invocation| async move {
                let index = invocation.index::<String, String>("pods_by_app")?;
                let app = invocation.spec()["app"].as_str().unwrap_or_default();
                Ok(Some(json!({"pods": pods_of(index, app)})))
            },
        ));
    let server = server_with_crd().await;
    create_pod(&server.client(), "web-1", "web").await;
    create(&server.client(), "early", json!({"app": "web"})).await;
    let harness = OperatorHarness::start_on(
        server,
        Operator::new(registry).settings(kopf_testing::test_settings()),
    )
    .await;
    wait_object(&harness, "early", "the handler's result", |o| {
        o["status"]["count"] == json!({"pods": ["web-1"]})
    })
    .await;
    harness.stop().await.expect("a clean stop");
}

/// Asks to label each pod it indexes: as in Kopf, an index function gets a patch that is
/// never applied (an index reads objects, it does not change them).
#[kopf::index("v1", "pods", id = "touching", labels("app" = present))]
async fn touching(
    name: String,
    labels: BTreeMap<String, String>,
    patch: &mut kopf::Patch,
    memo: &Memo,
) -> Option<(String, String)> {
    patch.labels().insert("touched".into(), json!("yes"));
    patch.function(|body: &mut Value| body["metadata"]["labels"]["touched"] = json!("fn"));
    if let Some(calls) = memo.get::<crate::support::Calls>() {
        calls.record(json!({"pod": name, "app": labels.get("app")}));
    }
    Some((labels.get("app")?.clone(), name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_functions_patch_is_never_applied() {
    let server = server_with_crd().await;
    let calls = crate::support::Calls::default();
    let operator = Operator::new(kopf::handlers![touching])
        .settings(kopf_testing::test_settings())
        .memo(Memo::new().with(calls.clone()));
    let harness = OperatorHarness::start_on(server, operator).await;
    let client = harness.client();
    create_pod(&client, "web-1", "web").await;
    calls.wait_len(1).await;
    // The pod's events are processed one after another: once the second is indexed, the
    // first one's cycle, and a write it would have made, is over.
    patch_pod(
        &client,
        "web-1",
        json!({"metadata": {"labels": {"app": "db"}}}),
    )
    .await;
    calls.wait_len(2).await;
    let pod = TestClient::new(client.clone())
        .request("GET", &format!("{PODS}/web-1"), json!(null))
        .await
        .1;
    assert_eq!(pod["metadata"]["labels"], json!({"app": "db"}), "{pod}");
    let writes: Vec<_> = harness
        .sent()
        .into_iter()
        .filter(|sent| sent.resource.as_deref() == Some("pods") && sent.method != "GET")
        .map(|sent| format!("{} {}", sent.method, sent.path))
        .collect();
    assert_eq!(writes, Vec::<String>::new(), "no write to the pods");
    drop(client);
    harness.stop().await.expect("a clean stop");
}
