//! Progress of handlers across handling cycles: one [`ProgressRecord`] per handler, kept on the
//! object while a cause is being handled and purged when all its handlers are done.
//!
//! Kopf: `kopf/_cogs/configs/progress.py`; the record's fields as `HandlerState.for_storage`
//! and `from_storage` in `kopf/_core/actions/progression.py` write and read them.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

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

    fn annotation_keys(&self, key: &str, body: &Value) -> Arc<[String]> {
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
        for full_key in &*self.annotation_keys(key.as_str(), body) {
            let path = ["metadata", "annotations", full_key.as_str()];
            fields::ensure(patch, &path, Value::String(encoded.clone()));
        }
        keys::store_marker(&self.prefix, body, patch);
    }

    fn purge(&self, key: &HandlerId, body: &Value, patch: &mut Value) {
        for full_key in &*self.annotation_keys(key.as_str(), body) {
            purge_field(body, patch, &["metadata", "annotations", full_key.as_str()]);
        }
    }

    fn touch(&self, body: &Value, patch: &mut Value, value: Option<&str>) {
        for full_key in &*self.annotation_keys(&self.touch_key, body) {
            let path = ["metadata", "annotations", full_key.as_str()];
            if touch_field(body, patch, &path, value) {
                keys::store_marker(&self.prefix, body, patch);
            }
        }
    }

    fn clear(&self, essence: &mut Value) {
        if !self.prefix.is_empty() {
            let own: Vec<String> = fields::resolve(essence, &["metadata", "annotations"])
                .and_then(Value::as_object)
                .map(|annotations| {
                    annotations
                        .keys()
                        .filter(|key| keys::is_under(key, &self.prefix))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            fields::remove_annotations(essence, &own);
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
        // Walked without building the path: this runs for every handler in every cycle.
        let records = fields::resolve_steps(body, self.field.split('.'))?;
        ProgressRecord::from_value(records.get(key.as_str())?)
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
        // An essence seldom has the field's first step (`status`): then there is nothing to do.
        let first = self.field.split('.').next().unwrap_or_default();
        if essence.get(first).is_some() {
            let _ = fields::remove(essence, &fields::parse_field(&self.field));
        }
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

/// Several progress storages at once (Kopf's `MultiProgressStorage`): fetches from the first
/// that has the record; stores, purges, touches and clears through all of them, in order.
/// [`SmartProgressStorage`] is the same for Kopf's two default storages.
///
/// ```
/// use std::sync::Arc;
///
/// use kopf::storage::{AnnotationsProgressStorage, MultiProgressStorage, StatusProgressStorage};
///
/// let mut settings = kopf::Settings::default();
/// settings.persistence.progress_storage = Arc::new(MultiProgressStorage {
///     storages: vec![
///         Box::new(AnnotationsProgressStorage::new("my-operator.example.com")),
///         Box::new(AnnotationsProgressStorage::default()),
///         Box::new(StatusProgressStorage::default()),
///     ],
/// });
/// ```
#[derive(Debug, Default)]
pub struct MultiProgressStorage {
    /// The storages, in the order of preference for fetching.
    pub storages: Vec<Box<dyn ProgressStorage>>,
}

impl ProgressStorage for MultiProgressStorage {
    fn fetch(&self, key: &HandlerId, body: &Value) -> Option<ProgressRecord> {
        self.storages
            .iter()
            .find_map(|storage| storage.fetch(key, body))
    }

    fn store(&self, key: &HandlerId, record: &ProgressRecord, body: &Value, patch: &mut Value) {
        for storage in &self.storages {
            storage.store(key, record, body, patch);
        }
    }

    fn purge(&self, key: &HandlerId, body: &Value, patch: &mut Value) {
        for storage in &self.storages {
            storage.purge(key, body, patch);
        }
    }

    fn touch(&self, body: &Value, patch: &mut Value, value: Option<&str>) {
        for storage in &self.storages {
            storage.touch(body, patch, value);
        }
    }

    fn clear(&self, essence: &mut Value) {
        for storage in &self.storages {
            storage.clear(essence);
        }
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
mod tests;
