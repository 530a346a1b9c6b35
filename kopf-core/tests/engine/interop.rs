//! Interoperability with Python Kopf 1.45.2: a Kopf operator and a kopf-rs operator with the
//! same handler ids take turns on the same objects (one stops, the other starts on the same
//! fake API server). Finished handlers are not run again, the diff-base of one is the other's
//! old state, and the progress of a failed-then-retried handler is continued with the same
//! retry count. The Kopf operator is `python/interop_operator.py`.
//!
//! These tests need the project's virtualenv with Kopf (`scripts/python-env`); without Python
//! they are skipped loudly (and fail under CI). They take turns with each other ([`serial`]):
//! Kopf takes seconds to start and the machine's cores are better spent on one at a time.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kopf::TemporaryError;
use kopf::operator::{Operator, OperatorError};
use kopf::registry::{ChangeHandler, EventHandler, Registry};
use kopf_testing::{FakeApiServer, TestClient};
use serde_json::{Value, json};
use tokio::sync::{OnceCell, Semaphore, SemaphorePermit};
use tokio_util::sync::CancellationToken;

use crate::peering::{create_peering_crd, status_at, wait_lines};
use crate::stopping::Running;
use crate::support::{Calls, create, examples, get, patch, server_with_crd};

/// Kopf takes seconds to start and to settle its handlers: be generous.
const DEADLINE: Duration = Duration::from_secs(90);

const PREFIX: &str = "kopf.zalando.org";
const LAST_HANDLED: &str = "kopf.zalando.org/last-handled-configuration";
const CREATE_RECORD: &str = "kopf.zalando.org/create_fn";
const UPDATE_RECORD: &str = "kopf.zalando.org/update_fn";
const TOUCH_DUMMY: &str = "kopf.zalando.org/touch-dummy";

/// The diff-base of `spec: {field: one}` as Kopf 1.45.2 writes it.
const DIFFBASE_ONE: &str = "{\"spec\":{\"field\":\"one\"}}\n";

/// The keys of a progress record after a temporary failure, in Kopf's order.
const RECORD_KEYS: [&str; 7] = [
    "started", "delayed", "purpose", "retries", "success", "failure", "message",
];

// ---------------------------------------------------------------------------------------------
// Helpers: Python, processes, waiting (after kopf-testing/fake-apiserver/tests/apiserver/{support,python}.rs).

/// The tests of this module run one at a time, each holding the permit for its whole duration.
async fn serial() -> SemaphorePermit<'static> {
    static TURN: Semaphore = Semaphore::const_new(1);
    TURN.acquire().await.expect("the semaphore is never closed")
}

/// Whether we run under CI, where a missing Python is a failure rather than a skip.
fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// Says loudly that a test cannot run here; fails under CI.
fn skip(test: &str, why: &str) {
    if in_ci() {
        panic!("{test}: {why} (CI is set, so this is a failure, not a skip)");
    }
    eprintln!("\n!!! SKIPPED {test}: {why}\n");
}

fn project_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("kopf-core sits in the workspace")
}

fn in_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .any(|dir| dir.join(name).is_file())
}

/// The virtualenv's python with Kopf (made by `scripts/python-env` on first use), or a loud
/// skip.
pub(crate) async fn python(test: &str) -> Option<PathBuf> {
    static PYTHON: OnceCell<Result<PathBuf, String>> = OnceCell::const_new();
    let found = PYTHON
        .get_or_init(|| async {
            if !in_path("python3") && std::env::var_os("PYTHON").is_none() {
                return Err("python3 is not installed (not found in PATH)".to_string());
            }
            let script = project_root().join("scripts/python-env");
            let output = tokio::task::spawn_blocking(move || {
                Command::new("bash")
                    .arg(&script)
                    .output()
                    .map_err(|e| format!("running {}: {e}", script.display()))
            })
            .await
            .expect("the blocking task")?;
            if !output.status.success() {
                return Err(format!(
                    "scripts/python-env failed (pip could not install kopf?): {}",
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

/// A fresh folder for a test's kubeconfig, Kopf's log and its handlers' calls; removed when
/// the test passes, kept (and named in the output) when it fails.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "interop-{test}-{}-{}",
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

/// Python Kopf running `python/interop_operator.py` against the server behind `kubeconfig`:
/// killed when dropped (and then its log is printed if the test is failing).
struct Kopf {
    child: Child,
    log: PathBuf,
    calls: PathBuf,
}

impl Kopf {
    /// Starts `kopf run <options> --namespace default` in `dir`, in the given mode (with the
    /// identity `POD_ID` when given), without waiting for anything.
    fn spawn(
        python: &Path,
        dir: &Path,
        server: &FakeApiServer,
        mode: &str,
        options: &[&str],
        pod_id: Option<&str>,
    ) -> Kopf {
        let kubeconfig = dir.join("kubeconfig");
        server
            .write_kubeconfig(&kubeconfig)
            .expect("writing the kubeconfig");
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/engine/python/interop_operator.py");
        let log = dir.join(format!("kopf-{mode}.log"));
        let calls = dir.join(format!("calls-{mode}.jsonl"));
        let output = std::fs::File::create(&log).expect("creating the log file");
        let mut command = Command::new(python);
        command
            .args(["-m", "kopf", "run"])
            .args(options)
            .args(["--namespace", "default", "--verbose"])
            .arg(&script)
            .current_dir(dir)
            .env("KUBECONFIG", &kubeconfig)
            .env("INTEROP_MODE", mode)
            .env("INTEROP_CALLS", &calls)
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            // Never let the clients find a real cluster from inside a pod.
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .env_remove("POD_ID")
            .stdin(Stdio::null())
            .stdout(Stdio::from(
                output.try_clone().expect("cloning the log file"),
            ))
            .stderr(Stdio::from(output));
        if let Some(id) = pod_id {
            command.env("POD_ID", id);
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("starting Kopf with {}: {e}", python.display()));
        Kopf { child, log, calls }
    }

    /// Starts `kopf run --standalone --namespace default` in `dir`, in the given mode, and
    /// waits until it has processed the listing of KopfExamples (its event handler saw one of
    /// `listed`), or, if `listed` is `None`, until it watches KopfExamples.
    async fn start(
        python: &Path,
        dir: &Path,
        server: &FakeApiServer,
        mode: &str,
        listed: Option<&str>,
    ) -> Kopf {
        let requests_before = server.requests().len();
        let mut kopf = Kopf::spawn(python, dir, server, mode, &["--standalone"], None);
        match listed {
            Some(name) => {
                let path = kopf.calls.clone();
                kopf.until("Kopf to process the listing", || async {
                    kopf_calls(&path)
                        .iter()
                        .any(|c| {
                            c["handler"] == "event_fn" && c["name"] == name && c["type"].is_null()
                        })
                        .then_some(())
                })
                .await;
            }
            None => {
                kopf.until("Kopf to watch KopfExamples", || async {
                    let watching = server.requests()[requests_before..].iter().any(|r| {
                        r.verb == "watch" && r.resource == "kopfexamples.kopf.dev" && r.code == 200
                    });
                    (watching && server.stats().open_watches >= 1).then_some(())
                })
                .await;
            }
        }
        kopf
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// What Kopf's handlers were called with, in order.
    fn calls(&self) -> Vec<Value> {
        kopf_calls(&self.calls)
    }

    /// Waits until `condition` holds; fails at once if Kopf exits meanwhile.
    async fn until<T, F, Fut>(&mut self, what: &str, mut condition: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        let until = tokio::time::Instant::now() + DEADLINE;
        loop {
            if let Some(value) = condition().await {
                return value;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("Kopf exited ({status}) while the test waited for {what}");
            }
            assert!(
                tokio::time::Instant::now() < until,
                "timed out after {DEADLINE:?} waiting for {what}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends SIGTERM, as Kubernetes does to stop a pod, and waits for Kopf to exit.
    async fn terminate(&mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("running kill");
        assert!(sent.success(), "kill -TERM {pid} failed: {sent}");
        let until = tokio::time::Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().expect("waiting for Kopf") {
                return status;
            }
            assert!(
                tokio::time::Instant::now() < until,
                "Kopf did not exit within {DEADLINE:?} after SIGTERM"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Kopf {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "\n----- Kopf's calls ({calls}) -----\n{}\n----- Kopf's log ({log}) -----\n{}\n----- end of Kopf -----",
                std::fs::read_to_string(&self.calls).unwrap_or_default(),
                self.log_text(),
                calls = self.calls.display(),
                log = self.log.display(),
            );
        }
    }
}

fn kopf_calls(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        // A line being written may be incomplete: it is read again on the next poll.
        .map_while(|line| serde_json::from_str(line).ok())
        .collect()
}

/// A kopf-rs operator running on the test's runtime against a server that outlives it.
struct RustOperator {
    stop: CancellationToken,
    running: tokio::task::JoinHandle<Result<(), OperatorError>>,
}

impl RustOperator {
    /// Starts the operator for the `default` namespace and waits until it has listed.
    async fn start(
        server: &FakeApiServer,
        registry: Registry,
        settings: kopf::Settings,
    ) -> RustOperator {
        let operator = Operator::new(registry)
            .settings(settings)
            .namespaces(["default"])
            .client(server.client());
        let ready = operator.ready();
        let stop = CancellationToken::new();
        let running = tokio::spawn(operator.run(stop.clone()));
        tokio::time::timeout(DEADLINE, ready.wait())
            .await
            .expect("the kopf-rs operator gets ready in time");
        RustOperator { stop, running }
    }

    /// Stops the operator and waits for `run()` to return, and for its watches to close.
    async fn stop(self, server: &FakeApiServer) -> Result<(), OperatorError> {
        self.stop.cancel();
        let result = tokio::time::timeout(DEADLINE, self.running)
            .await
            .expect("the kopf-rs operator stops in time")
            .expect("the operator's task did not panic");
        wait("the kopf-rs operator's watches to close", || async {
            (server.stats().open_watches == 0).then_some(())
        })
        .await;
        result
    }
}

/// Polls `condition` until it returns `Some`; panics with `what` after [`DEADLINE`].
async fn wait<T, F, Fut>(what: &str, mut condition: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let until = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(value) = condition().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "timed out after {DEADLINE:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the object satisfies `condition`; returns it.
async fn wait_object(
    client: &kube::Client,
    name: &str,
    what: &str,
    condition: impl Fn(&Value) -> bool,
) -> Value {
    wait(what, || async {
        get(client, name).await.filter(|o| condition(o))
    })
    .await
}

/// As [`wait_object`], but failing at once if Kopf exits meanwhile.
async fn wait_object_with(
    kopf: &mut Kopf,
    client: &kube::Client,
    name: &str,
    what: &str,
    condition: impl Fn(&Value) -> bool,
) -> Value {
    kopf.until(what, || async {
        get(client, name).await.filter(|o| condition(o))
    })
    .await
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object["metadata"]["annotations"][key].as_str()
}

/// The diff-base, parsed; `None` if absent.
fn last_handled(object: &Value) -> Option<Value> {
    serde_json::from_str(annotation(object, LAST_HANDLED)?).ok()
}

/// A progress record, parsed; `None` if absent.
fn record(object: &Value, key: &str) -> Option<Value> {
    serde_json::from_str(annotation(object, key)?).ok()
}

/// The keys of a parsed record, in their order in the JSON.
fn record_keys(record: &Value) -> Vec<&str> {
    record
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, _)| key.as_str())
        .collect()
}

/// Kopf's annotations on the object other than the diff-base: progress records and a
/// touch-dummy, which should all be gone once the object is handled (any patch of Kopf nulls
/// the touch-dummy).
fn leftover_records(object: &Value) -> Vec<String> {
    object["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, _)| key.clone())
        .filter(|key| key.starts_with(&format!("{PREFIX}/")))
        .filter(|key| key != LAST_HANDLED)
        .collect()
}

/// The PATCH requests on the object (its body or its status) logged since `from`.
fn patches_since(server: &FakeApiServer, from: usize, name: &str) -> Vec<String> {
    server.requests()[from..]
        .iter()
        .filter(|r| r.verb == "patch" && r.name.as_deref() == Some(name))
        .map(|r| {
            format!(
                "{} {} ({})",
                r.method,
                r.path,
                r.content_type.clone().unwrap_or_default()
            )
        })
        .collect()
}

fn settings() -> kopf::Settings {
    kopf_testing::test_settings()
}

/// The kopf-rs side of the turns: `create_fn`, `update_fn` (the ids of the Kopf operator) and
/// an event handler to know when the listing is being processed. With `fail_once`,
/// `create_fn` fails its first attempt with a TemporaryError (delay 1 s) and blocks in later
/// ones, so nothing more is stored whenever the operator is stopped.
fn rust_registry(calls: &Calls, fail_once: bool) -> Registry {
    let (c1, c2, c3) = (calls.clone(), calls.clone(), calls.clone());
    Registry::new()
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            move |inv| {
                let calls = c1.clone();
                async move {
                    calls.record(json!({
                        "handler": "create_fn",
                        "name": inv.name(),
                        "retry": inv.retry(),
                        "started": inv.started().unix_timestamp_nanos().to_string(),
                        "spec": inv.spec(),
                    }));
                    if fail_once {
                        if inv.retry() == 0 {
                            return Err(TemporaryError::new("not ready yet")
                                .delay(Duration::from_secs(1))
                                .into());
                        }
                        calls.record(
                            json!({"handler": "create_fn", "retry": inv.retry(), "waiting": true}),
                        );
                        std::future::pending::<()>().await;
                    }
                    Ok(Some(json!({"by": "kopf-rs", "retry": inv.retry()})))
                }
            },
        ))
        .with(ChangeHandler::on_update(
            examples(),
            "update_fn",
            move |inv| {
                let calls = c2.clone();
                async move {
                    let diff: Vec<Value> = inv
                        .diff()
                        .iter()
                        .map(|d| json!([d.op.as_str(), d.path, d.old, d.new]))
                        .collect();
                    calls.record(json!({
                        "handler": "update_fn",
                        "name": inv.name(),
                        "old": inv.old(),
                        "new": inv.new(),
                        "diff": diff,
                    }));
                    Ok(Some(json!({"by": "kopf-rs", "field": inv.spec()["field"]})))
                }
            },
        ))
        .with(EventHandler::on_event(examples(), "event_fn", move |inv| {
            let calls = c3.clone();
            async move {
                calls.record(
                    json!({"handler": "event_fn", "name": inv.name(), "type": inv.event_type()}),
                );
                Ok(None)
            }
        }))
}

fn handled_by<'a>(calls: &'a [Value], handler: &str) -> Vec<&'a Value> {
    calls
        .iter()
        .filter(|c| c["handler"] == handler && c["waiting"].is_null())
        .collect()
}

/// Waits until the kopf-rs event handler has seen the object in the listing: the change
/// processing of the listing comes before that of any later event of the object.
async fn wait_listed(calls: &Calls, name: &str) {
    wait("kopf-rs to process the listing", || async {
        calls
            .all()
            .iter()
            .any(|c| c["handler"] == "event_fn" && c["name"] == name && c["type"].is_null())
            .then_some(())
    })
    .await;
}

/// Parses an ISO-8601 timestamp as Kopf writes it (`…+00:00`) into nanoseconds since the epoch.
fn nanos(iso: &str) -> i128 {
    time::OffsetDateTime::parse(iso, &time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|e| panic!("not an ISO-8601 timestamp ({e}): {iso}"))
        .unix_timestamp_nanos()
}

// ---------------------------------------------------------------------------------------------
// The tests.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kopf_creates_then_kopf_rs_resumes_and_updates() {
    let test = "kopf_creates_then_kopf_rs_resumes_and_updates";
    let Some(python) = python(test).await else {
        return;
    };
    let _turn = serial().await;
    let dir = TempDir::new(test);
    let server = server_with_crd().await;
    let client = server.client();

    // Python Kopf handles the creation.
    let mut kopf = Kopf::start(&python, dir.path(), &server, "succeed", None).await;
    create(&client, "one", json!({"field": "one"})).await;
    let created = wait_object_with(
        &mut kopf,
        &client,
        "one",
        "Kopf's create_fn result and diff-base",
        |o| o["status"]["create_fn"]["by"] == "kopf" && last_handled(o).is_some(),
    )
    .await;
    assert_eq!(
        last_handled(&created),
        Some(json!({"spec": {"field": "one"}})),
        "{created:#}"
    );
    assert_eq!(
        created["status"]["create_fn"],
        json!({"by": "kopf", "retry": 0})
    );
    assert_eq!(
        leftover_records(&created),
        Vec::<String>::new(),
        "{created:#}"
    );
    let status = kopf.terminate().await;
    assert!(status.success(), "Kopf exited with {status} after SIGTERM");
    assert_eq!(
        handled_by(&kopf.calls(), "create_fn").len(),
        1,
        "{:#?}",
        kopf.calls()
    );
    assert_eq!(
        annotation(&created, LAST_HANDLED),
        Some(DIFFBASE_ONE),
        "Kopf's diff-base, byte for byte"
    );

    // kopf-rs starts on the same server: the object is resumed, create_fn is not run again.
    let calls = Calls::default();
    let from = server.requests().len();
    let operator = RustOperator::start(&server, rust_registry(&calls, false), settings()).await;
    wait_listed(&calls, "one").await;
    patch(&client, "one", json!({"spec": {"field": "two"}})).await;
    let updated = wait_object(
        &client,
        "one",
        "kopf-rs's update_fn result and diff-base",
        |o| {
            o["status"]["update_fn"]["by"] == "kopf-rs"
                && last_handled(o).is_some_and(|l| l["spec"]["field"] == "two")
        },
    )
    .await;
    operator.stop(&server).await.expect("a clean stop");

    let calls = calls.all();
    assert_eq!(
        handled_by(&calls, "create_fn"),
        Vec::<&Value>::new(),
        "create_fn is not run again"
    );
    let updates = handled_by(&calls, "update_fn");
    assert_eq!(updates.len(), 1, "{calls:#?}");
    assert_eq!(
        updates[0]["old"],
        json!({"spec": {"field": "one"}}),
        "Kopf's diff-base is the old state"
    );
    assert_eq!(updates[0]["new"], json!({"spec": {"field": "two"}}));
    assert_eq!(
        updates[0]["diff"],
        json!([["change", ["spec", "field"], "one", "two"]])
    );

    assert_eq!(
        last_handled(&updated),
        Some(json!({"spec": {"field": "two"}}))
    );
    assert_eq!(
        updated["status"]["create_fn"],
        json!({"by": "kopf", "retry": 0})
    );
    assert_eq!(
        updated["status"]["update_fn"],
        json!({"by": "kopf-rs", "field": "two"})
    );
    assert_eq!(
        leftover_records(&updated),
        Vec::<String>::new(),
        "{updated:#}"
    );
    assert!(updated["metadata"]["annotations"][UPDATE_RECORD].is_null());
    // The resume wrote nothing: only the test's own patch and kopf-rs's update (the diff-base,
    // then the result through /status).
    let patches = patches_since(&server, from, "one");
    assert_eq!(patches.len(), 3, "{patches:#?}");
    drop(kopf);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kopf_rs_creates_then_kopf_resumes_and_updates() {
    let test = "kopf_rs_creates_then_kopf_resumes_and_updates";
    let Some(python) = python(test).await else {
        return;
    };
    let _turn = serial().await;
    let dir = TempDir::new(test);
    let server = server_with_crd().await;
    let client = server.client();

    // kopf-rs handles the creation.
    let calls = Calls::default();
    let operator = RustOperator::start(&server, rust_registry(&calls, false), settings()).await;
    create(&client, "one", json!({"field": "one"})).await;
    let created = wait_object(
        &client,
        "one",
        "kopf-rs's create_fn result and diff-base",
        |o| o["status"]["create_fn"]["by"] == "kopf-rs" && last_handled(o).is_some(),
    )
    .await;
    operator.stop(&server).await.expect("a clean stop");
    assert_eq!(handled_by(&calls.all(), "create_fn").len(), 1);
    assert_eq!(
        last_handled(&created),
        Some(json!({"spec": {"field": "one"}})),
        "{created:#}"
    );
    assert_eq!(
        annotation(&created, LAST_HANDLED),
        Some(DIFFBASE_ONE),
        "kopf-rs's diff-base is byte for byte what Kopf writes"
    );

    // Python Kopf starts on the same server: create_fn is not run again; the update is handled.
    let mut kopf = Kopf::start(&python, dir.path(), &server, "succeed", Some("one")).await;
    patch(&client, "one", json!({"spec": {"field": "two"}})).await;
    let updated = wait_object_with(
        &mut kopf,
        &client,
        "one",
        "Kopf's update_fn result and diff-base",
        |o| {
            o["status"]["update_fn"]["by"] == "kopf"
                && last_handled(o).is_some_and(|l| l["spec"]["field"] == "two")
        },
    )
    .await;
    let status = kopf.terminate().await;
    assert!(status.success(), "Kopf exited with {status} after SIGTERM");

    let calls = kopf.calls();
    assert_eq!(
        handled_by(&calls, "create_fn"),
        Vec::<&Value>::new(),
        "create_fn is not run again"
    );
    let updates = handled_by(&calls, "update_fn");
    assert_eq!(updates.len(), 1, "{calls:#?}");
    assert_eq!(
        updates[0]["old"],
        json!({"spec": {"field": "one"}}),
        "kopf-rs's diff-base is the old state"
    );
    assert_eq!(updates[0]["new"], json!({"spec": {"field": "two"}}));
    assert_eq!(
        updates[0]["diff"],
        json!([["change", ["spec", "field"], "one", "two"]])
    );
    let log = kopf.log_text();
    assert!(
        log.contains("Resuming is in progress"),
        "Kopf resumed the object"
    );
    assert!(
        !log.contains("Creation is in progress"),
        "Kopf did not take the object for new"
    );

    assert_eq!(
        last_handled(&updated),
        Some(json!({"spec": {"field": "two"}}))
    );
    assert_eq!(
        updated["status"]["create_fn"],
        json!({"by": "kopf-rs", "retry": 0})
    );
    assert_eq!(
        updated["status"]["update_fn"],
        json!({"by": "kopf", "field": "two"})
    );
    assert_eq!(
        leftover_records(&updated),
        Vec::<String>::new(),
        "{updated:#}"
    );
    drop(kopf);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kopf_fails_a_handler_once_then_kopf_rs_continues_its_retries() {
    let test = "kopf_fails_a_handler_once_then_kopf_rs_continues_its_retries";
    let Some(python) = python(test).await else {
        return;
    };
    let _turn = serial().await;
    let dir = TempDir::new(test);
    let server = server_with_crd().await;
    let client = server.client();

    // Python Kopf fails create_fn once (TemporaryError, delay=1) and is stopped.
    let mut kopf = Kopf::start(&python, dir.path(), &server, "fail-once", None).await;
    create(&client, "flaky", json!({"field": "one"})).await;
    let failed = wait_object_with(
        &mut kopf,
        &client,
        "flaky",
        "Kopf's progress record with retries=1",
        |o| record(o, CREATE_RECORD).is_some_and(|r| r["retries"] == 1),
    )
    .await;
    let status = kopf.terminate().await;
    assert!(status.success(), "Kopf exited with {status} after SIGTERM");
    let kopf_record = record(&failed, CREATE_RECORD).unwrap();
    assert_eq!(record_keys(&kopf_record), RECORD_KEYS, "{kopf_record}");
    assert_eq!(kopf_record["purpose"], "create", "{kopf_record}");
    assert_eq!(kopf_record["success"], false, "{kopf_record}");
    assert_eq!(kopf_record["failure"], false, "{kopf_record}");
    assert_eq!(kopf_record["message"], "not ready yet", "{kopf_record}");
    let kopf_started = kopf_record["started"]
        .as_str()
        .expect("started")
        .to_string();
    assert!(kopf_record["delayed"].is_string(), "{kopf_record}");
    assert!(
        last_handled(&failed).is_none(),
        "not handled yet: {failed:#}"
    );
    let before = get(&client, "flaky").await.expect("the object");
    assert_eq!(
        record(&before, CREATE_RECORD).map(|r| r["retries"].clone()),
        Some(json!(1)),
        "Kopf stored nothing more before it exited: {before:#}"
    );
    if annotation(&before, TOUCH_DUMMY).is_none() {
        // Kopf usually touches the object when its delay is over, while it exits.
        eprintln!("note: Kopf left no touch-dummy this time; its removal is not exercised");
    }

    // kopf-rs continues: create_fn sees retry == 1 and the first attempt's start, and succeeds.
    let calls = Calls::default();
    let operator = RustOperator::start(&server, rust_registry(&calls, false), settings()).await;
    let done = wait_object(
        &client,
        "flaky",
        "kopf-rs's create_fn result and diff-base",
        |o| o["status"]["create_fn"]["by"] == "kopf-rs" && last_handled(o).is_some(),
    )
    .await;
    operator.stop(&server).await.expect("a clean stop");
    let calls = calls.all();
    let creates = handled_by(&calls, "create_fn");
    assert_eq!(creates.len(), 1, "{calls:#?}");
    assert_eq!(
        creates[0]["retry"], 1,
        "kopf-rs continues Kopf's retry count"
    );
    assert_eq!(
        creates[0]["started"],
        nanos(&kopf_started).to_string(),
        "kopf-rs continues from Kopf's first start ({kopf_started})"
    );
    assert_eq!(
        done["status"]["create_fn"],
        json!({"by": "kopf-rs", "retry": 1})
    );
    assert_eq!(last_handled(&done), Some(json!({"spec": {"field": "one"}})));
    assert!(
        done["metadata"]["annotations"][CREATE_RECORD].is_null(),
        "{done:#}"
    );
    assert_eq!(leftover_records(&done), Vec::<String>::new(), "{done:#}");
    drop(kopf);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kopf_rs_fails_a_handler_once_then_kopf_continues_its_retries() {
    let test = "kopf_rs_fails_a_handler_once_then_kopf_continues_its_retries";
    let Some(python) = python(test).await else {
        return;
    };
    let _turn = serial().await;
    let dir = TempDir::new(test);
    let server = server_with_crd().await;
    let client = server.client();

    // kopf-rs fails create_fn once (TemporaryError, delay 1 s) and is stopped. A later attempt
    // blocks until the grace period ends, so nothing more is stored.
    let calls = Calls::default();
    let mut quick = settings();
    quick.process.grace_period = Duration::from_secs(1);
    let operator = RustOperator::start(&server, rust_registry(&calls, true), quick).await;
    create(&client, "flaky", json!({"field": "one"})).await;
    let failed = wait_object(
        &client,
        "flaky",
        "kopf-rs's progress record with retries=1",
        |o| record(o, CREATE_RECORD).is_some_and(|r| r["retries"] == 1),
    )
    .await;
    match operator.stop(&server).await {
        Ok(()) | Err(OperatorError::Aborted(_)) => {}
        Err(error) => panic!("the kopf-rs operator failed: {error}"),
    }
    let rs_record = record(&failed, CREATE_RECORD).unwrap();
    assert_eq!(
        record_keys(&rs_record),
        RECORD_KEYS,
        "Kopf's keys in Kopf's order: {rs_record}"
    );
    assert_eq!(rs_record["purpose"], "create", "{rs_record}");
    assert_eq!(rs_record["success"], false, "{rs_record}");
    assert_eq!(rs_record["failure"], false, "{rs_record}");
    assert_eq!(rs_record["message"], "not ready yet", "{rs_record}");
    assert!(rs_record["delayed"].is_string(), "{rs_record}");
    let rs_started = rs_record["started"].as_str().expect("started").to_string();
    let before = get(&client, "flaky").await.expect("the object");
    assert_eq!(
        record(&before, CREATE_RECORD).map(|r| r["retries"].clone()),
        Some(json!(1)),
        "kopf-rs stored nothing more before it stopped: {before:#}"
    );

    // Python Kopf continues: create_fn sees retry == 1 and succeeds.
    let mut kopf = Kopf::start(&python, dir.path(), &server, "succeed", None).await;
    let done = wait_object_with(
        &mut kopf,
        &client,
        "flaky",
        "Kopf's create_fn result and diff-base",
        |o| o["status"]["create_fn"]["by"] == "kopf" && last_handled(o).is_some(),
    )
    .await;
    let status = kopf.terminate().await;
    assert!(status.success(), "Kopf exited with {status} after SIGTERM");
    let calls = kopf.calls();
    let creates = handled_by(&calls, "create_fn");
    assert_eq!(creates.len(), 1, "{calls:#?}");
    assert_eq!(
        creates[0]["retry"], 1,
        "Kopf continues kopf-rs's retry count"
    );
    assert_eq!(
        nanos(creates[0]["started"].as_str().expect("started")),
        nanos(&rs_started),
        "Kopf continues from kopf-rs's first start"
    );
    assert_eq!(
        done["status"]["create_fn"],
        json!({"by": "kopf", "retry": 1})
    );
    assert_eq!(last_handled(&done), Some(json!({"spec": {"field": "one"}})));
    assert!(
        done["metadata"]["annotations"][CREATE_RECORD].is_null(),
        "{done:#}"
    );
    assert_eq!(leftover_records(&done), Vec::<String>::new(), "{done:#}");
    drop(kopf);
    server.stop().await;
}

/// Kopf with the mandatory peering `name` in `default` at this priority, as `python-kopf`,
/// once its entry is in the peering object.
async fn peering_kopf(
    python: &Path,
    dir: &Path,
    server: &FakeApiServer,
    name: &str,
    priority: i64,
) -> Kopf {
    let priority_arg = priority.to_string();
    let options = ["--peering", name, "--priority", &priority_arg];
    let mut kopf = Kopf::spawn(
        python,
        dir,
        server,
        "succeed",
        &options,
        Some("python-kopf"),
    );
    let (client, path) = (
        server.client(),
        format!("/apis/kopf.dev/v1/namespaces/default/kopfpeerings/{name}"),
    );
    kopf.until("Kopf's peering entry", || async {
        let entries = status_at(&client, &path).await;
        (entries.get("python-kopf")?["priority"] == priority).then_some(())
    })
    .await;
    kopf
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kopf_and_kopf_rs_pause_in_favour_of_the_higher_priority() {
    let test = "kopf_and_kopf_rs_pause_in_favour_of_the_higher_priority";
    let Some(python) = python(test).await else {
        return;
    };
    let _turn = serial().await;
    let name = "interop-peering";
    crate::logs::lines_of(name);
    let server = server_with_crd().await;
    let client = server.client();
    create_peering_crd(&client, "kopf.dev", "Namespaced").await;
    let collection = "/apis/kopf.dev/v1/namespaces/default/kopfpeerings";
    let object =
        json!({"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": name}});
    TestClient::new(client.clone())
        .request("POST", collection, object)
        .await;
    let path = format!("{collection}/{name}");

    // Kopf first, with the higher priority; kopf-rs pauses in its favour.
    let first = TempDir::new(test);
    let mut kopf = peering_kopf(&python, first.path(), &server, name, 100).await;
    let mut settings = kopf_testing::test_settings();
    settings.peering.name = name.into();
    settings.peering.priority = 50;
    let operator = Operator::new(Registry::new())
        .settings(settings)
        .namespaces(["default"])
        .client(server.client());
    let (rust, _) = Running::start(operator);
    wait_lines(
        name,
        "Pausing operations in favour of [<Peer python-kopf: priority=100",
        1,
    )
    .await;
    // Both entries are there; Kopf removes its own at exit, and kopf-rs resumes.
    wait("both entries", || async {
        (status_at(&client, &path).await.len() == 2).then_some(())
    })
    .await;
    assert!(kopf.terminate().await.success(), "{}", kopf.log_text());
    let entries = status_at(&client, &path).await;
    assert!(
        !entries.contains_key("python-kopf"),
        "Kopf removed its entry: {entries:?}"
    );
    wait_lines(name, "Resuming operations after the pause", 1).await;

    // Kopf again, with a lower priority: mandatory peering starts paused, and it stays so
    // while kopf-rs lives; it resumes once kopf-rs has left.
    let second = TempDir::new(test);
    let mut kopf = peering_kopf(&python, second.path(), &server, name, 10).await;
    let resumed = "Resuming operations after the pause";
    assert!(
        !kopf.log_text().contains(resumed),
        "Kopf works beside kopf-rs:\n{}",
        kopf.log_text()
    );
    rust.stop().await.expect("a clean stop");
    let log = kopf.log.clone();
    kopf.until("Kopf to resume", || {
        let log = log.clone();
        async move {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            text.contains(resumed).then_some(())
        }
    })
    .await;
    assert!(kopf.terminate().await.success(), "{}", kopf.log_text());
    assert!(
        status_at(&client, &path).await.is_empty(),
        "no entry is left"
    );
    drop(client);
    server.stop().await;
}
