//! The runner's view of the KopfExamples: one list and one watch (renewed when it ends), kept
//! as each object's status and finalizers, plus every update mark seen. It counts its own
//! requests so that they can be told apart from the operator's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, WatchEvent, WatchParams};
use serde_json::Value;
use tokio::sync::Notify;

/// One object as the runner sees it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Seen {
    /// Its `status`.
    pub(crate) status: Value,
    /// How many finalizers it has.
    pub(crate) finalizers: usize,
}

/// An update handler's mark: which `spec.seq` it handled, and when (unix seconds).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UpdateMark {
    pub(crate) name: String,
    pub(crate) seq: u64,
    pub(crate) at: f64,
}

#[derive(Default)]
struct State {
    objects: HashMap<String, Seen>,
    updates: Vec<UpdateMark>,
    /// Why the watch cannot be renewed (the server is gone), once it has failed many times
    /// in a row.
    broken: Option<String>,
}

/// Failed watch requests in a row (200 ms apart) after which the server counts as gone.
const FAILURES_BEFORE_GIVING_UP: u32 = 25;

/// Watches the KopfExamples in the background until dropped.
pub(crate) struct Observer {
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
    /// The runner's own list and watch requests.
    pub(crate) lists: Arc<AtomicU64>,
    pub(crate) watches: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Observer {
    /// Lists the objects and starts watching; returns once the list is in.
    pub(crate) async fn start(client: kube::Client) -> Result<Observer, String> {
        let resource = ApiResource {
            group: "kopf.dev".into(),
            version: "v1".into(),
            api_version: "kopf.dev/v1".into(),
            kind: "KopfExample".into(),
            plural: "kopfexamples".into(),
        };
        let api: Api<DynamicObject> = Api::all_with(client, &resource);
        let state = Arc::new(Mutex::new(State::default()));
        let changed = Arc::new(Notify::new());
        let (lists, watches) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let version = list(&api, &state, &lists).await?;
        let task = tokio::spawn(watch(
            api,
            version,
            state.clone(),
            changed.clone(),
            lists.clone(),
            watches.clone(),
        ));
        Ok(Observer {
            state,
            changed,
            lists,
            watches,
            task,
        })
    }

    /// Waits until `done` holds for the objects seen; when it first held.
    pub(crate) async fn wait<F>(
        &self,
        what: &str,
        deadline: Duration,
        done: F,
    ) -> Result<Instant, String>
    where
        F: Fn(&HashMap<String, Seen>) -> bool,
    {
        let until = Instant::now() + deadline;
        loop {
            let notified = self.changed.notified();
            {
                let state = self.state.lock().expect("the state's lock");
                if done(&state.objects) {
                    return Ok(Instant::now());
                }
                if let Some(broken) = &state.broken {
                    return Err(format!("waiting for {what}: {broken}"));
                }
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("timed out after {deadline:?} waiting for {what}"));
            }
            let _ = tokio::time::timeout(left.min(Duration::from_millis(200)), notified).await;
        }
    }

    /// A value computed from the objects seen.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&HashMap<String, Seen>) -> T) -> T {
        f(&self.state.lock().expect("the state's lock").objects)
    }

    /// Every update mark seen so far.
    pub(crate) fn updates(&self) -> Vec<UpdateMark> {
        self.state.lock().expect("the state's lock").updates.clone()
    }

    /// The runner's own list and watch requests so far.
    pub(crate) fn own_requests(&self) -> (u64, u64) {
        (
            self.lists.load(Ordering::SeqCst),
            self.watches.load(Ordering::SeqCst),
        )
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn list(
    api: &Api<DynamicObject>,
    state: &Mutex<State>,
    lists: &AtomicU64,
) -> Result<String, String> {
    lists.fetch_add(1, Ordering::SeqCst);
    let listed = api
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing KopfExamples: {e}"))?;
    let mut state = state.lock().expect("the state's lock");
    state.objects.clear();
    for object in listed.items {
        apply(&mut state, &object, false);
    }
    Ok(listed.metadata.resource_version.unwrap_or_default())
}

async fn watch(
    api: Api<DynamicObject>,
    mut version: String,
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
    lists: Arc<AtomicU64>,
    watches: Arc<AtomicU64>,
) {
    let mut failures = 0;
    loop {
        watches.fetch_add(1, Ordering::SeqCst);
        let params = WatchParams::default().timeout(290);
        let stream = match api.watch(&params, &version).await {
            Ok(stream) => stream,
            Err(error) => {
                failures += 1;
                if failures >= FAILURES_BEFORE_GIVING_UP {
                    state.lock().expect("the state's lock").broken = Some(format!(
                        "the runner's watch failed {failures} times in a row, the server is gone: {error}"
                    ));
                    changed.notify_waiters();
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        failures = 0;
        let mut stream = std::pin::pin!(stream);
        let mut expired = false;
        while let Some(event) = stream.next().await {
            let event = match event {
                Ok(event) => event,
                Err(_) => break,
            };
            let mut locked = state.lock().expect("the state's lock");
            match event {
                WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                    version = object.metadata.resource_version.clone().unwrap_or(version);
                    apply(&mut locked, &object, false);
                }
                WatchEvent::Deleted(object) => {
                    version = object.metadata.resource_version.clone().unwrap_or(version);
                    apply(&mut locked, &object, true);
                }
                WatchEvent::Bookmark(bookmark) => {
                    version = bookmark.metadata.resource_version;
                }
                WatchEvent::Error(_) => {
                    expired = true;
                }
            }
            drop(locked);
            changed.notify_waiters();
            if expired {
                break;
            }
        }
        if expired {
            match list(&api, &state, &lists).await {
                Ok(listed) => version = listed,
                Err(error) => eprintln!("{error}"),
            }
        }
    }
}

fn apply(state: &mut State, object: &DynamicObject, deleted: bool) {
    let name = format!(
        "{}/{}",
        object.metadata.namespace.as_deref().unwrap_or_default(),
        object.metadata.name.as_deref().unwrap_or_default()
    );
    if deleted {
        state.objects.remove(&name);
        return;
    }
    let status = object.data["status"].clone();
    let update = &status["update_fn"];
    if let (Some(seq), Some(at)) = (update["seq"].as_u64(), update["at"].as_f64()) {
        let mark = UpdateMark {
            name: name.clone(),
            seq,
            at,
        };
        if state.updates.last() != Some(&mark) && !state.updates.contains(&mark) {
            state.updates.push(mark);
        }
    }
    let finalizers = object.metadata.finalizers.as_ref().map_or(0, Vec::len);
    state.objects.insert(name, Seen { status, finalizers });
}
