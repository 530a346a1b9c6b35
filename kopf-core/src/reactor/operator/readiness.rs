//! The operator's readiness ([`Ready`]): every resource it serves listed once and, with
//! managed webhook configurations, those in place.

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Resolves once the operator has listed every resource it serves and, with managed webhook
/// configurations, once they are in place.
#[derive(Debug, Clone)]
pub struct Ready(pub(super) watch::Receiver<bool>);

impl Ready {
    /// Waits until the operator is ready (returns at once if it already is; never returns if
    /// the operator stops before).
    pub async fn wait(&self) {
        let mut receiver = self.0.clone();
        if receiver.wait_for(|ready| *ready).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Whether the operator is ready now.
    pub fn is_ready(&self) -> bool {
        *self.0.borrow()
    }
}

/// Marks the operator ready once it has listed everything it serves and its managed webhook
/// configurations are in place: a test's (or a Service's) first request after a start must
/// not meet a webhook that points at a server gone.
pub(super) async fn readiness(
    mut listed: watch::Receiver<bool>,
    in_place: Option<watch::Receiver<bool>>,
    ready: watch::Sender<bool>,
    token: CancellationToken,
) {
    let both = async {
        if listed.wait_for(|listed| *listed).await.is_err() {
            return false;
        }
        match in_place {
            Some(mut in_place) => in_place.wait_for(|in_place| *in_place).await.is_ok(),
            None => true,
        }
    };
    tokio::select! {
        _ = token.cancelled() => {}
        done = both => {
            if done {
                ready.send_replace(true);
            }
        }
    }
}
