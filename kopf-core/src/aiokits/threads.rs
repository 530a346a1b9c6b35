//! The operator's own threads for blocking work (sync handlers).
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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use tokio::sync::{oneshot, watch};

use crate::aiokits::work::Work;
use crate::helpers::sync::lock;

type Job = Box<dyn FnOnce() + Send>;

/// The operator's threads for blocking work (invariants in the module docs).
#[derive(Debug)]
pub(crate) struct Threads {
    /// At most this many threads start; changed by [`Threads::set_limit`].
    limit: AtomicUsize,
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
            limit: AtomicUsize::new(limit.max(1)),
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
        let limit = self.limit.load(Ordering::Relaxed);
        self.state.send_modify(|s| {
            s.queued += 1;
            if s.queued > s.idle && s.threads < limit {
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

    /// Changes the limit (Kopf's `max_workers` set at run time): more threads start at once
    /// for the jobs waiting; with a lower limit, the threads alive go on (as Kopf's executor's
    /// do), but no new ones start until fewer than the limit are alive.
    pub(crate) fn set_limit(&self, limit: usize) {
        let limit = limit.max(1);
        self.limit.store(limit, Ordering::Relaxed);
        let mut more = 0;
        self.state.send_modify(|s| {
            let wanted = s.queued.saturating_sub(s.idle);
            more = wanted.min(limit.saturating_sub(s.threads));
            s.threads += more;
            s.idle += more;
        });
        for _ in 0..more {
            self.start_thread();
        }
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

    /// Kopf's `max_workers` set by a startup handler: a raised limit starts a thread for the
    /// job that waited for one at once; a lowered one stops no thread that is alive.
    #[tokio::test]
    async fn a_raised_limit_starts_threads_for_the_jobs_that_wait() {
        let threads = Threads::new(1);
        let (release, released) = std::sync::mpsc::channel::<()>();
        let stuck = threads.run(work("stuck"), move || released.recv().is_ok());
        let waiting = threads.run(work("waiting"), || "ran");
        tokio::time::timeout(Duration::from_secs(5), async {
            let mut state = threads.state.subscribe();
            let _ = state.wait_for(|s| !s.busy.is_empty()).await;
        })
        .await
        .expect("the first job starts");
        threads.set_limit(2);
        let ran = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the waiting job got a thread of its own");
        assert_eq!(ran.expect("sent").expect("no panic"), "ran");
        threads.set_limit(1);
        assert_eq!(threads.state.borrow().threads, 2, "no thread is stopped");
        release.send(()).unwrap();
        assert!(stuck.await.expect("sent").expect("no panic"));
        threads.close();
        tokio::time::timeout(Duration::from_secs(5), threads.exited())
            .await
            .expect("the threads exit");
    }
}
