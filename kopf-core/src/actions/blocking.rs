//! Sync handlers: plain `fn`s that block, run on threads of the operator's own
//! ([`Threads`](crate::aiokits::threads::Threads)), as handler futures.

use std::sync::Arc;

use crate::actions::invocation::{HandlerFuture, HandlerResult, Invocation};
use crate::aiokits::tasks::{StopReason, Tasks};
use crate::structs::errors::Error;

/// Turns a blocking function into a handler function (a sync handler), to run on the
/// operator's own threads.
///
/// Use it wherever a handler function goes, so there is one adapter rather than a
/// `_blocking` twin of every constructor: `ChangeHandler::on_create(selector, id,
/// kopf::registry::blocking(f))`, `EventHandler::on_event(selector, id,
/// kopf::registry::blocking(f))`, and so on.
///
/// ```
/// use kopf::registry::{ChangeHandler, Registry};
/// use kopf::resources::Selector;
/// let examples = Selector::new("kopf.dev", "v1", "kopfexamples");
/// let registry = Registry::new().with(ChangeHandler::on_create(
///     examples,
///     "create_fn",
///     kopf::registry::blocking(|invocation| {
///         // Blocking calls are fine here: a database driver, a subprocess, a file.
///         for _ in 0..10 {
///             if invocation.stopped().is_cancelled() {
///                 return Err(kopf::TemporaryError::new("stopped; resuming later").into());
///             }
///             std::thread::sleep(std::time::Duration::from_millis(10));
///         }
///         Ok(Some(serde_json::json!({"message": "done"})))
///     }),
/// ));
/// ```
///
/// A sync handler runs on one of the operator's threads: at most
/// [`ExecutionSettings::max_workers`](crate::settings::ExecutionSettings::max_workers)
/// (Kopf's `min(32, cpus + 4)` by default) at once; more calls wait for a free thread. Its
/// result is awaited asynchronously, then stored, retried and logged as an async handler's.
/// A panic is a failed attempt, as for an async handler. One still waiting for a thread when
/// its operator stops does not start: it runs on the operator's next start.
///
/// **A thread cannot be interrupted.** A sync handler can stop early by polling
/// `invocation.stopped().is_cancelled()` (and tell why with
/// [`stop_reason`](crate::Invocation::stop_reason)). One that does not keeps its thread busy
/// past its `timeout` and past the operator's grace period: then the operator abandons it with
/// a warning naming the handler and the object, and `run()` returns
/// [`OperatorError::Aborted`](crate::operator::OperatorError::Aborted) while the thread finishes on
/// its own, or ends with the process. This is the one exception to "`run()` leaves no thread
/// behind"; after a clean stop, every thread of the operator has exited.
pub fn blocking<F>(
    function: F,
) -> impl Fn(Invocation) -> HandlerFuture + Clone + Send + Sync + 'static
where
    F: Fn(Invocation) -> HandlerResult + Send + Sync + 'static,
{
    let function = Arc::new(function);
    move |invocation: Invocation| -> HandlerFuture {
        let function = function.clone();
        let node = invocation.node.clone();
        // The toolkits' free functions act for the handler on its thread too.
        let current = crate::actions::current::Current::of(&invocation);
        on_thread(node, move || current.enter_sync(|| function(invocation)))
    }
}

/// Runs a sync handler's call on one of the operator's threads, as a handler future: for
/// [`blocking`] and the other kinds' sync adapters.
pub(crate) fn on_thread<C>(node: Tasks, call: C) -> HandlerFuture
where
    C: FnOnce() -> HandlerResult + Send + 'static,
{
    Box::pin(async move {
        // Started on the first poll: an attempt dropped before that runs nothing; nor does
        // one stopped while it waited for a thread.
        let stopped = node.token().clone();
        let result = node.spawn_blocking(move || (!stopped.is_cancelled()).then(call));
        let mut waiting = Waiting {
            node: &node,
            done: false,
        };
        let result = result.await;
        waiting.done = true;
        match result {
            Ok(Ok(Some(result))) => result,
            // The attempt's own panic handling reports it, as for an async handler.
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Ok(Ok(None)) | Err(_) => {
                let reason = node.stop_reason().unwrap_or(StopReason::OperatorExiting);
                Err(Error::not_started(format_args!(
                    "the sync handler did not start: {reason}"
                )))
            }
        }
    })
}

/// Warns when the operator stops waiting for a sync handler that is still running (after its
/// timeout).
struct Waiting<'a> {
    node: &'a Tasks,
    done: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        // At the abort, the operator's stop names what it abandons itself.
        if self.done || self.node.is_aborted() {
            return;
        }
        let reason = self
            .node
            .stop_reason()
            .map_or_else(|| "no reason".to_string(), |r| r.to_string());
        let work = self.node.work();
        tracing::warn!(
            target: "kopf::handler",
            handler = work.as_ref().map(|w| w.handler()),
            object = work.as_ref().map(|w| w.object()),
            stop_reason = %reason,
            "abandoning a sync handler ({reason}): it cannot be interrupted, so its thread runs on until it returns",
        );
    }
}
