//! What a write reads of the server's answer.
//!
//! A write's answer is the whole object as stored, `metadata.managedFields` and all. A write
//! needs a few of its fields: the new resourceVersion always; the `status` stored after a
//! write of the status (to tell the fields that the schema pruned); whether the object is on
//! its way out after a write of the finalizers. The answer is read only as far as those
//! fields: the rest is skipped unparsed, and the reading stops once the last field wanted is
//! read. How much is left unread depends on where the server puts the fields: objects of the
//! built-in kinds come in their types' order (`metadata.resourceVersion` near the start,
//! `managedFields` at the end of `metadata`, then `spec` and `status`), so a write of a Pod's
//! annotations reads a few hundred bytes of an answer of several kilobytes. Custom resources
//! may come with `managedFields` before the version; then what follows the version is left.

use std::borrow::Cow;

use http_body_util::BodyExt as _;
use serde::de::{self, DeserializeOwned, IgnoredAny};
use serde_json::Value;

/// What a write needs of its answer (the resourceVersion always).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wanted {
    /// Only the new resourceVersion.
    Version,
    /// The `status` stored too.
    Status,
    /// Whether the object is being deleted, and its finalizers: all of `metadata`.
    Lifecycle,
}

/// The fields of an answer that the writes use.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Answer {
    pub(crate) resource_version: Option<String>,
    /// `metadata.deletionTimestamp` is set (read with [`Wanted::Lifecycle`]).
    pub(crate) deleting: bool,
    /// `metadata.finalizers` (read with [`Wanted::Lifecycle`]).
    pub(crate) finalizers: Vec<String>,
    /// The `status` stored, `null` if none (read with [`Wanted::Status`]).
    pub(crate) status: Value,
}

/// Sends the request and reads what `wanted` says of the object answered. API errors are
/// kube-rs's (`Error::Api` with the server's `Status`), as from `Client::request`.
pub(crate) async fn request(
    client: &kube::Client,
    request: http::Request<Vec<u8>>,
    wanted: Wanted,
) -> Result<Answer, kube::Error> {
    let answer = client.send(request.map(kube::client::Body::from)).await?;
    let code = answer.status();
    // Read where it arrived: an answer that comes in one piece is not copied.
    let text = answer.into_body().collect().await?.to_bytes();
    if code.is_client_error() || code.is_server_error() {
        return Err(api_error(code, &text));
    }
    read(&text, wanted).map_err(kube::Error::SerdeError)
}

/// The error of a failed request, as kube-rs makes it: the `Status` answered, or one made of
/// the text answered when it is not a `Status` (from a proxy, say).
fn api_error(code: http::StatusCode, text: &[u8]) -> kube::Error {
    let status = serde_json::from_slice::<kube::core::Status>(text).unwrap_or_else(|_| {
        let text = String::from_utf8_lossy(text);
        kube::core::Status::failure(text.trim(), "Failed to parse error data")
            .with_code(code.as_u16())
    });
    kube::Error::Api(status.boxed())
}

/// Reads what `wanted` says of an object's JSON text.
///
/// The values wanted are read by `serde_json`. The others are skipped by their extent alone
/// (strings to their closing quote, objects and arrays to their closing bracket), which costs
/// less than parsing them: the managed fields are most of an answer. What is skipped is not
/// checked to be JSON. The text comes from the API server, which writes JSON.
pub(crate) fn read(text: &[u8], wanted: Wanted) -> Result<Answer, serde_json::Error> {
    let mut answer = Answer::default();
    let mut scanner = Scanner { text, at: 0 };
    let lifecycle = wanted == Wanted::Lifecycle;
    let mut status_read = false;
    let flow = scanner.object(|scanner, key| {
        match key {
            b"metadata" => {
                let flow = scanner.object(|scanner, key| {
                    match key {
                        b"resourceVersion" => {
                            answer.resource_version = scanner.value()?;
                            let enough = match wanted {
                                Wanted::Version => true,
                                Wanted::Status => status_read,
                                Wanted::Lifecycle => false,
                            };
                            if enough {
                                return Ok(Flow::Stop);
                            }
                        }
                        b"deletionTimestamp" if lifecycle => {
                            answer.deleting = scanner.value::<Option<IgnoredAny>>()?.is_some();
                        }
                        b"finalizers" if lifecycle => {
                            answer.finalizers = scanner.value::<Option<_>>()?.unwrap_or_default();
                        }
                        _ => scanner.skip()?,
                    }
                    Ok(Flow::Next)
                })?;
                if flow == Flow::Stop || lifecycle {
                    return Ok(Flow::Stop);
                }
            }
            b"status" if wanted == Wanted::Status => {
                answer.status = scanner.value()?;
                status_read = true;
                if answer.resource_version.is_some() {
                    return Ok(Flow::Stop);
                }
            }
            _ => scanner.skip()?,
        }
        Ok(Flow::Next)
    })?;
    if flow == Flow::Next {
        scanner.blank();
        if scanner.at < text.len() {
            return Err(scanner.error("trailing characters"));
        }
    }
    Ok(answer)
}

/// Whether to read on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Next,
    /// Everything wanted is read.
    Stop,
}

/// A position in a JSON text.
struct Scanner<'t> {
    text: &'t [u8],
    at: usize,
}

impl<'t> Scanner<'t> {
    fn error(&self, what: &str) -> serde_json::Error {
        de::Error::custom(format_args!("{what} at byte {} of the answer", self.at))
    }

    fn blank(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.text.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte that is not blank, taken.
    fn next(&mut self) -> Option<u8> {
        self.blank();
        let byte = self.text.get(self.at).copied();
        self.at += 1;
        byte
    }

    /// The entries of an object, each key given to `entry` to read or skip its value. Stops
    /// at the first entry that says so.
    fn object(
        &mut self,
        mut entry: impl FnMut(&mut Self, &[u8]) -> Result<Flow, serde_json::Error>,
    ) -> Result<Flow, serde_json::Error> {
        if self.next() != Some(b'{') {
            return Err(self.error("expected an object"));
        }
        self.blank();
        if self.text.get(self.at) == Some(&b'}') {
            self.at += 1;
            return Ok(Flow::Next);
        }
        loop {
            let key = self.key()?;
            if self.next() != Some(b':') {
                return Err(self.error("expected `:`"));
            }
            if entry(self, &key)? == Flow::Stop {
                return Ok(Flow::Stop);
            }
            match self.next() {
                Some(b',') => {}
                Some(b'}') => return Ok(Flow::Next),
                _ => return Err(self.error("expected `,` or `}`")),
            }
        }
    }

    /// A key, unescaped where it has escapes. Its bytes are only compared with the names of
    /// the fields wanted, so they are not checked to be UTF-8.
    fn key(&mut self) -> Result<Cow<'t, [u8]>, serde_json::Error> {
        self.blank();
        let start = self.at;
        if self.text.get(start) != Some(&b'"') {
            return Err(self.error("expected a key"));
        }
        let escaped = self.skip_string()?;
        let quoted = &self.text[start..self.at];
        match escaped {
            true => serde_json::from_slice::<String>(quoted).map(|key| Cow::Owned(key.into())),
            false => Ok(Cow::Borrowed(&quoted[1..quoted.len() - 1])),
        }
    }

    /// The value here, read by `serde_json`.
    fn value<T: DeserializeOwned>(&mut self) -> Result<T, serde_json::Error> {
        self.blank();
        let start = self.at;
        self.skip()?;
        serde_json::from_slice(&self.text[start..self.at])
    }

    /// Moves past the value here.
    fn skip(&mut self) -> Result<(), serde_json::Error> {
        self.blank();
        match self.text.get(self.at) {
            Some(b'"') => self.skip_string().map(|_| ()),
            Some(b'{' | b'[') => {
                let mut depth = 0_usize;
                loop {
                    match self.text.get(self.at) {
                        None => return Err(self.error("unexpected end")),
                        Some(b'"') => {
                            self.skip_string()?;
                            continue;
                        }
                        Some(b'{' | b'[') => depth += 1,
                        Some(b'}' | b']') => {
                            depth -= 1;
                            if depth == 0 {
                                self.at += 1;
                                return Ok(());
                            }
                        }
                        Some(_) => {}
                    }
                    self.at += 1;
                }
            }
            Some(_) => {
                // A number, `true`, `false` or `null`: up to what ends it.
                let start = self.at;
                while !matches!(
                    self.text.get(self.at),
                    None | Some(b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t')
                ) {
                    self.at += 1;
                }
                match self.at > start {
                    true => Ok(()),
                    false => Err(self.error("expected a value")),
                }
            }
            None => Err(self.error("unexpected end")),
        }
    }

    /// Moves past the string that starts here; whether it has escapes.
    fn skip_string(&mut self) -> Result<bool, serde_json::Error> {
        let mut at = self.at + 1;
        let mut escaped = false;
        loop {
            let rest = &self.text[at.min(self.text.len())..];
            let Some(found) = memchr::memchr2(b'"', b'\\', rest) else {
                self.at = self.text.len();
                return Err(self.error("unexpected end in a string"));
            };
            if rest[found] == b'"' {
                self.at = at + found + 1;
                return Ok(escaped);
            }
            escaped = true;
            at += found + 2; // the backslash and the character it escapes
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// An object in the API server's order of keys, with managed fields to skip.
    fn object() -> Value {
        json!({
            "apiVersion": "kopf.dev/v1",
            "kind": "KopfExample",
            "metadata": {
                "name": "one",
                "namespace": "ns",
                "uid": "u-1",
                "resourceVersion": "42",
                "deletionTimestamp": "2026-01-01T00:00:00Z",
                "finalizers": ["kopf.zalando.org/KopfFinalizerMarker"],
                "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {"f:size": {}}}}],
            },
            "spec": {"size": 3},
            "status": {"create_fn": "done"},
        })
    }

    fn read_value(object: &Value, wanted: Wanted) -> Answer {
        read(&serde_json::to_vec(object).unwrap(), wanted).unwrap()
    }

    #[test]
    fn failed_requests_are_api_errors_as_kube_rs_makes_them() {
        let status = json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "the object has been modified", "reason": "Conflict", "code": 409,
        });
        let text = serde_json::to_vec(&status).unwrap();
        let kube::Error::Api(status) = api_error(http::StatusCode::CONFLICT, &text) else {
            panic!("not an API error");
        };
        assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
        assert_eq!(status.message, "the object has been modified");

        let text = b"<html>502 Bad Gateway</html>\n";
        let kube::Error::Api(status) = api_error(http::StatusCode::BAD_GATEWAY, text) else {
            panic!("not an API error");
        };
        assert_eq!(status.code, 502);
        assert_eq!(status.message, "<html>502 Bad Gateway</html>");
    }

    #[test]
    fn the_version_alone_is_read_up_to_the_version() {
        let answer = read_value(&object(), Wanted::Version);
        assert_eq!(answer.resource_version.as_deref(), Some("42"));
        assert_eq!(answer.status, Value::Null, "not read");
        assert!(!answer.deleting, "not read");
    }

    #[test]
    fn the_status_is_read_with_the_version() {
        let answer = read_value(&object(), Wanted::Status);
        assert_eq!(answer.resource_version.as_deref(), Some("42"));
        assert_eq!(answer.status, json!({"create_fn": "done"}));
    }

    #[test]
    fn the_lifecycle_is_all_of_metadata() {
        let answer = read_value(&object(), Wanted::Lifecycle);
        assert_eq!(answer.resource_version.as_deref(), Some("42"));
        assert!(answer.deleting);
        assert_eq!(answer.finalizers, ["kopf.zalando.org/KopfFinalizerMarker"]);

        let mut alive = object();
        alive["metadata"]["deletionTimestamp"] = Value::Null;
        alive["metadata"]["finalizers"] = Value::Null;
        let answer = read_value(&alive, Wanted::Lifecycle);
        assert!(!answer.deleting);
        assert!(answer.finalizers.is_empty());
    }

    #[test]
    fn any_order_of_keys_is_read_whole_when_needed() {
        let text = br#"{"status": {"a": 1}, "spec": {}, "metadata": {"managedFields": [], "finalizers": ["f"], "resourceVersion": "7"}, "kind": "K"}"#;
        for wanted in [Wanted::Version, Wanted::Status, Wanted::Lifecycle] {
            let answer = read(text, wanted).unwrap();
            assert_eq!(answer.resource_version.as_deref(), Some("7"), "{wanted:?}");
        }
        let answer = read(text, Wanted::Status).unwrap();
        assert_eq!(answer.status, json!({"a": 1}));
        let answer = read(text, Wanted::Lifecycle).unwrap();
        assert_eq!(answer.finalizers, ["f"]);
    }

    #[test]
    fn an_answer_without_the_fields_is_read_to_its_end() {
        let answer = read(br#"{"kind": "K", "metadata": {}}"#, Wanted::Status).unwrap();
        assert_eq!(answer, Answer::default());
    }

    #[test]
    fn broken_answers_are_errors() {
        for text in [
            &b"not json"[..],
            br#"{"metadata": {"name": "one""#,
            br#"{"metadata": {"resourceVersion": 42}}"#,
            br#"{"metadata": {}} trailing"#,
            br#"[]"#,
        ] {
            assert!(
                read(text, Wanted::Status).is_err(),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn the_reading_stops_at_the_last_field_wanted() {
        // Cut short after the version: a write of annotations needs no more.
        let text = br#"{"metadata": {"resourceVersion": "9", "managedFields": [{"#;
        let answer = read(text, Wanted::Version).unwrap();
        assert_eq!(answer.resource_version.as_deref(), Some("9"));
        assert!(read(text, Wanted::Status).is_err());
    }
    #[test]
    fn escaped_keys_and_blanks_are_read_as_json() {
        let text = br#" { "kind" : "K" , "met\u0061data" : { "resource\u0056ersion" : "5" } , "status" : { "a\"b" : [ "}" , "\\" ] } } "#;
        let answer = read(text, Wanted::Status).unwrap();
        assert_eq!(answer.resource_version.as_deref(), Some("5"));
        assert_eq!(answer.status, json!({"a\"b": ["}", "\\"]}));
    }

    use proptest::prelude::*;

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            (-1000i32..1000).prop_map(|n| Value::from(f64::from(n) / 8.0)),
            // Quotes, backslashes, brackets and any character in strings.
            prop_oneof![any::<String>(), "[\"\\\\{}\\[\\],:a ]{0,6}"].prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 32, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::vec(("[a-z\"\\\\]{1,3}", inner), 0..5)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    /// Entries in any order: the fields that answers are read for, and others around them.
    fn entries(known: impl Strategy<Value = Vec<(String, Value)>>) -> impl Strategy<Value = Value> {
        (
            known,
            prop::collection::vec(("[a-z]{1,3}", json_value()), 0..4),
        )
            .prop_flat_map(|(known, others)| {
                let mut entries = others;
                entries.extend(known);
                let mut unique = serde_json::Map::new();
                entries.into_iter().for_each(|(key, value)| {
                    unique.insert(key, value);
                });
                Just(unique.into_iter().collect::<Vec<_>>())
                    .prop_shuffle()
                    .prop_map(|entries| Value::Object(entries.into_iter().collect()))
            })
    }

    fn objects() -> impl Strategy<Value = Value> {
        let optional = |value: BoxedStrategy<Value>| prop::option::of(value);
        let metadata = entries(
            (
                optional("[0-9]{1,4}".prop_map(Value::from).boxed()),
                optional(
                    prop_oneof![Just(Value::Null), Just(json!("2026-01-01T00:00:00Z"))].boxed(),
                ),
                optional(
                    prop_oneof![
                        Just(Value::Null),
                        prop::collection::vec("[a-z/]{1,8}".prop_map(Value::from), 0..3)
                            .prop_map(Value::Array),
                    ]
                    .boxed(),
                ),
                optional(json_value().boxed()),
            )
                .prop_map(|(version, deletion, finalizers, managed)| {
                    [
                        ("resourceVersion", version),
                        ("deletionTimestamp", deletion),
                        ("finalizers", finalizers),
                        ("managedFields", managed),
                    ]
                    .into_iter()
                    .filter_map(|(key, value)| Some((key.to_owned(), value?)))
                    .collect::<Vec<_>>()
                }),
        );
        entries(
            (optional(metadata.boxed()), optional(json_value().boxed())).prop_map(
                |(metadata, status)| {
                    [("metadata", metadata), ("status", status)]
                        .into_iter()
                        .filter_map(|(key, value)| Some((key.to_owned(), value?)))
                        .collect::<Vec<_>>()
                },
            ),
        )
    }

    /// What each reading finds, read from the whole object.
    fn expected(object: &Value, wanted: Wanted) -> Answer {
        let metadata = &object["metadata"];
        let lifecycle = wanted == Wanted::Lifecycle;
        Answer {
            resource_version: metadata["resourceVersion"].as_str().map(String::from),
            deleting: lifecycle && !metadata["deletionTimestamp"].is_null(),
            finalizers: match metadata["finalizers"].as_array() {
                Some(finalizers) if lifecycle => finalizers
                    .iter()
                    .map(|f| f.as_str().unwrap().to_owned())
                    .collect(),
                _ => Vec::new(),
            },
            status: match wanted {
                Wanted::Status => object.get("status").cloned().unwrap_or_default(),
                _ => Value::Null,
            },
        }
    }

    proptest! {
        #[test]
        fn answers_are_read_as_a_parser_reads_them(object in objects(), pretty in any::<bool>()) {
            let text = match pretty {
                true => serde_json::to_vec_pretty(&object).unwrap(),
                false => serde_json::to_vec(&object).unwrap(),
            };
            for wanted in [Wanted::Version, Wanted::Status, Wanted::Lifecycle] {
                let answer = read(&text, wanted).unwrap();
                prop_assert_eq!(answer, expected(&object, wanted), "{:?}", wanted);
            }
        }

        #[test]
        fn no_text_breaks_the_reading(text in prop::collection::vec(any::<u8>(), 0..64)) {
            for wanted in [Wanted::Version, Wanted::Status, Wanted::Lifecycle] {
                let _ = read(&text, wanted);
            }
        }
    }
}
