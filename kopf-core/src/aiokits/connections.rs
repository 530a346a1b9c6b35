//! The HTTP connections of the clients that the operator makes: tasks of the operator's, which
//! end with its run.
//!
//! kube-client's HTTP client runs each connection to the API server as a task of its own,
//! started through an executor. With tokio's own executor, those tasks belong to no one: an
//! idle pooled connection outlives the client's last request, and the operator's run, until
//! the runtime itself is dropped. [`Connections`] is the executor that the operator gives to the
//! clients it makes (from the kubeconfig, or from login handlers' credentials); [`Connections::
//! close`], the run's last step, ends every connection still open and waits until its task is
//! gone.
//!
//! Invariants:
//! 1. After [`Connections::close`] returns, no task of a connection is left: each one open
//!    then was dropped (its socket closed), and one opened later is dropped unpolled.
//! 2. Closing does not wait for a connection's requests: by then, the run's work has ended.
//! 3. A client given by the embedder ([`Operator::client`](crate::operator::Operator::client)) is
//!    not the operator's: its connections run wherever its own executor runs them.

use std::future::Future;
use std::pin::Pin;

use crate::aiokits::tasks::Tasks;

/// A connection's task, as hyper gives it to its executor.
type ConnectionTask = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The executor of the operator's clients' connections; clones share the connections.
///
/// Its tasks are a tree of their own ([`Tasks`]), apart from the operator's: they outlive the
/// operator's stop (its last requests need them) and end at [`Connections::close`], through the
/// tree's abort. hyper gives its executor a task for every connection, and also one for most
/// requests (to return their connection to the pool): a task's wait for the abort costs a
/// lock when it starts and one when it ends, and an atomic read at every poll.
#[derive(Clone)]
pub(crate) struct Connections {
    tasks: Tasks,
}

impl Default for Connections {
    fn default() -> Connections {
        // No blocking work runs here: its pool of threads never starts one.
        Connections {
            tasks: Tasks::root(1),
        }
    }
}

impl Connections {
    /// Ends every connection's task and waits until each is gone; later ones end at once.
    pub(crate) async fn close(&self) {
        self.tasks.abort();
        self.tasks.wait().await;
    }

    /// How many connections' tasks are running.
    fn running(&self) -> usize {
        self.tasks.len()
    }
}

impl hyper::rt::Executor<ConnectionTask> for Connections {
    fn execute(&self, connection: ConnectionTask) {
        self.tasks.spawn(connection);
    }
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("running", &self.running())
            .field("closed", &self.tasks.is_aborted())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use hyper::rt::Executor;

    use super::*;

    /// Tells when it is dropped.
    struct Dropped(Option<tokio::sync::oneshot::Sender<()>>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            if let Some(sender) = self.0.take() {
                let _ = sender.send(());
            }
        }
    }

    #[tokio::test]
    async fn closing_drops_every_connection_and_waits_for_it() {
        let connections = Connections::default();
        let (sender, dropped) = tokio::sync::oneshot::channel();
        let guard = Dropped(Some(sender));
        connections.execute(Box::pin(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        }));
        assert_eq!(connections.running(), 1);
        connections.close().await;
        assert_eq!(connections.running(), 0);
        dropped.await.expect("the connection's future was dropped");
    }

    #[tokio::test]
    async fn a_connection_that_ends_by_itself_leaves_and_one_after_the_close_never_runs() {
        let connections = Connections::default();
        let (sender, ended) = tokio::sync::oneshot::channel();
        connections.execute(Box::pin(async move {
            let _ = sender.send(());
        }));
        ended.await.expect("the connection ran");
        connections.close().await;
        let (sender, ran) = tokio::sync::oneshot::channel::<()>();
        connections.execute(Box::pin(async move {
            let _ = sender.send(());
        }));
        assert!(ran.await.is_err(), "a connection after the close ran");
        connections.close().await;
        assert_eq!(connections.running(), 0);
    }
}
