//! The runner's view of the KopfExamples: one list (in pages, as operators list) and one watch
//! (renewed when it ends), kept as each object's status and finalizers, how many objects carry
//! each handler's mark, plus every update mark seen. It counts its own requests so that they
//! can be told apart from the operator's.
//!
//! Waiting for "every object handled" must not cost a pass over every object per event: with
//! 100,000 objects and several events each, that would be quadratic and take the runner's one
//! thread from the load it drives. So the marks are tallied as the events come.

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

/// Every object seen, by `namespace/name`, and a tally of the handlers' marks they carry.
#[derive(Debug, Default)]
pub(crate) struct Objects {
    by_name: HashMap<String, Seen>,
    /// How many objects carry `status.<handler>.run == <run>`, by handler and run.
    marks: HashMap<String, HashMap<String, usize>>,
}

impl Objects {
    /// How many objects are seen.
    pub(crate) fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether no object is seen.
    pub(crate) fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The object `namespace/name`, if seen.
    pub(crate) fn get(&self, name: &str) -> Option<&Seen> {
        self.by_name.get(name)
    }

    /// Every object seen.
    pub(crate) fn values(&self) -> impl Iterator<Item = &Seen> {
        self.by_name.values()
    }

    /// How many objects carry the mark of `handler` from `run`.
    pub(crate) fn marked(&self, handler: &str, run: &str) -> usize {
        self.marks
            .get(handler)
            .and_then(|runs| runs.get(run))
            .copied()
            .unwrap_or(0)
    }

    /// Stores (or with `None`, forgets) an object, keeping the tally right.
    fn set(&mut self, name: String, seen: Option<Seen>) {
        let added = seen
            .iter()
            .flat_map(|seen| marks_of(&seen.status))
            .collect::<Vec<_>>();
        let old = match seen {
            Some(seen) => self.by_name.insert(name, seen),
            None => self.by_name.remove(&name),
        };
        for (handler, run) in added {
            *self
                .marks
                .entry(handler)
                .or_default()
                .entry(run)
                .or_default() += 1;
        }
        for (handler, run) in old.iter().flat_map(|old| marks_of(&old.status)) {
            if let Some(count) = self
                .marks
                .get_mut(&handler)
                .and_then(|runs| runs.get_mut(&run))
            {
                *count -= 1;
            }
        }
    }

    fn clear(&mut self) {
        self.by_name.clear();
        self.marks.clear();
    }
}

/// The `(handler, run)` marks in a status: every `status.<handler>.run` that is a string.
fn marks_of(status: &Value) -> Vec<(String, String)> {
    status
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(handler, value)| Some((handler.clone(), value["run"].as_str()?.to_string())))
        .collect()
}

#[derive(Default)]
struct State {
    objects: Objects,
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
        let api = kopfexamples(client);
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
        F: Fn(&Objects) -> bool,
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
    pub(crate) fn with<T>(&self, f: impl FnOnce(&Objects) -> T) -> T {
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

/// The KopfExamples in every namespace.
pub(crate) fn kopfexamples(client: kube::Client) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "kopf.dev".into(),
        version: "v1".into(),
        api_version: "kopf.dev/v1".into(),
        kind: "KopfExample".into(),
        plural: "kopfexamples".into(),
    };
    Api::all_with(client, &resource)
}

/// Objects per page of a list, as kube-rs' watcher and Kopf list.
pub(crate) const PAGE: u32 = 500;

/// Lists every object, [`PAGE`] at a time, counting each page in `lists`; the objects and
/// the version to watch from.
pub(crate) async fn list_all(
    api: &Api<DynamicObject>,
    lists: &AtomicU64,
) -> Result<(Vec<DynamicObject>, String), String> {
    let mut params = ListParams::default().limit(PAGE);
    let mut items = Vec::new();
    loop {
        lists.fetch_add(1, Ordering::SeqCst);
        let page = api
            .list(&params)
            .await
            .map_err(|e| format!("listing KopfExamples: {e}"))?;
        items.extend(page.items);
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok((items, page.metadata.resource_version.unwrap_or_default())),
        }
    }
}

/// Lists every object into the state; the version to watch from.
async fn list(
    api: &Api<DynamicObject>,
    state: &Mutex<State>,
    lists: &AtomicU64,
) -> Result<String, String> {
    let (items, version) = list_all(api, lists).await?;
    let mut state = state.lock().expect("the state's lock");
    state.objects.clear();
    for object in items {
        apply(&mut state, &object, false);
    }
    Ok(version)
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
        state.objects.set(name, None);
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
    state.objects.set(name, Some(Seen { status, finalizers }));
}
