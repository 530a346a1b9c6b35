//! Why a Kubernetes protobuf body could not be decoded.

/// Why a Kubernetes protobuf body could not be decoded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProtobufError {
    /// The body does not start with `k8s\0`.
    #[error("bad magic: a kubernetes protobuf body must start with \"k8s\\0\"")]
    BadMagic,
    /// A value runs past the end of its message.
    #[error("truncated protobuf message")]
    Truncated,
    /// A varint has more than 10 bytes.
    #[error("malformed protobuf varint longer than 10 bytes")]
    VarintTooLong,
    /// A field tag names field number 0.
    #[error("invalid protobuf field number 0")]
    InvalidFieldNumber,
    /// A field uses a wire type this reader does not handle (groups, or 6 and 7).
    #[error("unsupported protobuf wire type {wire_type} for field {field}")]
    UnsupportedWireType {
        /// The field number.
        field: u64,
        /// The wire type found in the tag.
        wire_type: u8,
    },
    /// A known field arrived with a wire type that does not fit its declared type.
    #[error("field {message}.{field} has protobuf wire type {got}, expected {expected}")]
    WrongWireType {
        /// The message the field belongs to.
        message: &'static str,
        /// The field's JSON name.
        field: &'static str,
        /// The wire type found.
        got: u8,
        /// The wire type the field's type calls for.
        expected: u8,
    },
    /// The `runtime.Unknown` envelope names no apiVersion or no kind.
    #[error("missing apiVersion or kind in the protobuf envelope")]
    MissingTypeMeta,
    /// The kind (with its apiVersion) is not in the decoding table.
    #[error(
        "unsupported kind \"{kind}\" (apiVersion \"{api_version}\") in a protobuf body; send it as application/json"
    )]
    UnsupportedKind {
        /// The envelope's apiVersion.
        api_version: String,
        /// The envelope's kind.
        kind: String,
    },
    /// The envelope says its raw bytes are compressed or otherwise encoded.
    #[error("unsupported content encoding \"{0}\" in the protobuf envelope")]
    UnsupportedContentEncoding(String),
    /// The envelope says its raw bytes are not protobuf.
    #[error("unsupported content type \"{0}\" in the protobuf envelope")]
    UnsupportedContentType(String),
    /// An `intstr.IntOrString` has a type other than 0 (int) or 1 (string).
    #[error("field {message}.{field} has invalid IntOrString type {value}")]
    InvalidIntOrString {
        /// The message the field belongs to.
        message: &'static str,
        /// The field's JSON name.
        field: &'static str,
        /// The type found.
        value: i64,
    },
    /// A timestamp is outside the years 0 to 9999 that RFC 3339 can express.
    #[error("field {message}.{field} has a timestamp out of range")]
    TimeOutOfRange {
        /// The message the field belongs to.
        message: &'static str,
        /// The field's JSON name.
        field: &'static str,
    },
    /// A managed fields entry's `fieldsV1` is not JSON.
    #[error("field {message}.{field} is not valid json: {source}")]
    InvalidFieldsV1 {
        /// The message the field belongs to.
        message: &'static str,
        /// The field's JSON name.
        field: &'static str,
        /// The JSON parser's complaint.
        source: serde_json::Error,
    },
}

/// Shorthand for results of this module.
pub(crate) type Result<T> = std::result::Result<T, ProtobufError>;
