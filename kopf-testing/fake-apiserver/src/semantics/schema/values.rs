//! The checks of one value: its type and format, enums, number ranges and multiples, and the
//! string formats (dates, times, CIDRs, MACs, emails).

use std::net::{Ipv4Addr, Ipv6Addr};

use serde_json::Value;

use super::errors::{NOT_SUPPORTED, Raw, invalid, plain, type_error};
use super::keywords::{is_true, kw, num_kw};
use crate::semantics::go_format::{Num, go_float_v, go_json, go_quote, go_value};

/// The type and format kube-openapi infers for a decoded JSON value.
pub(super) fn type_of_value(v: &Value) -> (&'static str, &'static str) {
    match v {
        Value::Null => ("null", ""),
        Value::Bool(_) => ("boolean", ""),
        Value::String(_) => ("string", ""),
        Value::Number(n) => match Num::of(n) {
            Num::Int(_) => ("integer", "int64"),
            Num::Float(_) => ("number", "float64"),
        },
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
    }
}

/// The type validator (kube-openapi's typeValidator, with the formats the apiserver keeps).
pub(super) fn check_type(
    v: &Value,
    types: &[&str],
    format: Option<&str>,
    path: &str,
    out: &mut Vec<Raw>,
) {
    if types.is_empty() && format.is_none() {
        return;
    }
    let (actual, actual_format) = type_of_value(v);
    let integral_float = matches!(v, Value::Number(n)
        if matches!(Num::of(n), Num::Float(f) if f.is_finite() && f.fract() == 0.0));
    let float_int = integral_float && types.contains(&"integer");
    let int_float = actual == "integer" && types.contains(&"number");
    let stringish = matches!(v, Value::String(_) | Value::Array(_));
    if let Some(f) = format
        && !stringish
        && !(types.contains(&actual) || actual_format == f || float_int || int_float)
    {
        out.push(type_error(path, f, actual_format));
        return;
    }
    if format.is_some() && stringish && !types.iter().any(|t| matches!(*t, "number" | "integer")) {
        return;
    }
    if !(types.contains(&actual) || float_int || int_float) {
        out.push(type_error(path, &types.join(","), actual));
    }
}

/// The enum check (kube-openapi's common validator); null never matches, as there.
pub(super) fn check_enum(v: &Value, s: &Value, path: &str, out: &mut Vec<Raw>) {
    let Some(Value::Array(options)) = kw(s, "enum") else {
        return;
    };
    if options.is_empty() || (!v.is_null() && options.iter().any(|o| enum_matches(v, o))) {
        return;
    }
    let supported = options
        .iter()
        .map(|o| match o {
            Value::String(text) => go_quote(text),
            other => go_quote(&go_json(other)),
        })
        .collect::<Vec<_>>()
        .join(", ");
    out.push(Raw {
        name: Some(path.to_string()),
        reason: NOT_SUPPORTED,
        message: format!(
            "Unsupported value: {}: supported values: {supported}",
            go_value(v)
        ),
    });
}

/// Whether a value equals an enum entry (numbers compare by value).
fn enum_matches(v: &Value, option: &Value) -> bool {
    match (v, option) {
        (Value::Number(a), Value::Number(b)) => match (Num::of(a), Num::of(b)) {
            (Num::Int(x), Num::Int(y)) => x == y,
            (x, y) => x.as_f64() == y.as_f64(),
        },
        _ => v == option,
    }
}

/// The number validator: type range, multipleOf, minimum, maximum.
pub(super) fn check_number(
    num: Num,
    s: &Value,
    types: &[&str],
    format: Option<&str>,
    path: &str,
    out: &mut Vec<Raw>,
) {
    let type_name = match types {
        [t @ ("integer" | "number")] => *t,
        _ => "",
    };
    let fmt = match (type_name, format) {
        ("integer", Some(f @ ("int32" | "int64"))) | ("number", Some(f @ ("float" | "double"))) => {
            f
        }
        _ => "",
    };
    let range = |n: Num, prefix: &str| range_error(n, type_name, fmt, prefix, path);
    if let Some(e) = range(num, "Checked") {
        out.push(e);
    }
    if let Some(factor) = num_kw(s, "multipleOf") {
        match range(Num::Float(factor), "MultipleOf") {
            Some(e) => {
                out.push(e);
                multiple_of_float(num.as_f64(), factor, path, out);
            }
            None => multiple_of_native(num, factor, path, out),
        }
    }
    for (key, exclusive_key, upper) in [
        ("minimum", "exclusiveMinimum", false),
        ("maximum", "exclusiveMaximum", true),
    ] {
        let Some(bound) = num_kw(s, key) else {
            continue;
        };
        let valid_bound = match range(
            Num::Float(bound),
            if upper {
                "Maximum boundary"
            } else {
                "Minimum boundary"
            },
        ) {
            Some(e) => {
                out.push(e);
                false
            }
            None => true,
        };
        let exclusive = is_true(s, exclusive_key);
        let (fails, shown_value, shown_bound) = match num {
            Num::Int(i) if valid_bound => {
                let b = bound as i64;
                let fails = match (upper, exclusive) {
                    (true, false) => i > b,
                    (true, true) => i >= b,
                    (false, false) => i < b,
                    (false, true) => i <= b,
                };
                (fails, i.to_string(), b.to_string())
            }
            _ => {
                let x = num.as_f64();
                let fails = match (upper, exclusive) {
                    (true, false) => x > bound,
                    (true, true) => x >= bound,
                    (false, false) => x < bound,
                    (false, true) => x <= bound,
                };
                (fails, go_float_v(x), go_float_v(bound))
            }
        };
        if fails {
            let relation = match (upper, exclusive) {
                (true, false) => "less than or equal to",
                (true, true) => "less than",
                (false, false) => "greater than or equal to",
                (false, true) => "greater than",
            };
            out.push(invalid(
                path,
                &shown_value,
                &format!("{path} in body should be {relation} {shown_bound}"),
            ));
        }
    }
}

/// kube-openapi's IsValueValidAgainstRange: whether a number fits the type and format.
fn range_error(num: Num, type_name: &str, format: &str, prefix: &str, path: &str) -> Option<Raw> {
    let rep = match num {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => format!("{f}"),
    };
    let ok = match type_name {
        "integer" if format == "int32" => rep.parse::<i32>().is_ok(),
        "integer" => rep.parse::<i64>().is_ok(),
        _ if format == "float" => rep
            .parse::<f64>()
            .is_ok_and(|f| f.abs() <= f64::from(f32::MAX)),
        _ => true,
    };
    if ok {
        return None;
    }
    Some(plain(&if format.is_empty() {
        format!("{prefix} value must be of type {type_name} (default format) in {path}")
    } else {
        format!("{prefix} value must be of type {type_name} with format {format} in {path}")
    }))
}

/// multipleOf on the value's own type (integers divide exactly).
fn multiple_of_native(num: Num, factor: f64, path: &str, out: &mut Vec<Raw>) {
    match num {
        Num::Int(i) => {
            let f = factor as i64;
            if f < 0 {
                must_be_positive(path, &f.to_string(), out);
            } else if f == 0 {
                multiple_of_float(i as f64, factor, path, out);
            } else if i.checked_rem(f) != Some(0) {
                out.push(invalid(
                    path,
                    &i.to_string(),
                    &format!("{path} in body should be a multiple of {f}"),
                ));
            }
        }
        Num::Float(x) => multiple_of_float(x, factor, path, out),
    }
}

/// multipleOf on floats (kube-openapi's MultipleOf).
fn multiple_of_float(x: f64, factor: f64, path: &str, out: &mut Vec<Raw>) {
    if factor < 0.0 {
        must_be_positive(path, &go_float_v(factor), out);
        return;
    }
    let mult = if factor < 1.0 {
        (1.0 / factor) * x
    } else {
        x / factor
    };
    if mult.fract() != 0.0 {
        out.push(invalid(
            path,
            &go_float_v(x),
            &format!(
                "{path} in body should be a multiple of {}",
                go_float_v(factor)
            ),
        ));
    }
}

/// The error for a negative multipleOf.
fn must_be_positive(path: &str, shown: &str, out: &mut Vec<Raw>) {
    out.push(invalid(
        path,
        shown,
        &format!("factor MultipleOf declared for {path} must be positive: {shown}"),
    ));
}

/// RFC 3339 full-date, with real month lengths (as Go's time.Parse).
pub(super) fn is_date(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = text.get(r)?;
        if part.bytes().all(|c| c.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10)) else {
        return false;
    };
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// strfmt's IsDateTime: a full-date, `t`, then hh:mm:ss[.frac](z|±hh:mm).
pub(super) fn is_date_time(text: &str) -> bool {
    if text.len() < 4 {
        return false;
    }
    let lower = text.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let b = time.as_bytes();
    if b.len() < 9 || b[2] != b':' || b[5] != b':' {
        return false;
    }
    let two = |i: usize| b[i].is_ascii_digit() && b[i + 1].is_ascii_digit();
    if !(two(0) && two(3) && two(6)) {
        return false;
    }
    if &time[0..2] > "23" || &time[3..5] > "59" || &time[6..8] > "59" {
        return false;
    }
    let mut rest = &time[8..];
    if let Some(first) = rest.chars().next()
        && first != 'z'
        && first != '+'
        && first != '-'
    {
        // `.` in strfmt's pattern is any character, followed by digits.
        let after = &rest[first.len_utf8()..];
        let n = after.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &after[n..];
    }
    if rest == "z" {
        return true;
    }
    let z = rest.as_bytes();
    z.len() == 6
        && (z[0] == b'+' || z[0] == b'-')
        && z[1].is_ascii_digit()
        && z[2].is_ascii_digit()
        && z[3] == b':'
        && z[4].is_ascii_digit()
        && z[5].is_ascii_digit()
}

/// Go's net.ParseCIDR, roughly.
pub(super) fn is_cidr(text: &str) -> bool {
    let Some((ip, bits)) = text.split_once('/') else {
        return false;
    };
    if bits.is_empty() || bits.len() > 3 || !bits.bytes().all(|c| c.is_ascii_digit()) {
        return false;
    }
    let Ok(bits) = bits.parse::<u32>() else {
        return false;
    };
    if ip.parse::<Ipv4Addr>().is_ok() {
        bits <= 32
    } else {
        ip.contains(':') && ip.parse::<Ipv6Addr>().is_ok() && bits <= 128
    }
}

/// Go's net.ParseMAC: 6, 8 or 20 octets, `:`/`-` separated pairs or `.` separated quads.
pub(super) fn is_mac(text: &str) -> bool {
    let hex = |part: &str, n: usize| part.len() == n && part.bytes().all(|c| c.is_ascii_hexdigit());
    for sep in [':', '-'] {
        let parts: Vec<&str> = text.split(sep).collect();
        if matches!(parts.len(), 6 | 8 | 20) && parts.iter().all(|p| hex(p, 2)) {
            return true;
        }
    }
    let parts: Vec<&str> = text.split('.').collect();
    matches!(parts.len(), 3 | 4 | 10) && parts.iter().all(|p| hex(p, 4))
}

/// Loosely, Go's mail.ParseAddress: `local@domain`, optionally as `Name <local@domain>`.
pub(super) fn is_email(text: &str) -> bool {
    let addr = match (text.rfind('<'), text.ends_with('>')) {
        (Some(start), true) => text.get(start + 1..text.len() - 1).unwrap_or(""),
        _ => text.trim(),
    };
    match addr.rsplit_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !addr
                    .chars()
                    .any(|c| c.is_whitespace() || c == '<' || c == '>')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
        }
        None => false,
    }
}
