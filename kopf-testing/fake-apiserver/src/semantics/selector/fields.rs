//! Field selectors (`metadata.name=x,status.phase!=Running`): parsing with escapes, and
//! matching against an object's fields.

use std::borrow::Cow;

use serde_json::Value;

use super::error::SelectorError;
use super::labels::value_text;

/// A parsed field selector: a conjunction of `path=value` / `path!=value` terms (empty = everything).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector {
    /// All terms; an object matches when it satisfies every one.
    pub(super) terms: Vec<FieldTerm>,
}

/// One field selector term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FieldTerm {
    /// The dotted field path, exactly as written (e.g. `metadata.name`).
    pub(super) field: String,
    /// The unescaped value to compare with.
    pub(super) value: String,
    /// True for `!=`, false for `=` and `==`.
    pub(super) negated: bool,
}

impl FieldSelector {
    /// Parses a field selector such as `metadata.name=foo,status.phase!=Running`; empty input selects everything.
    pub(crate) fn parse(input: &str) -> Result<Self, SelectorError> {
        let mut terms = Vec::new();
        for part in split_terms(input) {
            if part.is_empty() {
                continue;
            }
            let Some((field, op, raw)) = split_term(part) else {
                return Err(SelectorError::FieldTerm {
                    selector: input.to_owned(),
                    term: part.to_owned(),
                });
            };
            terms.push(FieldTerm {
                field: field.to_owned(),
                value: unescape_value(raw)?,
                negated: op == "!=",
            });
        }
        Ok(Self { terms })
    }

    /// True when the selector has no terms and so matches every object.
    pub(crate) fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The field paths used (e.g. "metadata.name"), so the server can reject unsupported ones.
    pub(crate) fn fields(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|t| t.field.as_str())
    }

    /// Compares the value at the dotted path (e.g. metadata.namespace) rendered as a string (missing = "", numbers/bools as their JSON text).
    pub(crate) fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|term| {
            let actual = field_text(object, &term.field);
            (actual == term.value.as_str()) != term.negated
        })
    }
}

/// The boolean fields the real server selects on as `false` when they are unset (its field
/// sets format the Go struct's zero value: `spec.unschedulable=false` matches a node that has
/// never been cordoned).
const FALSE_WHEN_UNSET: &[&str] = &["spec.hostNetwork", "spec.unschedulable"];

/// The string form of the value at a dotted path: missing or `null` = "" (or "false" for the
/// booleans in [`FALSE_WHEN_UNSET`]), strings as-is, others as JSON text.
fn field_text<'a>(object: &'a Value, path: &str) -> Cow<'a, str> {
    let unset = || {
        Cow::Borrowed(if FALSE_WHEN_UNSET.contains(&path) {
            "false"
        } else {
            ""
        })
    };
    let mut current = object;
    for segment in path.split('.') {
        match current.as_object().and_then(|m| m.get(segment)) {
            Some(next) => current = next,
            None => return unset(),
        }
    }
    if current.is_null() {
        return unset();
    }
    value_text(current)
}

/// Splits a field selector on commas that are not escaped by a backslash (escapes are kept).
fn split_terms(input: &str) -> Vec<&str> {
    if input.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in input.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(input.get(start..i).unwrap_or_default());
            start = i + 1;
        }
    }
    terms.push(input.get(start..).unwrap_or_default());
    terms
}

/// Splits a term at the first `!=`, `==` or `=` into (field, operator, raw value).
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    term.char_indices().find_map(|(i, _)| {
        let rest = term.get(i..)?;
        ["!=", "==", "="].into_iter().find_map(|op| {
            rest.strip_prefix(op)
                .map(|value| (term.get(..i).unwrap_or_default(), op, value))
        })
    })
}

/// Resolves `\\`, `\,` and `\=` in a field selector value; other escapes and bare `,`/`=` are errors.
fn unescape_value(raw: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                Some(other) => return Err(SelectorError::InvalidEscape(format!("\\{other}"))),
                None => return Err(SelectorError::InvalidEscape("\\".to_owned())),
            },
            ',' | '=' => return Err(SelectorError::UnescapedChar(c)),
            _ => out.push(c),
        }
    }
    Ok(out)
}
