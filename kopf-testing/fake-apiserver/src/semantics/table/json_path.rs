//! A Kubernetes-style JSONPath subset, as printer columns and the `scale` subresource use it:
//! fields, wildcards, recursive descent, index and key unions, slices and filters, optionally
//! in braces (`{.spec.replicas}`).

use std::cmp::Ordering;

use serde_json::Value;

/// Maximum nesting of filter expressions inside a JSONPath; deeper paths are malformed.
const MAX_FILTER_NESTING: usize = 16;

/// Maximum number of intermediate or final JSONPath matches kept (guards against blow-up).
pub(super) const MAX_RESULTS: usize = 10_000;

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

/// One step of a parsed JSONPath.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Segment {
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
pub(super) enum Selector {
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
pub(super) struct Filter {
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
pub(super) fn parse_path(path: &str) -> Option<Vec<Segment>> {
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
pub(super) fn evaluate<'a>(
    root: &'a Value,
    start: Vec<&'a Value>,
    segments: &[Segment],
) -> Vec<&'a Value> {
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
