//! Running one handler once: limits checked first, the attempt raced against its timeout and
//! the operator's abort, panics caught, and the result turned into an [`Outcome`]. A timeout
//! cancels the handler's `stopped` token with [`StopReason::Timeout`]; a handler that returns
//! after being asked to stop is logged with the reason.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt as _;
use serde_json::Value;

use crate::errors::ErrorKind;
use crate::handlers::{ErrorsMode, HandlerFn, Invocation, Options};
use crate::tasks::{StopReason, Work};

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// Done; the value (if any) goes to `status.<handler-id>`.
    Success(Option<Value>),
    /// Try again after the delay.
    Retry { delay: Duration, message: String },
    /// Done, failed.
    Failure(String),
    /// The operator aborted the attempt, or stopped it before it started; nothing is
    /// recorded.
    Aborted,
}

/// Runs one attempt of the handler `id` whose earlier attempts failed `retry` times since
/// `started`. The attempt is registered as in flight while it runs, and its invocation's node
/// is named after it, so that a stop can say what it waits for and what it aborts.
pub(crate) async fn execute(
    id: &str,
    function: &HandlerFn,
    options: &Options,
    default_backoff: Duration,
    mut invocation: Invocation,
) -> Outcome {
    let retry = invocation.retry;
    let runtime = invocation.runtime();
    if let Some(timeout) = options.timeout
        && runtime >= timeout
    {
        return Outcome::Failure(format!(
            "the handler timed out: {timeout:?} since its first attempt"
        ));
    }
    if let Some(limit) = options.retries
        && retry >= limit
    {
        return Outcome::Failure(format!(
            "the handler has reached its retry limit of {limit} attempts"
        ));
    }
    let work = Work::new(id, invocation.namespace(), invocation.name());
    invocation.node = invocation.node.doing(work.clone());
    let node = invocation.node.clone();
    let _in_flight = node.in_flight();
    let remaining = options.timeout.map(|t| t.saturating_sub(runtime));
    let attempt = AssertUnwindSafe(function(invocation)).catch_unwind();
    let timed = async {
        match remaining {
            Some(remaining) => {
                tokio::pin!(attempt);
                tokio::select! {
                    finished = &mut attempt => Some(finished),
                    // The reason is set while the attempt is still alive, so a sync handler's
                    // thread, abandoned when the attempt is dropped, is logged with it.
                    _ = tokio::time::sleep(remaining) => {
                        node.cancel(StopReason::Timeout);
                        None
                    }
                }
            }
            None => Some(attempt.await),
        }
    };
    let abort = node.abort_token().clone();
    let finished = tokio::select! {
        biased;
        _ = abort.cancelled() => return Outcome::Aborted,
        finished = timed => finished,
    };
    if finished.is_some()
        && let Some(reason) = node.stop_reason()
    {
        tracing::info!(target: "kopf::handler", handler = %work.handler, object = %work.object, stop_reason = %reason, "the handler returned after it was asked to stop: {reason}");
    }
    let outcome = match finished {
        None => {
            return Outcome::Failure(format!(
                "the handler timed out: {:?} since its first attempt",
                options.timeout.unwrap_or_default()
            ));
        }
        Some(Err(panic)) => arbitrary(
            options,
            default_backoff,
            format!("the handler panicked: {}", panic_message(&panic)),
        ),
        Some(Ok(Ok(value))) => Outcome::Success(value),
        Some(Ok(Err(error))) => match error.kind() {
            ErrorKind::Temporary(delay) => Outcome::Retry {
                delay: delay.unwrap_or_default(),
                message: error.to_string(),
            },
            ErrorKind::Permanent => Outcome::Failure(error.to_string()),
            ErrorKind::Arbitrary => arbitrary(options, default_backoff, error.to_string()),
            ErrorKind::NotStarted => Outcome::Aborted,
        },
    };
    // Look ahead, as Kopf: a retry that could not happen is a failure now.
    match outcome {
        Outcome::Retry { message, .. }
            if options.retries.is_some_and(|limit| retry + 1 >= limit) =>
        {
            Outcome::Failure(format!(
                "{message} (the handler has reached its retry limit of {} attempts)",
                options.retries.unwrap_or_default()
            ))
        }
        outcome => outcome,
    }
}

fn arbitrary(options: &Options, default_backoff: Duration, message: String) -> Outcome {
    match options.errors {
        ErrorsMode::Temporary => Outcome::Retry {
            delay: options.backoff.unwrap_or(default_backoff),
            message,
        },
        ErrorsMode::Permanent => Outcome::Failure(message),
        ErrorsMode::Ignored => Outcome::Success(None),
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(message) = panic.downcast_ref::<&str>() {
        (*message).to_string()
    } else if let Some(message) = panic.downcast_ref::<String>() {
        message.clone()
    } else {
        "(a non-string panic payload)".to_string()
    }
}
