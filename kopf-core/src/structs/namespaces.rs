//! Namespace patterns of `--namespace`: which namespaces an operator serves.
//!
//! Each `--namespace` value is one pattern; a namespace is served if any pattern matches it.
//! A pattern is a comma-separated list of globs (spaces around them are ignored), each either
//! inclusive or exclusive (starting with `!`). Globs are Python's `fnmatch` globs, as in
//! Kopf: `*` matches any run of characters, `?` any one character, `[abc]`, `[a-z]` and
//! `[!abc]` one character from (or not from) a set; there is no escaping. Matching is
//! case-sensitive.
//!
//! Within one pattern, the globs are applied left to right (Kopf's `match_namespace`):
//!
//! 1. If the first glob is exclusive, a catch-all `*` is implied before it.
//! 2. The first glob decides the initial match.
//! 3. An exclusive glob un-matches a namespace it matches.
//! 4. A later inclusive glob re-matches a namespace it matches, but only one that the first
//!    glob matched: `myapp-*,!*-pr-*,*-pr-123` serves `myapp-pr-123` but not
//!    `otherapp-pr-123`, and `ns1,ns2` serves only `ns1` (list several namespaces as several
//!    patterns instead).
//!
//! Unlike Kopf, an empty list of patterns and an empty glob (`""`, `"!"`, `"a,,b"`) are errors
//! rather than patterns that silently match nothing. Kopf's regular expressions (possible only
//! from Python code, not from the command line) are not supported.
//!
//! Patterns that are not all plain names select among the namespaces that exist:
//! [`ObservedNamespaces`] follows a watch of `namespaces` and tells which are served now
//! (Kopf's `revise_namespaces`).

use std::collections::BTreeSet;

use serde_json::Value;

/// An invalid `--namespace` pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NamespacePatternError {
    /// No patterns were given at all.
    #[error("no namespace patterns given")]
    Empty,
    /// A pattern has an empty glob, e.g. `""`, `"!"` or `"a,,b"`.
    #[error("empty glob in namespace pattern {pattern:?}")]
    EmptyGlob {
        /// The pattern as given.
        pattern: String,
    },
}

/// The parsed `--namespace` patterns of an operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NamespacePatterns {
    patterns: Vec<Pattern>,
}

/// One `--namespace` value: an initial inclusive glob and the globs that refine it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern {
    first: Glob,
    rest: Vec<(Polarity, Glob)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Polarity {
    Include,
    Exclude,
}

impl NamespacePatterns {
    /// Parses the `--namespace` values, one pattern each.
    pub(crate) fn parse(patterns: &[String]) -> Result<Self, NamespacePatternError> {
        if patterns.is_empty() {
            return Err(NamespacePatternError::Empty);
        }
        let patterns = patterns
            .iter()
            .map(|pattern| Pattern::parse(pattern))
            .collect::<Result<_, _>>()?;
        Ok(NamespacePatterns { patterns })
    }

    /// Whether the operator serves `namespace`.
    pub(crate) fn matches(&self, namespace: &str) -> bool {
        self.patterns
            .iter()
            .any(|pattern| pattern.matches(namespace))
    }

    /// The namespaces to serve, if every pattern is one plain name (no globs, no negation, no
    /// list), in the order given and without duplicates; `None` otherwise.
    pub(crate) fn is_exact(&self) -> Option<Vec<String>> {
        self.patterns
            .iter()
            .map(Pattern::as_name)
            .collect::<Option<Vec<_>>>()
            .map(dedup)
    }
}

fn dedup(names: Vec<&str>) -> Vec<String> {
    let mut unique: Vec<String> = Vec::with_capacity(names.len());
    for name in names {
        if !unique.iter().any(|seen| seen == name) {
            unique.push(name.to_owned());
        }
    }
    unique
}

impl Pattern {
    fn parse(pattern: &str) -> Result<Self, NamespacePatternError> {
        let empty = || NamespacePatternError::EmptyGlob {
            pattern: pattern.to_owned(),
        };
        let mut globs = Vec::new();
        for part in pattern.split(',') {
            let part = part.trim();
            // Kopf strips every leading `!`, so `!!x` excludes `x`.
            let (polarity, glob) = match part.trim_start_matches('!') {
                stripped if stripped.len() < part.len() => (Polarity::Exclude, stripped),
                _ => (Polarity::Include, part),
            };
            if glob.is_empty() {
                return Err(empty());
            }
            globs.push((polarity, Glob::parse(glob)));
        }
        let mut globs = globs.into_iter();
        let first = match globs.next() {
            Some((Polarity::Include, glob)) => glob,
            Some(excluded @ (Polarity::Exclude, _)) => {
                let rest = std::iter::once(excluded).chain(globs).collect();
                return Ok(Pattern {
                    first: Glob::parse("*"),
                    rest,
                });
            }
            None => return Err(empty()),
        };
        Ok(Pattern {
            first,
            rest: globs.collect(),
        })
    }

    fn matches(&self, name: &str) -> bool {
        let first_match = self.first.matches(name);
        self.rest
            .iter()
            .fold(first_match, |matched, (polarity, glob)| match polarity {
                Polarity::Exclude => matched && !glob.matches(name),
                Polarity::Include => matched || (first_match && glob.matches(name)),
            })
    }

    fn as_name(&self) -> Option<&str> {
        if self.rest.is_empty() {
            self.first.as_literal()
        } else {
            None
        }
    }
}

/// A glob compiled into single-character tokens and stars.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Glob {
    source: String,
    tokens: Vec<Token>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// `*`: any run of characters, empty included.
    Star,
    /// `?`: any one character.
    Any,
    /// A character matching itself.
    Literal(char),
    /// `[...]` or `[!...]`: one character in (or not in) the inclusive ranges.
    Set {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Token {
    fn matches_char(&self, c: char) -> bool {
        match self {
            Token::Star | Token::Any => true,
            Token::Literal(literal) => *literal == c,
            Token::Set { negated, ranges } => {
                ranges.iter().any(|(low, high)| (*low..=*high).contains(&c)) != *negated
            }
        }
    }
}

impl Glob {
    /// Compiles a glob as Python's `fnmatch.translate` reads it.
    fn parse(source: &str) -> Self {
        let chars: Vec<char> = source.chars().collect();
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            i += 1;
            match c {
                '*' => {
                    if tokens.last() != Some(&Token::Star) {
                        tokens.push(Token::Star);
                    }
                }
                '?' => tokens.push(Token::Any),
                '[' => match parse_set(&chars, i) {
                    Some((token, next)) => {
                        tokens.push(token);
                        i = next;
                    }
                    // An unclosed `[` is a literal character.
                    None => tokens.push(Token::Literal('[')),
                },
                c => tokens.push(Token::Literal(c)),
            }
        }
        Glob {
            source: source.to_owned(),
            tokens,
        }
    }

    /// The glob as a plain name, if it has no wildcards or sets. As in Kopf, a `!` anywhere
    /// also disqualifies it (no namespace name has one).
    fn as_literal(&self) -> Option<&str> {
        let literal = self
            .tokens
            .iter()
            .all(|token| matches!(token, Token::Literal(_)));
        (literal && !self.source.contains('!')).then_some(self.source.as_str())
    }

    /// Whether the whole of `name` matches; linear backtracking over the last star.
    fn matches(&self, name: &str) -> bool {
        let name: Vec<char> = name.chars().collect();
        let tokens = &self.tokens;
        let (mut t, mut n) = (0, 0);
        // After a star: the token after it, and the name position it was tried at.
        let mut resume: Option<(usize, usize)> = None;
        while n < name.len() {
            match tokens.get(t) {
                Some(Token::Star) => {
                    resume = Some((t + 1, n));
                    t += 1;
                }
                Some(token) if token.matches_char(name[n]) => {
                    t += 1;
                    n += 1;
                }
                _ => match resume {
                    Some((after_star, tried)) => {
                        t = after_star;
                        n = tried + 1;
                        resume = Some((after_star, tried + 1));
                    }
                    None => return false,
                },
            }
        }
        tokens[t..].iter().all(|token| *token == Token::Star)
    }
}

/// Parses a `[...]` set whose content starts at `start` (just after `[`); returns the token and
/// the position after `]`, or `None` if the set is never closed.
fn parse_set(chars: &[char], start: usize) -> Option<(Token, usize)> {
    let mut i = start;
    let negated = chars.get(i) == Some(&'!');
    if negated {
        i += 1;
    }
    // A `]` right at the start is a member, not the end.
    let content_start = i;
    if chars.get(i) == Some(&']') {
        i += 1;
    }
    let end = i + chars[i.min(chars.len())..].iter().position(|&c| c == ']')?;
    let content = &chars[content_start..end];
    let mut ranges = Vec::new();
    let mut k = 0;
    while k < content.len() {
        // `a-z` is a range when a character follows the hyphen inside the set; a hyphen at the
        // start or the end is a member. A range running backwards matches nothing.
        if k + 2 < content.len() && content[k + 1] == '-' {
            if content[k] <= content[k + 2] {
                ranges.push((content[k], content[k + 2]));
            }
            k += 3;
        } else {
            ranges.push((content[k], content[k]));
            k += 1;
        }
    }
    Some((Token::Set { negated, ranges }, end + 1))
}

/// The namespaces served now: those that exist and that the patterns match, kept up to date
/// from a watch of `namespaces` (Kopf's `revise_namespaces`).
///
/// A namespace stops being served when it is gone (`DELETED`), or when it is terminating with
/// conditions none of which still blocks it: until then, the operator must keep handling its
/// objects (their finalizers hold the namespace's termination). A namespace terminating
/// without conditions yet keeps being served, as in Kopf.
#[derive(Debug, Clone)]
pub(crate) struct ObservedNamespaces {
    patterns: NamespacePatterns,
    served: BTreeSet<String>,
    /// What the listing in progress has found.
    listing: BTreeSet<String>,
}

/// What one namespace's state means for serving it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Revision {
    Serve,
    Stop,
    /// Terminating but blocked, or not matched: as it was.
    Keep,
}

impl ObservedNamespaces {
    /// Nothing served yet: a listing comes first.
    pub(crate) fn new(patterns: NamespacePatterns) -> ObservedNamespaces {
        ObservedNamespaces {
            patterns,
            served: BTreeSet::new(),
            listing: BTreeSet::new(),
        }
    }

    /// The namespaces served now.
    pub(crate) fn served(&self) -> &BTreeSet<String> {
        &self.served
    }

    /// One namespace of a (re)listing.
    pub(crate) fn listed(&mut self, namespace: &Value) {
        let Some(name) = name_of(namespace) else {
            return;
        };
        let keep = match self.revise(None, namespace) {
            Revision::Serve => true,
            Revision::Keep => self.served.contains(name),
            Revision::Stop => false,
        };
        if keep {
            self.listing.insert(name.to_owned());
        }
    }

    /// The listing is complete: what it found is served, and namespaces that it did not find
    /// (gone while no watch was open) are not. Whether anything changed.
    pub(crate) fn listing_done(&mut self) -> bool {
        let listing = std::mem::take(&mut self.listing);
        let changed = listing != self.served;
        self.served = listing;
        changed
    }

    /// A change from the watch stream (`ADDED`, `MODIFIED`, `DELETED`). Whether anything
    /// changed.
    pub(crate) fn changed(&mut self, kind: &str, namespace: &Value) -> bool {
        let Some(name) = name_of(namespace) else {
            return false;
        };
        match self.revise(Some(kind), namespace) {
            Revision::Serve => self.served.insert(name.to_owned()),
            Revision::Stop => self.served.remove(name),
            Revision::Keep => false,
        }
    }

    fn revise(&self, kind: Option<&str>, namespace: &Value) -> Revision {
        let Some(name) = name_of(namespace) else {
            return Revision::Keep;
        };
        let conditions = namespace["status"]["conditions"].as_array();
        let terminating = !namespace["metadata"]["deletionTimestamp"].is_null();
        // Kopf: marked for deletion is not enough, it must prove it can be deleted first.
        let deleted =
            kind == Some("DELETED") || (terminating && conditions.is_some_and(|c| !c.is_empty()));
        let blocked = conditions
            .into_iter()
            .flatten()
            .any(|condition| condition["status"] == "True");
        if deleted && blocked {
            tracing::debug!(target: "kopf::observer", namespace = name, "the namespace's termination is pending");
            Revision::Keep
        } else if deleted {
            Revision::Stop
        } else if self.patterns.matches(name) {
            Revision::Serve
        } else {
            Revision::Keep
        }
    }
}

fn name_of(namespace: &Value) -> Option<&str> {
    namespace["metadata"]["name"]
        .as_str()
        .filter(|name| !name.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn patterns(list: &[&str]) -> NamespacePatterns {
        let list: Vec<String> = list.iter().map(|p| p.to_string()).collect();
        NamespacePatterns::parse(&list).expect("valid patterns")
    }

    fn matches(name: &str, pattern: &str) -> bool {
        patterns(&[pattern]).matches(name)
    }

    // Modeled on Kopf's tests/references/test_namespace_matching.py.
    #[test]
    fn exact_values() {
        assert!(matches("ns1", "ns1"));
        assert!(!matches("ns1", "ns"));
    }

    #[test]
    fn glob_patterns() {
        for (pattern, expected) in [
            ("*", true),
            ("ns*", true),
            ("ns?", true),
            ("ns??", false),
            ("n*1", true),
            ("n?1", true),
            ("n??1", false),
            ("*1", true),
            ("?1", false),
            ("??1", true),
            ("ns*x", false),
        ] {
            assert_eq!(matches("ns1", pattern), expected, "{pattern}");
        }
    }

    #[test]
    fn follow_up_globs_only_re_include() {
        assert!(matches("ns1", "ns1,ns2"));
        assert!(!matches("ns1", "ns2,ns1"));
    }

    #[test]
    fn spaces_are_ignored() {
        for (pattern, expected) in [
            (" ns1", true),
            ("ns1 ", true),
            (" ns1 ", true),
            (" ns1 , ns2 ", true),
            (" ns2 , ns1 ", false),
        ] {
            assert_eq!(matches("ns1", pattern), expected, "{pattern:?}");
        }
    }

    #[test]
    fn exclusions_after_inclusion() {
        assert!(!matches("ns1", "ns*,!ns1"));
        assert!(matches("ns1", "ns*,!ns2"));
    }

    #[test]
    fn initial_exclusion_implies_catchall_inclusion() {
        assert!(!matches("ns1", "!ns1"));
        assert!(matches("ns1", "!ns2"));
        assert!(!matches("ns1", "!ns*"));
    }

    #[test]
    fn reinclusion_after_exclusion() {
        assert!(matches("ns1", "ns*,!ns1,ns1"));
        assert!(matches("ns1", "ns*,!ns*,ns1"));
        assert!(matches("ns1", "!ns*,ns1"));
        assert!(matches("ns1", "!ns*,ns?"));
    }

    #[test]
    fn the_documented_example() {
        let pattern = "myapp-*,!*-pr-*,*-pr-123";
        assert!(matches("myapp-live", pattern));
        assert!(!matches("myapp-pr-456", pattern));
        assert!(matches("myapp-pr-123", pattern));
        assert!(!matches("otherapp-live", pattern));
        assert!(!matches("otherapp-pr-123", pattern));
        let pattern = "!*-pr-*, *pr-123";
        assert!(matches("anyapp-anything", pattern));
        assert!(matches("otherapp-pr-123", pattern));
        assert!(!matches("myapp-pr-456", pattern));
    }

    #[test]
    fn any_pattern_may_match() {
        let p = patterns(&["ns1", "team-*", "!*"]);
        assert!(p.matches("ns1"));
        assert!(p.matches("team-a"));
        assert!(!p.matches("ns2"));
    }

    #[test]
    fn repeated_negation_marks_are_one() {
        assert!(!matches("ns1", "!!ns1"));
        assert!(matches("ns2", "!!ns1"));
    }

    #[test]
    fn sets_as_in_fnmatch() {
        for (name, pattern, expected) in [
            ("ns1", "ns[12]", true),
            ("ns3", "ns[12]", false),
            ("ns3", "ns[!12]", true),
            ("ns1", "ns[!12]", false),
            ("ns5", "ns[0-9]", true),
            ("nsa", "ns[0-9]", false),
            ("ns-", "ns[a-]", true),
            ("ns-", "ns[-a]", true),
            ("ns-", "ns[!-a]", false),
            ("ns]", "ns[]]", true),
            ("ns]", "ns[!]]", false),
            ("nsx", "ns[!]]", true),
            ("ns-", "ns[a-b-c]", true),
            ("nsc", "ns[a-b-c]", true),
            ("nsb", "ns[a-b-c]", true),
            ("nsz", "ns[z-a]", false),
            ("nsz", "ns[!z-a]", true),
            ("ns[1", "ns[1", true),
            ("ns[!]", "ns[!]", true),
            ("ns*", "ns[*]", true),
            ("ns1", "ns[*]", false),
        ] {
            assert_eq!(matches(name, pattern), expected, "{name} vs {pattern}");
        }
    }

    #[test]
    fn stars_backtrack() {
        assert!(matches("a-pr-b-pr-c", "*-pr-c"));
        assert!(matches("abcabcabd", "*abd"));
        assert!(matches("abc", "a**c"));
        assert!(matches("", "*"));
        assert!(!matches("abc", "*x*"));
        assert!(matches("axbxc", "*x*c"));
    }

    #[test]
    fn invalid_patterns() {
        assert_eq!(
            NamespacePatterns::parse(&[]),
            Err(NamespacePatternError::Empty)
        );
        for pattern in ["", " ", "!", "ns1,", "ns1,,ns2", ", ns1", "ns1, !"] {
            assert_eq!(
                NamespacePatterns::parse(&[pattern.to_string()]),
                Err(NamespacePatternError::EmptyGlob {
                    pattern: pattern.to_string()
                }),
                "{pattern:?}"
            );
        }
        assert_eq!(
            NamespacePatternError::EmptyGlob {
                pattern: "a,".into()
            }
            .to_string(),
            "empty glob in namespace pattern \"a,\""
        );
    }

    // Modeled on Kopf's tests/references/test_namespace_selection.py.
    #[test]
    fn exact_names() {
        assert_eq!(
            patterns(&["ns2", "ns1", " ns2 "]).is_exact(),
            Some(vec!["ns2".to_string(), "ns1".to_string()])
        );
        assert_eq!(patterns(&["ns1,ns2"]).is_exact(), None);
        assert_eq!(patterns(&["ns1", "n*s"]).is_exact(), None);
        assert_eq!(patterns(&["n?s"]).is_exact(), None);
        assert_eq!(patterns(&["!ns1"]).is_exact(), None);
        assert_eq!(patterns(&["ns[1]"]).is_exact(), None);
        assert_eq!(
            patterns(&["ns[1"]).is_exact(),
            Some(vec!["ns[1".to_string()])
        );
    }

    fn namespace(name: &str) -> Value {
        serde_json::json!({"metadata": {"name": name}, "status": {"phase": "Active"}})
    }

    fn terminating(name: &str, conditions: Value) -> Value {
        serde_json::json!({
            "metadata": {"name": name, "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"phase": "Terminating", "conditions": conditions},
        })
    }

    fn served(observed: &ObservedNamespaces) -> Vec<&str> {
        observed.served().iter().map(String::as_str).collect()
    }

    // Modeled on Kopf's tests/observation/test_revision_of_namespaces.py.
    #[test]
    fn a_listing_serves_the_matching_namespaces_and_forgets_the_vanished() {
        let mut observed = ObservedNamespaces::new(patterns(&["team-*,!team-skip"]));
        for name in ["team-a", "team-skip", "default", "team-b"] {
            observed.listed(&namespace(name));
        }
        assert!(observed.listing_done());
        assert_eq!(served(&observed), ["team-a", "team-b"]);
        observed.listed(&namespace("team-a"));
        assert!(observed.listing_done(), "team-b vanished between watches");
        assert_eq!(served(&observed), ["team-a"]);
        observed.listed(&namespace("team-a"));
        assert!(!observed.listing_done(), "nothing changed");
    }

    #[test]
    fn namespaces_come_and_go_with_the_watch() {
        let mut observed = ObservedNamespaces::new(patterns(&["team-*"]));
        assert!(!observed.listing_done(), "an empty listing serves nothing");
        assert!(observed.changed("ADDED", &namespace("team-new")));
        assert!(!observed.changed("ADDED", &namespace("other")));
        assert!(!observed.changed("MODIFIED", &namespace("team-new")));
        assert_eq!(served(&observed), ["team-new"]);
        assert!(observed.changed("DELETED", &namespace("team-new")));
        assert!(observed.served().is_empty());
        assert!(!observed.changed("DELETED", &namespace("other")));
    }

    #[test]
    fn a_terminating_namespace_is_served_until_nothing_blocks_its_deletion() {
        let mut observed = ObservedNamespaces::new(patterns(&["team-*"]));
        observed.changed("ADDED", &namespace("team-a"));
        let no_conditions_yet = terminating("team-a", serde_json::json!([]));
        assert!(!observed.changed("MODIFIED", &no_conditions_yet));
        let blocked = terminating(
            "team-a",
            serde_json::json!([
                {"type": "NamespaceContentRemaining", "status": "True", "reason": "SomeResourcesRemain"},
                {"type": "NamespaceDeletionDiscoveryFailure", "status": "False"},
            ]),
        );
        assert!(!observed.changed("MODIFIED", &blocked));
        observed.listed(&blocked);
        observed.listing_done();
        assert_eq!(served(&observed), ["team-a"], "blocked: still served");
        let unblocked = terminating(
            "team-a",
            serde_json::json!([{"type": "NamespaceContentRemaining", "status": "False"}]),
        );
        assert!(observed.changed("MODIFIED", &unblocked));
        assert!(observed.served().is_empty());
        observed.listed(&blocked);
        observed.listing_done();
        assert!(
            observed.served().is_empty(),
            "a blocked namespace not served before is not started"
        );
    }

    /// A reference matcher: fnmatch's `*`/`?` semantics by plain recursion.
    fn reference_glob(name: &[char], glob: &[char]) -> bool {
        match glob.split_first() {
            None => name.is_empty(),
            Some(('*', rest)) => (0..=name.len()).any(|skip| reference_glob(&name[skip..], rest)),
            Some(('?', rest)) => !name.is_empty() && reference_glob(&name[1..], rest),
            Some((c, rest)) => name.first() == Some(c) && reference_glob(&name[1..], rest),
        }
    }

    proptest! {
        #[test]
        fn matching_never_panics(
            list in prop::collection::vec("[a-c!*?,\\[\\]\\- ]{0,8}", 0..4),
            name in "[a-c\\-\\[\\]!]{0,8}",
        ) {
            if let Ok(p) = NamespacePatterns::parse(&list) {
                let _ = p.matches(&name);
                let _ = p.is_exact();
            }
        }

        #[test]
        fn stars_and_question_marks_match_as_fnmatch(
            glob in "[ab*?]{1,8}",
            name in "[ab]{0,8}",
        ) {
            let expected = reference_glob(
                &name.chars().collect::<Vec<_>>(),
                &glob.chars().collect::<Vec<_>>(),
            );
            prop_assert_eq!(matches(&name, &glob), expected);
        }

        #[test]
        fn an_exact_name_matches_itself_only(
            name in "[a-z0-9][a-z0-9-]{0,10}",
            other in "[a-z0-9][a-z0-9-]{0,10}",
        ) {
            let p = patterns(&[&name]);
            prop_assert_eq!(p.is_exact(), Some(vec![name.clone()]));
            prop_assert!(p.matches(&name));
            prop_assert_eq!(p.matches(&other), name == other);
        }
    }
}
