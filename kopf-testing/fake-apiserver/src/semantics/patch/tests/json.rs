//! RFC 7386 merge patches and RFC 6902 JSON patches.

use super::*;

/// RFC 7386 appendix A examples.
#[test]
fn merge_patch_rfc7386_appendix_a() {
    let cases = [
        (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
        (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
        (json!({"a":"b"}), json!({"a":null}), json!({})),
        (
            json!({"a":"b","b":"c"}),
            json!({"a":null}),
            json!({"b":"c"}),
        ),
        (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
        (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
        (
            json!({"a":{"b":"c"}}),
            json!({"a":{"b":"d","c":null}}),
            json!({"a":{"b":"d"}}),
        ),
        (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
        (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
        (json!({"a":"b"}), json!(["c"]), json!(["c"])),
        (json!({"a":"foo"}), json!(null), json!(null)),
        (json!({"a":"foo"}), json!("bar"), json!("bar")),
        (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
        (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
        (
            json!({}),
            json!({"a":{"bb":{"ccc":null}}}),
            json!({"a":{"bb":{}}}),
        ),
    ];
    for (target, patch, expected) in cases {
        let mut doc = target.clone();
        merge_patch(&mut doc, &patch);
        assert_eq!(doc, expected, "{target} + {patch}");
    }
}

// ------------------------------------------------------------------ json patch

/// Every RFC 6902 operation, with passing `test`s.
#[test]
fn json_patch_operations_and_test_success() {
    let mut doc = json!({"metadata":{"name":"x","labels":{"a":"1"}},"spec":{"items":[1,2,3]}});
    let patch = json!([
        {"op":"test","path":"/metadata/name","value":"x"},
        {"op":"add","path":"/metadata/labels/b","value":"2"},
        {"op":"remove","path":"/metadata/labels/a"},
        {"op":"replace","path":"/spec/items/0","value":10},
        {"op":"add","path":"/spec/items/-","value":4},
        {"op":"copy","from":"/metadata/name","path":"/spec/name"},
        {"op":"move","from":"/spec/name","path":"/spec/moved"},
        {"op":"test","path":"/spec/items","value":[10,2,3,4]}
    ]);
    json_patch(&mut doc, &patch).expect("applies");
    assert_eq!(
        doc,
        json!({"metadata":{"name":"x","labels":{"b":"2"}},"spec":{"items":[10,2,3,4],"moved":"x"}})
    );
}

/// A failing `test` is a 422 and undoes earlier operations.
#[test]
fn json_patch_failed_test_is_invalid_and_atomic() {
    let original = json!({"spec":{"replicas":1}});
    let mut doc = original.clone();
    let patch = json!([
        {"op":"replace","path":"/spec/replicas","value":5},
        {"op":"test","path":"/spec/replicas","value":1}
    ]);
    let error = json_patch(&mut doc, &patch).expect_err("test fails");
    assert_eq!(doc, original);
    assert_eq!(error.code(), 422);
    assert_eq!(error.reason(), "Invalid");
    assert_eq!(
        error.to_string(),
        "test operation at index 1 failed: the value at path \"/spec/replicas\" does not match"
    );
}

/// A missing path is a 422 and undoes earlier operations.
#[test]
fn json_patch_missing_path_is_invalid_and_atomic() {
    let original = json!({"a":1});
    let mut doc = original.clone();
    let patch = json!([
        {"op":"add","path":"/b","value":2},
        {"op":"remove","path":"/nope"}
    ]);
    let error = json_patch(&mut doc, &patch).expect_err("path missing");
    assert_eq!(doc, original);
    assert!(matches!(error, PatchError::Invalid(_)));
    assert!(
        error.to_string().contains("remove operation at index 1"),
        "{error}"
    );
    assert!(error.to_string().contains("\"/nope\""), "{error}");
    let error = json_patch(&mut doc, &json!([{"op":"replace","path":"/x/y","value":1}]))
        .expect_err("missing");
    assert!(matches!(error, PatchError::Invalid(_)));
    let error = json_patch(&mut doc, &json!([{"op":"move","from":"/zz","path":"/y"}]))
        .expect_err("missing");
    assert!(error.to_string().contains("from path \"/zz\""), "{error}");
}

/// JSON patches that do not decode as lists of operations are 400s; operations that decode
/// but cannot be applied (an unknown `op`, a missing or relative `path`) are 422s, as
/// kube-apiserver finds them only when it applies them.
#[test]
fn json_patch_malformed_is_bad_request() {
    let mut doc = json!({"a":1});
    for patch in [json!({"op":"add","path":"/a","value":1}), json!([1])] {
        let error = json_patch(&mut doc, &patch).expect_err("malformed");
        assert_eq!(error.code(), 400, "{patch}: {error}");
        assert_eq!(error.reason(), "BadRequest");
    }
    for patch in [
        json!([{"op":"frobnicate","path":"/a"}]),
        json!([{"op":"add","value":1}]),
        json!([{"op":"add","path":"a","value":1}]),
    ] {
        let error = json_patch(&mut doc, &patch).expect_err("not applicable");
        assert_eq!(error.code(), 422, "{patch}: {error}");
        assert_eq!(error.reason(), "Invalid");
    }
    assert_eq!(doc, json!({"a":1}));
}

/// An empty JSON patch changes nothing.
#[test]
fn json_patch_empty_is_identity() {
    let mut doc = json!({"a":[1,{"b":null}]});
    json_patch(&mut doc, &json!([])).expect("empty patch");
    assert_eq!(doc, json!({"a":[1,{"b":null}]}));
}
