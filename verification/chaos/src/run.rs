//! One chaos run: a fake API server with a journal, the chaos operator as a child process, the
//! objects created, resized and deleted, the faults of the plan injected, and the operator
//! killed with SIGKILL where the plan says and started again. It returns the evidence that
//! [`invariants`](crate::invariants) checks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use kopf_testing::{
    ApiRequest, ApiServer, Committed, FakeApiServer, Fault, LoggedRequest, RequestError, TestClient,
};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use crate::calls::{self, CALLS_ENV, Line};
use crate::resource::{self, ANNOTATIONS, LAST_HANDLED, OBJECTS};

/// How long anything may take before the run is declared stuck.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// The `User-Agent` of the test's own requests (faults never aim at them).
const DRIVER: &str = "chaos-driver";

/// What a run does.
#[derive(Debug, Clone)]
pub struct Plan {
    /// How many objects (named `chaos-0`, `chaos-1`, ...).
    pub objects: usize,
    /// The seed of the faults' generator and of the crash points drawn.
    pub seed: u64,
    /// Inject transient faults into the operator's requests: writes that land but answer 500
    /// or nothing, writes refused with 500 or 409, watches cut, lists shuffled or served from
    /// a lagging view (at `resourceVersion=0`); and states it may legitimately skip (objects
    /// resized twice while its watches are refused, then the history compacted).
    pub faults: bool,
    /// Where the operator is killed.
    pub crash: Crash,
}

/// Where a run kills the operator with SIGKILL (and starts it again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crash {
    /// Never.
    Never,
    /// At its write number `index` (from 0): right after it landed (`committed`), or right
    /// before it would have.
    AtWrite {
        /// Which write (counting the operator's creates, updates, patches and deletions).
        index: u64,
        /// Whether the write lands before the kill.
        committed: bool,
    },
    /// This many times, each at a write drawn from the seed.
    Repeatedly {
        /// How many kills.
        kills: u32,
    },
}

/// A SIGKILL the run sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kill {
    /// The process killed.
    pub pid: u32,
    /// Whether its held write had landed.
    pub committed: bool,
    /// The held write: `verb resource name`.
    pub write: String,
}

/// What a run leaves for the invariants to check.
#[derive(Debug, Clone)]
pub struct Evidence {
    /// The plan.
    pub plan: Plan,
    /// Every handler call, started and ended.
    pub calls: Vec<Line>,
    /// Every change the server made.
    pub journal: Vec<Committed>,
    /// Every request the server answered (or not).
    pub requests: Vec<LoggedRequest>,
    /// The kills, in order.
    pub kills: Vec<Kill>,
    /// Faults fired, by their actions' names (`commit_then_fail`, `hold`, ...; `hold` counts
    /// the kills).
    pub faults: BTreeMap<String, u64>,
    /// The operator's writes (creates, updates, patches, deletions) in the run.
    pub writes: u64,
    /// Objects that were still there when the run gave up waiting for their deletion.
    pub stuck: Vec<String>,
    /// Phases that did not finish in time, and why.
    pub timeouts: Vec<String>,
    /// Whether the operator went quiet once the faults stopped.
    pub quiet: bool,
    /// Whether the last operator exited with 0 after SIGTERM, leaving no connection open.
    pub clean_exit: Result<(), String>,
    /// Where the run's files are (the call log, the operator's logs).
    pub dir: PathBuf,
}

/// Why a run could not be made at all (not a violation: the machinery failed).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The fake API server or a file failed.
    #[error("the run's setup failed: {0}")]
    Setup(#[from] std::io::Error),
    /// The test's own request got no answer, or an error.
    #[error("the test's request failed: {0}")]
    Request(RequestError),
}

/// The operator process, and every one before it.
struct Operator {
    binary: PathBuf,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
    started: Mutex<u32>,
}

impl Operator {
    fn start(&self) -> std::io::Result<()> {
        let mut number = self.started.lock().expect("not poisoned");
        *number += 1;
        let log = std::fs::File::create(self.dir.join(format!("operator-{number}.log")))?;
        let child = Command::new(&self.binary)
            .args([
                "--standalone",
                "--namespace",
                "default",
                "--log-format",
                "plain",
            ])
            .env("KUBECONFIG", self.dir.join("kubeconfig"))
            .env(CALLS_ENV, self.dir.join("calls.jsonl"))
            .env(
                "RUST_LOG",
                std::env::var("CHAOS_RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()?;
        *self.child.lock().expect("not poisoned") = Some(child);
        Ok(())
    }

    /// SIGKILL, and wait until it is gone. Returns its pid.
    async fn kill(&self) -> u32 {
        let child = self.child.lock().expect("not poisoned").take();
        let Some(mut child) = child else { return 0 };
        let pid = child.id().unwrap_or_default();
        let _ = child.kill().await;
        pid
    }

    /// SIGTERM, and how it exited.
    async fn terminate(&self) -> Result<(), String> {
        let child = self.child.lock().expect("not poisoned").take();
        let Some(mut child) = child else {
            return Err("no operator was running".into());
        };
        let pid = child.id().unwrap_or_default().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .map_err(|e| format!("running kill: {e}"))?;
        if !sent.success() {
            return Err(format!("kill -TERM {pid} failed"));
        }
        match tokio::time::timeout(DEADLINE, child.wait()).await {
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(Ok(status)) => Err(format!("the operator exited with {status} after SIGTERM")),
            Ok(Err(error)) => Err(format!("waiting for the operator: {error}")),
            Err(_) => Err("the operator did not exit after SIGTERM".into()),
        }
    }
}

/// Runs a plan with the chaos operator at `binary`, keeping its files in `dir`.
pub async fn run(plan: &Plan, binary: &Path, dir: &Path) -> Result<Evidence, RunError> {
    tokio::fs::create_dir_all(dir).await?;
    let _ = tokio::fs::remove_file(dir.join("calls.jsonl")).await;
    // The fake server, or with KOPF_TESTING_APISERVER=real, a real one with the fake one in
    // front (the faults act on the real server's requests).
    let builder = FakeApiServer::builder().journal().fault_seed(plan.seed);
    let server = ApiServer::from_env().start(builder).await;
    server.write_kubeconfig(dir.join("kubeconfig"))?;
    let client = TestClient::new(server.client());
    send(
        &client,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some(resource::crd()),
    )
    .await?;
    // A real server serves a new CRD's resource a moment later; the operator must find it.
    let served = kopf_testing::try_wait(|| async {
        let group = send(
            &client,
            "GET",
            &format!("/apis/{}/v1", resource::GROUP),
            None,
        )
        .await;
        let resources = group.ok()?;
        let plural = resources["resources"]
            .as_array()?
            .iter()
            .any(|r| r["name"] == resource::PLURAL);
        plural.then_some(())
    })
    .await;
    if served.is_none() {
        return Err(RunError::Setup(std::io::Error::other(
            "the CRD was never served",
        )));
    }

    let operator = Operator {
        binary: binary.to_path_buf(),
        dir: dir.to_path_buf(),
        child: Mutex::new(None),
        started: Mutex::new(0),
    };
    operator.start()?;
    if plan.faults {
        inject_transient_faults(&server, plan.objects);
    }
    let mut rng = StdRng::seed_from_u64(plan.seed);
    let mut kills_left = match plan.crash {
        Crash::Never => 0,
        Crash::AtWrite { index, committed } => {
            server.inject(hold(committed).after(index).times(1));
            1
        }
        Crash::Repeatedly { kills } => {
            arm(&server, &mut rng, plan.objects);
            kills
        }
    };

    let names: Vec<String> = (0..plan.objects).map(|i| format!("chaos-{i}")).collect();
    let mut timeouts = Vec::new();
    let mut kills = Vec::new();
    let script = async {
        for (i, name) in names.iter().enumerate() {
            let object = resource::object(name, 1, ((i + 1) % 3) as u64);
            send(&client, "POST", OBJECTS, Some(object)).await?;
        }
        if !converged(&client, &names, created).await {
            timeouts.push("creation: not every object was handled in time".to_string());
        }
        let sizes: &[u64] = if plan.faults {
            // Legitimately skipped states: the operator's watches end and are refused for a
            // while, the objects pass through size 5 to 2, the history is compacted. It may
            // see size 5 or not, but it must handle size 2.
            let blind = |verb| {
                Fault::respond(503)
                    .verb(verb)
                    .times(3)
                    .user_agent("kopf-rs/")
            };
            server.inject(blind("watch"));
            server.inject(blind("list"));
            server.close_watches();
            &[5, 2]
        } else {
            &[2]
        };
        for size in sizes {
            for name in &names {
                let path = format!("{OBJECTS}/{name}");
                send(
                    &client,
                    "PATCH",
                    &path,
                    Some(json!({"spec": {"size": size}})),
                )
                .await?;
            }
        }
        // A real server compacts its history on its own schedule, not on the test's.
        if plan.faults && !server.is_proxy() {
            server.compact();
        }
        if !converged(&client, &names, resized).await {
            timeouts.push("resizing: not every object was handled in time".to_string());
        }
        for name in &names {
            send(&client, "DELETE", &format!("{OBJECTS}/{name}"), None).await?;
        }
        let gone = converged(&client, &names, |object| object.is_null()).await;
        Ok::<bool, RunError>(gone)
    };
    // Meanwhile: kill the operator at each held write, and start it again.
    let supervise = async {
        while kills_left > 0 {
            let Some(held) = server.wait_held(Duration::from_secs(3600)).await else {
                break;
            };
            let pid = operator.kill().await;
            server.cut_held();
            kills.push(Kill {
                pid,
                committed: held.committed,
                write: format!(
                    "{} {} {}",
                    held.verb,
                    held.resource,
                    held.name.unwrap_or_default()
                ),
            });
            kills_left -= 1;
            if kills_left > 0 && matches!(plan.crash, Crash::Repeatedly { .. }) {
                arm(&server, &mut rng, plan.objects);
            }
            if let Err(error) = operator.start() {
                return Err(RunError::Setup(error));
            }
        }
        std::future::pending::<Result<(), RunError>>().await
    };
    let gone = tokio::select! {
        gone = script => gone?,
        failed = supervise => { failed?; false }
    };
    // A kill that was armed but never reached stays unspent: no write is held any more.
    server.clear_faults();
    server.release_held();
    // The script may have ended between a kill and the restart (at the last write).
    if operator.child.lock().expect("not poisoned").is_none() {
        operator.start()?;
    }
    let mut stuck = Vec::new();
    if !gone {
        for name in &names {
            if !get(&client, name).await.is_null() {
                stuck.push(name.clone());
            }
        }
    }
    let quiet = server.wait_quiet(Duration::from_secs(2), DEADLINE).await;
    drop(client);
    let clean_exit = match operator.terminate().await {
        Ok(()) => wait_disconnected(&server).await,
        Err(error) => Err(error),
    };
    let requests = server.requests();
    let journal = server.journal();
    write_journal(&dir.join("journal.jsonl"), &journal).await?;
    let evidence = Evidence {
        plan: plan.clone(),
        calls: calls::read(&dir.join("calls.jsonl")).await?,
        journal,
        faults: server.stats().faults,
        writes: requests
            .iter()
            .filter(|r| !is_driver(r) && is_write(&r.verb))
            .count() as u64,
        requests,
        kills,
        stuck,
        timeouts,
        quiet,
        clean_exit,
        dir: dir.to_path_buf(),
    };
    server.stop().await;
    Ok(evidence)
}

/// The runs of [`every_crash_point`]: the fault-free reference, then one run per crash point.
#[derive(Debug, Clone)]
pub struct CrashPoints {
    /// The run without a kill, whose writes were counted.
    pub reference: Evidence,
    /// A run per crash point, named `kill-after-write-N` or `kill-before-write-N`.
    pub runs: Vec<(String, Evidence)>,
}

/// Kills the operator at every one of its writes in a scenario of `objects` objects: right
/// after each write landed, and right before it would have. A fault-free reference run counts
/// the writes first. `at_once` runs go at the same time (each is a server and an operator).
pub async fn every_crash_point(
    objects: usize,
    binary: &Path,
    dir: &Path,
    at_once: usize,
) -> Result<CrashPoints, RunError> {
    let plan = |crash| Plan {
        objects,
        seed: 1,
        faults: false,
        crash,
    };
    let reference = run(&plan(Crash::Never), binary, &dir.join("reference")).await?;
    let mut points = Vec::new();
    for index in 0..reference.writes {
        for committed in [true, false] {
            let mode = if committed { "after" } else { "before" };
            points.push((
                format!("kill-{mode}-write-{index}"),
                plan(Crash::AtWrite { index, committed }),
            ));
        }
    }
    let mut runs = Vec::new();
    for batch in points.chunks(at_once.max(1)) {
        let results = futures::future::join_all(batch.iter().map(|(name, plan)| async move {
            run(plan, binary, &dir.join(name))
                .await
                .map(|evidence| (name.clone(), evidence))
        }))
        .await;
        for result in results {
            runs.push(result?);
        }
    }
    Ok(CrashPoints { reference, runs })
}

/// The transient faults of a run with faults, each aimed at the operator's requests only.
fn inject_transient_faults(server: &FakeApiServer, objects: usize) {
    let operator = |fault: Fault| fault.user_agent("kopf-rs/");
    // Each kind once for sure, early (the probabilities below may draw none in a short run).
    server.inject(operator(
        Fault::commit_then_fail(500).verb("patch").after(3).times(1),
    ));
    server.inject(operator(
        Fault::commit_then_reset().verb("patch").after(7).times(1),
    ));
    server.inject(operator(
        Fault::respond(500).verb("patch").after(11).times(1),
    ));
    server.inject(operator(Fault::conflict().verb("patch").after(13).times(1)));
    server.inject(operator(Fault::respond(503).verb("list").times(1)));
    server.inject(operator(
        Fault::commit_then_fail(500).verb("patch").probability(0.05),
    ));
    server.inject(operator(
        Fault::commit_then_reset().verb("patch").probability(0.02),
    ));
    server.inject(operator(
        Fault::respond(500).verb("patch").probability(0.05),
    ));
    server.inject(operator(Fault::conflict().verb("patch").probability(0.02)));
    server.inject(operator(Fault::respond(503).verb("list").probability(0.2)));
    server.inject(operator(Fault::shuffle_list()));
    // Only the fake server can lag a view (a real one's watch cache lags when it lags).
    if !server.is_proxy() {
        server.inject(operator(Fault::stale_view(3).probability(0.3)));
    }
    let events = (objects as u64).max(4);
    server.inject(operator(Fault::reset_watch_after(events / 2).times(2)));
    server.inject(operator(Fault::close_watch_after(events).times(2)));
}

/// A hold of the operator's next write, landed or not.
fn hold(committed: bool) -> Fault {
    let fault = if committed {
        Fault::hold_after_commit()
    } else {
        Fault::hold_before_commit()
    };
    fault.user_agent("kopf-rs/")
}

/// Arms the next kill at a write drawn from the seed.
fn arm(server: &FakeApiServer, rng: &mut StdRng, objects: usize) {
    let after = rng.random_range(0..(objects as u64 * 3).max(4));
    server.inject(hold(rng.random_bool(0.5)).after(after).times(1));
}

fn is_write(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

fn is_driver(request: &LoggedRequest) -> bool {
    request.user_agent.as_deref() == Some(DRIVER)
}

/// Whether an object is handled since its creation: both creation handlers' results stored,
/// no progress left, the diff-base written.
fn created(object: &Value) -> bool {
    !object["status"]["first"]["token"].is_null()
        && !object["status"]["second"]["token"].is_null()
        && settled(object)
}

/// Whether an object is handled since it was resized to 2.
fn resized(object: &Value) -> bool {
    let result_for_2 = object["status"]
        .as_object()
        .is_some_and(|status| status.values().any(|v| v["size"] == 2));
    result_for_2
        && settled(object)
        && object["metadata"]["annotations"][LAST_HANDLED]
            .as_str()
            .is_some_and(|last| last.contains("\"size\":2"))
}

/// No progress record left, and the diff-base is written.
fn settled(object: &Value) -> bool {
    let Some(annotations) = object["metadata"]["annotations"].as_object() else {
        return false;
    };
    annotations.contains_key(LAST_HANDLED)
        && annotations
            .keys()
            .all(|key| key == LAST_HANDLED || !key.starts_with(ANNOTATIONS))
}

/// Waits until every object satisfies the condition (an absent object is `null`).
async fn converged(client: &TestClient, names: &[String], done: impl Fn(&Value) -> bool) -> bool {
    let give_up = tokio::time::Instant::now() + DEADLINE;
    for name in names {
        loop {
            if done(&get(client, name).await) {
                break;
            }
            if tokio::time::Instant::now() >= give_up {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    true
}

/// Waits until the server has no connection or watch open (the operator left nothing).
async fn wait_disconnected(server: &FakeApiServer) -> Result<(), String> {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let stats = server.stats();
        if stats.open_watches == 0 && stats.open_connections == 0 {
            return Ok(());
        }
        if tokio::time::Instant::now() >= give_up {
            return Err(format!(
                "after the operator exited, {} watches and {} connections stayed open",
                stats.open_watches, stats.open_connections
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The journal beside the call log, one change a line, for a reader of a failed run.
async fn write_journal(path: &Path, journal: &[Committed]) -> std::io::Result<()> {
    let mut text = String::new();
    for change in journal {
        let at = change
            .at
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let line = json!({
            "resourceVersion": change.resource_version,
            "event": change.event,
            "resource": change.resource,
            "at": at.to_string(),
            "object": change.object,
        });
        text.push_str(&line.to_string());
        text.push('\n');
    }
    tokio::fs::write(path, text).await
}

/// An object as served, or `null` when there is none.
async fn get(client: &TestClient, name: &str) -> Value {
    send(client, "GET", &format!("{OBJECTS}/{name}"), None)
        .await
        .unwrap_or(Value::Null)
}

/// The test's own request, with its `User-Agent` (faults aim at the operator's only): the
/// answer's JSON, `null` for `404`.
async fn send(
    client: &TestClient,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Result<Value, RunError> {
    let request = ApiRequest::new(method, path)
        .json(body)
        .header(http::header::USER_AGENT, DRIVER);
    let answer = client.try_send(request).await.map_err(RunError::Request)?;
    if answer.status == http::StatusCode::NOT_FOUND {
        return Ok(Value::Null);
    }
    Ok(answer.success().map_err(RunError::Request)?.json())
}
