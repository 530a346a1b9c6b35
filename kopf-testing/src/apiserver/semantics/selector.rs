//! Kubernetes label and field selectors, parsed and matched the way k8s.io/apimachinery does.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// Why a selector string was rejected; `Display` is the message a client sees in a 400 BadRequest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SelectorError {
    /// A label selector token is not allowed where it appears.
    #[error("found '{found}', expected: {expected}")]
    UnexpectedToken {
        /// The offending token as written ('' for the end of the string).
        found: String,
        /// What the grammar allows at that point.
        expected: &'static str,
    },
    /// One requirement of a label selector is malformed (key, operator, values).
    #[error("unable to parse requirement: {0}")]
    Requirement(String),
    /// A field selector term has no `=`, `==` or `!=` operator.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    FieldTerm {
        /// The whole field selector.
        selector: String,
        /// The term that could not be understood.
        term: String,
    },
    /// A field selector value has a backslash escape other than `\\`, `\,` or `\=`.
    #[error("invalid field selector: invalid escape sequence: {0}")]
    InvalidEscape(String),
    /// A field selector value has a `,` or `=` that is not escaped.
    #[error("invalid field selector: unescaped character in value: '{0}'")]
    UnescapedChar(char),
}

// ---------------------------------------------------------------------------
// Label selectors
// ---------------------------------------------------------------------------

/// A parsed label selector: a conjunction of requirements (empty = matches everything).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector {
    /// All requirements; an object matches when it satisfies every one.
    requirements: Vec<Requirement>,
}

/// One label requirement: a key and what must hold for its value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    /// The label key (a validated qualified name).
    key: String,
    /// The operator with its operand(s).
    op: Operator,
}

/// A label requirement operator with its validated operand(s).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Operator {
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
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// labels = the object's metadata.labels (None or a JSON object whose values are strings)
    ///
    /// Non-string label values are compared as their JSON text (`null` as the empty string).
    pub(crate) fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
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
fn value_text(value: &Value) -> Cow<'_, str> {
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

/// Formats a field validation error like apimachinery's `field.Invalid(path, value, detail)`.
fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {value:?}: {detail}")
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
            return Err(invalid("key", key, &key_errors.join("; ")));
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
            return Err(found(open, "'('"));
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

/// Pattern text of a qualified name, quoted in validation messages.
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
/// Rule of a qualified name, quoted in validation messages.
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
/// Rule of a label value, quoted in validation messages.
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
/// Pattern text of a label value, quoted in validation messages.
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
/// Rule of a DNS-1123 subdomain, quoted in validation messages.
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
/// Pattern text of a DNS-1123 subdomain, quoted in validation messages.
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
/// Maximum length of a label value and of a qualified name's name part.
const MAX_NAME_LEN: usize = 63;
/// Maximum length of a qualified name's DNS subdomain prefix.
const MAX_PREFIX_LEN: usize = 253;

/// Formats a pattern failure like apimachinery's `validation.RegexError`.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let examples = examples
        .iter()
        .map(|e| format!("'{e}', "))
        .collect::<Vec<_>>()
        .join(" or ");
    format!("{msg} (e.g. {examples}regex used for validation is '{fmt}')")
}

/// Formats a length failure like apimachinery's `validation.MaxLenError`.
fn max_len_error(max: usize) -> String {
    format!("must be no more than {max} characters")
}

/// True for `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]` (a non-empty name or label value).
fn is_qualified_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// True for a DNS-1123 subdomain: dot-separated labels of `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let bytes = label.as_bytes();
        let lower_alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        match (bytes.first(), bytes.last()) {
            (Some(first), Some(last)) => {
                lower_alnum(first)
                    && lower_alnum(last)
                    && bytes.iter().all(|b| lower_alnum(b) || *b == b'-')
            }
            _ => false,
        }
    })
}

/// Validation messages for a label key (apimachinery `validation.IsQualifiedName`); empty = valid.
fn qualified_name_errors(key: &str) -> Vec<String> {
    let name_examples = ["MyName", "my.name", "123-abc"];
    let mut errors = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_owned());
            } else {
                if prefix.len() > MAX_PREFIX_LEN {
                    errors.push(format!("prefix part {}", max_len_error(MAX_PREFIX_LEN)));
                }
                if !is_dns1123_subdomain(prefix) {
                    errors.push(format!(
                        "prefix part {}",
                        regex_error(
                            DNS1123_SUBDOMAIN_MSG,
                            DNS1123_SUBDOMAIN_FMT,
                            &["example.com"]
                        )
                    ));
                }
            }
            *name
        }
        _ => {
            errors.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &name_examples)
            ));
            return errors;
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > MAX_NAME_LEN {
        errors.push(format!("name part {}", max_len_error(MAX_NAME_LEN)));
    }
    if !is_qualified_name_part(name) {
        errors.push(format!(
            "name part {}",
            regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &name_examples)
        ));
    }
    errors
}

/// The validation error for value number `index` of `key`'s requirement, if the value is invalid.
fn label_value_error(key: &str, index: usize, value: &str) -> Option<String> {
    let mut errors = Vec::new();
    if value.len() > MAX_NAME_LEN {
        errors.push(max_len_error(MAX_NAME_LEN));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errors.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    (!errors.is_empty()).then(|| {
        invalid(
            &format!("values[{index}][{key}]"),
            value,
            &errors.join("; "),
        )
    })
}

// ---------------------------------------------------------------------------
// Field selectors
// ---------------------------------------------------------------------------

/// A parsed field selector: a conjunction of `path=value` / `path!=value` terms (empty = everything).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector {
    /// All terms; an object matches when it satisfies every one.
    terms: Vec<FieldTerm>,
}

/// One field selector term.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    /// The dotted field path, exactly as written (e.g. `metadata.name`).
    field: String,
    /// The unescaped value to compare with.
    value: String,
    /// True for `!=`, false for `=` and `==`.
    negated: bool,
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
    #[cfg(test)]
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

/// The string form of the value at a dotted path: missing or `null` = "", strings as-is, others as JSON text.
fn field_text<'a>(object: &'a Value, path: &str) -> Cow<'a, str> {
    let mut current = object;
    for segment in path.split('.') {
        match current.as_object().and_then(|m| m.get(segment)) {
            Some(next) => current = next,
            None => return Cow::Borrowed(""),
        }
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

/// Table tests of parsing and matching, plus property tests.
#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// An optional labels map, as `LabelSelector::matches` takes it.
    type Labels<'a> = Option<&'a Map<String, Value>>;

    /// Builds a labels map from pairs.
    fn labels(pairs: &[(&str, &str)]) -> Map<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
            .collect()
    }

    /// Parses a label selector that must be valid.
    fn sel(s: &str) -> LabelSelector {
        match LabelSelector::parse(s) {
            Ok(sel) => sel,
            Err(e) => panic!("{s:?} should parse: {e}"),
        }
    }

    /// Escapes a field selector value like apimachinery's `fields.EscapeValue`.
    fn escape(value: &str) -> String {
        value
            .replace('\\', "\\\\")
            .replace(',', "\\,")
            .replace('=', "\\=")
    }

    /// Shorthand for a value set.
    fn set(values: &[&str]) -> BTreeSet<String> {
        values.iter().map(|v| (*v).to_owned()).collect()
    }

    /// Shorthand for a requirement.
    fn req(key: &str, op: Operator) -> Requirement {
        Requirement {
            key: key.to_owned(),
            op,
        }
    }

    /// Every operator and the token/whitespace variants parse to the expected requirements.
    #[test]
    fn label_parse_ok() {
        use Operator::*;
        let cases: Vec<(&str, Vec<Requirement>)> = vec![
            ("", vec![]),
            ("  \t\n ", vec![]),
            ("a", vec![req("a", Exists)]),
            ("!a", vec![req("a", DoesNotExist)]),
            (" ! a ", vec![req("a", DoesNotExist)]),
            ("a=b", vec![req("a", Equals("b".into()))]),
            ("a==b", vec![req("a", Equals("b".into()))]),
            ("a!=b", vec![req("a", NotEquals("b".into()))]),
            ("a=", vec![req("a", Equals(String::new()))]),
            ("a!=", vec![req("a", NotEquals(String::new()))]),
            ("a in (b,c)", vec![req("a", In(set(&["b", "c"])))]),
            ("a in(b)", vec![req("a", In(set(&["b"])))]),
            ("a notin (b, c)", vec![req("a", NotIn(set(&["b", "c"])))]),
            ("a notin(b)", vec![req("a", NotIn(set(&["b"])))]),
            ("a in ()", vec![req("a", In(set(&[""])))]),
            ("a in (,b)", vec![req("a", In(set(&["", "b"])))]),
            ("a in (b,)", vec![req("a", In(set(&["", "b"])))]),
            ("a in (b,,c)", vec![req("a", In(set(&["", "b", "c"])))]),
            ("a in (,)", vec![req("a", In(set(&[""])))]),
            ("a in (b,b)", vec![req("a", In(set(&["b"])))]),
            ("a>5", vec![req("a", GreaterThan(5))]),
            ("a < 10", vec![req("a", LessThan(10))]),
            ("a>0005", vec![req("a", GreaterThan(5))]),
            (
                " a = b , c in ( d , e ) , !f ,g",
                vec![
                    req("a", Equals("b".into())),
                    req("c", In(set(&["d", "e"]))),
                    req("f", DoesNotExist),
                    req("g", Exists),
                ],
            ),
            (
                "example.com/app=My_value-1.x",
                vec![req("example.com/app", Equals("My_value-1.x".into()))],
            ),
            ("in=notin", vec![req("in", Equals("notin".into()))]),
            (
                "in in (in, notin)",
                vec![req("in", In(set(&["in", "notin"])))],
            ),
            ("notin", vec![req("notin", Exists)]),
            (
                "a=b,a=c",
                vec![req("a", Equals("b".into())), req("a", Equals("c".into()))],
            ),
            ("A_1.b-2", vec![req("A_1.b-2", Exists)]),
        ];
        for (input, expected) in cases {
            assert_eq!(sel(input).requirements, expected, "input {input:?}");
            assert_eq!(
                sel(input).is_empty(),
                expected.is_empty(),
                "input {input:?}"
            );
        }
    }

    /// Malformed label selectors are rejected with apimachinery-like messages.
    #[test]
    fn label_parse_errors() {
        let req = "unable to parse requirement: ";
        let ops = "in, notin, =, ==, !=, gt, lt";
        let value_rule = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
        let name_rule = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
        let long = "x".repeat(64);
        let cases: Vec<(String, String)> = vec![
            (
                "a,".into(),
                "found '', expected: identifier after ','".into(),
            ),
            (
                "a,,b".into(),
                "found ',', expected: identifier after ','".into(),
            ),
            (
                ",".into(),
                "found ',', expected: !, identifier, or 'end of string'".into(),
            ),
            (
                "=a".into(),
                "found '=', expected: !, identifier, or 'end of string'".into(),
            ),
            (
                "(a)".into(),
                "found '(', expected: !, identifier, or 'end of string'".into(),
            ),
            ("a b".into(), format!("{req}found 'b', expected: {ops}")),
            ("a!b".into(), format!("{req}found '!', expected: {ops}")),
            ("a (b)".into(), format!("{req}found '(', expected: {ops}")),
            ("a in".into(), format!("{req}found '', expected: '('")),
            ("a notin b".into(), format!("{req}found 'b', expected: '('")),
            (
                "a in (b".into(),
                format!("{req}found '', expected: ',' or ')'"),
            ),
            (
                "a in (b,c".into(),
                format!("{req}found '', expected: ',' or ')'"),
            ),
            (
                "a in (".into(),
                format!("{req}found '', expected: ',', ')' or identifier"),
            ),
            (
                "a in (=)".into(),
                format!("{req}found '=', expected: ',', ')' or identifier"),
            ),
            (
                "a in (b =)".into(),
                format!("{req}found '=', expected: ',' or ')'"),
            ),
            (
                "a in (b c)".into(),
                format!("{req}found 'c', expected: ',' or ')'"),
            ),
            (
                "a in (,=)".into(),
                format!("{req}found '=', expected: ',', or identifier"),
            ),
            (
                "a in (,,)".into(),
                format!("{req}found ')', expected: ',', or identifier"),
            ),
            (
                "a in (b))".into(),
                "found ')', expected: ',' or 'end of string'".into(),
            ),
            ("!".into(), format!("{req}found '', expected: identifier")),
            (
                "!!a".into(),
                format!("{req}found '!', expected: identifier"),
            ),
            (
                "!=a".into(),
                "found '!=', expected: !, identifier, or 'end of string'".into(),
            ),
            (
                "!a=b".into(),
                "found '=', expected: ',' or 'end of string'".into(),
            ),
            (
                "a=b=c".into(),
                "found '=', expected: ',' or 'end of string'".into(),
            ),
            (
                "a=b c".into(),
                "found 'c', expected: ',' or 'end of string'".into(),
            ),
            (
                "a=(b)".into(),
                format!("{req}found '(', expected: identifier"),
            ),
            (
                "a==!b".into(),
                format!("{req}found '!', expected: identifier"),
            ),
            (
                "a>=1".into(),
                format!("{req}found '=', expected: identifier"),
            ),
            (
                "a>b".into(),
                format!(
                    "{req}values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value must be an integer"
                ),
            ),
            (
                "a<".into(),
                format!(
                    "{req}values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, the value must be an integer"
                ),
            ),
            (
                "a>99999999999999999999".into(),
                format!(
                    "{req}values[0]: Invalid value: \"99999999999999999999\": for 'Gt', 'Lt' operators, the value must be an integer"
                ),
            ),
            (
                "a>-1".into(),
                format!("{req}values[0][a]: Invalid value: \"-1\": {value_rule}"),
            ),
            (
                "a>b.".into(),
                format!(
                    "{req}[values[0]: Invalid value: \"b.\": for 'Gt', 'Lt' operators, the value must be an integer, values[0][a]: Invalid value: \"b.\": {value_rule}]"
                ),
            ),
            (
                "a=b$".into(),
                format!("{req}values[0][a]: Invalid value: \"b$\": {value_rule}"),
            ),
            (
                "a!=-b".into(),
                format!("{req}values[0][a]: Invalid value: \"-b\": {value_rule}"),
            ),
            (
                format!("a={long}"),
                format!(
                    "{req}values[0][a]: Invalid value: \"{long}\": must be no more than 63 characters"
                ),
            ),
            (
                format!("a={long}-"),
                format!(
                    "{req}values[0][a]: Invalid value: \"{long}-\": must be no more than 63 characters; {value_rule}"
                ),
            ),
            (
                "a in (ok,-b,c_)".into(),
                format!(
                    "{req}[values[0][a]: Invalid value: \"-b\": {value_rule}, values[1][a]: Invalid value: \"c_\": {value_rule}]"
                ),
            ),
            (
                "a$b=c".into(),
                format!("{req}key: Invalid value: \"a$b\": name part {name_rule}"),
            ),
            (
                "-a".into(),
                format!("{req}key: Invalid value: \"-a\": name part {name_rule}"),
            ),
            (
                format!("{long}=a"),
                format!(
                    "{req}key: Invalid value: \"{long}\": name part must be no more than 63 characters"
                ),
            ),
            (
                "a/b/c".into(),
                format!(
                    "{req}key: Invalid value: \"a/b/c\": a qualified name {name_rule} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
                ),
            ),
            (
                "/a".into(),
                format!("{req}key: Invalid value: \"/a\": prefix part must be non-empty"),
            ),
            (
                "a/".into(),
                format!(
                    "{req}key: Invalid value: \"a/\": name part must be non-empty; name part {name_rule}"
                ),
            ),
            (
                "Example.com/a".into(),
                format!(
                    "{req}key: Invalid value: \"Example.com/a\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                ),
            ),
            (
                format!("{}/a", "b".repeat(254)),
                format!(
                    "{req}key: Invalid value: \"{}/a\": prefix part must be no more than 253 characters",
                    "b".repeat(254)
                ),
            ),
            (
                "!a$".into(),
                format!("{req}key: Invalid value: \"a$\": name part {name_rule}"),
            ),
            (
                "é=1".into(),
                format!("{req}key: Invalid value: \"é\": name part {name_rule}"),
            ),
        ];
        for (input, expected) in cases {
            match LabelSelector::parse(&input) {
                Ok(s) => panic!("{input:?} should be rejected, got {s:?}"),
                Err(e) => assert_eq!(e.to_string(), expected, "input {input:?}"),
            }
        }
    }

    /// Each operator matches as apimachinery's `Requirement.Matches` does.
    #[test]
    fn label_matching() {
        let web = labels(&[("app", "web"), ("tier", "front"), ("n", "7")]);
        let none = labels(&[]);
        let cases: Vec<(&str, Labels<'_>, bool)> = vec![
            ("", None, true),
            ("", Some(&web), true),
            ("app", Some(&web), true),
            ("app", Some(&none), false),
            ("app", None, false),
            ("!app", Some(&web), false),
            ("!app", Some(&none), true),
            ("!app", None, true),
            ("app=web", Some(&web), true),
            ("app==web", Some(&web), true),
            ("app=db", Some(&web), false),
            ("app=web", None, false),
            ("app=", Some(&web), false),
            ("app!=web", Some(&web), false),
            ("app!=db", Some(&web), true),
            ("app!=db", None, true),
            ("app in (db,web)", Some(&web), true),
            ("app in (db)", Some(&web), false),
            ("app in (db)", None, false),
            ("app notin (db,web)", Some(&web), false),
            ("app notin (db)", Some(&web), true),
            ("app notin (db)", None, true),
            ("n>6", Some(&web), true),
            ("n>7", Some(&web), false),
            ("n<8", Some(&web), true),
            ("n<7", Some(&web), false),
            ("n>1", None, false),
            ("app>1", Some(&web), false),
            ("app=web,tier=front", Some(&web), true),
            ("app=web,tier=back", Some(&web), false),
            ("app=web,!missing", Some(&web), true),
            ("app=web,app=db", Some(&web), false),
        ];
        for (input, labels, expected) in cases {
            assert_eq!(
                sel(input).matches(labels),
                expected,
                "{input:?} on {labels:?}"
            );
        }
    }

    /// Label values that are not strings are compared as JSON text, `null` as "".
    #[test]
    fn label_matching_non_string_values() {
        let map = match json!({"n": 5, "b": true, "z": null}) {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        assert!(sel("n=5,n>4,b=true,z=,z").matches(Some(&map)));
        assert!(!sel("n=6").matches(Some(&map)));
    }

    /// Field selectors parse every operator, escapes and empty terms.
    #[test]
    fn field_parse_ok() {
        let term = |field: &str, value: &str, negated| FieldTerm {
            field: field.to_owned(),
            value: value.to_owned(),
            negated,
        };
        let cases: Vec<(&str, Vec<FieldTerm>)> = vec![
            ("", vec![]),
            (",,", vec![]),
            ("metadata.name=a", vec![term("metadata.name", "a", false)]),
            ("metadata.name==a", vec![term("metadata.name", "a", false)]),
            ("metadata.name!=a", vec![term("metadata.name", "a", true)]),
            ("metadata.name=", vec![term("metadata.name", "", false)]),
            ("a=x\\,y\\=z\\\\", vec![term("a", "x,y=z\\", false)]),
            (
                "a=1,,b!=2,",
                vec![term("a", "1", false), term("b", "2", true)],
            ),
            ("=x", vec![term("", "x", false)]),
            ("a b = c", vec![term("a b ", " c", false)]),
            ("a!x=y", vec![term("a!x", "y", false)]),
        ];
        for (input, expected) in cases {
            let parsed = match FieldSelector::parse(input) {
                Ok(p) => p,
                Err(e) => panic!("{input:?} should parse: {e}"),
            };
            assert_eq!(parsed.is_empty(), expected.is_empty(), "input {input:?}");
            assert_eq!(parsed.terms, expected, "input {input:?}");
        }
        let parsed = FieldSelector::parse("metadata.name=a,metadata.namespace!=b");
        let fields: Vec<&str> = parsed.iter().flat_map(|p| p.fields()).collect();
        assert_eq!(fields, ["metadata.name", "metadata.namespace"]);
    }

    /// Malformed field selectors are rejected with apimachinery-like messages.
    #[test]
    fn field_parse_errors() {
        let cases = [
            ("a", "invalid selector: 'a'; can't understand 'a'"),
            ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
            (
                "a=b\\",
                "invalid field selector: invalid escape sequence: \\",
            ),
            (
                "a=b\\n",
                "invalid field selector: invalid escape sequence: \\n",
            ),
            (
                "a==b=c",
                "invalid field selector: unescaped character in value: '='",
            ),
            (
                "a===b",
                "invalid field selector: unescaped character in value: '='",
            ),
            (
                "a\\,b",
                "invalid selector: 'a\\,b'; can't understand 'a\\,b'",
            ),
            (
                "a=b\\,c=d",
                "invalid field selector: unescaped character in value: '='",
            ),
        ];
        for (input, expected) in cases {
            match FieldSelector::parse(input) {
                Ok(s) => panic!("{input:?} should be rejected, got {s:?}"),
                Err(e) => assert_eq!(e.to_string(), expected, "input {input:?}"),
            }
        }
    }

    /// Field selectors compare the rendered value at a dotted path.
    #[test]
    fn field_matching() {
        let obj = json!({
            "metadata": {"name": "web", "namespace": "default", "generation": 3},
            "spec": {"enabled": true, "nothing": null, "list": [1, 2]},
        });
        let cases = [
            ("", true),
            ("metadata.name=web", true),
            ("metadata.name==web", true),
            ("metadata.name=db", false),
            ("metadata.name!=db", true),
            ("metadata.name!=web", false),
            ("metadata.name=web,metadata.namespace=default", true),
            ("metadata.name=web,metadata.namespace!=default", false),
            ("metadata.generation=3", true),
            ("spec.enabled=true", true),
            ("spec.nothing=", true),
            ("spec.missing=", true),
            ("spec.missing!=", false),
            ("metadata.name.deeper=", true),
            ("spec.list=[1\\,2]", true),
            ("status.phase=Running", false),
            ("status.phase!=Running", true),
        ];
        for (input, expected) in cases {
            let parsed = match FieldSelector::parse(input) {
                Ok(p) => p,
                Err(e) => panic!("{input:?} should parse: {e}"),
            };
            assert_eq!(parsed.matches(&obj), expected, "input {input:?}");
        }
    }

    /// A valid label key: optional DNS subdomain prefix, then a name.
    fn key_strategy() -> impl Strategy<Value = String> {
        (
            proptest::option::of("[a-z0-9]([-a-z0-9]{0,6}[a-z0-9])?(\\.[a-z0-9]{1,4}){0,2}"),
            "[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?",
        )
            .prop_map(|(prefix, name)| match prefix {
                Some(p) => format!("{p}/{name}"),
                None => name,
            })
    }

    /// A valid non-empty label value.
    fn value_strategy() -> impl Strategy<Value = String> {
        "[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?"
    }

    /// A valid requirement as text, with optional whitespace around tokens.
    fn requirement_strategy() -> impl Strategy<Value = String> {
        let ws = || "[ \t]{0,2}";
        let set = (
            any::<bool>(),
            proptest::collection::vec(value_strategy(), 0..4),
            ws(),
        )
            .prop_map(|(leading_empty, values, w)| {
                let mut items: Vec<String> = values;
                if leading_empty {
                    items.insert(0, String::new());
                }
                format!("({w}{}{w})", items.join(&format!("{w},{w}")))
            });
        (
            key_strategy(),
            0..9u8,
            proptest::option::of(value_strategy()),
            any::<u32>(),
            set,
            ws(),
            ws(),
        )
            .prop_map(|(key, op, value, number, set, w1, w2)| {
                let value = value.unwrap_or_default();
                match op {
                    0 => format!("{w1}{key}{w2}"),
                    1 => format!("{w1}!{w2}{key}"),
                    2 => format!("{key}{w1}={w2}{value}"),
                    3 => format!("{key}{w1}=={w2}{value}"),
                    4 => format!("{key}{w1}!={w2}{value}"),
                    5 => format!("{key} in{w1}{set}"),
                    6 => format!("{key} notin{w1}{set}"),
                    7 => format!("{key}{w1}>{w2}{number}"),
                    _ => format!("{key}{w1}<{w2}{number}"),
                }
            })
    }

    /// A small labels map drawn from a few keys and values, so that hits are likely.
    fn labels_strategy(key: String, value: String) -> impl Strategy<Value = Map<String, Value>> {
        let keys = vec![key, "other".to_owned(), "x/y".to_owned()];
        let values = vec![value, String::new(), "v".to_owned()];
        proptest::collection::vec(
            (
                proptest::sample::select(keys),
                proptest::sample::select(values),
            ),
            0..4,
        )
        .prop_map(|pairs| {
            pairs
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect()
        })
    }

    /// Text built from selector tokens, to reach deep parser states.
    fn token_soup() -> impl Strategy<Value = String> {
        let tokens = [
            "a", "b/c", "in", "notin", "=", "==", "!=", "!", "(", ")", ",", ">", "<", " ", "1",
            "-", "\\", "é", "",
        ];
        proptest::collection::vec(proptest::sample::select(tokens.to_vec()), 0..16)
            .prop_map(|t| t.concat())
    }

    proptest! {
        /// Neither parser panics on arbitrary input, nor does matching what they accept.
        #[test]
        fn parse_never_panics(input in prop_oneof![any::<String>(), token_soup()]) {
            let map = labels(&[("a", "1"), ("b/c", "")]);
            if let Ok(s) = LabelSelector::parse(&input) {
                let _ = s.matches(Some(&map));
                let _ = s.matches(None);
            }
            if let Ok(f) = FieldSelector::parse(&input) {
                let _ = f.matches(&json!({"a": {"b": 1}}));
                let _ = f.fields().count();
            }
        }

        /// Generated valid selectors parse, with one requirement per generated term.
        #[test]
        fn valid_selectors_parse(reqs in proptest::collection::vec(requirement_strategy(), 1..5)) {
            let input = reqs.join(",");
            match LabelSelector::parse(&input) {
                Ok(s) => prop_assert_eq!(s.requirements.len(), reqs.len()),
                Err(e) => prop_assert!(false, "{:?} rejected: {}", input, e),
            }
        }

        /// `key=value` matches exactly the maps holding that pair; `!=` is its negation.
        #[test]
        fn equals_and_not_equals(
            (key, value, map) in (key_strategy(), value_strategy()).prop_flat_map(|(k, v)| {
                (Just(k.clone()), Just(v.clone()), labels_strategy(k, v))
            }),
            absent in any::<bool>(),
        ) {
            let eq = sel(&format!("{key}={value}"));
            let deq = sel(&format!("{key} == {value}"));
            let ne = sel(&format!("{key}!={value}"));
            let labels = if absent { None } else { Some(&map) };
            let expected = labels.and_then(|m| m.get(&key)) == Some(&Value::String(value.clone()));
            prop_assert_eq!(eq.matches(labels), expected);
            prop_assert_eq!(deq.matches(labels), expected);
            prop_assert_eq!(ne.matches(labels), !expected);
        }

        /// `notin` is the negation of `in`, and `in` means "present with one of the values".
        #[test]
        fn in_and_notin(
            (key, value, map) in (key_strategy(), value_strategy()).prop_flat_map(|(k, v)| {
                (Just(k.clone()), Just(v.clone()), labels_strategy(k, v))
            }),
            extra in proptest::collection::vec(value_strategy(), 0..3),
        ) {
            let mut values = extra;
            values.push(value);
            let list = values.join(", ");
            let is_in = sel(&format!("{key} in ({list})"));
            let not_in = sel(&format!("{key} notin ({list})"));
            let expected = map
                .get(&key)
                .and_then(Value::as_str)
                .is_some_and(|v| values.iter().any(|x| x == v));
            prop_assert_eq!(is_in.matches(Some(&map)), expected);
            prop_assert_eq!(not_in.matches(Some(&map)), !expected);
            prop_assert!(!is_in.matches(None));
            prop_assert!(not_in.matches(None));
        }

        /// An escaped arbitrary value round-trips through a field selector.
        #[test]
        fn field_value_round_trip(value in any::<String>(), other in any::<String>()) {
            let escaped = escape(&value);
            let eq = FieldSelector::parse(&format!("metadata.name={escaped}"));
            let ne = FieldSelector::parse(&format!("metadata.name!={escaped}"));
            prop_assert!(eq.is_ok() && ne.is_ok());
            let (eq, ne) = (eq.unwrap_or_default(), ne.unwrap_or_default());
            prop_assert_eq!(eq.fields().collect::<Vec<_>>(), vec!["metadata.name"]);
            let obj = json!({"metadata": {"name": value}});
            prop_assert!(eq.matches(&obj));
            prop_assert!(!ne.matches(&obj));
            let other_obj = json!({"metadata": {"name": other}});
            prop_assert_eq!(eq.matches(&other_obj), other == value);
            prop_assert_eq!(ne.matches(&other_obj), other != value);
        }
    }
}
