//! Why a selector string was rejected, worded as the real server words it.

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
