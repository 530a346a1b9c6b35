//! Kopf's log lines: the `plain`, `full` and `json` formats of `--log-format`, with the object
//! an event is about (from its spans' `object.name` and `object.namespace`).

use std::fmt;

use clap::ValueEnum;
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::{Extensions, LookupSpan};
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer};

use crate::kits::stderr;

/// The log formats of `--log-format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// `[namespace/name] message`.
    Plain,
    /// `[time] target [LEVEL] [namespace/name] message`.
    #[default]
    Full,
    /// `{"message": ..., "timestamp": ..., "severity": ..., "object": {...}}`.
    Json,
}

/// How log lines look: Kopf's `--log-format`, `--log-prefix/--no-log-prefix` and
/// `--log-refkey`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LogStyle {
    pub(crate) format: LogFormat,
    /// Messages prefixed with `[namespace/name]`; `None`: as Kopf, except in JSON lines.
    pub(crate) prefix: Option<bool>,
    /// The key of the object in JSON lines; `None`: `object`, as Kopf.
    pub(crate) refkey: Option<String>,
}

/// Installs the subscriber with Kopf's log format, unless the program has installed one;
/// `filter` (a tracing filter) or else `RUST_LOG`, else INFO, decides what is logged. Lines go
/// to stderr through a thread of their own ([`stderr`](crate::kits::stderr)).
pub(crate) fn init(filter: Option<&'static str>, style: &LogStyle) {
    let from_env = std::env::var(EnvFilter::DEFAULT_ENV).ok();
    let filter = EnvFilter::try_new(directives(filter, from_env.as_deref()))
        .unwrap_or_else(|_| EnvFilter::new(directives(None, None)));
    let lines = stderr::stderr();
    let _already_installed = tracing_subscriber::registry()
        .with(filter)
        .with(SpanFields {
            all: style.format == LogFormat::Json,
        })
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(move || lines.clone())
                .fmt_fields(Unformatted)
                .event_format(KopfFormat::new(style)),
        )
        .try_init();
}

/// kube-client's HTTP layer logs every failed response at ERROR, with no object and no
/// word of what the request was for: kopf-rs logs each failure itself, with its object, at
/// the level it deserves (a retried 500 is a warning). Silenced unless the filter names
/// kube_client.
const KUBE_HTTP_FAILURES: &str = "kube_client::client::builder=off";

/// The filter's directives: the given ones, else `RUST_LOG`'s, else INFO; with kube-client's
/// HTTP failure lines off unless they name kube_client themselves.
fn directives(filter: Option<&str>, from_env: Option<&str>) -> String {
    let chosen = filter.or(from_env).unwrap_or("info");
    if chosen.contains("kube_client") {
        chosen.to_string()
    } else {
        format!("{chosen},{KUBE_HTTP_FAILURES}")
    }
}

/// The fmt layer's span-field formatter: nothing. [`KopfFormat`] reads the spans' fields from
/// [`SpanFields`]; the default formatter would write every new span's fields into a string
/// that no line uses (about 9,000 instructions per span).
struct Unformatted;

impl<'writer> FormatFields<'writer> for Unformatted {
    fn format_fields<R: RecordFields>(&self, _: Writer<'writer>, _: R) -> fmt::Result {
        Ok(())
    }
}

/// A layer that keeps each span's fields as JSON, for the formatter to find an event's object:
/// `all` of them for JSON lines, which show them; else only the object's name and namespace.
#[derive(Debug)]
struct SpanFields {
    all: bool,
}

/// The fields of a span (in its extensions) or of an event, in the order recorded; a field
/// recorded again replaces its value. A short list: spans and events carry a handful of
/// fields, and a line is formatted for each event, so no map (nor its hashing) is built.
#[derive(Debug, Default)]
struct Fields(Vec<(&'static str, Value)>);

impl Fields {
    fn set(&mut self, name: &'static str, value: Value) {
        match self.0.iter_mut().find(|(known, _)| *known == name) {
            Some((_, slot)) => *slot = value,
            None => self.0.push((name, value)),
        }
    }

    fn get(&self, name: &str) -> Option<&Value> {
        self.0
            .iter()
            .find_map(|(known, value)| (*known == name).then_some(value))
    }

    fn take(&mut self, name: &str) -> Option<Value> {
        let index = self.0.iter().position(|(known, _)| *known == name)?;
        Some(self.0.remove(index).1)
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for SpanFields {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: Context<'_, S>,
    ) {
        if let Some(span) = ctx.span(id) {
            let mut fields = Fields::default();
            match self.all {
                true => attrs.record(&mut fields),
                false => attrs.record(&mut ObjectFields(&mut fields)),
            }
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: Context<'_, S>,
    ) {
        if let Some(span) = ctx.span(id) {
            let mut extensions = span.extensions_mut();
            if let Some(fields) = extensions.get_mut::<Fields>() {
                match self.all {
                    true => values.record(fields),
                    false => values.record(&mut ObjectFields(fields)),
                }
            }
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.set(field.name(), Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field.name(), Value::String(value.to_string()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field.name(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field.name(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.set(field.name(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.set(field.name(), value.into());
    }
}

/// Of a span's fields, the object's name and namespace: all that plain and full lines show of
/// them. The others are not formatted at all.
struct ObjectFields<'a>(&'a mut Fields);

impl ObjectFields<'_> {
    fn wanted(field: &Field) -> bool {
        matches!(field.name(), "object.name" | "object.namespace")
    }
}

impl Visit for ObjectFields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if Self::wanted(field) {
            self.0.record_debug(field, value);
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if Self::wanted(field) {
            self.0.record_str(field, value);
        }
    }
}

/// Kopf's log formats, for `tracing`.
#[derive(Debug, Clone)]
struct KopfFormat {
    format: LogFormat,
    prefix: bool,
    refkey: String,
}

impl KopfFormat {
    fn new(style: &LogStyle) -> KopfFormat {
        KopfFormat {
            format: style.format,
            prefix: style.prefix.unwrap_or(style.format != LogFormat::Json),
            refkey: style.refkey.clone().unwrap_or_else(|| "object".into()),
        }
    }
}

impl<S, N> FormatEvent<S, N> for KopfFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        // The spans' fields, outermost first (an inner span's field replaces an outer one's),
        // then the event's own. Only JSON lines show the spans' other fields.
        let json = self.format == LogFormat::Json;
        let mut context = Fields::default();
        // The object's name and namespace are read in place, from the innermost spans that
        // carry them (found by id), not copied for every line.
        let (mut named, mut namespaced) = (None, None);
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                let Some(fields) = extensions.get::<Fields>() else {
                    continue;
                };
                for (key, value) in &fields.0 {
                    match *key {
                        "object.name" => named = Some(span.id()),
                        "object.namespace" => namespaced = Some(span.id()),
                        _ if json => context.set(key, value.clone()),
                        _ => {}
                    }
                }
            }
        }
        // One span's extensions are locked once: a second read lock of the same span (usually
        // both fields are in one) could wait behind a writer forever.
        let apart = namespaced != named;
        let named_span = named.and_then(|id| ctx.span(&id));
        let namespaced_span = namespaced.filter(|_| apart).and_then(|id| ctx.span(&id));
        let named_fields = named_span.as_ref().map(|span| span.extensions());
        let namespaced_fields = namespaced_span.as_ref().map(|span| span.extensions());
        let name = span_field(named_fields.as_ref(), "object.name");
        let namespace = match apart {
            true => span_field(namespaced_fields.as_ref(), "object.namespace"),
            false => span_field(named_fields.as_ref(), "object.namespace"),
        };
        let namespace = namespace.filter(|n| !n.is_null());
        let metadata = event.metadata();
        let now = time::OffsetDateTime::now_utc();
        if json {
            let mut prefix = String::new();
            self.prefix(&mut prefix, name, namespace)?;
            let object = name.map(|name| {
                let mut object = Map::new();
                object.insert("name".into(), name.clone());
                if let Some(namespace) = namespace {
                    object.insert("namespace".into(), namespace.clone());
                }
                object
            });
            // The spans are let go of before the event's fields are formatted (see below).
            drop((named_fields, namespaced_fields));
            let mut own = Fields::default();
            event.record(&mut own);
            let message = match own.take("message") {
                Some(Value::String(message)) => message,
                Some(other) => other.to_string(),
                None => String::new(),
            };
            let mut line = Map::new();
            line.insert("message".into(), format!("{prefix}{message}").into());
            let timestamp = now
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default();
            line.insert("timestamp".into(), timestamp.into());
            line.insert("severity".into(), json_severity(metadata.level()).into());
            line.insert("target".into(), metadata.target().into());
            if let Some(object) = object {
                line.insert(self.refkey.clone(), object.into());
            }
            for (key, value) in context.0.into_iter().chain(own.0) {
                line.insert(key.into(), value);
            }
            return writeln!(writer, "{}", Value::Object(line));
        }
        // Written piece by piece, not formatted: two lines per handled object.
        if self.format == LogFormat::Full {
            // Made on the stack and written at once: a line's writer is dynamic, and its
            // head is some thirty pieces.
            let mut head = Short::default();
            match full_head(&mut head, now, metadata) {
                Ok(()) => writer.write_str(head.as_str())?,
                Err(_) => full_head(&mut writer, now, metadata)?,
            }
        }
        self.prefix(&mut writer, name, namespace)?;
        // The spans are let go of before the event's fields are formatted: a field's `Debug`
        // may record into a span, which locks it for writing.
        drop((named_fields, namespaced_fields));
        // The message goes straight into the line; the other fields follow it.
        let mut own = Message {
            writer: &mut writer,
            written: Ok(()),
            others: Fields::default(),
        };
        event.record(&mut own);
        let Message {
            written, others, ..
        } = own;
        written?;
        for (key, value) in &others.0 {
            write!(writer, " {key}={}", Text(value))?;
        }
        writeln!(writer)
    }
}

/// A field kept in a span's extensions by [`SpanFields`].
fn span_field<'a>(extensions: Option<&'a Extensions<'_>>, key: &str) -> Option<&'a Value> {
    extensions?.get::<Fields>()?.get(key)
}

/// An event's fields for a plain or full line: the message written to the line, the others
/// kept to follow it.
struct Message<'a, 'w> {
    writer: &'a mut Writer<'w>,
    written: fmt::Result,
    others: Fields,
}

impl Visit for Message<'_, '_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "message" => self.written = write!(self.writer, "{value:?}"),
            _ => self.others.record_debug(field, value),
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.written = self.writer.write_str(value),
            _ => self.others.record_str(field, value),
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.others.record_i64(field, value);
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.others.record_u64(field, value);
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.others.record_bool(field, value);
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.others.record_f64(field, value);
    }
}

/// `[time] target [LEVEL] `: how a full line starts.
fn full_head(
    writer: &mut impl fmt::Write,
    now: time::OffsetDateTime,
    metadata: &tracing::Metadata<'_>,
) -> fmt::Result {
    writer.write_char('[')?;
    timestamp(writer, now)?;
    writer.write_str("] ")?;
    padded(writer, metadata.target(), 20)?;
    writer.write_str(" [")?;
    padded(writer, severity(metadata.level()), 8)?;
    writer.write_str("] ")
}

/// A short text made on the stack; writing more than it holds fails (and writes nothing of
/// that piece).
struct Short {
    bytes: [u8; 64],
    len: usize,
}

impl Default for Short {
    fn default() -> Short {
        Short {
            bytes: [0; 64],
            len: 0,
        }
    }
}

impl Short {
    fn as_str(&self) -> &str {
        // Only whole `str`s were copied in: always valid.
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

impl fmt::Write for Short {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let end = self.len + text.len();
        let slot = self.bytes.get_mut(self.len..end).ok_or(fmt::Error)?;
        slot.copy_from_slice(text.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// `text` cut or padded with spaces to `width` characters, as `{:<20.20}` would write it.
fn padded(writer: &mut impl fmt::Write, text: &str, width: usize) -> fmt::Result {
    // Targets and levels are ASCII: their characters are their bytes.
    let (text, written) = match text.is_ascii() {
        true => {
            let text = &text[..text.len().min(width)];
            (text, text.len())
        }
        false => {
            let cut = text
                .char_indices()
                .nth(width)
                .map_or(text.len(), |(at, _)| at);
            (&text[..cut], text[..cut].chars().count())
        }
    };
    writer.write_str(text)?;
    const SPACES: &str = "                ";
    let mut missing = width.saturating_sub(written);
    while missing > 0 {
        let spaces = missing.min(SPACES.len());
        writer.write_str(&SPACES[..spaces])?;
        missing -= spaces;
    }
    Ok(())
}

/// Writes the time as Kopf's full lines show it: `2026-12-01 12:34:56,789` (UTC).
fn timestamp(writer: &mut impl fmt::Write, now: time::OffsetDateTime) -> fmt::Result {
    let (hour, minute, second, milli) = now.to_hms_milli();
    let mut number = |value: u32, digits: u32, separator: &str| {
        for place in (0..digits).rev() {
            let digit = value / 10u32.pow(place) % 10;
            writer.write_char(char::from_digit(digit, 10).unwrap_or('0'))?;
        }
        writer.write_str(separator)
    };
    number(now.year().unsigned_abs(), 4, "-")?;
    number(u8::from(now.month()).into(), 2, "-")?;
    number(now.day().into(), 2, " ")?;
    number(hour.into(), 2, ":")?;
    number(minute.into(), 2, ":")?;
    number(second.into(), 2, ",")?;
    number(milli.into(), 3, "")
}

impl KopfFormat {
    /// `[namespace/name] ` (or `[name] ` for a cluster-wide object) when lines have a prefix.
    fn prefix(
        &self,
        writer: &mut impl fmt::Write,
        name: Option<&Value>,
        namespace: Option<&Value>,
    ) -> fmt::Result {
        match (name, namespace) {
            _ if !self.prefix => Ok(()),
            (Some(name), namespace) => {
                writer.write_char('[')?;
                if let Some(namespace) = namespace {
                    Text(namespace).write_to(writer)?;
                    writer.write_char('/')?;
                }
                Text(name).write_to(writer)?;
                writer.write_str("] ")
            }
            (None, _) => Ok(()),
        }
    }
}

/// A field's value in a line: a string as it is, anything else as JSON.
struct Text<'a>(&'a Value);

impl Text<'_> {
    fn write_to(&self, writer: &mut impl fmt::Write) -> fmt::Result {
        match self.0 {
            Value::String(text) => writer.write_str(text),
            other => write!(writer, "{other}"),
        }
    }
}

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_to(f)
    }
}

/// Kopf's severities in JSON lines.
fn json_severity(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "error",
        Level::WARN => "warn",
        Level::INFO => "info",
        _ => "debug",
    }
}

/// Kopf's (Python's) level names.
fn severity(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "ERROR",
        Level::WARN => "WARNING",
        Level::INFO => "INFO",
        _ => "DEBUG",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn style(format: LogFormat) -> LogStyle {
        LogStyle {
            format,
            ..LogStyle::default()
        }
    }

    #[test]
    fn kube_clients_http_failure_lines_are_off_unless_asked_for() {
        assert_eq!(
            directives(None, None),
            "info,kube_client::client::builder=off"
        );
        assert_eq!(
            directives(None, Some("debug")),
            "debug,kube_client::client::builder=off"
        );
        assert_eq!(
            directives(Some("warn,kopf=info"), Some("debug")),
            "warn,kopf=info,kube_client::client::builder=off"
        );
        assert_eq!(
            directives(None, Some("info,kube_client=debug")),
            "info,kube_client=debug"
        );
    }

    #[test]
    fn full_lines_write_the_time_and_the_columns_as_formatting_would() {
        let written = |now| {
            let mut text = String::new();
            timestamp(&mut text, now).unwrap();
            text
        };
        let now = time::macros::datetime!(2026-12-01 01:02:03.004 UTC);
        assert_eq!(written(now), "2026-12-01 01:02:03,004");
        let format = time::macros::format_description!(
            "[year]-[month]-[day] [hour]:[minute]:[second],[subsecond digits:3]"
        );
        let now = time::OffsetDateTime::now_utc();
        assert_eq!(written(now), now.format(&format).unwrap());
        for text in [
            "",
            "kopf",
            "kopf::objects",
            "kopf::reactor::processing::roles",
            "ünïcödé::ñames::of::targets",
        ] {
            for width in [8, 20] {
                let mut written = String::new();
                padded(&mut written, text, width).unwrap();
                assert_eq!(written, format!("{text:<width$.width$}"));
            }
        }
    }

    #[test]
    fn an_event_whose_field_records_into_its_span_is_formatted() {
        /// A field that, as it is formatted, records into the span the line reads.
        struct Recording(tracing::Span);
        impl fmt::Debug for Recording {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.record("object.name", "renamed");
                f.write_str("recorded")
            }
        }
        for format in [LogFormat::Plain, LogFormat::Json] {
            let (sender, done) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let subscriber = tracing_subscriber::registry()
                    .with(SpanFields {
                        all: format == LogFormat::Json,
                    })
                    .with(
                        tracing_subscriber::fmt::layer()
                            .with_writer(std::io::sink)
                            .fmt_fields(Unformatted)
                            .event_format(KopfFormat::new(&style(format))),
                    );
                tracing::subscriber::with_default(subscriber, || {
                    let span = tracing::info_span!("handler", object.name = "one");
                    let field = Recording(span.clone());
                    tracing::info!(parent: &span, field = ?field, "a line");
                });
                let _ = sender.send(());
            });
            done.recv_timeout(std::time::Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("{format:?}: formatting the line locked up"));
        }
    }

    #[test]
    fn a_short_text_takes_what_fits_and_refuses_the_rest() {
        use std::fmt::Write as _;
        let mut short = Short::default();
        short.write_str("[2026-12-01 12:34:56,789] ").unwrap();
        short.write_char('é').unwrap();
        assert!(short.write_str(&"x".repeat(64)).is_err());
        assert_eq!(short.as_str(), "[2026-12-01 12:34:56,789] é");
    }

    #[test]
    fn the_formats() {
        use std::sync::{Arc, Mutex};

        #[derive(Clone, Default)]
        struct Buffer(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(data);
                Ok(data.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let lines = |style: LogStyle| {
            let buffer = Buffer::default();
            let writer = buffer.clone();
            let subscriber = tracing_subscriber::registry()
                .with(SpanFields {
                    all: style.format == LogFormat::Json,
                })
                .with(
                    tracing_subscriber::fmt::layer()
                        .with_writer(move || writer.clone())
                        .fmt_fields(Unformatted)
                        .event_format(KopfFormat::new(&style)),
                );
            tracing::subscriber::with_default(subscriber, || {
                let span = tracing::info_span!(
                    "handler",
                    handler.id = "create_fn",
                    object.name = "one",
                    object.namespace = "ns"
                );
                tracing::info!(target: "kopf::objects", parent: &span, "Handler 'create_fn' succeeded.");
                tracing::warn!(target: "kopf::operator", tasks = 2, "outside");
                tracing::warn!(target: "kopf::operator", message = "named", tasks = 3);
                // The innermost span's name wins; the namespace comes from the outer one.
                let inner = tracing::info_span!(parent: &span, "sub", object.name = "two");
                tracing::info!(target: "kopf::objects", parent: &inner, "nested");
            });
            String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap()
        };
        assert_eq!(
            lines(style(LogFormat::Plain)),
            "[ns/one] Handler 'create_fn' succeeded.\noutside tasks=2\nnamed tasks=3\n[ns/two] nested\n"
        );
        let full = lines(style(LogFormat::Full));
        let first = full.lines().next().unwrap();
        assert!(first.starts_with('['), "{full}");
        assert!(
            first.ends_with(
                "] kopf::objects        [INFO    ] [ns/one] Handler 'create_fn' succeeded."
            ),
            "{full}"
        );
        let json = lines(style(LogFormat::Json));
        let first: Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
        assert_eq!(first["message"], "Handler 'create_fn' succeeded.");
        assert_eq!(first["severity"], "info");
        assert_eq!(
            first["object"],
            serde_json::json!({"name": "one", "namespace": "ns"})
        );
        assert_eq!(first["handler.id"], "create_fn");
        let second: Value = serde_json::from_str(json.lines().nth(1).unwrap()).unwrap();
        assert_eq!(second["severity"], "warn", "Kopf's JSON severity");
        assert_eq!(second["tasks"], 2);

        // --no-log-prefix, --log-prefix with JSON, --log-refkey.
        let bare = lines(LogStyle {
            prefix: Some(false),
            ..style(LogFormat::Plain)
        });
        assert!(
            bare.starts_with("Handler 'create_fn' succeeded.\n"),
            "{bare}"
        );
        let json = lines(LogStyle {
            prefix: Some(true),
            refkey: Some("k8s".into()),
            ..style(LogFormat::Json)
        });
        let first: Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
        assert_eq!(first["message"], "[ns/one] Handler 'create_fn' succeeded.");
        assert_eq!(first["k8s"]["name"], "one");
        assert!(first.get("object").is_none(), "{first}");
    }
}
