//! Watch streams: newline-delimited JSON events replayed from the history, then live.
//!
//! A watch needs no task of its own: its response body is a stream that wakes on new
//! resourceVersions, reads the changes it has not sent yet from the history, and ends when the
//! client goes, the server stops, `timeoutSeconds` passes, or a test closes watches.
//!
//! A watch sends only what watches may see (`Shared::changes`): with a state file, changes
//! the file holds, so that no client sees a version a crash could take back. Changes are read
//! up to that version; initial events, read from the latest state, wait until it is reached.
//!
//! Injected faults shape the stream: it may end cleanly after some events, cut the connection
//! after some events (an error from the body, which makes hyper drop the connection), say
//! nothing at all, or list the initial objects in a seeded random order.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use http::StatusCode;
use http_body_util::{BodyExt as _, StreamBody};
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::reads::{shuffle, stale_version, table_for};
use super::selectors::Selectors;
use super::target::Target;
use crate::endpoints::control::Breach;
use crate::endpoints::control::lock;
use crate::endpoints::reply::{Cut, Reply};
use crate::endpoints::request::{Context, Format};
use crate::endpoints::shared::Shared;
use crate::semantics::status::{ApiError, ApiResult, status_object};
use crate::storage::catalog::ResourceDef;
use crate::storage::state::{Change, ChangeKind, Snapshot};

/// Starts a watch stream for a resource.
pub(crate) fn watch(
    shared: &Arc<Shared>,
    context: &Context,
    target: &Target<'_>,
) -> ApiResult<Reply> {
    let selectors = Selectors::parse(context, &target.def, shared.sharded_watches)?;
    super::reads::check_numbers(context)?;
    let query = &context.query;
    let send_initial = query.flag("sendInitialEvents");
    // `sendInitialEvents=false`: the watch starts from now, with no initial events.
    let no_initial = query.get("sendInitialEvents").is_some() && !send_initial;
    // An empty version is an unset one, as the real server takes it (kube-rs always sends
    // the parameter, empty for a watch from the current state).
    let requested = query.get("resourceVersion").filter(|rv| !rv.is_empty());
    let bookmarks = query.flag("allowWatchBookmarks");
    let timeout = query.number("timeoutSeconds").map(Duration::from_secs);
    let requested_rv = match requested {
        None => None,
        Some(text) => Some(text.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "resourceVersion: Invalid value: {text:?}: must be a number"
            ))
        })?),
    };
    if send_initial && query.get("resourceVersionMatch") != Some("NotOlderThan") {
        return Err(ApiError::invalid_options(
            "ListOptions",
            "FieldValueForbidden",
            "resourceVersionMatch",
            "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if context.silent_watch {
        return Ok(silent(shared));
    }
    let mut stream = WatchStream {
        shared: shared.clone(),
        def: target.def.clone(),
        version: target.version.to_string(),
        namespace: target.namespace.clone(),
        selectors,
        format: context.format,
        last_rv: 0,
        read_rv: 0,
        pending: VecDeque::new(),
        changes: shared.changes.subscribe(),
        bookmark_interval: bookmarks.then(|| *lock(&shared.bookmark_interval)),
        next_bookmark: Instant::now(),
        // A timeout too long to represent means no timeout.
        deadline: timeout.and_then(|t| Instant::now().checked_add(t)),
        closed: lock(&shared.watches).clone(),
        events_left: context.close_watch_after,
        cut_after: context.reset_watch_after,
        breach: context.break_stream,
        events_seen: 0,
        postponed: None,
        finished: false,
        shuffle_seed: context.shuffle_seed,
        awaited: None,
    };
    stream.next_bookmark = Instant::now() + stream.bookmark_interval.unwrap_or(Duration::MAX / 4);
    shared.read(|state| {
        let current = state.resource_version();
        stream.read_rv = current;
        match requested_rv {
            None | Some(0) if no_initial => stream.last_rv = current,
            Some(rv) if rv != 0 && !send_initial => {
                stream.last_rv = rv;
            }
            // As the watch cache: a watch-list from a version the server has not reached
            // waits for it a while, then fails with an ERROR event.
            Some(rv) if rv > current => {
                stream.last_rv = current;
                stream.awaited = Some((rv, Instant::now() + TOO_LARGE_VERSION_WAIT));
            }
            _ => {
                // A lagging view starts from the past, then replays every change since.
                let (current, snapshot) = match context.stale_by.filter(|_| requested_rv == Some(0))
                {
                    None => (current, Some(state.snapshot(&target.def.key()))),
                    Some(lag) => {
                        let rv = stale_version(state, lag);
                        (rv, state.objects_at(&target.def.key(), rv))
                    }
                };
                let initial: Vec<Arc<Value>> = snapshot
                    .iter()
                    .flat_map(Snapshot::iter)
                    .map(|(_, object)| object.clone())
                    .collect();
                stream.push_initial(initial, current, send_initial);
            }
        }
    });
    // Changes after the requested version that are already in the history.
    stream.catch_up();
    let guard = WatchGuard::new(shared);
    let events = futures::stream::unfold((stream, guard), |(mut stream, guard)| async move {
        match stream.next_line().await {
            Next::Line(line) => Some((Ok(Frame::data(line)), (stream, guard))),
            Next::End => None,
            Next::Cut => {
                // Not ready once, so that hyper flushes the events sent so far before the cut.
                tokio::task::yield_now().await;
                stream.cut_after = None;
                stream.pending.clear();
                stream.finished = true;
                Some((Err(Cut), (stream, guard)))
            }
        }
    });
    Ok(Reply {
        code: StatusCode::OK,
        body: StreamBody::new(events.boxed()).boxed_unsync(),
        content_type: "application/json",
        warnings: Vec::new(),
    })
}

/// A watch that is accepted and then says nothing until the client goes away or the
/// connection is dropped: its body is never ready (hyper sends the headers meanwhile).
fn silent(shared: &Arc<Shared>) -> Reply {
    let guard = WatchGuard::new(shared);
    let events = futures::stream::once(async move {
        let _counted = guard;
        std::future::pending::<Result<Frame<Bytes>, Cut>>().await
    });
    Reply {
        code: StatusCode::OK,
        body: StreamBody::new(events.boxed()).boxed_unsync(),
        content_type: "application/json",
        warnings: Vec::new(),
    }
}

/// What a watch stream sends next.
enum Next {
    Line(Bytes),
    /// The stream ends cleanly.
    End,
    /// The connection is cut (an injected fault).
    Cut,
}

/// Counts an open watch until its stream is dropped.
struct WatchGuard(Arc<Shared>);

impl WatchGuard {
    fn new(shared: &Arc<Shared>) -> WatchGuard {
        shared
            .counters
            .open_watches
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        WatchGuard(shared.clone())
    }
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.0
            .counters
            .open_watches
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

struct WatchStream {
    shared: Arc<Shared>,
    def: Arc<ResourceDef>,
    version: String,
    namespace: String,
    selectors: Selectors,
    /// Whole objects, table rows, or metadata only.
    format: Format,
    /// The newest resourceVersion whose changes were considered.
    last_rv: u64,
    /// The resourceVersion of the state the initial events were read from: nothing is sent
    /// before watches may see it.
    read_rv: u64,
    pending: VecDeque<Bytes>,
    changes: watch::Receiver<u64>,
    bookmark_interval: Option<Duration>,
    next_bookmark: Instant,
    deadline: Option<Instant>,
    closed: CancellationToken,
    events_left: Option<u64>,
    /// Events left before the connection is cut (an injected fault).
    cut_after: Option<u64>,
    /// The contract to break, and at which event (an injected, opted-in fault).
    breach: Option<(Breach, u64)>,
    /// Object events queued so far (bookmarks and errors not counted).
    events_seen: u64,
    /// An event held back to be sent after the next one (a reorder).
    postponed: Option<Bytes>,
    finished: bool,
    /// The seed of a shuffled initial listing (an injected fault).
    shuffle_seed: Option<u64>,
    /// A watch-list waiting for the server to reach its resourceVersion, until the instant.
    awaited: Option<(u64, Instant)>,
}

/// How long a watch-list from a future resourceVersion waits for it (the watch cache's
/// `blockTimeout`).
const TOO_LARGE_VERSION_WAIT: Duration = Duration::from_secs(3);

impl WatchStream {
    /// The next event line, or how the stream ends.
    async fn next_line(&mut self) -> Next {
        if let Some((rv, until)) = self.awaited.take() {
            self.await_version(rv, until).await;
        }
        loop {
            if self.cut_after == Some(0) {
                return Next::Cut;
            }
            let visible = *self.changes.borrow() >= self.read_rv;
            if visible && let Some(line) = self.pending.pop_front() {
                if let Some(left) = &mut self.events_left {
                    if *left == 0 {
                        return Next::End;
                    }
                    *left -= 1;
                }
                if let Some(left) = &mut self.cut_after {
                    *left -= 1;
                }
                return Next::Line(line);
            }
            if self.pending.is_empty() && (self.finished || self.events_left == Some(0)) {
                return Next::End;
            }
            let deadline = self
                .deadline
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400));
            tokio::select! {
                _ = self.closed.cancelled() => return Next::End,
                _ = tokio::time::sleep_until(deadline) => return Next::End,
                _ = tokio::time::sleep_until(self.next_bookmark) => {
                    self.catch_up();
                    if !self.finished {
                        self.push_bookmark(false);
                    }
                    self.next_bookmark = Instant::now() + self.bookmark_interval.unwrap_or(Duration::MAX / 4);
                }
                changed = self.changes.changed() => {
                    if changed.is_err() {
                        return Next::End;
                    }
                    self.catch_up();
                }
            }
        }
    }

    /// Lists the initial objects this watch sees as ADDED events, then (for a watch-list) the
    /// bookmark that ends them.
    fn push_initial(&mut self, objects: Vec<Arc<Value>>, current: u64, send_initial: bool) {
        let mut initial: Vec<&Value> = objects
            .iter()
            .filter(|object| {
                (self.namespace.is_empty()
                    || crate::storage::object::namespace(object) == self.namespace)
                    && self.selectors.matches(object)
            })
            .map(|object| &**object)
            .collect();
        if let Some(seed) = self.shuffle_seed {
            shuffle(&mut initial, seed);
        }
        for object in initial {
            self.push("ADDED", object);
        }
        self.last_rv = current;
        // The bookmark that ends them, only to a client that takes bookmarks.
        if send_initial && self.bookmark_interval.is_some() {
            self.push_bookmark(true);
        }
    }

    /// Waits until the server reaches `rv`, then lists the initial objects; or, at `until`,
    /// fails as the watch cache does: an ERROR event with a 504 Status, and the end.
    async fn await_version(&mut self, rv: u64, until: Instant) {
        loop {
            let shared = self.shared.clone();
            let reached = shared.read(|state| {
                let current = state.resource_version();
                (current >= rv).then(|| {
                    let objects = state.snapshot(&self.def.key());
                    (current, objects.iter().map(|(_, o)| o.clone()).collect())
                })
            });
            if let Some((current, objects)) = reached {
                self.read_rv = current;
                self.push_initial(objects, current, true);
                return;
            }
            tokio::select! {
                _ = self.closed.cancelled() => break,
                _ = tokio::time::sleep_until(until) => break,
                changed = self.changes.changed() => if changed.is_err() { break },
            }
        }
        let current = self.shared.read(|state| state.resource_version());
        let status = status_object(
            "Failure",
            504,
            "Timeout",
            &format!("Timeout: Too large resource version: {rv}, current: {current}"),
            Some(
                json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}),
            ),
        );
        self.push_event(json!({"type": "ERROR", "object": status}));
        self.finished = true;
    }

    /// Queues the changes since `last_rv` that this watch sees, up to the latest version
    /// watches may see.
    fn catch_up(&mut self) {
        let shared = self.shared.clone();
        let visible = *self.changes.borrow();
        shared.read(|state| {
            if state
                .catalog
                .lookup(&self.def.group, &self.version, &self.def.plural)
                .is_none()
            {
                self.finished = true;
                return;
            }
            match state.changes_since(self.last_rv) {
                None => self.expire(self.last_rv, state.compacted_rv()),
                Some(changes) => {
                    for change in changes.into_iter().take_while(|c| c.rv <= visible) {
                        self.last_rv = change.rv;
                        self.consider(&change);
                    }
                }
            }
        });
    }

    fn consider(&mut self, change: &Change) {
        if change.resource.0 != self.def.group || change.resource.1 != self.def.plural {
            return;
        }
        if !self.namespace.is_empty()
            && crate::storage::object::namespace(&change.object) != self.namespace
        {
            return;
        }
        let now = self.selectors.matches(&change.object);
        let before = change
            .previous
            .as_ref()
            .is_some_and(|p| self.selectors.matches(p));
        let kind = match (change.kind, before, now) {
            (ChangeKind::Added, _, true) => "ADDED",
            (ChangeKind::Modified, true, true) => "MODIFIED",
            (ChangeKind::Modified, false, true) => "ADDED",
            (ChangeKind::Modified, true, false) => {
                // As the watch cache: an object that leaves the selection is deleted as it last
                // matched (the watcher never saw the change), at the change's version.
                if let Some(previous) = &change.previous {
                    let mut left = (**previous).clone();
                    left["metadata"]["resourceVersion"] = json!(change.rv.to_string());
                    self.push("DELETED", &left);
                }
                return;
            }
            (ChangeKind::Deleted, true, _) => "DELETED",
            _ => return,
        };
        self.push(kind, &change.object);
    }

    fn push(&mut self, kind: &str, object: &Value) {
        let target_object = self.rendered(object);
        let number = self.events_seen;
        self.events_seen += 1;
        let breach = match self.breach {
            Some((breach, at)) if at == number => Some(breach),
            _ => None,
        };
        let line = line_of(&json!({"type": kind, "object": target_object}));
        match breach {
            Some(Breach::Drop) => {}
            Some(Breach::Duplicate) => {
                self.pending.push_back(line.clone());
                self.pending.push_back(line);
            }
            Some(Breach::Reorder) => self.postponed = Some(line),
            None => {
                self.pending.push_back(line);
                if let Some(postponed) = self.postponed.take() {
                    self.pending.push_back(postponed);
                }
            }
        }
    }

    fn rendered(&self, object: &Value) -> Value {
        let path = crate::endpoints::request::ObjectPath {
            group: self.def.group.clone(),
            version: self.version.clone(),
            namespace: None,
            plural: self.def.plural.clone(),
            name: None,
            subresource: None,
        };
        let target = Target {
            def: self.def.clone(),
            version: &self.version,
            path: &path,
            namespace: String::new(),
            format: self.format,
        };
        let rendered = target.answer(object);
        if self.format == Format::Table {
            let rv = crate::storage::object::resource_version(&rendered).to_string();
            return table_for(&target, &[rendered], json!({"resourceVersion": rv}));
        }
        rendered
    }

    fn push_bookmark(&mut self, initial_events_end: bool) {
        let mut metadata = json!({"resourceVersion": self.last_rv.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = match self.format {
            Format::Metadata(version) | Format::MetadataList(version) => {
                json!({"kind": "PartialObjectMetadata", "apiVersion": format!("meta.k8s.io/{version}"), "metadata": metadata})
            }
            _ => {
                json!({"kind": self.def.kind, "apiVersion": self.def.api_version(&self.version), "metadata": metadata})
            }
        };
        self.push_event(json!({"type": "BOOKMARK", "object": object}));
    }

    /// The history no longer reaches back to `rv`: one ERROR event, then the stream ends.
    fn expire(&mut self, rv: u64, compacted: u64) {
        let message = format!(
            "too old resource version: {rv} ({})",
            compacted.saturating_add(1)
        );
        let status = status_object("Failure", 410, "Expired", &message, None);
        self.push_event(json!({"type": "ERROR", "object": status}));
        self.finished = true;
    }

    fn push_event(&mut self, event: Value) {
        self.pending.push_back(line_of(&event));
    }
}

/// An event as a line of the stream.
fn line_of(event: &Value) -> Bytes {
    let mut line = serde_json::to_vec(event).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}
