//! The poster: the queue of events and the background task that posts them (Kopf's
//! `_core/engines/posting.py`), retried with Kopf's backoffs.
//!
//! Invariants:
//! 1. Queueing never waits: an event is put into an unbounded queue, or dropped with a
//!    warning when [`PENDING_LIMIT`] events wait already (the API server is down, and they
//!    would only pile up) or the poster has stopped.
//! 2. One object's events are posted one by one, in order, by its worker; different objects'
//!    at once (up to `posting.worker_limit`): a retried event holds back its own object only.
//!    A worker with nothing to post for `posting.idle_timeout` ends; the router starts another
//!    for the object's next event. The router and the workers are nodes of the poster's tree.
//! 3. A failed post is retried after each of the event's backoffs (`posting.default_backoffs`
//!    for explicit events, `posting.logging_backoffs` for log records), at least a `429`'s
//!    `Retry-After`, if the failure may pass (connection errors, timeouts, `5xx`, `403`,
//!    `429`); then dropped with a warning. It never fails a handler.
//! 4. When the poster's tree is cancelled, no more events are taken; those taken are posted
//!    (retries included) until the drain's deadline ([`Poster::drain_until`], or
//!    [`DRAIN_TIMEOUT`] after the cancellation); what is left then is dropped, and counted in
//!    a warning. The router ends after its workers: nothing of the poster outlives its tree.
//! 5. The settings are read when an event is queued (`enabled`, `level`, `loggers`: atomics,
//!    as every log record asks) and when it is posted (the rest): a startup handler's change
//!    applies to what comes after it ([`Poster::configure`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Level;

use crate::aiokits::tasks::Tasks;
use crate::clients::retries::{self, Backoffs};
use crate::configs::settings::{PostingSettings, Settings};
use crate::helpers::sync::lock;

/// Events waiting to be posted beyond this many are dropped (invariant 1).
pub(crate) const PENDING_LIMIT: usize = 10_000;

/// After its tree is cancelled, a poster without a deadline of its own posts for this long.
pub(crate) const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// One event to post.
#[derive(Debug)]
pub(crate) struct Queued {
    /// `involvedObject`, without the namespace of cluster-scoped objects (the poster knows it).
    pub(super) subject: Map<String, Value>,
    pub(super) kind: String,
    pub(super) reason: String,
    pub(super) message: String,
    /// Delays before each retry of a failed post.
    pub(super) backoffs: Arc<[Duration]>,
}

/// Where an event comes from, which decides its backoffs (Kopf's `default_backoffs` or
/// `logging_backoffs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Posted by a handler: [`Events`](crate::Events), `kopf::info` and the others.
    Explicit,
    /// A handler's log record.
    Logging,
}

/// The operator's queue of events (a cheap handle: one count of one allocation).
#[derive(Debug, Clone)]
pub(crate) struct Poster {
    /// `None` for a poster that posts nothing.
    shared: Option<Arc<Shared>>,
}

/// What the handles and the poster's task share.
#[derive(Debug)]
struct Shared {
    sender: mpsc::UnboundedSender<Queued>,
    /// Read for every event and log record (invariant 5).
    enabled: AtomicBool,
    loggers: AtomicBool,
    /// The most verbose level posted, as [`level_rank`] ranks it.
    level: AtomicU8,
    /// The rest of the settings, read as events are queued and posted.
    settings: Mutex<Arc<Configured>>,
    /// Events queued and not yet posted or dropped (invariant 1).
    pending: AtomicUsize,
    /// Where the drain ends (invariant 4), if set before the cancellation.
    drain_until: Mutex<Option<Instant>>,
    /// Whether the queue being full was told already (it is told once per time it fills).
    full: AtomicBool,
}

/// The settings that the posting of an event reads.
#[derive(Debug)]
pub(super) struct Configured {
    pub(super) posting: PostingSettings,
    default_backoffs: Arc<[Duration]>,
    logging_backoffs: Arc<[Duration]>,
    enforce_retry_after: bool,
}

impl Configured {
    fn new(posting: &PostingSettings, enforce_retry_after: bool) -> Configured {
        Configured {
            posting: posting.clone(),
            default_backoffs: posting.default_backoffs.clone().into(),
            logging_backoffs: posting.logging_backoffs.clone().into(),
            enforce_retry_after,
        }
    }
}

/// `tracing` orders levels by verbosity (ERROR is the least verbose): a rank that keeps it.
fn level_rank(level: Level) -> u8 {
    match level {
        Level::ERROR => 1,
        Level::WARN => 2,
        Level::INFO => 3,
        Level::DEBUG => 4,
        Level::TRACE => 5,
    }
}

impl Poster {
    /// Starts a poster in `tasks` (a node of the cancellation tree), which drains for
    /// [`DRAIN_TIMEOUT`] once the node is cancelled, unless [`drain_until`](Self::drain_until)
    /// says otherwise. The networking settings are the operator's defaults.
    pub(crate) fn start(client: kube::Client, settings: &PostingSettings, tasks: &Tasks) -> Poster {
        let networking = crate::configs::settings::NetworkingSettings::default();
        Poster::start_with(client, settings, networking.enforce_retry_after, tasks)
    }

    /// Starts the operator's poster with all its settings.
    pub(crate) fn start_for(client: kube::Client, settings: &Settings, tasks: &Tasks) -> Poster {
        Poster::start_with(
            client,
            &settings.posting,
            settings.networking.enforce_retry_after,
            tasks,
        )
    }

    fn start_with(
        client: kube::Client,
        settings: &PostingSettings,
        enforce_retry_after: bool,
        tasks: &Tasks,
    ) -> Poster {
        let (sender, receiver) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            sender,
            enabled: AtomicBool::new(settings.enabled),
            loggers: AtomicBool::new(settings.loggers),
            level: AtomicU8::new(level_rank(settings.level)),
            settings: Mutex::new(Arc::new(Configured::new(settings, enforce_retry_after))),
            pending: AtomicUsize::new(0),
            drain_until: Mutex::new(None),
            full: AtomicBool::new(false),
        });
        let router = Router {
            client,
            counters: shared.clone(),
            workers: Arc::default(),
            tasks: tasks.child(),
        };
        tasks.spawn(router.run(receiver));
        Poster {
            shared: Some(shared),
        }
    }

    /// A poster that posts nothing.
    pub(crate) fn disabled() -> Poster {
        Poster { shared: None }
    }

    /// Whether this poster posts anything at all, whatever the settings say now.
    pub(crate) fn is_running(&self) -> bool {
        self.shared.is_some()
    }

    /// Whether events are posted (`posting.enabled`).
    pub(crate) fn enabled(&self) -> bool {
        self.shared
            .as_ref()
            .is_some_and(|shared| shared.enabled.load(Ordering::Relaxed))
    }

    /// Whether records or events of this level are posted, as Kopf's
    /// `record.levelno >= settings.posting.level` (and `posting.enabled`).
    pub(crate) fn passes(&self, level: Level) -> bool {
        self.shared.as_ref().is_some_and(|shared| {
            shared.enabled.load(Ordering::Relaxed)
                && level_rank(level) <= shared.level.load(Ordering::Relaxed)
        })
    }

    /// Whether handlers' log records of this level are posted (`posting.loggers` too).
    pub(crate) fn posts_records(&self, level: Level) -> bool {
        self.passes(level)
            && self
                .shared
                .as_ref()
                .is_some_and(|shared| shared.loggers.load(Ordering::Relaxed))
    }

    /// Takes the settings as they are now (after the startup handlers, which may change
    /// them): for the events queued from now on.
    pub(crate) fn configure(&self, settings: &Settings) {
        let Some(shared) = &self.shared else { return };
        let posting = &settings.posting;
        shared.enabled.store(posting.enabled, Ordering::Relaxed);
        shared.loggers.store(posting.loggers, Ordering::Relaxed);
        shared
            .level
            .store(level_rank(posting.level), Ordering::Relaxed);
        *lock(&shared.settings) = Arc::new(Configured::new(
            posting,
            settings.networking.enforce_retry_after,
        ));
    }

    /// Sets where the drain ends, once the poster's tree is cancelled (invariant 4).
    pub(crate) fn drain_until(&self, until: Instant) {
        if let Some(shared) = &self.shared {
            *lock(&shared.drain_until) = Some(until);
        }
    }

    /// Queues an event (invariant 1), unless it is about a core `v1` Event (each would beget
    /// another, forever).
    pub(crate) fn enqueue(
        &self,
        subject: &Map<String, Value>,
        kind: &str,
        reason: &str,
        message: String,
        origin: Origin,
        backoffs: Option<&Arc<[Duration]>>,
    ) {
        let Some(shared) = &self.shared else { return };
        if subject.get("apiVersion").and_then(Value::as_str) == Some("v1")
            && subject.get("kind").and_then(Value::as_str) == Some("Event")
        {
            return;
        }
        let pending = shared.pending.fetch_add(1, Ordering::Relaxed);
        if pending >= PENDING_LIMIT {
            shared.pending.fetch_sub(1, Ordering::Relaxed);
            if !shared.full.swap(true, Ordering::Relaxed) {
                tracing::warn!(target: "kopf::posting", pending, %reason, %message, "events are dropped: {PENDING_LIMIT} wait to be posted already (is the API server reachable?)");
            }
            return;
        }
        let backoffs = backoffs.cloned().unwrap_or_else(|| {
            let settings = lock(&shared.settings);
            match origin {
                Origin::Explicit => settings.default_backoffs.clone(),
                Origin::Logging => settings.logging_backoffs.clone(),
            }
        });
        let queued = Queued {
            subject: subject.clone(),
            kind: kind.to_string(),
            reason: reason.to_string(),
            message,
            backoffs,
        };
        if let Err(mpsc::error::SendError(dropped)) = shared.sender.send(queued) {
            shared.pending.fetch_sub(1, Ordering::Relaxed);
            tracing::debug!(target: "kopf::posting", reason = %dropped.reason, message = %dropped.message, "an event was dropped: the operator's poster has stopped");
        }
    }

    /// A poster whose queue the test reads: nothing posts from it.
    #[cfg(test)]
    pub(crate) fn for_test(settings: PostingSettings) -> (Poster, mpsc::UnboundedReceiver<Queued>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let shared = Shared {
            sender,
            enabled: AtomicBool::new(settings.enabled),
            loggers: AtomicBool::new(settings.loggers),
            level: AtomicU8::new(level_rank(settings.level)),
            settings: Mutex::new(Arc::new(Configured::new(&settings, false))),
            pending: AtomicUsize::new(0),
            drain_until: Mutex::new(None),
            full: AtomicBool::new(false),
        };
        let poster = Poster {
            shared: Some(Arc::new(shared)),
        };
        (poster, receiver)
    }

    /// Events queued and not yet posted or dropped.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.shared
            .as_ref()
            .map_or(0, |shared| shared.pending.load(Ordering::Relaxed))
    }
}

/// Which object an event is about: its events are posted in order by one worker (Kopf's
/// `_event_key`: the uid, or what names the object when there is none).
type Key = String;

fn key_of(subject: &Map<String, Value>) -> Key {
    let field = |name: &str| subject.get(name).and_then(Value::as_str).unwrap_or("");
    match field("uid") {
        "" => format!(
            "{}/{}/{}/{}",
            field("apiVersion"),
            field("kind"),
            field("namespace"),
            field("name")
        ),
        uid => uid.to_string(),
    }
}

/// Routes queued events to their objects' workers (invariant 2), until its node is cancelled
/// (it keeps a sender itself: the queue never closes before).
struct Router {
    client: kube::Client,
    counters: Arc<Shared>,
    /// The workers alive, by object: a queue into each.
    workers: Arc<Mutex<Workers>>,
    tasks: Tasks,
}

#[derive(Debug, Default)]
struct Workers {
    queues: HashMap<Key, mpsc::UnboundedSender<Queued>>,
    /// Set at the drain: workers end as soon as their queue is empty.
    draining: bool,
}

impl Router {
    async fn run(self, mut receiver: mpsc::UnboundedReceiver<Queued>) {
        let settings = lock(&self.counters.settings).clone();
        let limit = settings
            .posting
            .worker_limit
            .unwrap_or(Semaphore::MAX_PERMITS)
            .clamp(1, Semaphore::MAX_PERMITS);
        let permits = Arc::new(Semaphore::new(limit));
        let (alive, _) = watch::channel(0usize);
        let give_up = CancellationToken::new();
        let token = self.tasks.token().clone();
        loop {
            let queued = tokio::select! {
                biased;
                queued = receiver.recv() => queued,
                _ = token.cancelled() => break,
            };
            match queued {
                Some(queued) => self.route(queued, &permits, &alive, &give_up),
                None => break,
            }
        }
        // The drain (invariant 4): what was queued before is posted; nothing more is taken.
        receiver.close();
        let until =
            lock(&self.counters.drain_until).unwrap_or_else(|| Instant::now() + DRAIN_TIMEOUT);
        while let Ok(queued) = receiver.try_recv() {
            self.route(queued, &permits, &alive, &give_up);
        }
        {
            let mut workers = lock(&self.workers);
            workers.draining = true;
            // Their queues close: each worker ends once it posted what it has.
            workers.queues.clear();
        }
        let mut watching = alive.subscribe();
        let all_ended = watching.wait_for(|alive| *alive == 0);
        if tokio::time::timeout_at(until, all_ended).await.is_err() {
            let left = self.counters.pending.load(Ordering::Relaxed);
            tracing::warn!(target: "kopf::posting", events = left, "the operator stopped with events not posted yet (the API server did not take them in time); they are lost");
            give_up.cancel();
            let _ = watching.wait_for(|alive| *alive == 0).await;
        }
    }

    /// Hands an event to its object's worker, starting one if there is none.
    fn route(
        &self,
        queued: Queued,
        permits: &Arc<Semaphore>,
        alive: &watch::Sender<usize>,
        give_up: &CancellationToken,
    ) {
        let key = key_of(&queued.subject);
        let mut workers = lock(&self.workers);
        let queued = match workers.queues.get(&key) {
            Some(queue) => match queue.send(queued) {
                Ok(()) => return,
                // Its worker ended meanwhile (it removes its queue first: not here).
                Err(mpsc::error::SendError(queued)) => queued,
            },
            None => queued,
        };
        let (sender, receiver) = mpsc::unbounded_channel();
        let _ = sender.send(queued);
        if !workers.draining {
            workers.queues.insert(key.clone(), sender);
        }
        drop(workers);
        alive.send_modify(|alive| *alive += 1);
        let worker = Worker {
            key,
            client: self.client.clone(),
            counters: self.counters.clone(),
            workers: self.workers.clone(),
            permits: permits.clone(),
            alive: alive.clone(),
            give_up: give_up.clone(),
        };
        self.tasks.spawn(worker.run(receiver));
    }
}

/// Posts one object's events in order (invariant 2).
struct Worker {
    key: Key,
    client: kube::Client,
    counters: Arc<Shared>,
    workers: Arc<Mutex<Workers>>,
    permits: Arc<Semaphore>,
    alive: watch::Sender<usize>,
    give_up: CancellationToken,
}

impl Worker {
    async fn run(self, mut queue: mpsc::UnboundedReceiver<Queued>) {
        let worked = async {
            let Ok(_permit) = self.permits.acquire().await else {
                return;
            };
            loop {
                let idle = lock(&self.counters.settings).posting.idle_timeout;
                let queued = match tokio::time::timeout(idle, queue.recv()).await {
                    Ok(Some(queued)) => queued,
                    Ok(None) => return,
                    Err(_) => {
                        // Idle: ends, unless an event came just now (the router sends under
                        // the same lock, so none comes after the check).
                        let mut workers = lock(&self.workers);
                        match queue.try_recv() {
                            Ok(queued) => queued,
                            Err(_) => {
                                workers.queues.remove(&self.key);
                                return;
                            }
                        }
                    }
                };
                self.post(queued).await;
                self.counters.pending.fetch_sub(1, Ordering::Relaxed);
                self.counters.full.store(false, Ordering::Relaxed);
            }
        };
        tokio::select! {
            () = worked => {}
            () = self.give_up.cancelled() => {}
        }
        // What is left in its queue is lost (the warning counted it).
        queue.close();
        let left = std::iter::from_fn(|| queue.try_recv().ok()).count();
        self.counters.pending.fetch_sub(left, Ordering::Relaxed);
        {
            let mut workers = lock(&self.workers);
            // Its own queue only: a new worker for the object has not started while this
            // one's queue was in the map.
            if workers
                .queues
                .get(&self.key)
                .is_some_and(mpsc::UnboundedSender::is_closed)
            {
                workers.queues.remove(&self.key);
            }
        }
        self.alive.send_modify(|alive| *alive -= 1);
    }

    /// Posts an event, retrying as its backoffs say (invariant 3).
    async fn post(&self, queued: Queued) {
        let settings = lock(&self.counters.settings).clone();
        let namespace = queued
            .subject
            .get("namespace")
            .and_then(Value::as_str)
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| self.client.default_namespace())
            .to_string();
        let body = event_body(
            &settings.posting,
            &queued,
            &namespace,
            time::OffsetDateTime::now_utc(),
        );
        let body = serde_json::to_vec(&body).unwrap_or_default();
        let path = format!("/api/v1/namespaces/{namespace}/events");
        let backoffs = Backoffs {
            delays: &queued.backoffs,
            enforce_retry_after: settings.enforce_retry_after,
        };
        let mut attempt = 0;
        loop {
            let request = http::Request::post(&path)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
            // Not gated by the operator's term, nor guarded: an Event only adds (see the
            // module docs of posting).
            let result = match request {
                Ok(request) => self.client.request_text(request).await.map(drop),
                Err(error) => Err(kube::Error::HttpError(error)),
            };
            let error = match result {
                Ok(()) => return,
                Err(error) => error,
            };
            let wait = if retries::retriable(&error) {
                backoffs.wait(attempt, &error)
            } else {
                None
            };
            let Some(wait) = wait else {
                tracing::warn!(target: "kopf::posting", %error, r#type = %queued.kind, reason = %queued.reason, message = %queued.message, attempts = attempt + 1, "failed to post an event; ignoring and continuing");
                return;
            };
            attempt += 1;
            tracing::warn!(target: "kopf::posting", %error, ?wait, attempt, "posting an event failed; retrying");
            tokio::time::sleep(wait).await;
        }
    }
}

/// Kopf's `MAX_MESSAGE_LENGTH` (in characters) and `CUT_MESSAGE_INFIX`.
pub(crate) const MAX_MESSAGE_LENGTH: usize = 1024;
pub(crate) const CUT_MESSAGE_INFIX: &str = "...";

/// The Event as Kopf posts it (`kopf/_cogs/clients/events.py`).
pub(crate) fn event_body(
    settings: &PostingSettings,
    queued: &Queued,
    namespace: &str,
    now: time::OffsetDateTime,
) -> Value {
    let mut involved = queued.subject.clone();
    involved.insert("namespace".into(), namespace.into());
    let now = crate::configs::storage::timestamps::format_iso8601(now);
    json!({
        "metadata": {
            "namespace": namespace,
            "generateName": settings.event_name_prefix,
        },
        "action": "Action?",
        "type": queued.kind,
        "reason": queued.reason,
        "message": cut(&queued.message),
        "reportingComponent": settings.reporting_component,
        "reportingInstance": settings.reporting_instance,
        "source": {"component": settings.reporting_component},
        "involvedObject": involved,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "eventTime": now,
    })
}

/// Kopf's cut of long messages: the first 511 and the last 510 characters around `...`.
pub(crate) fn cut(message: &str) -> String {
    let length = message.chars().count();
    if length <= MAX_MESSAGE_LENGTH {
        return message.to_string();
    }
    let infix = CUT_MESSAGE_INFIX.len();
    let head = MAX_MESSAGE_LENGTH / 2 - infix / 2;
    let tail = MAX_MESSAGE_LENGTH / 2 - (infix - infix / 2);
    let prefix: String = message.chars().take(head).collect();
    let suffix: String = message.chars().skip(length - tail).collect();
    format!("{prefix}{CUT_MESSAGE_INFIX}{suffix}")
}

/// Events posted from anywhere in a program (`kopf::info` outside a handler) go to the poster
/// of the operator running there: the one running on the caller's tokio runtime, or, off any
/// runtime (a thread of the program's own), the only one running in the process.
pub(crate) mod running {
    use std::sync::{Mutex, Weak};

    use super::{Poster, Shared};
    use crate::helpers::sync::lock;

    static RUNNING: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

    struct Entry {
        runtime: Option<tokio::runtime::Id>,
        poster: Weak<Shared>,
        id: u64,
    }

    /// An operator's poster, findable while this lives.
    #[derive(Debug)]
    pub(crate) struct Registration(u64);

    impl Drop for Registration {
        fn drop(&mut self) {
            lock(&RUNNING).retain(|entry| entry.id != self.0);
        }
    }

    /// Makes the operator's poster the one for events posted from anywhere on this runtime.
    pub(crate) fn register(poster: &Poster) -> Option<Registration> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let shared = poster.shared.as_ref()?;
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let runtime = tokio::runtime::Handle::try_current().ok().map(|h| h.id());
        lock(&RUNNING).push(Entry {
            runtime,
            poster: std::sync::Arc::downgrade(shared),
            id,
        });
        Some(Registration(id))
    }

    /// What finding the operator's poster gave.
    #[derive(Debug)]
    pub(crate) enum Found {
        /// The one operator running here.
        One(Poster),
        /// None runs here.
        None,
        /// Several run here: which one is meant cannot be told.
        Several(usize),
    }

    /// The poster of the operator running here.
    pub(crate) fn find() -> Found {
        let runtime = tokio::runtime::Handle::try_current().ok().map(|h| h.id());
        let running = lock(&RUNNING);
        let alive: Vec<&Entry> = running
            .iter()
            .filter(|entry| entry.poster.strong_count() > 0)
            .collect();
        let here: Vec<&&Entry> = match runtime {
            Some(runtime) => alive
                .iter()
                .filter(|entry| entry.runtime == Some(runtime))
                .collect(),
            None => alive.iter().collect(),
        };
        match here.as_slice() {
            [] => Found::None,
            [entry] => match entry.poster.upgrade() {
                Some(shared) => Found::One(Poster {
                    shared: Some(shared),
                }),
                None => Found::None,
            },
            several => Found::Several(several.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    #[test]
    fn an_objects_key_is_its_uid_or_what_names_it() {
        let with_uid: Map<String, Value> =
            serde_json::from_value(serde_json::json!({"kind": "Pod", "name": "a", "uid": "u1"}))
                .unwrap();
        assert_eq!(key_of(&with_uid), "u1");
        let without: Map<String, Value> = serde_json::from_value(
            serde_json::json!({"apiVersion": "v1", "kind": "Node", "name": "n1"}),
        )
        .unwrap();
        assert_eq!(key_of(&without), "v1/Node//n1");
    }

    #[test]
    fn levels_rank_by_verbosity() {
        assert!(level_rank(Level::ERROR) < level_rank(Level::WARN));
        assert!(level_rank(Level::INFO) < level_rank(Level::DEBUG));
    }

    /// A scripted answer: the status code, and a `429`'s `Retry-After` in seconds.
    type Answer = (u16, Option<u32>);

    /// An API server that answers the posts of each message with the codes scripted for it
    /// (then `201`), and remembers when each post came and with which message.
    #[derive(Clone, Default)]
    struct Server {
        answers: Arc<Mutex<HashMap<String, VecDeque<Answer>>>>,
        posts: Arc<Mutex<Vec<(Duration, String, u16)>>>,
    }

    impl Server {
        fn answering(message: &str, answers: &[Answer]) -> Server {
            let server = Server::default();
            lock(&server.answers)
                .entry(message.to_string())
                .or_default()
                .extend(answers.iter().copied());
            server
        }

        fn and(self, message: &str, answers: &[Answer]) -> Server {
            lock(&self.answers)
                .entry(message.to_string())
                .or_default()
                .extend(answers.iter().copied());
            self
        }

        fn client(&self, started: Instant) -> kube::Client {
            let server = self.clone();
            let service = crate::clients::auth::tower_service_fn(
                move |request: http::Request<kube::client::Body>| {
                    let server = server.clone();
                    async move {
                        use http_body_util::BodyExt as _;
                        let body = request.into_body().collect().await?.to_bytes();
                        let event: Value = serde_json::from_slice(&body)?;
                        let message = event["message"].as_str().unwrap_or_default().to_string();
                        let (code, retry_after) = lock(&server.answers)
                            .get_mut(&message)
                            .and_then(VecDeque::pop_front)
                            .unwrap_or((201, None));
                        lock(&server.posts).push((started.elapsed(), message, code));
                        let mut status = serde_json::json!({
                            "kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "message": "scripted", "reason": "Scripted",
                            "code": code,
                        });
                        if let Some(seconds) = retry_after {
                            status["details"] = serde_json::json!({"retryAfterSeconds": seconds});
                        }
                        let answer = if code < 300 { event } else { status };
                        let response = http::Response::builder()
                            .status(code)
                            .body(kube::client::Body::from(serde_json::to_vec(&answer)?))?;
                        Ok(response)
                    }
                },
            );
            kube::Client::new(service, "default")
        }

        /// The posts so far: when (since the start), the message, the answer's code.
        fn posts(&self) -> Vec<(Duration, String, u16)> {
            lock(&self.posts).clone()
        }
    }

    fn subject(uid: &str) -> Map<String, Value> {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kopf.dev/v1", "kind": "KopfExample", "name": uid, "uid": uid,
            "namespace": "default",
        }))
        .unwrap()
    }

    fn post(poster: &Poster, uid: &str, message: &str) {
        poster.enqueue(
            &subject(uid),
            "Normal",
            "Test",
            message.into(),
            Origin::Explicit,
            None,
        );
    }

    async fn wait_posts(server: &Server, count: usize) -> Vec<(Duration, String, u16)> {
        for _ in 0..10_000 {
            let posts = server.posts();
            if posts.len() >= count {
                return posts;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{count} posts expected; only {:?}", server.posts());
    }

    fn secs(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    /// Kopf 1.45's retries: a transient failure is retried after each backoff in turn, a
    /// `429` waits at least its `Retry-After`, and one object's events stay in order behind
    /// its retried one; another object's are not held back.
    #[tokio::test(start_paused = true)]
    async fn failed_posts_are_retried_with_the_backoffs_in_order_per_object() {
        let server = Server::answering("a1", &[(500, None), (503, None), (429, Some(7))]);
        let started = Instant::now();
        let tree = Tasks::root(1);
        let poster = Poster::start(server.client(started), &PostingSettings::default(), &tree);
        post(&poster, "a", "a1");
        post(&poster, "a", "a2");
        let posts = wait_posts(&server, 4).await;
        // a1: 500, then 503 after 1 s, then 429 after 1 s, then 201 after 7 s (not 2 s).
        let a1: Vec<(Duration, u16)> = posts
            .iter()
            .filter(|(_, m, _)| m == "a1")
            .map(|(at, _, code)| (*at, *code))
            .collect();
        assert_eq!(
            a1,
            [
                (secs(0), 500),
                (secs(1), 503),
                (secs(2), 429),
                (secs(9), 201)
            ]
        );
        post(&poster, "b", "b1");
        let posts = wait_posts(&server, 6).await;
        let order: Vec<&str> = posts.iter().map(|(_, m, _)| m.as_str()).collect();
        assert_eq!(&order[4..], ["a2", "b1"], "a2 waited for a1: {posts:?}");
        assert_eq!(poster.pending(), 0);
        tree.cancel(crate::aiokits::tasks::StopReason::OperatorExiting);
        tree.wait().await;
    }

    /// A failure that cannot pass is not retried; spent backoffs drop the event.
    #[tokio::test(start_paused = true)]
    async fn lasting_failures_drop_the_event_after_its_backoffs() {
        let server = Server::answering("invalid", &[(422, None)])
            .and("unlucky", &[(500, None), (500, None), (500, None)]);
        let started = Instant::now();
        let tree = Tasks::root(1);
        let settings = PostingSettings {
            default_backoffs: vec![secs(1), secs(2)],
            ..PostingSettings::default()
        };
        let poster = Poster::start(server.client(started), &settings, &tree);
        post(&poster, "a", "invalid");
        post(&poster, "a", "unlucky");
        post(&poster, "a", "next");
        let posts = wait_posts(&server, 5).await;
        let seen: Vec<(&str, u16)> = posts.iter().map(|(_, m, c)| (m.as_str(), *c)).collect();
        assert_eq!(
            seen,
            [
                ("invalid", 422),
                ("unlucky", 500),
                ("unlucky", 500),
                ("unlucky", 500),
                ("next", 201)
            ]
        );
        tree.cancel(crate::aiokits::tasks::StopReason::OperatorExiting);
        tree.wait().await;
    }

    /// At the stop, what is queued is still posted, retries included, until the drain's
    /// deadline; what is left then is dropped, and the poster's tasks end.
    #[tokio::test(start_paused = true)]
    async fn a_stop_drains_until_the_deadline_and_no_longer() {
        let server = Server::answering("retried", &[(500, None), (500, None)]);
        let started = Instant::now();
        let tree = Tasks::root(1);
        let poster = Poster::start(server.client(started), &PostingSettings::default(), &tree);
        post(&poster, "a", "retried");
        post(&poster, "b", "at once");
        poster.drain_until(started + secs(5));
        tree.cancel(crate::aiokits::tasks::StopReason::OperatorExiting);
        tree.wait().await;
        let posts = server.posts();
        let seen: Vec<(Duration, &str, u16)> = posts
            .iter()
            .map(|(at, m, c)| (*at, m.as_str(), *c))
            .collect();
        assert!(seen.contains(&(secs(0), "at once", 201)), "{seen:?}");
        assert!(seen.contains(&(secs(2), "retried", 201)), "{seen:?}");
        post(&poster, "c", "after the stop");
        assert_eq!(poster.pending(), 0, "dropped, not queued");

        // A server that never takes them: the drain ends at its deadline.
        let server = Server::answering("lost", &[(503, None); 100]);
        let started = Instant::now();
        let tree = Tasks::root(1);
        let poster = Poster::start(server.client(started), &PostingSettings::default(), &tree);
        post(&poster, "a", "lost");
        poster.drain_until(started + secs(3));
        tree.cancel(crate::aiokits::tasks::StopReason::OperatorExiting);
        tree.wait().await;
        assert_eq!(started.elapsed(), secs(3), "the drain ends at its deadline");
        let attempts = server.posts().len();
        assert_eq!(attempts, 3, "at 0, 1 and 2 s: {:?}", server.posts());
    }

    /// `worker_limit` bounds the objects posted at once; `idle_timeout` ends idle workers,
    /// and an object's next event starts another.
    #[tokio::test(start_paused = true)]
    async fn the_worker_limit_holds_other_objects_back() {
        let server = Server::answering("a1", &[(500, None)]);
        let started = Instant::now();
        let tree = Tasks::root(1);
        let settings = PostingSettings {
            worker_limit: Some(1),
            ..PostingSettings::default()
        };
        let poster = Poster::start(server.client(started), &settings, &tree);
        post(&poster, "a", "a1");
        post(&poster, "b", "b1");
        let posts = wait_posts(&server, 3).await;
        let seen: Vec<(Duration, &str)> =
            posts.iter().map(|(at, m, _)| (*at, m.as_str())).collect();
        assert_eq!(
            seen,
            [(secs(0), "a1"), (secs(1), "a1"), (secs(2), "b1")],
            "b's worker starts once a's has been idle for a second"
        );
        post(&poster, "a", "a2");
        let posts = wait_posts(&server, 4).await;
        assert_eq!(posts[3].1, "a2");
        tree.cancel(crate::aiokits::tasks::StopReason::OperatorExiting);
        tree.wait().await;
    }
}
