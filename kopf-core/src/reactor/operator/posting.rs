//! The operator's poster of Kubernetes Events, in a tree of its own: the first to start and
//! the last to stop.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::aiokits::tasks::{StopReason, Tasks};
use crate::clients::posting::Poster;
use crate::configs::settings::Settings;

/// The operator's poster of Kubernetes Events, in a tree of its own: it starts before the
/// startup handlers (what they and the tasks they start post is posted), and it is the last
/// to stop, after the cleanup handlers, draining what is queued within the grace period from
/// the stop (`clients/posting/poster.rs`, invariant 4). While it runs, `kopf::info` and the
/// others post through it from anywhere on the operator's runtime.
#[derive(Default)]
pub(super) struct Posting {
    running: std::sync::Mutex<Option<RunningPoster>>,
}

struct RunningPoster {
    poster: Poster,
    tree: Tasks,
    grace: Duration,
    /// While it lives, events posted from anywhere on the runtime go to this poster.
    registration: Option<crate::clients::posting::poster::running::Registration>,
}

impl Posting {
    /// Starts the poster (once).
    pub(super) fn start(&self, client: &kube::Client, settings: &Settings) -> Poster {
        let mut running = crate::helpers::sync::lock(&self.running);
        if let Some(running) = &*running {
            return running.poster.clone();
        }
        let tree = Tasks::root(1);
        let poster = Poster::start_for(client.clone(), settings, &tree);
        let registration = crate::clients::posting::poster::running::register(&poster);
        *running = Some(RunningPoster {
            poster: poster.clone(),
            tree,
            grace: settings.process.grace_period,
            registration,
        });
        poster
    }

    /// Takes the settings as the startup handlers left them.
    pub(super) fn configure(&self, settings: &Settings) {
        if let Some(running) = &mut *crate::helpers::sync::lock(&self.running) {
            running.poster.configure(settings);
            running.grace = settings.process.grace_period;
        }
    }

    /// Stops the poster: it posts what is queued until the grace period after `since` (the
    /// stop) ends, or until `abort`; then it is dropped.
    pub(super) async fn finish(&self, since: tokio::time::Instant, abort: &CancellationToken) {
        let Some(running) = crate::helpers::sync::lock(&self.running).take() else {
            return;
        };
        let RunningPoster {
            poster,
            tree,
            grace,
            registration,
        } = running;
        // No more events from anywhere go to this operator.
        drop(registration);
        poster.drain_until(since + grace);
        drop(poster);
        tree.cancel(StopReason::OperatorExiting);
        tokio::select! {
            () = tree.wait() => {}
            () = abort.cancelled() => {
                tree.abort();
                tree.wait().await;
            }
        }
    }
}
