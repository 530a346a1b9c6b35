//! A proxy in front of a real API server: each request goes to the upstream
//! (`endpoints::upstream`) and its answer streams back, shaped by the injected faults that
//! fired for it, so that tests steer a real server as they steer the fake one.
//!
//! The router does what it does for the fake server (it counts and logs the request, fires the
//! faults, answers injected errors and delays, holds writes before or after they are made,
//! fails or cuts an answer after the write, and cuts a list short); what is left is done here,
//! on the upstream's answer:
//!
//! - an injected conflict reads the object first (a missing one gets the upstream's `404`),
//!   makes the competing write for real when asked, and answers `409 Conflict` without
//!   forwarding the request;
//! - a silent watch is answered here and never reaches the upstream;
//! - a watch stream is relayed line by line (one event per line, in JSON): it may end cleanly
//!   or be cut after some lines, and, with contract-breaking faults allowed, lose, repeat or
//!   swap one event; `close_watches` and a restart end it;
//! - with a journal, a resource's changes are followed from its first request on, and a
//!   write's answer waits until the journal holds it (`endpoints::journal`);
//! - a list's items are shuffled with the fault's seed, and so are the initial events of a
//!   watch that asks for them with `sendInitialEvents` (those of a watch without it cannot be
//!   told from the live ones, and keep their order).
//!
//! Requests go with the upstream admin's client certificate, except those that carry a
//! credential of their own (a ServiceAccount's token): those go with theirs, so that the
//! upstream authenticates and authorizes them as it would without the proxy. When the proxy
//! requires a token of its own ([`FakeApiServerBuilder::token`]), that token stands for the
//! admin, and a request without any token is anonymous upstream.
//!
//! [`FakeApiServerBuilder::token`]: crate::FakeApiServerBuilder::token

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};
use futures::StreamExt as _;
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use http_body_util::{BodyExt as _, StreamBody};
use hyper::body::{Frame, Incoming};
use rand::SeedableRng as _;
use rand::rngs::StdRng;
use rand::seq::SliceRandom as _;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::access::Access;
use super::control::{Breach, lock};
use super::journal::{Followed, Journal, version};
use super::reply::{Body, Cut, full};
use super::request::{Context, Route, Verb};
use super::shared::Shared;
use super::upstream::{Credentials, Upstream};
use crate::semantics::status::{ApiError, ApiResult, Subject};

/// Response headers of one hop, and the length (the proxy may change the body; hyper sets the
/// length or chunks the body itself).
const NOT_RELAYED: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "content-length",
    "trailer",
];

/// Forwards a request to the upstream and relays its answer, shaped by the faults in
/// `context`. Answers that the upstream gives are returned as they are, errors included; an
/// `Err` is the proxy's own answer (the upstream could not be reached, or a fault cannot be
/// applied).
///
/// # Cancellation safety
///
/// Cancel-safe: dropping it drops the upstream request (and its connection, if the answer
/// was still coming).
pub(crate) async fn forward(
    shared: &Arc<Shared>,
    upstream: &Upstream,
    context: &Context,
    headers: &HeaderMap,
    path_and_query: &str,
    body: Bytes,
) -> ApiResult<Response<Body>> {
    let credentials = credentials(headers, &shared.access);
    let unsharded;
    let path_and_query = if shared.sharded_watches {
        path_and_query
    } else {
        unsharded = without_shard_selector(path_and_query);
        &unsharded
    };
    if context.verb == Verb::Watch && context.silent_watch {
        return Ok(silent(shared));
    }
    if let Some(compete) = context.conflict
        && matches!(context.verb, Verb::Update | Verb::Patch | Verb::Delete)
        && let Route::Object(path) = &context.route
    {
        // An injected conflict: as if a competing writer had changed the object first.
        let object_path = object_path(path_and_query, path.subresource.as_deref());
        let current = send(
            upstream,
            Method::GET,
            &object_path,
            &HeaderMap::new(),
            Bytes::new(),
        )
        .await?;
        if !current.status().is_success() {
            return Ok(relayed(current));
        }
        if compete {
            competing_write(upstream, &object_path).await?;
        }
        let name = path.name.as_deref().unwrap_or_default();
        let subject = Subject {
            group: &path.group,
            plural: &path.plural,
            name,
        };
        return Err(ApiError::stale(subject));
    }
    let followed = match (&shared.journal, &context.route) {
        (Some(journal), Route::Object(path)) => {
            let followed = Followed {
                group: path.group.clone(),
                version: path.version.clone(),
                plural: path.plural.clone(),
            };
            journal.follow(&followed).await;
            Some((journal, followed, journal.mark()))
        }
        _ => None,
    };
    let answer = upstream
        .send(
            context.method.clone(),
            path_and_query,
            headers,
            body,
            credentials,
        )
        .await
        .map_err(|error| unreachable_upstream(upstream, &error))?;
    if !answer.status().is_success() {
        return Ok(relayed(answer));
    }
    match context.verb {
        Verb::Create | Verb::Update | Verb::Patch | Verb::Delete if followed.is_some() => {
            let (journal, followed, mark) = followed.expect("just matched");
            journaled(journal, &followed, context, mark, answer).await
        }
        Verb::Watch => watch(shared, context, answer),
        Verb::List if context.shuffle_seed.is_some() => {
            shuffled_list(answer, context.shuffle_seed.unwrap_or_default()).await
        }
        _ => Ok(relayed(answer)),
    }
}

/// A write's answer once the journal holds the version it made (as on the fake server, a
/// client that saw its write answered finds it in the journal).
async fn journaled(
    journal: &Journal,
    followed: &Followed,
    context: &Context,
    mark: usize,
    answer: Response<Incoming>,
) -> ApiResult<Response<Body>> {
    let (mut parts, body) = answer.into_parts();
    strip(&mut parts.headers);
    let bytes = body
        .collect()
        .await
        .map_err(|e| ApiError::internal(format!("reading an answer from upstream failed: {e}")))?
        .to_bytes();
    match serde_json::from_slice::<Value>(&bytes) {
        // A deletion done at once tells no version: its DELETED event is waited for.
        Ok(status) if status["kind"] == "Status" => {
            if let Route::Object(path) = &context.route {
                let namespace = path.namespace.as_deref().unwrap_or_default();
                let name = path.name.as_deref().unwrap_or_default();
                journal.deleted(followed, (namespace, name), mark).await;
            }
        }
        Ok(object) => journal.caught_up(followed, version(&object)).await,
        Err(_) => {}
    }
    Ok(Response::from_parts(parts, full(bytes)))
}

/// Whose credentials a request goes upstream with (see the module's documentation).
fn credentials(headers: &HeaderMap, access: &Access) -> Credentials {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.strip_prefix("Bearer ").unwrap_or(v));
    match given {
        Some(token) if token == access.admin_token() => Credentials::Admin,
        // As on the fake server: without credentials where none are required, the admin.
        None if !access.required() => Credentials::Admin,
        _ => Credentials::Own,
    }
}

/// The request without its `shardSelector`: a proxy built without sharded watches stands for
/// a server without the `ShardedListAndWatch` feature gate, which ignores the parameter (the
/// real one behind it has the gate on).
fn without_shard_selector(path_and_query: &str) -> String {
    let Some((path, query)) = path_and_query.split_once('?') else {
        return path_and_query.to_string();
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| pair.split('=').next() != Some("shardSelector"))
        .collect();
    if kept.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", kept.join("&"))
    }
}

/// A request of the proxy's own, as the upstream admin.
async fn send(
    upstream: &Upstream,
    method: Method,
    path_and_query: &str,
    headers: &HeaderMap,
    body: Bytes,
) -> ApiResult<Response<Incoming>> {
    upstream
        .send(method, path_and_query, headers, body, Credentials::Admin)
        .await
        .map_err(|error| unreachable_upstream(upstream, &error))
}

/// The path of the object itself, for a request to it or to its subresource.
fn object_path(path_and_query: &str, subresource: Option<&str>) -> String {
    let path = path_and_query.split('?').next().unwrap_or_default();
    match subresource {
        Some(sub) => path
            .strip_suffix(&format!("/{sub}"))
            .unwrap_or(path)
            .to_string(),
        None => path.to_string(),
    }
}

/// The annotation a competing writer (an injected conflict) sets, as on the fake server.
const COMPETING_WRITER: &str = "fake.kopf.dev/competing-writer";

/// A write by someone else, for an injected conflict: the annotation [`COMPETING_WRITER`]
/// changes, so the object's resourceVersion moves on.
async fn competing_write(upstream: &Upstream, object_path: &str) -> ApiResult<()> {
    let written = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
        .to_string();
    let patch = json!({"metadata": {"annotations": {COMPETING_WRITER: written}}});
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/merge-patch+json"),
    );
    headers.insert(
        header::USER_AGENT,
        HeaderValue::from_static("fake-competing-writer"),
    );
    let path = format!("{object_path}?fieldManager=fake-competing-writer");
    let body = Bytes::from(serde_json::to_vec(&patch).unwrap_or_default());
    let answer = send(upstream, Method::PATCH, &path, &headers, body).await?;
    if answer.status().is_success() {
        Ok(())
    } else {
        Err(ApiError::internal(format!(
            "the competing write of an injected conflict failed upstream with {}",
            answer.status()
        )))
    }
}

fn unreachable_upstream(
    upstream: &Upstream,
    error: &hyper_util::client::legacy::Error,
) -> ApiError {
    let mut message = format!(
        "the proxy could not reach the API server at {}: {error}",
        upstream.url()
    );
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "ServiceUnavailable",
        message,
    )
}

/// The upstream's answer as it comes, streamed.
fn relayed(answer: Response<Incoming>) -> Response<Body> {
    let (mut parts, body) = answer.into_parts();
    strip(&mut parts.headers);
    Response::from_parts(parts, body.map_err(|_| Cut).boxed_unsync())
}

fn strip(headers: &mut HeaderMap) {
    for name in NOT_RELAYED {
        headers.remove(name);
    }
}

/// A list with its items (or a table's rows) in the seeded order of an injected
/// [`ShuffleList`](super::control::FaultAction::ShuffleList).
async fn shuffled_list(answer: Response<Incoming>, seed: u64) -> ApiResult<Response<Body>> {
    let (mut parts, body) = answer.into_parts();
    strip(&mut parts.headers);
    let bytes = body
        .collect()
        .await
        .map_err(|e| ApiError::internal(format!("reading a list from upstream failed: {e}")))?
        .to_bytes();
    let is_json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !is_json {
        return Err(unshapeable("shuffle_list", &parts.headers));
    }
    let mut list: Value = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::internal(format!("a list from upstream is not JSON: {e}")))?;
    for field in ["items", "rows"] {
        if let Some(items) = list.get_mut(field).and_then(Value::as_array_mut) {
            items.shuffle(&mut StdRng::seed_from_u64(seed));
        }
    }
    let mut bytes = serde_json::to_vec(&list).unwrap_or_default();
    bytes.push(b'\n');
    Ok(Response::from_parts(parts, full(bytes)))
}

/// A fault that needs to read a body the proxy cannot read (a protobuf one, say).
fn unshapeable(fault: &str, headers: &HeaderMap) -> ApiError {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("no content type");
    ApiError::internal(format!(
        "the injected fault {fault} reads answers in JSON, and this one came as {content_type}; \
         ask for application/json to use it in front of a real API server"
    ))
}

/// Counts an open watch until its stream is dropped.
struct WatchGuard(Arc<Shared>);

impl WatchGuard {
    fn new(shared: &Arc<Shared>) -> WatchGuard {
        shared.counters.open_watches.fetch_add(1, Ordering::SeqCst);
        WatchGuard(shared.clone())
    }
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.0.counters.open_watches.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A watch that is accepted and then says nothing until the client goes away or the
/// connection is dropped; the upstream never hears of it.
fn silent(shared: &Arc<Shared>) -> Response<Body> {
    let guard = WatchGuard::new(shared);
    let events = futures::stream::once(async move {
        let _counted = guard;
        std::future::pending::<Result<Frame<Bytes>, Cut>>().await
    });
    let mut response = Response::new(StreamBody::new(events.boxed()).boxed_unsync());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Relays a watch stream, shaped by the faults in `context`.
fn watch(
    shared: &Arc<Shared>,
    context: &Context,
    answer: Response<Incoming>,
) -> ApiResult<Response<Body>> {
    let (mut parts, upstream) = answer.into_parts();
    strip(&mut parts.headers);
    let shuffle = context
        .shuffle_seed
        .filter(|_| context.query.flag("sendInitialEvents"));
    let shaped = context.close_watch_after.is_some()
        || context.reset_watch_after.is_some()
        || context.break_stream.is_some()
        || shuffle.is_some();
    let is_json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if shaped && !is_json {
        return Err(unshapeable("of this watch", &parts.headers));
    }
    let relay = Relay {
        upstream,
        partial: BytesMut::new(),
        ready: VecDeque::new(),
        ended: false,
        closed: lock(&shared.watches).clone(),
        lines_left: context.close_watch_after,
        cut_after: context.reset_watch_after,
        breach: context.break_stream,
        events_seen: 0,
        postponed: None,
        initial: shuffle.map(|seed| (seed, Vec::new())),
    };
    let guard = WatchGuard::new(shared);
    let lines = futures::stream::unfold((relay, guard), |(mut relay, guard)| async move {
        match relay.next_line().await {
            Next::Line(line) => Some((Ok(Frame::data(line)), (relay, guard))),
            Next::End => None,
            Next::Cut => {
                // Not ready once, so that hyper flushes the lines sent so far before the cut.
                tokio::task::yield_now().await;
                relay.ended = true;
                relay.ready.clear();
                relay.cut_after = None;
                Some((Err(Cut), (relay, guard)))
            }
        }
    });
    Ok(Response::from_parts(
        parts,
        StreamBody::new(lines.boxed()).boxed_unsync(),
    ))
}

/// What a relayed watch sends next.
enum Next {
    Line(Bytes),
    /// The stream ends cleanly.
    End,
    /// The connection is cut (an injected fault, or the upstream cut its own).
    Cut,
}

/// A watch stream on its way from the upstream to the client.
struct Relay {
    upstream: Incoming,
    /// The start of a line whose end has not come yet.
    partial: BytesMut,
    /// Whole lines to send.
    ready: VecDeque<Bytes>,
    /// The upstream ended its stream.
    ended: bool,
    /// Cancelled to end every open watch (`close_watches`, a restart).
    closed: CancellationToken,
    /// Lines left before the stream ends (an injected `close_watch_after`).
    lines_left: Option<u64>,
    /// Lines left before the connection is cut (an injected `reset_mid_body`).
    cut_after: Option<u64>,
    /// The contract to break, and at which event (an injected, opted-in fault).
    breach: Option<(Breach, u64)>,
    /// Object events seen so far (bookmarks and errors not counted).
    events_seen: u64,
    /// An event held back to be sent after the next one (a reorder).
    postponed: Option<Bytes>,
    /// The seed of a shuffled initial listing, and its events so far, until the bookmark that
    /// ends them.
    initial: Option<(u64, Vec<Bytes>)>,
}

impl Relay {
    async fn next_line(&mut self) -> Next {
        loop {
            if self.cut_after == Some(0) {
                return Next::Cut;
            }
            if let Some(line) = self.ready.pop_front() {
                if let Some(left) = &mut self.lines_left {
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
            if self.ended || self.lines_left == Some(0) {
                return Next::End;
            }
            tokio::select! {
                () = self.closed.cancelled() => return Next::End,
                frame = self.upstream.frame() => match frame {
                    None => self.end(),
                    Some(Err(_)) => return Next::Cut,
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            self.split(&data);
                        }
                    }
                },
            }
        }
    }

    /// Takes the whole lines out of what arrived.
    fn split(&mut self, data: &[u8]) {
        self.partial.extend_from_slice(data);
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line = self.partial.split_to(end + 1).freeze();
            self.consider(line);
        }
    }

    /// The upstream ended its stream: what is left goes out.
    fn end(&mut self) {
        self.ended = true;
        if !self.partial.is_empty() {
            let rest = std::mem::take(&mut self.partial).freeze();
            self.consider(rest);
        }
        if let Some((_, events)) = self.initial.take() {
            self.ready.extend(events);
        }
        if let Some(postponed) = self.postponed.take() {
            self.ready.push_back(postponed);
        }
    }

    /// One line of the stream: an event, queued as the faults say.
    fn consider(&mut self, line: Bytes) {
        let needs_reading = self.breach.is_some() || self.initial.is_some();
        let event: Value = if needs_reading {
            serde_json::from_slice(&line).unwrap_or(Value::Null)
        } else {
            Value::Null
        };
        let kind = event["type"].as_str().unwrap_or_default();
        let is_object_event = matches!(kind, "ADDED" | "MODIFIED" | "DELETED");
        if let Some((seed, events)) = &mut self.initial {
            if is_object_event {
                events.push(line);
                return;
            }
            let ends_initial = kind == "BOOKMARK"
                && event["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"]
                    == "true";
            if ends_initial {
                let mut events = std::mem::take(events);
                events.shuffle(&mut StdRng::seed_from_u64(*seed));
                self.initial = None;
                for event in events {
                    self.queue_event(event);
                }
            }
            self.ready.push_back(line);
            return;
        }
        if is_object_event {
            self.queue_event(line);
        } else {
            self.ready.push_back(line);
        }
    }

    /// An object event, dropped, repeated or postponed when it is the one to breach.
    fn queue_event(&mut self, line: Bytes) {
        let number = self.events_seen;
        self.events_seen += 1;
        let breach = match self.breach {
            Some((breach, at)) if at == number => Some(breach),
            _ => None,
        };
        match breach {
            Some(Breach::Drop) => {}
            Some(Breach::Duplicate) => {
                self.ready.push_back(line.clone());
                self.ready.push_back(line);
            }
            Some(Breach::Reorder) => self.postponed = Some(line),
            None => {
                self.ready.push_back(line);
                if let Some(postponed) = self.postponed.take() {
                    self.ready.push_back(postponed);
                }
            }
        }
    }
}
