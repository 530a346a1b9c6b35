//! `bench-kopf-rs-operator`: the kopf-rs side of `operator-bench`, a separate process that the
//! runner measures from outside. It serves KopfExamples (`examples/crd.yaml`) with the handlers
//! that `BENCH_MODE` chooses; every handler that writes leaves `{"at": <unix seconds>, "run":
//! BENCH_RUN}` (and `"seq"` for updates) in `status.<handler id>`, so the runner sees when it
//! ran; busy handlers and daemons print `BENCH-STARTED <name>` when they start. The other
//! options are Kopf's `kopf run` ones (`--all-namespaces`, ...).
//!
//! The same job is done by `bench/operators/kopf_operator.py` (Python Kopf) and
//! `bench-kube-rs-operator` (a kube-rs `Controller`).

use std::process::ExitCode;
use std::time::Duration;

use kopf::registry::ChangeHandler;
use kopf::resources::Selector;
use kopf::{Invocation, TemporaryError};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

#[path = "common.rs"]
mod common;

use common::{Mode, mark};

/// Settings that the environment asks for (the runner passes its own environment on):
/// `BENCH_STRIP_MANAGED_FIELDS=1` leaves `metadata.managedFields` out of the objects read (off
/// by default, as Kopf); `BENCH_STATUS_STORAGES=1` keeps the diff-base and the progress in
/// `status` (Kopf's `StatusDiffBaseStorage` and a writable `StatusProgressStorage`), so that a
/// handled object costs one write; `BENCH_MAX_CONCURRENT_WRITES=N`, for experiments only, caps
/// the writes in flight (the benchmark's figures leave it unset).
#[kopf::on_startup]
async fn configure(settings: &mut kopf::Settings) -> kopf::Result<()> {
    settings.watching.strip_managed_fields =
        std::env::var("BENCH_STRIP_MANAGED_FIELDS").is_ok_and(|value| value == "1");
    if std::env::var("BENCH_STATUS_STORAGES").is_ok_and(|value| value == "1") {
        settings.persistence.diffbase_storage =
            std::sync::Arc::new(kopf::storage::StatusDiffBaseStorage::default());
        settings.persistence.progress_storage =
            std::sync::Arc::new(kopf::storage::StatusProgressStorage {
                writable: true,
                ..kopf::storage::StatusProgressStorage::default()
            });
    }
    if let Ok(writes) = std::env::var("BENCH_MAX_CONCURRENT_WRITES") {
        settings.networking.max_concurrent_writes = writes.parse().map_err(|_| {
            kopf::PermanentError::new(format!(
                "BENCH_MAX_CONCURRENT_WRITES must be a number, not {writes:?}"
            ))
        })?;
    }
    Ok(())
}

#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn create_fn() -> Value {
    mark(None)
}

#[kopf::on_update("kopf.dev", "v1", "kopfexamples")]
async fn update_fn(spec: &Value) -> Value {
    mark(spec.get("seq"))
}

#[kopf::on_resume("kopf.dev", "v1", "kopfexamples")]
async fn resume_fn() -> Value {
    mark(None)
}

#[kopf::on_delete("kopf.dev", "v1", "kopfexamples")]
async fn delete_fn() {}

#[kopf::on_event("kopf.dev", "v1", "kopfexamples")]
async fn event_fn() {}

/// A create handler that works until the operator stops (scenario "shutdown, in flight").
/// Change handlers get no `stopped` argument from the attributes, so this one is registered
/// with [`ChangeHandler`] and reads it from its [`Invocation`].
async fn busy_fn(invocation: Invocation) -> kopf::Result<Option<Value>> {
    common::started(invocation.name());
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_secs(3600)) => Ok(Some(mark(None))),
        _ = invocation.stopped().cancelled() => {
            Err(TemporaryError::new("stopped by the operator's exit").immediately().into())
        }
    }
}

/// A daemon that runs until the operator stops (scenario "shutdown, daemons").
#[kopf::daemon("kopf.dev", "v1", "kopfexamples")]
async fn daemon_fn(name: &str, stopped: &CancellationToken) {
    common::started(name);
    stopped.cancelled().await;
}

#[tokio::main]
async fn main() -> ExitCode {
    let mode = match Mode::from_env() {
        Ok(mode) => mode,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let registry = match mode {
        Mode::Create => kopf::handlers![configure, create_fn],
        Mode::Update => kopf::handlers![configure, create_fn, update_fn],
        Mode::Delete => kopf::handlers![configure, create_fn, delete_fn],
        Mode::Startup => kopf::handlers![configure, create_fn, resume_fn],
        Mode::Idle => kopf::handlers![configure, event_fn],
        Mode::Busy => kopf::handlers![configure].with(ChangeHandler::on_create(
            Selector::new("kopf.dev", "v1", "kopfexamples"),
            "create_fn",
            busy_fn,
        )),
        Mode::Daemon => kopf::handlers![configure, daemon_fn],
    };
    kopf::run_with(registry).await
}
