//! `bench-kube-rs-operator`: the kube-rs side of `operator-bench`, doing the same job as
//! `bench-kopf-rs-operator` with a kube-runtime `Controller` over KopfExamples (as
//! `DynamicObject`s): its reconcile writes the same marks through the `/status` subresource
//! (a merge patch), once per cause, and uses kube-runtime's `finalizer` helper when
//! `BENCH_MODE=delete`. With `BENCH_MODE=daemon`, the first reconcile of each object starts a
//! task (tracked, awaited at exit) that runs until the operator stops: kube-rs has no daemons.
//! SIGTERM or SIGINT stops it gracefully: no new reconciles, and busy ones
//! are told to stop.

use std::collections::HashSet;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

#[path = "common.rs"]
mod common;

use common::{Mode, mark, run_id};

/// The finalizer of the deletion scenario.
const FINALIZER: &str = "bench.kopf.dev/cleanup";

/// What every reconcile gets.
struct Context {
    client: Client,
    resource: ApiResource,
    mode: Mode,
    run: String,
    stopping: CancellationToken,
    /// The objects that have a daemon-like task (`BENCH_MODE=daemon`).
    daemons: Mutex<HashSet<String>>,
    /// Those tasks, waited for before the process exits.
    tasks: TaskTracker,
}

/// A failed reconcile; the controller retries it.
#[derive(Debug)]
struct Failure(String);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failure {}

impl From<kube::Error> for Failure {
    fn from(error: kube::Error) -> Self {
        Failure(error.to_string())
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let mode = match Mode::from_env() {
        Ok(mode) => mode,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let client = match Client::try_default().await {
        Ok(client) => client,
        Err(error) => {
            eprintln!("no cluster to talk to (set KUBECONFIG): {error}");
            return ExitCode::FAILURE;
        }
    };
    let resource = ApiResource {
        group: "kopf.dev".into(),
        version: "v1".into(),
        api_version: "kopf.dev/v1".into(),
        kind: "KopfExample".into(),
        plural: "kopfexamples".into(),
    };
    let stopping = CancellationToken::new();
    let context = Arc::new(Context {
        client: client.clone(),
        resource: resource.clone(),
        mode,
        run: run_id(),
        stopping: stopping.clone(),
        daemons: Mutex::new(HashSet::new()),
        tasks: TaskTracker::new(),
    });
    let signalled = stopping.clone();
    let signals = async move {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate()).expect("a SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        signalled.cancel();
    };
    let examples: Api<DynamicObject> = Api::all_with(client, &resource);
    let shutdown = stopping.clone();
    let controller = Controller::new_with(examples, watcher::Config::default(), resource)
        .graceful_shutdown_on(async move { shutdown.cancelled().await })
        .run(reconcile, error_policy, context.clone())
        .for_each(|_| async {});
    tokio::select! {
        _ = controller => {}
        _ = async { signals.await; std::future::pending::<()>().await } => {}
    }
    context.tasks.close();
    context.tasks.wait().await;
    ExitCode::SUCCESS
}

async fn reconcile(object: Arc<DynamicObject>, context: Arc<Context>) -> Result<Action, Failure> {
    let namespace = object.namespace().unwrap_or_default();
    let api: Api<DynamicObject> =
        Api::namespaced_with(context.client.clone(), &namespace, &context.resource);
    if context.mode == Mode::Delete {
        return finalizer(&api, FINALIZER, object, |event| async {
            match event {
                Event::Apply(object) => apply(&api, &object, &context).await,
                Event::Cleanup(_) => Ok(Action::await_change()),
            }
        })
        .await
        .map_err(|error| Failure(error.to_string()));
    }
    apply(&api, &object, &context).await
}

/// Writes the marks that are missing.
async fn apply(
    api: &Api<DynamicObject>,
    object: &DynamicObject,
    context: &Context,
) -> Result<Action, Failure> {
    let status = &object.data["status"];
    let spec = &object.data["spec"];
    let name = object.name_any();
    match context.mode {
        Mode::Idle => {}
        Mode::Create | Mode::Delete => {
            if status["create_fn"].is_null() {
                write(api, &name, "create_fn", mark(None)).await?;
            }
        }
        Mode::Update => {
            if status["create_fn"].is_null() {
                write(api, &name, "create_fn", mark(None)).await?;
            } else if !spec["seq"].is_null() && status["update_fn"]["seq"] != spec["seq"] {
                write(api, &name, "update_fn", mark(Some(&spec["seq"]))).await?;
            }
        }
        Mode::Startup => {
            if status["create_fn"].is_null() {
                write(api, &name, "create_fn", mark(None)).await?;
            } else if status["create_fn"]["run"] != context.run.as_str()
                && status["resume_fn"]["run"] != context.run.as_str()
            {
                write(api, &name, "resume_fn", mark(None)).await?;
            }
        }
        Mode::Daemon => {
            let first = context
                .daemons
                .lock()
                .expect("the daemons' lock")
                .insert(name.clone());
            if first {
                let stopping = context.stopping.clone();
                context.tasks.spawn(async move {
                    common::started(&name);
                    stopping.cancelled().await;
                });
            }
        }
        Mode::Busy => {
            if status["create_fn"].is_null() {
                common::started(&name);
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(3600)) => {
                        write(api, &name, "create_fn", mark(None)).await?;
                    }
                    _ = context.stopping.cancelled() => {}
                }
            }
        }
    }
    Ok(Action::await_change())
}

async fn write(
    api: &Api<DynamicObject>,
    name: &str,
    field: &str,
    mark: Value,
) -> Result<(), Failure> {
    let patch = json!({"status": {field: mark}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

fn error_policy(_object: Arc<DynamicObject>, error: &Failure, _context: Arc<Context>) -> Action {
    eprintln!("reconcile failed: {error}");
    Action::requeue(Duration::from_millis(500))
}
