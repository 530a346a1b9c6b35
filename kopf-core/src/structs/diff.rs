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
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn item(op: DiffOp, path: &[&str], old: Option<Value>, new: Option<Value>) -> DiffItem {
        DiffItem {
            op,
            path: path.iter().map(|key| key.to_string()).collect(),
            old,
            new,
        }
    }

    fn add(path: &[&str], new: Value) -> DiffItem {
        item(DiffOp::Add, path, None, Some(new))
    }

    fn change(path: &[&str], old: Value, new: Value) -> DiffItem {
        item(DiffOp::Change, path, Some(old), Some(new))
    }

    fn remove(path: &[&str], old: Value) -> DiffItem {
        item(DiffOp::Remove, path, Some(old), None)
    }

    fn diff_of(old: Value, new: Value) -> Vec<DiffItem> {
        diff(Some(&old), Some(&new)).into_iter().collect()
    }

    // Modeled on Kopf's tests/diffs/test_calculation.py.
    #[test]
    fn absent_old_is_an_addition_of_the_whole_value() {
        let new = json!({"a": 1});
        assert_eq!(diff(None, Some(&new)).as_slice(), [add(&[], new.clone())]);
    }

    #[test]
    fn absent_new_is_a_removal_of_the_whole_value() {
        let old = json!({"a": 1});
        assert_eq!(
            diff(Some(&old), None).as_slice(),
            [remove(&[], old.clone())]
        );
    }

    #[test]
    fn both_absent_is_no_diff() {
        assert!(diff(None, None).is_empty());
        assert!(diff(Some(&Value::Null), None).is_empty());
        assert!(diff(None, Some(&Value::Null)).is_empty());
    }

    #[test]
    fn equal_scalars_strings_lists_and_objects_are_no_diff() {
        for value in [
            json!(100),
            json!("hello"),
            json!([100, 200, 300]),
            json!({"hello": "world", "key": "val"}),
        ] {
            assert!(diff_of(value.clone(), value).is_empty());
        }
    }

    #[test]
    fn objects_are_equal_regardless_of_key_order() {
        assert!(
            diff_of(
                json!({"hello": "world", "key": "val"}),
                json!({"key": "val", "hello": "world"}),
            )
            .is_empty()
        );
    }

    #[test]
    fn unequal_scalars_and_strings_are_a_change() {
        assert_eq!(
            diff_of(json!(100), json!(200)),
            [change(&[], json!(100), json!(200))]
        );
        assert_eq!(
            diff_of(json!("hello"), json!("world")),
            [change(&[], json!("hello"), json!("world"))]
        );
    }

    #[test]
    fn lists_are_changed_as_a_whole() {
        assert_eq!(
            diff_of(json!([100, 200, 300]), json!([100, 666, 300])),
            [change(&[], json!([100, 200, 300]), json!([100, 666, 300]))]
        );
        assert_eq!(
            diff_of(
                json!({"spec": {"items": ["task1", "task2"]}}),
                json!({"spec": {"items": ["task3", "task4"]}}),
            ),
            [change(
                &["spec", "items"],
                json!(["task1", "task2"]),
                json!(["task3", "task4"])
            )]
        );
    }

    #[test]
    fn a_change_of_type_is_a_change_of_the_whole_value() {
        assert_eq!(
            diff_of(json!({"a": {"b": 1}}), json!({"a": [1]})),
            [change(&["a"], json!({"b": 1}), json!([1]))]
        );
        assert_eq!(
            diff_of(json!({"a": "1"}), json!({"a": 1})),
            [change(&["a"], json!("1"), json!(1))]
        );
    }

    #[test]
    fn object_keys_added_removed_and_changed() {
        assert_eq!(
            diff_of(
                json!({"hello": "world"}),
                json!({"hello": "world", "key": "val"})
            ),
            [add(&["key"], json!("val"))]
        );
        assert_eq!(
            diff_of(
                json!({"hello": "world", "key": "val"}),
                json!({"hello": "world"})
            ),
            [remove(&["key"], json!("val"))]
        );
        assert_eq!(
            diff_of(
                json!({"hello": "world", "key": "old"}),
                json!({"hello": "world", "key": "new"})
            ),
            [change(&["key"], json!("old"), json!("new"))]
        );
        assert_eq!(
            diff_of(
                json!({"main": {"hello": "world", "key": "old"}}),
                json!({"main": {"hello": "world", "key": "new"}}),
            ),
            [change(&["main", "key"], json!("old"), json!("new"))]
        );
    }

    #[test]
    fn items_are_grouped_as_kopf_groups_them() {
        // Kopf: additions, then removals, then common keys; within a group, kopf-rs follows
        // the objects' key order.
        assert_eq!(
            diff_of(
                json!({"a": 100, "b": 200, "x": 1}),
                json!({"z": 0, "b": 300, "c": 400})
            ),
            [
                add(&["z"], json!(0)),
                add(&["c"], json!(400)),
                remove(&["a"], json!(100)),
                remove(&["x"], json!(1)),
                change(&["b"], json!(200), json!(300)),
            ]
        );
    }

    #[test]
    fn realistic_label_addition_and_size_update() {
        assert_eq!(
            diff_of(
                json!({"metadata": {}}),
                json!({"metadata": {"labels": "LABEL"}})
            ),
            [add(&["metadata", "labels"], json!("LABEL"))]
        );
        assert_eq!(
            diff_of(
                json!({"spec": {"size": "42G"}}),
                json!({"spec": {"size": "76G"}})
            ),
            [change(&["spec", "size"], json!("42G"), json!("76G"))]
        );
    }

    #[test]
    fn null_counts_as_absent() {
        assert!(diff_of(json!({"a": null}), json!({})).is_empty());
        assert!(diff_of(json!({}), json!({"a": null})).is_empty());
        assert_eq!(
            diff_of(json!({"a": null}), json!({"a": 1})),
            [add(&["a"], json!(1))]
        );
        assert_eq!(
            diff_of(json!({"a": 1}), json!({"a": null})),
            [remove(&["a"], json!(1))]
        );
        // Inside lists, null is a value like any other: the list changes as a whole.
        assert_eq!(
            diff_of(json!([{"a": null}]), json!([{}])),
            [change(&[], json!([{"a": null}]), json!([{}]))]
        );
    }

    #[test]
    fn numbers_compare_by_value() {
        assert!(diff_of(json!({"a": 1}), json!({"a": 1.0})).is_empty());
        assert!(diff_of(json!([1, 2.0]), json!([1.0, 2])).is_empty());
        assert_eq!(diff_of(json!(1), json!(1.5)).len(), 1);
        assert_eq!(diff_of(json!(u64::MAX), json!(u64::MAX as f64)).len(), 1);
        assert_eq!(diff_of(json!(-1), json!(u64::MAX)).len(), 1);
        // Unlike Python's True == 1.
        assert_eq!(diff_of(json!(true), json!(1)).len(), 1);
    }

    #[test]
    fn serializes_as_kopf_shows_it() {
        let d = diff_of(
            json!({"spec": {"a": 1, "b": 2}}),
            json!({"spec": {"b": 3, "c": [4]}}),
        );
        let d = Diff::from(d);
        assert_eq!(
            serde_json::to_value(&d).unwrap(),
            json!([
                ["add", ["spec", "c"], null, [4]],
                ["remove", ["spec", "a"], 1, null],
                ["change", ["spec", "b"], 2, 3],
            ])
        );
        assert_eq!(DiffOp::Add.to_string(), "add");
        assert_eq!(DiffOp::Change.to_string(), "change");
        assert_eq!(DiffOp::Remove.to_string(), "remove");
    }

    // Modeled on Kopf's tests/diffs/test_reduction.py.
    fn sample() -> Diff {
        Diff::from(vec![
            add(&["key1"], json!("new1")),
            change(&["key2"], json!("old2"), json!("new2")),
            item(
                DiffOp::Add,
                &["key2", "suba"],
                Some(json!("olda")),
                Some(json!("newa")),
            ),
            item(
                DiffOp::Remove,
                &["key2", "subb"],
                Some(json!("oldb")),
                Some(json!("newb")),
            ),
            remove(&["key3"], json!("old3")),
            change(
                &["key4"],
                json!({"suba": "olda", "subc": "oldc"}),
                json!({"subb": "newb", "subc": "newc"}),
            ),
        ])
    }

    #[test]
    fn reduce_on_the_empty_path_keeps_everything() {
        assert_eq!(sample().reduce::<&str>(&[]), sample());
    }

    #[test]
    fn reduce_keeps_items_under_the_path_relative_to_it() {
        assert_eq!(
            sample().reduce(&["key2"]).as_slice(),
            [
                change(&[], json!("old2"), json!("new2")),
                item(
                    DiffOp::Add,
                    &["suba"],
                    Some(json!("olda")),
                    Some(json!("newa"))
                ),
                item(
                    DiffOp::Remove,
                    &["subb"],
                    Some(json!("oldb")),
                    Some(json!("newb"))
                ),
            ]
        );
    }

    #[test]
    fn reduce_on_nonexistent_paths_is_empty() {
        for path in [
            &["nonexistent-key"][..],
            &["key1", "nonexistent-key"],
            &["key2", "nonexistent-key"],
            &["key3", "nonexistent-key"],
            &["key4", "nonexistent-key"],
            &["key4", "suba", "nonexistent-key"],
            &["key4", "subb", "nonexistent-key"],
            &["key4", "subc", "nonexistent-key"],
            &["key4", "nonexistent-dict", "nonexistent-key"],
        ] {
            assert!(sample().reduce(path).is_empty(), "{path:?}");
        }
    }

    #[test]
    fn reduce_dives_into_a_parent_item() {
        assert_eq!(
            sample().reduce(&["key4", "subb"]).as_slice(),
            [add(&[], json!("newb"))]
        );
        assert_eq!(
            sample().reduce(&["key4", "suba"]).as_slice(),
            [remove(&[], json!("olda"))]
        );
        assert_eq!(
            sample().reduce(&["key4", "subc"]).as_slice(),
            [change(&[], json!("oldc"), json!("newc"))]
        );
    }

    #[test]
    fn reduce_into_an_added_subtree_yields_the_field_addition() {
        let d = diff(None, Some(&json!({"spec": {"size": 1, "more": {"x": 2}}})));
        assert_eq!(d.reduce(&["spec", "size"]).as_slice(), [add(&[], json!(1))]);
        assert_eq!(
            d.reduce(&["spec", "more"]).as_slice(),
            [add(&[], json!({"x": 2}))]
        );
        assert!(d.reduce(&["status"]).is_empty());
    }

    #[test]
    fn reduce_accepts_owned_paths() {
        let d = sample();
        let path = parse_field("key4.subc");
        assert_eq!(d.reduce(&path).len(), 1);
    }

    // Modeled on Kopf's tests/dicts/test_resolving.py and test_parsing.py.
    #[test]
    fn resolve_walks_objects_only() {
        let d = json!({"abc": {"def": {"hij": "val"}}, "key": "val", "nul": null});
        assert_eq!(resolve(&d, &["abc", "def", "hij"]), Some(&json!("val")));
        assert_eq!(resolve(&d, &["rst", "uvw", "xyz"]), None);
        assert_eq!(resolve(&d, &["abc", "uvw", "xyz"]), None);
        assert_eq!(resolve(&d, &["abc", "def", "xyz"]), None);
        assert_eq!(resolve(&d, &["key", "sub"]), None);
        assert_eq!(resolve(&d, &["nul"]), Some(&Value::Null));
        assert_eq!(resolve(&d, &["nul", "sub"]), None);
        assert_eq!(resolve::<&str>(&d, &[]), Some(&d));
        assert_eq!(resolve(&json!([{"a": 1}]), &["0"]), None);
    }

    #[test]
    fn parse_field_splits_on_dots() {
        assert_eq!(parse_field("field"), ["field"]);
        assert_eq!(parse_field("field.subfield"), ["field", "subfield"]);
        assert!(parse_field("").is_empty());
    }

    /// Applies a diff to `old` the way a reader of the diff would; for tests only.
    fn apply(old: Option<&Value>, diff: &Diff) -> Option<Value> {
        let mut root = old.cloned();
        for item in diff {
            let Some((last, parents)) = item.path.split_last() else {
                root = item.new.clone();
                continue;
            };
            let mut target = root.get_or_insert_with(|| json!({}));
            for key in parents {
                target = target
                    .as_object_mut()
                    .expect("a diff only descends into objects")
                    .entry(key.clone())
                    .or_insert_with(|| json!({}));
            }
            let map = target
                .as_object_mut()
                .expect("a diff only descends into objects");
            match &item.new {
                Some(new) => {
                    map.insert(last.clone(), new.clone());
                }
                None => {
                    map.shift_remove(last);
                }
            }
        }
        root
    }

    /// What the diff cannot see removed: nulls in objects, and a null root.
    fn normalized(value: Option<&Value>) -> Option<Value> {
        fn strip(value: &Value) -> Value {
            match value {
                Value::Object(map) => Value::Object(
                    map.iter()
                        .filter(|(_, value)| !value.is_null())
                        .map(|(key, value)| (key.clone(), strip(value)))
                        .collect(),
                ),
                other => other.clone(),
            }
        }
        value.filter(|value| !value.is_null()).map(strip)
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-2i64..3).prop_map(Value::from),
            "[ab]{0,2}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::vec(("[a-d]", inner), 0..4)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    fn maybe_json_value() -> impl Strategy<Value = Option<Value>> {
        prop::option::weighted(0.9, json_value())
    }

    fn field_path() -> impl Strategy<Value = Vec<String>> {
        prop::collection::vec("[a-d]", 0..4)
    }

    proptest! {
        #[test]
        fn a_value_has_no_diff_with_itself(a in maybe_json_value()) {
            prop_assert!(diff(a.as_ref(), a.as_ref()).is_empty());
        }

        #[test]
        fn applying_the_diff_to_old_yields_new(
            a in maybe_json_value(),
            b in maybe_json_value(),
        ) {
            let d = diff(a.as_ref(), b.as_ref());
            let applied = apply(a.as_ref(), &d);
            prop_assert_eq!(normalized(applied.as_ref()), normalized(b.as_ref()));
        }

        #[test]
        fn items_never_nest_and_ops_match_their_values(
            a in maybe_json_value(),
            b in maybe_json_value(),
        ) {
            let d = diff(a.as_ref(), b.as_ref());
            for (i, x) in d.iter().enumerate() {
                match x.op {
                    DiffOp::Add => prop_assert!(x.old.is_none() && x.new.is_some()),
                    DiffOp::Remove => prop_assert!(x.old.is_some() && x.new.is_none()),
                    DiffOp::Change => prop_assert!(x.old.is_some() && x.new.is_some()),
                }
                for y in d.iter().skip(i + 1) {
                    let n = x.path.len().min(y.path.len());
                    prop_assert_ne!(&x.path[..n], &y.path[..n]);
                }
            }
        }

        #[test]
        fn reduce_on_the_empty_path_is_identity(
            a in maybe_json_value(),
            b in maybe_json_value(),
        ) {
            let d = diff(a.as_ref(), b.as_ref());
            prop_assert_eq!(d.reduce::<String>(&[]), d);
        }

        #[test]
        fn reduce_equals_the_diff_of_the_resolved_fields(
            a in maybe_json_value(),
            b in maybe_json_value(),
            path in field_path(),
        ) {
            let reduced = diff(a.as_ref(), b.as_ref()).reduce(&path);
            let direct = diff(
                a.as_ref().and_then(|a| resolve(a, &path)),
                b.as_ref().and_then(|b| resolve(b, &path)),
            );
            prop_assert_eq!(reduced, direct);
        }
    }
}
