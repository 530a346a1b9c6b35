//! The operator's stop: the signals that ask for it, the graceful stop of its tasks within the
//! grace period (and the abort of what outlives it), and the admission's stop step.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::errors::OperatorError;
use crate::aiokits::tasks::{StopReason, Tasks};
use crate::aiokits::work::Work;
use crate::configs::settings::Settings;
use crate::reactor::admission::Admitting;

/// The admission's stop step: the managed configurations are handed over (or shrink to the
/// persistent webhooks), then the server stops accepting and its reviews in flight finish.
pub(super) async fn stop_admission(
    admitting: Option<&Admitting>,
    settings: &Settings,
    abort: &CancellationToken,
) -> Result<(), OperatorError> {
    let process = &settings.process;
    let graceful = match admitting {
        Some(admitting) => {
            admitting
                .stop(process.cleanup_timeout, process.grace_period, abort)
                .await
        }
        None => true,
    };
    if graceful {
        Ok(())
    } else {
        Err(OperatorError::Aborted(process.grace_period))
    }
}

/// The stop (the shutdown contract): asks everything to stop, waits up to the grace period for
/// the tasks and for sync handlers' threads, then aborts the tasks and abandons the threads
/// (they cannot be interrupted), naming the handlers that were still running.
pub(super) async fn shut_down(
    tasks: &Tasks,
    grace: Duration,
    abort: &CancellationToken,
) -> Result<(), OperatorError> {
    let (first, running) = tasks.running_first(LISTED);
    let reason = StopReason::OperatorExiting;
    if running == 0 {
        tracing::info!(target: "kopf::operator", "stopping ({reason})");
    } else {
        tracing::info!(target: "kopf::operator", handlers = running, "stopping ({reason}); asking the handlers in flight to stop: {}", listed(&first, running));
    }
    tasks.cancel_on_runtime(reason).await;
    let threads = tasks.threads();
    let everything = async {
        tasks.wait().await;
        threads.idle().await;
    };
    let graceful = tokio::select! {
        finished = tokio::time::timeout(grace, everything) => finished.is_ok(),
        _ = abort.cancelled() => false,
    };
    if graceful {
        threads.close();
        threads.exited().await;
        return Ok(());
    }
    let when = if abort.is_cancelled() {
        "at once (a second signal)".to_string()
    } else {
        format!("after the grace period of {grace:?}")
    };
    let on_threads = threads.busy();
    for work in tasks.running() {
        if !on_threads.contains(&work) {
            tracing::warn!(target: "kopf::operator", handler = %work.handler(), object = %work.object(), "aborting the {work} {when}: it is still running");
        }
    }
    tracing::warn!(target: "kopf::operator", tasks = tasks.len(), "aborting the work left {when}");
    tasks.abort();
    tasks.wait().await;
    threads.close();
    threads.exited().await;
    for work in threads.busy() {
        tracing::warn!(target: "kopf::operator", handler = %work.handler(), object = %work.object(), "abandoning the sync {work} {when}: its thread cannot be interrupted and is left to finish on its own");
    }
    Err(OperatorError::Aborted(grace))
}

/// How many of the handlers in flight a stop's log line names.
const LISTED: usize = 5;

/// The first few of `total` works, for one log line.
fn listed(first: &[Work], total: usize) -> String {
    let mut names: Vec<String> = first.iter().map(Work::to_string).collect();
    if total > first.len() {
        names.push(format!("and {} more", total - first.len()));
    }
    names.join(", ")
}

/// The next SIGINT or SIGTERM.
pub(super) async fn signalled() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
