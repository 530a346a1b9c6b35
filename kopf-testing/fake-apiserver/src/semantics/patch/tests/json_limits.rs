//! JSON patches cannot exhaust the server: bounded operations, bounded copies, bounded depth.

use super::*;
use crate::semantics::limits::{MAX_OBJECT_DEPTH, depth};

/// Runs `f` on a thread with the 2 MiB stack of a tokio worker, so that a recursion the
/// server must not do overflows here as it would there.
fn on_worker_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(f)
        .expect("a thread starts")
        .join()
        .expect("the thread did not panic");
}

/// `[[...]]` nested `levels` deep.
fn nested(levels: usize) -> Value {
    let mut value = json!([]);
    for _ in 1..levels {
        value = json!([value]);
    }
    value
}

#[test]
fn more_than_ten_thousand_operations_are_too_large() {
    let operations = vec![json!({"op": "test", "path": "/a", "value": 1}); 10_001];
    let mut doc = json!({"a": 1});
    let error = json_patch(&mut doc, &Value::Array(operations)).expect_err("too many");
    assert_eq!(
        (error.code(), error.reason()),
        (413, "RequestEntityTooLarge")
    );
    assert_eq!(
        error.to_string(),
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
    );
}

#[test]
fn copies_that_double_the_object_stop_at_three_mebibytes() {
    let mut doc = json!({"a": "x".repeat(1000)});
    let original = doc.clone();
    let operations: Vec<Value> = (0..40)
        .map(|i| json!({"op": "copy", "from": "", "path": format!("/c{i}")}))
        .collect();
    let error = json_patch(&mut doc, &Value::Array(operations)).expect_err("too much copied");
    assert_eq!(error.code(), 422);
    assert!(
        error
            .to_string()
            .starts_with("Unable to complete the copy, the accumulated size increase of copy is ")
            && error.to_string().ends_with(", exceeding the limit 3145728"),
        "{error}"
    );
    assert_eq!(doc, original, "a failed patch changes nothing");
}

#[test]
fn moves_that_nest_the_object_deeper_than_any_body_are_invalid_and_do_not_overflow() {
    on_worker_stack(|| {
        // Each round moves the document's chain into the deepest array of a fresh 100-level
        // value: 1,000 rounds nest it 100,000 levels deep, far past what recursion survives.
        let into_deepest = format!("/b{}/-", "/0".repeat(98));
        let mut operations = Vec::new();
        for _ in 0..1000 {
            operations.push(json!({"op": "add", "path": "/b", "value": nested(100)}));
            operations.push(json!({"op": "move", "from": "/a", "path": into_deepest}));
            operations.push(json!({"op": "move", "from": "/b", "path": "/a"}));
        }
        operations.push(json!({"op": "remove", "path": "/a"}));
        operations.push(json!({"op": "add", "path": "/a", "value": 1}));
        let mut doc = json!({"a": 1});
        // Removing the deep chain at the end releases it without recursion: the patch passes.
        json_patch(&mut doc, &Value::Array(operations.clone())).expect("the deep part was removed");
        assert_eq!(doc, json!({"a": 1}));
        // Left in place, the chain makes the result too deep.
        operations.truncate(operations.len() - 2);
        let error = json_patch(&mut doc, &Value::Array(operations)).expect_err("too deep");
        assert_eq!(error.code(), 422);
        assert!(error.to_string().contains("exceeded max depth"), "{error}");
        assert_eq!(doc, json!({"a": 1}));
    });
}

#[test]
fn copies_of_values_too_deep_to_clone_are_refused() {
    on_worker_stack(|| {
        let into_deepest = format!("/b{}/-", "/0".repeat(98));
        let mut operations = Vec::new();
        for _ in 0..100 {
            operations.push(json!({"op": "add", "path": "/b", "value": nested(100)}));
            operations.push(json!({"op": "move", "from": "/a", "path": into_deepest}));
            operations.push(json!({"op": "move", "from": "/b", "path": "/a"}));
        }
        operations.push(json!({"op": "copy", "from": "/a", "path": "/c"}));
        let mut doc = json!({"a": 1});
        let error = json_patch(&mut doc, &Value::Array(operations)).expect_err("too deep");
        assert_eq!(error.code(), 422);
        assert!(error.to_string().contains("nested deeper than"), "{error}");
    });
}

#[test]
fn the_deepest_object_a_body_may_hold_is_patched_on_a_worker_stack() {
    on_worker_stack(|| {
        let mut doc = json!({"a": 1});
        let value = nested(MAX_OBJECT_DEPTH - 1);
        let patch = json!([
            {"op": "add", "path": "/deep", "value": value},
            {"op": "copy", "from": "/deep", "path": "/again"},
            {"op": "test", "path": "/again", "value": value},
        ]);
        json_patch(&mut doc, &patch).expect("as deep as a body may be");
        assert_eq!(depth(&doc), MAX_OBJECT_DEPTH);
        let text = serde_json::to_string(&doc).expect("serializes");
        let back: Value = serde_json::from_str(&text).expect("a body this deep parses");
        assert_eq!(back, doc);
        merge_patch(&mut doc, &back);
        let mut deeper = doc.clone();
        let deepest = format!("/deep{}/-", "/0".repeat(MAX_OBJECT_DEPTH - 2));
        let error = json_patch(
            &mut deeper,
            &json!([{"op": "add", "path": deepest, "value": []}]),
        )
        .map(|()| depth(&deeper));
        assert!(error.is_err(), "one level more is refused: {error:?}");
    });
}

#[test]
fn the_depth_limit_is_what_the_body_parsers_accept() {
    let text = |levels: usize| format!("{}{}", "[".repeat(levels), "]".repeat(levels));
    let deepest: Value = serde_json::from_str(&text(MAX_OBJECT_DEPTH)).expect("parses");
    assert_eq!(depth(&deepest), MAX_OBJECT_DEPTH);
    assert!(serde_json::from_str::<Value>(&text(MAX_OBJECT_DEPTH + 1)).is_err());
    // YAML parses one level more; the server refuses that level itself.
    assert!(serde_norway::from_str::<Value>(&text(MAX_OBJECT_DEPTH + 1)).is_ok());
    assert!(serde_norway::from_str::<Value>(&text(MAX_OBJECT_DEPTH + 2)).is_err());
}

#[test]
fn objects_larger_than_etcd_takes_are_refused_as_etcd_refuses_them() {
    use crate::semantics::limits::check_stored_size;
    let fits = json!({"data": "x".repeat(1536 * 1024 - 100)});
    assert!(check_stored_size(&fits).is_ok());
    let too_large = json!({"data": "x".repeat(1536 * 1024)});
    let error = check_stored_size(&too_large).expect_err("too large");
    assert_eq!(error.code.as_u16(), 500);
    assert_eq!(
        error.to_status()["message"],
        "etcdserver: request is too large"
    );
    assert!(error.to_status().get("reason").is_none());
}
