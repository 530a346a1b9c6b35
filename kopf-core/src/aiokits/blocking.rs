//! Sync handlers: plain `fn`s that block, run on threads of the operator's own.
//!
//! The threads are not tokio's blocking pool on purpose: a runtime that is dropped (as
//! `#[tokio::main]` does when `main` returns) waits for its blocking tasks, so one stuck
//! handler would keep the process from exiting. The pool belongs to one run of the operator.
//!
//! Invariants:
//! 1. Threads start on demand, up to the limit, and serve jobs until the pool is closed; then
//!    each exits once its current job (if any) is done.
//! 2. A job whose caller stopped waiting before it started never starts.
//! 3. The pool's counts and the jobs running are changed only through the `state` channel, so
//!    the operator can wait for them and name what it abandons.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, mpsc};

use tokio::sync::{oneshot, watch};

use crate::structs::errors::Error;
use crate::actions::handlers::{HandlerFuture, HandlerResult, Invocation};
use crate::aiokits::tasks::{StopReason, Tasks, Work, lock};

/// Turns a blocking function into a handler function (a sync handler), to run on the
/// operator's own threads.
///
/// Use it wherever a handler function goes, so there is one adapter rather than a
/// `_blocking` twin of every constructor: `ChangeHandler::on_create(selector, id,
/// kopf::blocking(f))`, `EventHandler::on_event(selector, id, kopf::blocking(f))`, and so on.
///
/// ```
/// use kopf::{ChangeHandler, Registry, Selector};
/// let examples = Selector::new("kopf.dev", "v1", "kopfexamples");
/// let registry = Registry::new().with(ChangeHandler::on_create(
///     examples,
///     "create_fn",
///     kopf::blocking(|invocation| {
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
/// [`ExecutionSettings::max_blocking_threads`](crate::ExecutionSettings::max_blocking_threads)
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
/// [`OperatorError::Aborted`](crate::OperatorError::Aborted) while the thread finishes on its
/// own, or ends with the process. This is the one exception to "`run()` leaves no thread
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
        if self.done || self.node.abort_token().is_cancelled() {
            return;
        }
        let reason = self
            .node
            .stop_reason()
            .map_or_else(|| "no reason".to_string(), |r| r.to_string());
        let work = self.node.work();
        tracing::warn!(
            target: "kopf::handler",
            handler = work.as_ref().map(|w| &*w.handler),
            object = work.as_ref().map(|w| &*w.object),
            stop_reason = %reason,
            "abandoning a sync handler ({reason}): it cannot be interrupted, so its thread runs on until it returns",
        );
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// The operator's threads for blocking work (invariants in the module docs).
#[derive(Debug)]
pub(crate) struct Threads {
    limit: usize,
    jobs: Mutex<Option<mpsc::Sender<(Work, Job)>>>,
    receiver: Arc<Mutex<mpsc::Receiver<(Work, Job)>>>,
    state: Arc<watch::Sender<State>>,
}

#[derive(Debug, Default)]
struct State {
    /// Threads alive.
    threads: usize,
    /// Threads alive and not running a job.
    idle: usize,
    /// Jobs sent and not picked yet.
    queued: usize,
    /// Jobs running, by a key of their own.
    busy: BTreeMap<u64, Work>,
    next: u64,
}

impl Threads {
    pub(crate) fn new(limit: usize) -> Threads {
        let (jobs, receiver) = mpsc::channel();
        Threads {
            limit: limit.max(1),
            jobs: Mutex::new(Some(jobs)),
            receiver: Arc::new(Mutex::new(receiver)),
            state: Arc::new(watch::Sender::new(State::default())),
        }
    }

    /// Runs `job` on a thread of the pool (a new one if none is free and the limit allows).
    pub(crate) fn run<T, F>(&self, work: Work, job: F) -> oneshot::Receiver<std::thread::Result<T>>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (sender, receiver) = oneshot::channel();
        let job: Job = Box::new(move || {
            if sender.is_closed() {
                return; // Nobody waits for it any more.
            }
            let result = std::panic::catch_unwind(AssertUnwindSafe(job));
            let _ = sender.send(result);
        });
        let jobs = lock(&self.jobs);
        let Some(jobs) = jobs.as_ref() else {
            return receiver; // Closed: the job is dropped, the receiver sees it at once.
        };
        let mut start = false;
        self.state.send_modify(|s| {
            s.queued += 1;
            if s.queued > s.idle && s.threads < self.limit {
                s.threads += 1;
                s.idle += 1;
                start = true;
            }
        });
        let _ = jobs.send((work, job));
        if start {
            self.start_thread();
        }
        receiver
    }

    fn start_thread(&self) {
        let receiver = self.receiver.clone();
        let state = self.state.clone();
        let started = std::thread::Builder::new()
            .name("kopf-blocking".into())
            .spawn(move || serve(&receiver, &state));
        if let Err(error) = started {
            self.state.send_modify(|s| {
                s.threads -= 1;
                s.idle -= 1;
            });
            tracing::error!(target: "kopf::handler", %error, "cannot start a thread for sync handlers; the work waits for a free one");
        }
    }

    /// Stops taking jobs; idle threads exit, busy ones when their job is done.
    pub(crate) fn close(&self) {
        lock(&self.jobs).take();
    }

    /// Waits until no job is running or waiting for a thread.
    pub(crate) async fn idle(&self) {
        let mut state = self.state.subscribe();
        let _ = state.wait_for(|s| s.busy.is_empty() && s.queued == 0).await;
    }

    /// After [`close`](Self::close): waits until only threads with a job are left.
    pub(crate) async fn exited(&self) {
        let mut state = self.state.subscribe();
        let _ = state.wait_for(|s| s.threads == s.busy.len()).await;
    }

    /// Waits until no job doing this work is running.
    pub(crate) async fn finished(&self, work: &Work) {
        let mut state = self.state.subscribe();
        let _ = state
            .wait_for(|s| !s.busy.values().any(|busy| busy == work))
            .await;
    }

    /// The jobs running now.
    pub(crate) fn busy(&self) -> Vec<Work> {
        self.state.borrow().busy.values().cloned().collect()
    }
}

/// A thread's life: run jobs until the pool is closed.
fn serve(receiver: &Mutex<mpsc::Receiver<(Work, Job)>>, state: &watch::Sender<State>) {
    loop {
        let next = lock(receiver).recv();
        let Ok((work, job)) = next else { break };
        let mut key = 0;
        state.send_modify(|s| {
            s.queued = s.queued.saturating_sub(1);
            s.idle = s.idle.saturating_sub(1);
            key = s.next;
            s.next += 1;
            s.busy.insert(key, work);
        });
        job();
        state.send_modify(|s| {
            s.busy.remove(&key);
            s.idle += 1;
        });
    }
    state.send_modify(|s| {
        s.threads = s.threads.saturating_sub(1);
        s.idle = s.idle.saturating_sub(1);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn work(name: &str) -> Work {
        Work::new("fn", None, name)
    }

    #[tokio::test]
    async fn jobs_run_on_the_pools_own_threads_and_they_exit_when_closed() {
        let threads = Threads::new(2);
        let name = threads
            .run(work("a"), || {
                std::thread::current().name().map(String::from)
            })
            .await
            .expect("the job ran")
            .expect("no panic");
        assert_eq!(name.as_deref(), Some("kopf-blocking"));
        let panicked = threads.run(work("b"), || panic!("boom")).await;
        assert!(
            panicked.expect("the job ran").is_err(),
            "the panic comes back"
        );
        threads.idle().await;
        threads.close();
        tokio::time::timeout(Duration::from_secs(5), threads.exited())
            .await
            .expect("idle threads exit");
        assert_eq!(threads.state.borrow().threads, 0);
        let refused = threads.run(work("c"), || ()).await;
        assert!(refused.is_err(), "a closed pool runs nothing");
    }

    #[tokio::test]
    async fn the_limit_holds_and_a_busy_thread_is_named_and_left_running() {
        let threads = Threads::new(1);
        let (release, released) = std::sync::mpsc::channel::<()>();
        let stuck = threads.run(work("stuck"), move || released.recv().is_ok());
        let queued = threads.run(work("queued"), || "ran");
        tokio::time::timeout(Duration::from_secs(5), async {
            let mut state = threads.state.subscribe();
            let _ = state.wait_for(|s| !s.busy.is_empty()).await;
        })
        .await
        .expect("the first job starts");
        assert_eq!(threads.busy(), vec![work("stuck")]);
        assert_eq!(threads.state.borrow().threads, 1, "one thread at most");
        drop(queued); // Its caller gave up: it will never start.
        threads.close();
        tokio::time::timeout(Duration::from_secs(5), threads.exited())
            .await
            .expect("only the busy thread is left");
        assert_eq!(threads.busy(), vec![work("stuck")]);
        release.send(()).unwrap();
        assert!(
            stuck.await.unwrap().unwrap(),
            "the stuck job finishes on its own"
        );
        tokio::time::timeout(Duration::from_secs(5), async {
            let mut state = threads.state.subscribe();
            let _ = state.wait_for(|s| s.threads == 0).await;
        })
        .await
        .expect("then its thread exits too");
    }
}
