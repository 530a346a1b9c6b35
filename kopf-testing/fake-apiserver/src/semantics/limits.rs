//! The bounds that keep every object the server holds small and shallow, as a real cluster's
//! are, so that no request can exhaust its memory or its stack.
//!
//! Invariants:
//!
//! 1. No stored object nests deeper than [`MAX_OBJECT_DEPTH`]. Bodies cannot (the JSON and
//!    YAML parsers stop there; YAML one level deeper, which apply refuses), and a JSON
//!    patch's result is checked with [`depth`].
//!    The recursive code of the server (serialization, schemas, patches, `clone` and `drop`)
//!    stays well within a 2 MiB thread stack at that depth.
//! 2. A value deeper than that may exist only while a JSON patch is applied; it is released
//!    with [`release`], which takes it apart without recursion.
//! 3. No stored object is larger than [`MAX_STORED_OBJECT_BYTES`] as JSON.
//!
//! The real server nests up to 10,000 levels (Go's `encoding/json`, which `sigs.k8s.io/json`
//! forks, stops there with `exceeded max depth`); serde's parsers stop at 128, and so does
//! this server: no Kubernetes object comes near either.

use http::StatusCode;
use serde_json::Value;

use super::status::{ApiError, ApiResult};

/// The deepest nesting of arrays and objects that the server accepts: what `serde_json` and
/// `serde_norway` parse (`[]` nests 1 level, a scalar 0).
pub(crate) const MAX_OBJECT_DEPTH: usize = 127;

/// The most operations one JSON patch may have (`maxJSONPatchOperations` in the real server).
pub(crate) const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// The most bytes that the `copy` operations of one JSON patch may copy, counted as compact
/// JSON: the real server gives its request size limit, 3 MiB, to its JSON-patch library.
pub(crate) const MAX_JSON_PATCH_COPY_BYTES: usize = 3 * 1024 * 1024;

/// The largest object that storage keeps: etcd's default `--max-request-bytes`, 1.5 MiB.
pub(crate) const MAX_STORED_OBJECT_BYTES: usize = 1536 * 1024;

/// How deep `value` nests (`[]` is 1, a scalar 0), without recursion.
pub(crate) fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(value, 0)];
    while let Some((value, level)) = pending.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(fields) => Box::new(fields.values()),
            _ => continue,
        };
        deepest = deepest.max(level + 1);
        pending.extend(children.map(|child| (child, level + 1)));
    }
    deepest
}

/// The size of `value` as compact JSON, counted without writing it (the serializer does not
/// recurse deeper than the value does, which callers have checked).
pub(crate) fn json_size(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a writer that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// Drops a value of any depth without recursion: `Value`'s own `drop` recurses once per
/// level and would overflow the stack on a deep enough value.
pub(crate) fn release(value: Value) {
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Value::Array(items) => pending.extend(items),
            Value::Object(fields) => pending.extend(fields.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

/// The answer the real server gives when etcd refuses to store an object that is too large:
/// etcd's own message in a 500 with no reason.
pub(crate) fn check_stored_size(object: &Value) -> ApiResult<()> {
    if json_size(object) > MAX_STORED_OBJECT_BYTES {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "",
            "etcdserver: request is too large",
        ));
    }
    Ok(())
}
