//! One entry of `x-kubernetes-validations` as written in a CRD: its fields, the checks the
//! apiserver makes of them before compiling, and how the apiserver prints it in errors.

use serde_json::Value;

use super::super::keywords::{Additional, additional, prop, props};
use crate::semantics::go_format::go_quote;

/// The reasons a rule may give for its failures.
pub(super) const REASONS: [&str; 4] = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// A validation rule's fields (anything ill-typed reads as absent).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct RuleSpec {
    /// The CEL expression that must be true.
    pub(super) rule: String,
    /// The message when it is false.
    pub(super) message: String,
    /// A CEL expression making the message.
    pub(super) message_expression: String,
    /// The cause type of a failure (`FieldValueInvalid` when absent).
    pub(super) reason: Option<String>,
    /// Where a failure is reported, relative to the rule's node.
    pub(super) field_path: String,
    /// Whether the rule runs when there is no old value (with `oldSelf` an optional).
    pub(super) optional_old_self: Option<bool>,
}

impl RuleSpec {
    /// Reads one entry of `x-kubernetes-validations`.
    pub(super) fn parse(entry: &Value) -> RuleSpec {
        let text = |key: &str| entry[key].as_str().unwrap_or_default().to_string();
        RuleSpec {
            rule: text("rule"),
            message: text("message"),
            message_expression: text("messageExpression"),
            reason: entry["reason"].as_str().map(String::from),
            field_path: text("fieldPath"),
            optional_old_self: entry["optionalOldSelf"].as_bool(),
        }
    }

    /// The rule as the apiserver (1.33) prints it in a CRD's errors: Go's `%#v` of the
    /// internal `apiextensions.ValidationRule`. Go prints a set pointer as its address; a
    /// fixed one stands for it here.
    pub(super) fn go_syntax(&self) -> String {
        let pointer = |set: bool, ty: &str| {
            if set {
                format!("(*{ty})(0xc000000000)")
            } else {
                format!("(*{ty})(nil)")
            }
        };
        format!(
            "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{}, FieldPath:{}, OptionalOldSelf:{}}}",
            go_quote(&self.rule),
            go_quote(&self.message),
            go_quote(&self.message_expression),
            pointer(self.reason.is_some(), "apiextensions.FieldValueErrorReason"),
            go_quote(&self.field_path),
            pointer(self.optional_old_self.is_some(), "bool"),
        )
    }

    /// The checks the apiserver makes before compiling, as problems at `path` (the rule's
    /// `x-kubernetes-validations[i]`), worded as it words them.
    pub(super) fn check(&self, schema: &Value, path: &str) -> Vec<String> {
        let mut out = Vec::new();
        let rule = self.rule.trim();
        let message = self.message.trim();
        if rule.is_empty() {
            out.push(format!(
                "{path}.rule: Required value: rule is not specified"
            ));
        } else if !self.message.is_empty() && message.is_empty() {
            out.push(format!(
                "{path}.message: Invalid value: {}: must be non-empty if specified",
                go_quote(&self.message)
            ));
        } else if has_newlines(message) {
            out.push(format!(
                "{path}.message: Invalid value: {}: must not contain line breaks",
                go_quote(&self.message)
            ));
        } else if has_newlines(rule) && message.is_empty() {
            out.push(format!(
                "{path}.message: Required value: message must be specified if rule contains line breaks"
            ));
        }
        if !self.message_expression.is_empty() && self.message_expression.trim().is_empty() {
            out.push(format!("{path}.messageExpression: Required value: messageExpression must be non-empty if specified"));
        }
        if let Some(reason) = &self.reason
            && !REASONS.contains(&reason.as_str())
        {
            let supported: Vec<String> = REASONS.iter().map(|r| go_quote(r)).collect();
            out.push(format!(
                "{path}.reason: Unsupported value: {}: supported values: {}",
                go_quote(reason),
                supported.join(", ")
            ));
        }
        let shown = go_quote(&self.field_path);
        if !self.field_path.is_empty() && self.field_path.trim().is_empty() {
            out.push(format!(
                "{path}.fieldPath: Invalid value: {shown}: must be non-empty if specified"
            ));
        }
        if has_newlines(&self.field_path) {
            out.push(format!(
                "{path}.fieldPath: Invalid value: {shown}: must not contain line breaks"
            ));
        }
        if !self.field_path.is_empty() && field_path(&self.field_path, schema).is_err() {
            out.push(format!(
                "{path}.fieldPath: Invalid value: {shown}: must be a valid path"
            ));
        }
        out
    }
}

/// Whether text has a line break (CEL's grammar knows `\n` and `\r`).
pub(super) fn has_newlines(text: &str) -> bool {
    text.contains(['\n', '\r'])
}

/// A rule's `fieldPath` (`.spec.replicas`, `.labels['a.b']`) as the field path it adds to the
/// rule's node, when every step names a property or a map key of the schema.
pub(super) fn field_path(text: &str, schema: &Value) -> Result<String, String> {
    let mut node = schema;
    let mut out = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (name, after) = if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            if end == 0 {
                return Err("unexpected end of JSON path".into());
            }
            (after[..end].to_string(), &after[end..])
        } else if let Some(after) = rest.strip_prefix("['") {
            let end = closing_quote(after).ok_or("unexpected end of JSON path")?;
            let name = unescape(&after[..end])?;
            let after = after[end + 1..]
                .strip_prefix(']')
                .ok_or("expected ] after a quoted name")?;
            (name, after)
        } else {
            return Err(format!("expected [ or . but got: {rest}"));
        };
        if props(node).is_some() {
            node = prop(node, &name).ok_or("does not refer to a valid field")?;
            out = if out.is_empty() {
                name
            } else {
                format!("{out}.{name}")
            };
        } else if let Additional::Schema(a) = additional(node) {
            node = a;
            out = format!("{out}[{name}]");
        } else {
            return Err("does not refer to a valid field".into());
        }
        rest = after;
    }
    Ok(out)
}

/// Where a single-quoted name ends (the index of its closing quote).
fn closing_quote(text: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '\'' if !escaped => return Some(i),
            _ => escaped = false,
        }
    }
    None
}

/// The escapes of a single-quoted name.
fn unescape(text: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next() {
            Some('a') => '\u{7}',
            Some('b') => '\u{8}',
            Some('f') => '\u{c}',
            Some('n') => '\n',
            Some('r') => '\r',
            Some('t') => '\t',
            Some('v') => '\u{b}',
            Some('\'') => '\'',
            Some('\\') => '\\',
            other => return Err(format!("invalid escape char \\{}", other.unwrap_or(' '))),
        });
    }
    Ok(out)
}
