//! The way from committed writes to the state file and back: writes queue their mutations,
//! the saving task takes them in groups, and answers wait until the file holds theirs.
//!
//! Invariants:
//! 1. Writes are queued under the state's lock, so the queue is in resourceVersion order.
//! 2. [`Saved::UpTo`] only grows, and a version is reported saved only once fsync'd.
//! 3. A failure is final: once the file could not be written, nothing more is saved.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{mpsc, watch};

use crate::storage::state::Mutation;

/// The mutations of one write, in order, and the resourceVersion it reached.
#[derive(Debug)]
pub(crate) struct Unsaved {
    pub(crate) mutations: Vec<Mutation>,
    pub(crate) resource_version: u64,
}

/// How far the state file holds the writes.
#[derive(Debug, Clone)]
pub(crate) enum Saved {
    /// Everything up to this resourceVersion is in the file.
    UpTo(u64),
    /// The file could not be written (the message says why); nothing more will be.
    Failed(Arc<str>),
}

/// The writers' side, which the handlers share: queue writes, wait for them to be saved.
#[derive(Debug)]
pub(crate) struct Durability {
    queue: mpsc::UnboundedSender<Unsaved>,
    /// The newest resourceVersion queued.
    queued: AtomicU64,
    saved: watch::Receiver<Saved>,
}

/// The saving task's side: take the queued writes, report how far they are saved.
#[derive(Debug)]
pub(crate) struct Backlog {
    queue: mpsc::UnboundedReceiver<Unsaved>,
    saved: watch::Sender<Saved>,
}

/// A queue for a state file that holds everything up to `resource_version` already.
pub(crate) fn channel(resource_version: u64) -> (Durability, Backlog) {
    let (queue_tx, queue_rx) = mpsc::unbounded_channel();
    let (saved_tx, saved_rx) = watch::channel(Saved::UpTo(resource_version));
    let durability = Durability {
        queue: queue_tx,
        queued: AtomicU64::new(resource_version),
        saved: saved_rx,
    };
    let backlog = Backlog {
        queue: queue_rx,
        saved: saved_tx,
    };
    (durability, backlog)
}

impl Durability {
    /// Queues the mutations of a write. Call it under the state's lock, so that writes queue
    /// in the order they were made.
    pub(crate) fn queue(&self, mutations: Vec<Mutation>, resource_version: u64) {
        if mutations.is_empty() {
            return;
        }
        self.queued.store(resource_version, Ordering::Release);
        // When the saving task is gone (the server stops), `saved` tells the waiting answers.
        let _ = self.queue.send(Unsaved {
            mutations,
            resource_version,
        });
    }

    /// Waits until the state file holds every write queued so far; the message says why it
    /// never will (the file cannot be written, or the server stops).
    ///
    /// # Cancellation safety
    ///
    /// Cancel-safe: dropping it only stops waiting, the writes are saved all the same.
    pub(crate) async fn saved(&self) -> Result<(), Arc<str>> {
        let target = self.queued.load(Ordering::Acquire);
        let mut saved = self.saved.clone();
        let reached = saved
            .wait_for(|saved| !matches!(saved, Saved::UpTo(rv) if *rv < target))
            .await;
        match reached.as_deref() {
            Ok(Saved::UpTo(_)) => Ok(()),
            Ok(Saved::Failed(why)) => Err(why.clone()),
            Err(_) => Err("the server stopped before the state file held this write".into()),
        }
    }
}

impl Backlog {
    /// Waits for queued writes and moves every one queued by now into `group`; returns how
    /// many, 0 when no more can come.
    ///
    /// # Cancellation safety
    ///
    /// Cancel-safe: nothing is taken unless it returns.
    pub(crate) async fn take(&mut self, group: &mut Vec<Unsaved>) -> usize {
        self.queue.recv_many(group, usize::MAX).await
    }

    /// Refuses more writes and moves those already queued into `group`.
    pub(crate) fn close(&mut self, group: &mut Vec<Unsaved>) {
        self.queue.close();
        while let Ok(unsaved) = self.queue.try_recv() {
            group.push(unsaved);
        }
    }

    /// Everything up to `resource_version` is in the file now.
    pub(crate) fn saved(&self, resource_version: u64) {
        self.saved.send_replace(Saved::UpTo(resource_version));
    }

    /// The file cannot be written: every write waiting, and every later one, fails with `why`.
    pub(crate) fn failed(&mut self, why: String) {
        self.queue.close();
        self.saved.send_replace(Saved::Failed(why.into()));
    }
}
