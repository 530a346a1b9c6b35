//! Validation as kube-openapi's SchemaValidator does it, node by node: types, combinators,
//! strings, arrays and objects, with compiled patterns cached.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use regex::{Regex, RegexBuilder};
use serde_json::{Map, Value};

use super::errors::{
    FieldError, REQUIRED, Raw, TOO_LONG, TOO_MANY, TYPE_INVALID, invalid, plain, too_long,
    too_many, type_error,
};
use super::keywords::{
    Additional, EMBEDDED, INT_OR_STRING, MAX_DEPTH, STRING_FORMATS, additional, child, index,
    int_kw, is_meta, is_true, kw, prop, props, str_kw, type_str,
};
use super::lists::{embedded_checks, list_checks_map, second_occurrences};
use super::values::{
    check_enum, check_number, check_type, is_cidr, is_date, is_date_time, is_email, is_mac,
};
use crate::semantics::go_format::{Num, go_quote};

/// Validates against the schema: type (object, array, string, integer, number, boolean; x-kubernetes-int-or-string; nullable), required, enum, minimum/maximum (+exclusive), minLength/maxLength, pattern, minItems/maxItems, minProperties/maxProperties, format (int32/int64 range, date-time loosely), uniqueItems, and x-kubernetes-list-type set/map uniqueness. The root's apiVersion/kind/metadata are not validated against the schema.
///
/// Also checks multipleOf, allOf/anyOf/oneOf/not (ignoring additionalProperties inside
/// them, which is not structural there), and the apiVersion and kind of nested embedded
/// resources. Order: schema errors as kube-openapi finds them (properties in schema
/// order), then embedded resources, then list duplicates. As in the apiserver, errors
/// that kube-openapi does not tie to a field (anyOf/oneOf/allOf/not, number ranges) have
/// the field `<nil>` and name the field in their message; a null never matches an enum.
pub(crate) fn validate(object: &Value, schema: &Value) -> Vec<FieldError> {
    let mut raw = Vec::new();
    Validator::new().node(object, schema, "", true, 0, &mut raw);
    let mut errors: Vec<FieldError> = raw.into_iter().map(Raw::into_field_error).collect();
    embedded_checks(object, schema, "", true, 0, &mut errors);
    if let Value::Object(map) = object {
        list_checks_map(map, schema, "", true, 0, &mut errors);
    }
    let mut unique: Vec<FieldError> = Vec::with_capacity(errors.len());
    for error in errors {
        if !unique.contains(&error) {
            unique.push(error);
        }
    }
    unique
}

/// The allowed types of a schema node (int-or-string is integer,string).
fn schema_types(s: &Value) -> Vec<&str> {
    if is_true(s, INT_OR_STRING) {
        vec!["integer", "string"]
    } else {
        type_str(s).into_iter().collect()
    }
}

/// The format kept after the apiserver strips unsupported ones.
fn effective_format<'a>(s: &'a Value, types: &[&str]) -> Option<&'a str> {
    let f = str_kw(s, "format").filter(|f| !f.is_empty())?;
    let single = match types {
        [t] => *t,
        _ => "",
    };
    let keep = match single {
        "" | "string" => STRING_FORMATS.contains(&f.replace('-', "").as_str()),
        "integer" => matches!(f, "int32" | "int64"),
        "number" => matches!(f, "float" | "double"),
        _ => false,
    };
    keep.then_some(f)
}

/// Compiles a user's pattern (RE2 syntax, as Go's regexp), bounded in size; the error is one line.
pub(super) fn compile_pattern(pattern: &str) -> Result<Regex, String> {
    RegexBuilder::new(pattern)
        .size_limit(1 << 22)
        .dfa_size_limit(1 << 22)
        .build()
        .map_err(|e| {
            let text = e.to_string();
            let last = text
                .lines()
                .map(str::trim)
                .rev()
                .find(|l| !l.is_empty())
                .unwrap_or("invalid pattern");
            let last = last.strip_prefix("error: ").unwrap_or(last);
            format!("error parsing regexp: {last}")
        })
}

/// A pattern as compiled, or why it does not compile; shared between requests.
pub(super) type Compiled = Arc<Result<Regex, String>>;

/// How many compiled patterns the server keeps between requests; past that it starts over.
const CACHED_PATTERNS: usize = 512;

/// A pattern compiled once for all requests (the schemas of CRDs change rarely, their
/// objects often), from a bounded cache.
pub(super) fn cached_pattern(pattern: &str) -> Compiled {
    static CACHE: LazyLock<Mutex<HashMap<String, Compiled>>> = LazyLock::new(Mutex::default);
    let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(compiled) = cache.get(pattern) {
        return compiled.clone();
    }
    if cache.len() >= CACHED_PATTERNS {
        cache.clear();
    }
    let compiled = Arc::new(compile_pattern(pattern));
    cache.insert(pattern.to_string(), compiled.clone());
    compiled
}

/// Runs kube-openapi's validators over a value, with compiled patterns cached.
pub(super) struct Validator {
    /// Patterns compiled so far.
    patterns: HashMap<String, Compiled>,
    /// How many allOf/anyOf/oneOf/not branches we are inside; there additionalProperties is
    /// ignored, as it is not structural there and pruning never honours it.
    nested: usize,
}

impl Validator {
    /// A validator with an empty pattern cache.
    pub(super) fn new() -> Self {
        Validator {
            patterns: HashMap::new(),
            nested: 0,
        }
    }

    /// A compiled pattern.
    fn pattern(&mut self, p: &str) -> &Result<Regex, String> {
        self.patterns
            .entry(p.to_string())
            .or_insert_with(|| cached_pattern(p))
    }

    /// Whether a fixed (known-good) pattern matches.
    fn matches(&mut self, p: &str, text: &str) -> bool {
        match self.pattern(p) {
            Ok(re) => re.is_match(text),
            Err(_) => true,
        }
    }

    /// Validates one value against one schema node (kube-openapi's SchemaValidator.Validate).
    pub(super) fn node(
        &mut self,
        v: &Value,
        s: &Value,
        path: &str,
        root: bool,
        depth: usize,
        out: &mut Vec<Raw>,
    ) {
        if depth > MAX_DEPTH || !s.is_object() {
            return;
        }
        let types = schema_types(s);
        let format = effective_format(s, &types);
        if v.is_null() {
            if !types.is_empty() && !types.contains(&"null") && !is_true(s, "nullable") {
                out.push(type_error(path, &types.join(","), "null"));
            }
            check_enum(v, s, path, out);
            return;
        }
        check_type(v, &types, format, path, out);
        self.check_combinators(v, s, path, root, depth, out);
        if let Value::String(text) = v {
            self.check_string(text, s, path, out);
            if let Some(f) = format
                && !self.format_ok(f, text)
            {
                let shown = go_quote(text);
                out.push(Raw {
                    name: Some(path.to_string()),
                    reason: TYPE_INVALID,
                    message: format!(
                        "Invalid value: {shown}: {path} in body must be of type {f}: {shown}"
                    ),
                });
            }
        }
        if let Value::Number(n) = v {
            check_number(Num::of(n), s, &types, format, path, out);
        }
        if let Value::Array(items) = v {
            self.check_array(items, s, path, depth, out);
        }
        check_enum(v, s, path, out);
        if let Value::Object(map) = v {
            self.check_object(map, s, path, root, depth, out);
        }
    }

    /// Validates against one branch, returning its errors.
    fn branch(&mut self, v: &Value, s: &Value, path: &str, root: bool, depth: usize) -> Vec<Raw> {
        let mut errors = Vec::new();
        self.nested += 1;
        self.node(v, s, path, root, depth + 1, &mut errors);
        self.nested -= 1;
        errors
    }

    /// anyOf, oneOf, allOf and not.
    fn check_combinators(
        &mut self,
        v: &Value,
        s: &Value,
        path: &str,
        root: bool,
        depth: usize,
        out: &mut Vec<Raw>,
    ) {
        let quoted = go_quote(path);
        if let Some(Value::Array(branches)) = kw(s, "anyOf")
            && !branches.is_empty()
        {
            let mut best: Option<Vec<Raw>> = None;
            let mut valid = false;
            for b in branches {
                let errors = self.branch(v, b, path, root, depth);
                if errors.is_empty() {
                    valid = true;
                    break;
                }
                if best.as_ref().is_none_or(|e| errors.len() < e.len()) {
                    best = Some(errors);
                }
            }
            if !valid {
                out.push(plain(&format!(
                    "{quoted} must validate at least one schema (anyOf)"
                )));
                out.extend(best.unwrap_or_default());
            }
        }
        if let Some(Value::Array(branches)) = kw(s, "oneOf")
            && !branches.is_empty()
        {
            let mut best: Option<Vec<Raw>> = None;
            let mut valid = 0usize;
            for b in branches {
                let errors = self.branch(v, b, path, root, depth);
                if errors.is_empty() {
                    valid += 1;
                } else if valid == 0 && best.as_ref().is_none_or(|e| errors.len() < e.len()) {
                    best = Some(errors);
                }
            }
            if valid != 1 {
                let found = if valid == 0 {
                    "Found none valid".to_string()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                out.push(plain(&format!(
                    "{quoted} must validate one and only one schema (oneOf). {found}"
                )));
                if valid == 0 {
                    out.extend(best.unwrap_or_default());
                }
            }
        }
        if let Some(Value::Array(branches)) = kw(s, "allOf")
            && !branches.is_empty()
        {
            let mut valid = 0usize;
            for b in branches {
                let errors = self.branch(v, b, path, root, depth);
                if errors.is_empty() {
                    valid += 1;
                }
                out.extend(errors);
            }
            if valid != branches.len() {
                let none = if valid == 0 { ". None validated" } else { "" };
                out.push(plain(&format!(
                    "{quoted} must validate all the schemas (allOf){none}"
                )));
            }
        }
        if let Some(not @ Value::Object(_)) = kw(s, "not")
            && self.branch(v, not, path, root, depth).is_empty()
        {
            out.push(plain(&format!(
                "{quoted} must not validate the schema (not)"
            )));
        }
    }

    /// maxLength, minLength and pattern (the first failure only, as kube-openapi).
    fn check_string(&mut self, text: &str, s: &Value, path: &str, out: &mut Vec<Raw>) {
        let runes = text.chars().count() as i64;
        if let Some(max) = int_kw(s, "maxLength")
            && runes > max
        {
            out.push(Raw {
                name: Some(path.to_string()),
                reason: TOO_LONG,
                message: too_long(max),
            });
            return;
        }
        if let Some(min) = int_kw(s, "minLength")
            && runes < min
        {
            out.push(invalid(
                path,
                &go_quote(text),
                &format!("{path} in body should be at least {min} chars long"),
            ));
            return;
        }
        if let Some(p) = str_kw(s, "pattern")
            && !p.is_empty()
        {
            let detail = match self.pattern(p) {
                Ok(re) if re.is_match(text) => None,
                Ok(_) => Some(format!("{path} in body should match '{p}'")),
                Err(e) => Some(format!(
                    "{path} in body should match '{p}, but pattern is invalid: {e}'"
                )),
            };
            if let Some(detail) = detail {
                out.push(invalid(path, &go_quote(text), &detail));
            }
        }
    }

    /// Whether a string satisfies a (kept) string format; unknown or exotic formats pass.
    fn format_ok(&mut self, format: &str, text: &str) -> bool {
        match format.replace('-', "").as_str() {
            "datetime" => is_date_time(text),
            "date" => is_date(text),
            "uuid" => self.matches(
                r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
                text,
            ),
            "uuid3" => self.matches(
                r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
                text,
            ),
            "uuid4" => self.matches(
                r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$",
                text,
            ),
            "uuid5" => self.matches(
                r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$",
                text,
            ),
            "ipv4" => text.parse::<Ipv4Addr>().is_ok(),
            "ipv6" => text.contains(':') && text.parse::<Ipv6Addr>().is_ok(),
            "cidr" => is_cidr(text),
            "mac" => is_mac(text),
            "byte" => self.matches(
                r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$",
                text,
            ),
            "hostname" => {
                text.len() <= 255
                    && text.split('.').all(|label| label.len() <= 63)
                    && self.matches(
                        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$",
                        text,
                    )
            }
            "email" => is_email(text),
            "uri" => self.matches(r"^(?:[A-Za-z][A-Za-z0-9+.\-]*:|/)[^\s]*$", text),
            "bsonobjectid" => self.matches(r"^[0-9a-fA-F]{24}$", text),
            "hexcolor" => self.matches(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$", text),
            "rgbcolor" => self.matches(
                r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$",
                text,
            ),
            "ssn" => self.matches(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$", text),
            "duration" => self.is_duration(text),
            "k8sshortname" => {
                text.len() <= 63 && self.matches(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", text)
            }
            "k8slongname" => {
                text.len() <= 253
                    && self.matches(
                        r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
                        text,
                    )
            }
            _ => true,
        }
    }

    /// Loosely, strfmt's duration: Go's time.ParseDuration syntax, or "<n> <unit>" parts.
    fn is_duration(&mut self, text: &str) -> bool {
        if self.matches(
            r"^[-+]?(0|((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)$",
            text,
        ) {
            return true;
        }
        let Ok(re) = self.pattern(r"(\d+)\s*([A-Za-zµ]+)") else {
            return true;
        };
        re.captures_iter(text).any(|c| {
            let unit = c.get(2).map_or("", |m| m.as_str()).to_lowercase();
            [
                "ns", "nano", "us", "µs", "micro", "ms", "milli", "s", "sec", "m", "min", "h",
                "hr", "hour", "d", "day", "w", "wk", "week",
            ]
            .iter()
            .any(|u| unit == *u || (u.len() > 2 && unit.starts_with(u)))
        })
    }

    /// items, minItems, maxItems, uniqueItems.
    fn check_array(
        &mut self,
        items: &[Value],
        s: &Value,
        path: &str,
        depth: usize,
        out: &mut Vec<Raw>,
    ) {
        match kw(s, "items") {
            Some(it @ Value::Object(_)) => {
                for (i, e) in items.iter().enumerate() {
                    self.node(e, it, &index(path, i), false, depth + 1, out);
                }
            }
            Some(Value::Array(tuple)) => {
                for (i, (e, it)) in items.iter().zip(tuple).enumerate() {
                    self.node(e, it, &index(path, i), false, depth + 1, out);
                }
            }
            _ => {}
        }
        let size = items.len() as i64;
        if let Some(min) = int_kw(s, "minItems")
            && size < min
        {
            out.push(invalid(
                path,
                &size.to_string(),
                &format!("{path} in body should have at least {min} items"),
            ));
        }
        if let Some(max) = int_kw(s, "maxItems")
            && size > max
        {
            out.push(Raw {
                name: Some(path.to_string()),
                reason: TOO_MANY,
                message: too_many(size, max),
            });
        }
        if is_true(s, "uniqueItems") && !second_occurrences(items).is_empty() {
            out.push(invalid(
                path,
                "\"\"",
                &format!("{path} in body shouldn't contain duplicates"),
            ));
        }
    }

    /// minProperties, maxProperties, additionalProperties, properties, required.
    fn check_object(
        &mut self,
        map: &Map<String, Value>,
        s: &Value,
        path: &str,
        root: bool,
        depth: usize,
        out: &mut Vec<Raw>,
    ) {
        let count = map.len() as i64;
        if let Some(min) = int_kw(s, "minProperties")
            && count < min
        {
            out.push(invalid(
                path,
                &count.to_string(),
                &format!("{path} in body should have at least {min} properties"),
            ));
        }
        if let Some(max) = int_kw(s, "maxProperties")
            && count > max
        {
            out.push(Raw {
                name: Some(path.to_string()),
                reason: TOO_MANY,
                message: too_many(count, max),
            });
        }
        let skipped = |k: &str| root && is_meta(k);
        let embedded = root || is_true(s, EMBEDDED);
        let kept_meta = |k: &str| embedded && is_meta(k);
        let addl = if self.nested > 0 {
            Additional::Absent
        } else {
            additional(s)
        };
        match addl {
            Additional::Allows(false) => {
                for k in map.keys() {
                    if !kept_meta(k) && prop(s, k).is_none() {
                        out.push(invalid(
                            path,
                            &go_quote(k),
                            &format!("{path}.{k} in body is a forbidden property"),
                        ));
                    }
                }
            }
            Additional::Schema(a) => {
                for (k, val) in map {
                    if !skipped(k) && prop(s, k).is_none() {
                        self.node(val, a, &format!("{path}.{k}"), false, depth + 1, out);
                    }
                }
            }
            _ => {}
        }
        if let Some(ps) = props(s) {
            for (k, p) in ps {
                if skipped(k) {
                    continue;
                }
                if let Some(val) = map.get(k) {
                    self.node(val, p, &child(path, k), false, depth + 1, out);
                }
            }
        }
        if let Some(Value::Array(required)) = kw(s, "required") {
            for r in required {
                if let Value::String(k) = r
                    && !map.contains_key(k)
                {
                    out.push(Raw {
                        name: Some(format!("{path}.{k}")),
                        reason: REQUIRED,
                        message: "Required value".to_string(),
                    });
                }
            }
        }
    }
}
