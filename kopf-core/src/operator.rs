//! The operator: runs the registry's handlers against a cluster until stopped.
//!
//! ```no_run
//! # async fn example(registry: kopf::Registry) -> Result<(), kopf::OperatorError> {
//! let stop = tokio_util::sync::CancellationToken::new();
//! let operator = kopf::Operator::new(registry);
//! let ready = operator.ready();
//! let running = tokio::spawn(operator.run(stop.clone()));
//! ready.wait().await; // every resource has been listed once
//! stop.cancel();
//! running.await.expect("the operator task")?;
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::namespaces::NamespacePatterns;
use crate::processing::Processor;
use crate::queueing::Queue;
use crate::registry::Registry;
use crate::resources::{self, Selector};
use crate::settings::Settings;
use crate::tasks::Tasks;
use crate::watching::{self, Event};

/// Why an operator could not run.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// No kube client could be made from the environment (kubeconfig or in-cluster).
    #[error("cannot configure the kubernetes client: {0}")]
    Client(#[source] kube::Error),
    /// The namespace patterns are invalid.
    #[error("invalid namespace patterns: {0}")]
    Namespaces(String),
    /// Some work ignored its cancellation past the grace period and was aborted.
    #[error(
        "the operator stopped, but some work had to be aborted after the grace period of {0:?}"
    )]
    Aborted(Duration),
    /// A second signal asked to stop at once; work in flight was aborted.
    #[error("stopped at once by a second signal")]
    Interrupted,
}

/// Which namespaces the operator serves.
#[derive(Debug, Clone, Default)]
enum Scope {
    /// Everything (`-A`).
    #[default]
    Cluster,
    /// Namespaces by name, glob or `!`-negation (`-n`).
    Namespaces(Vec<String>),
}

/// Resolves once the operator has listed every resource it serves.
#[derive(Debug, Clone)]
pub struct Ready(watch::Receiver<bool>);

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

/// An operator: a registry of handlers, settings, and a client.
pub struct Operator {
    registry: Arc<Registry>,
    settings: Settings,
    client: Option<kube::Client>,
    scope: Scope,
    ready: watch::Sender<bool>,
}

impl std::fmt::Debug for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operator")
            .field("registry", &self.registry)
            .field("settings", &self.settings)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl Operator {
    /// An operator for these handlers, with default settings, serving all namespaces.
    pub fn new(registry: Registry) -> Operator {
        Operator {
            registry: Arc::new(registry),
            settings: Settings::default(),
            client: None,
            scope: Scope::Cluster,
            ready: watch::channel(false).0,
        }
    }

    /// Use these settings.
    pub fn settings(mut self, settings: Settings) -> Operator {
        self.settings = settings;
        self
    }

    /// Use this client (default: from the kubeconfig or the in-cluster environment).
    pub fn client(mut self, client: kube::Client) -> Operator {
        self.client = Some(client);
        self
    }

    /// Serve only these namespaces: names, globs (`*`, `?`), negations (`!name`), as Kopf's
    /// `--namespace`.
    pub fn namespaces<S: Into<String>>(
        mut self,
        patterns: impl IntoIterator<Item = S>,
    ) -> Operator {
        self.scope = Scope::Namespaces(patterns.into_iter().map(Into::into).collect());
        self
    }

    /// A handle that resolves once the operator has listed everything it serves.
    pub fn ready(&self) -> Ready {
        Ready(self.ready.subscribe())
    }

    /// Runs until `stop` is cancelled. Then stops watching at once, asks handlers to stop,
    /// waits up to the grace period, aborts what is left, and returns only when no task of
    /// the operator is alive and its clients are dropped.
    pub async fn run(self, stop: CancellationToken) -> Result<(), OperatorError> {
        self.run_until(stop, CancellationToken::new()).await
    }

    /// Runs until SIGINT or SIGTERM, then stops gracefully (as [`run`](Self::run)); a second
    /// signal during the graceful stop aborts everything at once
    /// ([`OperatorError::Interrupted`]).
    pub async fn run_until_signalled(self) -> Result<(), OperatorError> {
        let stop = CancellationToken::new();
        let abort = CancellationToken::new();
        let running = self.run_until(stop.clone(), abort.clone());
        let signals = async {
            signalled().await;
            tracing::info!(target: "kopf::operator", "signal received: stopping (a second signal stops at once)");
            stop.cancel();
            signalled().await;
            tracing::warn!(target: "kopf::operator", "second signal received: aborting");
            abort.cancel();
            std::future::pending::<()>().await;
        };
        tokio::select! {
            result = running => {
                if abort.is_cancelled() { Err(OperatorError::Interrupted) } else { result }
            }
            _ = signals => unreachable!("the signal listener never ends"),
        }
    }

    async fn run_until(
        self,
        stop: CancellationToken,
        abort: CancellationToken,
    ) -> Result<(), OperatorError> {
        let client = match self.client {
            Some(client) => client,
            None => kube::Client::try_default()
                .await
                .map_err(OperatorError::Client)?,
        };
        let patterns = match &self.scope {
            Scope::Cluster => None,
            Scope::Namespaces(patterns) => Some(
                NamespacePatterns::parse(patterns)
                    .map_err(|e| OperatorError::Namespaces(e.to_string()))?,
            ),
        };
        let tasks = Tasks::root();
        let selectors = self.registry.selectors();
        let pending = Arc::new(AtomicUsize::new(selectors.len()));
        if selectors.is_empty() {
            self.ready.send_replace(true);
        }
        let ready = Arc::new(self.ready);
        for selector in selectors {
            let served = Served {
                client: client.clone(),
                registry: self.registry.clone(),
                settings: self.settings.clone(),
                selector,
                patterns: patterns.clone(),
                tasks: tasks.child(),
                pending: pending.clone(),
                ready: ready.clone(),
            };
            tasks.spawn(served.run());
        }
        drop(client);

        stop.cancelled().await;
        tracing::info!(target: "kopf::operator", "stopping");
        tasks.cancel();
        let grace = self.settings.process.grace_period;
        let graceful = tokio::select! {
            finished = tokio::time::timeout(grace, tasks.wait()) => finished.is_ok(),
            _ = abort.cancelled() => false,
        };
        if !graceful {
            if abort.is_cancelled() {
                tracing::warn!(target: "kopf::operator", tasks = tasks.len(), "aborting the work left at once");
            } else {
                tracing::warn!(target: "kopf::operator", ?grace, tasks = tasks.len(), "aborting the work left after the grace period");
            }
            tasks.abort();
            tasks.wait().await;
            return Err(OperatorError::Aborted(grace));
        }
        Ok(())
    }
}

/// Serving one selector: resolving it, and watching it in every namespace it concerns.
struct Served {
    client: kube::Client,
    registry: Arc<Registry>,
    settings: Settings,
    selector: Selector,
    patterns: Option<NamespacePatterns>,
    tasks: Tasks,
    pending: Arc<AtomicUsize>,
    ready: Arc<watch::Sender<bool>>,
}

impl Served {
    async fn run(self) {
        let token = self.tasks.token().clone();
        let mut counted = false;
        let mut delay = Duration::from_millis(200);
        loop {
            let resolved = tokio::select! {
                _ = token.cancelled() => return,
                resolved = resources::resolve(&self.client, &self.selector) => resolved,
            };
            let resource = match resolved {
                Ok(Some(resource)) => resource,
                Ok(None) => {
                    tracing::debug!(target: "kopf::operator", selector = %self.selector, "the resource is not served (yet)");
                    if !counted {
                        // Nothing to list: do not hold readiness back.
                        counted = true;
                        self.listed();
                    }
                    if !sleep(&token, delay).await {
                        return;
                    }
                    delay = (delay * 2).min(Duration::from_secs(5));
                    continue;
                }
                Err(error) => {
                    tracing::warn!(target: "kopf::operator", selector = %self.selector, %error, "discovery failed; retrying");
                    if !sleep(&token, delay).await {
                        return;
                    }
                    delay = (delay * 2).min(Duration::from_secs(30));
                    continue;
                }
            };
            delay = Duration::from_millis(200);
            let namespaces: Vec<Option<String>> = match (&self.patterns, resource.namespaced) {
                (Some(patterns), true) => match patterns.is_exact() {
                    Some(names) => names.into_iter().map(Some).collect(),
                    None => vec![None],
                },
                _ => vec![None],
            };
            let processor = Arc::new(Processor::new(
                self.client.clone(),
                resource.clone(),
                &self.registry,
                &self.selector,
                self.settings.clone(),
            ));
            let listings = Arc::new(AtomicUsize::new(namespaces.len()));
            let node = self.tasks.child();
            let (gone_tx, mut gone_rx) = tokio::sync::mpsc::channel::<()>(1);
            for namespace in namespaces {
                let queue = Queue::new(
                    processor.clone(),
                    node.child(),
                    self.settings.queueing.worker_limit,
                    self.settings.queueing.idle_timeout,
                );
                let client = self.client.clone();
                let resource = resource.clone();
                let settings = self.settings.watching.clone();
                let patterns = self.patterns.clone();
                let listings = listings.clone();
                let served_ready = if counted {
                    None
                } else {
                    Some((self.pending.clone(), self.ready.clone()))
                };
                let gone = gone_tx.clone();
                let watcher_token = node.token().clone();
                let selector = processor.label_selector();
                node.spawn(async move {
                    let mut listed = false;
                    let result = watching::watch(
                        &client,
                        &resource,
                        namespace.as_deref(),
                        selector.as_deref(),
                        &settings,
                        &watcher_token,
                        |event| {
                            if let Event::ListingDone = event {
                                if !listed {
                                    listed = true;
                                    if listings.fetch_sub(1, Ordering::SeqCst) == 1
                                        && let Some((pending, ready)) = &served_ready
                                        && pending.fetch_sub(1, Ordering::SeqCst) == 1
                                    {
                                        ready.send_replace(true);
                                    }
                                }
                                return;
                            }
                            let in_scope = match (&event, &patterns) {
                                (Event::Listed(o) | Event::Changed(_, o), Some(patterns)) => {
                                    o["metadata"]["namespace"]
                                        .as_str()
                                        .is_none_or(|ns| patterns.matches(ns))
                                }
                                _ => true,
                            };
                            if in_scope {
                                queue.push(event);
                            }
                        },
                    )
                    .await;
                    if let Err(error) = result {
                        tracing::info!(target: "kopf::operator", %error, "stopped watching");
                        let _ = gone.try_send(());
                    }
                });
            }
            drop(gone_tx);
            counted = true;
            // Until stopped, or until the resource disappears: then stop its watchers and
            // resolve it again (a CRD may come back).
            tokio::select! {
                _ = token.cancelled() => return,
                _ = gone_rx.recv() => {
                    node.cancel();
                }
            }
        }
    }

    fn listed(&self) {
        if self.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.ready.send_replace(true);
        }
    }
}

/// The next SIGINT or SIGTERM.
async fn signalled() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

async fn sleep(token: &CancellationToken, delay: Duration) -> bool {
    tokio::select! {
        _ = token.cancelled() => false,
        _ = tokio::time::sleep(delay) => true,
    }
}
