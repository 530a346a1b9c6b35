//! What tests can see and steer: counters, the request log, and injected faults.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde::{Deserialize, Serialize};

/// Counters of the server's activity, as `GET /_fake/stats` returns them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// TCP connections open right now.
    pub open_connections: usize,
    /// Watch streams open right now.
    pub open_watches: usize,
    /// Requests so far, by verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, `other`) and then by resource (`plural` or `plural.group`, with
    /// `/subresource` appended for subresources, `-` for non-resource paths).
    pub requests: BTreeMap<String, BTreeMap<String, u64>>,
    /// Injected faults that fired so far, by their actions' names (`commit_then_fail`,
    /// `hold`, ...).
    #[serde(default)]
    pub faults: BTreeMap<String, u64>,
    /// Objects stored.
    pub objects: usize,
    /// Changes kept for watches to replay.
    pub history: usize,
    /// The latest resourceVersion.
    pub resource_version: u64,
}

impl Stats {
    /// Requests with this verb to this resource (`plural` or `plural.group`).
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        self.requests
            .get(verb)
            .and_then(|r| r.get(resource))
            .copied()
            .unwrap_or(0)
    }

    /// Requests with this verb to any resource.
    pub fn count_verb(&self, verb: &str) -> u64 {
        self.requests
            .get(verb)
            .map(|r| r.values().sum())
            .unwrap_or(0)
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedRequest {
    /// The HTTP method.
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The raw query string.
    pub query: String,
    /// The Kubernetes verb (`get`, `list`, `watch`, `patch`, ...).
    pub verb: String,
    /// The resource as counted in [`Stats::requests`].
    pub resource: String,
    /// The namespace in the path, if any.
    pub namespace: Option<String>,
    /// The object's name in the path, if any.
    pub name: Option<String>,
    /// The `Content-Type` of the request body, if any.
    pub content_type: Option<String>,
    /// The client's `User-Agent`, if any.
    #[serde(default)]
    pub user_agent: Option<String>,
    /// The injected faults that fired for this request, by their actions' names
    /// (`commit_then_fail`, `hold`, ...).
    #[serde(default)]
    pub faults: Vec<String>,
    /// The response's status code; 0 when the connection was dropped without an answer (an
    /// injected [`FaultAction::CommitThenReset`]).
    pub code: u16,
}

/// What an injected fault does to the requests it matches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultAction {
    /// Answer with this status code (and a Kubernetes `Status` body with the usual reason);
    /// with `retry_after`, also the `Retry-After` header and `details.retryAfterSeconds`.
    Respond {
        /// The HTTP status code.
        code: u16,
        /// Seconds to wait before retrying.
        #[serde(default)]
        retry_after: Option<u64>,
    },
    /// Handle the request normally after a delay.
    Delay {
        /// The delay in milliseconds.
        millis: u64,
    },
    /// For watches: end the stream after this many events (0: right after it starts).
    CloseWatchAfter {
        /// Events to send before the stream ends.
        events: u64,
    },
    /// For writes (create, update, patch, delete, deletecollection): make the change for real,
    /// then answer with this status code (a `Status` as for [`Respond`](Self::Respond))
    /// instead of the result. The client believes that its write failed, but watchers see the
    /// change and a later read finds it. A write that fails on its own gets its real answer.
    CommitThenFail {
        /// The HTTP status code, usually a 5xx.
        code: u16,
    },
    /// For writes (create, update, patch, delete, deletecollection): make the change for real,
    /// then drop the connection without an answer, as a server that crashed right after
    /// committing would. A write that fails on its own gets its real answer.
    CommitThenReset,
    /// For lists and watches: send a part of the body, then drop the connection abruptly (not
    /// a clean end of the stream: the client sees a truncated body or chunked stream).
    ///
    /// A list sends the first `bytes` of its JSON (half of it when absent; never all of it)
    /// under a `Content-Length` of the whole. A watch sends `events` events (0: none, right
    /// after the headers), then drops.
    ResetMidBody {
        /// For watches: events to send before the connection drops.
        #[serde(default)]
        events: u64,
        /// For lists: bytes of the body to send before the connection drops.
        #[serde(default)]
        bytes: Option<u64>,
    },
    /// For watches: accept the watch (`200` and its headers) and then say nothing, no events
    /// and no bookmarks, ignoring `timeoutSeconds` and [`close_watches`], until the client goes
    /// away or the server restarts or stops: a stalled stream (a half-open connection) that
    /// only a client's inactivity timeout notices.
    ///
    /// [`close_watches`]: crate::FakeApiServer::close_watches
    SilentWatch,
    /// For updates, patches and deletions of an existing object: answer `409 Conflict`, as the
    /// real server does when the request's resourceVersion is older than the object's because
    /// a competing writer changed it first. The write is not made.
    ///
    /// With `compete`, a competing write really happens first: the annotation
    /// `fake.kopf.dev/competing-writer` is set (to the version of that write) by the manager
    /// `fake-competing-writer`, so the object's resourceVersion moves on, watchers see a
    /// MODIFIED event, and a retry after a fresh GET succeeds (once the rule is spent).
    Conflict {
        /// Make the competing write for real before answering.
        #[serde(default)]
        compete: bool,
    },
    /// For lists and watches: serve the items of a list (each page of it) and the initial
    /// ADDED events of a watch in a random order, drawn from the server's seeded generator,
    /// instead of the usual order by namespace and name.
    ShuffleList,
    /// For writes (create, update, patch, delete, deletecollection): hold the request until
    /// the test lets it go ([`FakeApiServer::release_held`]) or cuts it
    /// ([`FakeApiServer::cut_held`]), and tell the test that it waits
    /// ([`FakeApiServer::wait_held`]). With `commit`, the write is made first and only the
    /// answer waits: a client killed meanwhile dies right after its write landed. Without, the
    /// write waits before it is made: a client killed meanwhile dies before its write landed,
    /// and cutting it makes nothing. The chaos suite kills an operator at each of its writes
    /// this way.
    ///
    /// [`FakeApiServer::release_held`]: crate::FakeApiServer::release_held
    /// [`FakeApiServer::cut_held`]: crate::FakeApiServer::cut_held
    /// [`FakeApiServer::wait_held`]: crate::FakeApiServer::wait_held
    Hold {
        /// Make the write before holding its answer.
        commit: bool,
    },
    /// For gets, lists and watches with `resourceVersion=0` ("any version", which the real
    /// server answers from its watch cache): serve the state as it was this many changes ago,
    /// as an API server whose cache lags behind does (a list's resourceVersion says the old
    /// version; a watch sends the old objects, then every change since). A client that saw
    /// newer versions before sees time go backwards: a stale read. Reads without a
    /// resourceVersion are consistent on a real server, and stay so.
    StaleView {
        /// How many changes (resourceVersions) the view lags behind.
        versions: u64,
    },
    /// **Contract-breaking**, for watches: break the ordering guarantee of one stream at its
    /// event number `after` (from 0; bookmarks and errors do not count): drop that event,
    /// send it twice, or send it after the next one. A real API server never does this within
    /// one stream; the fault exists to see what an operator makes of a broken server or
    /// proxy, and the server refuses it unless built with
    /// [`FakeApiServerBuilder::contract_breaking_faults`].
    ///
    /// [`FakeApiServerBuilder::contract_breaking_faults`]: crate::FakeApiServerBuilder::contract_breaking_faults
    BreakStream {
        /// What happens to the event.
        breach: Breach,
        /// Which event of the stream (from 0).
        #[serde(default)]
        after: u64,
    },
}

/// How a [`FaultAction::BreakStream`] breaks a watch stream's contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Breach {
    /// The event is never sent.
    Drop,
    /// The event is sent twice in a row.
    Duplicate,
    /// The event is sent after the next one.
    Reorder,
}

impl FaultAction {
    /// The action's name, as in JSON (`commit_then_fail`, `hold`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            FaultAction::Respond { .. } => "respond",
            FaultAction::Delay { .. } => "delay",
            FaultAction::CloseWatchAfter { .. } => "close_watch_after",
            FaultAction::CommitThenFail { .. } => "commit_then_fail",
            FaultAction::CommitThenReset => "commit_then_reset",
            FaultAction::ResetMidBody { .. } => "reset_mid_body",
            FaultAction::SilentWatch => "silent_watch",
            FaultAction::Conflict { .. } => "conflict",
            FaultAction::ShuffleList => "shuffle_list",
            FaultAction::Hold { .. } => "hold",
            FaultAction::StaleView { .. } => "stale_view",
            FaultAction::BreakStream { .. } => "break_stream",
        }
    }

    /// Whether the action breaks a guarantee real API servers give (see
    /// [`FaultAction::BreakStream`]).
    pub fn breaks_contract(&self) -> bool {
        matches!(self, FaultAction::BreakStream { .. })
    }

    /// Whether the action means anything for requests with this verb: rules whose action does
    /// not are not spent (nor drawn for) on such requests.
    fn applies_to(&self, verb: &str) -> bool {
        match self {
            FaultAction::Respond { .. }
            | FaultAction::Delay { .. }
            | FaultAction::CloseWatchAfter { .. } => true,
            FaultAction::CommitThenFail { .. } | FaultAction::CommitThenReset => matches!(
                verb,
                "create" | "update" | "patch" | "delete" | "deletecollection"
            ),
            FaultAction::ResetMidBody { .. } | FaultAction::ShuffleList => {
                matches!(verb, "list" | "watch")
            }
            FaultAction::SilentWatch => verb == "watch",
            FaultAction::Hold { .. } => matches!(
                verb,
                "create" | "update" | "patch" | "delete" | "deletecollection"
            ),
            FaultAction::StaleView { .. } => matches!(verb, "get" | "list" | "watch"),
            FaultAction::BreakStream { .. } => verb == "watch",
            FaultAction::Conflict { .. } => matches!(verb, "update" | "patch" | "delete"),
        }
    }
}

/// A rule: requests that match it get its action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    /// Only requests with this verb (`get`, `list`, `watch`, `patch`, ...).
    #[serde(default)]
    pub verb: Option<String>,
    /// Only requests to this resource: `plural` or `plural.group`, with `/status` etc.
    #[serde(default)]
    pub resource: Option<String>,
    /// Only requests for objects of this name.
    #[serde(default)]
    pub name: Option<String>,
    /// Only requests in this namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Only requests whose `User-Agent` starts with this (kopf-rs operators send
    /// `kopf-rs/VERSION`, Python Kopf `kopf/VERSION`, kubectl `kubectl/...`): faults for the
    /// operator under test, not for the test's own client.
    #[serde(default)]
    pub user_agent: Option<String>,
    /// Let this many matching requests pass first (those the action means nothing for do not
    /// count): with `times(1)`, the rule fires for the `after + 1`-th matching request only.
    #[serde(default)]
    pub after: Option<u64>,
    /// Fire for this many matching requests, then retire (unlimited when absent).
    #[serde(default)]
    pub times: Option<u64>,
    /// Fire with this probability (0..=1), drawn from the server's seeded generator.
    #[serde(default)]
    pub probability: Option<f64>,
    /// What to do.
    pub action: FaultAction,
}

impl Fault {
    /// A fault answering every matching request with `code`.
    pub fn respond(code: u16) -> Self {
        Self::with_action(FaultAction::Respond {
            code,
            retry_after: None,
        })
    }

    /// A fault answering `429 TooManyRequests` with `Retry-After: seconds`.
    pub fn too_many_requests(retry_after: u64) -> Self {
        Self::with_action(FaultAction::Respond {
            code: 429,
            retry_after: Some(retry_after),
        })
    }

    /// A fault delaying matching requests.
    pub fn delay(delay: Duration) -> Self {
        Self::with_action(FaultAction::Delay {
            millis: delay.as_millis() as u64,
        })
    }

    /// A fault ending matching watch streams after `events` events.
    pub fn close_watch_after(events: u64) -> Self {
        Self::with_action(FaultAction::CloseWatchAfter { events })
    }

    /// A fault making matching writes for real, then answering `code` (usually 5xx) instead
    /// of the result; see [`FaultAction::CommitThenFail`].
    ///
    /// ```no_run
    /// # fn example(server: &kopf_fake_apiserver::FakeApiServer) {
    /// use kopf_fake_apiserver::Fault;
    /// server.inject(Fault::commit_then_fail(500).verb("patch").times(1));
    /// # }
    /// ```
    pub fn commit_then_fail(code: u16) -> Self {
        Self::with_action(FaultAction::CommitThenFail { code })
    }

    /// A fault making matching writes for real, then dropping the connection without an
    /// answer; see [`FaultAction::CommitThenReset`].
    pub fn commit_then_reset() -> Self {
        Self::with_action(FaultAction::CommitThenReset)
    }

    /// A fault dropping the connection in the middle of a list's body (after half of it) or of
    /// a watch stream (right after its headers); see [`FaultAction::ResetMidBody`].
    pub fn reset_mid_body() -> Self {
        Self::with_action(FaultAction::ResetMidBody {
            events: 0,
            bytes: None,
        })
    }

    /// A fault dropping the connection of matching watches after `events` events.
    pub fn reset_watch_after(events: u64) -> Self {
        Self::with_action(FaultAction::ResetMidBody {
            events,
            bytes: None,
        })
        .verb("watch")
    }

    /// A fault dropping the connection of matching lists after the first `bytes` of the body.
    pub fn reset_list_after(bytes: u64) -> Self {
        Self::with_action(FaultAction::ResetMidBody {
            events: 0,
            bytes: Some(bytes),
        })
        .verb("list")
    }

    /// A fault keeping matching watches open and silent; see [`FaultAction::SilentWatch`].
    pub fn silent_watch() -> Self {
        Self::with_action(FaultAction::SilentWatch)
    }

    /// A fault answering `409 Conflict` to matching updates, patches and deletions without
    /// changing anything; see [`FaultAction::Conflict`].
    pub fn conflict() -> Self {
        Self::with_action(FaultAction::Conflict { compete: false })
    }

    /// A fault making a competing write to the object (it touches the annotation
    /// `fake.kopf.dev/competing-writer`), then answering `409 Conflict` to the matching update,
    /// patch or deletion; see [`FaultAction::Conflict`].
    ///
    /// ```no_run
    /// # fn example(server: &kopf_fake_apiserver::FakeApiServer) {
    /// use kopf_fake_apiserver::Fault;
    /// server.inject(Fault::conflict_after_competing_write().verb("update").times(1));
    /// # }
    /// ```
    pub fn conflict_after_competing_write() -> Self {
        Self::with_action(FaultAction::Conflict { compete: true })
    }

    /// A fault serving lists and watches' initial objects in a seeded random order; see
    /// [`FaultAction::ShuffleList`].
    pub fn shuffle_list() -> Self {
        Self::with_action(FaultAction::ShuffleList)
    }

    /// A fault holding matching writes after they were made, until the test releases or cuts
    /// them; see [`FaultAction::Hold`].
    ///
    /// ```no_run
    /// # async fn example(server: &kopf_fake_apiserver::FakeApiServer) {
    /// use std::time::Duration;
    /// use kopf_fake_apiserver::Fault;
    /// // The operator's third write lands, and its answer waits.
    /// server.inject(Fault::hold_after_commit().after(2).times(1));
    /// let held = server.wait_held(Duration::from_secs(30)).await.expect("a third write");
    /// // ... kill the operator here: it dies right after that write landed ...
    /// server.cut_held();
    /// # }
    /// ```
    pub fn hold_after_commit() -> Self {
        Self::with_action(FaultAction::Hold { commit: true })
    }

    /// A fault holding matching writes before they are made, until the test releases them
    /// (they are made then) or cuts them (they never are); see [`FaultAction::Hold`].
    pub fn hold_before_commit() -> Self {
        Self::with_action(FaultAction::Hold { commit: false })
    }

    /// A contract-breaking fault for watch streams: `breach` their event number `after`; see
    /// [`FaultAction::BreakStream`] (the server must be built to allow it).
    pub fn break_stream(breach: Breach, after: u64) -> Self {
        Self::with_action(FaultAction::BreakStream { breach, after })
    }

    /// A fault serving gets, lists and watches from a view `versions` changes behind; see
    /// [`FaultAction::StaleView`].
    pub fn stale_view(versions: u64) -> Self {
        Self::with_action(FaultAction::StaleView { versions })
    }

    fn with_action(action: FaultAction) -> Self {
        Fault {
            verb: None,
            after: None,
            resource: None,
            name: None,
            namespace: None,
            user_agent: None,
            times: None,
            probability: None,
            action,
        }
    }

    /// Only for this verb.
    pub fn verb(mut self, verb: &str) -> Self {
        self.verb = Some(verb.into());
        self
    }

    /// Only for this resource: `plural.group` (`deployments.apps`, `kopfexamples.kopf.dev`) for
    /// that resource, or a `plural` alone (`deployments`) for that plural in any group; core
    /// resources have no group (`configmaps`).
    pub fn resource(mut self, resource: &str) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// Only for objects of this name.
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Only in this namespace.
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only for clients whose `User-Agent` starts with this (`kopf-rs/` for kopf-rs operators).
    pub fn user_agent(mut self, prefix: &str) -> Self {
        self.user_agent = Some(prefix.into());
        self
    }

    /// Only after this many matching requests passed untouched.
    pub fn after(mut self, requests: u64) -> Self {
        self.after = Some(requests);
        self
    }

    /// Only this many times.
    pub fn times(mut self, times: u64) -> Self {
        self.times = Some(times);
        self
    }

    /// Only with this probability.
    pub fn probability(mut self, probability: f64) -> Self {
        self.probability = Some(probability);
        self
    }

    fn matches(&self, request: &RequestFacts<'_>) -> bool {
        let same = |want: &Option<String>, have: Option<&str>| {
            want.as_deref().is_none_or(|w| Some(w) == have)
        };
        self.action.applies_to(request.verb)
            && (request.any_version || !matches!(self.action, FaultAction::StaleView { .. }))
            && same(&self.verb, Some(request.verb))
            && self
                .resource
                .as_deref()
                .is_none_or(|resource| names_resource(resource, request.resource))
            && same(&self.name, request.name)
            && same(&self.namespace, request.namespace)
            && self
                .user_agent
                .as_deref()
                .is_none_or(|prefix| request.user_agent.is_some_and(|ua| ua.starts_with(prefix)))
    }
}

/// Whether a fault's `resource` (`plural.group`, or a `plural` alone for any group) names
/// the request's `plural[.group]`.
fn names_resource(wanted: &str, requested: &str) -> bool {
    wanted == requested
        || (!wanted.contains('.')
            && requested
                .split_once('.')
                .is_some_and(|(plural, _)| plural == wanted))
}

/// The facts of a request that faults match on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestFacts<'a> {
    pub(crate) verb: &'a str,
    pub(crate) resource: &'a str,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) name: Option<&'a str>,
    pub(crate) user_agent: Option<&'a str>,
    /// Whether the request asks for any version (`resourceVersion=0`), which the real server
    /// may answer from a cache that lags behind.
    pub(crate) any_version: bool,
}

/// An action that fired for a request, with what it draws from the seeded generator.
#[derive(Debug, Clone)]
pub(crate) struct Fired {
    pub(crate) action: FaultAction,
    /// For [`FaultAction::ShuffleList`]: the seed of this request's order (0 for the others,
    /// which draw nothing, so that adding them changes no other rule's draws).
    pub(crate) seed: u64,
}

/// Injected faults and the seeded generator behind their probabilities.
#[derive(Debug)]
pub(crate) struct Faults {
    rules: Mutex<(Vec<Fault>, StdRng)>,
    /// Whether contract-breaking faults are allowed (an explicit opt-in).
    contract_breaking: bool,
}

impl Faults {
    pub(crate) fn new(seed: u64, contract_breaking: bool) -> Self {
        Faults {
            rules: Mutex::new((Vec::new(), StdRng::seed_from_u64(seed))),
            contract_breaking,
        }
    }

    /// Adds a rule, unless it breaks the API's contract and the server was not built to
    /// allow that, or the server is a proxy in front of the real one at `upstream` and the
    /// rule needs the fake server's own storage.
    pub(crate) fn add(&self, fault: Fault, upstream: Option<&str>) -> Result<(), String> {
        if let (FaultAction::StaleView { .. }, Some(url)) = (&fault.action, upstream) {
            return Err(fake_only_message(
                "the fault \"stale_view\" (a lagging view of the history)",
                url,
            ));
        }
        if fault.action.breaks_contract() && !self.contract_breaking {
            return Err(format!(
                "the fault {:?} breaks a guarantee real API servers give; build the server with \
                 FakeApiServerBuilder::contract_breaking_faults() (or start kopf-fake-apiserver \
                 with --contract-breaking-faults) to use it",
                fault.action.name()
            ));
        }
        lock(&self.rules).0.push(fault);
        Ok(())
    }

    pub(crate) fn clear(&self) {
        lock(&self.rules).0.clear();
    }

    pub(crate) fn reseed(&self, seed: u64) {
        lock(&self.rules).1 = StdRng::seed_from_u64(seed);
    }

    pub(crate) fn list(&self) -> Vec<Fault> {
        lock(&self.rules).0.clone()
    }

    /// The actions that fire for this request (rules used up are retired).
    pub(crate) fn fire(&self, request: &RequestFacts<'_>) -> Vec<Fired> {
        let mut guard = lock(&self.rules);
        let (rules, rng) = &mut *guard;
        let mut actions = Vec::new();
        for rule in rules.iter_mut() {
            if !rule.matches(request) {
                continue;
            }
            if let Some(after) = &mut rule.after
                && *after > 0
            {
                *after -= 1;
                continue;
            }
            if let Some(p) = rule.probability
                && !rng.random_bool(p.clamp(0.0, 1.0))
            {
                continue;
            }
            if let Some(times) = &mut rule.times {
                if *times == 0 {
                    continue;
                }
                *times -= 1;
            }
            let seed = match rule.action {
                FaultAction::ShuffleList => rng.random(),
                _ => 0,
            };
            actions.push(Fired {
                action: rule.action.clone(),
                seed,
            });
        }
        rules.retain(|r| r.times != Some(0));
        actions
    }
}

/// Counters and the request log.
#[derive(Debug)]
pub(crate) struct Counters {
    pub(crate) open_connections: AtomicUsize,
    pub(crate) open_watches: AtomicUsize,
    requests: Mutex<BTreeMap<String, BTreeMap<String, u64>>>,
    faults: Mutex<BTreeMap<String, u64>>,
    log: Mutex<VecDeque<LoggedRequest>>,
    log_limit: usize,
}

impl Counters {
    pub(crate) fn new(log_limit: usize) -> Self {
        Counters {
            open_connections: AtomicUsize::new(0),
            open_watches: AtomicUsize::new(0),
            requests: Mutex::new(BTreeMap::new()),
            faults: Mutex::new(BTreeMap::new()),
            log: Mutex::new(VecDeque::new()),
            log_limit,
        }
    }

    pub(crate) fn count(&self, verb: &str, resource: &str) {
        *lock(&self.requests)
            .entry(verb.into())
            .or_default()
            .entry(resource.into())
            .or_default() += 1;
    }

    /// Counts an injected fault that fired.
    pub(crate) fn fired(&self, action: &str) {
        *lock(&self.faults).entry(action.into()).or_default() += 1;
    }

    pub(crate) fn faults(&self) -> BTreeMap<String, u64> {
        lock(&self.faults).clone()
    }

    pub(crate) fn log(&self, entry: LoggedRequest) {
        let mut log = lock(&self.log);
        log.push_back(entry);
        while log.len() > self.log_limit {
            log.pop_front();
        }
    }

    pub(crate) fn requests(&self) -> BTreeMap<String, BTreeMap<String, u64>> {
        lock(&self.requests).clone()
    }

    pub(crate) fn logged(&self) -> Vec<LoggedRequest> {
        lock(&self.log).iter().cloned().collect()
    }

    pub(crate) fn reset(&self) {
        lock(&self.requests).clear();
        lock(&self.faults).clear();
        lock(&self.log).clear();
    }

    /// Counts an open connection or watch until the guard is dropped.
    pub(crate) fn gauge(counter: &AtomicUsize) -> GaugeGuard<'_> {
        counter.fetch_add(1, Ordering::SeqCst);
        GaugeGuard(counter)
    }
}

/// Decrements its gauge when dropped.
#[derive(Debug)]
pub(crate) struct GaugeGuard<'a>(&'a AtomicUsize);

impl Drop for GaugeGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Why `what` cannot be done by a proxy in front of the real API server at `url`.
pub(crate) fn fake_only_message(what: &str, url: &str) -> String {
    format!(
        "{what} works only on the fake API server: this server is a proxy in front of a real \
         API server ({url}), which keeps its objects and their history itself"
    )
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it: counters and rules
/// stay usable whatever a request handler did.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
