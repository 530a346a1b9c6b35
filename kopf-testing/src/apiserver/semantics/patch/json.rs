//! RFC 7386 merge patches and RFC 6902 JSON patches.

use serde_json::Value;

use super::error::{PatchError, bad};

/// RFC 7386 merge patch, in place.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    json_patch::merge(target, patch);
}

/// RFC 6902 JSON patch (`patch` must be an array of operations; include `test`). Atomic: on error `target` is unchanged.
pub(crate) fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    if !patch.is_array() {
        return Err(bad("json patch must be an array of operations"));
    }
    let operations: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|error| bad(format!("invalid json patch: {error}")))?;
    let mut document = target.clone();
    for (index, operation) in operations.0.iter().enumerate() {
        // As the apiserver: testing for `null` passes where the field is absent (its parent
        // exists); kube-rs's finalizer helper relies on it.
        if let json_patch::PatchOperation::Test(test) = operation {
            let path = test.path.to_string();
            let parent = path
                .rsplit_once('/')
                .map(|(parent, _)| parent)
                .unwrap_or_default();
            if test.value.is_null()
                && document.pointer(&path).is_none()
                && document.pointer(parent).is_some()
            {
                continue;
            }
        }
        json_patch::patch_unsafe(&mut document, std::slice::from_ref(operation)).map_err(
            |mut error| {
                error.operation = index;
                describe_json_patch_error(&operations, &error)
            },
        )?;
    }
    *target = document;
    Ok(())
}

/// Turns an error of the `json-patch` crate into a 422 message naming the operation.
fn describe_json_patch_error(
    operations: &json_patch::Patch,
    error: &json_patch::PatchError,
) -> PatchError {
    use json_patch::{PatchErrorKind, PatchOperation};
    let index = error.operation;
    let operation = operations.0.get(index);
    let name = match operation {
        Some(PatchOperation::Add(_)) => "add",
        Some(PatchOperation::Remove(_)) => "remove",
        Some(PatchOperation::Replace(_)) => "replace",
        Some(PatchOperation::Move(_)) => "move",
        Some(PatchOperation::Copy(_)) => "copy",
        Some(PatchOperation::Test(_)) => "test",
        None => "json patch",
    };
    let from = match operation {
        Some(PatchOperation::Move(op)) => op.from.to_string(),
        Some(PatchOperation::Copy(op)) => op.from.to_string(),
        _ => String::new(),
    };
    let path = error.path.to_string();
    let message = match error.kind {
        PatchErrorKind::TestFailed => {
            format!(
                "test operation at index {index} failed: the value at path {path:?} does not match"
            )
        }
        PatchErrorKind::InvalidPointer => format!(
            "{name} operation at index {index} failed: path {path:?} does not exist or is not a valid location"
        ),
        PatchErrorKind::InvalidFromPointer => {
            format!("{name} operation at index {index} failed: from path {from:?} does not exist")
        }
        PatchErrorKind::CannotMoveInsideItself => format!(
            "move operation at index {index} failed: cannot move {from:?} into one of its own children"
        ),
        ref other => format!("{name} operation at index {index} failed at path {path:?}: {other}"),
    };
    PatchError::Invalid(message)
}
