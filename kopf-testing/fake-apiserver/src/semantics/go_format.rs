//! JSON values as Go sees and writes them: numbers as int64 or float64, `fmt`'s `%v` and `%q`,
//! and `encoding/json`'s output, so that messages read as the apiserver's.

use serde_json::{Number, Value};

/// Deepest nesting written; anything deeper is cut (as deep as schemas are walked).
const MAX_DEPTH: usize = 256;

/// A JSON number as the apiserver decodes it: int64 when it fits, float64 otherwise.
#[derive(Clone, Copy, Debug)]
pub(super) enum Num {
    /// An integer that fits in int64.
    Int(i64),
    /// Anything else.
    Float(f64),
}

impl Num {
    /// Reads a serde_json number.
    pub(super) fn of(n: &Number) -> Num {
        match n.as_i64() {
            Some(i) => Num::Int(i),
            None => Num::Float(n.as_f64().unwrap_or(0.0)),
        }
    }

    /// The value as float64.
    pub(super) fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    /// Go's `%v` of the value.
    fn show(self) -> String {
        match self {
            Num::Int(i) => i.to_string(),
            Num::Float(f) => go_float_v(f),
        }
    }
}

/// How field.Error renders a bad value: Go `%v` for numbers and booleans, `%q` for strings, JSON otherwise.
pub(crate) fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => Num::of(n).show(),
        Value::String(text) => go_quote(text),
        Value::Array(_) | Value::Object(_) => go_json(v),
    }
}

/// Go's `strconv.Quote`.
pub(crate) fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c == ' ' || !(c.is_control() || c.is_whitespace() || is_format_char(c)) => {
                out.push(c)
            }
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// Unicode format characters (category Cf) that Go's strconv.Quote escapes.
fn is_format_char(c: char) -> bool {
    matches!(c,
        '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}' | '\u{180e}'
        | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

/// Go's `json.Marshal` of a decoded value (sorted keys, HTML-safe escaping).
pub(crate) fn go_json(v: &Value) -> String {
    let mut out = String::new();
    write_go_json(v, &mut out, 0);
    out
}

/// Appends Go's JSON of a value (anything nested too deep is written as null).
pub(super) fn write_go_json(v: &Value, out: &mut String, depth: usize) {
    if depth > MAX_DEPTH {
        out.push_str("null");
        return;
    }
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match Num::of(n) {
            Num::Int(i) => out.push_str(&i.to_string()),
            Num::Float(f) => out.push_str(&go_json_float(f)),
        },
        Value::String(text) => write_go_json_string(text, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json(item, out, depth + 1);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json_string(k, out);
                out.push(':');
                if let Some(item) = map.get(k) {
                    write_go_json(item, out, depth + 1);
                }
            }
            out.push('}');
        }
    }
}

/// Appends a JSON string as Go's encoder writes it.
pub(super) fn write_go_json_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The shortest decimal digits of |f| and the exponent of the first one.
fn shortest_digits(f: f64) -> (String, i32) {
    let text = format!("{:e}", f.abs());
    let (mantissa, exponent) = text.split_once('e').unwrap_or((text.as_str(), "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    (digits, exponent.parse().unwrap_or(0))
}

/// Go's `%v` of a float64: shortest digits, in exponent form when the exponent is below -4 or from 6 on (e.g. `1e+06`).
pub(super) fn go_float_v(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    let (digits, exp) = shortest_digits(f);
    let body = if !(-4..6).contains(&exp) {
        exponent_form(&digits, exp, true)
    } else if exp >= 0 {
        let whole = exp as usize + 1;
        if digits.len() > whole {
            format!("{}.{}", &digits[..whole], &digits[whole..])
        } else {
            format!("{digits}{}", "0".repeat(whole - digits.len()))
        }
    } else {
        format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
    };
    format!("{sign}{body}")
}

/// `d.ddde±XX` (Go pads the exponent to two digits; JSON trims negative ones).
fn exponent_form(digits: &str, exp: i32, pad: bool) -> String {
    let (first, rest) = digits.split_at(digits.len().min(1));
    let mantissa = if rest.is_empty() {
        first.to_string()
    } else {
        format!("{first}.{rest}")
    };
    let sign = if exp < 0 { '-' } else { '+' };
    if pad || exp >= 0 {
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    } else {
        format!("{mantissa}e{sign}{}", exp.unsigned_abs())
    }
}

/// Go's `encoding/json` rendering of a float64.
fn go_json_float(f: f64) -> String {
    if !f.is_finite() {
        return "null".to_string();
    }
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let (digits, exp) = shortest_digits(f);
        let sign = if f < 0.0 { "-" } else { "" };
        format!("{sign}{}", exponent_form(&digits, exp, false))
    } else {
        format!("{f}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn go_rendering_helpers() {
        let cases = [
            (0.0, "0"),
            (1.0, "1"),
            (-2.5, "-2.5"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (123456.0, "123456"),
            (1e6, "1e+06"),
            (1234567.5, "1.2345675e+06"),
            (1.5e-7, "1.5e-07"),
            (1e21, "1e+21"),
        ];
        for (f, want) in cases {
            assert_eq!(go_float_v(f), want, "{f}");
        }
        let json_cases = [
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (1.5e-7, "1.5e-7"),
            (0.5, "0.5"),
            (-3.0, "-3"),
        ];
        for (f, want) in json_cases {
            assert_eq!(go_json_float(f), want, "{f}");
        }
        assert_eq!(go_quote("a\"b\\c\nd\u{1}é"), r#""a\"b\\c\nd\x01é""#);
        assert_eq!(
            go_json(&json!({"b": [1, 2.5, "<&>"], "a": null, "c": {"z": true, "y": false}})),
            r#"{"a":null,"b":[1,2.5,"\u003c\u0026\u003e"],"c":{"y":false,"z":true}}"#
        );
        assert_eq!(
            go_value(&json!(18446744073709551615u64)),
            "1.8446744073709552e+19"
        );
    }
}
