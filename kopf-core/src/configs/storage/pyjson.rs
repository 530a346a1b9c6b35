//! JSON text exactly as Python's `json.dumps(value, separators=(',', ':'))` writes it, which is
//! how Kopf encodes progress records and diff-bases into annotations.
//!
//! It differs from `serde_json::to_string` in three ways:
//! 1. `ensure_ascii`: every character outside `' '..='~'` is escaped, as `\n`, `\r`, `\t`,
//!    `\b`, `\f` where those exist and as lowercase `\u00e9` otherwise; characters beyond the
//!    BMP become UTF-16 surrogate pairs (`\ud83d\ude00`); DEL is `\u007f`.
//! 2. Floats are Python's `repr`: shortest round-trip digits, a `.0` on integral values,
//!    exponents from `1e+16` and below `0.0001` as `1e-05` (sign and at least two digits).
//! 3. Key order is the map's order (serde_json's `preserve_order` keeps the body's order).
//!
//! Integers are written as they are; JSON has no NaN or infinities for serde_json to hold.

use std::fmt::Write as _;

use serde_json::{Number, Value};

/// Serializes `value` as Python's compact, ASCII-only `json.dumps` would.
pub(crate) fn dumps(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => write_number(out, number),
        Value::String(text) => write_str(out, text),
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (index, (key, item)) in map.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_str(out, key);
                out.push(':');
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

fn write_number(out: &mut String, number: &Number) {
    if let Some(integer) = number.as_u64() {
        let _ = write!(out, "{integer}");
    } else if let Some(integer) = number.as_i64() {
        let _ = write!(out, "{integer}");
    } else if let Some(float) = number.as_f64() {
        write_float(out, float);
    } else {
        out.push_str(&number.to_string());
    }
}

/// Python's `float.__repr__` (`repr` style `'r'` with `Py_DTSF_ADD_DOT_0`).
fn write_float(out: &mut String, float: f64) {
    let (digits, exponent) = shortest_digits(float.abs());
    let point = exponent + 1; // digits are 0.d1d2d3… × 10^point

    if float.is_sign_negative() {
        out.push('-');
    }
    if !(-4 < point && point <= 16) {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let sign = if exponent < 0 { '-' } else { '+' };
        let _ = write!(out, "e{sign}{:02}", exponent.unsigned_abs());
    } else if point <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', point.unsigned_abs() as usize));
        out.push_str(&digits);
    } else if point as usize >= digits.len() {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', point as usize - digits.len()));
        out.push_str(".0");
    } else {
        let (whole, fraction) = digits.split_at(point as usize);
        out.push_str(whole);
        out.push('.');
        out.push_str(fraction);
    }
}

/// The shortest significant digits that read back as `float` (non-negative, finite) and the
/// decimal exponent of the first one; of two equally short candidates, the one closer to the
/// exact value, and on a tie the even one, as Python's repr (David Gay's `dtoa` mode 0).
fn shortest_digits(float: f64) -> (String, i32) {
    // Rust's `{:e}` finds the shortest length but breaks ties upwards; formatting to that
    // length is exact and breaks ties to even. Use the latter when it still reads back.
    let shortest = format!("{float:e}");
    let length = shortest
        .split_once('e')
        .map_or(1, |(m, _)| m.chars().filter(char::is_ascii_digit).count());
    let nearest = format!("{float:.*e}", length.saturating_sub(1));
    let chosen = if nearest.parse::<f64>() == Ok(float) {
        nearest
    } else {
        shortest
    };
    let (mantissa, exponent) = chosen.split_once('e').expect("`{:e}` always has an `e`");
    let exponent: i32 = exponent.parse().expect("`{:e}` has an integer exponent");
    let mut digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
    }
    (digits, exponent)
}

/// A JSON string with Python's `ensure_ascii` escaping.
fn write_str(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn compact_in_map_order() {
        let value: Value =
            serde_json::from_str(r#"{"z": 1, "a": [true, false, null, {"y": "", "b": -7}]}"#)
                .unwrap();
        assert_eq!(
            dumps(&value),
            r#"{"z":1,"a":[true,false,null,{"y":"","b":-7}]}"#
        );
    }

    /// `json.dumps('not ready: "é" — ✓ 😀\n\x7f')` in Python 3.11.
    #[test]
    fn strings_escaped_as_python() {
        let text = "not ready: \"é\" — ✓ 😀\n\u{7f}";
        assert_eq!(
            dumps(&json!(text)),
            r#""not ready: \"\u00e9\" \u2014 \u2713 \ud83d\ude00\n\u007f""#
        );
        assert_eq!(
            dumps(&json!("\u{0}\u{1f}\u{8}\u{c}\r\t\\/ ~")),
            r#""\u0000\u001f\b\f\r\t\\/ ~""#
        );
        assert_eq!(
            dumps(&json!({"ключ": 1})),
            r#"{"\u043a\u043b\u044e\u0447":1}"#
        );
    }

    /// `json.dumps(float)` in Python 3.11 for these values.
    #[test]
    fn floats_as_python_repr() {
        let cases = [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (1.5, "1.5"),
            (100.0, "100.0"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456789.125, "123456789.125"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (0.1, "0.1"),
            (2.5e-5, "2.5e-05"),
            (1e22, "1e+22"),
            (1e21, "1e+21"),
            (12345678901234567.0, "1.2345678901234568e+16"),
            (9007199254740993.0, "9007199254740992.0"),
            (-123.456, "-123.456"),
            // Exactly halfway between two shortest candidates (…52.25): Python takes the even one.
            (8245401129898609.0 / 4.0, "2061350282474652.2"),
            (1733262581519881.0 / 8.0, "216657822689985.12"),
            (3066892291441705.0 / 4.0, "766723072860426.2"),
        ];
        for (float, expected) in cases {
            assert_eq!(dumps(&json!(float)), expected, "{float:?}");
        }
    }

    #[test]
    fn integers_as_is() {
        assert_eq!(dumps(&json!(123456789012345678u64)), "123456789012345678");
        assert_eq!(dumps(&json!(u64::MAX)), "18446744073709551615");
        assert_eq!(dumps(&json!(i64::MIN)), "-9223372036854775808");
    }

    fn values() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            // Exact binary fractions: serde_json's parser (without `float_roundtrip`) may be a
            // unit in the last place off for others; `floats_round_trip` covers all of them.
            any::<i32>().prop_map(|i| Value::from(f64::from(i) / 64.0)),
            any::<String>().prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::from),
                prop::collection::vec((any::<String>(), inner), 0..8)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn round_trips_through_serde_json_in_ascii(value in values()) {
            let text = dumps(&value);
            prop_assert!(text.bytes().all(|b| (b' '..=b'~').contains(&b)), "{}", text);
            let parsed: Value = serde_json::from_str(&text).expect("valid JSON");
            prop_assert_eq!(&parsed, &value);
            // Key order survives too.
            prop_assert_eq!(dumps(&parsed), text);
        }

        #[test]
        fn strings_round_trip(text in any::<String>()) {
            let parsed: String = serde_json::from_str(&dumps(&json!(text))).expect("valid JSON");
            prop_assert_eq!(parsed, text);
        }

        #[test]
        fn floats_round_trip(float in any::<f64>().prop_filter("finite", |f| f.is_finite())) {
            let text = dumps(&json!(float));
            let parsed: f64 = text.parse().expect("a float literal");
            prop_assert_eq!(parsed.to_bits(), float.to_bits());
        }
    }
}
