//! The journal of a proxy in front of a real API server: every change the real server makes to
//! the resources that requests through the proxy touched, read from watches of its own.
//!
//! The first request for a resource (any verb) starts following it before the request goes
//! on: a list (its objects enter the journal as added), then a watch from the list's
//! resourceVersion, so no change after that is missed; a watch that ends or expires (`410
//! Gone`) is started again, after a new list whose differences enter the journal. A list the
//! real server cannot serve yet is tried again: it answers `429` with `Retry-After` while the
//! watch cache of a resource just made (a new CRD's) fills, and a resource that is not served
//! yet (`404`) is tried again at its next request; only a resource that does not list at all
//! (a review's `405`) is never followed. A write
//! answered through the proxy waits until the journal holds the version it made, so that, as
//! on the fake server, a client that saw its write answered finds it in the journal.
//! Resources no request touched (those only the real server's controllers change) are not
//! journaled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method};
use http_body_util::BodyExt as _;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::control::lock;
use super::upstream::{Credentials, Upstream};

/// How long a write's answer waits for the journal to hold it.
const CATCH_UP: Duration = Duration::from_secs(10);

/// A resource as requests name it: its group, version and plural.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Followed {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) plural: String,
}

impl Followed {
    /// `plural` or `plural.group`, as the request log names resources.
    fn name(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    fn collection(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}/{}", self.version, self.plural)
        } else {
            format!("/apis/{}/{}/{}", self.group, self.version, self.plural)
        }
    }
}

/// One change, as the journal keeps it.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) resource_version: u64,
    pub(crate) event: &'static str,
    pub(crate) resource: String,
    pub(crate) object: Value,
    pub(crate) at: SystemTime,
}

/// The journal and the watches that fill it.
#[derive(Debug)]
pub(crate) struct Journal {
    upstream: Upstream,
    tracker: TaskTracker,
    stopped: CancellationToken,
    /// The resources followed (by `plural.group`), each with the newest version its watch saw.
    followed: tokio::sync::Mutex<HashMap<String, watch::Receiver<u64>>>,
    changes: Arc<Mutex<Vec<Recorded>>>,
}

impl Journal {
    pub(crate) fn new(
        upstream: Upstream,
        tracker: TaskTracker,
        stopped: CancellationToken,
    ) -> Self {
        Journal {
            upstream,
            tracker,
            stopped,
            followed: tokio::sync::Mutex::new(HashMap::new()),
            changes: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Every change recorded, in the order the real server made them.
    pub(crate) fn changes(&self) -> Vec<Recorded> {
        let mut changes = lock(&self.changes).clone();
        changes.sort_by_key(|c| c.resource_version);
        changes
    }

    /// Starts following `resource` unless it is followed already; returns once its list is
    /// recorded and its watch will see every change after it.
    pub(crate) async fn follow(&self, resource: &Followed) {
        let mut followed = self.followed.lock().await;
        if followed.contains_key(&resource.name()) {
            return;
        }
        let mut follower = Follower {
            upstream: self.upstream.clone(),
            resource: resource.clone(),
            known: HashMap::new(),
            changes: self.changes.clone(),
            seen: watch::channel(0).0,
        };
        let give_up = tokio::time::Instant::now() + CATCH_UP;
        let rv = loop {
            match follower.list().await {
                Listing::Listed(rv) => break rv,
                Listing::Never => {
                    // Not a resource that lists: nothing to journal, and nothing to wait for.
                    followed.insert(resource.name(), watch::channel(u64::MAX).1);
                    return;
                }
                // Not served (yet): the next request for it tries again.
                Listing::NotServed => return,
                Listing::Later(delay) => {
                    if tokio::time::Instant::now() + delay > give_up {
                        return;
                    }
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        () = self.stopped.cancelled() => return,
                    }
                }
            }
        };
        followed.insert(resource.name(), follower.seen.subscribe());
        let stopped = self.stopped.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                () = follower.follow(rv) => {}
                () = stopped.cancelled() => {}
            }
        });
    }

    /// Waits (a while) until the journal of `resource` holds `resource_version`.
    pub(crate) async fn caught_up(&self, resource: &Followed, resource_version: u64) {
        let seen = self.followed.lock().await.get(&resource.name()).cloned();
        if let Some(mut seen) = seen {
            let _ =
                tokio::time::timeout(CATCH_UP, seen.wait_for(|rv| *rv >= resource_version)).await;
        }
    }
}

impl Journal {
    /// How many changes are recorded now: a mark for [`Journal::deleted`].
    pub(crate) fn mark(&self) -> usize {
        lock(&self.changes).len()
    }

    /// Waits (a while) until the journal holds the deletion of `namespace/name` of `resource`,
    /// recorded after `mark`: for a deletion answered with a `Status`, which tells no version.
    pub(crate) async fn deleted(&self, resource: &Followed, key: (&str, &str), mark: usize) {
        let seen = self.followed.lock().await.get(&resource.name()).cloned();
        let Some(mut seen) = seen else { return };
        let name = resource.name();
        let recorded = || {
            lock(&self.changes).iter().skip(mark).any(|change| {
                change.event == "DELETED"
                    && change.resource == name
                    && self::key(&change.object) == (key.0.to_string(), key.1.to_string())
            })
        };
        let wait = async {
            while !recorded() {
                if seen.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(CATCH_UP, wait).await;
    }
}

/// The watch that fills the journal for one resource.
struct Follower {
    upstream: Upstream,
    resource: Followed,
    /// The versions of the objects it knows, by namespace and name, for the differences of
    /// a new list.
    known: HashMap<(String, String), (u64, Value)>,
    changes: Arc<Mutex<Vec<Recorded>>>,
    seen: watch::Sender<u64>,
}

impl Follower {
    /// Lists the objects; records those it did not know or knew older, and the deletions of
    /// those gone. Returns the list's resourceVersion, or why there is none.
    async fn list(&mut self) -> Listing {
        let path = self.resource.collection();
        let Ok(answer) = self
            .upstream
            .send(
                Method::GET,
                &path,
                &HeaderMap::new(),
                Bytes::new(),
                Credentials::Admin,
            )
            .await
        else {
            return Listing::Later(RETRY);
        };
        let status = answer.status();
        if status == http::StatusCode::NOT_FOUND {
            return Listing::NotServed;
        }
        if status == http::StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            return Listing::Later(retry_after(answer.headers()));
        }
        if !status.is_success() {
            return Listing::Never;
        }
        let Ok(body) = answer.into_body().collect().await else {
            return Listing::Later(RETRY);
        };
        let Ok(list) = serde_json::from_slice::<Value>(&body.to_bytes()) else {
            return Listing::Never;
        };
        let rv = version(&list);
        let mut present = std::collections::HashSet::new();
        let kind = list["kind"]
            .as_str()
            .unwrap_or_default()
            .trim_end_matches("List")
            .to_string();
        let api_version = list["apiVersion"].clone();
        for item in list["items"].as_array().into_iter().flatten() {
            let mut item = item.clone();
            // Items of a list carry no kind; the journal's objects do, as watch events' do.
            item["kind"] = kind.clone().into();
            item["apiVersion"] = api_version.clone();
            let key = key(&item);
            present.insert(key.clone());
            let item_rv = version(&item);
            let event = match self.known.get(&key) {
                None => "ADDED",
                Some((known, _)) if *known < item_rv => "MODIFIED",
                Some(_) => continue,
            };
            self.record(event, item, item_rv);
        }
        let gone: Vec<_> = self
            .known
            .iter()
            .filter(|(key, _)| !present.contains(*key))
            .map(|(_, (_, object))| object.clone())
            .collect();
        for object in gone {
            self.record("DELETED", object, rv);
        }
        self.seen.send_replace(rv);
        Listing::Listed(rv)
    }

    /// Watches from `rv` for as long as the server runs, listing again when the history no
    /// longer reaches back.
    async fn follow(mut self, mut rv: u64) {
        loop {
            match self.watch(rv).await {
                Watched::Until(last) => rv = last,
                Watched::Expired => match self.list().await {
                    Listing::Listed(listed) => rv = listed,
                    Listing::Later(delay) => tokio::time::sleep(delay).await,
                    Listing::NotServed | Listing::Never => tokio::time::sleep(RETRY).await,
                },
                Watched::Failed => tokio::time::sleep(RETRY).await,
            }
        }
    }

    async fn watch(&mut self, rv: u64) -> Watched {
        let path = format!(
            "{}?watch=true&allowWatchBookmarks=true&resourceVersion={rv}",
            self.resource.collection()
        );
        let Ok(answer) = self
            .upstream
            .send(
                Method::GET,
                &path,
                &HeaderMap::new(),
                Bytes::new(),
                Credentials::Admin,
            )
            .await
        else {
            return Watched::Failed;
        };
        if answer.status() == http::StatusCode::GONE {
            return Watched::Expired;
        }
        if !answer.status().is_success() {
            return Watched::Failed;
        }
        let mut body = answer.into_body();
        let mut partial = BytesMut::new();
        let mut last = rv;
        while let Some(Ok(frame)) = body.frame().await {
            let Ok(data) = frame.into_data() else {
                continue;
            };
            partial.extend_from_slice(&data);
            while let Some(end) = partial.iter().position(|b| *b == b'\n') {
                let line = partial.split_to(end + 1);
                let Ok(event) = serde_json::from_slice::<Value>(&line) else {
                    continue;
                };
                let object = event["object"].clone();
                match event["type"].as_str().unwrap_or_default() {
                    "ERROR" if object["code"] == 410 => return Watched::Expired,
                    "ERROR" => return Watched::Until(last),
                    "BOOKMARK" => {}
                    kind @ ("ADDED" | "MODIFIED" | "DELETED") => {
                        let event = match kind {
                            "ADDED" => "ADDED",
                            "MODIFIED" => "MODIFIED",
                            _ => "DELETED",
                        };
                        let object_rv = version(&object);
                        self.record(event, object, object_rv);
                    }
                    _ => continue,
                }
                last = last.max(version(&event["object"]));
                self.seen.send_replace(last);
            }
        }
        Watched::Until(last)
    }

    fn record(&mut self, event: &'static str, object: Value, rv: u64) {
        let key = key(&object);
        if event == "DELETED" {
            self.known.remove(&key);
        } else {
            self.known.insert(key, (rv, object.clone()));
        }
        lock(&self.changes).push(Recorded {
            resource_version: rv,
            event,
            resource: self.resource.name(),
            object,
            at: SystemTime::now(),
        });
    }
}

/// What a list of the journal's came to.
enum Listing {
    /// Its objects are recorded; the list's resourceVersion.
    Listed(u64),
    /// The real server cannot answer it now (`429` while a watch cache fills, a `5xx`, no
    /// connection): try again after this long.
    Later(Duration),
    /// The resource is not served (`404`): perhaps later (a CRD not made yet).
    NotServed,
    /// The resource does not list (`405` for a review, say): it is never followed.
    Never,
}

/// How long the journal waits before it lists or watches again when the real server gives no
/// `Retry-After`.
const RETRY: Duration = Duration::from_millis(200);

/// The wait an answer asks for in its `Retry-After` (in seconds, at most a few), or [`RETRY`].
fn retry_after(headers: &HeaderMap) -> Duration {
    headers
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(RETRY, |seconds| {
            Duration::from_secs(seconds.min(5)).max(RETRY)
        })
}

/// How a watch of the journal ended.
enum Watched {
    /// It ended (a timeout, an error event); the newest version it saw.
    Until(u64),
    /// Its version is too old: list again.
    Expired,
    /// It could not start.
    Failed,
}

/// An object's (or a list's) resourceVersion as a number.
pub(crate) fn version(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

fn key(object: &Value) -> (String, String) {
    let meta = &object["metadata"];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (text(&meta["namespace"]), text(&meta["name"]))
}
