//! Running one handler once: limits checked first, the attempt raced against its timeout and
//! the operator's abort, panics caught, and the result turned into an [`Outcome`].

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt as _;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::errors::ErrorKind;
use crate::handlers::{ErrorsMode, HandlerFn, Invocation, Options};

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// Done; the value (if any) goes to `status.<handler-id>`.
    Success(Option<Value>),
    /// Try again after the delay.
    Retry { delay: Duration, message: String },
    /// Done, failed.
    Failure(String),
    /// The operator aborted the attempt; nothing is recorded.
    Aborted,
}

/// Runs one attempt of a handler whose earlier attempts failed `retry` times since `started`.
pub(crate) async fn execute(
    function: &HandlerFn,
    options: &Options,
    default_backoff: Duration,
    invocation: Invocation,
    abort: &CancellationToken,
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
    let stopped = invocation.stopped.clone();
    let remaining = options.timeout.map(|t| t.saturating_sub(runtime));
    let attempt = AssertUnwindSafe(function(invocation)).catch_unwind();
    let timed = async {
        match remaining {
            Some(remaining) => tokio::time::timeout(remaining, attempt).await.ok(),
            None => Some(attempt.await),
        }
    };
    let finished = tokio::select! {
        biased;
        _ = abort.cancelled() => return Outcome::Aborted,
        finished = timed => finished,
    };
    let outcome = match finished {
        None => {
            stopped.cancel();
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
