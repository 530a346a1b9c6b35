//! Field errors as the apiserver reports them: the cause types, kube-openapi's errors before
//! they become field errors, and the message of a 422 Invalid.

use std::fmt;

use crate::semantics::go_format::go_quote;

/// Cause type of a missing required field.
pub(super) const REQUIRED: &str = "FieldValueRequired";
/// Cause type of a value outside an enum.
pub(super) const NOT_SUPPORTED: &str = "FieldValueNotSupported";
/// Cause type of a value breaking a constraint.
pub(super) const INVALID: &str = "FieldValueInvalid";
/// Cause type of a value of the wrong type or format.
pub(super) const TYPE_INVALID: &str = "FieldValueTypeInvalid";
/// Cause type of a string over maxLength.
pub(super) const TOO_LONG: &str = "FieldValueTooLong";
/// Cause type of a list or object over maxItems / maxProperties.
pub(super) const TOO_MANY: &str = "FieldValueTooMany";
/// Cause type of a repeated entry in a list of type set or map.
pub(super) const DUPLICATE: &str = "FieldValueDuplicate";
/// Cause type of a value that a validation rule forbids.
pub(super) const FORBIDDEN: &str = "FieldValueForbidden";

/// One validation failure, as Kubernetes reports it in Status.details.causes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    /// The field path, e.g. `spec.replicas` or `spec.items[2].name`; `<nil>` where the apiserver has none (anyOf/oneOf/allOf/not and number-range failures).
    pub(crate) field: String,
    /// The cause type: `FieldValueRequired`, `FieldValueNotSupported`, `FieldValueInvalid`, `FieldValueTypeInvalid`, `FieldValueTooLong`, `FieldValueTooMany`, `FieldValueDuplicate` or `FieldValueForbidden`.
    pub(crate) reason: &'static str,
    /// The message without the field, e.g. `Required value`.
    pub(crate) message: String,
}

impl fmt::Display for FieldError {
    /// Renders `field: message`, as apimachinery's field.Error does.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// The full message of a 422 Invalid Status for these errors: `KopfExample.kopf.dev "name" is invalid: [field: message, ...]` (single error without brackets), as the apiserver formats it.
pub(crate) fn invalid_message(kind_group: &str, name: &str, errors: &[FieldError]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for error in errors {
        let text = error.to_string();
        if !seen.contains(&text) {
            seen.push(text);
        }
    }
    let head = format!("{kind_group} {} is invalid", go_quote(name));
    match seen.len() {
        0 => head,
        1 => format!("{head}: {}", seen.join(", ")),
        _ => format!("{head}: [{}]", seen.join(", ")),
    }
}

/// One kube-openapi error before it becomes a field error.
pub(super) struct Raw {
    /// kube-openapi's Name (a dotted path); `None` for errors that are not `errors.Validation`.
    pub(super) name: Option<String>,
    /// The cause type.
    pub(super) reason: &'static str,
    /// The message (field.Error's ErrorBody).
    pub(super) message: String,
}

impl Raw {
    /// The field error the apiserver makes of it (with a nil base path).
    pub(super) fn into_field_error(self) -> FieldError {
        FieldError {
            field: raw_field(self.name.as_deref()).unwrap_or_else(|| "<nil>".to_string()),
            reason: self.reason,
            message: self.message,
        }
    }
}

/// The field of a kube-openapi error name: the name without one leading dot; none when empty.
pub(super) fn raw_field(name: Option<&str>) -> Option<String> {
    let name = name?;
    if name.is_empty() || name == "." {
        return None;
    }
    Some(name.strip_prefix('.').unwrap_or(name).to_string())
}

/// `field.Invalid(path, value, detail)`.
pub(super) fn invalid(path: &str, shown_value: &str, detail: &str) -> Raw {
    Raw {
        name: Some(path.to_string()),
        reason: INVALID,
        message: format!("Invalid value: {shown_value}: {detail}"),
    }
}

/// An error that is not an `errors.Validation`: apiextensions reports it at a nil path with an empty value.
pub(super) fn plain(detail: &str) -> Raw {
    Raw {
        name: None,
        reason: INVALID,
        message: format!("Invalid value: \"\": {detail}"),
    }
}

/// `errors.InvalidType` as `field.TypeInvalid`.
pub(super) fn type_error(path: &str, expected: &str, actual: &str) -> Raw {
    let actual = go_quote(actual);
    Raw {
        name: Some(path.to_string()),
        reason: TYPE_INVALID,
        message: format!(
            "Invalid value: {actual}: {path} in body must be of type {expected}: {actual}"
        ),
    }
}

/// `field.TooLong` body.
pub(super) fn too_long(max: i64) -> String {
    if max >= 0 {
        let unit = if max == 1 { "byte" } else { "bytes" };
        format!("Too long: may not be more than {max} {unit}")
    } else {
        "Too long: value is too long".to_string()
    }
}

/// `field.TooMany` body.
pub(super) fn too_many(actual: i64, max: i64) -> String {
    let detail = if max >= 0 {
        let unit = if max == 1 { "item" } else { "items" };
        format!("must have at most {max} {unit}")
    } else {
        "has too many items".to_string()
    };
    format!("Too many: {actual}: {detail}")
}
