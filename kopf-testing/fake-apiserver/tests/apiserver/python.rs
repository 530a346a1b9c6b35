//! The fake API server with Python clients: the official `kubernetes` client, and Python Kopf
//! running a small operator. The scripts live in `kopf-testing/fake-apiserver/tests/python/`.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kopf_fake_apiserver::{FakeApiServer, fixtures};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::support::{self, DEADLINE};

/// Kopf takes seconds to start and to settle its handlers; be generous.
pub(crate) const KOPF_DEADLINE: Duration = Duration::from_secs(90);

const FINALIZER: &str = "kopf.zalando.org/KopfFinalizerMarker";
const LAST_HANDLED: &str = "kopf.zalando.org/last-handled-configuration";

/// The folder of the Python scripts.
pub(crate) fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python")
}

/// A fresh temporary folder with a unique name, for the kubeconfig and logs.
pub(crate) fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("kopf-rs-python-")
        .tempdir()
        .expect("a temporary folder")
}

/// The KopfExamples in the `default` namespace, through kube-rs.
fn kopf_examples(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("kopf.dev", "v1", "KopfExample");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "kopfexamples");
    Api::namespaced_with(client.clone(), "default", &resource)
}

fn kopf_example(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "kopf.dev/v1",
        "kind": "KopfExample",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }))
    .expect("a valid KopfExample")
}

fn config_map(name: &str, data: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": data}))
        .expect("a valid ConfigMap")
}

/// A Python child process: killed when dropped (and then its output is printed if the test
/// is failing), killed and awaited by [`Python::stop`].
pub(crate) struct Python {
    name: String,
    child: Child,
    /// Where its stderr (and, unless piped, its stdout) goes.
    log: PathBuf,
    stdout: Option<Lines<BufReader<ChildStdout>>>,
    stdin: Option<ChildStdin>,
    /// The stdout lines read so far, for diagnostics.
    seen: Vec<String>,
}

impl Python {
    /// Starts `python args...` against the server behind `kubeconfig`, in `dir`. With
    /// `piped`, stdin and stdout are pipes (for scripts speaking JSON lines); otherwise
    /// stdout goes to the log with stderr.
    pub(crate) fn spawn(
        name: &str,
        python: &Path,
        args: &[&str],
        dir: &Path,
        kubeconfig: &Path,
        piped: bool,
    ) -> Python {
        let log = dir.join(format!("{name}.log"));
        let stderr = std::fs::File::create(&log).expect("creating the log file");
        let stdout = if piped {
            Stdio::piped()
        } else {
            Stdio::from(stderr.try_clone().expect("cloning the log file"))
        };
        let mut child = Command::new(python)
            .args(args)
            .current_dir(dir)
            .env("KUBECONFIG", kubeconfig)
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            // Never let the clients find a real cluster from inside a pod.
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .stdin(if piped { Stdio::piped() } else { Stdio::null() })
            .stdout(stdout)
            .stderr(Stdio::from(stderr))
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name} with {}: {e}", python.display()));
        let stdout = child.stdout.take().map(|out| BufReader::new(out).lines());
        let stdin = child.stdin.take();
        Python {
            name: name.to_string(),
            child,
            log,
            stdout,
            stdin,
            seen: Vec::new(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("the process is running")
    }

    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The next JSON line on stdout.
    pub(crate) async fn next_any(&mut self) -> Value {
        let lines = self.stdout.as_mut().expect("stdout is piped");
        let line = match tokio::time::timeout(DEADLINE, lines.next_line()).await {
            Err(_) => panic!("{}: no output line within {DEADLINE:?}", self.name),
            Ok(Err(error)) => panic!("{}: reading stdout: {error}", self.name),
            Ok(Ok(None)) => {
                let status = tokio::time::timeout(DEADLINE, self.child.wait()).await;
                panic!(
                    "{}: stdout ended early; the process exited: {status:?}",
                    self.name
                )
            }
            Ok(Ok(Some(line))) => line,
        };
        self.seen.push(line.clone());
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("{}: not a JSON line ({e}): {line}", self.name))
    }

    /// The next JSON line on stdout, which must be the step `step`.
    pub(crate) async fn next(&mut self, step: &str) -> Value {
        let value = self.next_any().await;
        assert_eq!(
            value["step"], step,
            "{}: expected step {step:?}, got: {value}",
            self.name
        );
        value
    }

    async fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is piped");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("writing to stdin");
        stdin.flush().await.expect("flushing stdin");
    }

    /// Waits until `condition` holds, as [`support::wait`], but fails at once with the
    /// process's log if the process exits meanwhile.
    pub(crate) async fn until<T, F, Fut>(
        &mut self,
        what: &str,
        deadline: Duration,
        mut condition: F,
    ) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        let until = tokio::time::Instant::now() + deadline;
        loop {
            if let Some(value) = condition().await {
                return value;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "{} exited ({status}) while the test waited for {what}",
                    self.name
                );
            }
            if tokio::time::Instant::now() > until {
                panic!(
                    "{}: timed out after {deadline:?} waiting for {what}",
                    self.name
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits for the process to exit by itself.
    pub(crate) async fn exit(&mut self, deadline: Duration) -> ExitStatus {
        match tokio::time::timeout(deadline, self.child.wait()).await {
            Ok(status) => status.expect("waiting for the process"),
            Err(_) => panic!("{} did not exit within {deadline:?}", self.name),
        }
    }

    /// Sends SIGTERM, as Kubernetes does to stop a pod, and waits for the process to exit.
    pub(crate) async fn terminate(&mut self, deadline: Duration) -> ExitStatus {
        let sent = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status()
            .await
            .expect("running kill");
        assert!(sent.success(), "kill -TERM {} failed: {sent}", self.pid());
        self.exit(deadline).await
    }

    /// Kills the process (if still running) and waits for it.
    pub(crate) async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

impl Drop for Python {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        if std::thread::panicking() {
            eprintln!(
                "\n----- {name}: stdout lines read -----\n{seen}\n----- {name}: log ({log}) -----\n{text}\n----- end of {name} -----",
                name = self.name,
                seen = self.seen.join("\n"),
                log = self.log.display(),
                text = self.log_text(),
            );
        }
    }
}

/// Waits until the server has no open connection and no open watch.
pub(crate) async fn wait_for_no_connections(server: &FakeApiServer) {
    support::wait("no open connections and watches", || async {
        let stats = server.stats();
        (stats.open_connections == 0 && stats.open_watches == 0).then_some(())
    })
    .await;
}

/// The requests the server answered with 5xx: there should be none.
pub(crate) fn server_errors(server: &FakeApiServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter(|r| r.code >= 500)
        .map(|r| format!("{} {}?{} -> {}", r.method, r.path, r.query, r.code))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_client_lists_creates_watches_and_patches() {
    let test = "python::kubernetes_client_lists_creates_watches_and_patches";
    let Some(python) = support::python(test).await else {
        return;
    };
    let _turn = support::serial().await;
    let server = FakeApiServer::start().await.expect("starting the server");
    let dir = temp_dir();
    let kubeconfig = dir.path().join("kubeconfig");
    server
        .write_kubeconfig(&kubeconfig)
        .expect("writing the kubeconfig");

    let client = server.client();
    server.apply(fixtures::KOPFEXAMPLE_CRD).await;
    let examples = kopf_examples(&client);
    examples
        .create(
            &PostParams::default(),
            &kopf_example("example-1", json!({"field": "original", "removed": "yes"})),
        )
        .await
        .expect("creating a KopfExample");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    config_maps
        .create(
            &PostParams::default(),
            &config_map("before", json!({"a": "0"})),
        )
        .await
        .expect("creating");

    let script = scripts().join("client_list_watch.py");
    let mut py = Python::spawn(
        "client_list_watch.py",
        &python,
        &[script.to_str().unwrap()],
        dir.path(),
        &kubeconfig,
        true,
    );

    // Lists and creates.
    let listed = py.next("listed").await;
    let names = listed["names"].as_array().expect("names");
    assert!(names.contains(&json!("before")), "{listed}");
    assert!(!names.contains(&json!("from-python")), "{listed}");
    assert!(
        listed["resource_version"]
            .as_str()
            .is_some_and(|rv| !rv.is_empty()),
        "{listed}"
    );
    let created = py.next("created").await;
    assert_eq!(created["name"], "from-python");
    assert_eq!(created["data"], json!({"hello": "world"}));
    let seen = config_maps
        .get("from-python")
        .await
        .expect("the ConfigMap Python created");
    assert_eq!(seen.metadata.uid.as_deref(), created["uid"].as_str());
    assert_eq!(
        seen.metadata
            .labels
            .unwrap_or_default()
            .get("made-by")
            .map(String::as_str),
        Some("python")
    );
    let relisted = py.next("relisted").await;
    assert_eq!(
        relisted["names"],
        json!(["from-python"]),
        "the label selector picks Python's ConfigMap only"
    );

    // Watches: the changes happen while the watch is open, so they arrive live.
    py.next("watching").await;
    py.until("the script's watch to be open", DEADLINE, || async {
        (server.stats().open_watches >= 1).then_some(())
    })
    .await;
    config_maps
        .create(
            &PostParams::default(),
            &config_map("watched", json!({"n": "1"})),
        )
        .await
        .expect("creating");
    config_maps
        .patch(
            "watched",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"n": "2"}})),
        )
        .await
        .expect("patching");
    config_maps
        .delete("watched", &DeleteParams::default())
        .await
        .expect("deleting");
    let mut events = Vec::new();
    loop {
        let line = py.next_any().await;
        match line["step"].as_str() {
            Some("event") => events.push(line),
            Some("watch-ended") => break,
            _ => panic!("unexpected line while watching: {line}"),
        }
    }
    let summary: Vec<(String, String, Value)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_string(),
                e["name"].as_str().unwrap().to_string(),
                e["data"].clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("ADDED".into(), "watched".into(), json!({"n": "1"})),
            ("MODIFIED".into(), "watched".into(), json!({"n": "2"})),
            ("DELETED".into(), "watched".into(), json!({"n": "2"})),
        ],
        "the watch from the created ConfigMap's resourceVersion sees exactly the later changes"
    );
    let versions: Vec<u64> = events
        .iter()
        .map(|e| {
            e["resource_version"]
                .as_str()
                .unwrap()
                .parse()
                .expect("a numeric resourceVersion")
        })
        .collect();
    assert!(
        versions.windows(2).all(|w| w[0] < w[1]),
        "resourceVersions increase: {versions:?}"
    );

    // timeoutSeconds=1: the server ends the stream by itself.
    let short = py.next("short-watch-ended").await;
    assert_eq!(short["events"], json!([]), "{short}");
    let seconds = short["seconds"].as_f64().expect("seconds");
    assert!(
        (0.9..15.0).contains(&seconds),
        "the 1-second watch lasted {seconds}s"
    );

    // Custom objects: list, get, merge patch, status patch, a missing one.
    let listed = py.next("custom-listed").await;
    assert_eq!(listed["kind"], "KopfExampleList");
    assert_eq!(listed["api_version"], "kopf.dev/v1");
    assert_eq!(listed["names"], json!(["example-1"]));
    let got = py.next("custom-got").await;
    assert_eq!(got["kind"], "KopfExample");
    assert_eq!(got["spec"], json!({"field": "original", "removed": "yes"}));
    assert_eq!(got["generation"], 1);
    let patched = py.next("custom-patched").await;
    assert_eq!(
        patched["spec"],
        json!({"field": "patched"}),
        "a merge patch's null removes the field"
    );
    assert_eq!(patched["labels"], json!({"patched-by": "python"}));
    assert_eq!(
        patched["generation"], 2,
        "a spec change bumps the generation"
    );
    let status_patched = py.next("custom-status-patched").await;
    assert_eq!(status_patched["status"], json!({"seen": true}));
    assert_eq!(
        status_patched["generation"], 2,
        "a status change keeps the generation"
    );
    let stored =
        serde_json::to_value(examples.get("example-1").await.expect("getting")).expect("json");
    assert_eq!(stored["spec"], json!({"field": "patched"}));
    assert_eq!(stored["status"], json!({"seen": true}));
    assert_eq!(
        stored["metadata"]["labels"],
        json!({"patched-by": "python"})
    );
    let missing = py.next("custom-missing").await;
    assert_eq!(missing["code"], 404, "{missing}");
    assert_eq!(missing["reason"], "NotFound");
    assert_eq!(missing["kind"], "Status");

    // An expired resourceVersion: the watch gets an ERROR event with 410, the client raises.
    py.next("ready-for-expired").await;
    server.compact();
    py.send("go").await;
    let expired = py.next("expired").await;
    assert_eq!(expired["code"], 410, "{expired}");
    py.next("done").await;
    let status = py.exit(DEADLINE).await;
    assert!(status.success(), "the script failed: {status}");

    let merge_patches = server
        .requests()
        .iter()
        .filter(|r| r.verb == "patch" && r.resource.starts_with("kopfexamples.kopf.dev"))
        .map(|r| r.content_type.clone().unwrap_or_default())
        .collect::<Vec<_>>();
    assert_eq!(
        merge_patches,
        vec!["application/merge-patch+json"; 2],
        "CustomObjectsApi patches are merge patches"
    );
    assert_eq!(server_errors(&server), Vec::<String>::new());
    py.stop().await;
    drop((examples, config_maps, client));
    wait_for_no_connections(&server).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kopf_operator_handles_creation_update_and_deletion() {
    let test = "python::kopf_operator_handles_creation_update_and_deletion";
    let Some(python) = support::python(test).await else {
        return;
    };
    let _turn = support::serial().await;
    let server = FakeApiServer::start().await.expect("starting the server");
    let dir = temp_dir();
    let kubeconfig = dir.path().join("kubeconfig");
    server
        .write_kubeconfig(&kubeconfig)
        .expect("writing the kubeconfig");
    let client = server.client();
    server.apply(fixtures::KOPFEXAMPLE_CRD).await;
    let examples = kopf_examples(&client);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");

    let script = scripts().join("kopf_operator.py");
    let args = [
        "-m",
        "kopf",
        "run",
        "--standalone",
        "--namespace",
        "default",
        "--verbose",
        script.to_str().unwrap(),
    ];
    let mut kopf = Python::spawn("kopf", &python, &args, dir.path(), &kubeconfig, false);

    // Kopf is up when it watches KopfExamples.
    kopf.until("Kopf to watch KopfExamples", KOPF_DEADLINE, || async {
        let watching = server
            .requests()
            .iter()
            .any(|r| r.verb == "watch" && r.resource == "kopfexamples.kopf.dev" && r.code == 200);
        (watching && server.stats().open_watches >= 1).then_some(())
    })
    .await;
    assert!(
        kopf.log_text().contains("KOPF-OPERATOR-CONFIGURED"),
        "the startup handler ran"
    );

    // Creation: the finalizer, the create handler's result, the last-handled configuration.
    examples
        .create(
            &PostParams::default(),
            &kopf_example("kopf-example-1", json!({"field": "one"})),
        )
        .await
        .expect("creating a KopfExample");
    let object = kopf
        .until(
            "the create handler's result in status",
            KOPF_DEADLINE,
            || async {
                let object =
                    serde_json::to_value(examples.get("kopf-example-1").await.ok()?).ok()?;
                let done = object["status"]["create_fn"]["message"] == "created with one"
                    && object["metadata"]["annotations"][LAST_HANDLED].is_string();
                done.then_some(object)
            },
        )
        .await;
    assert_eq!(
        object["metadata"]["finalizers"],
        json!([FINALIZER]),
        "{object:#}"
    );
    let last_handled: Value = serde_json::from_str(
        object["metadata"]["annotations"][LAST_HANDLED]
            .as_str()
            .unwrap(),
    )
    .expect("JSON");
    assert_eq!(
        last_handled["spec"],
        json!({"field": "one"}),
        "{last_handled}"
    );
    assert!(
        kopf.log_text()
            .contains("KOPF-CREATE-HANDLER name=kopf-example-1 field=one")
    );
    kopf.until("the create handler's Event", KOPF_DEADLINE, || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.involved_object.name.as_deref() == Some("kopf-example-1")
                    && e.reason.as_deref() == Some("Created")
                    && e.message.as_deref() == Some("created with field=one")
            })
            .then_some(())
    })
    .await;

    // Update: the update handler's result, the new last-handled configuration.
    examples
        .patch(
            "kopf-example-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"field": "two"}})),
        )
        .await
        .expect("patching the KopfExample");
    let object = kopf
        .until(
            "the update handler's result in status",
            KOPF_DEADLINE,
            || async {
                let object =
                    serde_json::to_value(examples.get("kopf-example-1").await.ok()?).ok()?;
                let last: Value =
                    serde_json::from_str(object["metadata"]["annotations"][LAST_HANDLED].as_str()?)
                        .ok()?;
                let done = object["status"]["update_fn"]["message"] == "updated to two"
                    && last["spec"]["field"] == "two";
                done.then_some(object)
            },
        )
        .await;
    assert_eq!(
        object["status"]["create_fn"]["message"], "created with one",
        "{object:#}"
    );
    assert_eq!(
        object["metadata"]["finalizers"],
        json!([FINALIZER]),
        "{object:#}"
    );
    assert!(
        kopf.log_text()
            .contains("KOPF-UPDATE-HANDLER name=kopf-example-1")
    );

    // Deletion: the finalizer holds the object until the delete handler ran.
    examples
        .delete("kopf-example-1", &DeleteParams::default())
        .await
        .expect("deleting the KopfExample");
    kopf.until("the delete handler's ConfigMap", KOPF_DEADLINE, || async {
        config_maps
            .get_opt("deleted-kopf-example-1")
            .await
            .ok()?
            .map(|_| ())
    })
    .await;
    kopf.until("the KopfExample to be gone", KOPF_DEADLINE, || async {
        examples
            .get_opt("kopf-example-1")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let written = config_maps
        .get("deleted-kopf-example-1")
        .await
        .expect("the delete handler's ConfigMap");
    assert_eq!(
        written
            .data
            .unwrap_or_default()
            .get("field")
            .map(String::as_str),
        Some("two")
    );
    assert!(
        kopf.log_text()
            .contains("KOPF-DELETE-HANDLER name=kopf-example-1")
    );

    // SIGTERM: Kopf stops gracefully and leaves no connection or watch behind.
    let status = kopf.terminate(KOPF_DEADLINE).await;
    assert!(status.success(), "Kopf exited with {status} after SIGTERM");
    assert!(kopf.log_text().contains("Signal SIGTERM is received"));
    let requests = server.requests();
    let patched = |resource: &str, content_type: &str| {
        requests.iter().any(|r| {
            r.verb == "patch"
                && r.resource == resource
                && r.content_type.as_deref() == Some(content_type)
                && r.code == 200
        })
    };
    assert!(
        patched("kopfexamples.kopf.dev", "application/json-patch+json"),
        "Kopf adds and removes its finalizer with JSON patches (guarded by a resourceVersion test)"
    );
    assert!(
        patched(
            "kopfexamples.kopf.dev/status",
            "application/merge-patch+json"
        ),
        "Kopf writes handler results through the status subresource"
    );
    assert_eq!(server_errors(&server), Vec::<String>::new());
    kopf.stop().await;
    drop((examples, config_maps, events, client));
    wait_for_no_connections(&server).await;
    server.stop().await;
}
