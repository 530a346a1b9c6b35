//! An operator that dies properly: on SIGINT or SIGTERM it stops watching at once, asks its
//! handlers to stop, and exits; a handler that ignores the request is cut off after the grace
//! period, and a second signal ends everything at once.
//!
//! It serves Kopf's KopfExample resource (`kopfexamples.kopf.dev`, Kopf's `examples/crd.yaml`)
//! in the cluster of the kubeconfig (`KUBECONFIG`), e.g. the fake API server's:
//!
//! ```sh
//! cargo run -p kopf-fake-apiserver -- --kubeconfig /tmp/kopf.kubeconfig &
//! KUBECONFIG=/tmp/kopf.kubeconfig STOPPABLE_GRACE_PERIOD=5 cargo run --example stoppable
//! ```
//!
//! A KopfExample with `spec.duration: 60` keeps its handler busy for a minute; press Ctrl+C
//! and the handler stops early (it will run again next time). With `spec.ignoreStop: true` it
//! does not, so the operator waits for the grace period, unless you press Ctrl+C again.
//!
//! With `spec.blocking: true` the work is done by a sync handler (`kopf::registry::blocking`),
//! which blocks a thread of the operator's own and polls its `stopped` token. One that also ignores
//! the stop cannot be interrupted: after the grace period the operator abandons it with a
//! warning naming it, and the process exits all the same.
//!
//! Exit codes: 0 after a clean stop, 130 after a second signal, 1 otherwise.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use kopf::operator::{Operator, OperatorError};
use kopf::registry::{ChangeHandler, Registry};
use kopf::resources::Selector;
use kopf::{Invocation, Result, Settings, TemporaryError};
use serde_json::{Value, json};

/// The grace period in seconds (default: the settings' default).
const GRACE_PERIOD: &str = "STOPPABLE_GRACE_PERIOD";

fn main() -> ExitCode {
    ExitCode::from(operate())
}

/// Runs the operator until signalled; returns the process's exit code.
// Not private: the example's test runs this very function in a child process.
#[tokio::main]
pub(crate) async fn operate() -> u8 {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut settings = Settings::default();
    if let Ok(seconds) = std::env::var(GRACE_PERIOD) {
        match seconds.parse() {
            Ok(seconds) => settings.process.grace_period = Duration::from_secs_f64(seconds),
            Err(_) => {
                eprintln!("{GRACE_PERIOD} must be a number of seconds, not {seconds:?}");
                return 1;
            }
        }
    }
    let examples = Selector::new("kopf.dev", "v1", "kopfexamples");
    let registry = Registry::new()
        .with(ChangeHandler::on_create(examples.clone(), "create_fn", work).when(|i| !blocking(i)))
        .with(
            ChangeHandler::on_create(
                examples,
                "create_sync_fn",
                kopf::registry::blocking(work_blocking),
            )
            .when(blocking),
        );
    // The client comes from the kubeconfig (`KUBECONFIG`) or the in-cluster environment.
    match Operator::new(registry)
        .settings(settings)
        .run_until_signalled()
        .await
    {
        Ok(()) => 0,
        Err(OperatorError::Interrupted) => {
            eprintln!("stopped at once by a second signal");
            130
        }
        Err(error) => {
            eprintln!("{error}");
            1
        }
    }
}

/// Works for `spec.duration` seconds; stops early when the operator stops, unless
/// `spec.ignoreStop` is true.
async fn work(invocation: Invocation) -> Result<Option<Value>> {
    let seconds = invocation.spec()["duration"].as_f64().unwrap_or(0.0);
    let ignore_stop = invocation.spec()["ignoreStop"].as_bool().unwrap_or(false);
    tracing::info!(parent: invocation.logger(), seconds, ignore_stop, "working");
    let work = tokio::time::sleep(Duration::from_secs_f64(seconds.max(0.0)));
    if ignore_stop {
        work.await;
    } else {
        tokio::select! {
            _ = work => {}
            _ = invocation.stopped().cancelled() => {
                let reason = invocation.stop_reason().map(|r| r.to_string()).unwrap_or_default();
                tracing::info!(parent: invocation.logger(), %reason, "stopping early; the work resumes on the next run");
                return Err(TemporaryError::new("interrupted by the operator's stop")
                    .immediately()
                    .into());
            }
        }
    }
    Ok(Some(json!({"worked": seconds})))
}

/// Whether the work is for the sync handler (`spec.blocking`).
fn blocking(invocation: &Invocation) -> bool {
    invocation.spec()["blocking"].as_bool().unwrap_or(false)
}

/// As [`work`], in a sync handler: blocks its thread for `spec.duration` seconds, polling the
/// `stopped` token unless `spec.ignoreStop` is true.
fn work_blocking(invocation: Invocation) -> Result<Option<Value>> {
    let seconds = invocation.spec()["duration"].as_f64().unwrap_or(0.0);
    let ignore_stop = invocation.spec()["ignoreStop"].as_bool().unwrap_or(false);
    tracing::info!(parent: invocation.logger(), seconds, ignore_stop, "working on a thread");
    let until = Instant::now() + Duration::from_secs_f64(seconds.max(0.0));
    while let Some(left) = until
        .checked_duration_since(Instant::now())
        .filter(|left| !left.is_zero())
    {
        if !ignore_stop && invocation.stopped().is_cancelled() {
            let reason = invocation
                .stop_reason()
                .map(|r| r.to_string())
                .unwrap_or_default();
            tracing::info!(parent: invocation.logger(), %reason, "stopping early; the work resumes on the next run");
            return Err(TemporaryError::new("interrupted by the operator's stop")
                .immediately()
                .into());
        }
        std::thread::sleep(left.min(Duration::from_millis(10)));
    }
    Ok(Some(json!({"worked": seconds})))
}
