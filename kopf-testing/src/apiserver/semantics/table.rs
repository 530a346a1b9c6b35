//! Server-side `meta.k8s.io/v1` `Table` rendering for `kubectl get`, modelled on the apiextensions-apiserver CRD table convertor: printer columns, a Kubernetes-style JSONPath subset and `duration.HumanDuration`.

use serde_json::{Value, json};
use std::cmp::Ordering;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::apiserver::storage::columns::PrinterColumn;

/// Description of the always-present "Name" column (ObjectMeta.name swagger doc).
const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// Maximum nesting of filter expressions inside a JSONPath; deeper paths are malformed.
const MAX_FILTER_NESTING: usize = 16;

/// Maximum number of intermediate or final JSONPath matches kept (guards against blow-up).
const MAX_RESULTS: usize = 10_000;

/// Builds the Table for these objects (already full JSON objects with metadata).
pub(crate) fn build_table(
    objects: &[Value],
    columns: &[PrinterColumn],
    list_meta: Value,
    now: OffsetDateTime,
) -> Value {
    let default_columns;
    let columns = if columns.is_empty() {
        default_columns = [PrinterColumn::default_age()];
        &default_columns[..]
    } else {
        columns
    };
    let mut definitions = vec![json!({
        "name": "Name",
        "type": "string",
        "format": "name",
        "description": NAME_DESCRIPTION,
        "priority": 0,
    })];
    definitions.extend(columns.iter().map(PrinterColumn::definition));
    let parsed: Vec<Option<Vec<Segment>>> = columns
        .iter()
        .map(|column| parse_path(&column.json_path))
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let mut cells = Vec::with_capacity(columns.len() + 1);
            cells.push(Value::String(name.to_owned()));
            for (column, path) in columns.iter().zip(&parsed) {
                let matches = path
                    .as_deref()
                    .map(|segments| evaluate(object, vec![object], segments))
                    .unwrap_or_default();
                cells.push(render_cell(&column.type_, &matches, now));
            }
            let metadata = object.get("metadata").cloned().unwrap_or_else(|| json!({}));
            json!({
                "cells": cells,
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": metadata,
                },
            })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

/// Renders one cell from a column's JSONPath matches, per the column's type.
fn render_cell(column_type: &str, matches: &[&Value], now: OffsetDateTime) -> Value {
    match matches {
        [] => Value::Null,
        [single] => render_single(column_type, single, now),
        many => Value::String(
            many.iter()
                .map(|value| value_text(value))
                .collect::<Vec<_>>()
                .join(","),
        ),
    }
}

/// Renders a single matched value like the apiserver's `cellForJSONValue` / string printing.
fn render_single(column_type: &str, value: &Value, now: OffsetDateTime) -> Value {
    match (column_type, value) {
        (_, Value::Null) => Value::Null,
        ("string", other) => Value::String(value_text(other)),
        ("integer", Value::Number(number)) => {
            if number.is_i64() || number.is_u64() {
                Value::Number(number.clone())
            } else {
                number
                    .as_f64()
                    .and_then(truncate_to_i64)
                    .map_or(Value::Null, Value::from)
            }
        }
        ("number", Value::Number(number)) => Value::Number(number.clone()),
        ("boolean", Value::Bool(flag)) => Value::Bool(*flag),
        ("date", Value::String(text)) => match OffsetDateTime::parse(text, &Rfc3339) {
            Ok(timestamp) => Value::String(human_duration(now - timestamp)),
            Err(_) => Value::String(text.clone()),
        },
        _ => Value::Null,
    }
}

/// Go's `int64(f)` for finite, in-range floats (truncation toward zero).
fn truncate_to_i64(value: f64) -> Option<i64> {
    // 2^63 is exactly representable as f64.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    (value.is_finite() && (-LIMIT..LIMIT).contains(&value)).then(|| value.trunc() as i64)
}

/// Text of a JSON value: strings as-is, everything else as compact JSON.
fn value_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Evaluates a Kubernetes-style JSONPath, returning every match.
pub(crate) fn json_path(object: &Value, path: &str) -> Vec<Value> {
    parse_path(path)
        .map(|segments| {
            evaluate(object, vec![object], &segments)
                .into_iter()
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// Kubernetes' duration.HumanDuration, as used for AGE columns.
pub(crate) fn human_duration(d: time::Duration) -> String {
    const SECOND: i64 = 1_000_000_000;
    const MINUTE: i64 = 60 * SECOND;
    const HOUR: i64 = 60 * MINUTE;
    // Go's time.Duration is int64 nanoseconds; time.Since saturates at its bounds.
    let nanos = d.whole_nanoseconds();
    let d = i64::try_from(nanos).unwrap_or(if nanos < 0 { i64::MIN } else { i64::MAX });
    // d.Seconds() as Go computes it, then int() truncation.
    let seconds = ((d / SECOND) as f64 + (d % SECOND) as f64 / 1e9) as i64;
    if seconds < -1 {
        return "<invalid>".to_owned();
    } else if seconds < 0 {
        return "0s".to_owned();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = d / MINUTE;
    if minutes < 10 {
        let s = (d / SECOND) % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = d / HOUR;
    if hours < 8 {
        let m = (d / MINUTE) % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        format!("{hours}h{m}m")
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        format!("{}d{}h", hours / 24, h)
    } else if hours < 24 * 365 * 2 {
        format!("{}d", hours / 24)
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        format!("{}y{}d", hours / 24 / 365, dy)
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

/// One step of a parsed JSONPath.
#[derive(Debug, Clone, PartialEq)]
enum Segment {
    /// `.name` or `['name']`: the member of an object.
    Field(String),
    /// `.*` or `[*]`: every element of an array or value of an object.
    Wildcard,
    /// `..`: the current value and all of its descendants, depth first.
    Recursive,
    /// `[0]`, `[-1]`, `[1:3]`, `[0,2]`, `['a','b']`: a union of selectors.
    Select(Vec<Selector>),
    /// `[?(...)]`: the elements of an array satisfying a predicate.
    Filter(Box<Filter>),
}

/// One member of a bracket union.
#[derive(Debug, Clone, PartialEq)]
enum Selector {
    /// A quoted object key.
    Key(String),
    /// An array index; negative counts from the end.
    Index(i64),
    /// An array slice `start:end:step`.
    Slice {
        /// First index (default 0); negative counts from the end.
        start: Option<i64>,
        /// One past the last index (default the length); negative counts from the end.
        end: Option<i64>,
        /// Stride (default 1); must be positive.
        step: Option<i64>,
    },
}

/// A filter predicate: existence of `left`, or a comparison of `left` with another operand.
#[derive(Debug, Clone, PartialEq)]
struct Filter {
    /// Left-hand operand.
    left: Operand,
    /// Operator and right-hand operand; None for an existence test.
    comparison: Option<(CompareOp, Operand)>,
}

/// A filter operand.
#[derive(Debug, Clone, PartialEq)]
enum Operand {
    /// `@...`: a path relative to the element being filtered.
    Current(Vec<Segment>),
    /// `$...`: a path relative to the whole document.
    Root(Vec<Segment>),
    /// A string, number, boolean or null literal.
    Literal(Value),
}

/// A filter comparison operator.
#[derive(Debug, Clone, Copy, PartialEq)]
enum CompareOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// Parses a whole column JSONPath (optionally wrapped in `{}` and/or prefixed with `$`).
fn parse_path(path: &str) -> Option<Vec<Segment>> {
    let trimmed = path.trim();
    let inner = match trimmed.strip_prefix('{') {
        Some(rest) => rest.strip_suffix('}')?.trim(),
        None => trimmed,
    };
    let chars: Vec<char> = inner.chars().collect();
    match chars.first() {
        Some('$') => parse_segments(&chars[1..], 0),
        Some('.' | '[') => parse_segments(&chars, 0),
        _ => None,
    }
}

/// Whether `c` ends an unbracketed field name (as in client-go's jsonpath parser).
fn is_terminator(c: char) -> bool {
    c.is_whitespace() || matches!(c, '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}')
}

/// Parses a sequence of `.name`, `..`, and `[...]` steps.
fn parse_segments(chars: &[char], depth: usize) -> Option<Vec<Segment>> {
    let mut segments = Vec::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        match c {
            c if c.is_whitespace() => i += 1,
            '.' if chars.get(i + 1) == Some(&'.') => {
                segments.push(Segment::Recursive);
                i += 2;
                match chars.get(i) {
                    Some('[') => {}
                    Some(&next) if next == '\\' || !is_terminator(next) => {
                        let (segment, after) = parse_name(chars, i)?;
                        segments.extend(segment);
                        i = after;
                    }
                    _ => return None,
                }
            }
            '.' => {
                let (segment, after) = parse_name(chars, i + 1)?;
                segments.extend(segment);
                i = after;
            }
            '[' => {
                let close = find_closing_bracket(chars, i)?;
                let content: String = chars.get(i + 1..close)?.iter().collect();
                segments.push(parse_bracket(&content, depth)?);
                i = close + 1;
            }
            _ => return None,
        }
    }
    Some(segments)
}

/// Parses a field name starting at `i` (backslash escapes the next character); an empty name is the identity step.
fn parse_name(chars: &[char], mut i: usize) -> Option<(Option<Segment>, usize)> {
    let mut name = String::new();
    let mut escaped = false;
    while let Some(&c) = chars.get(i) {
        if c == '\\' {
            name.push(*chars.get(i + 1)?);
            escaped = true;
            i += 2;
        } else if is_terminator(c) {
            break;
        } else {
            name.push(c);
            i += 1;
        }
    }
    let segment = if escaped {
        Some(Segment::Field(name))
    } else if name.is_empty() {
        None
    } else if name == "*" {
        Some(Segment::Wildcard)
    } else {
        Some(Segment::Field(name))
    };
    Some((segment, i))
}

/// Index of the `]` matching the `[` at `open`, skipping quoted text and nested brackets.
fn find_closing_bracket(chars: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut i = open + 1;
    while let Some(&c) = chars.get(i) {
        match (quote, c) {
            (_, '\\') => i += 1,
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') if depth == 0 => return Some(i),
            (None, ']') => depth -= 1,
            (None, _) => {}
        }
        i += 1;
    }
    None
}

/// Parses the text between `[` and `]`.
fn parse_bracket(content: &str, depth: usize) -> Option<Segment> {
    let content = content.trim();
    if let Some(rest) = content.strip_prefix('?') {
        let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
        return Some(Segment::Filter(Box::new(parse_filter(inner, depth + 1)?)));
    }
    if content == "*" {
        return Some(Segment::Wildcard);
    }
    let selectors = split_top_level(content, ',')?
        .into_iter()
        .map(|item| parse_selector(item.trim()))
        .collect::<Option<Vec<_>>>()?;
    Some(Segment::Select(selectors))
}

/// Splits `text` on `separator` outside quotes and brackets; None on unbalanced quotes.
fn split_top_level(text: &str, separator: char) -> Option<Vec<&str>> {
    let mut parts = Vec::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut depth = 0usize;
    let mut start = 0;
    for (index, c) in text.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (_, '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '[' | '(') => depth += 1,
            (None, ']' | ')') => depth = depth.saturating_sub(1),
            (None, c) if c == separator && depth == 0 => {
                parts.push(text.get(start..index)?);
                start = index + c.len_utf8();
            }
            (None, _) => {}
        }
    }
    if quote.is_some() || escaped {
        return None;
    }
    parts.push(text.get(start..)?);
    Some(parts)
}

/// Parses one union member: a quoted key, an index or a slice.
fn parse_selector(item: &str) -> Option<Selector> {
    if item.starts_with(['\'', '"']) {
        return parse_quoted(item).map(Selector::Key);
    }
    let parts: Vec<&str> = item.split(':').collect();
    let number = |text: &str| -> Option<Option<i64>> {
        let text = text.trim();
        if text.is_empty() {
            Some(None)
        } else {
            text.parse::<i64>().ok().map(Some)
        }
    };
    match parts.as_slice() {
        [index] => Some(Selector::Index(number(index)??)),
        [start, end] => Some(Selector::Slice {
            start: number(start)?,
            end: number(end)?,
            step: None,
        }),
        [start, end, step] => Some(Selector::Slice {
            start: number(start)?,
            end: number(end)?,
            step: number(step)?,
        }),
        _ => None,
    }
}

/// Parses a complete single- or double-quoted string (backslash escapes the next character).
fn parse_quoted(text: &str) -> Option<String> {
    let mut chars = text.chars();
    let quote = chars.next().filter(|c| matches!(c, '\'' | '"'))?;
    let mut value = String::new();
    while let Some(c) = chars.next() {
        if c == '\\' {
            value.push(chars.next()?);
        } else if c == quote {
            return chars.next().is_none().then_some(value);
        } else {
            value.push(c);
        }
    }
    None
}

/// Parses the inside of `[?( ... )]`.
fn parse_filter(inner: &str, depth: usize) -> Option<Filter> {
    if depth > MAX_FILTER_NESTING {
        return None;
    }
    let Some((op_start, op_end)) = find_operator(inner) else {
        let left = parse_operand(inner, depth)?;
        return matches!(left, Operand::Current(_) | Operand::Root(_)).then_some(Filter {
            left,
            comparison: None,
        });
    };
    let op = match inner.get(op_start..op_end)? {
        "==" => CompareOp::Eq,
        "!=" => CompareOp::Ne,
        "<" => CompareOp::Lt,
        "<=" => CompareOp::Le,
        ">" => CompareOp::Gt,
        ">=" => CompareOp::Ge,
        _ => return None,
    };
    Some(Filter {
        left: parse_operand(inner.get(..op_start)?, depth)?,
        comparison: Some((op, parse_operand(inner.get(op_end..)?, depth)?)),
    })
}

/// Byte range of the first comparison operator outside quotes and brackets.
fn find_operator(text: &str) -> Option<(usize, usize)> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut depth = 0usize;
    let mut start: Option<usize> = None;
    for (index, c) in text.char_indices() {
        let is_op = quote.is_none() && depth == 0 && !escaped && matches!(c, '!' | '<' | '>' | '=');
        if let Some(begin) = start {
            if !is_op {
                return Some((begin, index));
            }
            continue;
        }
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (_, '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '[' | '(') => depth += 1,
            (None, ']' | ')') => depth = depth.saturating_sub(1),
            (None, _) if is_op => start = Some(index),
            (None, _) => {}
        }
    }
    start.map(|begin| (begin, text.len()))
}

/// Parses a filter operand: `@path`, `$path` or a literal.
fn parse_operand(text: &str, depth: usize) -> Option<Operand> {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix('@') {
        let chars: Vec<char> = rest.chars().collect();
        return parse_segments(&chars, depth).map(Operand::Current);
    }
    if let Some(rest) = text.strip_prefix('$') {
        let chars: Vec<char> = rest.chars().collect();
        return parse_segments(&chars, depth).map(Operand::Root);
    }
    if text.starts_with(['\'', '"']) {
        return parse_quoted(text).map(|s| Operand::Literal(Value::String(s)));
    }
    let literal = match text {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        "null" => Value::Null,
        _ => {
            if let Ok(integer) = text.parse::<i64>() {
                Value::from(integer)
            } else {
                let float = text.parse::<f64>().ok().filter(|f| f.is_finite())?;
                // Reject things Rust parses but JSONPath should not ("inf" is filtered above; "NaN" too).
                if !text.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '-' | '+' | '.')) {
                    return None;
                }
                Value::from(float)
            }
        }
    };
    Some(Operand::Literal(literal))
}

/// Applies parsed segments to the starting values, in order.
fn evaluate<'a>(root: &'a Value, start: Vec<&'a Value>, segments: &[Segment]) -> Vec<&'a Value> {
    let mut current = start;
    for segment in segments {
        if current.is_empty() {
            break;
        }
        let mut next = Vec::new();
        for value in current {
            apply(root, value, segment, &mut next);
            if next.len() >= MAX_RESULTS {
                break;
            }
        }
        next.truncate(MAX_RESULTS);
        current = next;
    }
    current
}

/// Applies one segment to one value, appending matches to `out`.
fn apply<'a>(root: &'a Value, value: &'a Value, segment: &Segment, out: &mut Vec<&'a Value>) {
    match segment {
        Segment::Field(name) => out.extend(value.get(name.as_str())),
        Segment::Wildcard => match value {
            Value::Array(items) => out.extend(items),
            Value::Object(map) => out.extend(map.values()),
            _ => {}
        },
        Segment::Recursive => {
            let mut stack = vec![value];
            while let Some(node) = stack.pop() {
                if out.len() >= MAX_RESULTS {
                    break;
                }
                out.push(node);
                match node {
                    Value::Array(items) => stack.extend(items.iter().rev()),
                    Value::Object(map) => stack.extend(map.values().rev()),
                    _ => {}
                }
            }
        }
        Segment::Select(selectors) => {
            for selector in selectors {
                select(value, selector, out);
            }
        }
        Segment::Filter(filter) => {
            if let Value::Array(items) = value {
                out.extend(
                    items
                        .iter()
                        .filter(|item| filter_matches(root, item, filter)),
                );
            }
        }
    }
}

/// Applies one union member to one value.
fn select<'a>(value: &'a Value, selector: &Selector, out: &mut Vec<&'a Value>) {
    match (selector, value) {
        (Selector::Key(key), Value::Object(map)) => out.extend(map.get(key)),
        (Selector::Index(index), Value::Array(items)) => {
            out.extend(resolve_index(*index, items.len()).and_then(|i| items.get(i)));
        }
        (Selector::Slice { start, end, step }, Value::Array(items)) => {
            let len = items.len();
            let step = step.unwrap_or(1);
            if step <= 0 {
                return;
            }
            let clamp = |bound: i64| -> usize {
                let len_i = i64::try_from(len).unwrap_or(i64::MAX);
                let bound = if bound < 0 {
                    bound.saturating_add(len_i)
                } else {
                    bound
                };
                usize::try_from(bound.clamp(0, len_i)).unwrap_or(len)
            };
            let from = start.map_or(0, clamp);
            let to = end.map_or(len, clamp);
            let stride = usize::try_from(step).unwrap_or(usize::MAX);
            if from < to {
                out.extend(
                    items
                        .get(from..to)
                        .unwrap_or_default()
                        .iter()
                        .step_by(stride),
                );
            }
        }
        _ => {}
    }
}

/// Converts a possibly negative index into an in-bounds position.
fn resolve_index(index: i64, len: usize) -> Option<usize> {
    let position = if index < 0 {
        i64::try_from(len).ok()?.checked_add(index)?
    } else {
        index
    };
    usize::try_from(position).ok().filter(|&p| p < len)
}

/// Values an operand yields for the element under test.
fn operand_values<'a>(root: &'a Value, item: &'a Value, operand: &'a Operand) -> Vec<&'a Value> {
    match operand {
        Operand::Current(segments) => evaluate(root, vec![item], segments),
        Operand::Root(segments) => evaluate(root, vec![root], segments),
        Operand::Literal(literal) => vec![literal],
    }
}

/// Whether an array element satisfies a filter.
fn filter_matches(root: &Value, item: &Value, filter: &Filter) -> bool {
    let lefts = operand_values(root, item, &filter.left);
    let Some((op, right)) = &filter.comparison else {
        return !lefts.is_empty();
    };
    let rights = operand_values(root, item, right);
    match (lefts.as_slice(), rights.as_slice()) {
        ([left], [right]) => {
            let ordering = compare_values(left, right);
            match op {
                CompareOp::Eq => ordering == Some(Ordering::Equal),
                CompareOp::Ne => ordering != Some(Ordering::Equal),
                CompareOp::Lt => ordering == Some(Ordering::Less),
                CompareOp::Le => matches!(ordering, Some(Ordering::Less | Ordering::Equal)),
                CompareOp::Gt => ordering == Some(Ordering::Greater),
                CompareOp::Ge => matches!(ordering, Some(Ordering::Greater | Ordering::Equal)),
            }
        }
        _ => false,
    }
}

/// Orders two JSON values of the same kind; None when they are not comparable.
fn compare_values(left: &Value, right: &Value) -> Option<Ordering> {
    match (left, right) {
        (Value::Number(a), Value::Number(b)) => {
            if let (Some(a), Some(b)) = (a.as_i64(), b.as_i64()) {
                Some(a.cmp(&b))
            } else if let (Some(a), Some(b)) = (a.as_u64(), b.as_u64()) {
                Some(a.cmp(&b))
            } else {
                a.as_f64()?.partial_cmp(&b.as_f64()?)
            }
        }
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
        (a, b) if a == b => Some(Ordering::Equal),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::storage::columns::CREATION_TIMESTAMP_DESCRIPTION;
    use proptest::prelude::*;
    use time::Duration;
    use time::macros::datetime;

    fn fixture() -> Value {
        json!({
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {
                "name": "w1",
                "namespace": "default",
                "creationTimestamp": "2024-01-01T11:55:00Z",
                "labels": {"app.kubernetes.io/name": "demo", "tier": "web"},
            },
            "spec": {
                "replicas": 3,
                "ratio": 0.5,
                "enabled": true,
                "nothing": null,
                "tags": ["t1", "t2"],
                "items": [
                    {"name": "a", "size": 1},
                    {"name": "b", "size": 2},
                    {"name": "c", "size": 3},
                ],
            },
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "Synced", "status": "False"},
                ],
            },
        })
    }

    #[test]
    fn json_path_table() {
        let object = fixture();
        let cases: &[(&str, Value)] = &[
            (".spec.replicas", json!([3])),
            ("{.spec.replicas}", json!([3])),
            (" { .spec.replicas } ", json!([3])),
            ("$.spec.replicas", json!([3])),
            ("{$.spec.ratio}", json!([0.5])),
            (".spec.enabled", json!([true])),
            (".spec.nothing", json!([null])),
            (".metadata.name", json!(["w1"])),
            (".spec.items[0].name", json!(["a"])),
            (".spec.items[2].name", json!(["c"])),
            (".spec.items[-1].name", json!(["c"])),
            (".spec.items[-3].name", json!(["a"])),
            (".spec.items[*].name", json!(["a", "b", "c"])),
            (".spec.items.*.size", json!([1, 2, 3])),
            (".spec.tags[*]", json!(["t1", "t2"])),
            (".spec.tags.*", json!(["t1", "t2"])),
            (".metadata.labels[*]", json!(["demo", "web"])),
            (".spec.items[0:2].name", json!(["a", "b"])),
            (".spec.items[1:].name", json!(["b", "c"])),
            (".spec.items[:-1].name", json!(["a", "b"])),
            (".spec.items[::2].name", json!(["a", "c"])),
            (".spec.items[0:100].name", json!(["a", "b", "c"])),
            (".spec.items[0,2].name", json!(["a", "c"])),
            (".spec.items[0]['name','size']", json!(["a", 1])),
            ("['spec']['replicas']", json!([3])),
            (
                ".metadata.labels['app.kubernetes.io/name']",
                json!(["demo"]),
            ),
            (
                ".metadata.labels[\"app.kubernetes.io/name\"]",
                json!(["demo"]),
            ),
            (
                ".metadata.labels.app\\.kubernetes\\.io/name",
                json!(["demo"]),
            ),
            (
                "{.metadata.labels.app\\.kubernetes\\.io/name}",
                json!(["demo"]),
            ),
            (
                ".status.conditions[?(@.type==\"Ready\")].status",
                json!(["True"]),
            ),
            (
                ".status.conditions[?(@.type=='Ready')].status",
                json!(["True"]),
            ),
            (
                ".status.conditions[?( @.type == \"Ready\" )].status",
                json!(["True"]),
            ),
            (
                ".status.conditions[?(@.type!=\"Ready\")].type",
                json!(["Synced"]),
            ),
            (
                ".status.conditions[?(@.type==\"Missing\")].status",
                json!([]),
            ),
            (".spec.items[?(@.size==2)].name", json!(["b"])),
            (".spec.items[?(@.size==2.0)].name", json!(["b"])),
            (".spec.items[?(@.size!=2)].name", json!(["a", "c"])),
            (".spec.items[?(@.size>1)].name", json!(["b", "c"])),
            (".spec.items[?(@.size<=2)].name", json!(["a", "b"])),
            (".spec.items[?(@.size)].name", json!(["a", "b", "c"])),
            (".spec.items[?(@.colour)].name", json!([])),
            (".spec.items[?(@.size==$.spec.replicas)].name", json!(["c"])),
            (".spec.tags[?(@=='t2')]", json!(["t2"])),
            (".spec.items[?(@.name==\"a\")].size", json!([1])),
            ("..name", json!(["w1", "a", "b", "c"])),
            ("..items[1].name", json!(["b"])),
            (
                "$..status",
                json!([{"conditions": [{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}]}, "True", "False"]),
            ),
            ("$", json!([object.clone()])),
            (".", json!([object.clone()])),
        ];
        for (path, expected) in cases {
            assert_eq!(
                Value::Array(json_path(&object, path)),
                *expected,
                "path {path:?}"
            );
        }
    }

    #[test]
    fn json_path_missing_paths_are_empty() {
        let object = fixture();
        for path in [
            ".spec.missing",
            ".nope.deeper.still",
            ".spec.replicas.x",
            ".spec.replicas[0]",
            ".spec.items.name",
            ".spec.items[3]",
            ".spec.items[-4]",
            ".spec.items[3:]",
            ".spec.items[2:1]",
            ".spec.items[::-1]",
            ".spec.items[::0]",
            ".metadata.labels[0]",
            ".spec.tags['t1']",
            ".spec.items[0].name.first",
            ".metadata.labels.app.kubernetes.io/name",
            ".spec[?(@.replicas==3)]",
            "..missing",
        ] {
            assert_eq!(
                json_path(&object, path),
                Vec::<Value>::new(),
                "path {path:?}"
            );
        }
        assert_eq!(json_path(&json!(null), ".a"), Vec::<Value>::new());
        assert_eq!(json_path(&json!(5), "[0]"), Vec::<Value>::new());
    }

    #[test]
    fn json_path_malformed_paths_are_empty() {
        let object = fixture();
        for path in [
            "",
            "   ",
            "{}",
            "spec.replicas",
            "{spec.replicas}",
            ".spec[",
            ".spec]",
            ".spec.items[abc]",
            ".spec.items[]",
            ".spec.items[1:2:3:4]",
            ".spec.items[0x1]",
            ".spec.items[99999999999999999999]",
            "{.spec",
            ".spec}",
            "{.spec}{.status}",
            "..",
            ".spec..",
            "...spec",
            ".spec.items[?(@.size==)]",
            ".spec.items[?(==1)]",
            ".spec.items[?(@.size<>1)]",
            ".spec.items[?(@.size===1)]",
            ".spec.items[?@.size==1]",
            ".spec.items[?(@.name==\"a)]",
            ".spec.items[?(@.name==a)]",
            ".spec.items[?(\"a\")]",
            ".metadata.labels['x]",
            ".metadata.labels['x'y]",
            ".spec\\",
            ".spec items",
            "@.spec",
            "$$",
        ] {
            assert_eq!(
                json_path(&object, path),
                Vec::<Value>::new(),
                "path {path:?}"
            );
        }
    }

    #[test]
    fn json_path_nesting_limit() {
        let object = json!({"a": [{"a": [{"b": 1}]}]});
        assert_eq!(
            json_path(&object, ".a[?(@.a[?(@.b==1)])].a[0].b"),
            vec![json!(1)]
        );
        let mut deep = String::from("@.b");
        for _ in 0..100 {
            deep = format!("@.a[?({deep})]");
        }
        assert_eq!(
            json_path(&object, &format!(".a[?({deep})]")),
            Vec::<Value>::new()
        );
    }

    #[test]
    fn human_duration_boundaries() {
        let cases: &[(Duration, &str)] = &[
            (Duration::MIN, "<invalid>"),
            (Duration::seconds(-2), "<invalid>"),
            (Duration::milliseconds(-1999), "0s"),
            (Duration::milliseconds(-1500), "0s"),
            (Duration::seconds(-1), "0s"),
            (Duration::milliseconds(-500), "0s"),
            (Duration::ZERO, "0s"),
            (Duration::milliseconds(999), "0s"),
            (Duration::seconds(1), "1s"),
            (Duration::seconds(59), "59s"),
            (Duration::seconds(60), "60s"),
            (Duration::milliseconds(119_999), "119s"),
            (Duration::seconds(120), "2m"),
            (Duration::seconds(121), "2m1s"),
            (Duration::seconds(9 * 60 + 59), "9m59s"),
            (Duration::minutes(10), "10m"),
            (Duration::seconds(10 * 60 + 30), "10m"),
            (Duration::seconds(179 * 60 + 59), "179m"),
            (Duration::minutes(180), "3h"),
            (Duration::minutes(181), "3h1m"),
            (Duration::minutes(7 * 60 + 59), "7h59m"),
            (Duration::hours(8), "8h"),
            (Duration::minutes(8 * 60 + 30), "8h"),
            (Duration::minutes(47 * 60 + 59), "47h"),
            (Duration::hours(48), "2d"),
            (Duration::hours(49), "2d1h"),
            (Duration::hours(7 * 24 + 23), "7d23h"),
            (Duration::hours(8 * 24), "8d"),
            (Duration::days(729), "729d"),
            (Duration::days(730), "2y"),
            (Duration::days(731), "2y1d"),
            (Duration::days(8 * 365 - 1), "7y364d"),
            (Duration::days(8 * 365), "8y"),
            (Duration::days(100 * 365), "100y"),
            (Duration::MAX, "292y"),
        ];
        for (duration, expected) in cases {
            assert_eq!(human_duration(*duration), *expected, "{duration:?}");
        }
    }

    fn column(name: &str, type_: &str, json_path: &str) -> PrinterColumn {
        PrinterColumn {
            name: name.into(),
            type_: type_.into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            json_path: json_path.into(),
        }
    }

    #[test]
    fn build_table_without_columns_uses_age() {
        let now = datetime!(2024-01-01 12:00:00 UTC);
        let objects = [fixture(), json!({"metadata": {"name": "bare"}})];
        let table = build_table(&objects, &[], json!({"resourceVersion": "42"}), now);
        assert_eq!(
            table,
            json!({
                "kind": "Table",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": "42"},
                "columnDefinitions": [
                    {"name": "Name", "type": "string", "format": "name", "description": NAME_DESCRIPTION, "priority": 0},
                    {"name": "Age", "type": "date", "format": "", "description": CREATION_TIMESTAMP_DESCRIPTION, "priority": 0},
                ],
                "rows": [
                    {
                        "cells": ["w1", "5m"],
                        "object": {
                            "kind": "PartialObjectMetadata",
                            "apiVersion": "meta.k8s.io/v1",
                            "metadata": fixture()["metadata"].clone(),
                        },
                    },
                    {
                        "cells": ["bare", null],
                        "object": {
                            "kind": "PartialObjectMetadata",
                            "apiVersion": "meta.k8s.io/v1",
                            "metadata": {"name": "bare"},
                        },
                    },
                ],
            })
        );
        // Key order is kept for serialisation.
        let keys: Vec<&String> = table.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "kind",
                "apiVersion",
                "metadata",
                "columnDefinitions",
                "rows"
            ]
        );
    }

    #[test]
    fn build_table_with_every_column_type() {
        let now = datetime!(2024-01-03 12:00:00 UTC);
        let mut object = fixture();
        object["status"]["lastSeen"] = json!("2024-01-03T11:59:30.5Z");
        object["status"]["badDate"] = json!("yesterday");
        object["spec"]["float"] = json!(2.9);
        let columns = vec![
            PrinterColumn {
                name: "Replicas".into(),
                type_: "integer".into(),
                format: "int32".into(),
                description: "Desired replicas".into(),
                priority: 0,
                json_path: ".spec.replicas".into(),
            },
            column("Truncated", "integer", ".spec.float"),
            column("WrongInt", "integer", ".spec.tags"),
            column("Ratio", "number", ".spec.ratio"),
            column("IntAsNumber", "number", ".spec.replicas"),
            column("Enabled", "boolean", ".spec.enabled"),
            column("WrongBool", "boolean", ".metadata.name"),
            column(
                "Ready",
                "string",
                ".status.conditions[?(@.type==\"Ready\")].status",
            ),
            column("ReplicasText", "string", ".spec.replicas"),
            column("Labels", "string", ".metadata.labels"),
            column("Tags", "string", ".spec.tags[*]"),
            column("Sizes", "integer", ".spec.items[*].size"),
            column("Null", "string", ".spec.nothing"),
            column("Missing", "string", ".spec.missing"),
            column("Malformed", "string", ".spec["),
            column("Age", "date", ".metadata.creationTimestamp"),
            column("Seen", "date", ".status.lastSeen"),
            column("BadDate", "date", ".status.badDate"),
            column("NotADate", "date", ".spec.replicas"),
            column("Unknown", "object", ".spec"),
        ];
        let mut wide = column("Wide", "string", "{.metadata.namespace}");
        wide.priority = 1;
        let mut all = columns.clone();
        all.push(wide);
        let table = build_table(&[object.clone()], &all, json!({}), now);
        let definitions = table["columnDefinitions"].as_array().unwrap();
        assert_eq!(definitions.len(), all.len() + 1);
        assert_eq!(
            definitions[1],
            json!({"name": "Replicas", "type": "integer", "format": "int32", "description": "Desired replicas", "priority": 0})
        );
        assert_eq!(
            definitions[2],
            json!({
                "name": "Truncated", "type": "integer", "format": "",
                "description": "Custom resource definition column (in JSONPath format): .spec.float",
                "priority": 0,
            })
        );
        assert_eq!(definitions.last().unwrap()["priority"], json!(1));
        let rows = table["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(
            rows[0]["cells"],
            json!([
                "w1",
                3,
                2,
                null,
                0.5,
                3,
                true,
                null,
                "True",
                "3",
                "{\"app.kubernetes.io/name\":\"demo\",\"tier\":\"web\"}",
                "t1,t2",
                "1,2,3",
                null,
                null,
                null,
                "2d",
                "29s",
                "yesterday",
                null,
                null,
                "default",
            ])
        );
        assert_eq!(
            rows[0]["object"],
            json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": object["metadata"].clone(),
            })
        );
    }

    #[test]
    fn build_table_edge_objects() {
        let now = datetime!(2024-01-01 00:00:00 UTC);
        let objects = [
            json!({}),
            json!(null),
            json!({"metadata": {"creationTimestamp": "2025-01-01T00:00:00Z"}}),
        ];
        let table = build_table(&objects, &[], json!({"continue": "x"}), now);
        let rows = table["rows"].as_array().unwrap();
        assert_eq!(rows[0]["cells"], json!(["", null]));
        assert_eq!(rows[0]["object"]["metadata"], json!({}));
        assert_eq!(rows[1]["cells"], json!(["", null]));
        assert_eq!(rows[2]["cells"], json!(["", "<invalid>"]));
        let empty = build_table(&[], &[], json!({}), now);
        assert_eq!(empty["rows"], json!([]));
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            "[a-c.]{0,3}".prop_map(Value::from),
            "20[0-9]{2}-0[1-9]-1[0-9]T1[0-9]:[0-5][0-9]:[0-5][0-9]Z".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::vec(("[a-c.]{1,2}", inner), 0..5)
                    .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
            ]
        })
    }

    fn arb_path() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            "[.\\[\\]*?@()='\"\\\\a-c0-9 ,:${}!<>-]{0,40}",
            prop::collection::vec(
                prop_oneof![
                    Just(".".to_owned()),
                    Just("..".to_owned()),
                    "\\.[a-c]{1,2}",
                    Just("[*]".to_owned()),
                    "\\[-?[0-9]{1,2}\\]",
                    "\\[-?[0-9]?:-?[0-9]?(:-?[0-9])?\\]",
                    "\\['[a-c.]{0,2}'\\]",
                    "\\[\\?\\(@\\.[a-c]{1,2}(==|!=|<|>=)('[a-c]'|[0-9]|@\\.[a-c])\\)\\]",
                    "\\[\\?\\(@(\\.[a-c])?\\)\\]",
                    "\\\\.",
                ],
                0..8,
            )
            .prop_map(|parts| parts.concat()),
        ]
    }

    proptest! {
        #[test]
        fn json_path_never_panics(object in arb_json(), path in arb_path()) {
            let matches = json_path(&object, &path);
            prop_assert!(matches.len() <= MAX_RESULTS);
            let wrapped = json_path(&object, &format!("{{{path}}}"));
            prop_assert!(wrapped.len() <= MAX_RESULTS);
        }

        #[test]
        fn build_table_never_panics(
            objects in prop::collection::vec(arb_json(), 0..4),
            specs in prop::collection::vec(
                (prop::sample::select(vec!["string", "integer", "number", "boolean", "date", "other"]), arb_path()),
                0..4,
            ),
            offset in any::<i32>(),
        ) {
            let columns: Vec<PrinterColumn> = specs
                .iter()
                .map(|(type_, path)| column("C", type_, path))
                .collect();
            let now = datetime!(2024-06-01 00:00:00 UTC) + Duration::seconds(i64::from(offset));
            let table = build_table(&objects, &columns, json!({}), now);
            let rows = table["rows"].as_array().unwrap();
            prop_assert_eq!(rows.len(), objects.len());
            let width = columns.len().max(1) + 1;
            for row in rows {
                prop_assert_eq!(row["cells"].as_array().unwrap().len(), width);
            }
        }

        #[test]
        fn human_duration_never_panics(seconds in any::<i64>(), nanos in any::<i32>()) {
            let text = human_duration(Duration::new(seconds, nanos));
            prop_assert!(!text.is_empty());
        }
    }
}
