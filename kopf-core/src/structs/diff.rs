//! Diffs between two versions of an object, as Kopf computes them for change handlers.
//!
//! A [`Diff`] is a flat list of [`DiffItem`]s, each an operation on one field path:
//!
//! - equal values produce nothing;
//! - an absent old value produces one [`DiffOp::Add`] of the whole new value;
//! - an absent new value produces one [`DiffOp::Remove`] of the whole old value;
//! - two objects are compared key by key, recursively;
//! - anything else (lists, scalars, a change of type) is one [`DiffOp::Change`] of the whole
//!   value: lists are never diffed item by item.
//!
//! As in Kopf, JSON `null` counts as absent: `{"a": null}` and `{}` have no difference, and
//! a field going from `null` to `1` is an addition. Values are compared as Kopf (Python)
//! compares them: numbers by value (`1` equals `1.0`), objects regardless of key order.
//!
//! Kopf's order of items within one object is only partly defined (it iterates Python
//! sets): additions first, then removals, then the keys present on both sides. kopf-rs keeps
//! that grouping and makes it deterministic: added keys in the new object's order, removed
//! keys in the old object's order, then common keys in the new object's order.

use std::fmt;

use serde::ser::{Serialize, SerializeTuple, Serializer};
use serde_json::{Map, Number, Value};

/// The kind of one difference: Kopf's `'add'`, `'change'` or `'remove'`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiffOp {
    /// The field was absent (or `null`) and is now present.
    Add,
    /// The field is present on both sides with different values.
    Change,
    /// The field was present and is now absent (or `null`).
    Remove,
}

impl DiffOp {
    /// The operation as Kopf names it: `"add"`, `"change"` or `"remove"`.
    pub fn as_str(self) -> &'static str {
        match self {
            DiffOp::Add => "add",
            DiffOp::Change => "change",
            DiffOp::Remove => "remove",
        }
    }
}

impl fmt::Display for DiffOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for DiffOp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One difference: an operation on the field at `path`, with the values before and after.
///
/// Serializes as Kopf shows it, a 4-element list `[op, [path...], old, new]` with `null` for
/// an absent value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffItem {
    /// What happened to the field.
    pub op: DiffOp,
    /// The field's path from the diffed root; empty for the root itself.
    pub path: Vec<String>,
    /// The value before the change; `None` if it was absent.
    pub old: Option<Value>,
    /// The value after the change; `None` if it is absent now.
    pub new: Option<Value>,
}

impl Serialize for DiffItem {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut tuple = serializer.serialize_tuple(4)?;
        tuple.serialize_element(&self.op)?;
        tuple.serialize_element(&self.path)?;
        tuple.serialize_element(&self.old)?;
        tuple.serialize_element(&self.new)?;
        tuple.end()
    }
}

/// The differences between two versions of an object (or of one field of it), as received by
/// change handlers in their `diff` argument.
///
/// Serializes as Kopf shows it: a list of `[op, [path...], old, new]`.
///
/// ```
/// use kopf::diff::{diff, DiffOp};
/// use serde_json::json;
///
/// let old = json!({"spec": {"size": "42G", "items": ["a"]}});
/// let new = json!({"spec": {"size": "76G", "items": ["a", "b"]}});
/// let d = diff(Some(&old), Some(&new));
/// assert_eq!(d.len(), 2);
/// assert_eq!(
///     serde_json::to_value(&d).unwrap(),
///     json!([
///         ["change", ["spec", "size"], "42G", "76G"],
///         ["change", ["spec", "items"], ["a"], ["a", "b"]],
///     ]),
/// );
///
/// let size = d.reduce(&["spec", "size"]);
/// assert_eq!(size.iter().next().unwrap().op, DiffOp::Change);
/// assert!(size.iter().next().unwrap().path.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff(Vec<DiffItem>);

/// The diff of no change, for calls that are not about one.
pub(crate) static NO_CHANGES: Diff = Diff(Vec::new());

impl Diff {
    /// Iterates over the items in order.
    pub fn iter(&self) -> std::slice::Iter<'_, DiffItem> {
        self.0.iter()
    }

    /// The number of items.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no differences at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The items as a slice.
    pub fn as_slice(&self) -> &[DiffItem] {
        &self.0
    }

    /// The diff narrowed to one field, with paths relative to that field (Kopf's
    /// `diffs.reduce`, used for handlers with `field=`).
    ///
    /// Items at or under `path` are kept with the `path` prefix cut off. An item at a parent of
    /// `path` (e.g. all of `spec` added while the handler watches `spec.size`) is resolved
    /// into the field's own old and new values and diffed again, so the result describes the
    /// field itself. Items elsewhere are dropped. An empty `path` returns the diff unchanged.
    pub fn reduce<S: AsRef<str>>(&self, path: &[S]) -> Diff {
        if path.is_empty() {
            return self.clone();
        }
        let mut items = Vec::new();
        for item in &self.0 {
            if starts_with(&item.path, path) {
                items.push(DiffItem {
                    op: item.op,
                    path: item.path[path.len()..].to_vec(),
                    old: item.old.clone(),
                    new: item.new.clone(),
                });
            } else if starts_with(path, &item.path) {
                let tail = &path[item.path.len()..];
                let old = item.old.as_ref().and_then(|value| resolve(value, tail));
                let new = item.new.as_ref().and_then(|value| resolve(value, tail));
                diff_into(&mut items, &mut Vec::new(), old, new);
            }
        }
        Diff(items)
    }
}

/// Whether `path` begins with all the keys of `prefix`.
fn starts_with<A: AsRef<str>, B: AsRef<str>>(path: &[A], prefix: &[B]) -> bool {
    path.len() >= prefix.len()
        && path
            .iter()
            .zip(prefix)
            .all(|(a, b)| a.as_ref() == b.as_ref())
}

impl From<Vec<DiffItem>> for Diff {
    fn from(items: Vec<DiffItem>) -> Self {
        Diff(items)
    }
}

impl FromIterator<DiffItem> for Diff {
    fn from_iter<I: IntoIterator<Item = DiffItem>>(iter: I) -> Self {
        Diff(iter.into_iter().collect())
    }
}

impl IntoIterator for Diff {
    type Item = DiffItem;
    type IntoIter = std::vec::IntoIter<DiffItem>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Diff {
    type Item = &'a DiffItem;
    type IntoIter = std::slice::Iter<'a, DiffItem>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl Serialize for Diff {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// The differences from `old` to `new` (Kopf's `diffs.diff`); `None` means absent.
///
/// See the [module documentation](self) for the rules and the order of items.
pub fn diff(old: Option<&Value>, new: Option<&Value>) -> Diff {
    let mut items = Vec::new();
    diff_into(&mut items, &mut Vec::new(), old, new);
    Diff(items)
}

fn diff_into(
    items: &mut Vec<DiffItem>,
    path: &mut Vec<String>,
    old: Option<&Value>,
    new: Option<&Value>,
) {
    let old = old.filter(|value| !value.is_null());
    let new = new.filter(|value| !value.is_null());
    match (old, new) {
        (None, None) => {}
        (None, Some(new)) => items.push(DiffItem {
            op: DiffOp::Add,
            path: path.clone(),
            old: None,
            new: Some(new.clone()),
        }),
        (Some(old), None) => items.push(DiffItem {
            op: DiffOp::Remove,
            path: path.clone(),
            old: Some(old.clone()),
            new: None,
        }),
        (Some(Value::Object(old)), Some(Value::Object(new))) => {
            diff_objects(items, path, old, new);
        }
        (Some(old), Some(new)) => {
            if !json_eq(old, new) {
                items.push(DiffItem {
                    op: DiffOp::Change,
                    path: path.clone(),
                    old: Some(old.clone()),
                    new: Some(new.clone()),
                });
            }
        }
    }
}

fn diff_objects(
    items: &mut Vec<DiffItem>,
    path: &mut Vec<String>,
    old: &Map<String, Value>,
    new: &Map<String, Value>,
) {
    let mut descend = |key: &String, old: Option<&Value>, new: Option<&Value>| {
        path.push(key.clone());
        diff_into(items, path, old, new);
        path.pop();
    };
    for (key, value) in new.iter().filter(|(key, _)| !old.contains_key(*key)) {
        descend(key, None, Some(value));
    }
    for (key, value) in old.iter().filter(|(key, _)| !new.contains_key(*key)) {
        descend(key, Some(value), None);
    }
    for (key, value) in new {
        if let Some(old_value) = old.get(key) {
            descend(key, Some(old_value), Some(value));
        }
    }
}

/// Equality of JSON values as Kopf (Python) sees it: numbers compare by value, so `1` equals
/// `1.0`; objects compare regardless of key order; a `null` in an object is not the same as an
/// absent key here (the diff, not this function, treats them alike).
///
/// Unlike Python, `true` does not equal `1`: JSON keeps booleans and numbers apart, and so
/// does kopf-rs.
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => numbers_eq(a, b),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(key, a)| b.get(key).is_some_and(|b| json_eq(a, b)))
        }
        _ => a == b,
    }
}

fn numbers_eq(a: &Number, b: &Number) -> bool {
    fn integer(n: &Number) -> Option<i128> {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    }
    // Exact, as in Python: an integer equals a float only if the float is that very integer.
    fn float_is(float: f64, int: i128) -> bool {
        float.fract() == 0.0
            && float >= i64::MIN as f64
            && float <= u64::MAX as f64
            && float as i128 == int
    }
    match (integer(a), integer(b)) {
        (Some(a), Some(b)) => a == b,
        (Some(int), None) => b.as_f64().is_some_and(|float| float_is(float, int)),
        (None, Some(int)) => a.as_f64().is_some_and(|float| float_is(float, int)),
        (None, None) => a.as_f64() == b.as_f64(),
    }
}

/// The value at `path` inside `value` (Kopf's `dicts.resolve` with a default): `None` if a key
/// is missing or a parent on the way is not an object. An empty path resolves to `value`.
///
/// A field that is present with a `null` value resolves to `Some(&Value::Null)`: field
/// filters see it as present, as in Kopf.
pub(crate) fn resolve<'a, S: AsRef<str>>(value: &'a Value, path: &[S]) -> Option<&'a Value> {
    path.iter().try_fold(value, |current, key| match current {
        Value::Object(map) => map.get(key.as_ref()),
        _ => None,
    })
}

/// A dotted field name (`"spec.replicas"`) split into its path (Kopf's `dicts.parse_field`).
///
/// The empty string is the root (an empty path); Kopf would make it a path of one empty key,
/// which no object has.
#[allow(dead_code, reason = "called by handler registration once it lands")]
pub(crate) fn parse_field(field: &str) -> Vec<String> {
    if field.is_empty() {
        Vec::new()
    } else {
        field.split('.').map(str::to_owned).collect()
    }
}

#[cfg(test)]
mod tests;
