//! Tests of diffs: their computation, reduction to fields, and Kopf's wire format.

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
