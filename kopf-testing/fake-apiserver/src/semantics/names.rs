//! Kubernetes' naming rules (DNS-1123 labels and subdomains, label keys and values).

/// Why a name is not valid, or `None` when it is: `metadata.name` of most resources.
pub(crate) fn check_subdomain(name: &str) -> Option<String> {
    if name.len() > 253 {
        return Some("must be no more than 253 characters".into());
    }
    let ok = !name.is_empty() && name.split('.').all(|part| is_label(part, usize::MAX));
    (!ok).then(|| {
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into()
    })
}

/// Why a name is not a valid DNS-1123 label (namespaces), or `None`.
pub(crate) fn check_label(name: &str) -> Option<String> {
    if name.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    (!is_label(name, 63)).then(|| {
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".into()
    })
}

fn is_label(part: &str, max: usize) -> bool {
    let bytes = part.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= max
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// Why a label value is not valid, or `None`.
pub(crate) fn check_label_value(value: &str) -> Option<String> {
    if value.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    (!value.is_empty() && !is_label_value(value)).then(|| {
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".into()
    })
}

fn is_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names() {
        assert_eq!(check_subdomain("example.com"), None);
        assert_eq!(check_subdomain("kopf-example-1"), None);
        assert!(check_subdomain("").is_some());
        assert!(check_subdomain("Upper").is_some());
        assert!(check_subdomain("-x").is_some());
        assert!(check_subdomain("a..b").is_some());
        assert!(check_subdomain(&"a".repeat(254)).is_some());
        assert_eq!(check_label("default"), None);
        assert!(check_label("a.b").is_some());
        assert!(check_label(&"a".repeat(64)).is_some());
        assert_eq!(check_label_value(""), None);
        assert!(check_label_value("-x").is_some());
    }

    proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = check_subdomain(&s);
            let _ = check_label(&s);
            let _ = check_label_value(&s);
        }

        #[test]
        fn generated_names_are_valid(s in "[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?") {
            prop_assert_eq!(check_label(&s), None);
            prop_assert_eq!(check_subdomain(&s), None);
        }
    }
}
