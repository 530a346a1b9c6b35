//! The table of kept differences (`known_differences.yaml`): each entry names a sequence, a
//! step and a field (patterns with `*`) and says why the fake server answers otherwise. A
//! difference that no entry names fails the suite, and so does an entry that names none (unless
//! it says that its difference comes and goes with timing): the table says what is true today.

use regex::Regex;
use serde::Deserialize;

use super::compare::Difference;

/// The table, beside this file.
const TABLE: &str = include_str!("known_differences.yaml");

/// One kept difference, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    /// The sequences' names, with `*` for any text.
    pub(crate) sequence: String,
    /// The steps' labels (default: every step).
    #[serde(default = "any")]
    pub(crate) step: String,
    /// The fields' paths (default: every field): `body.details`, `events[*].object.metadata.*`.
    #[serde(default = "any")]
    pub(crate) field: String,
    /// Why the difference is kept, or that it is being fixed elsewhere.
    reason: String,
    /// The difference depends on the real server's timing: the entry may match nothing.
    #[serde(default)]
    sometimes: bool,
}

fn any() -> String {
    "*".to_string()
}

/// One kept difference, its patterns compiled (once: thousands of differences are matched
/// against every entry).
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// `sequence / step / field`, as written.
    title: String,
    /// Why the difference is kept.
    pub(crate) reason: String,
    /// It may match nothing in a run (the difference depends on timing).
    pub(crate) sometimes: bool,
    sequence: Regex,
    step: Regex,
    field: Regex,
}

impl Entry {
    pub(crate) fn matches(&self, difference: &Difference) -> bool {
        self.sequence.is_match(&difference.sequence)
            && self.step.is_match(&difference.step)
            && self.field.is_match(&difference.field)
    }

    /// How the entry is named in reports.
    pub(crate) fn title(&self) -> String {
        self.title.clone()
    }
}

/// The table as written.
pub(crate) fn entries() -> Vec<Entry> {
    let written: Vec<Written> = serde_norway::from_str(TABLE)
        .unwrap_or_else(|e| panic!("known_differences.yaml does not parse: {e}"));
    written
        .into_iter()
        .map(|entry| {
            let title = format!("{} / {} / {}", entry.sequence, entry.step, entry.field);
            assert!(
                !entry.reason.trim().is_empty(),
                "known_differences.yaml: {title} has no reason"
            );
            Entry {
                sequence: glob(&entry.sequence),
                step: glob(&entry.step),
                field: glob(&entry.field),
                title,
                reason: entry.reason,
                sometimes: entry.sometimes,
            }
        })
        .collect()
}

/// The expression of a pattern, where `*` stands for any text and `[abc]` for one of those
/// characters (dots, other brackets and the rest are themselves).
fn glob(pattern: &str) -> Regex {
    let mut expression = String::from("^");
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' => expression.push_str(".*"),
            '[' if pattern.contains(']') && chars.peek() != Some(&'*') => {
                let class: String = chars.by_ref().take_while(|c| *c != ']').collect();
                expression.push('[');
                expression.push_str(&regex::escape(&class));
                expression.push(']');
            }
            other => expression.push_str(&regex::escape(&other.to_string())),
        }
    }
    expression.push('$');
    Regex::new(&expression)
        .unwrap_or_else(|e| panic!("known_differences.yaml: the pattern {pattern:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(pattern: &str, text: &str) -> bool {
        super::glob(pattern).is_match(text)
    }

    #[test]
    fn patterns_match_with_stars() {
        assert!(glob("*", "anything"));
        assert!(glob("deletion/*", "deletion/configmap"));
        assert!(!glob("deletion/*", "deletions/configmap"));
        assert!(glob(
            "events[*].object.metadata.*",
            "events[2].object.metadata.labels.a"
        ));
        assert!(glob(
            "body.spec.containers[*].ports",
            "body.spec.containers[0].ports"
        ));
        assert!(glob("body", "body"));
        assert!(!glob("body", "body.kind"));
        assert!(glob("a*b*c", "abc"));
        assert!(!glob("a*b*c", "acb"));
        assert!(!glob("ab*ba", "aba"));
        assert!(glob("[lp]*", "log-missing"));
        assert!(glob("[lp]*", "portforward"));
        assert!(!glob("[lp]*", "exec"));
    }

    #[test]
    fn the_table_parses_and_every_entry_has_a_reason() {
        assert!(!entries().is_empty());
    }
}
