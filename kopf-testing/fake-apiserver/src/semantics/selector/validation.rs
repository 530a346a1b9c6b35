//! Kubernetes' rules for the keys and values in label selectors, with apimachinery's messages.

/// Formats a field validation error like apimachinery's `field.Invalid(path, value, detail)`.
pub(super) fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {value:?}: {detail}")
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

/// Validation messages for a label key (apimachinery `validation.IsQualifiedName`, which is
/// `content.IsLabelKey`); empty = valid.
pub(crate) fn qualified_name_errors(key: &str) -> Vec<String> {
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
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
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
pub(super) fn label_value_error(key: &str, index: usize, value: &str) -> Option<String> {
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
