//! Shard selectors of Kubernetes' sharded list and watch (1.36+, KEP-5866): which objects of
//! a resource one replica of an operator sees.
//!
//! A selector is one `shardRange(FIELD, 'START', 'END')` or several joined by `||`. `FIELD` is
//! `object.metadata.uid` or `object.metadata.namespace`; an object belongs to a range when the
//! 64-bit FNV-1a hash of that field's value is at least `START` and below `END`. The bounds
//! are `0x`-prefixed hexadecimal numbers of up to 16 digits, in single or double quotes; the
//! upper bound may also be `0x10000000000000000` (2^64), to close the hash space.
//!
//! A server with the feature filters lists and watches itself and says so in the list's
//! `metadata.shardInfo`; a server without it ignores the parameter, and the operator applies
//! the same filter to what it receives ([`ShardSelector::matches`]), so that the result is the
//! same on any server.

use std::fmt;

use serde_json::Value;

use crate::structs::resources::{Resource, Selector};

/// The upper bound that closes the hash space: 2^64.
const END_OF_SPACE: u128 = 1 << 64;

/// A parsed shard selector, sent to the server as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShardSelector {
    text: String,
    ranges: Vec<ShardRange>,
}

/// One `shardRange(...)`: the objects whose field hashes into `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ShardRange {
    field: ShardField,
    start: u64,
    /// Up to 2^64, hence wider than the hashes.
    end: u128,
}

/// The object's field that is hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ShardField {
    Uid,
    Namespace,
}

/// Why a shard selector cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ShardSelectorError {
    /// Nothing but spaces.
    #[error("the selector is empty")]
    Empty,
    /// Something else than the grammar allows at a position.
    #[error("expected {expected} at offset {offset}, found {found:?}")]
    Syntax {
        /// What the grammar allows there.
        expected: &'static str,
        /// The byte offset in the selector.
        offset: usize,
        /// What is there instead (the rest of the selector, shortened).
        found: String,
    },
    /// A field that cannot be hashed.
    #[error("unsupported field {0:?}: use object.metadata.uid or object.metadata.namespace")]
    Field(String),
    /// A bound that is not a `0x`-prefixed hexadecimal number within the hash space.
    #[error(
        "invalid bound {0:?}: use '0x' and up to 16 hexadecimal digits (or '0x10000000000000000' as the upper bound)"
    )]
    Bound(String),
    /// A range that holds no hash.
    #[error("empty range: the start {start} is not below the end {end}")]
    Range {
        /// The start, as written.
        start: String,
        /// The end, as written.
        end: String,
    },
}

impl ShardSelector {
    /// Parses a selector such as
    /// `shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')`.
    pub(crate) fn parse(text: &str) -> Result<ShardSelector, ShardSelectorError> {
        if text.trim().is_empty() {
            return Err(ShardSelectorError::Empty);
        }
        let mut cursor = Cursor { text, offset: 0 };
        let mut ranges = vec![cursor.range()?];
        while cursor.eat("||") {
            ranges.push(cursor.range()?);
        }
        cursor.end()?;
        Ok(ShardSelector {
            text: text.to_string(),
            ranges,
        })
    }

    /// The selector as written: the value of the `shardSelector` parameter.
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the object belongs to the shard, as the server judges it: its field's hash is
    /// in one of the ranges (a missing field hashes as the empty string).
    pub(crate) fn matches(&self, object: &Value) -> bool {
        self.ranges.iter().any(|range| {
            let value = match range.field {
                ShardField::Uid => &object["metadata"]["uid"],
                ShardField::Namespace => &object["metadata"]["namespace"],
            };
            let hash = u128::from(fnv1a_64(value.as_str().unwrap_or_default().as_bytes()));
            u128::from(range.start) <= hash && hash < range.end
        })
    }
}

impl fmt::Display for ShardSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The 64-bit FNV-1a hash, as the API server computes it for shard selectors.
pub(crate) fn fnv1a_64(bytes: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET_BASIS, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(PRIME)
    })
}

/// The shard selectors of the settings, parsed: the first whose resource selector matches a
/// resource applies to it (as Kopf's `settings.watching.shard_selectors`).
#[derive(Debug, Clone, Default)]
pub(crate) struct ShardSelectors(Vec<(Selector, ShardSelector)>);

impl ShardSelectors {
    /// Parses each selector; the error names the resource selector and what is wrong.
    pub(crate) fn parse(entries: &[(Selector, String)]) -> Result<ShardSelectors, String> {
        entries
            .iter()
            .map(|(selector, text)| match ShardSelector::parse(text) {
                Ok(parsed) => Ok((selector.clone(), parsed)),
                Err(error) => Err(format!(
                    "the shard selector {text:?} of {selector}: {error}"
                )),
            })
            .collect::<Result<_, _>>()
            .map(ShardSelectors)
    }

    /// The shard selector of a resource: the first that applies.
    pub(crate) fn of(&self, resource: &Resource) -> Option<&ShardSelector> {
        self.0
            .iter()
            .find(|(selector, _)| selector.check(resource))
            .map(|(_, shard)| shard)
    }
}

/// A position in the selector being parsed.
struct Cursor<'a> {
    text: &'a str,
    offset: usize,
}

impl Cursor<'_> {
    fn rest(&self) -> &str {
        &self.text[self.offset..]
    }

    fn skip_spaces(&mut self) {
        let rest = self.rest();
        self.offset += rest.len() - rest.trim_start().len();
    }

    /// Consumes `token` (after spaces) if it is next.
    fn eat(&mut self, token: &str) -> bool {
        self.skip_spaces();
        if self.rest().starts_with(token) {
            self.offset += token.len();
            true
        } else {
            false
        }
    }

    fn expect(
        &mut self,
        token: &'static str,
        expected: &'static str,
    ) -> Result<(), ShardSelectorError> {
        if self.eat(token) {
            Ok(())
        } else {
            Err(self.unexpected(expected))
        }
    }

    fn unexpected(&self, expected: &'static str) -> ShardSelectorError {
        let found: String = self.rest().chars().take(24).collect();
        ShardSelectorError::Syntax {
            expected,
            offset: self.offset,
            found,
        }
    }

    /// `shardRange(FIELD, 'START', 'END')`.
    fn range(&mut self) -> Result<ShardRange, ShardSelectorError> {
        self.expect("shardRange", "`shardRange(`")?;
        self.expect("(", "`(`")?;
        self.skip_spaces();
        let field: String = self
            .rest()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_'))
            .collect();
        if field.is_empty() {
            return Err(self.unexpected("a field"));
        }
        self.offset += field.len();
        let field = match field.as_str() {
            "object.metadata.uid" => ShardField::Uid,
            "object.metadata.namespace" => ShardField::Namespace,
            _ => return Err(ShardSelectorError::Field(field)),
        };
        self.expect(",", "`,`")?;
        let start_text = self.quoted()?;
        self.expect(",", "`,`")?;
        let end_text = self.quoted()?;
        self.expect(")", "`)`")?;
        let start = bound(&start_text)?;
        let end = bound(&end_text)?;
        if start >= END_OF_SPACE {
            return Err(ShardSelectorError::Bound(start_text));
        }
        if start >= end {
            return Err(ShardSelectorError::Range {
                start: start_text,
                end: end_text,
            });
        }
        Ok(ShardRange {
            field,
            start: start as u64,
            end,
        })
    }

    /// A string in single or double quotes.
    fn quoted(&mut self) -> Result<String, ShardSelectorError> {
        self.skip_spaces();
        let Some(quote) = self
            .rest()
            .chars()
            .next()
            .filter(|c| matches!(c, '\'' | '"'))
        else {
            return Err(self.unexpected("a quoted bound"));
        };
        let inner = &self.rest()[1..];
        let Some(length) = inner.find(quote) else {
            return Err(self.unexpected("a closed quote"));
        };
        let value = inner[..length].to_string();
        self.offset += length + 2;
        Ok(value)
    }

    fn end(&mut self) -> Result<(), ShardSelectorError> {
        self.skip_spaces();
        if self.rest().is_empty() {
            Ok(())
        } else {
            Err(self.unexpected("`||` or the end"))
        }
    }
}

/// `0x` and up to 16 hexadecimal digits, or 2^64 exactly.
fn bound(text: &str) -> Result<u128, ShardSelectorError> {
    let invalid = || ShardSelectorError::Bound(text.to_string());
    let digits = text.strip_prefix("0x").ok_or_else(invalid)?;
    if digits.is_empty() || digits.len() > 17 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(invalid());
    }
    let value = u128::from_str_radix(digits, 16).map_err(|_| invalid())?;
    if value > END_OF_SPACE || (digits.len() == 17 && value != END_OF_SPACE) {
        return Err(invalid());
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const LOWER_HALF: &str =
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
    const UPPER_HALF: &str =
        "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')";

    #[test]
    fn shard_hashes_are_fnv1a_64() {
        assert_eq!(fnv1a_64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn shard_selectors_parse_ranges_fields_and_alternatives() {
        let parsed = ShardSelector::parse(UPPER_HALF).expect("valid");
        assert_eq!(
            parsed.ranges,
            [ShardRange {
                field: ShardField::Uid,
                start: 0x8000_0000_0000_0000,
                end: END_OF_SPACE,
            }]
        );
        assert_eq!(parsed.as_str(), UPPER_HALF);
        let several = ShardSelector::parse(
            " shardRange( object.metadata.namespace ,\"0x0\",'0x10' ) || shardRange(object.metadata.uid, '0xff', '0xFFFFFFFFFFFFFFFF')",
        )
        .expect("valid");
        assert_eq!(
            several.ranges,
            [
                ShardRange {
                    field: ShardField::Namespace,
                    start: 0,
                    end: 0x10,
                },
                ShardRange {
                    field: ShardField::Uid,
                    start: 0xff,
                    end: u128::from(u64::MAX),
                },
            ]
        );
    }

    #[test]
    fn shard_selectors_that_are_invalid_say_why() {
        let error = |text: &str| ShardSelector::parse(text).expect_err(text).to_string();
        let table = [
            ("", "the selector is empty"),
            ("  ", "the selector is empty"),
            (
                "shardrange(object.metadata.uid, '0x0', '0x1')",
                "expected `shardRange(` at offset 0",
            ),
            (
                "shardRange(metadata.uid, '0x0', '0x1')",
                "unsupported field \"metadata.uid\"",
            ),
            (
                "shardRange(object.metadata.name, '0x0', '0x1')",
                "unsupported field \"object.metadata.name\"",
            ),
            (
                "shardRange(object.metadata.uid, 0x0, '0x1')",
                "expected a quoted bound at offset 32",
            ),
            (
                "shardRange(object.metadata.uid, '0x0', '0x1",
                "expected a closed quote",
            ),
            (
                "shardRange(object.metadata.uid, '0x0', '0x1'",
                "expected `)` at offset",
            ),
            (
                "shardRange(object.metadata.uid, '0', '0x1')",
                "invalid bound \"0\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x', '0x1')",
                "invalid bound \"0x\"",
            ),
            (
                "shardRange(object.metadata.uid, '0xg', '0x1')",
                "invalid bound \"0xg\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x0', '0x10000000000000001')",
                "invalid bound \"0x10000000000000001\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x10000000000000000', '0x10000000000000000')",
                "invalid bound \"0x10000000000000000\"",
            ),
            (
                "shardRange(object.metadata.uid, '0x8', '0x8')",
                "empty range: the start 0x8 is not below the end 0x8",
            ),
            (
                "shardRange(object.metadata.uid, '0x9', '0x8')",
                "empty range",
            ),
            (&format!("{LOWER_HALF} ||"), "expected `shardRange(`"),
            (
                &format!("{LOWER_HALF} && {UPPER_HALF}"),
                "expected `||` or the end at offset",
            ),
        ];
        for (text, expected) in table {
            let message = error(text);
            assert!(
                message.contains(expected),
                "{text:?}: {message:?} lacks {expected:?}"
            );
        }
    }

    #[test]
    fn shard_ranges_keep_start_and_exclude_end() {
        // The uids "" and "a" hash to 0xcbf29ce484222325 and 0xaf63dc4c8601ec8c.
        let with_uid = |uid: &str| json!({"metadata": {"uid": uid}});
        let selector = |start: &str, end: &str| {
            ShardSelector::parse(&format!(
                "shardRange(object.metadata.uid, '{start}', '{end}')"
            ))
            .expect("valid")
        };
        let at_empty = selector("0xcbf29ce484222325", "0xcbf29ce484222326");
        assert!(at_empty.matches(&with_uid("")));
        assert!(
            at_empty.matches(&json!({"metadata": {}})),
            "a missing uid hashes as \"\""
        );
        assert!(!selector("0x0", "0xcbf29ce484222325").matches(&with_uid("")));
        let upper = ShardSelector::parse(UPPER_HALF).expect("valid");
        let lower = ShardSelector::parse(LOWER_HALF).expect("valid");
        assert!(upper.matches(&with_uid("")) && !lower.matches(&with_uid("")));
        assert!(upper.matches(&with_uid("a")) && !lower.matches(&with_uid("a")));
        let top = selector("0xffffffffffffffff", "0x10000000000000000");
        assert!(!top.matches(&with_uid("a")));
        let either = ShardSelector::parse(
            "shardRange(object.metadata.uid, '0x0', '0x1') || \
             shardRange(object.metadata.namespace, '0xaf63dc4c8601ec8c', '0xaf63dc4c8601ec8d')",
        )
        .expect("valid");
        assert!(either.matches(&json!({"metadata": {"uid": "x", "namespace": "a"}})));
        assert!(!either.matches(&json!({"metadata": {"uid": "x", "namespace": "b"}})));
    }

    #[test]
    fn shard_selectors_apply_the_first_that_matches_the_resource() {
        let resource = Resource {
            group: "kopf.dev".into(),
            version: "v1".into(),
            plural: "kopfexamples".into(),
            kind: "KopfExample".into(),
            preferred: true,
            ..Resource::default()
        };
        let shards = ShardSelectors::parse(&[
            (Selector::new("", "v1", "pods"), LOWER_HALF.into()),
            (Selector::named("kopfexamples.kopf.dev"), UPPER_HALF.into()),
            (Selector::Everything, LOWER_HALF.into()),
        ])
        .expect("valid");
        assert_eq!(
            shards.of(&resource).map(ShardSelector::as_str),
            Some(UPPER_HALF)
        );
        let error = ShardSelectors::parse(&[(Selector::named("kex"), "shardRange(".into())])
            .expect_err("invalid");
        assert!(error.contains("kex"), "{error}");
        assert!(error.contains("expected a field"), "{error}");
    }
}
