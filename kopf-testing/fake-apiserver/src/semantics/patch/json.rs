//! RFC 7386 merge patches and RFC 6902 JSON patches.
//!
//! JSON patches are applied here rather than by the `json-patch` crate (which parses them):
//! a patch's `copy` and `move` operations can nest a document far deeper than any body can,
//! and the crate clones and drops values recursively. Here a `copy` is bounded by the bytes
//! it copies and refuses a source too deep to clone, every value an operation removes or
//! overwrites is released without recursion, and the result must be no deeper than
//! [`MAX_OBJECT_DEPTH`]: no patch can exhaust the server's memory or stack.

use json_patch::jsonptr::Pointer;
use json_patch::{PatchErrorKind, PatchOperation};
use serde_json::Value;

use super::error::{PatchError, bad};
use crate::semantics::limits::{
    MAX_JSON_PATCH_COPY_BYTES, MAX_JSON_PATCH_OPERATIONS, MAX_OBJECT_DEPTH, depth, json_size,
    release,
};

/// RFC 7386 merge patch, in place.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// RFC 6902 JSON patch (`patch` must be an array of operations; include `test`). Atomic: on error `target` is unchanged.
pub(crate) fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    if !patch.is_array() {
        // Go's `encoding/json`, decoding into the handler's list of operations.
        let given = go_kind(patch).unwrap_or("null");
        return Err(bad(format!(
            "error decoding patch: json: cannot unmarshal {given} into Go value of type []handlers.jsonPatchOp"
        )));
    }
    if let Some(given) = patch
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|operation| go_kind(operation).filter(|k| *k != "object"))
    {
        return Err(bad(format!(
            "error decoding patch: json: cannot unmarshal {given} into Go value of type handlers.jsonPatchOp"
        )));
    }
    // An operation kube-apiserver cannot apply (an unknown `op`, a missing `path`) fails when
    // applied, not when decoded: a 422.
    let operations: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|error| PatchError::Invalid(format!("invalid json patch: {error}")))?;
    if operations.0.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooLarge(format!(
            "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
            operations.0.len()
        )));
    }
    let mut document = target.clone();
    let mut copied = 0;
    let applied = operations
        .0
        .iter()
        .enumerate()
        .try_for_each(|(index, operation)| {
            apply(&mut document, operation, &mut copied)
                .map_err(|failure| failure.describe(index, operation))
        })
        .and_then(|()| check_depth(&document));
    match applied {
        Ok(()) => *target = document,
        Err(error) => {
            release(document);
            return Err(error);
        }
    }
    Ok(())
}

/// How Go's `encoding/json` names a JSON value's type in its errors (`None` for null, which
/// decodes into anything).
fn go_kind(value: &Value) -> Option<&'static str> {
    match value {
        Value::Object(_) => Some("object"),
        Value::Array(_) => Some("array"),
        Value::String(_) => Some("string"),
        Value::Number(_) => Some("number"),
        Value::Bool(_) => Some("bool"),
        Value::Null => None,
    }
}

/// Why one operation failed.
enum Failure {
    Kind(PatchErrorKind),
    /// The `copy` operations copied more bytes in all than the server allows.
    CopyLimit(usize),
    /// A `copy` whose source nests deeper than any object may.
    CopyTooDeep,
}

impl From<PatchErrorKind> for Failure {
    fn from(kind: PatchErrorKind) -> Self {
        Failure::Kind(kind)
    }
}

/// Applies one operation; whatever it removes or overwrites is released.
fn apply(
    document: &mut Value,
    operation: &PatchOperation,
    copied: &mut usize,
) -> Result<(), Failure> {
    match operation {
        PatchOperation::Add(op) => insert(document, &op.path, op.value.clone()),
        PatchOperation::Remove(op) => {
            release(remove(document, &op.path)?);
            Ok(())
        }
        PatchOperation::Replace(op) => {
            let target = document
                .pointer_mut(op.path.as_str())
                .ok_or(PatchErrorKind::InvalidPointer)?;
            release(std::mem::replace(target, op.value.clone()));
            Ok(())
        }
        PatchOperation::Move(op) => {
            if op.path.starts_with(&op.from) && op.path.len() != op.from.len() {
                return Err(PatchErrorKind::CannotMoveInsideItself.into());
            }
            let value = remove(document, &op.from).map_err(|kind| match kind {
                PatchErrorKind::InvalidPointer => PatchErrorKind::InvalidFromPointer,
                other => other,
            })?;
            insert(document, &op.path, value)
        }
        PatchOperation::Copy(op) => {
            let source = document
                .pointer(op.from.as_str())
                .ok_or(PatchErrorKind::InvalidFromPointer)?;
            if depth(source) > MAX_OBJECT_DEPTH {
                return Err(Failure::CopyTooDeep);
            }
            *copied += json_size(source);
            if *copied > MAX_JSON_PATCH_COPY_BYTES {
                return Err(Failure::CopyLimit(*copied));
            }
            let value = source.clone();
            insert(document, &op.path, value)
        }
        PatchOperation::Test(op) => {
            let path = op.path.as_str();
            // As the apiserver: testing for `null` passes where the field is absent (its
            // parent exists); kube-rs's finalizer helper relies on it.
            let parent = path
                .rsplit_once('/')
                .map(|(parent, _)| parent)
                .unwrap_or_default();
            if op.value.is_null()
                && document.pointer(path).is_none()
                && document.pointer(parent).is_some()
            {
                return Ok(());
            }
            // Comparing recurses no deeper than the expected value, which a body holds.
            let actual = document
                .pointer(path)
                .ok_or(PatchErrorKind::InvalidPointer)?;
            if *actual != op.value {
                return Err(PatchErrorKind::TestFailed.into());
            }
            Ok(())
        }
    }
}

/// RFC 6902 `add`: sets an object's member, inserts into an array, or replaces the document.
fn insert(document: &mut Value, path: &Pointer, value: Value) -> Result<(), Failure> {
    let Some((parent, last)) = path.split_back() else {
        release(std::mem::replace(document, value));
        return Ok(());
    };
    match document
        .pointer_mut(parent.as_str())
        .ok_or(PatchErrorKind::InvalidPointer)?
    {
        Value::Object(fields) => {
            if let Some(previous) = fields.insert(last.decoded().into_owned(), value) {
                release(previous);
            }
        }
        Value::Array(items) => {
            let index = last
                .to_index()
                .map_err(PatchErrorKind::from)?
                .for_len_incl(items.len())
                .map_err(PatchErrorKind::from)?;
            items.insert(index, value);
        }
        _ => return Err(PatchErrorKind::InvalidPointer.into()),
    }
    Ok(())
}

/// RFC 6902 `remove`: takes a member out of its object or array.
fn remove(document: &mut Value, path: &Pointer) -> Result<Value, PatchErrorKind> {
    let (parent, last) = path.split_back().ok_or(PatchErrorKind::InvalidPointer)?;
    match document
        .pointer_mut(parent.as_str())
        .ok_or(PatchErrorKind::InvalidPointer)?
    {
        Value::Object(fields) => fields
            .remove(last.decoded().as_ref())
            .ok_or(PatchErrorKind::InvalidPointer),
        Value::Array(items) => {
            let index = last.to_index()?.for_len(items.len())?;
            Ok(items.remove(index))
        }
        _ => Err(PatchErrorKind::InvalidPointer),
    }
}

/// A patched object deeper than any body may be is refused as the real server refuses a
/// patched object that it cannot decode.
fn check_depth(document: &Value) -> Result<(), PatchError> {
    let levels = depth(document);
    if levels > MAX_OBJECT_DEPTH {
        return Err(PatchError::Invalid(format!(
            " \"\" is invalid: patch: Invalid value: \"an object {levels} levels deep\": exceeded max depth: objects may nest at most {MAX_OBJECT_DEPTH} levels"
        )));
    }
    Ok(())
}

impl Failure {
    /// A 422 message naming the operation that failed.
    fn describe(self, index: usize, operation: &PatchOperation) -> PatchError {
        let (name, from, path) = match operation {
            PatchOperation::Add(op) => ("add", "", op.path.as_str()),
            PatchOperation::Remove(op) => ("remove", "", op.path.as_str()),
            PatchOperation::Replace(op) => ("replace", "", op.path.as_str()),
            PatchOperation::Move(op) => ("move", op.from.as_str(), op.path.as_str()),
            PatchOperation::Copy(op) => ("copy", op.from.as_str(), op.path.as_str()),
            PatchOperation::Test(op) => ("test", "", op.path.as_str()),
        };
        let message = match self {
            // The real server's JSON-patch library words it so.
            Failure::CopyLimit(copied) => format!(
                "Unable to complete the copy, the accumulated size increase of copy is {copied}, exceeding the limit {MAX_JSON_PATCH_COPY_BYTES}"
            ),
            Failure::CopyTooDeep => format!(
                "copy operation at index {index} failed: from path {from:?} holds a value nested deeper than {MAX_OBJECT_DEPTH} levels"
            ),
            Failure::Kind(PatchErrorKind::TestFailed) => format!(
                "test operation at index {index} failed: the value at path {path:?} does not match"
            ),
            Failure::Kind(PatchErrorKind::InvalidPointer) => format!(
                "{name} operation at index {index} failed: path {path:?} does not exist or is not a valid location"
            ),
            Failure::Kind(PatchErrorKind::InvalidFromPointer) => {
                format!(
                    "{name} operation at index {index} failed: from path {from:?} does not exist"
                )
            }
            Failure::Kind(PatchErrorKind::CannotMoveInsideItself) => format!(
                "move operation at index {index} failed: cannot move {from:?} into one of its own children"
            ),
            Failure::Kind(other) => {
                format!("{name} operation at index {index} failed at path {path:?}: {other}")
            }
        };
        PatchError::Invalid(message)
    }
}
