//! The cancellation tree: the one place where the operator starts work.
//!
//! Invariants:
//! 1. Every task is spawned through [`Tasks::spawn`], so it is tracked by the operator's one
//!    `TaskTracker`, and `run()` returns only when the tracker is empty.
//! 2. Every task gets a token from the tree: cancelling a node asks its whole subtree to stop.
//!    Tasks honour it at their own pace (watchers at once, handlers when they can).
//! 3. When the grace period ends, the `abort` token fires: every task is dropped at its next
//!    `.await`, whatever it was doing.

use std::future::Future;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// A node of the operator's cancellation tree, with the tracker all tasks share.
#[derive(Debug, Clone)]
pub(crate) struct Tasks {
    token: CancellationToken,
    abort: CancellationToken,
    tracker: TaskTracker,
}

impl Tasks {
    /// The root of a new tree.
    pub(crate) fn root() -> Tasks {
        Tasks {
            token: CancellationToken::new(),
            abort: CancellationToken::new(),
            tracker: TaskTracker::new(),
        }
    }

    /// A child node: cancelled with this one, or on its own.
    pub(crate) fn child(&self) -> Tasks {
        Tasks {
            token: self.token.child_token(),
            abort: self.abort.clone(),
            tracker: self.tracker.clone(),
        }
    }

    /// This node's token: cancelled when this part of the operator should stop.
    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Fires when the grace period is over and everything is dropped.
    pub(crate) fn abort_token(&self) -> &CancellationToken {
        &self.abort
    }

    /// Starts a task in this node. It ends by itself, when its token asks, or at the abort.
    pub(crate) fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let abort = self.abort.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                biased;
                _ = abort.cancelled() => {}
                _ = future => {}
            }
        });
    }

    /// Asks this node's tasks to stop.
    pub(crate) fn cancel(&self) {
        self.token.cancel();
    }

    /// Drops every task of the tree at its next `.await`.
    pub(crate) fn abort(&self) {
        self.token.cancel();
        self.abort.cancel();
    }

    /// Waits until every task of the tree has ended. Call after the tree stops growing.
    pub(crate) async fn wait(&self) {
        self.tracker.close();
        self.tracker.wait().await;
    }

    /// How many tasks are alive.
    pub(crate) fn len(&self) -> usize {
        self.tracker.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn cancelling_a_node_reaches_its_subtree_and_abort_ends_the_stubborn() {
        let root = Tasks::root();
        let child = root.child();
        let polite = child.token().clone();
        child.spawn(async move { polite.cancelled().await });
        child.spawn(std::future::pending());
        assert_eq!(root.len(), 2);
        root.cancel();
        tokio::time::timeout(Duration::from_millis(50), root.wait())
            .await
            .expect_err("the stubborn task waits");
        assert_eq!(root.len(), 1, "the polite task ended on cancellation");
        root.abort();
        tokio::time::timeout(Duration::from_secs(5), root.wait())
            .await
            .expect("abort ends everything");
    }
}
