//! What runs the operator's activities: the startup handlers before anything is watched, the
//! cleanup handlers at the stop, the probe handlers for the liveness endpoint. See
//! [`ActivityHandler`](crate::registry::ActivityHandler) for what each activity does.
//!
//! Invariant: every attempt runs in its own node of the operator's cancellation tree: its
//! `stopped` token fires when the operator stops or the attempt's timeout passes, and the
//! abort drops it. Startup and probes run in the operator's tree; cleanup runs in a tree of
//! its own, since the operator's is already stopped when cleanup starts.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::actions::activity::{Activity, ActivityInvocation};
use crate::actions::execution::{Attempt, Outcome, Retrying};
use crate::aiokits::tasks::{StopReason, Tasks};
use crate::aiokits::work::Work;
use crate::clients::posting::{Logger, Poster};
use crate::configs::settings::Settings;
use crate::intents::activities::ActivityHandler;
use crate::intents::registry::{Registry, deduplicated};
use crate::structs::indexes::Indexes;
use crate::structs::memos::Memo;
use crate::structs::resources::Resource;

/// What every activity of one run shares: the registry's activity handlers, the client, the
/// settings (changed by startup handlers) and the operator's memo.
#[derive(Clone)]
pub(crate) struct Activities {
    registry: Arc<Registry>,
    client: kube::Client,
    settings: Arc<Mutex<Settings>>,
    memo: Memo,
    /// The operator's indexes, which activity handlers read as they are.
    indexes: Indexes,
}

/// Which of an activity's handlers run: the leader-only ones, the others, or all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    All,
    Others,
    LeaderOnly,
}

impl Which {
    fn takes(self, handler: &ActivityHandler) -> bool {
        match self {
            Which::All => true,
            Which::Others => !handler.options.leader_only,
            Which::LeaderOnly => handler.options.leader_only,
        }
    }
}

/// An activity handler that failed for good.
#[derive(Debug)]
pub(crate) struct Failed {
    pub(crate) handler: String,
    pub(crate) message: String,
}

/// A startup or cleanup handler that failed for good: the operator stops with it.
#[derive(Debug, thiserror::Error)]
#[error("the {activity} handler {handler} failed: {message}")]
pub(crate) struct ActivityError {
    pub(crate) activity: Activity,
    pub(crate) handler: String,
    pub(crate) message: String,
}

impl Activities {
    /// The activities of the registry; `settings` is shared with the login handlers, which
    /// read what startup handlers leave.
    pub(crate) fn new(
        registry: Arc<Registry>,
        client: kube::Client,
        settings: Arc<Mutex<Settings>>,
        memo: Memo,
        indexes: Indexes,
    ) -> Activities {
        Activities {
            registry,
            client,
            settings,
            memo,
            indexes,
        }
    }

    fn handlers(&self, activity: Activity) -> impl Iterator<Item = &ActivityHandler> {
        self.chosen(activity, Which::All)
    }

    /// The activity's handlers, each function once (a function stacked twice as one activity
    /// runs once, as in Kopf).
    fn chosen(&self, activity: Activity, which: Which) -> impl Iterator<Item = &ActivityHandler> {
        let chosen: Vec<&ActivityHandler> = self
            .registry
            .activities
            .iter()
            .filter(move |h| h.activity == activity && which.takes(h))
            .collect();
        deduplicated(chosen, |handler| *handler).into_iter()
    }

    /// Runs the startup handlers in a task of the tree, and puts what they left in `settings`.
    /// Returns `Ok(false)` if `stop` fired first (the operator then stops as usual), and the
    /// error of a handler that failed for good.
    ///
    /// # Cancellation safety
    ///
    /// Dropping the future leaves the startup task to the tree's stop.
    pub(crate) async fn start_up(
        &self,
        settings: &mut Settings,
        tasks: &Tasks,
        stop: &CancellationToken,
    ) -> std::result::Result<bool, ActivityError> {
        if self
            .chosen(Activity::Startup, Which::Others)
            .next()
            .is_none()
        {
            return Ok(true);
        }
        *crate::helpers::sync::lock(&self.settings) = settings.clone();
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let node = tasks.child();
        let this = self.clone();
        tasks.spawn(async move {
            let _ = sender.send(this.run(Activity::Startup, &node, Which::Others).await);
        });
        let result = tokio::select! {
            result = receiver => result,
            _ = stop.cancelled() => {
                tracing::warn!(target: "kopf::activity", "the operator is stopping during its startup: the startup handlers are interrupted, and cleanup handlers do not run");
                return Ok(false);
            }
        };
        match result {
            Ok(Ok(_)) => {
                *settings = crate::helpers::sync::lock(&self.settings).clone();
                Ok(true)
            }
            Ok(Err(failed)) => Err(ActivityError {
                activity: Activity::Startup,
                handler: failed.handler,
                message: failed.message,
            }),
            // The task was aborted: only a stop does that.
            Err(_) => Ok(false),
        }
    }

    /// Runs the leader-only startup handlers (as this operator starts leading) in a task of
    /// the tree; the error of one that failed for good. Returns when they end or the tree
    /// stops (then with no error: the operator is stopping).
    ///
    /// # Cancellation safety
    ///
    /// Dropping the future leaves the task to the tree's stop.
    pub(crate) async fn start_leading(
        &self,
        tasks: &Tasks,
    ) -> std::result::Result<(), ActivityError> {
        if self
            .chosen(Activity::Startup, Which::LeaderOnly)
            .next()
            .is_none()
        {
            return Ok(());
        }
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let node = tasks.child();
        let this = self.clone();
        tasks.spawn(async move {
            let _ = sender.send(this.run(Activity::Startup, &node, Which::LeaderOnly).await);
        });
        match receiver.await {
            Ok(Err(failed)) if !tasks.token().is_cancelled() => Err(ActivityError {
                activity: Activity::Startup,
                handler: failed.handler,
                message: failed.message,
            }),
            _ => Ok(()),
        }
    }

    /// Runs the cleanup handlers once, in a tree of their own, within `settings`'
    /// `cleanup_timeout`; the leader-only ones only if `leading`. `abort` (a second signal)
    /// drops them at once. A handler that fails, or the timeout, is an [`ActivityError`].
    pub(crate) async fn clean_up(
        &self,
        settings: &Settings,
        abort: &CancellationToken,
        leading: bool,
    ) -> std::result::Result<(), ActivityError> {
        let which = if leading { Which::All } else { Which::Others };
        if self.chosen(Activity::Cleanup, which).next().is_none() {
            return Ok(());
        }
        if abort.is_cancelled() {
            tracing::warn!(target: "kopf::activity", "the cleanup handlers do not run: the operator was stopped at once");
            return Ok(());
        }
        *crate::helpers::sync::lock(&self.settings) = settings.clone();
        let timeout = settings.process.cleanup_timeout;
        let tree = Tasks::root(settings.execution.workers());
        let node = tree.child();
        let run = self.run(Activity::Cleanup, &node, which);
        let result = bounded(run, &tree, timeout, abort).await;
        if let Err(error) = &result {
            tracing::error!(target: "kopf::activity", "{error}");
        }
        tree.abort();
        tree.wait().await;
        let threads = tree.threads();
        threads.close();
        threads.exited().await;
        for work in threads.busy() {
            tracing::warn!(target: "kopf::activity", handler = %work.handler(), "abandoning the sync cleanup handler {}: its thread cannot be interrupted", work.handler());
        }
        result
    }

    /// Runs the probe handlers once each, at the same time; their results by id, or the
    /// first that failed.
    pub(crate) async fn probe(
        &self,
        node: &Tasks,
    ) -> std::result::Result<Map<String, Value>, Failed> {
        let default_backoff = crate::helpers::sync::lock(&self.settings)
            .execution
            .default_backoff;
        let attempts = self.handlers(Activity::Probe).map(|handler| async move {
            let invocation = self.invocation(handler, node, 0, time::OffsetDateTime::now_utc());
            let outcome = attempt(handler, invocation, default_backoff).await;
            (handler, outcome)
        });
        let mut results = Map::new();
        for (handler, outcome) in futures::future::join_all(attempts).await {
            match outcome {
                Outcome::Success(value) => {
                    results.insert(handler.id.clone(), value.unwrap_or(Value::Null));
                }
                Outcome::Retry { message, .. } | Outcome::Failure(message, _) => {
                    return Err(Failed {
                        handler: handler.id.clone(),
                        message,
                    });
                }
                Outcome::Aborted => {
                    return Err(Failed {
                        handler: handler.id.clone(),
                        message: "the operator is stopping".into(),
                    });
                }
            }
        }
        Ok(results)
    }

    /// Runs the activity's handlers one after another, each retried until it succeeds or
    /// fails for good; their results by id.
    async fn run(
        &self,
        activity: Activity,
        node: &Tasks,
        which: Which,
    ) -> std::result::Result<Map<String, Value>, Failed> {
        let mut results = Map::new();
        for handler in self.chosen(activity, which) {
            let started = time::OffsetDateTime::now_utc();
            let mut retry = 0;
            loop {
                let default_backoff = crate::helpers::sync::lock(&self.settings)
                    .execution
                    .default_backoff;
                let invocation = self.invocation(handler, node, retry, started);
                match attempt(handler, invocation, default_backoff).await {
                    Outcome::Success(value) => {
                        results.insert(handler.id.clone(), value.unwrap_or(Value::Null));
                        break;
                    }
                    Outcome::Failure(message, _) => {
                        return Err(Failed {
                            handler: handler.id.clone(),
                            message,
                        });
                    }
                    Outcome::Retry { delay, .. } => {
                        tokio::select! {
                            _ = tokio::time::sleep(delay) => {}
                            _ = node.token().cancelled() => return Err(interrupted(handler, node)),
                        }
                        retry += 1;
                    }
                    Outcome::Aborted => return Err(interrupted(handler, node)),
                }
            }
        }
        Ok(results)
    }

    fn invocation(
        &self,
        handler: &ActivityHandler,
        node: &Tasks,
        retry: u32,
        started: time::OffsetDateTime,
    ) -> ActivityInvocation {
        let span = tracing::info_span!(target: "kopf::activity", "activity", handler.id = %handler.id, activity = %handler.activity);
        // Activities concern no object: nothing they log is posted as a Kubernetes Event.
        let events = Poster::disabled().events(&Value::Null, &Resource::default());
        let settings = match handler.activity {
            Activity::Startup => self.settings.clone(),
            _ => Arc::new(Mutex::new(
                crate::helpers::sync::lock(&self.settings).clone(),
            )),
        };
        let object = format!("the operator's {}", handler.activity);
        ActivityInvocation {
            activity: handler.activity,
            settings,
            memo: self.memo.clone(),
            logger: Logger::new(span, events),
            retry,
            started,
            param: handler.options.param.clone(),
            client: self.client.clone(),
            indexes: self.indexes.clone(),
            node: node.child().doing(Work::new(&handler.id, None, &object)),
        }
    }
}

/// Races the cleanup handlers against their timeout and the abort; they are dropped when
/// this returns, however it ends.
async fn bounded(
    run: impl Future<Output = std::result::Result<Map<String, Value>, Failed>>,
    tree: &Tasks,
    timeout: Duration,
    abort: &CancellationToken,
) -> std::result::Result<(), ActivityError> {
    let failed = |handler: String, message: String| ActivityError {
        activity: Activity::Cleanup,
        handler,
        message,
    };
    // Pinned here rather than in `select!`, which drops its futures before running the
    // branch: the timeout's branch still sees the handlers in flight.
    tokio::pin!(run);
    tokio::select! {
        finished = &mut run => finished.map(drop).map_err(|f| failed(f.handler, f.message)),
        _ = tokio::time::sleep(timeout) => {
            let running: Vec<String> = tree.running().iter().map(|w| w.handler().to_string()).collect();
            let handler = if running.is_empty() {
                "(waiting to retry)".to_string()
            } else {
                running.join(", ")
            };
            Err(failed(handler, format!("it did not finish within the cleanup timeout of {timeout:?} and was aborted")))
        }
        _ = abort.cancelled() => {
            tracing::warn!(target: "kopf::activity", "the cleanup handlers are aborted: the operator was stopped at once");
            Ok(())
        }
    }
}

/// One attempt of an activity handler, run and reported as resource handlers' are.
async fn attempt(
    handler: &ActivityHandler,
    invocation: ActivityInvocation,
    default_backoff: Duration,
) -> Outcome {
    let attempt = Attempt {
        label: "Activity",
        id: &handler.id,
        options: Retrying {
            errors: handler.options.errors,
            timeout: handler.options.timeout,
            retries: handler.options.retries,
            backoff: handler.options.backoff,
        },
        default_backoff,
        retry: invocation.retry,
        runtime: invocation.runtime(),
        node: invocation.node.clone(),
        logger: invocation.logger.clone(),
        subhandlers: None,
        report_success: true,
        counted_as: None,
    };
    attempt.run(|| (handler.function)(invocation)).await
}

fn interrupted(handler: &ActivityHandler, node: &Tasks) -> Failed {
    let reason = node.stop_reason().unwrap_or(StopReason::OperatorExiting);
    Failed {
        handler: handler.id.clone(),
        message: format!("interrupted: {reason}"),
    }
}
