//! The kopf-rs interpreter of an [`OperatorSpec`]: the registry that `parity-operator` runs.
//! Its twin for Kopf is `python/parity_operator.py`; the two must stay in step.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use kopf::filters::{MetaFilter, ValueFilter};
use kopf::registry::{
    ActivityHandler, ChangeHandler, DaemonHandler, ErrorsMode, EventHandler, HandlerResult,
    IndexHandler, Registry, SubHandler, TimerHandler,
};
use kopf::resources::Selector;
use kopf::{Invocation, PermanentError, StopReason, TemporaryError};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

use crate::spec::{Failure, HandlerSpec, Kind, Match, OperatorSpec};

/// Applies the options and filters that every kind takes (they are inherent methods of each
/// handler type, not of a trait).
macro_rules! with_options {
    ($handler:expr, $spec:expr) => {{
        let spec: &HandlerSpec = $spec;
        let mut handler = $handler;
        for (key, filter) in &spec.labels {
            handler = handler.label(key, meta_filter(filter));
        }
        for (key, filter) in &spec.annotations {
            handler = handler.annotation(key, meta_filter(filter));
        }
        if let Some((path, expected)) = spec.when.clone() {
            handler =
                handler.when(move |invocation| lookup(invocation.body(), &path) == Some(&expected));
        }
        if let Some(errors) = spec.errors.as_deref() {
            handler = handler.errors(match errors {
                "permanent" => ErrorsMode::Permanent,
                "ignored" => ErrorsMode::Ignored,
                _ => ErrorsMode::Temporary,
            });
        }
        if let Some(retries) = spec.retries {
            handler = handler.retries(retries);
        }
        if let Some(backoff) = spec.backoff {
            handler = handler.backoff(Duration::from_secs_f64(backoff));
        }
        if let Some(timeout) = spec.timeout {
            handler = handler.timeout(Duration::from_secs_f64(timeout));
        }
        handler
    }};
}

/// Applies the field filter of event handlers, daemons and timers (an index function's field
/// is its key, and change handlers have theirs in [`change_options`]).
macro_rules! with_field {
    ($handler:expr, $spec:expr) => {{
        let spec: &HandlerSpec = $spec;
        let mut handler = $handler;
        if let Some(field) = &spec.field {
            handler = handler.field(field);
            if let Some(filter) = &spec.value {
                handler = handler.value(value_filter(filter));
            }
        }
        handler
    }};
}

/// The resource every operator of the suite serves.
pub fn selector() -> Selector {
    Selector::new("kopf.dev", "v1", "kopfexamples")
}

/// The bodies that change handlers saw, by object name (`namespace/name`, or `name` in
/// `default`), for the startup task's Events.
fn seen() -> &'static Mutex<HashMap<String, Value>> {
    static SEEN: OnceLock<Mutex<HashMap<String, Value>>> = OnceLock::new();
    SEEN.get_or_init(Mutex::default)
}

/// The registry of the spec's handlers, each recording its calls in the file `calls`.
pub fn registry(spec: &OperatorSpec, calls: &Path) -> Registry {
    let calls: Arc<PathBuf> = Arc::new(calls.to_path_buf());
    // As the Python twin's: what handlers log is posted as Events too, to compare them.
    let configure = ActivityHandler::on_startup("configure", |activity| {
        activity.settings().posting.loggers = true;
        async { Ok(None) }
    });
    let mut registry = Registry::new().with(configure);
    if !spec.startup_posts.is_empty() {
        let names = spec.startup_posts.clone();
        registry = registry.with(ActivityHandler::on_startup("start_poster", move |_| {
            // A task of the user's own, outside of any handler, as a Kopf user starts one with
            // `asyncio.create_task()`: it ends when the process does.
            tokio::spawn(post_when_seen(names.clone()));
            async { Ok(None) }
        }));
    }
    spec.handlers.iter().fold(registry, |registry, handler| {
        // Stacked: the same behaviour under each registration, and the same id, which is
        // what tells one function's registrations apart for handlers declared in code.
        std::iter::once(handler)
            .chain(&handler.stacked)
            .fold(registry, |registry, registration| {
                add(registry, registration, handler, &calls)
            })
    })
}

/// Adds one registration of the handler `behaviour`'s function, as `spec` declares it.
fn add(
    registry: Registry,
    spec: &HandlerSpec,
    behaviour_of: &HandlerSpec,
    calls: &Arc<PathBuf>,
) -> Registry {
    let handler = spec;
    let function = behaviour(behaviour_of.clone(), behaviour_of.id.clone(), calls.clone());
    let seconds = |value: Option<f64>| value.map(Duration::from_secs_f64);
    match handler.kind {
        Kind::Event => {
            let event = EventHandler::on_event(selector(), &handler.id, function);
            registry.with(with_field!(with_options!(event, handler), handler))
        }
        Kind::Daemon => {
            let function = daemon(handler.id.clone(), handler.poll.clone(), calls.clone());
            let mut daemon = DaemonHandler::new(selector(), &handler.id, function);
            if let Some(delay) = seconds(handler.initial_delay) {
                daemon = daemon.initial_delay(delay);
            }
            registry.with(with_field!(with_options!(daemon, handler), handler))
        }
        Kind::Timer => {
            let interval = seconds(handler.interval).unwrap_or(Duration::from_secs(60));
            let mut timer = TimerHandler::new(selector(), &handler.id, interval, function);
            if let Some(delay) = seconds(handler.initial_delay) {
                timer = timer.initial_delay(delay);
            }
            if let Some(idle) = seconds(handler.idle) {
                timer = timer.idle(idle);
            }
            registry.with(with_field!(with_options!(timer, handler), handler))
        }
        Kind::Index => {
            let field = handler.field.clone().unwrap_or_else(|| "spec".into());
            let index = IndexHandler::new(selector(), &handler.id, move |invocation| {
                let entry = lookup(invocation.body(), &field)
                    .map(|value| (key_of(value), invocation.name().to_string()));
                async move { Ok(entry) }
            });
            registry.with(with_options!(index, handler))
        }
        kind => {
            let change = match kind {
                Kind::Create => ChangeHandler::on_create(selector(), &handler.id, function),
                Kind::Update => ChangeHandler::on_update(selector(), &handler.id, function),
                Kind::Delete => ChangeHandler::on_delete(selector(), &handler.id, function),
                Kind::Resume => ChangeHandler::on_resume(selector(), &handler.id, function),
                _ => ChangeHandler::on_field(
                    selector(),
                    &handler.id,
                    handler.field.as_deref().unwrap_or("spec"),
                    function,
                ),
            };
            registry.with(change_options(with_options!(change, handler), handler))
        }
    }
}

/// The options of change handlers only.
fn change_options(mut handler: ChangeHandler, spec: &HandlerSpec) -> ChangeHandler {
    if spec.kind != Kind::Field
        && let Some(field) = &spec.field
    {
        handler = handler.field(field);
    }
    if let Some(filter) = &spec.value {
        handler = handler.value(value_filter(filter));
    }
    if let Some(filter) = &spec.old {
        handler = handler.old(value_filter(filter));
    }
    if let Some(filter) = &spec.new {
        handler = handler.new_value(value_filter(filter));
    }
    if spec.optional {
        handler = handler.optional();
    }
    if spec.deleted {
        handler = handler.deleted();
    }
    handler
}

fn meta_filter(filter: &Match) -> MetaFilter {
    match filter {
        Match::Equals(value) => MetaFilter::Value(value.as_str().unwrap_or_default().to_string()),
        Match::Present => MetaFilter::Present,
        Match::Absent => MetaFilter::Absent,
        Match::Callable(expected) => {
            let expected = expected.clone();
            MetaFilter::callable(move |value| match value {
                Some(value) => expected.as_str() == Some(value),
                None => expected.is_null(),
            })
        }
    }
}

fn value_filter(filter: &Match) -> ValueFilter {
    match filter {
        Match::Equals(value) => ValueFilter::Value(value.clone()),
        Match::Present => ValueFilter::Present,
        Match::Absent => ValueFilter::Absent,
        Match::Callable(expected) => {
            let expected = expected.clone();
            ValueFilter::callable(move |value| value.unwrap_or(&Value::Null) == &expected)
        }
    }
}

/// An index's key for a value: its text as Python's `str()` gives it for strings and numbers.
fn key_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The value at a dotted path.
fn lookup<'a>(body: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(body, |value, key| value.get(key))
}

/// Once a change handler has seen each object, posts Events about it (see
/// [`OperatorSpec::startup_posts`]).
async fn post_when_seen(names: Vec<String>) {
    for name in names {
        let body = loop {
            let body = seen()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&name)
                .cloned();
            match body {
                Some(body) => break body,
                None => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        kopf::info(&body, "Startup", format_args!("seen {name}"));
        kopf::event(&body, "Warning", "Noticed", format_args!("noticed {name}"));
    }
}

/// The handler's function: records the call, then fails or succeeds as the spec says.
fn behaviour(
    spec: HandlerSpec,
    id: String,
    calls: Arc<PathBuf>,
) -> impl Fn(Invocation) -> std::pin::Pin<Box<dyn Future<Output = HandlerResult> + Send>>
+ Send
+ Sync
+ 'static {
    move |invocation| {
        let (spec, id, calls) = (spec.clone(), id.clone(), calls.clone());
        Box::pin(async move {
            record(&calls, &call(&spec, &id, &invocation)).await;
            if invocation.reason().is_some() {
                let name = match invocation.namespace() {
                    Some(namespace) if namespace != "default" => {
                        format!("{namespace}/{}", invocation.name())
                    }
                    _ => invocation.name().to_string(),
                };
                let mut seen = seen().lock().unwrap_or_else(|p| p.into_inner());
                seen.insert(name, invocation.body().clone());
            }
            let retry = invocation.retry();
            match spec.fail.get(retry as usize) {
                Some(Failure::Temporary(delay)) => {
                    return Err(TemporaryError::new("failed")
                        .delay(Duration::from_secs_f64(*delay))
                        .into());
                }
                Some(Failure::Permanent) => return Err(PermanentError::new("failed").into()),
                Some(Failure::Arbitrary) => return Err(kopf::Error::msg("failed")),
                Some(Failure::Sleep(seconds)) => {
                    tokio::time::sleep(Duration::from_secs_f64(*seconds)).await;
                }
                None => {}
            }
            if matches!(spec.kind, Kind::Event | Kind::Timer) {
                // As the Python twin: these return nothing (see there why).
                return Ok(None);
            }
            if spec.posts_from_task {
                let body = invocation.body().clone();
                let message = format!("posted by a task of {id}");
                // A task of the handler's own, outside of its call, as a Kopf user starts one
                // with `asyncio.create_task()`.
                tokio::spawn(async move {
                    tokio::task::yield_now().await;
                    kopf::info(&body, "FromTask", message);
                });
            }
            if !spec.executes.is_empty() {
                let children = spec.executes.iter().map(|sub| {
                    let function =
                        behaviour(sub.clone(), format!("{id}/{}", sub.id), calls.clone());
                    SubHandler::new(&sub.id, function)
                });
                kopf::execute(children).await?;
            }
            for sub in &spec.subhandlers {
                let function = behaviour(sub.clone(), format!("{id}/{}", sub.id), calls.clone());
                let handler = with_options!(SubHandler::new(&sub.id, function), sub);
                invocation.subhandlers().register(handler);
            }
            if spec.executes_registered {
                invocation.subhandlers().execute().await?;
                invocation.subhandlers().execute().await?;
            }
            Ok(Some(json!({"retry": retry})))
        })
    }
}

/// A daemon's function: records its start, waits until it is stopped (reading the `poll`
/// path of its live body at each change meanwhile, recording each new value), records why.
fn daemon(
    id: String,
    poll: Option<String>,
    calls: Arc<PathBuf>,
) -> impl Fn(Invocation) -> std::pin::Pin<Box<dyn Future<Output = HandlerResult> + Send>>
+ Send
+ Sync
+ 'static {
    move |invocation| {
        let (id, poll, calls) = (id.clone(), poll.clone(), calls.clone());
        Box::pin(async move {
            let name = invocation.name().to_string();
            let namespace = invocation.namespace().map(String::from);
            let call = |daemon: &str| json!({"handler": id, "namespace": namespace, "name": name, "daemon": daemon});
            record(&calls, &call("started")).await;
            if let Some(path) = poll {
                let body = kopf::Live::<Value>::body(&invocation)?;
                let mut last: Option<Value> = None;
                loop {
                    let value = body.read(|body| lookup(body, &path).cloned().unwrap_or_default());
                    if last.as_ref() != Some(&value) {
                        let mut polled = call("polled");
                        polled["value"] = value.clone();
                        record(&calls, &polled).await;
                        last = Some(value);
                    }
                    tokio::select! {
                        _ = invocation.stopped().cancelled() => break,
                        _ = body.changed() => {}
                    }
                }
            }
            invocation.stopped().cancelled().await;
            let why = match invocation.stop_reason() {
                Some(StopReason::ObjectDeleted) => "deleted",
                Some(StopReason::FiltersMismatch) => "filters",
                Some(StopReason::OperatorExiting) => "exiting",
                _ => "other",
            };
            record(&calls, &call(why)).await;
            Ok(None)
        })
    }
}

/// What a call records: the arguments that matter, as Kopf names them.
fn call(spec: &HandlerSpec, id: &str, invocation: &Invocation) -> Value {
    let mut call = match spec.kind {
        Kind::Event => json!({
            "handler": id,
            "namespace": invocation.namespace(),
            "name": invocation.name(),
            "type": invocation.event_type(),
        }),
        Kind::Timer => {
            let mut call = json!({
                "handler": id,
                "namespace": invocation.namespace(),
                "name": invocation.name(),
                "retry": invocation.retry(),
                "timer": true,
            });
            if let Some(field) = &spec.field {
                call["value"] = lookup(invocation.body(), field)
                    .cloned()
                    .unwrap_or_default();
            }
            call
        }
        _ => json!({
            "handler": id,
            "namespace": invocation.namespace(),
            "name": invocation.name(),
            "reason": invocation.reason().map(|reason| reason.as_str()),
            "retry": invocation.retry(),
            "old": invocation.old(),
            "new": invocation.new(),
            "diff": invocation.diff(),
        }),
    };
    if let Some(index) = &spec.reads {
        let content: serde_json::Map<String, Value> =
            match invocation.index::<String, String>(index) {
                Ok(index) => index
                    .iter()
                    .map(|(key, store)| {
                        let mut names: Vec<String> = store.iter().cloned().collect();
                        names.sort();
                        (key, json!(names))
                    })
                    .collect(),
                Err(error) => [("error".to_string(), json!(error.to_string()))]
                    .into_iter()
                    .collect(),
            };
        call["index"] = Value::Object(content);
    }
    call
}

/// Appends one JSON line to the file, and waits until it is written: tokio's `write_all`
/// only hands the bytes to a background write, so two calls recorded one after the other
/// could land in the file out of order.
async fn record(calls: &Path, call: &Value) {
    let mut file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(calls)
        .await
        .unwrap_or_else(|error| panic!("opening {}: {error}", calls.display()));
    let line = format!("{call}\n");
    file.write_all(line.as_bytes())
        .await
        .unwrap_or_else(|error| panic!("writing {}: {error}", calls.display()));
    file.flush()
        .await
        .unwrap_or_else(|error| panic!("writing {}: {error}", calls.display()));
}
