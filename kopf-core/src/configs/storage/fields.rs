//! Dotted-path access to fields of JSON bodies, essences and merge patches, with Kopf's rules
//! for what is absent, what is created on the way, and which emptied parents are removed.
//!
//! Kopf: `kopf/_cogs/structs/dicts.py` (`resolve`, `ensure`, `remove`, `cherrypick`) and
//! `StorageStanzaCleaner` in `kopf/_cogs/configs/conventions.py`.
//!
//! Invariants:
//! 1. A path through anything but objects resolves to nothing; it never panics.
//! 2. Removals keep the order of the remaining keys (`shift_remove`), as Python's dicts do:
//!    the essence's JSON is compared byte for byte by some tools.

use serde_json::{Map, Value};

/// A path met something that is not an object where it needed one (Python's `TypeError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotAnObject;

/// Splits a dotted field (`status.phase`) into its path.
pub(crate) fn parse_field(field: &str) -> Vec<&str> {
    field.split('.').collect()
}

/// The value at `path`, if every step is an object that has the key.
pub(crate) fn resolve<'a>(root: &'a Value, path: &[&str]) -> Option<&'a Value> {
    resolve_steps(root, path.iter().copied())
}

/// [`resolve`] for steps not gathered in a slice (`field.split('.')`).
pub(crate) fn resolve_steps<'a, 'k>(
    root: &'a Value,
    steps: impl IntoIterator<Item = &'k str>,
) -> Option<&'a Value> {
    steps
        .into_iter()
        .try_fold(root, |value, key| value.as_object()?.get(key))
}

/// Sets the value at `path`, creating (or replacing non-object) parents as objects.
pub(crate) fn ensure(root: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = root;
    for key in parents {
        current = object_mut(current)
            .entry(*key)
            .or_insert_with(|| Value::Object(Map::new()));
    }
    object_mut(current).insert((*last).to_owned(), value);
}

fn object_mut(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    match value {
        Value::Object(map) => map,
        _ => unreachable!("just made an object"),
    }
}

/// Removes the value at `path` and every parent on the path that this leaves as `{}`.
///
/// As in Kopf, an absent key ends the walk quietly, yet the parents walked through are still
/// checked for emptiness on the way back; a non-object on the way is an error and nothing is
/// removed.
pub(crate) fn remove(root: &mut Value, path: &[&str]) -> Result<(), NotAnObject> {
    let Value::Object(map) = root else {
        return Err(NotAnObject);
    };
    match path {
        [] => Ok(()),
        [key] => {
            map.shift_remove(*key);
            Ok(())
        }
        [key, rest @ ..] => {
            let Some(child) = map.get_mut(*key) else {
                return Ok(());
            };
            remove(child, rest)?;
            if child.as_object().is_some_and(Map::is_empty) {
                map.shift_remove(*key);
            }
            Ok(())
        }
    }
}

/// Copies the fields at these paths that exist in `src` into the same places in `dst`.
///
/// A path that runs through a non-object in `src` is skipped (Kopf raises there).
pub(crate) fn cherrypick<P, S>(src: &Value, dst: &mut Value, paths: &[P])
where
    P: AsRef<[S]>,
    S: AsRef<str>,
{
    for path in paths {
        let path: Vec<&str> = path.as_ref().iter().map(AsRef::as_ref).collect();
        if let Some(value) = resolve(src, &path) {
            ensure(dst, &path, value.clone());
        }
    }
}

/// Python's truthiness of a JSON value: `null`, `false`, `0`, `""`, `[]`, `{}` are false.
pub(crate) fn is_falsy(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// Removes these annotations from an essence, keeping the others in order.
pub(crate) fn remove_annotations(essence: &mut Value, keys: &[String]) {
    let annotations = essence
        .get_mut("metadata")
        .and_then(|metadata| metadata.get_mut("annotations"))
        .and_then(Value::as_object_mut);
    if let Some(annotations) = annotations {
        annotations.retain(|key, _| !keys.contains(key));
    }
}

/// Removes empty (falsy) `metadata.annotations`, `metadata.labels`, then `metadata` and
/// `status` from an essence.
pub(crate) fn remove_empty_stanzas(essence: &mut Value) {
    if let Some(metadata) = essence.get_mut("metadata").and_then(Value::as_object_mut) {
        for stanza in ["annotations", "labels"] {
            if metadata.get(stanza).is_some_and(is_falsy) {
                metadata.shift_remove(stanza);
            }
        }
    }
    if let Some(essence) = essence.as_object_mut() {
        for stanza in ["metadata", "status"] {
            if essence.get(stanza).is_some_and(is_falsy) {
                essence.shift_remove(stanza);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn resolve_walks_objects_only() {
        let body = json!({"a": {"b": {"c": 1}, "s": "text", "n": null}});
        assert_eq!(resolve(&body, &["a", "b", "c"]), Some(&json!(1)));
        assert_eq!(resolve(&body, &["a", "n"]), Some(&Value::Null));
        assert_eq!(resolve(&body, &["a", "x"]), None);
        assert_eq!(resolve(&body, &["a", "s", "x"]), None);
        assert_eq!(resolve(&body, &[]), Some(&body));
    }

    #[test]
    fn ensure_creates_parents() {
        let mut patch = Value::Null;
        ensure(
            &mut patch,
            &["metadata", "annotations", "a/b.c"],
            json!("x"),
        );
        ensure(&mut patch, &["metadata", "annotations", "d"], Value::Null);
        assert_eq!(
            patch,
            json!({"metadata": {"annotations": {"a/b.c": "x", "d": null}}})
        );
    }

    #[test]
    fn ensure_replaces_non_object_parents() {
        let mut patch = json!({"status": "text"});
        ensure(&mut patch, &["status", "kopf"], json!(1));
        assert_eq!(patch, json!({"status": {"kopf": 1}}));
    }

    #[test]
    fn remove_cleans_emptied_parents() {
        let mut value = json!({"a": {"b": {"c": 1}}, "z": 0});
        remove(&mut value, &["a", "b", "c"]).unwrap();
        assert_eq!(value, json!({"z": 0}));
    }

    #[test]
    fn remove_keeps_non_empty_parents_and_order() {
        let mut value = json!({"a": {"x": 1, "b": {"c": 1}, "y": 2}});
        remove(&mut value, &["a", "b"]).unwrap();
        assert_eq!(
            serde_json::to_string(&value).unwrap(),
            r#"{"a":{"x":1,"y":2}}"#
        );
    }

    #[test]
    fn remove_of_absent_still_cleans_walked_empty_parents() {
        let mut value = json!({"status": {}, "spec": 1});
        remove(&mut value, &["status", "kopf", "progress"]).unwrap();
        assert_eq!(value, json!({"spec": 1}));
    }

    #[test]
    fn remove_through_non_objects_is_an_error_without_changes() {
        let mut value = json!({"a": {"f": "g"}});
        assert_eq!(remove(&mut value, &["a", "f", "g"]), Err(NotAnObject));
        assert_eq!(value, json!({"a": {"f": "g"}}));
    }

    #[test]
    fn cherrypick_copies_present_fields_only() {
        let src = json!({"status": {"phase": "Running"}, "spec": "text"});
        let mut dst = json!({"spec": {}});
        cherrypick(
            &src,
            &mut dst,
            &[["status", "phase"], ["status", "absent"], ["spec", "x"]],
        );
        assert_eq!(dst, json!({"spec": {}, "status": {"phase": "Running"}}));
    }

    #[test]
    fn falsiness_as_python() {
        for falsy in [
            json!(null),
            json!(false),
            json!(0),
            json!(0.0),
            json!(""),
            json!([]),
            json!({}),
        ] {
            assert!(is_falsy(&falsy), "{falsy}");
        }
        for truthy in [
            json!(true),
            json!(1),
            json!(-0.5),
            json!("x"),
            json!([0]),
            json!({"a": null}),
        ] {
            assert!(!is_falsy(&truthy), "{truthy}");
        }
    }

    #[test]
    fn empty_stanzas_removed() {
        let mut essence =
            json!({"metadata": {"labels": {}, "annotations": {}}, "status": {}, "spec": {}});
        remove_empty_stanzas(&mut essence);
        assert_eq!(essence, json!({"spec": {}}));
    }
}
