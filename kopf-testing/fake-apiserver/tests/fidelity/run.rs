//! Running a sequence on both servers in lockstep: each step goes to the fake server, then to
//! the real one, each with its own values filled into the templates; both answers are masked
//! and compared.

use std::collections::HashMap;
use std::time::Duration;

use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::compare::{Difference, differences};
use super::corpus::ResourcePath;
use super::mask::Masker;
use super::sequence::{Call, Condition, Payload, Sequence, Step, Until, Who};
use super::servers::Server;
use super::webhook_server::WebhookServer;

/// How long the suite waits for what the real server's controllers do in the background (on
/// a busy machine, many seconds).
const SETTLE_DEADLINE: Duration = Duration::from_secs(60);

/// How long a watch is read at most, and how long any single answer may take.
const WATCH_DEADLINE: Duration = Duration::from_secs(20);
const ANSWER_DEADLINE: Duration = Duration::from_secs(60);

/// The annotation of the bookmark that ends a watch's initial events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// What running a sequence found.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// The steps compared (each one request, or one poll or watch, on each server).
    pub(crate) compared: usize,
    pub(crate) differences: Vec<Difference>,
}

/// What the sequences share: the suite's admission webhook.
pub(crate) struct Context {
    pub(crate) webhook: WebhookServer,
}

impl Context {
    /// The template values of the suite on one server: `{{webhook}}`, the webhook's URL with
    /// a path of the server's own (so each server's reviews can be told apart), and
    /// `{{webhook_ca}}`, its caBundle.
    fn globals(&self, side: &str) -> HashMap<String, Value> {
        let config = self.webhook.client_config(&format!("/{side}"));
        HashMap::from([
            ("webhook".to_string(), config["url"].clone()),
            ("webhook_ca".to_string(), config["caBundle"].clone()),
        ])
    }
}

/// Runs `sequence` in the namespace `ns` on both servers and compares every step.
pub(crate) async fn run(
    sequence: &Sequence,
    ns: &str,
    context: &Context,
    fake: &Server,
    real: &Server,
) -> Outcome {
    let mut sides = [Side::new(fake, ns, context), Side::new(real, ns, context)];
    for side in &mut sides {
        side.prepare_namespace("{{ns}}").await;
        for extra in &sequence.namespaces {
            side.prepare_namespace(extra).await;
        }
    }
    let mut outcome = Outcome::default();
    for step in &sequence.steps {
        let label = step.label().to_string();
        let mut observed = Vec::with_capacity(2);
        let mut request = String::new();
        let mut fake_events = None;
        for side in &mut sides {
            let (seen, sent) = side.step(step, fake_events).await;
            if let Some(events) = seen.get("events").and_then(Value::as_array) {
                fake_events = Some(events.len());
            }
            request = sent;
            observed.push(seen);
        }
        if matches!(step, Step::Forget) {
            continue;
        }
        outcome.compared += 1;
        for (field, fake, real) in differences(&observed[0], &observed[1]) {
            outcome.differences.push(Difference {
                sequence: sequence.name.clone(),
                step: label.clone(),
                request: request.clone(),
                field,
                fake,
                real,
            });
        }
    }
    outcome
}

/// One server's run of a sequence: what its answers were, and its open watches.
struct Side<'a> {
    server: &'a Server,
    ns: String,
    context: &'a Context,
    globals: HashMap<String, Value>,
    /// Each labelled step's answer (unmasked), for the templates of later steps.
    answers: HashMap<String, Value>,
    /// What the answers showed of each object and collection, for recorded sequences.
    seen: Seen,
    masker: Masker,
    watches: HashMap<String, Watch>,
}

impl<'a> Side<'a> {
    fn new(server: &'a Server, ns: &str, context: &'a Context) -> Side<'a> {
        let globals = context.globals(server.side);
        let mut masker = Masker::default();
        if let Some(url) = globals["webhook"].as_str() {
            masker.literal(url, "{{webhook}}");
        }
        Side {
            server,
            ns: ns.to_string(),
            context,
            globals,
            answers: HashMap::new(),
            seen: Seen::default(),
            masker,
            watches: HashMap::new(),
        }
    }

    /// Creates a namespace (a template) and waits until it has what every namespace gets (the
    /// `default` ServiceAccount, the root CA's ConfigMap): the real server's controllers add
    /// them shortly after.
    async fn prepare_namespace(&mut self, ns: &str) {
        let create = super::sequence::post("/api/v1/namespaces", json!({"metadata": {"name": ns}}));
        let (answer, _) = self.send(&create).await;
        assert_eq!(
            answer["code"], 201,
            "{}: the namespace {ns} of {} was not created: {answer}",
            self.server.side, self.ns
        );
        for path in [
            format!("/api/v1/namespaces/{ns}/serviceaccounts/default"),
            format!("/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt"),
        ] {
            let path = path.as_str();
            let (answer, met) = self
                .poll(
                    &super::sequence::get(path),
                    &Condition::Code(200),
                    SETTLE_DEADLINE,
                )
                .await;
            assert!(met, "{}: {path} never appeared: {answer}", self.server.side);
        }
    }

    /// Runs one step; gives the masked observation and the request as sent.
    async fn step(&mut self, step: &Step, fake_events: Option<usize>) -> (Value, String) {
        match step {
            Step::Send { label, call } => {
                let (answer, sent) = self.send(call).await;
                self.keep(label, &answer);
                self.track(call, &answer);
                (self.masked(answer), sent)
            }
            Step::Poll {
                label,
                call,
                until,
                patience,
            } => {
                let sent = self.describe(call);
                let (mut answer, met) = self.poll(call, until, *patience).await;
                self.keep(label, &answer);
                self.track(call, &answer);
                answer["met"] = met.into();
                (self.masked(answer), sent)
            }
            Step::Watch { label, call, until } => {
                let sent = self.describe(call);
                let answer = match self.open(call).await {
                    Ok(mut watch) => watch.read(until, fake_events).await,
                    Err(answer) => answer,
                };
                self.keep(label, &answer);
                self.track(call, &answer);
                (self.masked(answer), sent)
            }
            Step::Open { label, call } => {
                let sent = self.describe(call);
                match self.open(call).await {
                    Ok(mut watch) => {
                        watch.call = Some(call.clone());
                        let answer = json!({"code": watch.code, "headers": watch.headers.clone()});
                        self.watches.insert(label.clone(), watch);
                        (self.masked(answer), sent)
                    }
                    Err(answer) => (self.masked(answer), sent),
                }
            }
            Step::Read { label, until } => {
                let answer = match self.watches.remove(label) {
                    Some(mut watch) => {
                        let answer = watch.read(until, fake_events).await;
                        if let Some(call) = &watch.call {
                            self.track(call, &answer);
                        }
                        answer
                    }
                    None => json!({"error": "the watch did not open"}),
                };
                self.keep(label, &answer);
                (self.masked(answer), format!("(the watch {label})"))
            }
            Step::Established { crd } => {
                let established = self.established(crd).await;
                (
                    json!({"established": established}),
                    format!("(CRD {crd} established)"),
                )
            }
            Step::Reviews { label, path } => {
                let path = self.fill(path, None).unwrap_or_else(|_| path.clone());
                let prefix = format!("/{}{path}", self.server.side);
                let reviews: Vec<Value> = self
                    .context
                    .webhook
                    .received(&prefix)
                    .into_iter()
                    .map(|received| received.review)
                    .collect();
                let answer = json!({"reviews": reviews});
                self.answers.insert(label.clone(), answer.clone());
                (
                    self.masked(answer),
                    format!("(the reviews the webhook got at {path})"),
                )
            }
            Step::Forget => {
                self.server.forget();
                (Value::Null, String::new())
            }
        }
    }

    fn keep(&mut self, label: &str, answer: &Value) {
        let kept = match answer.get("events") {
            Some(events) => json!({"events": events}),
            None => answer.get("body").cloned().unwrap_or(Value::Null),
        };
        self.answers.insert(label.to_string(), kept);
    }

    /// Remembers what an answer shows of objects and collections (versions, uids, continue
    /// tokens), for the lookups of later requests.
    fn track(&mut self, call: &Call, answer: &Value) {
        let Ok(path) = self.fill(call.path.split('?').next().unwrap_or_default(), None) else {
            return;
        };
        let Some(target) = ResourcePath::parse(&path) else {
            return;
        };
        if let Some(events) = answer["events"].as_array() {
            for event in events {
                self.seen.object(&target, &event["object"]);
                if let Some(rv) = event["object"]["metadata"]["resourceVersion"].as_str() {
                    self.seen.collection(&target, rv, None);
                }
            }
            return;
        }
        let body = &answer["body"];
        let kind = body["kind"].as_str().unwrap_or_default();
        if kind.ends_with("List") && body["items"].is_array() {
            if let Some(rv) = body["metadata"]["resourceVersion"].as_str() {
                let continued = body["metadata"]["continue"].as_str();
                self.seen.collection(&target, rv, continued);
            }
            for item in body["items"].as_array().into_iter().flatten() {
                self.seen.object(&target, item);
            }
        } else if kind != "Status" {
            self.seen.object(&target, body);
        }
    }

    fn masked(&mut self, mut answer: Value) -> Value {
        self.masker.mask(&mut answer);
        answer
    }

    /// Sends a request and reads its whole answer: `{code, headers, body}`, or `{error}` when
    /// none came.
    async fn send(&mut self, call: &Call) -> (Value, String) {
        let sent = self.describe(call);
        let request = match self.request(call) {
            Ok(request) => request,
            Err(error) => return (json!({"error": error}), sent),
        };
        if let Some(Payload::Json { value, .. }) = &call.body
            && let Some(prefix) = value["metadata"]["generateName"].as_str()
        {
            self.masker.prefix(prefix);
        }
        let bare = call.who != Who::Admin;
        let answer = tokio::time::timeout(ANSWER_DEADLINE, async {
            let response = self.server.send(bare, request).await?;
            let (parts, body) = response.into_parts();
            let body = body
                .collect()
                .await
                .map_err(|e| format!("the body broke off: {e}"))?
                .to_bytes();
            Ok::<_, String>(observe(&parts, &body))
        })
        .await;
        let answer = match answer {
            Ok(Ok(answer)) => answer,
            Ok(Err(error)) => json!({"error": error}),
            Err(_) => json!({"error": format!("no answer within {ANSWER_DEADLINE:?}")}),
        };
        (answer, sent)
    }

    /// Repeats a request until its answer meets the condition, or `patience` runs out.
    async fn poll(&mut self, call: &Call, until: &Condition, patience: Duration) -> (Value, bool) {
        let deadline = Instant::now() + patience;
        loop {
            let (answer, _) = self.send(call).await;
            if meets(&answer, until) {
                return (answer, true);
            }
            if Instant::now() > deadline {
                return (answer, false);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Opens a watch: the stream, or the answer when it is not a stream.
    async fn open(&mut self, call: &Call) -> Result<Watch, Value> {
        let request = self
            .request(call)
            .map_err(|error| json!({"error": error}))?;
        let bare = call.who != Who::Admin;
        let response = tokio::time::timeout(ANSWER_DEADLINE, self.server.send(bare, request))
            .await
            .map_err(|_| json!({"error": "the watch did not answer"}))?
            .map_err(|error| json!({"error": error}))?;
        let (parts, body) = response.into_parts();
        if parts.status != http::StatusCode::OK {
            let body = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            return Err(observe(&parts, &body));
        }
        let observed = observe(&parts, &[]);
        Ok(Watch {
            call: None,
            code: parts.status.as_u16(),
            headers: observed["headers"].clone(),
            body,
            buffer: Vec::new(),
            events: Vec::new(),
            ended: false,
        })
    }

    /// Waits until a CRD is established and its resource answers a list.
    async fn established(&mut self, crd: &str) -> bool {
        let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}");
        let ready = Condition::Equals(
            "/status/conditions/[type=Established]/status".into(),
            "True".into(),
        );
        let (answer, met) = self
            .poll(&super::sequence::get(&path), &ready, SETTLE_DEADLINE)
            .await;
        if !met {
            return false;
        }
        let spec = &answer["body"]["spec"];
        let version = spec["versions"]
            .as_array()
            .and_then(|versions| versions.iter().find(|v| v["served"] == true))
            .and_then(|v| v["name"].as_str())
            .unwrap_or_default();
        let namespaced = if spec["scope"] == "Namespaced" {
            "/namespaces/{{ns}}"
        } else {
            ""
        };
        let list = format!(
            "/apis/{}/{version}{namespaced}/{}",
            spec["group"].as_str().unwrap_or_default(),
            spec["names"]["plural"].as_str().unwrap_or_default()
        );
        self.poll(
            &super::sequence::get(&list),
            &Condition::Code(200),
            SETTLE_DEADLINE,
        )
        .await
        .1
    }

    /// The request a call makes on this server, its templates filled in.
    fn request(&self, call: &Call) -> Result<http::Request<Vec<u8>>, String> {
        let (path, query) = call.path.split_once('?').unwrap_or((&call.path, ""));
        let path = self.fill(path, None)?;
        let target = ResourcePath::parse(&path);
        let target = target.as_ref();
        let uri = match self.fill(query, target)? {
            query if query.is_empty() => path,
            query => format!("{path}?{query}"),
        };
        let mut request = http::Request::builder()
            .method(call.method.clone())
            .uri(uri)
            .header(http::header::USER_AGENT, "kopf-fidelity/1")
            .header(http::header::ACCEPT, "application/json");
        let body = match &call.body {
            None => Vec::new(),
            Some(Payload::Json {
                content_type,
                value,
            }) => {
                request = request.header(http::header::CONTENT_TYPE, content_type);
                serde_json::to_vec(&self.fill_json(value, target)?).expect("JSON serializes")
            }
            Some(Payload::Text { content_type, text }) => {
                request = request.header(http::header::CONTENT_TYPE, content_type);
                self.fill(text, target)?.into_bytes()
            }
        };
        if let Who::Token(token) = &call.who {
            request = request.header(
                http::header::AUTHORIZATION,
                format!("Bearer {}", self.fill(token, None)?),
            );
        }
        let headers = request.headers_mut().expect("the request is valid so far");
        for (name, value) in &call.headers {
            let name: http::HeaderName = name.parse().map_err(|e| format!("{name}: {e}"))?;
            let value = self.fill(value, target)?;
            headers.insert(name, value.parse().map_err(|e| format!("{value}: {e}"))?);
        }
        request.body(body).map_err(|e| e.to_string())
    }

    /// `METHOD path` as sent to this server.
    fn describe(&self, call: &Call) -> String {
        let path = self
            .fill(&call.path, None)
            .unwrap_or_else(|_| call.path.clone());
        let who = match &call.who {
            Who::Admin => "",
            Who::Anonymous => " (anonymous)",
            Who::Token(_) => " (with a token)",
        };
        format!("{} {path}{who}", call.method)
    }

    /// The template filled in: `{{ns}}`, `{{u}}`, globals, earlier answers, and (for a
    /// request on `target`) what was seen of it.
    fn fill(&self, template: &str, target: Option<&ResourcePath>) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = template;
        while let Some(start) = rest.find("{{") {
            out.push_str(&rest[..start]);
            // The matching end: templates nest (`{{@uid:/apis/{{u}}.example/...}}`).
            let inner = &rest[start + 2..];
            let mut depth = 1;
            let mut at = 0;
            while depth > 0 {
                let open = inner[at..].find("{{").map(|i| i + at);
                let close = inner[at..]
                    .find("}}")
                    .map(|i| i + at)
                    .ok_or_else(|| format!("an unclosed template in {template}"))?;
                match open {
                    Some(open) if open < close => {
                        depth += 1;
                        at = open + 2;
                    }
                    _ => {
                        depth -= 1;
                        at = close + 2;
                    }
                }
            }
            let value = self.lookup(&inner[..at - 2], target)?;
            match value {
                Value::String(text) => out.push_str(&text),
                other => out.push_str(&other.to_string()),
            }
            rest = &inner[at..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// A JSON template filled in: a string that is one template alone takes the value's
    /// type (a number, an object); others are filled in as text.
    fn fill_json(&self, template: &Value, target: Option<&ResourcePath>) -> Result<Value, String> {
        Ok(match template {
            Value::String(text) => {
                if let Some(inner) = text.strip_prefix("{{").and_then(|t| t.strip_suffix("}}"))
                    && !inner.contains("}}")
                {
                    self.lookup(inner, target)?
                } else {
                    Value::String(self.fill(text, target)?)
                }
            }
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| self.fill_json(item, target))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| Ok((self.fill(k, target)?, self.fill_json(v, target)?)))
                    .collect::<Result<_, String>>()?,
            ),
            other => other.clone(),
        })
    }

    fn lookup(&self, name: &str, target: Option<&ResourcePath>) -> Result<Value, String> {
        if let Some(seen) = name.strip_prefix('@') {
            return Ok(self.recall(seen, target));
        }
        if name == "ns" || name == "u" {
            return Ok(Value::String(self.ns.clone()));
        }
        if let Some(value) = self.globals.get(name) {
            return Ok(value.clone());
        }
        let (label, pointer) = match name.split_once(':') {
            Some((label, pointer)) => (label, pointer.to_string()),
            None => {
                let (label, short) = name
                    .rsplit_once('.')
                    .ok_or_else(|| format!("no value named {name}"))?;
                let pointer = match short {
                    "rv" => "/metadata/resourceVersion",
                    "uid" => "/metadata/uid",
                    "name" => "/metadata/name",
                    "continue" => "/metadata/continue",
                    "token" => "/status/token",
                    other => return Err(format!("{name}: no shorthand {other}")),
                };
                (label, pointer.to_string())
            }
        };
        let answer = self
            .answers
            .get(label)
            .ok_or_else(|| format!("{name}: no step {label} answered before"))?;
        select(answer, &pointer)
            .cloned()
            .ok_or_else(|| format!("{name}: the answer of {label} has nothing at {pointer}"))
    }
}

impl Side<'_> {
    /// What the replay has seen of the request's object or collection (or of the object at a
    /// path, `uid:PATH`); nothing seen is an empty string (the server then answers as it does
    /// to a request without it).
    fn recall(&self, what: &str, target: Option<&ResourcePath>) -> Value {
        let object = target.and_then(ResourcePath::object);
        let collection = target.map(ResourcePath::collection);
        let found = match what.split_once(':') {
            Some(("uid", path)) => self
                .fill(path, None)
                .ok()
                .and_then(|path| self.seen.objects.get(&path))
                .map(|o| o.1.clone()),
            _ => match what {
                "rv" => object
                    .and_then(|o| self.seen.objects.get(&o))
                    .map(|o| o.0.clone()),
                "uid" => object
                    .and_then(|o| self.seen.objects.get(&o))
                    .map(|o| o.1.clone()),
                "list-rv" => collection
                    .and_then(|c| self.seen.collections.get(&c))
                    .map(|c| c.0.clone()),
                "continue" => collection
                    .and_then(|c| self.seen.collections.get(&c))
                    .and_then(|c| c.1.clone()),
                _ => None,
            },
        };
        Value::String(found.unwrap_or_default())
    }
}

/// What a replay saw of objects (their latest resourceVersion and uid, by path) and of
/// collections (their latest version and continue token).
#[derive(Debug, Default)]
struct Seen {
    objects: HashMap<String, (String, String)>,
    collections: HashMap<String, (String, Option<String>)>,
}

impl Seen {
    /// Remembers an object seen in an answer to a request on `target`.
    fn object(&mut self, target: &ResourcePath, object: &Value) {
        let meta = &object["metadata"];
        let (Some(name), Some(rv)) = (meta["name"].as_str(), meta["resourceVersion"].as_str())
        else {
            return;
        };
        let at = ResourcePath {
            namespace: meta["namespace"].as_str().map(String::from),
            name: Some(name.to_string()),
            subresource: None,
            watch: false,
            ..target.clone()
        };
        let uid = meta["uid"].as_str().unwrap_or_default().to_string();
        if let Some(path) = at.object() {
            self.objects.insert(path, (rv.to_string(), uid));
        }
    }

    fn collection(&mut self, target: &ResourcePath, rv: &str, continued: Option<&str>) {
        self.collections.insert(
            target.collection(),
            (
                rv.to_string(),
                continued.filter(|c| !c.is_empty()).map(String::from),
            ),
        );
    }
}

/// A JSON pointer, where a segment `[key=value]` picks the array's item with that field.
fn select<'v>(value: &'v Value, pointer: &str) -> Option<&'v Value> {
    let mut current = value;
    for segment in pointer.split('/').skip(1) {
        current = match segment.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            Some(filter) => {
                let (key, wanted) = filter.split_once('=')?;
                current
                    .as_array()?
                    .iter()
                    .find(|item| item[key].as_str() == Some(wanted))?
            }
            None => match current {
                Value::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
                other => other.get(segment.replace("~1", "/").replace("~0", "~"))?,
            },
        };
    }
    Some(current)
}

fn meets(answer: &Value, until: &Condition) -> bool {
    let body = &answer["body"];
    match until {
        Condition::Code(code) => answer["code"] == *code,
        Condition::Equals(pointer, value) => select(body, pointer) == Some(value),
        Condition::Absent(pointer) => answer["code"] == 200 && select(body, pointer).is_none(),
    }
}

/// The parts of an answer that clients read: the status code, the headers they act on, and
/// the body (JSON parsed, other text as it is).
fn observe(parts: &http::response::Parts, body: &[u8]) -> Value {
    let header = |name: &str| -> Vec<String> {
        parts
            .headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string)
            .collect()
    };
    let mut headers = serde_json::Map::new();
    for name in ["content-type", "retry-after"] {
        if let Some(value) = header(name).into_iter().next() {
            headers.insert(name.into(), value.into());
        }
    }
    let warnings = header("warning");
    if !warnings.is_empty() {
        headers.insert("warning".into(), warnings.into());
    }
    headers.insert(
        "audit-id".into(),
        parts.headers.contains_key("audit-id").into(),
    );
    let body = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).trim_end().into()))
    };
    json!({"code": parts.status.as_u16(), "headers": headers, "body": body})
}

/// An open watch stream.
struct Watch {
    /// The request that opened it, when it is left open.
    call: Option<Call>,
    code: u16,
    headers: Value,
    body: kube::client::Body,
    buffer: Vec<u8>,
    events: Vec<Value>,
    /// The server ended the stream.
    ended: bool,
}

impl Watch {
    /// Reads until `until`, then closes: `{code, headers, events, ended, ordered}`. On the
    /// real server (`fake_events` given), a quiet period starts only once it sent as many
    /// events as the fake one did, so that a slower server is not taken for a quieter one.
    async fn read(&mut self, until: &Until, fake_events: Option<usize>) -> Value {
        let deadline = Instant::now() + WATCH_DEADLINE;
        loop {
            let done = match until {
                Until::Events(count) => self.events.len() >= *count,
                Until::InitialEventsEnd => self.events.iter().any(ends_initial_events),
                Until::Closed => self.ended,
                Until::Quiet(_) => false,
            };
            if done || self.ended {
                break;
            }
            let wait = match until {
                Until::Quiet(period) if self.events.len() >= fake_events.unwrap_or(0) => {
                    (*period).min(deadline.saturating_duration_since(Instant::now()))
                }
                _ => deadline.saturating_duration_since(Instant::now()),
            };
            match tokio::time::timeout(wait, self.next_event()).await {
                Ok(Some(event)) => self.events.push(event),
                Ok(None) => self.ended = true,
                Err(_) => break,
            }
        }
        let versions: Vec<u64> = self
            .events
            .iter()
            .filter(|e| e["type"] != "ERROR" && e["type"] != "BOOKMARK")
            .filter_map(|e| {
                e["object"]["metadata"]["resourceVersion"]
                    .as_str()?
                    .parse()
                    .ok()
            })
            .collect();
        json!({
            "code": self.code,
            "headers": self.headers,
            "events": self.events,
            "ended": self.ended,
            "ordered": versions.windows(2).all(|w| w[0] < w[1]),
        })
    }

    /// The next event, skipping periodic bookmarks (their timing is each server's own);
    /// `None` once the stream ends.
    async fn next_event(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                let event: Value = match serde_json::from_slice(&line) {
                    Ok(event) => event,
                    Err(_) => json!({"unparsed": String::from_utf8_lossy(&line).trim_end()}),
                };
                if event["type"] == "BOOKMARK" && !ends_initial_events(&event) {
                    continue;
                }
                return Some(event);
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
                _ => {
                    if self.buffer.iter().any(|b| !b.is_ascii_whitespace()) {
                        self.buffer.push(b'\n');
                        continue;
                    }
                    return None;
                }
            }
        }
    }
}

fn ends_initial_events(event: &Value) -> bool {
    event["type"] == "BOOKMARK"
        && event["object"]["metadata"]["annotations"][INITIAL_EVENTS_END] == "true"
}
