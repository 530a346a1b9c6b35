//! Durations as handler options take them: a number of seconds (`10`, `1.5`) or a string
//! with units (`"500ms"`, `"1m30s"`), checked at compile time; any other expression is
//! passed on as a `std::time::Duration`.

use proc_macro2::TokenStream;
use quote::ToTokens as _;

use super::{Duration, Errors};

const DURATION_HELP: &str = "expected a duration: a number of seconds (`10`, `1.5`) or a string with units (`\"500ms\"`, `\"10s\"`, `\"5m\"`, `\"1h\"`, `\"1m30s\"`)";

pub(super) fn duration(value: TokenStream, errors: &mut Errors) -> Option<Duration> {
    let literal = match syn::parse2::<syn::Expr>(value.clone()) {
        Ok(syn::Expr::Lit(syn::ExprLit { lit, .. })) => lit,
        Ok(syn::Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Neg(_),
            expr,
            ..
        })) if matches!(&*expr, syn::Expr::Lit(_)) => {
            errors.push(syn::Error::new_spanned(
                value,
                format!("a duration cannot be negative: {DURATION_HELP}"),
            ));
            return None;
        }
        _ => return Some(Duration::Expr(value)),
    };
    let span = literal.span();
    let parsed = match &literal {
        syn::Lit::Str(text) => parse_duration(&text.value()),
        syn::Lit::Int(number) if number.suffix().is_empty() => {
            parse_number(number.base10_digits(), SECOND)
        }
        syn::Lit::Float(number) if number.suffix().is_empty() => {
            parse_number(number.base10_digits(), SECOND)
        }
        _ => None,
    };
    match parsed {
        Some(nanos) if nanos <= u128::from(u64::MAX) * SECOND => Some(Duration::Literal {
            secs: (nanos / SECOND) as u64,
            nanos: (nanos % SECOND) as u32,
            span,
        }),
        _ => {
            let shown = literal.to_token_stream().to_string();
            errors.at(span, format!("bad duration {shown}: {DURATION_HELP}"));
            None
        }
    }
}

const SECOND: u128 = 1_000_000_000;

/// `"500ms"`, `"10s"`, `"1.5m"`, `"1h30m"`, `"10"` (seconds) into nanoseconds.
fn parse_duration(text: &str) -> Option<u128> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if text.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return parse_number(text, SECOND);
    }
    let mut total: u128 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let (number, after) = rest.split_at(number_len);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let scale = match unit {
            "ms" => 1_000_000,
            "s" => SECOND,
            "m" => 60 * SECOND,
            "h" => 3600 * SECOND,
            _ => return None,
        };
        total = total.checked_add(parse_number(number, scale)?)?;
        rest = after;
    }
    Some(total)
}

/// A decimal number (no sign, no exponent) times `scale`, exactly.
fn parse_number(text: &str, scale: u128) -> Option<u128> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    if !whole
        .chars()
        .chain(fraction.chars())
        .all(|c| c.is_ascii_digit())
        || fraction.len() > 18
    {
        return None;
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let fraction_value: u128 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().ok()?
    };
    let fraction_scale = 10u128.pow(fraction.len() as u32);
    whole
        .checked_mul(scale)?
        .checked_add(fraction_value.checked_mul(scale)? / fraction_scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Some(500_000_000));
        assert_eq!(parse_duration("10s"), Some(10 * SECOND));
        assert_eq!(parse_duration("5m"), Some(300 * SECOND));
        assert_eq!(parse_duration("1h"), Some(3600 * SECOND));
        assert_eq!(parse_duration("1m30s"), Some(90 * SECOND));
        assert_eq!(parse_duration("1.5s"), Some(1_500_000_000));
        assert_eq!(parse_duration("10"), Some(10 * SECOND));
        assert_eq!(parse_duration("0.25"), Some(SECOND / 4));
        for bad in ["", "10x", "s", "1..5s", "-1s", "1 s", "ms10"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
