//! Kopf's log lines: the `plain`, `full` and `json` formats of `--log-format`, with the object
//! an event is about (from its spans' `object.name` and `object.namespace`).

use std::fmt;

use clap::ValueEnum;
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::{Extensions, LookupSpan};
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer};

use crate::kits::stderr;

mod objects;

use objects::ObjectPath;

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
    let _already_installed = tracing_subscriber::registry()
        .with(filter)
        .with(KopfLines::new(style, stderr::stderr()))
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

/// Kopf's log lines, made by one layer: it keeps what each span says of its object (in the
/// span's extensions) and formats each event into a line for `sink`. tracing-subscriber's
/// `fmt` layer formatted them before; it also kept every span's fields in a string of its own
/// that no line used, two more allocations for every handler's span.
struct KopfLines<W> {
    format: KopfFormat,
    sink: W,
}

impl<W> KopfLines<W> {
    fn new(style: &LogStyle, sink: W) -> KopfLines<W> {
        KopfLines {
            format: KopfFormat::new(style),
            sink,
        }
    }
}

/// Where [`KopfLines`] puts each line, whole.
trait LineSink: Send + Sync + 'static {
    fn put(&self, line: &[u8]);
}

impl LineSink for stderr::Lines {
    fn put(&self, line: &[u8]) {
        // A failing sink (a closed stderr) loses the line, as a direct write would.
        let _ = self.append(line);
    }
}

/// The object kept in a span's extensions, if any.
fn span_object<'a>(extensions: Option<&'a Extensions<'_>>) -> Option<&'a ObjectPath> {
    extensions?.get::<ObjectPath>()
}

/// The most room a thread keeps in its line's text for the next line (a line is formatted for
/// every event): a rare long line does not hold its size afterwards.
const LINE_KEPT: usize = 16 << 10;

impl<S, W> Layer<S> for KopfLines<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: LineSink,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: Context<'_, S>,
    ) {
        let Some(span) = ctx.span(id) else { return };
        if self.format.format == LogFormat::Json {
            let mut fields = Fields::default();
            attrs.record(&mut fields);
            span.extensions_mut().insert(fields);
        } else if let Some(object) = ObjectPath::recorded(attrs) {
            span.extensions_mut().insert(object);
        }
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: Context<'_, S>,
    ) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if self.format.format == LogFormat::Json {
            if let Some(fields) = extensions.get_mut::<Fields>() {
                values.record(fields);
            }
        } else if let Some(object) = extensions.get_mut::<ObjectPath>() {
            values.record(object);
        } else if let Some(object) = ObjectPath::recorded(values) {
            extensions.insert(object);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        thread_local! {
            static LINE: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
        }
        let put = |line: &mut String| {
            if self
                .format
                .format_event(&ctx, Writer::new(line), event)
                .is_ok()
            {
                self.sink.put(line.as_bytes());
            }
        };
        // A line formatted while another one is (a field's `Debug` that logs), or as the
        // thread ends, gets a text of its own.
        let reused = LINE.try_with(|kept| match kept.try_borrow_mut() {
            Ok(mut line) => {
                line.clear();
                put(&mut line);
                if line.capacity() > LINE_KEPT {
                    *line = String::new();
                }
                true
            }
            Err(_) => false,
        });
        if reused != Ok(true) {
            put(&mut String::new());
        }
    }
}

/// The fields of a span (in its extensions, for JSON lines) or of an event, in the order
/// recorded; a field recorded again replaces its value. A short list: spans and events carry
/// a handful of fields, and a line is formatted for each event, so no map (nor its hashing)
/// is built.
#[derive(Debug, Default)]
struct Fields(Vec<(&'static str, Value)>);

impl Fields {
    fn set(&mut self, name: &'static str, value: Value) {
        match self.0.iter_mut().find(|(known, _)| *known == name) {
            Some((_, slot)) => *slot = value,
            None => self.0.push((name, value)),
        }
    }

    fn take(&mut self, name: &str) -> Option<Value> {
        let index = self.0.iter().position(|(known, _)| *known == name)?;
        Some(self.0.remove(index).1)
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

impl KopfFormat {
    /// Formats the event as a line of this format.
    fn format_event<S>(
        &self,
        ctx: &Context<'_, S>,
        writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        match self.format {
            LogFormat::Json => self.json_line(ctx, writer, event),
            LogFormat::Plain | LogFormat::Full => self.text_line(ctx, writer, event),
        }
    }

    /// A plain or full line: written piece by piece, not formatted (two lines per handled
    /// object).
    fn text_line<S>(
        &self,
        ctx: &Context<'_, S>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let metadata = event.metadata();
        if self.format == LogFormat::Full {
            full_head(&mut writer, metadata)?;
        }
        self.object_prefix(ctx, event, &mut writer)?;
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
        // Not `writeln!`: that formats its (empty) arguments through `fmt::write` for one byte.
        writer.write_char('\n')
    }

    /// The prefix of the object that the event's spans name, if any. The object's name and
    /// namespace are read in place, from the innermost spans that carry them, not copied for
    /// every line. The spans are walked from the innermost out (from the root, the scope is
    /// collected first). Usually the first span that carries an object carries both: the
    /// prefix is written from it at once, under the one lock of its extensions taken to find
    /// it. Otherwise those found are kept as found, not looked up again, and their extensions
    /// are locked once each, as a second read lock of the same span could wait behind a
    /// writer forever. All are let go of before the event's fields are formatted: a field's
    /// `Debug` may record into a span, which locks it for writing.
    fn object_prefix<S>(
        &self,
        ctx: &Context<'_, S>,
        event: &Event<'_>,
        writer: &mut Writer<'_>,
    ) -> fmt::Result
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let (mut named, mut namespaced, mut both) = (None, None, false);
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope {
                let (name_here, namespace_here) = {
                    let extensions = span.extensions();
                    match extensions.get::<ObjectPath>() {
                        Some(object)
                            if object.named
                                && object.is_namespaced()
                                && named.is_none()
                                && namespaced.is_none() =>
                        {
                            let (name, namespace) = object.parts();
                            return self.prefix(writer, name, namespace);
                        }
                        Some(object) => (
                            object.named && named.is_none(),
                            object.is_namespaced() && namespaced.is_none() && !both,
                        ),
                        None => (false, false),
                    }
                };
                match (name_here, namespace_here) {
                    (true, true) => (named, both) = (Some(span), true),
                    (true, false) => named = Some(span),
                    (false, true) => namespaced = Some(span),
                    (false, false) => {}
                }
                if named.is_some() && (both || namespaced.is_some()) {
                    break;
                }
            }
        }
        let named_fields = named.as_ref().map(|span| span.extensions());
        let namespaced_fields = namespaced.as_ref().map(|span| span.extensions());
        let (name, namespace) = match both {
            true => span_object(named_fields.as_ref()).map_or((None, None), ObjectPath::parts),
            false => (
                span_object(named_fields.as_ref()).and_then(ObjectPath::name),
                span_object(namespaced_fields.as_ref()).and_then(ObjectPath::namespace),
            ),
        };
        self.prefix(writer, name, namespace)
    }

    /// A JSON line: the message, the time, the severity, the object, and every field of the
    /// event and of its spans (an inner span's field replaces an outer one's, the event's own
    /// replace them all).
    fn json_line<S>(
        &self,
        ctx: &Context<'_, S>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let mut context = Fields::default();
        let (mut name, mut namespace) = (None, None);
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                let extensions = span.extensions();
                let Some(fields) = extensions.get::<Fields>() else {
                    continue;
                };
                for (key, value) in &fields.0 {
                    match *key {
                        "object.name" => name = Some(value.clone()),
                        "object.namespace" => namespace = Some(value.clone()),
                        _ => context.set(key, value.clone()),
                    }
                }
            }
        }
        let namespace = namespace.filter(|n| !n.is_null());
        let mut prefix = String::new();
        let (name_text, namespace_text) = (
            name.as_ref().map(|name| Text(name).to_string()),
            namespace.as_ref().map(|ns| Text(ns).to_string()),
        );
        self.prefix(&mut prefix, name_text.as_deref(), namespace_text.as_deref())?;
        let object = name.map(|name| {
            let mut object = Map::new();
            object.insert("name".into(), name);
            if let Some(namespace) = namespace {
                object.insert("namespace".into(), namespace);
            }
            object
        });
        let mut own = Fields::default();
        event.record(&mut own);
        let message = match own.take("message") {
            Some(Value::String(message)) => message,
            Some(other) => other.to_string(),
            None => String::new(),
        };
        let metadata = event.metadata();
        let mut line = Map::new();
        line.insert("message".into(), format!("{prefix}{message}").into());
        let timestamp = time::OffsetDateTime::now_utc()
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
        writeln!(writer, "{}", Value::Object(line))
    }
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

/// The head of the last full line made on this thread, and what it was made of.
struct Head {
    /// Milliseconds since the epoch.
    millis: u64,
    /// The address of the event's callsite (its metadata).
    callsite: usize,
    text: String,
}

thread_local! {
    static HEAD: std::cell::RefCell<Head> = const {
        std::cell::RefCell::new(Head { millis: u64::MAX, callsite: 0, text: String::new() })
    };
}

/// `[time] target [LEVEL] `: how a full line starts, for an event of `metadata` now.
///
/// The lines of one callsite within one millisecond have the same head: a thread copies the
/// one it made last rather than make it again (in a burst, such as a thousand daemons
/// stopping at once, most lines do; the time and the columns took a third of a line's work).
fn full_head(
    writer: &mut impl fmt::Write,
    metadata: &'static tracing::Metadata<'static>,
) -> fmt::Result {
    let now = std::time::SystemTime::now();
    let Ok(since) = now.duration_since(std::time::UNIX_EPOCH) else {
        // A clock before 1970: not worth a key of its own.
        return head_at(writer, now.into(), metadata);
    };
    let millis = since.as_secs().saturating_mul(1000) + u64::from(since.subsec_millis());
    let callsite = std::ptr::from_ref(metadata).addr();
    let copied = HEAD.try_with(|head| {
        // Taken already only if a line is made while this one is (a field's `Debug` that logs).
        let mut head = head.try_borrow_mut().ok()?;
        if head.millis != millis || head.callsite != callsite {
            head.text.clear();
            head_at(&mut head.text, now.into(), metadata).ok()?;
            (head.millis, head.callsite) = (millis, callsite);
        }
        Some(writer.write_str(&head.text))
    });
    match copied {
        Ok(Some(written)) => written,
        _ => head_at(writer, now.into(), metadata),
    }
}

/// `[time] target [LEVEL] ` for an event of `metadata` at `now`.
fn head_at(
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
        name: Option<&str>,
        namespace: Option<&str>,
    ) -> fmt::Result {
        match (name, namespace) {
            _ if !self.prefix => Ok(()),
            (Some(name), namespace) => {
                writer.write_char('[')?;
                if let Some(namespace) = namespace {
                    writer.write_str(namespace)?;
                    writer.write_char('/')?;
                }
                writer.write_str(name)?;
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

    /// A sink that keeps nothing.
    struct Discarded;

    impl LineSink for Discarded {
        fn put(&self, _: &[u8]) {}
    }

    /// A sink that keeps every line.
    #[derive(Clone, Default)]
    struct Kept(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl LineSink for Kept {
        fn put(&self, line: &[u8]) {
            self.0.lock().unwrap().extend_from_slice(line);
        }
    }

    impl Kept {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
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
                let subscriber =
                    tracing_subscriber::registry().with(KopfLines::new(&style(format), Discarded));
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
    fn lines_made_in_the_same_millisecond_keep_their_own_columns_and_the_time() {
        let kept = Kept::default();
        let subscriber = tracing_subscriber::registry()
            .with(KopfLines::new(&style(LogFormat::Full), kept.clone()));
        let format = time::macros::format_description!(
            "[year]-[month]-[day] [hour]:[minute]:[second],[subsecond digits:3]"
        );
        let millis = |at: time::OffsetDateTime| at.unix_timestamp_nanos() / 1_000_000;
        let before = millis(time::OffsetDateTime::now_utc());
        tracing::subscriber::with_default(subscriber, || {
            for _ in 0..200 {
                tracing::info!(target: "kopf::objects", "first");
                tracing::warn!(target: "kopf::operator", "second");
                tracing::info!(target: "kopf::objects", "third, of the first one's columns");
            }
        });
        let after = millis(time::OffsetDateTime::now_utc());
        let text = kept.text();
        let mut last = before;
        for line in text.lines() {
            let (time, rest) = line[1..].split_once("] ").unwrap();
            let at = time::PrimitiveDateTime::parse(time, &format)
                .unwrap()
                .assume_utc();
            assert!((last..=after).contains(&millis(at)), "{line}");
            last = millis(at);
            assert!(
                [
                    "kopf::objects        [INFO    ] first",
                    "kopf::operator       [WARNING ] second",
                    "kopf::objects        [INFO    ] third, of the first one's columns",
                ]
                .contains(&rest),
                "{line}"
            );
        }
        assert_eq!(text.lines().count(), 600);
    }

    /// The plain lines that `log` makes.
    fn plain_lines(log: impl FnOnce()) -> String {
        let kept = Kept::default();
        let subscriber = tracing_subscriber::registry()
            .with(KopfLines::new(&style(LogFormat::Plain), kept.clone()));
        tracing::subscriber::with_default(subscriber, log);
        kept.text()
    }

    #[test]
    fn a_spans_object_recorded_later_or_again_is_shown_as_last_recorded() {
        let text = plain_lines(|| {
            let empty = tracing::field::Empty;
            let span =
                tracing::info_span!("handler", object.name = empty, object.namespace = empty);
            tracing::info!(parent: &span, "none yet");
            span.record("object.name", "one");
            tracing::info!(parent: &span, "named");
            span.record("object.namespace", "ns");
            tracing::info!(parent: &span, "namespaced after");
            span.record("object.name", "renamed");
            span.record("object.namespace", "other-ns");
            tracing::info!(parent: &span, "recorded again");
            let reversed =
                tracing::info_span!("handler", object.namespace = "ns2", object.name = ?"debugged");
            tracing::info!(parent: &reversed, "in any order");
        });
        assert_eq!(
            text,
            "none yet\n[one] named\n[ns/one] namespaced after\n[other-ns/renamed] recorded again\n[ns2/\"debugged\"] in any order\n"
        );
    }

    #[test]
    fn the_innermost_spans_name_the_object_part_by_part() {
        let text = plain_lines(|| {
            let outer = tracing::info_span!("outer", object.name = "a", object.namespace = "ns");
            let whole = tracing::info_span!(parent: &outer, "whole", object.name = "b", object.namespace = "ns2");
            tracing::info!(parent: &whole, "the innermost whole object");
            let spaced = tracing::info_span!(parent: &outer, "spaced", object.namespace = "ns3");
            tracing::info!(parent: &spaced, "the name from outside");
            let named = tracing::info_span!(parent: &spaced, "named", object.name = "c");
            tracing::info!(parent: &named, "each part from the innermost");
            let plain = tracing::info_span!(parent: &outer, "plain", handler.id = "h");
            tracing::info!(parent: &plain, "past a span without an object");
        });
        assert_eq!(
            text,
            "[ns2/b] the innermost whole object\n[ns3/a] the name from outside\n[ns3/c] each part from the innermost\n[ns/a] past a span without an object\n"
        );
    }

    #[test]
    fn the_formats() {
        let lines = |style: LogStyle| {
            let kept = Kept::default();
            let subscriber =
                tracing_subscriber::registry().with(KopfLines::new(&style, kept.clone()));
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
            kept.text()
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
