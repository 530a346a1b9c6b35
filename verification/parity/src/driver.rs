//! Runs one [`Scenario`] with one [`Side`] (Python Kopf or kopf-rs) on a fresh fake API
//! server, and collects its [`Outcome`].
//!
//! The operator is a process in both cases (Kopf's `kopf run`, kopf-rs' `parity-operator`),
//! with the same command line: `--standalone --namespace default --log-format plain`. After
//! the operator starts and after every step, the driver waits until the operator is idle: no
//! request to the server for [`QUIET`], longer than any delay a scenario's handlers ask for.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use kopf_testing::{ApiServer, FakeApiServer, TestClient, fixtures};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::process::{Child, Command};

use crate::outcome::Outcome;
use crate::spec::OperatorSpec;

/// How long the server must see no request for the operator to be taken as idle: longer than
/// any delay or backoff of the scenarios (at most 1 s), and than Kopf's batching windows.
pub const QUIET: Duration = Duration::from_millis(2500);

/// How long anything may take: Kopf takes seconds to start.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// An object's path: `namespace/name`, or `name` alone in `default`.
fn path(object: &str) -> String {
    let (namespace, name) = split(object);
    fixtures::kopfexample_path(namespace, name)
}

/// `namespace/name` or `name` (in `default`) as its namespace and name.
pub fn split(object: &str) -> (&str, &str) {
    object.split_once('/').unwrap_or(("default", object))
}

/// A scenario: an operator, and the steps done to its objects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// Its name, for reports and folders.
    pub name: String,
    /// The operator's handlers.
    pub operator: OperatorSpec,
    /// What the operator serves.
    #[serde(default)]
    pub scope: Scope,
    /// What is done, in order; the operator is idle after each.
    pub steps: Vec<Step>,
}

/// What an operator serves: `--namespace` patterns, or the whole cluster (`-A`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// `--namespace` for each pattern.
    Namespaces(Vec<String>),
    /// `--all-namespaces`.
    Clusterwide,
}

impl Default for Scope {
    fn default() -> Self {
        Scope::Namespaces(vec!["default".into()])
    }
}

impl Scope {
    fn args(&self) -> Vec<String> {
        match self {
            Scope::Namespaces(patterns) => patterns
                .iter()
                .flat_map(|pattern| ["--namespace".to_string(), pattern.clone()])
                .collect(),
            Scope::Clusterwide => vec!["--all-namespaces".into()],
        }
    }
}

/// One step of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Creates a KopfExample with this spec, labels and annotations.
    Create {
        /// The object: `namespace/name`, or `name` in `default`.
        name: String,
        /// Its `spec`.
        spec: Value,
        /// Its labels.
        #[serde(default)]
        labels: Map<String, Value>,
        /// Its annotations.
        #[serde(default)]
        annotations: Map<String, Value>,
    },
    /// Sends this JSON merge patch to the object.
    Patch {
        /// The object's name.
        name: String,
        /// The merge patch.
        patch: Value,
    },
    /// Deletes the object.
    Delete {
        /// The object's name.
        name: String,
    },
    /// Stops the operator gracefully (SIGTERM), does these steps while it is down, and
    /// starts it again.
    Restart {
        /// Done while the operator is down.
        meanwhile: Vec<Step>,
    },
}

impl Step {
    /// A creation with this spec and no labels or annotations.
    pub fn create(name: &str, spec: Value) -> Step {
        Step::Create {
            name: name.to_string(),
            spec,
            labels: Map::new(),
            annotations: Map::new(),
        }
    }

    /// A merge patch.
    pub fn patch(name: &str, patch: Value) -> Step {
        Step::Patch {
            name: name.to_string(),
            patch,
        }
    }

    /// A deletion.
    pub fn delete(name: &str) -> Step {
        Step::Delete {
            name: name.to_string(),
        }
    }

    /// The objects it touches.
    fn objects(&self) -> Vec<&str> {
        match self {
            Step::Create { name, .. } | Step::Patch { name, .. } | Step::Delete { name } => {
                vec![name.as_str()]
            }
            Step::Restart { meanwhile } => meanwhile.iter().flat_map(Step::objects).collect(),
        }
    }
}

/// Which implementation runs the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Python Kopf 1.45.2, from the project's virtualenv.
    Kopf,
    /// kopf-rs, the `parity-operator` binary.
    KopfRs,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::Kopf => "kopf",
            Side::KopfRs => "kopf-rs",
        })
    }
}

/// What the sides run with.
#[derive(Debug, Clone)]
pub struct Environment {
    /// The virtualenv's python, with Kopf.
    pub python: PathBuf,
    /// The `parity-operator` binary.
    pub operator: PathBuf,
    /// Where each run gets a folder (its spec, kubeconfig, calls and log).
    pub workdir: PathBuf,
}

/// Runs the scenario with this side on a fresh server; the outcome, or why the run failed.
pub async fn run(side: Side, scenario: &Scenario, environment: &Environment) -> Outcome {
    let dir = environment
        .workdir
        .join(format!("{}-{side}", scenario.name));
    let _ = tokio::fs::remove_dir_all(&dir).await;
    tokio::fs::create_dir_all(&dir)
        .await
        .expect("creating the run's folder");
    // The fake server, or with KOPF_TESTING_APISERVER=real, a real one behind it.
    let server = ApiServer::from_env().start(FakeApiServer::builder()).await;
    let client = TestClient::new(server.client());
    client.apply(fixtures::KOPFEXAMPLE_CRD).await;
    server
        .write_kubeconfig(dir.join("kubeconfig"))
        .expect("writing the kubeconfig");
    tokio::fs::write(
        dir.join("spec.json"),
        serde_json::to_string_pretty(&scenario.operator).expect("a spec serializes"),
    )
    .await
    .expect("writing the spec");

    // Every namespace the steps use exists from the start (so an operator of patterns
    // watches in them at once).
    let mut namespaces: Vec<&str> = scenario
        .steps
        .iter()
        .flat_map(Step::objects)
        .map(|object| split(object).0)
        .collect();
    namespaces.sort();
    namespaces.dedup();
    for namespace in namespaces.into_iter().filter(|ns| *ns != "default") {
        let body =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        client.apply_value(body).await;
    }
    let mut names = Vec::new();
    let mut operator = Process::start(side, &dir, environment, &server, &scenario.scope).await;
    for step in &scenario.steps {
        match step {
            Step::Restart { meanwhile } => {
                operator.stop().await;
                for step in meanwhile {
                    apply(&client, step, &mut names).await;
                }
                operator = Process::start(side, &dir, environment, &server, &scenario.scope).await;
            }
            step => {
                apply(&client, step, &mut names).await;
                operator.idle(&server).await;
            }
        }
    }
    operator.stop().await;

    let mut objects = BTreeMap::new();
    for name in &names {
        let (status, object) = client.request("GET", &path(name), None).await;
        let object = if status.is_success() {
            object
        } else {
            Value::Null
        };
        objects.insert(name.clone(), object);
    }
    let (status, events) = client.request("GET", "/api/v1/events", None).await;
    assert!(status.is_success(), "listing the events: {events}");
    // The server's side of the run, for whoever looks into a difference.
    let requests: Vec<String> = server
        .requests()
        .iter()
        .map(|request| serde_json::to_string(request).unwrap_or_default())
        .collect();
    tokio::fs::write(dir.join("requests.jsonl"), requests.join("\n") + "\n")
        .await
        .expect("writing the requests");
    let calls = tokio::fs::read_to_string(dir.join("calls.jsonl"))
        .await
        .unwrap_or_default();
    let log = tokio::fs::read_to_string(dir.join("operator.log"))
        .await
        .unwrap_or_default();
    drop(client);
    server.stop().await;
    let outcome = Outcome::collect(&names, &calls, objects, &events, &log);
    tokio::fs::write(
        dir.join("outcome.json"),
        serde_json::to_string_pretty(&outcome).unwrap_or_default(),
    )
    .await
    .expect("writing the outcome");
    outcome
}

/// Does one step (not a restart) to the server's objects.
async fn apply(client: &TestClient, step: &Step, names: &mut Vec<String>) {
    let (method, path, body) = match step {
        Step::Create {
            name,
            spec,
            labels,
            annotations,
        } => {
            if !names.contains(name) {
                names.push(name.clone());
            }
            let (namespace, name) = split(name);
            let body = json!({
                "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                "metadata": {"name": name, "labels": labels, "annotations": annotations},
                "spec": spec,
            });
            ("POST", fixtures::kopfexamples_in(namespace), Some(body))
        }
        Step::Patch { name, patch } => ("PATCH", path(name), Some(patch.clone())),
        Step::Delete { name } => ("DELETE", path(name), None),
        Step::Restart { .. } => unreachable!("restarts are the driver's"),
    };
    let (status, answer) = client.request(method, &path, body).await;
    assert!(status.is_success(), "{step:?} failed: {status} {answer}");
}

/// The operator's process: killed when dropped (its log is printed if the test fails).
struct Process {
    child: Child,
    side: Side,
    log: PathBuf,
}

impl Process {
    /// Starts the side's operator in `dir` and waits until it watches the KopfExamples and
    /// is idle.
    async fn start(
        side: Side,
        dir: &Path,
        environment: &Environment,
        server: &FakeApiServer,
        scope: &Scope,
    ) -> Process {
        let log = dir.join("operator.log");
        let output = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .await
            .expect("opening the log")
            .into_std()
            .await;
        let mut command = match side {
            Side::Kopf => {
                let mut command = Command::new(&environment.python);
                let script =
                    Path::new(env!("CARGO_MANIFEST_DIR")).join("python/parity_operator.py");
                command.args(["-m", "kopf", "run"]).arg(script);
                command
            }
            Side::KopfRs => Command::new(&environment.operator),
        };
        if std::env::var_os("PARITY_VERBOSE").is_some() {
            // For looking into a difference: the log lines then differ by design.
            command.arg("--verbose");
        }
        command
            .arg("--standalone")
            .args(scope.args())
            .args(["--log-format", "plain"])
            .current_dir(dir)
            .env("KUBECONFIG", dir.join("kubeconfig"))
            .env("PARITY_SPEC", dir.join("spec.json"))
            .env("PARITY_CALLS", dir.join("calls.jsonl"))
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            // Kopf's diffs list keys in Python's set order: the same in every run.
            .env("PYTHONHASHSEED", "0")
            .env(
                "RUST_LOG",
                std::env::var("PARITY_RUST_LOG").unwrap_or("info".into()),
            )
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .env_remove("POD_ID")
            .stdin(Stdio::null())
            .stdout(Stdio::from(output.try_clone().expect("cloning the log")))
            .stderr(Stdio::from(output))
            .kill_on_drop(true);
        let before = server.requests().len();
        let child = command
            .spawn()
            .unwrap_or_else(|error| panic!("starting the {side} operator: {error}"));
        let mut process = Process { child, side, log };
        process
            .until("the operator to watch KopfExamples", || {
                server.requests().iter().skip(before).any(|r| {
                    r.verb == "watch" && r.resource == "kopfexamples.kopf.dev" && r.code == 200
                })
            })
            .await;
        process.idle(server).await;
        process
    }

    /// Waits until the operator is idle.
    async fn idle(&mut self, server: &FakeApiServer) {
        assert!(
            server.wait_quiet(QUIET, DEADLINE).await,
            "the {} operator did not become idle within {DEADLINE:?}",
            self.side
        );
        assert!(
            self.child.try_wait().expect("the child's status").is_none(),
            "the {} operator exited early",
            self.side
        );
    }

    /// Polls until `condition` holds; fails at once if the operator exits.
    async fn until(&mut self, what: &str, mut condition: impl FnMut() -> bool) {
        let until = tokio::time::Instant::now() + DEADLINE;
        while !condition() {
            if let Some(status) = self.child.try_wait().expect("the child's status") {
                panic!("the {} operator exited ({status}) before {what}", self.side);
            }
            assert!(
                tokio::time::Instant::now() < until,
                "timed out waiting for {what}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops it as Kubernetes does (SIGTERM) and waits for its exit.
    async fn stop(mut self) {
        let pid = self
            .child
            .id()
            .expect("a running child has an id")
            .to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .expect("running kill");
        assert!(sent.success(), "kill -TERM {pid}");
        let exited = tokio::time::timeout(DEADLINE, self.child.wait()).await;
        assert!(
            exited.is_ok(),
            "the {} operator did not exit after SIGTERM",
            self.side
        );
    }
}

impl Drop for Process {
    // The child is killed on drop (`kill_on_drop`), if it still runs.
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "----- the {} operator's log ({}) -----\n{}",
                self.side,
                self.log.display(),
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
    }
}
