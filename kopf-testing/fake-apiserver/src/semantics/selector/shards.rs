//! Shard selectors (`shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')`,
//! Kubernetes 1.36, KEP-5866): parsing with the real server's rules and messages, the 64-bit
//! FNV-1a hash of the field, and matching against hash ranges.
//!
//! The rules are those of k8s.io/apiserver `pkg/sharding` and k8s.io/apimachinery
//! `pkg/sharding`: one `shardRange(FIELD, 'START', 'END')` call or several joined by `||`, all
//! on the same field (`object.metadata.uid` or `object.metadata.namespace`); bounds are string
//! literals of exactly 16 lowercase hex digits after `0x` (`0x10000000000000000`, 2^64, is the
//! one 17-digit bound allowed); `START < END`. An object matches when the hash of its field is
//! in `[START, END)` for any of the ranges.

use std::fmt;

use serde_json::Value;

use super::shard_expr::{self, Expr, Literal};

/// Why a shard selector was rejected; `Display` is the real server's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid shard selector: {0}")]
pub(crate) struct ShardSelectorError(String);

/// A parsed shard selector: objects whose field hashes into any of the ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShardSelector {
    field: ShardField,
    ranges: Vec<ShardRange>,
}

/// The field whose hash decides an object's shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ShardField {
    Uid,
    Namespace,
}

impl ShardField {
    /// The CEL path, as written in selectors.
    fn path(self) -> &'static str {
        match self {
            ShardField::Uid => "object.metadata.uid",
            ShardField::Namespace => "object.metadata.namespace",
        }
    }
}

/// One `[start, end)` range of the 64-bit hash space, with its bounds as written.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ShardRange {
    start: u128,
    end: u128,
    start_text: String,
    end_text: String,
}

/// The exclusive upper bound that closes the hash space: 2^64, the one 17-digit bound.
const TOP: &str = "0x10000000000000000";

impl ShardSelector {
    /// Parses a shard selector as the real server does (surrounding whitespace ignored).
    pub(crate) fn parse(input: &str) -> Result<Self, ShardSelectorError> {
        let fail = |detail: String| ShardSelectorError(detail);
        let input = input.trim();
        if input.is_empty() {
            return Err(fail(
                "empty shard selector is not allowed; omit the parameter for unfiltered lists"
                    .into(),
            ));
        }
        let expr = shard_expr::parse(input).map_err(|e| fail(format!("CEL parse error: {e}")))?;
        let mut requirements = Vec::new();
        collect(&expr, &mut requirements).map_err(fail)?;
        let Some(&(field, _)) = requirements.first() else {
            return Err(fail("a shard selector needs a shardRange() call".into()));
        };
        if let Some((other, _)) = requirements.iter().find(|(f, _)| *f != field) {
            return Err(fail(format!(
                "all shard ranges must use the same field, got {:?} and {:?}",
                field.path(),
                other.path()
            )));
        }
        let ranges = requirements.into_iter().map(|(_, range)| range).collect();
        Ok(ShardSelector { field, ranges })
    }

    /// True when the object's field hashes into one of the ranges (a missing field hashes as
    /// the empty string, as a cluster-scoped object's namespace does).
    pub(crate) fn matches(&self, object: &Value) -> bool {
        let key = match self.field {
            ShardField::Uid => "uid",
            ShardField::Namespace => "namespace",
        };
        let value = object["metadata"][key].as_str().unwrap_or_default();
        let hash = u128::from(fnv1a_64(value.as_bytes()));
        self.ranges
            .iter()
            .any(|range| range.start <= hash && hash < range.end)
    }
}

/// The canonical form the real server echoes in a list's `metadata.shardInfo.selector`:
/// `shardRange(FIELD, 'START', 'END')`, joined by ` || `.
impl fmt::Display for ShardSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, range) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(
                f,
                "shardRange({}, '{}', '{}')",
                self.field.path(),
                range.start_text,
                range.end_text
            )?;
        }
        Ok(())
    }
}

/// The 64-bit FNV-1a hash (Go's `hash/fnv.New64a`).
pub(crate) fn fnv1a_64(bytes: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET_BASIS, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(PRIME)
    })
}

/// Walks `||` chains down to `shardRange()` calls, in the order written.
fn collect(expr: &Expr, out: &mut Vec<(ShardField, ShardRange)>) -> Result<(), String> {
    match expr {
        Expr::Call(name, args) if name == "_||_" => {
            for arg in args {
                collect(arg, out)?;
            }
            Ok(())
        }
        Expr::Call(name, args) if name == "shardRange" => {
            out.push(shard_range(args)?);
            Ok(())
        }
        Expr::Call(name, _) => Err(format!(
            "unsupported function {name:?}; only shardRange() and || are allowed"
        )),
        other => Err(format!(
            "unexpected expression kind {}; expected shardRange() call or || operator",
            other.kind_number()
        )),
    }
}

/// Reads the arguments of one `shardRange(field, start, end)` call.
fn shard_range(args: &[Expr]) -> Result<(ShardField, ShardRange), String> {
    let [field, start, end] = args else {
        return Err(format!(
            "shardRange() requires exactly 3 arguments, got {}",
            args.len()
        ));
    };
    let path = field_path(field)
        .map_err(|kind| format!("shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind {kind}"))?;
    let field = match path.as_str() {
        "object.metadata.uid" => ShardField::Uid,
        "object.metadata.namespace" => ShardField::Namespace,
        _ => {
            return Err(format!(
                "unsupported field path {path:?}; supported: object.metadata.uid, object.metadata.namespace"
            ));
        }
    };
    let start_text = hex_bound(start, "hexStart")?;
    let end_text = hex_bound(end, "hexEnd")?;
    let (start, end) = (bound_value(&start_text), bound_value(&end_text));
    if start >= end {
        return Err(format!(
            "shard range start {start_text} must be less than end {end_text}"
        ));
    }
    Ok((
        field,
        ShardRange {
            start,
            end,
            start_text,
            end_text,
        },
    ))
}

/// The dotted path of an identifier or a chain of selections; else the node's kind number.
fn field_path(expr: &Expr) -> Result<String, u8> {
    match expr {
        Expr::Ident(name) => Ok(name.clone()),
        Expr::Select(operand, name) => Ok(format!("{}.{name}", field_path(operand)?)),
        other => Err(other.kind_number()),
    }
}

/// Checks one bound: a string literal `0x` + 16 lowercase hex digits, or [`TOP`].
fn hex_bound(expr: &Expr, name: &str) -> Result<String, String> {
    let text = match expr {
        Expr::Literal(Literal::String(text)) => text,
        Expr::Literal(Literal::Other(go_type)) => {
            return Err(format!("{name} must be a string literal, got {go_type}"));
        }
        other => {
            return Err(format!(
                "{name} must be a string literal (e.g. '0xff'), got expression kind {}",
                other.kind_number()
            ));
        }
    };
    let Some(hex) = text.strip_prefix("0x") else {
        return Err(format!("{name} must have '0x' prefix, got {text:?}"));
    };
    if hex.is_empty() {
        return Err(format!("{name}: hex value is required after '0x'"));
    }
    if hex.len() > 17 {
        return Err(format!(
            "{name}: hex value too long ({} chars, max 17): {hex:?}",
            hex.len()
        ));
    }
    if let Some(c) = hex
        .chars()
        .find(|c| !(c.is_ascii_digit() || ('a'..='f').contains(c)))
    {
        return Err(format!(
            "{name}: invalid hex character {:?} in {text:?}",
            c.to_string()
        ));
    }
    if hex.len() == 17 {
        if text != TOP {
            return Err(format!(
                "{name}: 17-digit hex value must be '{TOP}' (2^64), got {text:?}"
            ));
        }
    } else if hex.len() != 16 {
        let padded = format!("0x{hex:0>16}");
        return Err(format!(
            "{name} must be a 0x-prefixed 16-digit hex value, got {text:?} (did you mean {padded:?}?)"
        ));
    }
    Ok(text.clone())
}

/// The number a checked bound stands for.
fn bound_value(text: &str) -> u128 {
    u128::from_str_radix(&text[2..], 16).unwrap_or_default()
}
