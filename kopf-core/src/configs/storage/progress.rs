//! Progress of handlers across handling cycles: one [`ProgressRecord`] per handler, kept on the
//! object while a cause is being handled and purged when all its handlers are done.
//!
//! Kopf: `kopf/_cogs/configs/progress.py`; the record's fields as `HandlerState.for_storage`
//! and `from_storage` in `kopf/_core/actions/progression.py` write and read them.

use std::borrow::Borrow;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use super::{fields, keys, pyjson, timestamps};

/// The id of a handler, as used for its progress record and its results in `status`.
///
/// Kopf forms it from the function's name or an explicit `id`, with `/<field>` for field
/// handlers and `parent/child` for sub-handlers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct HandlerId(String);

impl HandlerId {
    /// A handler id from any string.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for HandlerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for HandlerId {
    fn from(id: &str) -> Self {
        Self(id.to_owned())
    }
}

impl From<String> for HandlerId {
    fn from(id: String) -> Self {
        Self(id)
    }
}

impl From<HandlerId> for String {
    fn from(id: HandlerId) -> Self {
        id.0
    }
}

impl AsRef<str> for HandlerId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for HandlerId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// The persisted state of one handler for the cause being handled, in Kopf's format.
///
/// As JSON its keys come in Kopf's order (`started`, `stopped`, `delayed`, `purpose`,
/// `retries`, `success`, `failure`, `message`, `subrefs`); absent values are left out, while
/// `retries`, `success` and `failure` are always written, as Kopf does. Timestamps are written
/// as `2026-03-01T12:34:56.123456+00:00` (microseconds; finer digits are dropped).
///
/// Reading is as lenient as Kopf: missing or `null` fields take their defaults, and so (where
/// Kopf would fail) do fields of the wrong type and unparseable timestamps.
///
/// ```
/// use kopf::storage::ProgressRecord;
///
/// let text = r#"{"started":"2026-03-01T12:34:56.123456+00:00","purpose":"create","retries":1,"success":false,"failure":false,"message":"not ready"}"#;
/// let record = ProgressRecord::from_json(text).unwrap();
/// assert_eq!(record.retries, 1);
/// assert_eq!(record.message.as_deref(), Some("not ready"));
/// assert_eq!(record.to_json(), text);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgressRecord {
    /// When the handler was first attempted for this cause.
    pub started: Option<OffsetDateTime>,
    /// When the handler finally succeeded or failed.
    pub stopped: Option<OffsetDateTime>,
    /// Not to be retried before this time.
    pub delayed: Option<OffsetDateTime>,
    /// The cause the record was started for: `create`, `update`, `delete` or `resume`.
    pub purpose: Option<String>,
    /// Attempts made so far.
    pub retries: u32,
    /// Finished successfully.
    pub success: bool,
    /// Finished with a permanent failure.
    pub failure: bool,
    /// The message of the last error.
    pub message: Option<String>,
    /// The ids of all sub-handlers at any depth; written sorted.
    pub subrefs: Vec<HandlerId>,
}

impl ProgressRecord {
    /// The record as a JSON object in Kopf's key order, without absent values.
    pub fn to_value(&self) -> Value {
        let mut map = self.to_full_map();
        map.retain(|_, value| !value.is_null());
        Value::Object(map)
    }

    /// The record with every key, absent values as `null` (Kopf's full record, as written to
    /// `status` where a merge-patch must null out what the previous record had).
    pub(crate) fn to_full_value(&self) -> Value {
        Value::Object(self.to_full_map())
    }

    fn to_full_map(&self) -> Map<String, Value> {
        let timestamp = |t: Option<OffsetDateTime>| {
            t.map_or(Value::Null, |t| {
                Value::String(timestamps::format_iso8601(t))
            })
        };
        let text = |s: &Option<String>| s.clone().map_or(Value::Null, Value::String);
        let subrefs = if self.subrefs.is_empty() {
            Value::Null
        } else {
            let mut subrefs: Vec<&str> = self.subrefs.iter().map(HandlerId::as_str).collect();
            subrefs.sort_unstable();
            Value::from(subrefs)
        };
        let mut map = Map::new();
        map.insert("started".into(), timestamp(self.started));
        map.insert("stopped".into(), timestamp(self.stopped));
        map.insert("delayed".into(), timestamp(self.delayed));
        map.insert("purpose".into(), text(&self.purpose));
        map.insert("retries".into(), Value::from(self.retries));
        map.insert("success".into(), Value::Bool(self.success));
        map.insert("failure".into(), Value::Bool(self.failure));
        map.insert("message".into(), text(&self.message));
        map.insert("subrefs".into(), subrefs);
        map
    }

    /// Reads a record from a JSON object; `None` if it is not an object.
    pub fn from_value(value: &Value) -> Option<Self> {
        let record = value.as_object()?;
        let timestamp = |key: &str| {
            record
                .get(key)
                .and_then(Value::as_str)
                .and_then(timestamps::parse_iso8601)
        };
        let flag = |key: &str| {
            record
                .get(key)
                .is_some_and(|value| !fields::is_falsy(value))
        };
        Some(Self {
            started: timestamp("started"),
            stopped: timestamp("stopped"),
            delayed: timestamp("delayed"),
            purpose: record
                .get("purpose")
                .and_then(Value::as_str)
                .filter(|purpose| !purpose.is_empty())
                .map(str::to_owned),
            retries: record
                .get("retries")
                .and_then(Value::as_u64)
                .map_or(0, |retries| u32::try_from(retries).unwrap_or(u32::MAX)),
            success: flag("success"),
            failure: flag("failure"),
            message: record
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned),
            subrefs: record
                .get("subrefs")
                .and_then(Value::as_array)
                .map(|subrefs| {
                    subrefs
                        .iter()
                        .filter_map(Value::as_str)
                        .map(HandlerId::from)
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// The record as Kopf writes it into an annotation: compact, ASCII-only JSON.
    pub fn to_json(&self) -> String {
        pyjson::dumps(&self.to_value())
    }

    /// Reads a record from an annotation's JSON; `None` if it is not a JSON object.
    pub fn from_json(text: &str) -> Option<Self> {
        Self::from_value(&serde_json::from_str(text).ok()?)
    }
}

impl Serialize for ProgressRecord {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ProgressRecord {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_value(&value)
            .ok_or_else(|| serde::de::Error::custom("a progress record must be a JSON object"))
    }
}

/// Where the progress records of handlers are kept on an object.
///
/// Implementations read from the object's `body` and write into `patch`, a JSON merge-patch
/// being built for the object (an object, or `null` for an empty one). They keep one record per
/// handler and never combine them, so that several operators with different handler ids can
/// share an object.
pub trait ProgressStorage: Send + Sync + fmt::Debug {
    /// The record of this handler on the object, if any.
    fn fetch(&self, key: &HandlerId, body: &Value) -> Option<ProgressRecord>;

    /// Writes the record of this handler into the patch.
    fn store(&self, key: &HandlerId, record: &ProgressRecord, body: &Value, patch: &mut Value);

    /// Removes the record of this handler: nulls it in the patch if the object has it, or
    /// drops it from the patch if only the patch has it (so it is never sent).
    fn purge(&self, key: &HandlerId, body: &Value, patch: &mut Value);

    /// Sets (or with `None`, removes) the touch-dummy whose change makes the API server send a
    /// fresh watch event; writes only if the object's value differs.
    fn touch(&self, body: &Value, patch: &mut Value, value: Option<&str>);

    /// Removes this storage's own fields from an essence, so that they never count as changes.
    fn clear(&self, essence: &mut Value);
}

/// Progress records in `metadata.annotations`, as JSON strings: Kopf's storage since 0.27.
///
/// Writes the V2 key and, while `v1` is on, the V1 key too; reads the first of them present;
/// purges both (see [annotation keys](crate::configs::storage#annotation-keys)). For prefixes that do
/// not start with `kopf.`, it also writes `<prefix>/kopf-managed: "yes"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationsProgressStorage {
    /// The annotations' prefix; `kopf.zalando.org` by default. Must not be empty.
    pub prefix: String,
    /// Also write V1 keys, for rolling back to old Kopf versions; on by default (as in Kopf).
    pub v1: bool,
    /// Write absent values as `null` instead of leaving them out; off by default.
    pub verbose: bool,
    /// The annotation name of the touch-dummy; `touch-dummy` by default.
    pub touch_key: String,
}

impl AnnotationsProgressStorage {
    /// The storage with Kopf's defaults under another prefix.
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
            ..Self::default()
        }
    }

    fn annotation_keys(&self, key: &str, body: &Value) -> Vec<String> {
        keys::make_keys(&self.prefix, self.v1, key, body)
    }
}

impl Default for AnnotationsProgressStorage {
    fn default() -> Self {
        Self {
            prefix: keys::DEFAULT_PREFIX.to_owned(),
            v1: true,
            verbose: false,
            touch_key: "touch-dummy".to_owned(),
        }
    }
}

impl ProgressStorage for AnnotationsProgressStorage {
    fn fetch(&self, key: &HandlerId, body: &Value) -> Option<ProgressRecord> {
        self.annotation_keys(key.as_str(), body)
            .iter()
            .find_map(|full_key| {
                let encoded = fields::resolve(body, &["metadata", "annotations", full_key])?;
                ProgressRecord::from_json(encoded.as_str()?)
            })
    }

    fn store(&self, key: &HandlerId, record: &ProgressRecord, body: &Value, patch: &mut Value) {
        let decoded = if self.verbose {
            record.to_full_value()
        } else {
            record.to_value()
        };
        let encoded = pyjson::dumps(&decoded);
        for full_key in self.annotation_keys(key.as_str(), body) {
            let path = ["metadata", "annotations", full_key.as_str()];
            fields::ensure(patch, &path, Value::String(encoded.clone()));
        }
        keys::store_marker(&self.prefix, body, patch);
    }

    fn purge(&self, key: &HandlerId, body: &Value, patch: &mut Value) {
        for full_key in self.annotation_keys(key.as_str(), body) {
            purge_field(body, patch, &["metadata", "annotations", full_key.as_str()]);
        }
    }

    fn touch(&self, body: &Value, patch: &mut Value, value: Option<&str>) {
        for full_key in self.annotation_keys(&self.touch_key, body) {
            let path = ["metadata", "annotations", full_key.as_str()];
            if touch_field(body, patch, &path, value) {
                keys::store_marker(&self.prefix, body, patch);
            }
        }
    }

    fn clear(&self, essence: &mut Value) {
        if !self.prefix.is_empty() {
            let own = format!("{}/", self.prefix);
            let keys: Vec<String> = fields::resolve(essence, &["metadata", "annotations"])
                .and_then(Value::as_object)
                .map(|annotations| {
                    annotations
                        .keys()
                        .filter(|key| key.starts_with(&own))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            fields::remove_annotations(essence, &keys);
        }
        fields::remove_empty_stanzas(essence);
    }
}

/// Progress records in `status.<name>.progress.<handler-id>` as JSON objects: Kopf's storage
/// before 0.27, still read by Kopf's default storage.
///
/// Kopf stopped writing it in 1.44 (every write was an extra `/status` PATCH), so by default
/// this storage only reads, purges and clears; set `writable` to write as Kopf ≤ 1.43 did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusProgressStorage {
    /// The dotted path of the records' container; `status.kopf.progress` by default.
    pub field: String,
    /// The dotted path of the touch-dummy; `status.kopf.dummy` by default.
    pub touch_field: String,
    /// Write records and touches; off by default (as in Kopf 1.44+).
    pub writable: bool,
}

impl StatusProgressStorage {
    /// The read-only storage in `status.<name>.progress` with the touch-dummy in
    /// `status.<name>.dummy`.
    pub fn new(name: &str) -> Self {
        Self {
            field: format!("status.{name}.progress"),
            touch_field: format!("status.{name}.dummy"),
            writable: false,
        }
    }

    fn record_path<'a>(&'a self, key: &'a HandlerId) -> Vec<&'a str> {
        let mut path = fields::parse_field(&self.field);
        path.push(key.as_str());
        path
    }
}

impl Default for StatusProgressStorage {
    fn default() -> Self {
        Self::new("kopf")
    }
}

impl ProgressStorage for StatusProgressStorage {
    fn fetch(&self, key: &HandlerId, body: &Value) -> Option<ProgressRecord> {
        ProgressRecord::from_value(fields::resolve(body, &self.record_path(key))?)
    }

    fn store(&self, key: &HandlerId, record: &ProgressRecord, _body: &Value, patch: &mut Value) {
        if self.writable {
            fields::ensure(patch, &self.record_path(key), record.to_full_value());
        }
    }

    fn purge(&self, key: &HandlerId, body: &Value, patch: &mut Value) {
        purge_field(body, patch, &self.record_path(key));
    }

    fn touch(&self, body: &Value, patch: &mut Value, value: Option<&str>) {
        if self.writable {
            touch_field(body, patch, &fields::parse_field(&self.touch_field), value);
        }
    }

    fn clear(&self, essence: &mut Value) {
        let _ = fields::remove(essence, &fields::parse_field(&self.field));
        fields::remove_empty_stanzas(essence);
    }
}

/// Kopf's default: records in annotations, legacy records in `status` read as a fallback.
///
/// Fetching takes the first storage that has the record (annotations first); storing, purging,
/// touching and clearing go to both (the status storage is read-only unless made `writable`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SmartProgressStorage {
    /// The primary storage.
    pub annotations: AnnotationsProgressStorage,
    /// The legacy storage.
    pub status: StatusProgressStorage,
}

impl SmartProgressStorage {
    /// Kopf's default storage with the annotations under another prefix.
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            annotations: AnnotationsProgressStorage::new(prefix),
            status: StatusProgressStorage::default(),
        }
    }
}

impl ProgressStorage for SmartProgressStorage {
    fn fetch(&self, key: &HandlerId, body: &Value) -> Option<ProgressRecord> {
        self.annotations
            .fetch(key, body)
            .or_else(|| self.status.fetch(key, body))
    }

    fn store(&self, key: &HandlerId, record: &ProgressRecord, body: &Value, patch: &mut Value) {
        self.annotations.store(key, record, body, patch);
        self.status.store(key, record, body, patch);
    }

    fn purge(&self, key: &HandlerId, body: &Value, patch: &mut Value) {
        self.annotations.purge(key, body, patch);
        self.status.purge(key, body, patch);
    }

    fn touch(&self, body: &Value, patch: &mut Value, value: Option<&str>) {
        self.annotations.touch(body, patch, value);
        self.status.touch(body, patch, value);
    }

    fn clear(&self, essence: &mut Value) {
        self.annotations.clear(essence);
        self.status.clear(essence);
    }
}

/// Nulls the field in the patch if the object has it; else drops it from the patch.
fn purge_field(body: &Value, patch: &mut Value, path: &[&str]) {
    if fields::resolve(body, path).is_some() {
        fields::ensure(patch, path, Value::Null);
    } else if fields::resolve(patch, path).is_some() {
        let _ = fields::remove(patch, path);
    }
}

/// Sets the field in the patch unless the object already has that value; `true` if set.
fn touch_field(body: &Value, patch: &mut Value, path: &[&str], value: Option<&str>) -> bool {
    let value = value.map_or(Value::Null, Value::from);
    let current = fields::resolve(body, path).unwrap_or(&Value::Null);
    let differs = *current != value;
    if differs {
        fields::ensure(patch, path, value);
    }
    differs
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;
    use time::macros::datetime;

    use super::*;

    const PREFIX: &str = "my-operator.example.com";

    fn typical() -> ProgressRecord {
        ProgressRecord {
            started: Some(datetime!(2026-03-01 12:34:56.123456 UTC)),
            delayed: Some(datetime!(2026-03-01 12:35:56.123456 UTC)),
            purpose: Some("create".into()),
            retries: 1,
            message: Some("not ready: \"é\" — ✓ 😀\n\u{7f}".into()),
            ..ProgressRecord::default()
        }
    }

    /// What Kopf 1.45.2 writes for `typical()`: `AnnotationsProgressStorage().store(...)` of
    /// `HandlerState(...).for_storage()`.
    const TYPICAL_JSON: &str = r#"{"started":"2026-03-01T12:34:56.123456+00:00","delayed":"2026-03-01T12:35:56.123456+00:00","purpose":"create","retries":1,"success":false,"failure":false,"message":"not ready: \"\u00e9\" \u2014 \u2713 \ud83d\ude00\n\u007f"}"#;

    #[test]
    fn typical_record_written_exactly_as_kopf() {
        assert_eq!(typical().to_json(), TYPICAL_JSON);
        let mut patch = json!({});
        SmartProgressStorage::default().store(
            &"create_fn".into(),
            &typical(),
            &json!({}),
            &mut patch,
        );
        assert_eq!(
            patch,
            json!({"metadata": {"annotations": {"kopf.zalando.org/create_fn": TYPICAL_JSON}}})
        );
    }

    /// Kopf 1.45.2, custom prefix, a finished record with sub-handlers: the marker is added and
    /// the subrefs are sorted.
    #[test]
    fn finished_record_with_subrefs_written_exactly_as_kopf() {
        let record = ProgressRecord {
            started: Some(datetime!(2026-03-01 12:34:56.123456 UTC)),
            stopped: Some(datetime!(2026-03-01 12:34:56.123456 UTC)),
            purpose: Some("update".into()),
            retries: 3,
            success: true,
            subrefs: vec!["b/y".into(), "a/x".into()],
            ..ProgressRecord::default()
        };
        let mut patch = Value::Null;
        AnnotationsProgressStorage::new("my-op.example.com").store(
            &"parent/fn".into(),
            &record,
            &json!({}),
            &mut patch,
        );
        let expected = r#"{"metadata":{"annotations":{"my-op.example.com/parent.fn":"{\"started\":\"2026-03-01T12:34:56.123456+00:00\",\"stopped\":\"2026-03-01T12:34:56.123456+00:00\",\"purpose\":\"update\",\"retries\":3,\"success\":true,\"failure\":false,\"subrefs\":[\"a/x\",\"b/y\"]}","my-op.example.com/kopf-managed":"yes"}}}"#;
        assert_eq!(serde_json::to_string(&patch).unwrap(), expected);
    }

    #[test]
    fn record_written_by_kopf_is_read() {
        let body =
            json!({"metadata": {"annotations": {"kopf.zalando.org/create_fn": TYPICAL_JSON}}});
        let record = SmartProgressStorage::default().fetch(&"create_fn".into(), &body);
        assert_eq!(record, Some(typical()));
    }

    /// Kopf's own test data: naive timestamps as old Kopf versions wrote them (read as UTC).
    #[test]
    fn legacy_naive_record_is_read() {
        let text = r#"{"started":"2020-01-01T00:00:00","stopped":"2020-12-31T23:59:59","delayed":"3000-01-01T00:00:00","retries":123,"success":false,"failure":false,"message":null,"subrefs":null}"#;
        let record = ProgressRecord::from_json(text).unwrap();
        assert_eq!(
            record,
            ProgressRecord {
                started: Some(datetime!(2020-01-01 0:00 UTC)),
                stopped: Some(datetime!(2020-12-31 23:59:59 UTC)),
                delayed: Some(datetime!(3000-01-01 0:00 UTC)),
                retries: 123,
                ..ProgressRecord::default()
            }
        );
    }

    #[test]
    fn lenient_reading_of_odd_fields() {
        let text = r#"{"started":"not a time","purpose":"","retries":-1,"success":1,"failure":null,"message":5,"subrefs":["x",1],"extra":true}"#;
        let record = ProgressRecord::from_json(text).unwrap();
        assert_eq!(
            record,
            ProgressRecord {
                success: true,
                subrefs: vec!["x".into()],
                ..ProgressRecord::default()
            }
        );
        assert_eq!(ProgressRecord::from_json("[]"), None);
        assert_eq!(ProgressRecord::from_json("{"), None);
        assert_eq!(
            ProgressRecord::from_json("{}"),
            Some(ProgressRecord::default())
        );
    }

    #[test]
    fn empty_record_keeps_the_always_present_keys() {
        assert_eq!(
            ProgressRecord::default().to_json(),
            r#"{"retries":0,"success":false,"failure":false}"#
        );
    }

    #[test]
    fn written_record_parses_as_kopf_expects() {
        let parsed: Value = serde_json::from_str(&typical().to_json()).unwrap();
        let expected: Value = serde_json::from_str(TYPICAL_JSON).unwrap();
        assert_eq!(parsed, expected);
        let keys: Vec<&str> = parsed
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "started", "delayed", "purpose", "retries", "success", "failure", "message"
            ]
        );
    }

    #[test]
    fn serde_goes_through_kopf_format() {
        let text = serde_json::to_string(&typical()).unwrap();
        let back: ProgressRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back, typical());
        assert!(serde_json::from_str::<ProgressRecord>("1").is_err());
    }

    #[test]
    fn verbose_writes_nulls() {
        let storage = AnnotationsProgressStorage {
            verbose: true,
            ..AnnotationsProgressStorage::new(PREFIX)
        };
        let mut patch = json!({});
        storage.store(
            &"id1".into(),
            &ProgressRecord::default(),
            &json!({}),
            &mut patch,
        );
        assert_eq!(
            patch["metadata"]["annotations"][format!("{PREFIX}/id1")],
            r#"{"started":null,"stopped":null,"delayed":null,"purpose":null,"retries":0,"success":false,"failure":false,"message":null,"subrefs":null}"#
        );
    }

    /// Kopf's `test_annotations_hashing.py`: the keys used for fetching, storing, purging and
    /// touching, for short, V1-cut and V2-cut ids.
    #[test]
    fn keys_normalized_in_all_operations() {
        let cases = [
            ("a_b.c-d/e".to_owned(), vec![format!("{PREFIX}/a_b.c-d.e")]),
            (
                "x".repeat(40),
                vec![
                    format!("{PREFIX}/{}", "x".repeat(40)),
                    format!("{PREFIX}/{}-tEokcg", "x".repeat(32)),
                ],
            ),
            (
                "x".repeat(64),
                vec![
                    format!("{PREFIX}/{}-SItAqA", "x".repeat(56)),
                    format!("{PREFIX}/{}-SItAqA", "x".repeat(32)),
                ],
            ),
        ];
        let storage = AnnotationsProgressStorage::new(PREFIX);
        for (id, expected_keys) in cases {
            let key = HandlerId::new(id.clone());
            for expected in &expected_keys {
                let body = json!({"metadata": {"annotations": {expected.clone(): TYPICAL_JSON}}});
                assert_eq!(
                    storage.fetch(&key, &body),
                    Some(typical()),
                    "fetch {expected}"
                );

                let mut patch = json!({});
                storage.purge(&key, &body, &mut patch);
                assert_eq!(patch["metadata"]["annotations"][expected], Value::Null);
                assert!(
                    patch["metadata"]["annotations"].get(expected).is_some(),
                    "purge {expected}"
                );
            }

            let mut patch = json!({});
            storage.store(&key, &typical(), &json!({}), &mut patch);
            let written = written_keys(&patch);
            assert_eq!(
                written,
                expected_keys.iter().collect::<Vec<_>>(),
                "store {id}"
            );

            let touching = AnnotationsProgressStorage {
                touch_key: id.clone(),
                ..storage.clone()
            };
            let mut patch = json!({});
            touching.touch(&json!({}), &mut patch, Some("irrelevant"));
            let written = written_keys(&patch);
            assert_eq!(
                written,
                expected_keys.iter().collect::<Vec<_>>(),
                "touch {id}"
            );
        }
    }

    #[test]
    fn v2_key_wins_over_v1_key_when_fetching() {
        let id = "x".repeat(64);
        let v2 = format!("{PREFIX}/{}-SItAqA", "x".repeat(56));
        let v1 = format!("{PREFIX}/{}-SItAqA", "x".repeat(32));
        let body = json!({"metadata": {"annotations": {
            v1: r#"{"retries":1,"success":false,"failure":false}"#,
            v2: r#"{"retries":2,"success":false,"failure":false}"#,
        }}});
        let record = AnnotationsProgressStorage::new(PREFIX).fetch(&id.as_str().into(), &body);
        assert_eq!(record.map(|r| r.retries), Some(2));
    }

    #[test]
    fn v1_keys_not_written_when_off() {
        let storage = AnnotationsProgressStorage {
            v1: false,
            ..AnnotationsProgressStorage::new(PREFIX)
        };
        let mut patch = json!({});
        storage.store(
            &"x".repeat(40).as_str().into(),
            &typical(),
            &json!({}),
            &mut patch,
        );
        let written = written_keys(&patch);
        assert_eq!(written, [&format!("{PREFIX}/{}", "x".repeat(40))]);
    }

    #[test]
    fn fetching_from_empty_or_null_returns_none() {
        let id: HandlerId = "id1".into();
        for storage in storages() {
            assert_eq!(storage.fetch(&id, &json!({})), None, "{storage:?}");
        }
        let body = json!({"metadata": {"annotations": {"kopf.zalando.org/id1": "null"}}});
        assert_eq!(
            AnnotationsProgressStorage::default().fetch(&id, &body),
            None
        );
    }

    #[test]
    fn purging_already_empty_body_does_nothing() {
        for storage in storages() {
            let mut patch = json!({});
            storage.purge(&"id1".into(), &json!({}), &mut patch);
            assert_eq!(patch, json!({}), "{storage:?}");
        }
    }

    #[test]
    fn purging_what_only_the_patch_has_drops_it_from_the_patch() {
        let writable = StatusProgressStorage {
            writable: true,
            ..StatusProgressStorage::default()
        };
        let storages: [Box<dyn ProgressStorage>; 3] = [
            Box::new(AnnotationsProgressStorage::default()),
            Box::new(writable.clone()),
            Box::new(SmartProgressStorage {
                status: writable,
                ..SmartProgressStorage::default()
            }),
        ];
        for storage in storages {
            let mut patch = json!({});
            storage.store(&"id1".into(), &typical(), &json!({}), &mut patch);
            assert_ne!(patch, json!({}), "{storage:?}");
            storage.purge(&"id1".into(), &json!({}), &mut patch);
            assert_eq!(patch, json!({}), "{storage:?}");
        }
    }

    #[test]
    fn purging_annotations_nullifies_both_versions() {
        let id = "x".repeat(64);
        let v2 = keys::make_v2_key("kopf.zalando.org", &id);
        let v1 = keys::make_v1_key("kopf.zalando.org", &id);
        assert_ne!(v1, v2);
        let body = json!({"metadata": {"annotations": {v1.clone(): "{}", v2.clone(): "{}"}}});
        let mut patch = json!({});
        SmartProgressStorage::default().purge(&id.as_str().into(), &body, &mut patch);
        assert_eq!(
            patch,
            json!({"metadata": {"annotations": {v2: null, v1: null}}})
        );
    }

    #[test]
    fn touching_annotations() {
        let storage = AnnotationsProgressStorage {
            touch_key: "my-dummy".into(),
            ..AnnotationsProgressStorage::new(PREFIX)
        };
        let key = format!("{PREFIX}/my-dummy");
        let marker = format!("{PREFIX}/kopf-managed");

        for body in [
            json!({}),
            json!({"metadata": {"annotations": {key.clone(): "something"}}}),
        ] {
            let mut patch = json!({});
            storage.touch(&body, &mut patch, Some("hello"));
            assert_eq!(
                patch,
                json!({"metadata": {"annotations": {key.clone(): "hello", marker.clone(): "yes"}}})
            );
        }

        let mut patch = json!({});
        storage.touch(&json!({}), &mut patch, None);
        assert_eq!(patch, json!({}));

        let body = json!({"metadata": {"annotations": {key.clone(): "hello"}}});
        storage.touch(&body, &mut patch, Some("hello"));
        assert_eq!(patch, json!({}));

        let body =
            json!({"metadata": {"annotations": {key.clone(): "something", marker.clone(): "yes"}}});
        storage.touch(&body, &mut patch, None);
        assert_eq!(patch, json!({"metadata": {"annotations": {key: null}}}));
    }

    #[test]
    fn status_storage_reads_legacy_records() {
        let body = json!({"status": {"kopf": {"progress": {
            "create_fn": {"started": "2026-03-01T12:34:56.123456+00:00", "retries": 1, "success": false, "failure": false},
            "other": {"retries": 5},
        }}}});
        let record = StatusProgressStorage::default()
            .fetch(&"create_fn".into(), &body)
            .unwrap();
        assert_eq!(
            record.started,
            Some(datetime!(2026-03-01 12:34:56.123456 UTC))
        );
        assert_eq!(record.retries, 1);

        let custom = StatusProgressStorage {
            field: "status.my-operator".into(),
            ..StatusProgressStorage::default()
        };
        let body = json!({"status": {"my-operator": {"id1": {"retries": 7}}}});
        assert_eq!(
            custom.fetch(&"id1".into(), &body).map(|r| r.retries),
            Some(7)
        );
    }

    #[test]
    fn status_storage_names() {
        let storage = StatusProgressStorage::new("my-operator");
        assert_eq!(storage.field, "status.my-operator.progress");
        assert_eq!(storage.touch_field, "status.my-operator.dummy");
        assert!(!storage.writable);
    }

    #[test]
    fn status_storage_does_not_write_by_default() {
        let storage = StatusProgressStorage::default();
        let mut patch = json!({});
        storage.store(&"id1".into(), &typical(), &json!({}), &mut patch);
        storage.touch(&json!({}), &mut patch, Some("hello"));
        assert_eq!(patch, json!({}));
    }

    /// Kopf ≤ 1.43 (`StatusProgressStorage.store`): the full record, absent values as nulls.
    #[test]
    fn writable_status_storage_writes_full_records() {
        let storage = StatusProgressStorage {
            writable: true,
            ..StatusProgressStorage::default()
        };
        let mut patch = json!({});
        storage.store(&"create_fn".into(), &typical(), &json!({}), &mut patch);
        let expected = r#"{"status":{"kopf":{"progress":{"create_fn":{"started":"2026-03-01T12:34:56.123456+00:00","stopped":null,"delayed":"2026-03-01T12:35:56.123456+00:00","purpose":"create","retries":1,"success":false,"failure":false,"message":"not ready: \"\u00e9\" \u2014 \u2713 \ud83d\ude00\n\u007f","subrefs":null}}}}}"#;
        assert_eq!(patch, serde_json::from_str::<Value>(expected).unwrap());

        storage.touch(&json!({}), &mut patch, Some("hello"));
        assert_eq!(patch["status"]["kopf"]["dummy"], "hello");
        let mut patch = json!({});
        storage.touch(
            &json!({"status": {"kopf": {"dummy": "x"}}}),
            &mut patch,
            None,
        );
        assert_eq!(patch, json!({"status": {"kopf": {"dummy": null}}}));
    }

    #[test]
    fn status_storage_purges_even_when_read_only() {
        let body = json!({"status": {"kopf": {"progress": {"id1": {"retries": 1}}}}});
        let mut patch = json!({});
        SmartProgressStorage::default().purge(&"id1".into(), &body, &mut patch);
        assert_eq!(
            patch,
            json!({"status": {"kopf": {"progress": {"id1": null}}}})
        );
    }

    #[test]
    fn smart_storage_prefers_annotations_then_falls_back_to_status() {
        let storage = SmartProgressStorage::default();
        let both = json!({
            "metadata": {"annotations": {"kopf.zalando.org/id1": r#"{"retries":2}"#}},
            "status": {"kopf": {"progress": {"id1": {"retries": 1}}}},
        });
        assert_eq!(
            storage.fetch(&"id1".into(), &both).map(|r| r.retries),
            Some(2)
        );
        let status_only = json!({"status": {"kopf": {"progress": {"id1": {"retries": 1}}}}});
        assert_eq!(
            storage
                .fetch(&"id1".into(), &status_only)
                .map(|r| r.retries),
            Some(1)
        );
    }

    #[test]
    fn clearing_removes_own_fields_from_essences() {
        let mut essence = json!({
            "spec": {"x": 1},
            "metadata": {"annotations": {
                "kopf.zalando.org/create_fn": "{}",
                "kopf.zalando.org/touch-dummy": "x",
                "kopf.zalando.org.other/x": "kept",
                "other": "kept",
            }},
            "status": {"kopf": {"progress": {"create_fn": {}}}},
        });
        SmartProgressStorage::default().clear(&mut essence);
        assert_eq!(
            serde_json::to_string(&essence).unwrap(),
            r#"{"spec":{"x":1},"metadata":{"annotations":{"kopf.zalando.org.other/x":"kept","other":"kept"}}}"#
        );

        let mut essence = json!({
            "metadata": {"annotations": {"kopf.zalando.org/create_fn": "{}"}},
            "status": {"kopf": {"progress": {}, "other": 1}},
        });
        SmartProgressStorage::default().clear(&mut essence);
        assert_eq!(essence, json!({"status": {"kopf": {"other": 1}}}));
    }

    /// The annotations written, except the marker (written for non-`kopf.` prefixes).
    fn written_keys(patch: &Value) -> Vec<&String> {
        let annotations = patch["metadata"]["annotations"].as_object().unwrap();
        annotations
            .keys()
            .filter(|key| !key.ends_with("/kopf-managed"))
            .collect()
    }

    fn storages() -> Vec<Box<dyn ProgressStorage>> {
        vec![
            Box::new(AnnotationsProgressStorage::default()),
            Box::new(StatusProgressStorage::default()),
            Box::new(SmartProgressStorage::default()),
        ]
    }

    fn timestamps() -> impl Strategy<Value = Option<OffsetDateTime>> {
        proptest::option::of(
            (0i64..253_402_300_799, 0u32..1_000_000).prop_map(|(s, us)| {
                OffsetDateTime::from_unix_timestamp(s)
                    .unwrap()
                    .replace_microsecond(us)
                    .unwrap()
            }),
        )
    }

    fn records() -> impl Strategy<Value = ProgressRecord> {
        (
            (timestamps(), timestamps(), timestamps()),
            proptest::option::of("[a-z]{1,8}"),
            any::<u32>(),
            any::<bool>(),
            any::<bool>(),
            proptest::option::of(any::<String>()),
            prop::collection::btree_set(any::<String>(), 0..4),
        )
            .prop_map(
                |(
                    (started, stopped, delayed),
                    purpose,
                    retries,
                    success,
                    failure,
                    message,
                    subrefs,
                )| {
                    ProgressRecord {
                        started,
                        stopped,
                        delayed,
                        purpose,
                        retries,
                        success,
                        failure,
                        message,
                        subrefs: subrefs.into_iter().map(HandlerId::from).collect(),
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn records_round_trip_through_annotations(record in records()) {
            let storage = SmartProgressStorage::default();
            let id = HandlerId::from("some/handler");
            let mut patch = json!({});
            storage.store(&id, &record, &json!({}), &mut patch);
            prop_assert_eq!(storage.fetch(&id, &patch), Some(record.clone()));
            let text = record.to_json();
            prop_assert!(text.is_ascii());
            prop_assert_eq!(ProgressRecord::from_json(&text), Some(record));
        }
    }
}
