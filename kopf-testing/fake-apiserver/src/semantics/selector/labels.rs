//! Label selectors (`app=web,tier in (a,b),!legacy`): the lexer and parser of apimachinery's
//! grammar, and matching against an object's labels.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::error::SelectorError;
use super::validation::{invalid, label_value_error, qualified_name_errors};

/// A parsed label selector: a conjunction of requirements (empty = matches everything).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector {
    /// All requirements; an object matches when it satisfies every one.
    pub(super) requirements: Vec<Requirement>,
}

/// One label requirement: a key and what must hold for its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Requirement {
    /// The label key (a validated qualified name).
    pub(super) key: String,
    /// The operator with its operand(s).
    pub(super) op: Operator,
}

/// A label requirement operator with its validated operand(s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Operator {
    /// `key`: the label is present.
    Exists,
    /// `!key`: the label is absent.
    DoesNotExist,
    /// `key=value` / `key==value`: present with exactly this value.
    Equals(String),
    /// `key!=value`: absent, or present with another value.
    NotEquals(String),
    /// `key in (a,b)`: present with one of these values.
    In(BTreeSet<String>),
    /// `key notin (a,b)`: absent, or present with none of these values.
    NotIn(BTreeSet<String>),
    /// `key>n`: present with an integer value greater than n.
    GreaterThan(i64),
    /// `key<n`: present with an integer value less than n.
    LessThan(i64),
}

impl LabelSelector {
    /// Parses a label selector such as `app=web,tier in (a,b),!legacy`; empty input selects everything.
    pub(crate) fn parse(input: &str) -> Result<Self, SelectorError> {
        let mut parser = Parser {
            tokens: lex(input),
            pos: 0,
        };
        let mut requirements = Vec::new();
        loop {
            let tok = parser.peek();
            if tok.ident().is_some() || tok == Tok::Bang {
                requirements.push(parser.requirement().map_err(SelectorError::Requirement)?);
                match parser.next() {
                    Tok::End => break,
                    Tok::Comma => {
                        let after = parser.peek();
                        if after.ident().is_none() && after != Tok::Bang {
                            return Err(unexpected(after, "identifier after ','"));
                        }
                    }
                    other => return Err(unexpected(other, "',' or 'end of string'")),
                }
            } else if tok == Tok::End {
                break;
            } else {
                return Err(unexpected(tok, "!, identifier, or 'end of string'"));
            }
        }
        Ok(Self { requirements })
    }

    /// True when the selector has no requirements and so matches every object.
    pub(crate) fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// labels = the object's metadata.labels (None or a JSON object whose values are strings)
    ///
    /// Non-string label values are compared as their JSON text (`null` as the empty string).
    pub(crate) fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// The selector a `metav1.LabelSelector` object describes (`matchLabels` and
    /// `matchExpressions`, as apimachinery's `LabelSelectorAsSelector` reads them); `None` for
    /// a missing selector (which selects nothing) or one that is malformed.
    pub(crate) fn from_object(selector: &Value) -> Option<LabelSelector> {
        selector.as_object()?;
        let mut requirements = Vec::new();
        for (key, value) in selector["matchLabels"].as_object().into_iter().flatten() {
            let op = Operator::Equals(value.as_str()?.to_string());
            requirements.push(Requirement {
                key: key.clone(),
                op,
            });
        }
        for expression in selector["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let values = || -> BTreeSet<String> {
                expression["values"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            };
            let op = match expression["operator"].as_str()? {
                "In" => Operator::In(values()),
                "NotIn" => Operator::NotIn(values()),
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                _ => return None,
            };
            let key = expression["key"].as_str()?.to_string();
            requirements.push(Requirement { key, op });
        }
        Some(LabelSelector { requirements })
    }
}

impl Requirement {
    /// Whether the given labels satisfy this requirement (apimachinery `Requirement.Matches`).
    fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        let value = labels.and_then(|m| m.get(&self.key)).map(value_text);
        let value = value.as_deref();
        match &self.op {
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::Equals(want) => value == Some(want.as_str()),
            Operator::NotEquals(want) => value != Some(want.as_str()),
            Operator::In(set) => value.is_some_and(|v| set.contains(v)),
            Operator::NotIn(set) => value.is_none_or(|v| !set.contains(v)),
            Operator::GreaterThan(n) => parse_int(value).is_some_and(|v| v > *n),
            Operator::LessThan(n) => parse_int(value).is_some_and(|v| v < *n),
        }
    }
}

/// Parses a label value as a base-10 `i64` (like Go's `strconv.ParseInt(s, 10, 64)`).
fn parse_int(value: Option<&str>) -> Option<i64> {
    value.and_then(|v| v.parse::<i64>().ok())
}

/// Renders a JSON value as the string a selector compares against (`null` = "").
pub(super) fn value_text(value: &Value) -> Cow<'_, str> {
    match value {
        Value::String(s) => Cow::Borrowed(s.as_str()),
        Value::Null => Cow::Borrowed(""),
        other => Cow::Owned(other.to_string()),
    }
}

/// A lexer token of the label selector grammar, borrowing identifiers from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok<'a> {
    /// End of the input.
    End,
    /// A key or value.
    Ident(&'a str),
    /// The keyword `in`.
    In,
    /// The keyword `notin`.
    NotIn,
    /// `,`
    Comma,
    /// `(`
    Open,
    /// `)`
    Close,
    /// `!`
    Bang,
    /// `=`
    Eq,
    /// `==`
    DoubleEq,
    /// `!=`
    NotEq,
    /// `>`
    Gt,
    /// `<`
    Lt,
}

impl<'a> Tok<'a> {
    /// The token as written in the input ("" for the end of the string).
    fn literal(self) -> &'a str {
        match self {
            Tok::End => "",
            Tok::Ident(s) => s,
            Tok::In => "in",
            Tok::NotIn => "notin",
            Tok::Comma => ",",
            Tok::Open => "(",
            Tok::Close => ")",
            Tok::Bang => "!",
            Tok::Eq => "=",
            Tok::DoubleEq => "==",
            Tok::NotEq => "!=",
            Tok::Gt => ">",
            Tok::Lt => "<",
        }
    }

    /// The identifier text where keys/values are expected (`in`/`notin` count as identifiers there).
    fn ident(self) -> Option<&'a str> {
        match self {
            Tok::Ident(s) => Some(s),
            Tok::In => Some("in"),
            Tok::NotIn => Some("notin"),
            _ => None,
        }
    }
}

/// Whitespace separating label selector tokens (as apimachinery: space, tab, CR, LF).
fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Characters that end an identifier and start an operator token.
fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits a label selector into tokens; the result always ends with `Tok::End`.
fn lex(input: &str) -> Vec<Tok<'_>> {
    let bytes = input.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    loop {
        while bytes.get(i).copied().is_some_and(is_whitespace) {
            i += 1;
        }
        let Some(&b) = bytes.get(i) else {
            tokens.push(Tok::End);
            return tokens;
        };
        if is_special(b) {
            let (tok, len) = match (b, bytes.get(i + 1).copied()) {
                (b'=', Some(b'=')) => (Tok::DoubleEq, 2),
                (b'!', Some(b'=')) => (Tok::NotEq, 2),
                (b'=', _) => (Tok::Eq, 1),
                (b'!', _) => (Tok::Bang, 1),
                (b'(', _) => (Tok::Open, 1),
                (b')', _) => (Tok::Close, 1),
                (b',', _) => (Tok::Comma, 1),
                (b'>', _) => (Tok::Gt, 1),
                _ => (Tok::Lt, 1),
            };
            tokens.push(tok);
            i += len;
        } else {
            let start = i;
            while bytes
                .get(i)
                .copied()
                .is_some_and(|b| !is_special(b) && !is_whitespace(b))
            {
                i += 1;
            }
            // Both ends sit next to ASCII bytes (or the ends of the input), so they are char boundaries.
            let word = input.get(start..i).unwrap_or_default();
            tokens.push(match word {
                "in" => Tok::In,
                "notin" => Tok::NotIn,
                _ => Tok::Ident(word),
            });
        }
    }
}

/// Builds the error for an unexpected token outside of any requirement.
fn unexpected(tok: Tok<'_>, expected: &'static str) -> SelectorError {
    SelectorError::UnexpectedToken {
        found: tok.literal().to_owned(),
        expected,
    }
}

/// Formats an unexpected-token message inside a requirement.
fn found(tok: Tok<'_>, expected: &str) -> String {
    format!("found '{}', expected: {expected}", tok.literal())
}

/// Joins several errors like apimachinery's aggregate error (deduplicated, `[a, b]` when many).
fn aggregate(errors: Vec<String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errors {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    if seen.len() == 1 {
        seen.concat()
    } else {
        format!("[{}]", seen.join(", "))
    }
}

/// Recursive-descent parser over the token list (mirrors apimachinery's `labels.Parser`).
struct Parser<'a> {
    /// All tokens, ending with `Tok::End`.
    tokens: Vec<Tok<'a>>,
    /// Index of the next token.
    pos: usize,
}

impl<'a> Parser<'a> {
    /// The next token, without consuming it.
    fn peek(&self) -> Tok<'a> {
        self.tokens.get(self.pos).copied().unwrap_or(Tok::End)
    }

    /// Consumes and returns the next token (stays on `Tok::End` once reached).
    fn next(&mut self) -> Tok<'a> {
        let tok = self.peek();
        if self.pos + 1 < self.tokens.len() {
            self.pos += 1;
        }
        tok
    }

    /// Parses one requirement; the error is the text after "unable to parse requirement: ".
    fn requirement(&mut self) -> Result<Requirement, String> {
        let mut tok = self.next();
        let negated = tok == Tok::Bang;
        if negated {
            tok = self.next();
        }
        let Some(key) = tok.ident() else {
            return Err(found(tok, "identifier"));
        };
        let key_errors = qualified_name_errors(key);
        if !key_errors.is_empty() {
            // The parser checks keys before it knows their requirement: with no field path,
            // which Go writes `<nil>`.
            return Err(invalid("<nil>", key, &key_errors.join("; ")));
        }
        let key = key.to_owned();
        if negated {
            return Ok(Requirement {
                key,
                op: Operator::DoesNotExist,
            });
        }
        if matches!(self.peek(), Tok::End | Tok::Comma) {
            return Ok(Requirement {
                key,
                op: Operator::Exists,
            });
        }
        let op_tok = self.next();
        let op = match op_tok {
            Tok::In | Tok::NotIn => {
                let values = self.value_set()?;
                let errors = values
                    .iter()
                    .enumerate()
                    .filter_map(|(i, v)| label_value_error(&key, i, v))
                    .collect::<Vec<_>>();
                if !errors.is_empty() {
                    return Err(aggregate(errors));
                }
                if op_tok == Tok::In {
                    Operator::In(values)
                } else {
                    Operator::NotIn(values)
                }
            }
            Tok::Eq | Tok::DoubleEq | Tok::NotEq | Tok::Gt | Tok::Lt => {
                let value = self.exact_value()?;
                let mut errors = Vec::new();
                let number = if matches!(op_tok, Tok::Gt | Tok::Lt) {
                    let number = value.parse::<i64>().ok();
                    if number.is_none() {
                        errors.push(invalid(
                            "values[0]",
                            &value,
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                    number
                } else {
                    None
                };
                errors.extend(label_value_error(&key, 0, &value));
                if !errors.is_empty() {
                    return Err(aggregate(errors));
                }
                match (op_tok, number) {
                    (Tok::Gt, Some(n)) => Operator::GreaterThan(n),
                    (Tok::Lt, Some(n)) => Operator::LessThan(n),
                    (Tok::NotEq, _) => Operator::NotEquals(value),
                    _ => Operator::Equals(value),
                }
            }
            other => return Err(found(other, "in, notin, =, ==, !=, gt, lt")),
        };
        Ok(Requirement { key, op })
    }

    /// Parses `( v1, v2, ... )`; `()` and empty members stand for the empty value.
    fn value_set(&mut self) -> Result<BTreeSet<String>, String> {
        let open = self.next();
        if open != Tok::Open {
            // The one message of apimachinery's parser without a comma.
            return Err(format!("found '{}' expected: '('", open.literal()));
        }
        let first = self.peek();
        if first == Tok::Close {
            self.next();
            return Ok(BTreeSet::from([String::new()]));
        }
        if first.ident().is_none() && first != Tok::Comma {
            return Err(found(first, "',', ')' or identifier"));
        }
        let values = self.identifiers_list()?;
        let close = self.next();
        if close != Tok::Close {
            return Err(found(close, "')'"));
        }
        Ok(values)
    }

    /// Parses the comma-separated members of a value set, stopping before `)`.
    fn identifiers_list(&mut self) -> Result<BTreeSet<String>, String> {
        let mut values = BTreeSet::new();
        loop {
            let tok = self.next();
            if let Some(value) = tok.ident() {
                values.insert(value.to_owned());
                match self.peek() {
                    Tok::Comma => continue,
                    Tok::Close => return Ok(values),
                    other => return Err(found(other, "',' or ')'")),
                }
            } else if tok == Tok::Comma {
                if values.is_empty() {
                    values.insert(String::new());
                }
                match self.peek() {
                    Tok::Close => {
                        values.insert(String::new());
                        return Ok(values);
                    }
                    Tok::Comma => {
                        self.next();
                        values.insert(String::new());
                    }
                    _ => {}
                }
            } else {
                return Err(found(tok, "',', or identifier"));
            }
        }
    }

    /// Parses the single value after `=`, `==`, `!=`, `>` or `<` (nothing = the empty value).
    fn exact_value(&mut self) -> Result<String, String> {
        if matches!(self.peek(), Tok::End | Tok::Comma) {
            return Ok(String::new());
        }
        let tok = self.next();
        tok.ident()
            .map(str::to_owned)
            .ok_or_else(|| found(tok, "identifier"))
    }
}
