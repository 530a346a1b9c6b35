//! The cancellation tree: the one place where the operator starts work.
//!
//! Invariants:
//! 1. Every task is spawned through [`Tasks::spawn`], so it is tracked by the operator's one
//!    `TaskTracker`, and `run()` returns only when the tracker is empty.
//! 2. Every task gets a token from the tree: cancelling a node asks its whole subtree to stop.
//!    Tasks honour it at their own pace (watchers at once, handlers when they can). A node is
//!    cancelled for a [`StopReason`], recorded before its token fires, so whoever wakes up
//!    can tell why; a node not cancelled itself reports its nearest cancelled ancestor's.
//! 3. When the grace period ends, the abort fires: every task is dropped at its next
//!    `.await`, whatever it was doing.
//! 4. Blocking work (sync handlers) runs through [`Tasks::spawn_blocking`] on the operator's
//!    own [`Threads`], never on tokio's blocking pool. It cannot be aborted: at the abort it is
//!    abandoned, and its thread finishes on its own. This is the one exception to 1.
//! 5. Handler attempts register what they are ([`Work`]) while they run, so a stop can name
//!    what it waits for and what it aborts.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

use foldhash::HashMap;
use tokio::sync::futures::{Notified, OwnedNotified};
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::aiokits::threads::Threads;
use crate::aiokits::work::Work;
use crate::helpers::sync::lock;

/// Why a handler was asked to stop: its [`stopped`](crate::Invocation::stopped) token was
/// cancelled for this reason ([`Invocation::stop_reason`](crate::Invocation::stop_reason)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopReason {
    /// The operator is exiting: a signal, or the embedder's stop token.
    OperatorExiting,
    /// The handler's `timeout` has passed since its first attempt.
    Timeout,
    /// The object is being deleted. Daemons and timers stop for it (Kopf's `stopped` on
    /// deletion); change handlers are not interrupted by a deletion.
    ObjectDeleted,
    /// The resource is no longer served (e.g. its CRD was deleted): its watchers stop.
    ResourceGone,
    /// The object no longer passes a daemon's or timer's filters: that daemon or timer stops
    /// (and starts again if the object matches later).
    FiltersMismatch,
    /// The namespace is deleted: the watchers in it stop (with `--namespace` globs).
    NamespaceDeleted,
    /// The operator pauses in favour of a peer (Kopf's peering): watching stops, daemons and
    /// timers stop, and they start again when the operator resumes.
    OperatorPaused,
    /// The object's shard moved to another replica (assigned shards): its daemons and timers
    /// stop here and start there.
    ShardMoved,
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StopReason::OperatorExiting => "the operator is exiting",
            StopReason::Timeout => "the handler timed out",
            StopReason::ObjectDeleted => "the object is deleted",
            StopReason::ResourceGone => "the resource is no longer served",
            StopReason::FiltersMismatch => "the object no longer matches the filters",
            StopReason::NamespaceDeleted => "the namespace is deleted",
            StopReason::OperatorPaused => "the operator is paused in favour of a peer",
            StopReason::ShardMoved => "the object's shard moved to another replica",
        })
    }
}

/// A handler's `stopped` with its reason: what daemons and timers take as a `stopped:
/// kopf::Stopped` argument (Kopf's `DaemonStopped`), to tell why they were stopped.
///
/// ```
/// #[kopf::daemon("kopfexamples")]
/// async fn monitor(stopped: kopf::Stopped, logger: &kopf::Logger) {
///     stopped.cancelled().await;
///     if stopped.reason() == Some(kopf::StopReason::ObjectDeleted) {
///         logger.info("the object is gone: cleaning up");
///     }
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Stopped(Tasks);

impl Stopped {
    pub(crate) fn new(node: Tasks) -> Stopped {
        Stopped(node)
    }

    /// Waits until the handler is asked to stop.
    pub async fn cancelled(&self) {
        self.0.token().cancelled().await;
    }

    /// Whether the handler was asked to stop.
    pub fn is_cancelled(&self) -> bool {
        self.0.token().is_cancelled()
    }

    /// Why the handler was asked to stop; `None` while it is not.
    pub fn reason(&self) -> Option<StopReason> {
        self.0.stop_reason()
    }

    /// The token itself, e.g. to hand to a library that takes a `CancellationToken`.
    pub fn token(&self) -> &CancellationToken {
        self.0.token()
    }
}

/// A node of the operator's cancellation tree, with what the whole tree shares.
#[derive(Debug, Clone)]
pub(crate) struct Tasks {
    token: CancellationToken,
    reason: Arc<Reason>,
    /// What this node runs, when it is a handler's node.
    work: Option<Work>,
    shared: Arc<Shared>,
}

/// A node's stop reason, and its parent's.
#[derive(Debug, Default)]
struct Reason {
    own: OnceLock<StopReason>,
    parent: Option<Arc<Reason>>,
}

impl Reason {
    fn nearest(&self) -> Option<StopReason> {
        match self.own.get() {
            Some(reason) => Some(*reason),
            None => self.parent.as_ref()?.nearest(),
        }
    }
}

/// What every node of one tree shares. Kept once, not per node: a node is made and dropped
/// for every handler's attempt, and a token's clone and drop each lock it.
#[derive(Debug)]
struct Shared {
    abort: Arc<AbortSignal>,
    tracker: TaskTracker,
    threads: Threads,
    /// Keyed by a counter, in the order they started: a stop names the oldest first.
    in_flight: Mutex<HashMap<u64, Work>>,
    next: AtomicU64,
    /// The operator's metrics, when it serves them.
    metrics: OnceLock<crate::aiokits::metrics::Metrics>,
    /// Where handlers' outcomes are kept, when the operator was asked for them.
    outcomes: OnceLock<crate::structs::outcomes::Outcomes>,
}

/// The tree's abort: a flag, read at every poll of every task, and who to wake when it is set.
///
/// Not a cancellation token: every clone of a token and every drop of one lock the token's
/// node, and every poll of its future locks it again; a task of the tree kept a clone for its
/// life, so each task's start and end took that lock, shared by every task of the operator (a
/// thousand daemons ending together took turns at it). A task's wait for the abort here takes
/// the waiters' lock when it first registers, and when it unregisters at its end.
#[derive(Debug, Default)]
pub(crate) struct AbortSignal {
    /// Set before the waiters are woken: every poll that the wake-up causes sees it.
    fired: AtomicBool,
    /// Shared on its own: a task's wait owns a count on it.
    waiters: Arc<Notify>,
}

impl AbortSignal {
    fn fire(&self) {
        self.fired.store(true, Ordering::Release);
        self.waiters.notify_waiters();
    }

    fn has_fired(&self) -> bool {
        self.fired.load(Ordering::Acquire)
    }
}

/// The size above which a task's future is boxed as it is spawned.
const BOXED_ABOVE: usize = 256;

pin_project_lite::pin_project! {
    /// The tree's abort as a future: ready once the abort fired ([`Tasks::aborted`]).
    ///
    /// It reads the flag at every poll, and polls its wait (registering the waker, under the
    /// waiters' lock shared by every task of the operator) only when polled with a waker it has
    /// not registered: a tokio task's is always the same. The wait is made with the future,
    /// before the flag is first read: an abort between the two ends the wait at its first poll
    /// (`Notify::notify_waiters` reaches the waits made before it, polled or not).
    pub(crate) struct Abort<W, S> {
        #[pin]
        wait: W,
        signal: S,
        registered: Option<Waker>,
    }
}

impl<W, S> Future for Abort<W, S>
where
    W: Future<Output = ()>,
    S: std::ops::Deref<Target = AbortSignal>,
{
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        if this.signal.has_fired() {
            return Poll::Ready(());
        }
        if this
            .registered
            .as_ref()
            .is_none_or(|waker| !waker.will_wake(cx.waker()))
        {
            if this.wait.poll(cx).is_ready() {
                return Poll::Ready(());
            }
            *this.registered = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

pin_project_lite::pin_project! {
    /// A task of the tree: its future, dropped unpolled once the abort has fired.
    ///
    /// A struct rather than an `async` block around `select!`: such a block keeps the future
    /// twice (as its captured variable and inside the `select!`), and a task lives as long as
    /// its future is big (an object's worker rests in one).
    struct Abortable<F> {
        #[pin]
        abort: Abort<OwnedNotified, Arc<AbortSignal>>,
        #[pin]
        future: F,
    }
}

impl<F: Future<Output = ()>> Future for Abortable<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        // The abort first: once it fired, the future is not polled again.
        if this.abort.poll(cx).is_ready() {
            return Poll::Ready(());
        }
        this.future.poll(cx)
    }
}

impl Tasks {
    /// The root of a new tree, with a pool of at most `max_threads` threads for blocking work.
    pub(crate) fn root(max_threads: usize) -> Tasks {
        Tasks {
            token: CancellationToken::new(),
            reason: Arc::default(),
            work: None,
            shared: Arc::new(Shared {
                abort: Arc::default(),
                tracker: TaskTracker::new(),
                threads: Threads::new(max_threads),
                in_flight: Mutex::default(),
                next: AtomicU64::new(0),
                metrics: OnceLock::new(),
                outcomes: OnceLock::new(),
            }),
        }
    }

    /// A child node: cancelled with this one, or on its own.
    pub(crate) fn child(&self) -> Tasks {
        Tasks {
            token: self.token.child_token(),
            reason: Arc::new(Reason {
                own: OnceLock::new(),
                parent: Some(self.reason.clone()),
            }),
            work: self.work.clone(),
            shared: self.shared.clone(),
        }
    }

    /// This node, described as running `work` (named by blocking jobs and stop logs).
    pub(crate) fn doing(mut self, work: Work) -> Tasks {
        self.work = Some(work);
        self
    }

    /// What this node runs, if it is a handler's node.
    pub(crate) fn work(&self) -> Option<&Work> {
        self.work.as_ref()
    }

    /// This node's token: cancelled when this part of the operator should stop.
    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Whether the grace period is over and everything is dropped.
    pub(crate) fn is_aborted(&self) -> bool {
        self.shared.abort.has_fired()
    }

    /// Ready once the grace period is over and everything is dropped ([`Abort`]).
    pub(crate) fn aborted(&self) -> Abort<Notified<'_>, &AbortSignal> {
        let signal = &*self.shared.abort;
        Abort {
            wait: signal.waiters.notified(),
            signal,
            registered: None,
        }
    }

    /// As [`Tasks::aborted`], owning what it waits on: for a task's [`Abortable`].
    fn aborted_owned(&self) -> Abort<OwnedNotified, Arc<AbortSignal>> {
        let signal = self.shared.abort.clone();
        Abort {
            wait: signal.waiters.clone().notified_owned(),
            signal,
            registered: None,
        }
    }

    /// Why this node was cancelled (its own reason, or its nearest ancestor's); `None` while
    /// it is not cancelled.
    pub(crate) fn stop_reason(&self) -> Option<StopReason> {
        if self.token.is_cancelled() {
            self.reason.nearest()
        } else {
            None
        }
    }

    /// Starts a task in this node. It ends by itself, when its token asks, or at the abort.
    pub(crate) fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let abort = self.aborted_owned();
        // tokio moves a task's stage by value as the task ends (its future, then its output,
        // as large as the future): a large future costs a copy of its size there, a boxed one
        // a pointer. A thousand daemons ending together spent 4 % of their exit so.
        if std::mem::size_of::<F>() > BOXED_ABOVE {
            self.shared.tracker.spawn(Abortable {
                abort,
                future: Box::pin(future),
            });
        } else {
            self.shared.tracker.spawn(Abortable { abort, future });
        }
    }

    /// Runs blocking work on one of the operator's threads; its result (or its panic) comes
    /// back through the receiver. It is named in logs by this node's work.
    ///
    /// # Cancellation safety
    ///
    /// Dropping the receiver does not stop the work: it runs to its end and its result is
    /// discarded. Work not started yet when its receiver is dropped never starts.
    pub(crate) fn spawn_blocking<T, F>(&self, job: F) -> oneshot::Receiver<std::thread::Result<T>>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let work = self
            .work
            .clone()
            .unwrap_or_else(|| Work::new("(unnamed)", None, "(no object)"));
        self.shared.threads.run(work, job)
    }

    /// Registers this node's work as in flight until the guard is dropped.
    pub(crate) fn in_flight(&self) -> InFlight {
        let key = self.shared.next.fetch_add(1, Ordering::Relaxed);
        if let Some(work) = &self.work {
            lock(&self.shared.in_flight).insert(key, work.clone());
        }
        InFlight {
            shared: self.shared.clone(),
            key,
        }
    }

    /// The handlers running now, oldest first.
    pub(crate) fn running(&self) -> Vec<Work> {
        self.running_first(usize::MAX).0
    }

    /// The first `shown` handlers running now, oldest first, and how many run in all: for a
    /// log line, without a copy of every one.
    pub(crate) fn running_first(&self, shown: usize) -> (Vec<Work>, usize) {
        let in_flight = lock(&self.shared.in_flight);
        let mut oldest: Vec<(u64, &Work)> =
            in_flight.iter().map(|(key, work)| (*key, work)).collect();
        // The oldest picked first, and only they sorted: a stop names five of a thousand
        // daemons before it asks them to stop.
        if shown < oldest.len() {
            oldest.select_nth_unstable_by_key(shown, |(key, _)| *key);
            oldest.truncate(shown);
        }
        oldest.sort_unstable_by_key(|(key, _)| *key);
        let first = oldest.into_iter().map(|(_, work)| work.clone()).collect();
        (first, in_flight.len())
    }

    /// The operator's threads for blocking work.
    pub(crate) fn threads(&self) -> &Threads {
        &self.shared.threads
    }

    /// Asks this node's tasks to stop, for this reason (unless it was cancelled before, by
    /// itself or by an ancestor: the first reason stays).
    pub(crate) fn cancel(&self, reason: StopReason) {
        if !self.token.is_cancelled() {
            let _ = self.reason.own.set(reason);
        }
        self.token.cancel();
    }

    /// [`cancel`](Tasks::cancel), done by a task of the tree, and waited for.
    ///
    /// The tasks that a cancellation wakes are queued on the thread that cancels. On one of
    /// the runtime's workers, that is its own queue, which the other workers steal from; on
    /// any other thread (the one that `block_on`s the operator's future, in `#[tokio::main]`)
    /// every task woken takes the runtime's shared queue and its lock, one by one: a thousand
    /// daemons stopping took a tenth of the exit so, with the workers waiting for them.
    ///
    /// # Cancellation safety
    ///
    /// Dropping the future does not take the stop back: the task asks for it all the same (if
    /// it runs; see below). The stop is asked for in place when the task never runs: the
    /// runtime is shutting down, or the tree was aborted.
    pub(crate) async fn cancel_on_runtime(&self, reason: StopReason) {
        let (done, cancelled) = oneshot::channel();
        let node = self.clone();
        self.spawn(async move {
            node.cancel(reason);
            let _ = done.send(());
        });
        if cancelled.await.is_err() {
            // Not run: the runtime is shutting down, or the tree was aborted. Cancelled here.
            self.cancel(reason);
        }
    }

    /// Drops every task of the tree at its next `.await`.
    pub(crate) fn abort(&self) {
        self.cancel(StopReason::OperatorExiting);
        self.fire_abort();
    }

    /// Fires the abort alone: every task of the tree ends at its next poll.
    fn fire_abort(&self) {
        self.shared.abort.fire();
    }

    /// Waits until every task of the tree has ended. Call after the tree stops growing.
    pub(crate) async fn wait(&self) {
        self.shared.tracker.close();
        self.shared.tracker.wait().await;
    }

    /// How many tasks are alive.
    pub(crate) fn len(&self) -> usize {
        self.shared.tracker.len()
    }

    /// Counts the tree's work in these metrics (set once, at the start).
    pub(crate) fn measure(&self, metrics: crate::aiokits::metrics::Metrics) {
        let _ = self.shared.metrics.set(metrics);
    }

    /// The operator's metrics, when it serves them.
    pub(crate) fn metrics(&self) -> Option<&crate::aiokits::metrics::Metrics> {
        self.shared.metrics.get()
    }

    /// Keeps handlers' outcomes here, for every node of the tree.
    pub(crate) fn record_outcomes(&self, outcomes: crate::structs::outcomes::Outcomes) {
        let _ = self.shared.outcomes.set(outcomes);
    }

    /// Where handlers' outcomes are kept, if anywhere.
    pub(crate) fn outcomes(&self) -> Option<&crate::structs::outcomes::Outcomes> {
        self.shared.outcomes.get()
    }
}

/// Work registered as in flight by [`Tasks::in_flight`], until dropped.
#[derive(Debug)]
pub(crate) struct InFlight {
    shared: Arc<Shared>,
    key: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        lock(&self.shared.in_flight).remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn cancelling_a_node_reaches_its_subtree_and_abort_ends_the_stubborn() {
        let root = Tasks::root(1);
        let child = root.child();
        let polite = child.token().clone();
        child.spawn(async move { polite.cancelled().await });
        child.spawn(std::future::pending());
        assert_eq!(root.len(), 2);
        root.cancel(StopReason::OperatorExiting);
        tokio::time::timeout(Duration::from_millis(50), root.wait())
            .await
            .expect_err("the stubborn task waits");
        assert_eq!(root.len(), 1, "the polite task ended on cancellation");
        root.abort();
        tokio::time::timeout(Duration::from_secs(5), root.wait())
            .await
            .expect("abort ends everything");
    }

    #[test]
    fn a_node_reports_its_own_stop_reason_or_its_nearest_ancestors() {
        let root = Tasks::root(1);
        let (timed_out, other) = (root.child().child(), root.child().child());
        assert_eq!(timed_out.stop_reason(), None, "not cancelled yet");
        timed_out.cancel(StopReason::Timeout);
        root.cancel(StopReason::OperatorExiting);
        assert_eq!(timed_out.stop_reason(), Some(StopReason::Timeout));
        assert_eq!(other.stop_reason(), Some(StopReason::OperatorExiting));
        timed_out.cancel(StopReason::ResourceGone);
        other.cancel(StopReason::ResourceGone);
        assert_eq!(
            (timed_out.stop_reason(), other.stop_reason()),
            (Some(StopReason::Timeout), Some(StopReason::OperatorExiting)),
            "the first reason stays, an ancestor's included"
        );
    }

    #[test]
    fn in_flight_work_is_listed_until_its_guard_drops() {
        let root = Tasks::root(1);
        let node = root
            .child()
            .doing(Work::new("create_fn", Some("default"), "x"));
        let guard = node.in_flight();
        let names: Vec<String> = root.running().iter().map(Work::to_string).collect();
        assert_eq!(names, ["handler create_fn on default/x"]);
        drop(guard);
        assert!(root.running().is_empty());
    }

    #[test]
    fn a_stop_names_the_oldest_work_in_flight_first() {
        let root = Tasks::root(1);
        let guards: Vec<InFlight> = (0..40)
            .map(|i| {
                let work = Work::new("fn", None, &format!("object-{i}"));
                root.child().doing(work).in_flight()
            })
            .collect();
        let (first, total) = root.running_first(3);
        let names: Vec<&str> = first.iter().map(|w| w.object()).collect();
        assert_eq!(
            (names, total),
            (vec!["object-0", "object-1", "object-2"], 40)
        );
        drop(guards);
    }

    /// Records the name of the thread that wakes it.
    struct WokenOn(Mutex<Option<String>>);

    impl std::task::Wake for WokenOn {
        fn wake(self: Arc<Self>) {
            *lock(&self.0) = std::thread::current().name().map(str::to_string);
        }
    }

    /// A stop asked from the thread that `block_on`s the operator wakes the tasks from one of
    /// the runtime's workers, not from that thread.
    #[test]
    fn a_stop_asked_from_outside_the_runtime_wakes_the_tasks_from_a_worker() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("the-runtime")
            .build()
            .expect("a runtime");
        let root = Tasks::root(1);
        let node = root.child();
        let woken = Arc::new(WokenOn(Mutex::new(None)));
        let waker = std::task::Waker::from(woken.clone());
        let mut cancelled = std::pin::pin!(node.token().cancelled());
        let polled = cancelled.as_mut().poll(&mut Context::from_waker(&waker));
        assert!(polled.is_pending());
        runtime.block_on(root.cancel_on_runtime(StopReason::OperatorExiting));
        assert_eq!(lock(&woken.0).as_deref(), Some("the-runtime"));
        assert_eq!(node.stop_reason(), Some(StopReason::OperatorExiting));
    }

    /// Counts its wake-ups.
    #[derive(Default)]
    struct Wakes(AtomicU64);

    impl std::task::Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A task registers for the abort once, and again only when it is polled with another
    /// waker: the abort wakes the newest, and the task ends without polling its future again.
    #[test]
    fn the_abort_wakes_a_task_through_its_newest_waker() {
        let root = Tasks::root(1);
        let polls = Arc::new(AtomicU64::new(0));
        let counted = polls.clone();
        let mut task = Box::pin(Abortable {
            abort: root.aborted_owned(),
            future: std::future::poll_fn(move |_| {
                counted.fetch_add(1, Ordering::SeqCst);
                Poll::<()>::Pending
            }),
        });
        let (first, second) = (Arc::new(Wakes::default()), Arc::new(Wakes::default()));
        let waker = Waker::from(first.clone());
        assert!(
            task.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        assert!(
            task.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        let waker = Waker::from(second.clone());
        assert!(
            task.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        assert_eq!(polls.load(Ordering::SeqCst), 3);
        root.abort();
        assert_eq!(
            first.0.load(Ordering::SeqCst),
            0,
            "the old waker is not woken"
        );
        assert_eq!(
            second.0.load(Ordering::SeqCst),
            1,
            "the newest waker is woken"
        );
        assert!(
            task.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_ready()
        );
        assert_eq!(
            polls.load(Ordering::SeqCst),
            3,
            "not polled after the abort"
        );
    }

    /// A future outside the tree's tasks (an activity in the operator's own future) waits
    /// for the abort: pending until it fires, then ready.
    #[tokio::test]
    async fn the_abort_ends_a_wait_for_it_outside_the_trees_tasks() {
        let root = Tasks::root(1);
        let mut aborted = std::pin::pin!(root.aborted());
        assert!(futures::poll!(aborted.as_mut()).is_pending());
        assert!(futures::poll!(aborted.as_mut()).is_pending());
        let waited = async {
            aborted.await;
        };
        let aborting = async {
            tokio::task::yield_now().await;
            root.abort();
        };
        tokio::time::timeout(std::time::Duration::from_secs(30), async {
            tokio::join!(waited, aborting)
        })
        .await
        .expect("woken by the abort");
    }

    /// After the abort, no task of the tree runs: the stop is asked for in place then. (The
    /// abort is fired alone here, to see the stop come from the fallback: `abort` asks
    /// the root to stop first.)
    #[tokio::test]
    async fn a_stop_asked_after_the_abort_is_asked_in_place() {
        let root = Tasks::root(1);
        root.fire_abort();
        let child = root.child();
        tokio::time::timeout(
            std::time::Duration::from_secs(30),
            child.cancel_on_runtime(StopReason::Timeout),
        )
        .await
        .expect("not waiting for a task that never runs");
        assert_eq!(child.stop_reason(), Some(StopReason::Timeout));
        assert!(!root.token().is_cancelled());
    }
}
