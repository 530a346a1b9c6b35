//! Kubernetes Events about objects (Kopf's posting): posted by handlers through [`Events`],
//! and, when the settings ask, from what handlers log through their object's [`Logger`].
//!
//! ```
//! # fn handler(invocation: kopf::Invocation) -> kopf::registry::HandlerResult {
//! let logger = invocation.logger();
//! // To the logs; also posted as an Event if `settings.posting.loggers` is on.
//! logger.info(format_args!("creating {} replicas", invocation.spec()["replicas"]));
//! // An Event about the object (if `settings.posting.enabled`, the default).
//! invocation.events().info("Created", "the database is ready");
//! # Ok(None)
//! # }
//! ```
//!
//! Or, as in Kopf, with the free functions [`info`](crate::info), [`warn`](crate::warn),
//! [`exception`](crate::exception) and [`event`](crate::event), about any object, through the
//! operator running the current handler (they live with the current handler, in `actions`):
//!
//! ```
//! # fn handler(invocation: kopf::Invocation) -> kopf::registry::HandlerResult {
//! kopf::info(invocation.body(), "Created", "the database is ready");
//! # Ok(None)
//! # }
//! ```
//!
//! Events are queued without waiting and posted in the background by the operator's poster
//! ([`poster`]), one object's in order, failed posts retried with Kopf's backoffs
//! (`posting.default_backoffs`, or `posting.logging_backoffs` for log records). They look as
//! Kopf's: `generateName` from [`PostingSettings::event_name_prefix`](crate::settings::PostingSettings::event_name_prefix), the object in
//! `involvedObject`, `reportingComponent`, `source.component`, three timestamps of now, a
//! message cut to 1024 characters.
//!
//! Invariants:
//! 1. Handlers never wait for posting, and a failed post never fails a handler.
//! 2. Events about core `v1` Events are never posted (each would beget another).
//! 3. Posting is not bound to the operator's term (a Lease leader's, a shard owner's), unlike
//!    the writes to objects: an Event is a new object that overwrites nothing, says what
//!    happened (a handler ran within the term), and stays true when it lands late; a leader
//!    that lost its term still posts what its handlers said before it knew.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

#[cfg(test)]
use serde_json::json;
use serde_json::{Map, Value};
use tracing::Level;

#[cfg(test)]
use crate::configs::settings::PostingSettings;
use crate::structs::bodies::Body;
use crate::structs::resources::Resource;

pub(crate) mod poster;

use poster::Origin;
pub(crate) use poster::Poster;
#[cfg(test)]
use poster::Queued;

impl Poster {
    /// Events about an object of this resource.
    pub(crate) fn events(&self, body: &Value, resource: &Resource) -> Events {
        let subject = if self.is_running() {
            Subject::built(reference(body, Some(resource)))
        } else {
            // Nothing is ever posted: no reference is needed.
            Subject::built(Map::new())
        };
        Events::new(self.clone(), subject)
    }

    /// Events about an object of this resource, whose reference is built from the body only
    /// when first needed: most handlers post nothing.
    pub(crate) fn events_of(&self, body: &Arc<Body>, resource: &Arc<Resource>) -> Events {
        if !self.is_running() {
            return self.events(body, resource);
        }
        Events::new(
            self.clone(),
            Subject {
                reference: OnceLock::new(),
                source: Some((body.clone(), resource.clone())),
            },
        )
    }

    /// Events about an object given as a body (anything that has its apiVersion and kind).
    pub(crate) fn about(&self, body: &Value) -> Events {
        Events::new(self.clone(), Subject::built(reference(body, None)))
    }
}

/// The object that events are about: Kopf's object reference, built from its body at once,
/// or when first needed (it then keeps the body and resource until the events are dropped).
#[derive(Clone)]
pub(crate) struct Subject {
    reference: OnceLock<Map<String, Value>>,
    source: Option<(Arc<Body>, Arc<Resource>)>,
}

impl Subject {
    fn built(reference: Map<String, Value>) -> Subject {
        Subject {
            reference: OnceLock::from(reference),
            source: None,
        }
    }

    fn reference(&self) -> &Map<String, Value> {
        self.reference.get_or_init(|| match &self.source {
            Some((body, resource)) => reference(body, Some(resource)),
            None => Map::new(),
        })
    }
}

impl fmt::Debug for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.reference().fmt(f)
    }
}

/// Kopf's object reference (`bodies.build_object_reference`): apiVersion, kind, name, uid,
/// namespace, those present. apiVersion and kind fall back to the resource's (list items of
/// built-in resources come without them).
fn reference(body: &Value, resource: Option<&Resource>) -> Map<String, Value> {
    let meta = &body["metadata"];
    let api_version = body["apiVersion"]
        .as_str()
        .map(String::from)
        .or_else(|| resource.map(Resource::api_version));
    let kind = body["kind"]
        .as_str()
        .map(String::from)
        .or_else(|| resource.map(|r| r.kind.clone()));
    let fields = [
        ("apiVersion", api_version),
        ("kind", kind),
        ("name", meta["name"].as_str().map(String::from)),
        ("uid", meta["uid"].as_str().map(String::from)),
        ("namespace", meta["namespace"].as_str().map(String::from)),
    ];
    fields
        .into_iter()
        .filter_map(|(key, value)| {
            Some((
                key.to_string(),
                Value::String(value.filter(|v| !v.is_empty())?),
            ))
        })
        .collect()
}

/// Posts Kubernetes Events about an object (Kopf's `kopf.event`, `kopf.info`, `kopf.warn`,
/// `kopf.exception`); get it from [`Invocation::events`](crate::Invocation::events). It can be
/// moved into tasks and threads of the handler's own, as the free functions
/// ([`info`](crate::info), ...) can be called there.
///
/// Nothing is posted when [`PostingSettings::enabled`](crate::settings::PostingSettings::enabled) is off, or below
/// [`PostingSettings::level`](crate::settings::PostingSettings::level) (`info` needs the level at INFO or more verbose, `warn` at WARN,
/// `exception` at ERROR). Posting happens in the background: these methods never wait. A
/// failed post is retried after each of [`PostingSettings::default_backoffs`](crate::settings::PostingSettings::default_backoffs) (or the
/// backoffs given with [`with_backoffs`](Self::with_backoffs), Kopf's `backoffs=`), then
/// logged and dropped.
///
/// ```
/// # fn handler(invocation: kopf::Invocation) -> kopf::registry::HandlerResult {
/// let events = invocation.events();
/// events.info("Scaled", format_args!("to {} replicas", 3));
/// if let Err(error) = "x".parse::<u32>() {
///     events.exception("InvalidSize", &error); // type `Error`, the error as the message
/// }
/// // About another object, e.g. a child the handler created:
/// let child = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "child", "namespace": "default"}});
/// events.about(&child).warn("Adopted", "by its parent");
/// # Ok(None)
/// # }
/// ```
#[derive(Clone)]
pub struct Events {
    /// One allocation per invocation, shared by its clones (the invocation's, its logger's,
    /// the current handler's): a clone is one count. A clone of the poster counts its queue
    /// twice and its settings once, on counters shared by every handler of the operator.
    shared: Arc<EventsOf>,
}

/// Where events go, and what they are about; and the span of the logger that shares them.
struct EventsOf {
    poster: Poster,
    subject: Subject,
    /// Delays between retries of a failed post, instead of the settings' (Kopf's `backoffs=`).
    backoffs: Option<Arc<[Duration]>>,
    /// Set once, by the first logger made on these events with a span (an invocation's, as
    /// it is made ready for its handler): the logger and its events are one allocation. A
    /// logger with another span gets events of its own.
    span: OnceLock<tracing::Span>,
}

impl Events {
    fn new(poster: Poster, subject: Subject) -> Events {
        Events {
            shared: Arc::new(EventsOf {
                poster,
                subject,
                backoffs: None,
                span: OnceLock::new(),
            }),
        }
    }

    /// These events, whose failed posts are retried after these delays instead of
    /// [`PostingSettings::default_backoffs`](crate::settings::PostingSettings::default_backoffs) (Kopf's `kopf.info(..., backoffs=...)`); none, for
    /// no retry at all.
    ///
    /// ```
    /// # fn handler(invocation: kopf::Invocation) -> kopf::registry::HandlerResult {
    /// use std::time::Duration;
    ///
    /// let patient = invocation.events().with_backoffs([Duration::from_secs(10); 30]);
    /// patient.warn("Degraded", "this one must get through");
    /// invocation.events().with_backoffs([]).info("Progress", "this one may be lost");
    /// # Ok(None)
    /// # }
    /// ```
    pub fn with_backoffs(&self, backoffs: impl IntoIterator<Item = Duration>) -> Events {
        Events {
            shared: Arc::new(EventsOf {
                poster: self.shared.poster.clone(),
                subject: self.shared.subject.clone(),
                backoffs: Some(backoffs.into_iter().collect()),
                span: OnceLock::new(),
            }),
        }
    }

    /// An event of type `Normal`.
    pub fn info(&self, reason: &str, message: impl fmt::Display) {
        if self.shared.poster.passes(Level::INFO) {
            self.post("Normal", reason, message.to_string());
        }
    }

    /// An event of type `Warning`.
    pub fn warn(&self, reason: &str, message: impl fmt::Display) {
        if self.shared.poster.passes(Level::WARN) {
            self.post("Warning", reason, message.to_string());
        }
    }

    /// An event of type `Error` with the error as its message (Kopf's `kopf.exception`).
    pub fn exception(&self, reason: &str, error: impl fmt::Display) {
        if self.shared.poster.passes(Level::ERROR) {
            self.post("Error", reason, error.to_string());
        }
    }

    /// An event of any type (`Normal`, `Warning`, ...), whatever the level setting.
    pub fn event(&self, kind: &str, reason: &str, message: impl fmt::Display) {
        if self.shared.poster.enabled() {
            self.post(kind, reason, message.to_string());
        }
    }

    /// Events about another object (a body as JSON, or any object that serializes to one,
    /// e.g. a `k8s_openapi` type), posted as this object's are.
    pub fn about(&self, object: &impl serde::Serialize) -> Events {
        match serde_json::to_value(object) {
            Ok(body) => self.about_body(&body),
            Err(error) => {
                tracing::warn!(target: "kopf::posting", %error, "events about an object that does not serialize to JSON are posted without a reference to it");
                self.about_body(&Value::Null)
            }
        }
    }

    /// Whether these events are posted at all (`posting.enabled`).
    pub(crate) fn enabled(&self) -> bool {
        self.shared.poster.enabled()
    }

    pub(crate) fn about_body(&self, body: &Value) -> Events {
        let reference = reference(body, None);
        // The handler's own object, maybe without apiVersion and kind (as list items of
        // built-in resources come): referred to as its resource says.
        let uid = reference.get("uid");
        if uid.is_some() && uid == self.shared.subject.reference().get("uid") {
            return self.clone();
        }
        Events {
            shared: Arc::new(EventsOf {
                poster: self.shared.poster.clone(),
                subject: Subject::built(reference),
                backoffs: self.shared.backoffs.clone(),
                span: OnceLock::new(),
            }),
        }
    }

    fn post(&self, kind: &str, reason: &str, message: String) {
        self.shared.poster.enqueue(
            self.shared.subject.reference(),
            kind,
            reason,
            message,
            Origin::Explicit,
            self.shared.backoffs.as_ref(),
        );
    }

    /// Posts a log record if the settings ask for it (`loggers` and the level).
    fn record(&self, level: Level, message: impl FnOnce() -> String) {
        if self.shared.poster.posts_records(level) {
            let kind = match level {
                Level::ERROR => "Error",
                Level::WARN => "Warning",
                Level::INFO => "Normal",
                _ => "Debug",
            };
            self.shared.poster.enqueue(
                self.shared.subject.reference(),
                kind,
                "Logging",
                message(),
                Origin::Logging,
                None,
            );
        }
    }
}

impl fmt::Debug for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Events")
            .field("object", &self.shared.subject)
            .field("enabled", &self.shared.poster.enabled())
            .finish()
    }
}

/// A handler's logger: its object's tracing span (resource, namespace, name, handler id),
/// whose records are also posted as Kubernetes Events of the object when
/// [`PostingSettings::loggers`](crate::settings::PostingSettings::loggers) is on (off by default, as in Kopf 1.44+), with reason
/// `Logging` and a type by level (`Normal` for INFO, `Warning`, `Error`).
///
/// Only records made through these methods are posted; `tracing` macros with the logger as
/// their parent go to the logs alone:
///
/// ```
/// # fn handler(invocation: kopf::Invocation) -> kopf::registry::HandlerResult {
/// let logger = invocation.logger();
/// logger.info("starting"); // logs, and may be posted
/// tracing::debug!(parent: logger, attempt = invocation.retry(), "details"); // logs only
/// # Ok(None)
/// # }
/// ```
#[derive(Clone)]
pub struct Logger {
    /// The events its records may be posted as, which keep its span: one allocation shared
    /// with them and with its clones (the invocation's and its attempt's). A clone is one
    /// count, where a span's clone and drop each looked the span up in the subscriber's
    /// registry; and an invocation's logger and events took an allocation each.
    events: Events,
}

impl Logger {
    pub(crate) fn new(span: tracing::Span, events: Events) -> Logger {
        let mut logger = Logger { events };
        logger.set_span(span);
        logger
    }

    /// This logger in another span. The span is kept in the events' allocation when none
    /// was set there yet (an invocation's, as it is made ready for its handler), so a clone
    /// of this logger made while it had no span gets the span too; otherwise the logger gets
    /// events of its own, about the same object, with this span, and its clones keep theirs.
    pub(crate) fn set_span(&mut self, span: tracing::Span) {
        if span.is_none() && self.events.shared.span.get().is_none() {
            return;
        }
        if let Err(span) = self.events.shared.span.set(span) {
            let shared = &self.events.shared;
            self.events = Events {
                shared: Arc::new(EventsOf {
                    poster: shared.poster.clone(),
                    subject: shared.subject.clone(),
                    backoffs: shared.backoffs.clone(),
                    span: OnceLock::from(span),
                }),
            };
        }
    }

    /// The span, for `tracing` macros and `.instrument()`.
    pub fn span(&self) -> &tracing::Span {
        static NONE: OnceLock<tracing::Span> = OnceLock::new();
        match self.events.shared.span.get() {
            Some(span) => span,
            None => NONE.get_or_init(tracing::Span::none),
        }
    }

    /// Logs at DEBUG (posted as type `Debug` only if the posting level is DEBUG or TRACE).
    pub fn debug(&self, message: impl fmt::Display) {
        tracing::debug!(target: "kopf::objects", parent: self.span(), "{message}");
        self.events.record(Level::DEBUG, || message.to_string());
    }

    /// Logs at INFO.
    pub fn info(&self, message: impl fmt::Display) {
        tracing::info!(target: "kopf::objects", parent: self.span(), "{message}");
        self.events.record(Level::INFO, || message.to_string());
    }

    /// Logs a text at INFO: recorded as text, not formatted.
    pub(crate) fn info_text(&self, line: &str) {
        tracing::info!(target: "kopf::objects", parent: self.span(), message = line);
        self.events.record(Level::INFO, || line.to_string());
    }

    /// Logs at WARN.
    pub fn warn(&self, message: impl fmt::Display) {
        tracing::warn!(target: "kopf::objects", parent: self.span(), "{message}");
        self.events.record(Level::WARN, || message.to_string());
    }

    /// Logs at ERROR.
    pub fn error(&self, message: impl fmt::Display) {
        tracing::error!(target: "kopf::objects", parent: self.span(), "{message}");
        self.events.record(Level::ERROR, || message.to_string());
    }
}

impl fmt::Debug for Logger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Logger")
            .field("span", self.span())
            .field("events", &self.events)
            .finish()
    }
}

/// So that `tracing::info!(parent: invocation.logger(), ...)` logs in the object's span.
impl From<&Logger> for Option<tracing::Id> {
    fn from(logger: &Logger) -> Self {
        logger.span().id()
    }
}

/// A poster whose queue a test reads, for the tests of what posts through it.
#[cfg(test)]
pub(crate) fn test_poster(level: Level) -> (Poster, tokio::sync::mpsc::UnboundedReceiver<Queued>) {
    Poster::for_test(PostingSettings {
        level,
        ..PostingSettings::default()
    })
}

/// What was queued, as `{object, type, reason, message}`.
#[cfg(test)]
pub(crate) fn drain(receiver: &mut tokio::sync::mpsc::UnboundedReceiver<Queued>) -> Vec<Value> {
    std::iter::from_fn(|| receiver.try_recv().ok())
        .map(|q| json!({"object": q.subject, "type": q.kind, "reason": q.reason, "message": q.message}))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::poster::{cut, event_body};
    use super::*;

    /// An invocation's logger is made without a span, then given its handler's: it and its
    /// events stay one allocation. A logger with another span on the same events gets events
    /// of its own, and once both have a span, neither one's span changes the other's.
    #[test]
    fn a_logger_and_its_events_are_one_allocation_unless_spans_differ() {
        let subscriber = tracing_subscriber::registry();
        tracing::subscriber::with_default(subscriber, || {
            let body = json!({"metadata": {"name": "n", "uid": "u"}});
            let events = Poster::disabled().events(&body, &Resource::kopf_examples());
            let mut logger = Logger::new(tracing::Span::none(), events.clone());
            assert!(logger.span().is_none());
            let handler = tracing::info_span!("handler");
            logger.set_span(handler.clone());
            assert_eq!(logger.span().id(), handler.id());
            assert!(Arc::ptr_eq(&logger.events.shared, &events.shared));

            let other = tracing::info_span!("other");
            let second = Logger::new(other.clone(), events.clone());
            assert_eq!(second.span().id(), other.id());
            assert!(!Arc::ptr_eq(&second.events.shared, &events.shared));
            assert_eq!(logger.span().id(), handler.id());

            let mut renamed = logger.clone();
            renamed.set_span(other.clone());
            assert_eq!(renamed.span().id(), other.id());
            assert_eq!(
                logger.span().id(),
                handler.id(),
                "a clone's new span is its own"
            );
            assert_eq!(
                renamed.events.shared.subject.reference(),
                events.shared.subject.reference(),
                "about the same object"
            );
        });
    }

    #[test]
    fn long_messages_are_cut_as_kopf_cuts_them() {
        assert_eq!(cut("short"), "short");
        let exact = "é".repeat(1024);
        assert_eq!(cut(&exact), exact);
        let long: String = (0..2000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let cut = cut(&long);
        assert_eq!(cut.chars().count(), 1024);
        assert_eq!(&cut[..511], &long[..511]);
        assert_eq!(&cut[511..514], "...");
        assert_eq!(&cut[514..], &long[2000 - 510..]);
    }

    #[test]
    fn references_keep_what_is_present_in_kopf_order() {
        let resource = Resource {
            namespaced: false,
            ..Resource::kopf_examples()
        };
        let body = json!({"metadata": {"name": "n", "uid": "u"}});
        let reference = Value::Object(reference(&body, Some(&resource)));
        assert_eq!(
            serde_json::to_string(&reference).unwrap(),
            r#"{"apiVersion":"kopf.dev/v1","kind":"KopfExample","name":"n","uid":"u"}"#
        );
    }

    #[test]
    fn an_event_has_kopfs_shape() {
        let queued = Queued {
            subject: reference(
                &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u1"}}),
                None,
            ),
            kind: "Normal".into(),
            reason: "Logging".into(),
            message: "hello".into(),
            backoffs: Arc::from([]),
        };
        let now = time::macros::datetime!(2026-03-01 12:34:56.123456 UTC);
        let body = event_body(&PostingSettings::default(), &queued, "default", now);
        assert_eq!(
            body,
            json!({
                "metadata": {"namespace": "default", "generateName": "kopf-event-"},
                "action": "Action?",
                "type": "Normal",
                "reason": "Logging",
                "message": "hello",
                "reportingComponent": "kopf",
                "reportingInstance": "dev",
                "source": {"component": "kopf"},
                "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u1", "namespace": "default"},
                "firstTimestamp": "2026-03-01T12:34:56.123456+00:00",
                "lastTimestamp": "2026-03-01T12:34:56.123456+00:00",
                "eventTime": "2026-03-01T12:34:56.123456+00:00",
            })
        );
    }
}
