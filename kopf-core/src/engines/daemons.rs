//! What runs daemons and timers: one long-running task, or one periodic task, per (object,
//! handler), alive while the object exists and passes the handler's filters (Kopf's spawning
//! handlers). Their declarations are [`DaemonHandler`](crate::registry::DaemonHandler) and
//! [`TimerHandler`](crate::registry::TimerHandler).
//!
//! Invariants:
//! 1. At most one task per (object, handler): the object's [`Daemons`] holds it, and only the
//!    object's worker (one per object) starts or stops it.
//! 2. Each daemon or timer is a node of the cancellation tree. Stopping one cancels its node
//!    for a [`StopReason`] (its `stopped` argument), waits its `cancellation_backoff` for it to
//!    return on its own, then drops the running attempt. A sync one, whose thread cannot be
//!    dropped, is waited for up to `cancellation_timeout`, then abandoned with a warning.
//! 3. The operator's finalizer stays on a deleted object until none of its daemons and timers
//!    runs: the worker re-checks until they all ended.
//! 4. A timer's runs never overlap: one loop runs an attempt, then sleeps.
//! 5. A daemon that returned or failed for good while not asked to stop is not started again
//!    for that object; one stopped because the filters stopped matching starts again when
//!    they match again.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::actions::delivery::deliver;
use crate::actions::execution::{self, Outcome};
use crate::actions::invocation::{Invocation, Options};
use crate::actions::newest::Newest;
use crate::aiokits::tasks::{StopReason, Tasks};
use crate::aiokits::work::Work;
use crate::helpers::sync::lock;
use crate::intents::daemons::Background;
use crate::structs::bodies::Body;
use crate::structs::patch::Patch;

/// How long a stopped daemon may keep running before it is dropped, when it declares no
/// `cancellation_backoff`: enough to notice `stopped` and return, not to do slow work.
const INSTANT_EXIT: Duration = Duration::from_millis(100);

/// One running daemon or timer.
#[derive(Debug)]
pub(crate) struct Running {
    node: Tasks,
    ending: Arc<Ending>,
}

/// How a daemon's or timer's task ended, shared by the task and its object's worker. One
/// allocation per daemon, where a token and a flag took two (and the token its node's lock).
#[derive(Debug, Default)]
struct Ending {
    /// Set when its task has ended (or was dropped).
    ended: AtomicBool,
    /// Set when it ended on its own for good: it is not started again for this object.
    finished: AtomicBool,
    /// Who waits for the end.
    waiters: Notify,
}

impl Ending {
    fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    fn is_finished(&self) -> bool {
        self.finished.load(Ordering::SeqCst)
    }

    /// Waits until its task has ended.
    async fn wait(&self) {
        loop {
            // Registered before the flag is read: an end between the two wakes it.
            let mut notified = std::pin::pin!(self.waiters.notified());
            notified.as_mut().enable();
            if self.has_ended() {
                return;
            }
            notified.await;
        }
    }
}

/// The daemons and timers of one object.
#[derive(Debug, Default)]
pub(crate) struct Daemons {
    /// By handler: a short list (an object has a handful of daemons and timers at most), not a
    /// map; a map's first node took 896 bytes for every object with one daemon, and its key a
    /// copy of the handler's id.
    running: Vec<(Arc<Background>, Running)>,
    /// Those that ended on their own for good, not to be started again.
    finished: BTreeSet<String>,
    /// What they see of the object: its newest state. Nothing waits for it but the live views
    /// that daemons ask for, so it is kept under a lock, with one `Notify` for those (a
    /// `watch` channel's shared state took 352 bytes more for every object with daemons).
    live: Option<Arc<Newest>>,
}

impl Daemons {
    /// Shows a new state of the object to its daemons and timers (Kopf's live body, replaced
    /// at every event the operator processes), after asking those that it no longer matches
    /// to stop: an attempt reads the state before it checks whether it was asked to stop, so
    /// no timer is called with a state that its filters refuse. The `essence`, when given,
    /// resets the idle time of timers if it differs from the last one.
    pub(crate) fn observe(
        &mut self,
        body: &Arc<Body>,
        essence: Option<Value>,
        matching: &[&Arc<Background>],
    ) {
        self.stop_unmatched(matching);
        let live = self
            .live
            .get_or_insert_with(|| Arc::new(Newest::new(body.clone())));
        live.show(body);
        if let Some(essence) = essence {
            live.essence(essence);
        }
    }

    /// Asks the running daemons and timers that the object no longer matches to stop.
    fn stop_unmatched(&self, matching: &[&Arc<Background>]) {
        for (handler, running) in &self.running {
            if !matching.iter().any(|h| h.id() == handler.id()) {
                running.node.cancel(StopReason::FiltersMismatch);
            }
        }
    }

    /// Forgets the tasks that ended, remembering those that ended for good.
    fn sweep(&mut self) {
        let finished = &mut self.finished;
        self.running.retain(|(handler, running)| {
            if !running.ending.has_ended() {
                return true;
            }
            if running.ending.is_finished() {
                finished.insert(handler.id().to_string());
            }
            false
        });
    }

    /// Starts the matching daemons and timers that do not run yet (and did not finish for
    /// good); stops the running ones that no longer match. `true` when a matching one could
    /// not start because its previous run, asked to stop, has not ended yet: the object must
    /// be reconciled again a little later (as Kopf's spawning returns delays), or it would wait
    /// for its next event.
    pub(crate) fn reconcile(
        &mut self,
        matching: &[&Arc<Background>],
        body: &Arc<Body>,
        start: impl Fn(&Arc<Background>, Arc<Newest>, &Tasks) -> Running,
        tasks: &Tasks,
    ) -> bool {
        self.sweep();
        self.stop_unmatched(matching);
        let live = self
            .live
            .get_or_insert_with(|| Arc::new(Newest::new(body.clone())))
            .clone();
        let mut ending = false;
        for handler in matching {
            let id = handler.id();
            let previous = self.running.iter().find(|(known, _)| known.id() == id);
            if let Some((_, running)) = previous {
                ending |= running.node.stop_reason().is_some();
                continue;
            }
            if self.finished.contains(id) {
                continue;
            }
            let running = start(handler, live.clone(), tasks);
            self.running.push(((*handler).clone(), running));
        }
        ending
    }

    /// Asks every daemon and timer of the object to stop, for this reason.
    pub(crate) fn stop(&mut self, reason: StopReason) {
        for (_, running) in &self.running {
            running.node.cancel(reason);
        }
    }

    /// A future that resolves when every daemon and timer asked to stop has ended; `None` when
    /// none runs.
    pub(crate) fn ended(&mut self) -> Option<impl Future<Output = ()> + use<>> {
        self.sweep();
        if self.running.is_empty() {
            return None;
        }
        let waiting: Vec<Arc<Ending>> = self
            .running
            .iter()
            .map(|(_, running)| running.ending.clone())
            .collect();
        Some(async move {
            for ending in &waiting {
                ending.wait().await;
            }
        })
    }
}

/// What daemons and timers need of the processing of their object's resource: invocations
/// made as for its other handlers, and the writes of what they return. The per-object cycle
/// provides it; daemons do not know the cycle.
pub(crate) trait DaemonHost: Send + Sync + 'static {
    /// An invocation of a handler with these options on the object's newest body, running
    /// in `node`.
    fn invocation(&self, body: Arc<Body>, options: &Options, node: Tasks) -> Invocation;

    /// The delay before retrying after an arbitrary error, unless a handler says otherwise.
    fn default_backoff(&self) -> Duration;

    /// A timer's interval or idle time, or an initial delay, as the settings cap it.
    fn paced(&self, delay: Duration) -> Duration;

    /// Whether the operator may act on objects now (a Lease leader within its term): if not,
    /// the next call does not start, and the daemon or timer ends (it is stopped anyway, and
    /// started again when the operator resumes).
    fn may_act(&self) -> bool;

    /// Writes a daemon's results and patch to the object `uid`, as its worker writes its
    /// handlers'. On failure (logged), the patch is handed back with the delay before trying
    /// again; a write that will not be tried again (rejected for good) is done.
    fn write<'a>(
        &'a self,
        uid: &'a str,
        body: &'a Value,
        patch: Patch,
        node: &'a Tasks,
    ) -> Pin<Box<dyn Future<Output = Result<(), Retry>> + Send + 'a>>;
}

/// What a daemon's or timer's write could not write: the patch, kept to be written with its
/// next write, and the delay before trying again.
#[derive(Debug)]
pub(crate) struct Retry {
    /// The patch, to be merged into the next write.
    pub(crate) patch: Patch,
    /// The delay before trying again.
    pub(crate) delay: Duration,
}

/// Starts a daemon or timer for the object that `live` shows, as a child of `tasks`.
pub(crate) fn start(
    host: Arc<dyn DaemonHost>,
    handler: &Arc<Background>,
    live: Arc<Newest>,
    tasks: &Tasks,
) -> Running {
    let body = live.body();
    let namespace = body["metadata"]["namespace"].as_str();
    let name = body["metadata"]["name"].as_str().unwrap_or_default();
    let work = Work::new(handler.id(), namespace, name);
    let node = tasks.child().doing(work.clone());
    let ending = Arc::new(Ending::default());
    let runner = Runner {
        host,
        handler: handler.clone(),
        live,
        node: node.clone(),
        work,
        ending: ending.clone(),
        unwritten: Mutex::new(Patch::default()),
    };
    tasks.spawn(runner.run());
    Running { node, ending }
}

/// One daemon or timer of one object, running.
struct Runner {
    host: Arc<dyn DaemonHost>,
    /// Shared with the processor: not copied per object.
    handler: Arc<Background>,
    live: Arc<Newest>,
    node: Tasks,
    work: Work,
    /// Where it says that it finished for good, and, as it is dropped with its task (even
    /// unpolled, at the abort), that it ended.
    ending: Arc<Ending>,
    /// What the last attempts returned and could not write: written with the next attempt's.
    unwritten: Mutex<Patch>,
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.ending.ended.store(true, Ordering::Release);
        self.ending.waiters.notify_waiters();
    }
}

impl Runner {
    /// The daemon's or timer's task. A plain function returning its future, not an `async fn`:
    /// one kept its `self` twice, as its argument and as its variable.
    #[allow(clippy::manual_async_fn)]
    fn run(self) -> impl Future<Output = ()> + Send + 'static {
        async move { self.run_to_end().await }
    }

    async fn run_to_end(&self) {
        let kind = self.handler.kind();
        if let Some(delay) = self.handler.initial_delay()
            && !self.sleep(self.host.paced(delay)).await
        {
            return;
        }
        tracing::debug!(target: "kopf::daemons", handler = %self.work.handler(), object = %self.work.object(), "{kind} '{}' started.", self.work.handler());
        match &*self.handler {
            Background::Daemon(_) => self.run_daemon().await,
            Background::Timer(timer) => {
                let interval = self.host.paced(timer.interval);
                let idle = timer.idle.map(|idle| self.host.paced(idle));
                let sharp = timer.sharp;
                self.run_timer(interval, idle, sharp).await;
            }
        }
        if let Some(reason) = self.node.stop_reason() {
            tracing::debug!(target: "kopf::daemons", handler = %self.work.handler(), object = %self.work.object(), stop_reason = %reason, "{kind} '{}' has exited on request: {reason}.", self.work.handler());
        }
    }

    async fn run_daemon(&self) {
        let mut retry = 0;
        let started = time::OffsetDateTime::now_utc();
        loop {
            match self.attempt(retry, started).await {
                Outcome::Success(_) | Outcome::Failure(..) => {
                    // No next attempt to carry what could not be written: try until it is.
                    while self.has_unwritten()
                        && let Some(delay) = self.write(Patch::default()).await
                    {
                        if !self.sleep(delay).await {
                            break;
                        }
                    }
                    // Asked to stop, it has a reason; a daemon that cancelled its own
                    // `stopped` (its node's token) and returned has none, and is finished.
                    if self.node.stop_reason().is_none() {
                        self.ending.finished.store(true, Ordering::SeqCst);
                        tracing::info!(target: "kopf::daemons", handler = %self.work.handler(), object = %self.work.object(), "Daemon '{}' has exited on its own and will not be restarted.", self.work.handler());
                    }
                    return;
                }
                Outcome::Retry { delay, .. } => {
                    retry = retry.saturating_add(1);
                    if !self.sleep(delay).await {
                        return;
                    }
                }
                Outcome::Aborted => return,
            }
        }
    }

    async fn run_timer(&self, interval: Duration, idle: Option<Duration>, sharp: bool) {
        let origin = Instant::now();
        let mut retry = 0;
        let mut started = time::OffsetDateTime::now_utc();
        loop {
            if let Some(idle) = idle {
                loop {
                    let quiet = self.live.idle_for();
                    if quiet >= idle {
                        break;
                    }
                    if !self.sleep(idle - quiet).await {
                        return;
                    }
                }
            }
            let delay = match self.attempt(retry, started).await {
                Outcome::Retry { delay, .. } => {
                    retry = retry.saturating_add(1);
                    delay
                }
                Outcome::Success(_) | Outcome::Failure(..) => {
                    retry = 0;
                    started = time::OffsetDateTime::now_utc();
                    if sharp {
                        till_next_tick(origin.elapsed(), interval)
                    } else {
                        interval
                    }
                }
                Outcome::Aborted => return,
            };
            if !self.sleep(delay).await {
                return;
            }
        }
    }

    /// Sleeps unless stopped first; `false` when stopped.
    async fn sleep(&self, delay: Duration) -> bool {
        tokio::select! {
            _ = self.node.token().cancelled() => false,
            _ = tokio::time::sleep(delay) => true,
        }
    }

    /// One call of the function on the newest body; its results and patch are written to the
    /// object right away.
    async fn attempt(&self, retry: u32, started: time::OffsetDateTime) -> Outcome {
        // Read before the check: a state that the filters refuse is shown only after its
        // daemons and timers were asked to stop (see `Daemons::observe`), so an attempt that
        // reads one sees that it was asked to stop.
        let body = self.live.body();
        if self.node.token().is_cancelled() || !self.host.may_act() {
            return Outcome::Aborted;
        }
        let id = self.handler.id();
        let options = self.handler.options();
        // Made in a block of its own and pinned here and only here: the invocation, moved into
        // the attempt, is not kept a second time in this future while the attempt runs, nor the
        // attempt (passed by value, it took its size in this future and in `cancellable`'s).
        // Pinned in the outcome's block: the write after it takes the attempt's room in this
        // future (kept to the function's end, the attempt added the write's size to every
        // daemon's).
        let written;
        let outcome = {
            let attempt = std::pin::pin!(Some({
                // A daemon's attempt (one at a time) runs in the daemon's own node, its `stopped`
                // the daemon's: no node made and dropped per daemon. An attempt with a timeout
                // gets a node of its own, which its timeout stops without stopping the daemon or
                // timer.
                let node = match (&*self.handler, options.timeout) {
                    (Background::Daemon(_), None) => self.node.clone(),
                    _ => self.node.child(),
                };
                let mut invocation = self.host.invocation(body, options, node);
                invocation.live = Some(self.live.clone());
                invocation.retry = retry;
                invocation.started = started;
                invocation
                    .logger
                    .set_span(tracing::info_span!(target: "kopf::handler", "handler", handler.id = %id, object.name = invocation.name(), object.namespace = invocation.namespace()));
                written = invocation.gathered.clone();
                let kind = match *self.handler {
                    Background::Daemon(_) => execution::Kind::Daemon,
                    Background::Timer(_) => execution::Kind::Timer,
                };
                execution::execute_as(
                    kind,
                    id,
                    self.handler.function(),
                    options,
                    self.host.default_backoff(),
                    invocation,
                )
            }));
            self.cancellable(attempt).await
        };
        let mut patch = written.take_patch();
        if let Outcome::Success(Some(result)) = &outcome {
            deliver(&mut patch, id, result.clone());
        }
        self.write(patch).await;
        outcome
    }

    /// Whether earlier attempts left something unwritten.
    fn has_unwritten(&self) -> bool {
        !lock(&self.unwritten).is_empty()
    }

    /// Writes the patch, after what earlier attempts could not write (the newer values win);
    /// on failure, keeps it all for the next write and returns the delay before trying again.
    async fn write(&self, patch: Patch) -> Option<Duration> {
        let all = {
            let mut unwritten = lock(&self.unwritten);
            if unwritten.is_empty() {
                // Most writes (every daemon's at the exit): nothing before, nothing now.
                if patch.is_empty() {
                    return None;
                }
                patch
            } else {
                let mut all = std::mem::take(&mut *unwritten);
                all.merge(patch);
                all
            }
        };
        let body = self.live.body();
        // The object's uid, as its memory is keyed: read from its body, not kept per daemon.
        let uid = body["metadata"]["uid"].as_str().unwrap_or_default();
        match self.host.write(uid, &body, all, &self.node).await {
            Ok(()) => None,
            Err(Retry { patch, delay }) => {
                tracing::warn!(target: "kopf::daemons", handler = %self.work.handler(), object = %self.work.object(), ?delay, "{} '{}' could not write its results and patch; they are kept for its next write.", self.handler.kind(), self.work.handler());
                let mut unwritten = lock(&self.unwritten);
                let newer = std::mem::replace(&mut *unwritten, patch);
                unwritten.merge(newer);
                Some(delay)
            }
        }
    }

    /// Runs the attempt until it ends, or until it was asked to stop and its backoff passed;
    /// then drops it (sets it to `None`). A sync attempt goes on on its thread: it is waited
    /// for up to the cancellation timeout, then abandoned.
    async fn cancellable<F: Future<Output = Outcome>>(
        &self,
        mut attempt: Pin<&mut Option<F>>,
    ) -> Outcome {
        let (backoff, timeout) = self.handler.cancellation();
        // Borrowed, not cloned: a clone and its drop each lock the token's node.
        let token = self.node.token();
        let cancelled = async {
            token.cancelled().await;
            // Boxed: most daemons return before it starts, and it would take its size in
            // every daemon's future.
            Box::pin(tokio::time::sleep(backoff.unwrap_or(INSTANT_EXIT))).await;
        };
        tokio::select! {
            // The attempt first: one that ends as it is asked to stop (most do) starts no
            // backoff timer (each would wake the runtime's driver, a thousand at the exit).
            biased;
            outcome = async { attempt.as_mut().as_pin_mut().expect("not dropped yet").await } => {
                return outcome;
            }
            _ = cancelled => {}
        }
        attempt.set(None);
        let threads = self.node.threads();
        if threads.busy().contains(&self.work) {
            // Boxed: rare (a sync daemon's), and this future is kept by every daemon for as long
            // as it runs (unboxed, the wait took 216 bytes of each).
            let finished = Box::pin(threads.finished(&self.work));
            let in_time = match timeout {
                Some(timeout) => Box::pin(tokio::time::timeout(timeout, finished))
                    .await
                    .is_ok(),
                None => {
                    finished.await;
                    true
                }
            };
            if !in_time {
                tracing::warn!(target: "kopf::daemons", handler = %self.work.handler(), object = %self.work.object(), "{} '{}' did not exit in time after it was asked to stop; leaving it orphaned on its thread.", self.handler.kind(), self.work.handler());
            }
        }
        Outcome::Aborted
    }
}

/// How long from `elapsed` to the next multiple of `interval`.
fn till_next_tick(elapsed: Duration, interval: Duration) -> Duration {
    let interval_ns = interval.as_nanos().max(1);
    let into_tick = elapsed.as_nanos() % interval_ns;
    Duration::from_nanos(u64::try_from(interval_ns - into_tick).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intents::daemons::DaemonHandler;
    use crate::structs::resources::Selector;

    /// A host whose methods are never called: the futures below are made, not polled.
    struct Unused;

    impl DaemonHost for Unused {
        fn invocation(&self, _: Arc<Body>, _: &Options, _: Tasks) -> Invocation {
            unreachable!("not polled")
        }
        fn default_backoff(&self) -> Duration {
            unreachable!("not polled")
        }
        fn paced(&self, _: Duration) -> Duration {
            unreachable!("not polled")
        }
        fn may_act(&self) -> bool {
            unreachable!("not polled")
        }
        fn write<'a>(
            &'a self,
            _: &'a str,
            _: &'a Value,
            _: Patch,
            _: &'a Tasks,
        ) -> Pin<Box<dyn Future<Output = Result<(), Retry>> + Send + 'a>> {
            unreachable!("not polled")
        }
    }

    #[test]
    fn a_daemons_task_keeps_its_attempt_once() {
        // A thousand daemons keep a thousand of these for as long as they run. Passed by value
        // through the attempt's layers, the attempt was kept three times: 8.6 KiB each. Then
        // 3.3 KiB: the runner, the invocation and the attempt's future were each kept twice
        // (moved out of a variable that an `async` body still kept, or awaited by value), and
        // rarely used timers took their size in it. Then 1584 bytes: the attempt kept its room
        // while its results were written, and a sync daemon's rare wait kept 216 bytes unboxed.
        let daemon = DaemonHandler::new(
            Selector::new("kopf.dev", "v1", "kopfexamples"),
            "daemon_fn",
            |_| async { Ok(None) },
        );
        let runner = Runner {
            host: Arc::new(Unused),
            handler: Arc::new(Background::Daemon(daemon)),
            live: Arc::new(Newest::new(Arc::new(Body::from(Value::Null)))),
            node: Tasks::root(1),
            work: Work::new("daemon_fn", Some("ns"), "name"),
            ending: Arc::default(),
            unwritten: Mutex::default(),
        };
        let size = std::mem::size_of_val(&runner.run());
        assert!(size <= 1536, "a daemon's future takes {size} bytes");
    }

    #[test]
    fn sharp_timers_sleep_until_the_next_tick_of_their_grid() {
        let s = Duration::from_secs;
        assert_eq!(till_next_tick(s(0), s(10)), s(10));
        assert_eq!(till_next_tick(s(3), s(10)), s(7));
        assert_eq!(till_next_tick(s(13), s(10)), s(7));
        assert_eq!(till_next_tick(s(20), s(10)), s(10));
    }
}
