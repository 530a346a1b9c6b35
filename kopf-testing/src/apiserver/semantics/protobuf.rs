//! Decodes Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) into the equivalent Kubernetes JSON, for a fixed table of built-in kinds.
//!
//! A body is the magic `k8s\0` followed by a `runtime.Unknown` envelope whose `raw` bytes hold the
//! object's message. Messages are decoded with a small table-driven schema whose field numbers come
//! from the `generated.proto` files of `k8s.io/api` and `k8s.io/apimachinery`; fields missing from
//! the table are skipped.
//!
//! Go clients (gogo-protobuf) always write non-pointer fields, even when they hold their zero
//! value. To get the JSON that the same client would have sent, a non-pointer field whose JSON tag
//! has `omitempty` is dropped when it is zero (`""`, `0`, `false`), a zero `metav1.Time` (an empty
//! message) is dropped, and empty lists and maps are dropped. Pointer fields keep whatever was sent,
//! zero included, and nested structs that were sent are kept even when empty (`"status": {}`), as
//! Go's JSON encoder does. Map keys come out sorted, as Go writes them.
//! A non-repeated field sent twice keeps its last value (nested messages are not merged).
//!
//! Covered kinds (other kinds are rejected with [`ProtobufError::UnsupportedKind`]):
//! - `v1` Namespace (spec, status), ConfigMap, Secret, ServiceAccount, Service (spec only), Pod
//!   (spec only);
//! - `apps/v1` Deployment (spec only);
//! - `coordination.k8s.io/v1` Lease.
//!
//! Skipped (silently dropped) parts of the covered kinds: Service/Pod/Deployment status; in PodSpec
//! `ephemeralContainers`, `affinity`, `hostAliases`, `dnsConfig`, `readinessGates`,
//! `topologySpreadConstraints`, `schedulingGates`, `resourceClaims`, `schedulingGroup`,
//! `evictionResponders`; in Container `resizePolicy`, `restartPolicyRules`, `volumeDevices`,
//! `lifecycle`; in SecurityContext `windowsOptions`, in PodSecurityContext `windowsOptions`;
//! volume sources other than `hostPath`, `emptyDir`, `secret`, `persistentVolumeClaim` and
//! `configMap`.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Map, Value};
use time::OffsetDateTime;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;

use Kind::{Bool, Int32, Int64, Message, Quantity, String as Str};

/// The 4-byte prefix of every Kubernetes protobuf body.
pub(crate) const MAGIC: &[u8] = b"k8s\0";

/// The content type a `runtime.Unknown` envelope may name for its raw bytes (besides none).
pub(crate) const PROTOBUF_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// JSON layout of `metav1.Time`: RFC 3339 in UTC, whole seconds.
pub(crate) const TIME_FORMAT: &[BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");

/// JSON layout of `metav1.MicroTime`: RFC 3339 in UTC with 6 fractional digits.
pub(crate) const MICRO_TIME_FORMAT: &[BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");

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

/// Decodes a Kubernetes protobuf body: the 4-byte magic `k8s\0`, then a `runtime.Unknown` message (1: typeMeta {1: apiVersion, 2: kind}, 2: raw bytes, 3: contentEncoding, 4: contentType); `raw` is the object's message, decoded by the kind named in typeMeta. Returns the object as Kubernetes JSON, with "apiVersion" and "kind" first.
pub(crate) fn decode(body: &[u8]) -> std::result::Result<Value, ProtobufError> {
    let envelope = body.strip_prefix(MAGIC).ok_or(ProtobufError::BadMagic)?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    let mut content_encoding = String::new();
    let mut content_type = String::new();
    for_each_field(envelope, |number, wire| {
        match number {
            1 => {
                let type_meta = expect_bytes("Unknown", "typeMeta", wire)?;
                for_each_field(type_meta, |number, wire| {
                    match number {
                        1 => api_version = text(expect_bytes("TypeMeta", "apiVersion", wire)?),
                        2 => kind = text(expect_bytes("TypeMeta", "kind", wire)?),
                        _ => {}
                    }
                    Ok(())
                })?;
            }
            2 => raw = expect_bytes("Unknown", "raw", wire)?,
            3 => content_encoding = text(expect_bytes("Unknown", "contentEncoding", wire)?),
            4 => content_type = text(expect_bytes("Unknown", "contentType", wire)?),
            _ => {}
        }
        Ok(())
    })?;
    if api_version.is_empty() || kind.is_empty() {
        return Err(ProtobufError::MissingTypeMeta);
    }
    let Some(&(_, _, schema)) = KINDS
        .iter()
        .find(|(v, k, _)| *v == api_version && *k == kind)
    else {
        return Err(ProtobufError::UnsupportedKind { api_version, kind });
    };
    if !content_encoding.is_empty() {
        return Err(ProtobufError::UnsupportedContentEncoding(content_encoding));
    }
    if !content_type.is_empty() && content_type != PROTOBUF_CONTENT_TYPE {
        return Err(ProtobufError::UnsupportedContentType(content_type));
    }
    let fields = decode_message(schema, raw)?;
    let mut object = Map::new();
    object.insert("apiVersion".to_owned(), Value::String(api_version));
    object.insert("kind".to_owned(), Value::String(kind));
    object.extend(fields);
    Ok(Value::Object(object))
}

// ---------------------------------------------------------------------------------------------
// Wire format
// ---------------------------------------------------------------------------------------------

/// One field value as it appears on the wire.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wire<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64,
    /// Wire type 2.
    Bytes(&'a [u8]),
    /// Wire type 5.
    Fixed32,
}

impl Wire<'_> {
    /// The wire type number of this value.
    pub(crate) fn wire_type(self) -> u8 {
        match self {
            Wire::Varint(_) => 0,
            Wire::Fixed64 => 1,
            Wire::Bytes(_) => 2,
            Wire::Fixed32 => 5,
        }
    }
}

/// A cursor over the bytes of one message.
pub(crate) struct Reader<'a> {
    /// The bytes not read yet.
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Starts reading `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { rest: buf }
    }

    /// Whether everything has been read.
    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// Reads a base-128 varint of at most 10 bytes (bits beyond 64 are dropped, as Go does).
    pub(crate) fn varint(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.rest.split_first().ok_or(ProtobufError::Truncated)?;
            self.rest = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(ProtobufError::VarintTooLong)
    }

    /// Reads the next `len` bytes.
    pub(crate) fn take(&mut self, len: u64) -> Result<&'a [u8]> {
        let len = usize::try_from(len).map_err(|_| ProtobufError::Truncated)?;
        let (head, rest) = self
            .rest
            .split_at_checked(len)
            .ok_or(ProtobufError::Truncated)?;
        self.rest = rest;
        Ok(head)
    }

    /// Reads `N` bytes as a little-endian array.
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let bytes = self.take(N as u64)?;
        <[u8; N]>::try_from(bytes).map_err(|_| ProtobufError::Truncated)
    }

    /// Reads the next field's number and value, or `None` at the end of the message.
    pub(crate) fn next_field(&mut self) -> Result<Option<(u64, Wire<'a>)>> {
        if self.is_empty() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let number = tag >> 3;
        if number == 0 {
            return Err(ProtobufError::InvalidFieldNumber);
        }
        let wire = match tag & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => {
                self.array::<8>()?;
                Wire::Fixed64
            }
            2 => {
                let len = self.varint()?;
                Wire::Bytes(self.take(len)?)
            }
            5 => {
                self.array::<4>()?;
                Wire::Fixed32
            }
            other => {
                return Err(ProtobufError::UnsupportedWireType {
                    field: number,
                    wire_type: other as u8,
                });
            }
        };
        Ok(Some((number, wire)))
    }
}

/// Calls `f` with each field of the message in `buf`, in wire order.
pub(crate) fn for_each_field<'a>(
    buf: &'a [u8],
    mut f: impl FnMut(u64, Wire<'a>) -> Result<()>,
) -> Result<()> {
    let mut reader = Reader::new(buf);
    while let Some((number, wire)) = reader.next_field()? {
        f(number, wire)?;
    }
    Ok(())
}

/// The bytes of a length-delimited field, or a wire type error naming `message.field`.
pub(crate) fn expect_bytes<'a>(
    message: &'static str,
    field: &'static str,
    wire: Wire<'a>,
) -> Result<&'a [u8]> {
    match wire {
        Wire::Bytes(bytes) => Ok(bytes),
        other => Err(ProtobufError::WrongWireType {
            message,
            field,
            got: other.wire_type(),
            expected: 2,
        }),
    }
}

/// The value of a varint field, or a wire type error naming `message.field`.
pub(crate) fn expect_varint(
    message: &'static str,
    field: &'static str,
    wire: Wire<'_>,
) -> Result<u64> {
    match wire {
        Wire::Varint(value) => Ok(value),
        other => Err(ProtobufError::WrongWireType {
            message,
            field,
            got: other.wire_type(),
            expected: 0,
        }),
    }
}

/// Bytes as a string; invalid UTF-8 becomes U+FFFD, as Go's JSON encoder does.
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Bytes as Kubernetes JSON encodes `[]byte`: standard base64 with padding.
pub(crate) fn base64(bytes: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
}

// ---------------------------------------------------------------------------------------------
// Schema
// ---------------------------------------------------------------------------------------------

/// How a field is encoded on the wire and rendered in JSON.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    /// `string`, a JSON string.
    String,
    /// `bool`, a JSON boolean.
    Bool,
    /// `int32` varint (negative values sign-extended to 64 bits), a JSON number.
    Int32,
    /// `int64` varint, a JSON number.
    Int64,
    /// A nested message, a JSON object.
    Message(&'static Schema),
    /// An embedded Go struct (`json:",inline"`): a nested message whose fields join the parent's.
    Inline(&'static Schema),
    /// `map<string, string>`, a JSON object of strings.
    StringMap,
    /// `map<string, bytes>`, a JSON object of base64 strings.
    BytesMap,
    /// `map<string, resource.Quantity>`, a JSON object of quantity strings.
    QuantityMap,
    /// `metav1.Time` {1: seconds, 2: nanos}, RFC 3339 with whole seconds.
    Time,
    /// `metav1.MicroTime` {1: seconds, 2: nanos}, RFC 3339 with microseconds.
    MicroTime,
    /// `intstr.IntOrString` {1: type, 2: intVal, 3: strVal}, a JSON number or string.
    IntOrString,
    /// `resource.Quantity` {1: string}, a JSON string.
    Quantity,
    /// `metav1.FieldsV1` {1: raw JSON bytes}, the parsed JSON.
    FieldsV1,
}

/// How many values a field holds and when a single value is left out of the JSON.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Card {
    /// A pointer field, a field without `omitempty`, or a struct: kept whenever it was sent.
    Keep,
    /// A non-pointer `omitempty` scalar: left out when zero (`""`, `0`, `false`).
    OmitZero,
    /// A repeated field: a JSON array, left out when empty.
    Repeated,
}

/// One field of a message schema.
pub(crate) struct Field {
    /// The protobuf field number.
    number: u64,
    /// The JSON name.
    name: &'static str,
    /// The value type.
    kind: Kind,
    /// Cardinality and omission rule.
    card: Card,
}

/// A message type: its name (for errors) and its known fields in Go struct (JSON output) order.
pub(crate) struct Schema {
    /// The message name, used in error messages.
    name: &'static str,
    /// The fields decoded; any other field number is skipped.
    fields: &'static [Field],
}

/// A field kept whenever it was sent (pointer, non-`omitempty` field, struct or map).
pub(crate) const fn keep(number: u64, name: &'static str, kind: Kind) -> Field {
    Field {
        number,
        name,
        kind,
        card: Card::Keep,
    }
}

/// A non-pointer `omitempty` scalar field, left out when zero.
pub(crate) const fn omit(number: u64, name: &'static str, kind: Kind) -> Field {
    Field {
        number,
        name,
        kind,
        card: Card::OmitZero,
    }
}

/// A repeated field.
pub(crate) const fn rep(number: u64, name: &'static str, kind: Kind) -> Field {
    Field {
        number,
        name,
        kind,
        card: Card::Repeated,
    }
}

/// The decodable kinds: (apiVersion, kind, schema).
pub(crate) static KINDS: &[(&str, &str, &Schema)] = &[
    ("v1", "Namespace", &NAMESPACE),
    ("v1", "ConfigMap", &CONFIG_MAP),
    ("v1", "Secret", &SECRET),
    ("v1", "ServiceAccount", &SERVICE_ACCOUNT),
    ("v1", "Service", &SERVICE),
    ("v1", "Pod", &POD),
    ("apps/v1", "Deployment", &DEPLOYMENT),
    ("coordination.k8s.io/v1", "Lease", &LEASE),
];

// --- k8s.io/apimachinery/pkg/apis/meta/v1 ---

/// meta/v1 ObjectMeta.
pub(crate) static OBJECT_META: Schema = Schema {
    name: "ObjectMeta",
    fields: &[
        omit(1, "name", Str),
        omit(2, "generateName", Str),
        omit(3, "namespace", Str),
        omit(4, "selfLink", Str),
        omit(5, "uid", Str),
        omit(6, "resourceVersion", Str),
        omit(7, "generation", Int64),
        keep(8, "creationTimestamp", Kind::Time),
        keep(9, "deletionTimestamp", Kind::Time),
        keep(10, "deletionGracePeriodSeconds", Int64),
        keep(11, "labels", Kind::StringMap),
        keep(12, "annotations", Kind::StringMap),
        rep(13, "ownerReferences", Message(&OWNER_REFERENCE)),
        rep(14, "finalizers", Str),
        rep(17, "managedFields", Message(&MANAGED_FIELDS_ENTRY)),
    ],
};

/// meta/v1 OwnerReference.
pub(crate) static OWNER_REFERENCE: Schema = Schema {
    name: "OwnerReference",
    fields: &[
        keep(5, "apiVersion", Str),
        keep(1, "kind", Str),
        keep(3, "name", Str),
        keep(4, "uid", Str),
        keep(6, "controller", Bool),
        keep(7, "blockOwnerDeletion", Bool),
    ],
};

/// meta/v1 ManagedFieldsEntry.
pub(crate) static MANAGED_FIELDS_ENTRY: Schema = Schema {
    name: "ManagedFieldsEntry",
    fields: &[
        omit(1, "manager", Str),
        omit(2, "operation", Str),
        omit(3, "apiVersion", Str),
        keep(4, "time", Kind::Time),
        omit(6, "fieldsType", Str),
        keep(7, "fieldsV1", Kind::FieldsV1),
        omit(8, "subresource", Str),
    ],
};

/// meta/v1 LabelSelector.
pub(crate) static LABEL_SELECTOR: Schema = Schema {
    name: "LabelSelector",
    fields: &[
        keep(1, "matchLabels", Kind::StringMap),
        rep(2, "matchExpressions", Message(&LABEL_SELECTOR_REQUIREMENT)),
    ],
};

/// meta/v1 LabelSelectorRequirement.
pub(crate) static LABEL_SELECTOR_REQUIREMENT: Schema = Schema {
    name: "LabelSelectorRequirement",
    fields: &[
        keep(1, "key", Str),
        keep(2, "operator", Str),
        rep(3, "values", Str),
    ],
};

// --- k8s.io/api/core/v1: Namespace, ConfigMap, Secret, ServiceAccount ---

/// core/v1 Namespace.
pub(crate) static NAMESPACE: Schema = Schema {
    name: "Namespace",
    fields: &[
        keep(1, "metadata", Message(&OBJECT_META)),
        keep(2, "spec", Message(&NAMESPACE_SPEC)),
        keep(3, "status", Message(&NAMESPACE_STATUS)),
    ],
};

/// core/v1 NamespaceSpec.
pub(crate) static NAMESPACE_SPEC: Schema = Schema {
    name: "NamespaceSpec",
    fields: &[rep(1, "finalizers", Str)],
};

/// core/v1 NamespaceStatus.
pub(crate) static NAMESPACE_STATUS: Schema = Schema {
    name: "NamespaceStatus",
    fields: &[
        omit(1, "phase", Str),
        rep(2, "conditions", Message(&NAMESPACE_CONDITION)),
    ],
};

/// core/v1 NamespaceCondition.
pub(crate) static NAMESPACE_CONDITION: Schema = Schema {
    name: "NamespaceCondition",
    fields: &[
        keep(1, "type", Str),
        keep(2, "status", Str),
        keep(4, "lastTransitionTime", Kind::Time),
        omit(5, "reason", Str),
        omit(6, "message", Str),
    ],
};

/// core/v1 ConfigMap.
pub(crate) static CONFIG_MAP: Schema = Schema {
    name: "ConfigMap",
    fields: &[
        keep(1, "metadata", Message(&OBJECT_META)),
        keep(4, "immutable", Bool),
        keep(2, "data", Kind::StringMap),
        keep(3, "binaryData", Kind::BytesMap),
    ],
};

/// core/v1 Secret.
pub(crate) static SECRET: Schema = Schema {
    name: "Secret",
    fields: &[
        keep(1, "metadata", Message(&OBJECT_META)),
        keep(5, "immutable", Bool),
        keep(2, "data", Kind::BytesMap),
        keep(4, "stringData", Kind::StringMap),
        omit(3, "type", Str),
    ],
};

/// core/v1 ServiceAccount.
pub(crate) static SERVICE_ACCOUNT: Schema = Schema {
    name: "ServiceAccount",
    fields: &[
        keep(1, "metadata", Message(&OBJECT_META)),
        rep(2, "secrets", Message(&OBJECT_REFERENCE)),
        rep(3, "imagePullSecrets", Message(&LOCAL_OBJECT_REFERENCE)),
        keep(4, "automountServiceAccountToken", Bool),
    ],
};

/// core/v1 ObjectReference.
pub(crate) static OBJECT_REFERENCE: Schema = Schema {
    name: "ObjectReference",
    fields: &[
        omit(1, "kind", Str),
        omit(2, "namespace", Str),
        omit(3, "name", Str),
        omit(4, "uid", Str),
        omit(5, "apiVersion", Str),
        omit(6, "resourceVersion", Str),
        omit(7, "fieldPath", Str),
    ],
};

/// core/v1 LocalObjectReference.
pub(crate) static LOCAL_OBJECT_REFERENCE: Schema = Schema {
    name: "LocalObjectReference",
    fields: &[omit(1, "name", Str)],
};

// --- k8s.io/api/core/v1: Service ---

/// core/v1 Service (status is skipped).
pub(crate) static SERVICE: Schema = Schema {
    name: "Service",
    fields: &[
        keep(1, "metadata", Message(&OBJECT_META)),
        keep(2, "spec", Message(&SERVICE_SPEC)),
    ],
};

/// core/v1 ServiceSpec.
pub(crate) static SERVICE_SPEC: Schema = Schema {
    name: "ServiceSpec",
    fields: &[
        rep(1, "ports", Message(&SERVICE_PORT)),
        keep(2, "selector", Kind::StringMap),
        omit(3, "clusterIP", Str),
        rep(18, "clusterIPs", Str),
        omit(4, "type", Str),
        rep(5, "externalIPs", Str),
        omit(7, "sessionAffinity", Str),
        omit(8, "loadBalancerIP", Str),
        rep(9, "loadBalancerSourceRanges", Str),
        omit(10, "externalName", Str),
        omit(11, "externalTrafficPolicy", Str),
        omit(12, "healthCheckNodePort", Int32),
        omit(13, "publishNotReadyAddresses", Bool),
        keep(
            14,
            "sessionAffinityConfig",
            Message(&SESSION_AFFINITY_CONFIG),
        ),
        rep(19, "ipFamilies", Str),
        keep(17, "ipFamilyPolicy", Str),
        keep(20, "allocateLoadBalancerNodePorts", Bool),
        keep(21, "loadBalancerClass", Str),
        keep(22, "internalTrafficPolicy", Str),
        keep(23, "trafficDistribution", Str),
    ],
};

/// core/v1 ServicePort.
pub(crate) static SERVICE_PORT: Schema = Schema {
    name: "ServicePort",
    fields: &[
        omit(1, "name", Str),
        omit(2, "protocol", Str),
        keep(6, "appProtocol", Str),
        keep(3, "port", Int32),
        omit(4, "targetPort", Kind::IntOrString),
        omit(5, "nodePort", Int32),
    ],
};

/// core/v1 SessionAffinityConfig.
pub(crate) static SESSION_AFFINITY_CONFIG: Schema = Schema {
    name: "SessionAffinityConfig",
    fields: &[keep(1, "clientIP", Message(&CLIENT_IP_CONFIG))],
};

/// core/v1 ClientIPConfig.
pub(crate) static CLIENT_IP_CONFIG: Schema = Schema {
    name: "ClientIPConfig",
    fields: &[keep(1, "timeoutSeconds", Int32)],
};

// --- k8s.io/api/core/v1: Pod ---

/// core/v1 Pod (status is skipped).
pub(crate) static POD: Schema = Schema {
    name: "Pod",
    fields: &[
        keep(1, "metadata", Message(&OBJECT_META)),
        keep(2, "spec", Message(&POD_SPEC)),
    ],
};

/// core/v1 PodTemplateSpec.
pub(crate) static POD_TEMPLATE_SPEC: Schema = Schema {
    name: "PodTemplateSpec",
    fields: &[
        keep(1, "metadata", Message(&OBJECT_META)),
        keep(2, "spec", Message(&POD_SPEC)),
    ],
};

/// core/v1 PodSpec (a subset; see the module documentation).
pub(crate) static POD_SPEC: Schema = Schema {
    name: "PodSpec",
    fields: &[
        rep(1, "volumes", Message(&VOLUME)),
        rep(20, "initContainers", Message(&CONTAINER)),
        rep(2, "containers", Message(&CONTAINER)),
        omit(3, "restartPolicy", Str),
        keep(4, "terminationGracePeriodSeconds", Int64),
        keep(5, "activeDeadlineSeconds", Int64),
        omit(6, "dnsPolicy", Str),
        keep(7, "nodeSelector", Kind::StringMap),
        omit(8, "serviceAccountName", Str),
        omit(9, "serviceAccount", Str),
        keep(21, "automountServiceAccountToken", Bool),
        omit(10, "nodeName", Str),
        omit(11, "hostNetwork", Bool),
        omit(12, "hostPID", Bool),
        omit(13, "hostIPC", Bool),
        keep(27, "shareProcessNamespace", Bool),
        keep(14, "securityContext", Message(&POD_SECURITY_CONTEXT)),
        rep(15, "imagePullSecrets", Message(&LOCAL_OBJECT_REFERENCE)),
        omit(16, "hostname", Str),
        omit(17, "subdomain", Str),
        omit(19, "schedulerName", Str),
        rep(22, "tolerations", Message(&TOLERATION)),
        omit(24, "priorityClassName", Str),
        keep(25, "priority", Int32),
        keep(29, "runtimeClassName", Str),
        keep(30, "enableServiceLinks", Bool),
        keep(31, "preemptionPolicy", Str),
        keep(32, "overhead", Kind::QuantityMap),
        keep(35, "setHostnameAsFQDN", Bool),
        keep(36, "os", Message(&POD_OS)),
        keep(37, "hostUsers", Bool),
        keep(40, "resources", Message(&RESOURCE_REQUIREMENTS)),
        keep(41, "hostnameOverride", Str),
    ],
};

/// core/v1 PodOS.
pub(crate) static POD_OS: Schema = Schema {
    name: "PodOS",
    fields: &[keep(1, "name", Str)],
};

/// core/v1 Toleration.
pub(crate) static TOLERATION: Schema = Schema {
    name: "Toleration",
    fields: &[
        omit(1, "key", Str),
        omit(2, "operator", Str),
        omit(3, "value", Str),
        omit(4, "effect", Str),
        keep(5, "tolerationSeconds", Int64),
    ],
};

/// core/v1 PodSecurityContext (without windowsOptions).
pub(crate) static POD_SECURITY_CONTEXT: Schema = Schema {
    name: "PodSecurityContext",
    fields: &[
        keep(1, "seLinuxOptions", Message(&SE_LINUX_OPTIONS)),
        keep(2, "runAsUser", Int64),
        keep(6, "runAsGroup", Int64),
        keep(3, "runAsNonRoot", Bool),
        rep(4, "supplementalGroups", Int64),
        keep(12, "supplementalGroupsPolicy", Str),
        keep(5, "fsGroup", Int64),
        rep(7, "sysctls", Message(&SYSCTL)),
        keep(9, "fsGroupChangePolicy", Str),
        keep(10, "seccompProfile", Message(&SECCOMP_PROFILE)),
        keep(11, "appArmorProfile", Message(&APP_ARMOR_PROFILE)),
        keep(13, "seLinuxChangePolicy", Str),
    ],
};

/// core/v1 SecurityContext (without windowsOptions).
pub(crate) static SECURITY_CONTEXT: Schema = Schema {
    name: "SecurityContext",
    fields: &[
        keep(1, "capabilities", Message(&CAPABILITIES)),
        keep(2, "privileged", Bool),
        keep(3, "seLinuxOptions", Message(&SE_LINUX_OPTIONS)),
        keep(4, "runAsUser", Int64),
        keep(8, "runAsGroup", Int64),
        keep(5, "runAsNonRoot", Bool),
        keep(6, "readOnlyRootFilesystem", Bool),
        keep(7, "allowPrivilegeEscalation", Bool),
        keep(9, "procMount", Str),
        keep(11, "seccompProfile", Message(&SECCOMP_PROFILE)),
        keep(12, "appArmorProfile", Message(&APP_ARMOR_PROFILE)),
    ],
};

/// core/v1 Capabilities.
pub(crate) static CAPABILITIES: Schema = Schema {
    name: "Capabilities",
    fields: &[rep(1, "add", Str), rep(2, "drop", Str)],
};

/// core/v1 SELinuxOptions.
pub(crate) static SE_LINUX_OPTIONS: Schema = Schema {
    name: "SELinuxOptions",
    fields: &[
        omit(1, "user", Str),
        omit(2, "role", Str),
        omit(3, "type", Str),
        omit(4, "level", Str),
    ],
};

/// core/v1 SeccompProfile.
pub(crate) static SECCOMP_PROFILE: Schema = Schema {
    name: "SeccompProfile",
    fields: &[keep(1, "type", Str), keep(2, "localhostProfile", Str)],
};

/// core/v1 AppArmorProfile.
pub(crate) static APP_ARMOR_PROFILE: Schema = Schema {
    name: "AppArmorProfile",
    fields: &[keep(1, "type", Str), keep(2, "localhostProfile", Str)],
};

/// core/v1 Sysctl.
pub(crate) static SYSCTL: Schema = Schema {
    name: "Sysctl",
    fields: &[keep(1, "name", Str), keep(2, "value", Str)],
};

/// core/v1 Container (a subset; see the module documentation).
pub(crate) static CONTAINER: Schema = Schema {
    name: "Container",
    fields: &[
        keep(1, "name", Str),
        omit(2, "image", Str),
        rep(3, "command", Str),
        rep(4, "args", Str),
        omit(5, "workingDir", Str),
        rep(6, "ports", Message(&CONTAINER_PORT)),
        rep(19, "envFrom", Message(&ENV_FROM_SOURCE)),
        rep(7, "env", Message(&ENV_VAR)),
        keep(8, "resources", Message(&RESOURCE_REQUIREMENTS)),
        keep(24, "restartPolicy", Str),
        rep(9, "volumeMounts", Message(&VOLUME_MOUNT)),
        keep(10, "livenessProbe", Message(&PROBE)),
        keep(11, "readinessProbe", Message(&PROBE)),
        keep(22, "startupProbe", Message(&PROBE)),
        omit(13, "terminationMessagePath", Str),
        omit(20, "terminationMessagePolicy", Str),
        omit(14, "imagePullPolicy", Str),
        keep(15, "securityContext", Message(&SECURITY_CONTEXT)),
        omit(16, "stdin", Bool),
        omit(17, "stdinOnce", Bool),
        omit(18, "tty", Bool),
    ],
};

/// core/v1 ContainerPort.
pub(crate) static CONTAINER_PORT: Schema = Schema {
    name: "ContainerPort",
    fields: &[
        omit(1, "name", Str),
        omit(2, "hostPort", Int32),
        keep(3, "containerPort", Int32),
        omit(4, "protocol", Str),
        omit(5, "hostIP", Str),
    ],
};

/// core/v1 EnvVar.
pub(crate) static ENV_VAR: Schema = Schema {
    name: "EnvVar",
    fields: &[
        keep(1, "name", Str),
        omit(2, "value", Str),
        keep(3, "valueFrom", Message(&ENV_VAR_SOURCE)),
    ],
};

/// core/v1 EnvVarSource.
pub(crate) static ENV_VAR_SOURCE: Schema = Schema {
    name: "EnvVarSource",
    fields: &[
        keep(1, "fieldRef", Message(&OBJECT_FIELD_SELECTOR)),
        keep(2, "resourceFieldRef", Message(&RESOURCE_FIELD_SELECTOR)),
        keep(3, "configMapKeyRef", Message(&KEY_SELECTOR)),
        keep(4, "secretKeyRef", Message(&KEY_SELECTOR)),
        keep(5, "fileKeyRef", Message(&FILE_KEY_SELECTOR)),
    ],
};

/// core/v1 ObjectFieldSelector.
pub(crate) static OBJECT_FIELD_SELECTOR: Schema = Schema {
    name: "ObjectFieldSelector",
    fields: &[omit(1, "apiVersion", Str), keep(2, "fieldPath", Str)],
};

/// core/v1 ResourceFieldSelector.
pub(crate) static RESOURCE_FIELD_SELECTOR: Schema = Schema {
    name: "ResourceFieldSelector",
    fields: &[
        omit(1, "containerName", Str),
        keep(2, "resource", Str),
        keep(3, "divisor", Quantity),
    ],
};

/// core/v1 ConfigMapKeySelector and SecretKeySelector (same layout).
pub(crate) static KEY_SELECTOR: Schema = Schema {
    name: "KeySelector",
    fields: &[
        keep(
            1,
            "localObjectReference",
            Kind::Inline(&LOCAL_OBJECT_REFERENCE),
        ),
        keep(2, "key", Str),
        keep(3, "optional", Bool),
    ],
};

/// core/v1 FileKeySelector.
pub(crate) static FILE_KEY_SELECTOR: Schema = Schema {
    name: "FileKeySelector",
    fields: &[
        keep(1, "volumeName", Str),
        keep(2, "path", Str),
        keep(3, "key", Str),
        keep(4, "optional", Bool),
    ],
};

/// core/v1 EnvFromSource.
pub(crate) static ENV_FROM_SOURCE: Schema = Schema {
    name: "EnvFromSource",
    fields: &[
        omit(1, "prefix", Str),
        keep(2, "configMapRef", Message(&ENV_SOURCE)),
        keep(3, "secretRef", Message(&ENV_SOURCE)),
    ],
};

/// core/v1 ConfigMapEnvSource and SecretEnvSource (same layout).
pub(crate) static ENV_SOURCE: Schema = Schema {
    name: "EnvSource",
    fields: &[
        keep(
            1,
            "localObjectReference",
            Kind::Inline(&LOCAL_OBJECT_REFERENCE),
        ),
        keep(2, "optional", Bool),
    ],
};

/// core/v1 ResourceRequirements.
pub(crate) static RESOURCE_REQUIREMENTS: Schema = Schema {
    name: "ResourceRequirements",
    fields: &[
        keep(1, "limits", Kind::QuantityMap),
        keep(2, "requests", Kind::QuantityMap),
        rep(3, "claims", Message(&RESOURCE_CLAIM)),
    ],
};

/// core/v1 ResourceClaim.
pub(crate) static RESOURCE_CLAIM: Schema = Schema {
    name: "ResourceClaim",
    fields: &[keep(1, "name", Str), omit(2, "request", Str)],
};

/// core/v1 VolumeMount.
pub(crate) static VOLUME_MOUNT: Schema = Schema {
    name: "VolumeMount",
    fields: &[
        keep(1, "name", Str),
        omit(2, "readOnly", Bool),
        keep(7, "recursiveReadOnly", Str),
        keep(3, "mountPath", Str),
        omit(4, "subPath", Str),
        keep(5, "mountPropagation", Str),
        omit(6, "subPathExpr", Str),
        rep(8, "bindMountOptions", Str),
    ],
};

/// core/v1 Probe.
pub(crate) static PROBE: Schema = Schema {
    name: "Probe",
    fields: &[
        keep(1, "handler", Kind::Inline(&PROBE_HANDLER)),
        omit(2, "initialDelaySeconds", Int32),
        omit(3, "timeoutSeconds", Int32),
        omit(4, "periodSeconds", Int32),
        omit(5, "successThreshold", Int32),
        omit(6, "failureThreshold", Int32),
        keep(7, "terminationGracePeriodSeconds", Int64),
    ],
};

/// core/v1 ProbeHandler.
pub(crate) static PROBE_HANDLER: Schema = Schema {
    name: "ProbeHandler",
    fields: &[
        keep(1, "exec", Message(&EXEC_ACTION)),
        keep(2, "httpGet", Message(&HTTP_GET_ACTION)),
        keep(3, "tcpSocket", Message(&TCP_SOCKET_ACTION)),
        keep(4, "grpc", Message(&GRPC_ACTION)),
    ],
};

/// core/v1 ExecAction.
pub(crate) static EXEC_ACTION: Schema = Schema {
    name: "ExecAction",
    fields: &[rep(1, "command", Str)],
};

/// core/v1 HTTPGetAction.
pub(crate) static HTTP_GET_ACTION: Schema = Schema {
    name: "HTTPGetAction",
    fields: &[
        omit(1, "path", Str),
        keep(2, "port", Kind::IntOrString),
        omit(3, "host", Str),
        omit(4, "scheme", Str),
        rep(5, "httpHeaders", Message(&HTTP_HEADER)),
        keep(6, "protocol", Str),
    ],
};

/// core/v1 HTTPHeader.
pub(crate) static HTTP_HEADER: Schema = Schema {
    name: "HTTPHeader",
    fields: &[keep(1, "name", Str), keep(2, "value", Str)],
};

/// core/v1 TCPSocketAction.
pub(crate) static TCP_SOCKET_ACTION: Schema = Schema {
    name: "TCPSocketAction",
    fields: &[keep(1, "port", Kind::IntOrString), omit(2, "host", Str)],
};

/// core/v1 GRPCAction.
pub(crate) static GRPC_ACTION: Schema = Schema {
    name: "GRPCAction",
    fields: &[
        keep(1, "port", Int32),
        keep(2, "service", Str),
        keep(3, "mode", Str),
    ],
};

/// core/v1 Volume.
pub(crate) static VOLUME: Schema = Schema {
    name: "Volume",
    fields: &[
        keep(1, "name", Str),
        keep(2, "volumeSource", Kind::Inline(&VOLUME_SOURCE)),
    ],
};

/// core/v1 VolumeSource (hostPath, emptyDir, secret, persistentVolumeClaim and configMap only).
pub(crate) static VOLUME_SOURCE: Schema = Schema {
    name: "VolumeSource",
    fields: &[
        keep(1, "hostPath", Message(&HOST_PATH_VOLUME_SOURCE)),
        keep(2, "emptyDir", Message(&EMPTY_DIR_VOLUME_SOURCE)),
        keep(6, "secret", Message(&SECRET_VOLUME_SOURCE)),
        keep(10, "persistentVolumeClaim", Message(&PVC_VOLUME_SOURCE)),
        keep(19, "configMap", Message(&CONFIG_MAP_VOLUME_SOURCE)),
    ],
};

/// core/v1 HostPathVolumeSource.
pub(crate) static HOST_PATH_VOLUME_SOURCE: Schema = Schema {
    name: "HostPathVolumeSource",
    fields: &[keep(1, "path", Str), keep(2, "type", Str)],
};

/// core/v1 EmptyDirVolumeSource.
pub(crate) static EMPTY_DIR_VOLUME_SOURCE: Schema = Schema {
    name: "EmptyDirVolumeSource",
    fields: &[
        omit(1, "medium", Str),
        keep(2, "sizeLimit", Quantity),
        keep(3, "mode", Int32),
    ],
};

/// core/v1 SecretVolumeSource.
pub(crate) static SECRET_VOLUME_SOURCE: Schema = Schema {
    name: "SecretVolumeSource",
    fields: &[
        omit(1, "secretName", Str),
        rep(2, "items", Message(&KEY_TO_PATH)),
        keep(3, "defaultMode", Int32),
        keep(4, "optional", Bool),
        keep(5, "defaultUser", Int64),
    ],
};

/// core/v1 ConfigMapVolumeSource.
pub(crate) static CONFIG_MAP_VOLUME_SOURCE: Schema = Schema {
    name: "ConfigMapVolumeSource",
    fields: &[
        keep(
            1,
            "localObjectReference",
            Kind::Inline(&LOCAL_OBJECT_REFERENCE),
        ),
        rep(2, "items", Message(&KEY_TO_PATH)),
        keep(3, "defaultMode", Int32),
        keep(4, "optional", Bool),
        keep(5, "defaultUser", Int64),
    ],
};

/// core/v1 PersistentVolumeClaimVolumeSource.
pub(crate) static PVC_VOLUME_SOURCE: Schema = Schema {
    name: "PersistentVolumeClaimVolumeSource",
    fields: &[keep(1, "claimName", Str), omit(2, "readOnly", Bool)],
};

/// core/v1 KeyToPath.
pub(crate) static KEY_TO_PATH: Schema = Schema {
    name: "KeyToPath",
    fields: &[
        keep(1, "key", Str),
        keep(2, "path", Str),
        keep(3, "mode", Int32),
        keep(4, "user", Int64),
    ],
};

// --- k8s.io/api/apps/v1 ---

/// apps/v1 Deployment (status is skipped).
pub(crate) static DEPLOYMENT: Schema = Schema {
    name: "Deployment",
    fields: &[
        keep(1, "metadata", Message(&OBJECT_META)),
        keep(2, "spec", Message(&DEPLOYMENT_SPEC)),
    ],
};

/// apps/v1 DeploymentSpec.
pub(crate) static DEPLOYMENT_SPEC: Schema = Schema {
    name: "DeploymentSpec",
    fields: &[
        keep(1, "replicas", Int32),
        keep(2, "selector", Message(&LABEL_SELECTOR)),
        keep(3, "template", Message(&POD_TEMPLATE_SPEC)),
        keep(4, "strategy", Message(&DEPLOYMENT_STRATEGY)),
        omit(5, "minReadySeconds", Int32),
        keep(6, "revisionHistoryLimit", Int32),
        omit(7, "paused", Bool),
        keep(9, "progressDeadlineSeconds", Int32),
    ],
};

/// apps/v1 DeploymentStrategy.
pub(crate) static DEPLOYMENT_STRATEGY: Schema = Schema {
    name: "DeploymentStrategy",
    fields: &[
        omit(1, "type", Str),
        keep(2, "rollingUpdate", Message(&ROLLING_UPDATE_DEPLOYMENT)),
    ],
};

/// apps/v1 RollingUpdateDeployment.
pub(crate) static ROLLING_UPDATE_DEPLOYMENT: Schema = Schema {
    name: "RollingUpdateDeployment",
    fields: &[
        keep(1, "maxUnavailable", Kind::IntOrString),
        keep(2, "maxSurge", Kind::IntOrString),
    ],
};

// --- k8s.io/api/coordination/v1 ---

/// coordination/v1 Lease.
pub(crate) static LEASE: Schema = Schema {
    name: "Lease",
    fields: &[
        keep(1, "metadata", Message(&OBJECT_META)),
        keep(2, "spec", Message(&LEASE_SPEC)),
    ],
};

/// coordination/v1 LeaseSpec.
pub(crate) static LEASE_SPEC: Schema = Schema {
    name: "LeaseSpec",
    fields: &[
        keep(1, "holderIdentity", Str),
        keep(2, "leaseDurationSeconds", Int32),
        keep(3, "acquireTime", Kind::MicroTime),
        keep(4, "renewTime", Kind::MicroTime),
        keep(5, "leaseTransitions", Int32),
        keep(6, "strategy", Str),
        keep(7, "preferredHolder", Str),
    ],
};

// ---------------------------------------------------------------------------------------------
// Decoding by schema
// ---------------------------------------------------------------------------------------------

/// What has been decoded so far for one field of a message.
#[derive(Default)]
pub(crate) struct Slot {
    /// The value of a single field (the last one sent wins).
    one: Option<Value>,
    /// The values of a repeated field, in wire order.
    list: Vec<Value>,
    /// The entries of a map field, sorted by key (the last one sent per key wins).
    entries: BTreeMap<String, Value>,
}

/// Decodes the message in `buf` by `schema` into a JSON object with the fields in schema order.
pub(crate) fn decode_message(schema: &'static Schema, buf: &[u8]) -> Result<Map<String, Value>> {
    let mut slots: Vec<Slot> = schema.fields.iter().map(|_| Slot::default()).collect();
    for_each_field(buf, |number, wire| {
        let found = schema
            .fields
            .iter()
            .zip(slots.iter_mut())
            .find(|(field, _)| field.number == number);
        match found {
            Some((field, slot)) => decode_field(schema, field, wire, slot),
            None => Ok(()),
        }
    })?;
    let mut out = Map::new();
    for (field, slot) in schema.fields.iter().zip(slots) {
        let name = field.name.to_owned();
        match (field.kind, field.card) {
            (Kind::StringMap | Kind::BytesMap | Kind::QuantityMap, _) => {
                if !slot.entries.is_empty() {
                    out.insert(name, Value::Object(slot.entries.into_iter().collect()));
                }
            }
            (_, Card::Repeated) => {
                if !slot.list.is_empty() {
                    out.insert(name, Value::Array(slot.list));
                }
            }
            (Kind::Inline(_), _) => {
                if let Some(Value::Object(inner)) = slot.one {
                    out.extend(inner);
                }
            }
            _ => {
                if let Some(value) = slot.one {
                    out.insert(name, value);
                }
            }
        }
    }
    Ok(out)
}

/// Decodes one occurrence of `field` into its slot.
pub(crate) fn decode_field(
    schema: &'static Schema,
    field: &Field,
    wire: Wire<'_>,
    slot: &mut Slot,
) -> Result<()> {
    match (field.kind, field.card, wire) {
        (Kind::StringMap | Kind::BytesMap | Kind::QuantityMap, _, _) => {
            let entry = expect_bytes(schema.name, field.name, wire)?;
            let (key, value) = decode_map_entry(schema, field, entry)?;
            slot.entries.insert(key, value);
        }
        (Kind::Bool | Kind::Int32 | Kind::Int64, Card::Repeated, Wire::Bytes(packed)) => {
            let mut reader = Reader::new(packed);
            while !reader.is_empty() {
                let value = reader.varint()?;
                slot.list.push(varint_value(field.kind, value));
            }
        }
        (_, Card::Repeated, _) => {
            if let Some(value) = decode_value(schema, field, wire)? {
                slot.list.push(value);
            }
        }
        (_, card, _) => {
            let value = decode_value(schema, field, wire)?;
            slot.one = value.filter(|value| card != Card::OmitZero || !is_zero(value));
        }
    }
    Ok(())
}

/// A varint as JSON for a bool, int32 or int64 field.
pub(crate) fn varint_value(kind: Kind, value: u64) -> Value {
    match kind {
        Kind::Bool => Value::Bool(value != 0),
        // int32 is sign-extended to 64 bits on the wire; Go keeps the low 32 bits.
        Kind::Int32 => Value::from(value as i32),
        _ => Value::from(value as i64),
    }
}

/// Whether a scalar is Go's zero value, which `omitempty` leaves out.
pub(crate) fn is_zero(value: &Value) -> bool {
    match value {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        _ => false,
    }
}

/// Decodes one non-map value of `field`; `None` for a zero time or an empty `fieldsV1`.
pub(crate) fn decode_value(
    schema: &'static Schema,
    field: &Field,
    wire: Wire<'_>,
) -> Result<Option<Value>> {
    let (message, name) = (schema.name, field.name);
    let value = match field.kind {
        Kind::String => Value::String(text(expect_bytes(message, name, wire)?)),
        Kind::Bool | Kind::Int32 | Kind::Int64 => {
            varint_value(field.kind, expect_varint(message, name, wire)?)
        }
        Kind::Message(inner) | Kind::Inline(inner) => {
            Value::Object(decode_message(inner, expect_bytes(message, name, wire)?)?)
        }
        Kind::Time | Kind::MicroTime => {
            return decode_time(
                message,
                name,
                field.kind,
                expect_bytes(message, name, wire)?,
            );
        }
        Kind::IntOrString => {
            decode_int_or_string(message, name, expect_bytes(message, name, wire)?)?
        }
        Kind::Quantity => Value::String(decode_quantity(expect_bytes(message, name, wire)?)?),
        Kind::FieldsV1 => {
            return decode_fields_v1(message, name, expect_bytes(message, name, wire)?);
        }
        Kind::StringMap | Kind::BytesMap | Kind::QuantityMap => {
            // Maps are decoded entry by entry in `decode_field`; treat a stray call as a bytes value.
            base64(expect_bytes(message, name, wire)?)
        }
    };
    Ok(Some(value))
}

/// Decodes a map entry {1: key string, 2: value} of a map field.
pub(crate) fn decode_map_entry(
    schema: &'static Schema,
    field: &Field,
    buf: &[u8],
) -> Result<(String, Value)> {
    let mut key = String::new();
    let mut value = None;
    for_each_field(buf, |number, wire| {
        match number {
            1 => key = text(expect_bytes(schema.name, field.name, wire)?),
            2 => {
                let bytes = expect_bytes(schema.name, field.name, wire)?;
                value = Some(match field.kind {
                    Kind::BytesMap => base64(bytes),
                    Kind::QuantityMap => Value::String(decode_quantity(bytes)?),
                    _ => Value::String(text(bytes)),
                });
            }
            _ => {}
        }
        Ok(())
    })?;
    let value = value.unwrap_or_else(|| match field.kind {
        Kind::QuantityMap => Value::String("0".to_owned()),
        _ => Value::String(String::new()),
    });
    Ok((key, value))
}

/// Decodes a `metav1.Time` or `metav1.MicroTime`; an empty message is the zero time, `None`.
///
/// Like the apiserver, `Time` drops the nanoseconds and `MicroTime` truncates them to microseconds.
pub(crate) fn decode_time(
    message: &'static str,
    field: &'static str,
    kind: Kind,
    buf: &[u8],
) -> Result<Option<Value>> {
    if buf.is_empty() {
        return Ok(None);
    }
    let mut seconds = 0i64;
    let mut nanos = 0i32;
    for_each_field(buf, |number, wire| {
        match number {
            1 => seconds = expect_varint("Timestamp", "seconds", wire)? as i64,
            2 => nanos = expect_varint("Timestamp", "nanos", wire)? as i32,
            _ => {}
        }
        Ok(())
    })?;
    let (nanos, format) = match kind {
        Kind::MicroTime => (
            nanos.saturating_div(1000).saturating_mul(1000),
            MICRO_TIME_FORMAT,
        ),
        _ => (0, TIME_FORMAT),
    };
    let out_of_range = || ProtobufError::TimeOutOfRange { message, field };
    let total = i128::from(seconds)
        .saturating_mul(1_000_000_000)
        .saturating_add(i128::from(nanos));
    let time = OffsetDateTime::from_unix_timestamp_nanos(total).map_err(|_| out_of_range())?;
    if !(0..=9999).contains(&time.year()) {
        return Err(out_of_range());
    }
    let text = time.format(format).map_err(|_| out_of_range())?;
    Ok(Some(Value::String(text)))
}

/// Decodes an `intstr.IntOrString` {1: type, 2: intVal, 3: strVal} into a JSON number or string.
pub(crate) fn decode_int_or_string(
    message: &'static str,
    field: &'static str,
    buf: &[u8],
) -> Result<Value> {
    let mut kind = 0i64;
    let mut int_val = 0i32;
    let mut str_val = String::new();
    for_each_field(buf, |number, wire| {
        match number {
            1 => kind = expect_varint("IntOrString", "type", wire)? as i64,
            2 => int_val = expect_varint("IntOrString", "intVal", wire)? as i32,
            3 => str_val = text(expect_bytes("IntOrString", "strVal", wire)?),
            _ => {}
        }
        Ok(())
    })?;
    match kind {
        0 => Ok(Value::from(int_val)),
        1 => Ok(Value::String(str_val)),
        value => Err(ProtobufError::InvalidIntOrString {
            message,
            field,
            value,
        }),
    }
}

/// Decodes a `resource.Quantity` {1: string}; an absent string is the zero quantity, "0".
pub(crate) fn decode_quantity(buf: &[u8]) -> Result<String> {
    let mut quantity = None;
    for_each_field(buf, |number, wire| {
        if number == 1 {
            quantity = Some(text(expect_bytes("Quantity", "string", wire)?));
        }
        Ok(())
    })?;
    Ok(quantity.unwrap_or_else(|| "0".to_owned()))
}

/// Decodes a `metav1.FieldsV1` {1: raw JSON}; empty raw bytes give `None`.
pub(crate) fn decode_fields_v1(
    message: &'static str,
    field: &'static str,
    buf: &[u8],
) -> Result<Option<Value>> {
    let mut raw: &[u8] = &[];
    for_each_field(buf, |number, wire| {
        if number == 1 {
            raw = expect_bytes("FieldsV1", "raw", wire)?;
        }
        Ok(())
    })?;
    if raw.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(raw)
        .map(Some)
        .map_err(|source| ProtobufError::InvalidFieldsV1 {
            message,
            field,
            source,
        })
}

/// Tests, with a tiny encoder that builds bodies the way client-go lays them out.
#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// A tiny protobuf encoder for building test bodies.
    #[derive(Default)]
    struct Enc(Vec<u8>);

    impl Enc {
        /// An empty message.
        fn new() -> Self {
            Enc::default()
        }

        /// Appends a raw varint.
        fn raw_varint(&mut self, mut value: u64) {
            loop {
                let byte = (value & 0x7f) as u8;
                value >>= 7;
                if value == 0 {
                    self.0.push(byte);
                    return;
                }
                self.0.push(byte | 0x80);
            }
        }

        /// Appends a tag.
        fn tag(&mut self, number: u64, wire_type: u64) {
            self.raw_varint(number << 3 | wire_type);
        }

        /// Appends a varint field.
        fn varint(mut self, number: u64, value: u64) -> Self {
            self.tag(number, 0);
            self.raw_varint(value);
            self
        }

        /// Appends a signed integer field (sign-extended, as Go writes int32 and int64).
        fn int(self, number: u64, value: i64) -> Self {
            self.varint(number, value as u64)
        }

        /// Appends a length-delimited field.
        fn bytes(mut self, number: u64, bytes: &[u8]) -> Self {
            self.tag(number, 2);
            self.raw_varint(bytes.len() as u64);
            self.0.extend_from_slice(bytes);
            self
        }

        /// Appends a string field.
        fn str(self, number: u64, s: &str) -> Self {
            self.bytes(number, s.as_bytes())
        }

        /// Appends a nested message field.
        fn msg(self, number: u64, message: Enc) -> Self {
            self.bytes(number, &message.0)
        }

        /// Appends a map entry with a string key and a bytes value.
        fn entry(self, number: u64, key: &str, value: &[u8]) -> Self {
            self.msg(number, Enc::new().str(1, key).bytes(2, value))
        }

        /// Appends a 64-bit field.
        fn fixed64(mut self, number: u64, value: u64) -> Self {
            self.tag(number, 1);
            self.0.extend_from_slice(&value.to_le_bytes());
            self
        }

        /// Appends a 32-bit field.
        fn fixed32(mut self, number: u64, value: u32) -> Self {
            self.tag(number, 5);
            self.0.extend_from_slice(&value.to_le_bytes());
            self
        }
    }

    /// A whole body: magic plus a `runtime.Unknown` holding `raw`, as client-go writes it.
    fn body(api_version: &str, kind: &str, raw: Enc) -> Vec<u8> {
        let unknown = Enc::new()
            .msg(1, Enc::new().str(1, api_version).str(2, kind))
            .msg(2, raw)
            .str(3, "")
            .str(4, "");
        let mut out = MAGIC.to_vec();
        out.extend(unknown.0);
        out
    }

    /// An ObjectMeta as gogo writes it: every non-pointer field present, zero or not.
    fn meta(name: &str) -> Enc {
        Enc::new()
            .str(1, name)
            .str(2, "")
            .str(3, "")
            .str(4, "")
            .str(5, "")
            .str(6, "")
            .varint(7, 0)
            .msg(8, Enc::new())
    }

    /// An IntOrString holding an int.
    fn int_or_string_int(value: i64) -> Enc {
        Enc::new().varint(1, 0).int(2, value).str(3, "")
    }

    /// An IntOrString holding a string.
    fn int_or_string_str(value: &str) -> Enc {
        Enc::new().varint(1, 1).varint(2, 0).str(3, value)
    }

    /// Decodes and compares with `expected`, key order included.
    fn check(body: &[u8], expected: Value) {
        let got = decode(body).expect("decodes");
        assert_eq!(
            serde_json::to_string_pretty(&got).expect("serializes"),
            serde_json::to_string_pretty(&expected).expect("serializes")
        );
    }

    /// A namespace as `kubectl create namespace` sends it.
    #[test]
    fn namespace() {
        let raw = Enc::new()
            .msg(1, meta("demo"))
            .msg(2, Enc::new())
            .msg(3, Enc::new().str(1, ""));
        check(
            &body("v1", "Namespace", raw),
            json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "demo"},
                "spec": {},
                "status": {}
            }),
        );
    }

    /// A config map: sorted map keys, zero pointer kept, zero strings dropped.
    #[test]
    fn config_map_with_data_and_labels() {
        let raw = Enc::new()
            .msg(
                1,
                meta("settings")
                    .str(3, "default")
                    .entry(11, "tier", b"backend")
                    .entry(11, "app", b"web")
                    .entry(12, "note", b""),
            )
            .entry(2, "b.txt", b"two")
            .entry(2, "a.txt", b"one")
            .entry(3, "blob", &[0, 1, 2])
            .varint(4, 0);
        check(
            &body("v1", "ConfigMap", raw),
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "settings",
                    "namespace": "default",
                    "labels": {"app": "web", "tier": "backend"},
                    "annotations": {"note": ""}
                },
                "immutable": false,
                "data": {"a.txt": "one", "b.txt": "two"},
                "binaryData": {"blob": "AAEC"}
            }),
        );
    }

    /// A secret: bytes values as base64, unknown fields of every wire type skipped.
    #[test]
    fn secret_with_bytes_and_unknown_fields() {
        let raw = Enc::new()
            .msg(1, meta("creds"))
            .entry(2, "password", b"s3cr\xff")
            .msg(2, Enc::new().str(1, "empty"))
            .str(3, "Opaque")
            .fixed32(90, 7)
            .fixed64(91, 8)
            .varint(92, 9)
            .str(93, "ignored");
        check(
            &body("v1", "Secret", raw),
            json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "creds"},
                "data": {"empty": "", "password": "czNjcv8="},
                "type": "Opaque"
            }),
        );
    }

    /// A deployment with a pod template, IntOrString, quantities and an inline selector name.
    #[test]
    fn deployment_with_template_and_int_or_string() {
        let container = Enc::new()
            .str(1, "web")
            .str(2, "nginx:1.27")
            .str(5, "")
            .msg(
                6,
                Enc::new()
                    .str(1, "")
                    .varint(2, 0)
                    .varint(3, 80)
                    .str(4, "TCP")
                    .str(5, ""),
            )
            .msg(
                7,
                Enc::new().str(1, "TOKEN").str(2, "").msg(
                    3,
                    Enc::new().msg(
                        4,
                        Enc::new()
                            .msg(1, Enc::new().str(1, "creds"))
                            .str(2, "token"),
                    ),
                ),
            )
            .msg(7, Enc::new().str(1, "MODE").str(2, "fast"))
            .msg(
                8,
                Enc::new()
                    .msg(
                        1,
                        Enc::new().str(1, "cpu").msg(2, Enc::new().str(1, "500m")),
                    )
                    .msg(
                        2,
                        Enc::new()
                            .str(1, "memory")
                            .msg(2, Enc::new().str(1, "64Mi")),
                    ),
            )
            .str(13, "")
            .str(14, "")
            .varint(16, 0);
        let template = Enc::new().msg(1, meta("").entry(11, "app", b"web")).msg(
            2,
            Enc::new()
                .msg(2, container)
                .str(3, "")
                .str(6, "")
                .int(4, 30)
                .str(8, "")
                .str(10, "")
                .varint(11, 0),
        );
        let spec = Enc::new()
            .varint(1, 3)
            .msg(2, Enc::new().entry(1, "app", b"web"))
            .msg(3, template)
            .msg(
                4,
                Enc::new().str(1, "RollingUpdate").msg(
                    2,
                    Enc::new()
                        .msg(1, int_or_string_int(1))
                        .msg(2, int_or_string_str("25%")),
                ),
            )
            .varint(5, 0)
            .varint(6, 10)
            .varint(7, 0)
            .varint(9, 600);
        let raw = Enc::new()
            .msg(1, meta("web").str(3, "default"))
            .msg(2, spec)
            .msg(3, Enc::new().varint(1, 0));
        check(
            &body("apps/v1", "Deployment", raw),
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {
                    "replicas": 3,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {
                            "containers": [{
                                "name": "web",
                                "image": "nginx:1.27",
                                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                                "env": [
                                    {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
                                    {"name": "MODE", "value": "fast"}
                                ],
                                "resources": {"limits": {"cpu": "500m"}, "requests": {"memory": "64Mi"}}
                            }],
                            "terminationGracePeriodSeconds": 30
                        }
                    },
                    "strategy": {
                        "type": "RollingUpdate",
                        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "25%"}
                    },
                    "revisionHistoryLimit": 10,
                    "progressDeadlineSeconds": 600
                }
            }),
        );
    }

    /// A lease: MicroTime with microseconds truncated, zero pointer ints kept.
    #[test]
    fn lease_with_micro_time() {
        let spec = Enc::new()
            .str(1, "node-a")
            .varint(2, 15)
            .msg(
                3,
                Enc::new().varint(1, 1_704_164_645).varint(2, 123_456_789),
            )
            .msg(4, Enc::new().varint(1, 1_704_164_645))
            .varint(5, 0);
        let raw = Enc::new()
            .msg(1, meta("leader").str(3, "kube-system"))
            .msg(2, spec);
        check(
            &body("coordination.k8s.io/v1", "Lease", raw),
            json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": "leader", "namespace": "kube-system"},
                "spec": {
                    "holderIdentity": "node-a",
                    "leaseDurationSeconds": 15,
                    "acquireTime": "2024-01-02T03:04:05.123456Z",
                    "renewTime": "2024-01-02T03:04:05.000000Z",
                    "leaseTransitions": 0
                }
            }),
        );
    }

    /// ObjectMeta: Time drops nanoseconds, owner references, fieldsV1 embedded as JSON.
    #[test]
    fn object_meta_times_owners_and_managed_fields() {
        let owner = Enc::new()
            .str(1, "ReplicaSet")
            .str(3, "web-123")
            .str(4, "uid-1")
            .str(5, "apps/v1")
            .varint(6, 1);
        let managed = Enc::new()
            .str(1, "kubectl")
            .str(2, "Update")
            .str(3, "v1")
            .msg(4, Enc::new().varint(1, 1_704_164_645).varint(2, 999))
            .str(6, "FieldsV1")
            .msg(7, Enc::new().bytes(1, br#"{"f:data":{".":{}}}"#))
            .str(8, "");
        let metadata = meta("x")
            .str(5, "0b5e")
            .str(6, "42")
            .varint(7, 3)
            .msg(8, Enc::new().varint(1, 1_704_164_645).varint(2, 5))
            .int(10, 0)
            .msg(13, owner)
            .str(14, "example.com/cleanup")
            .msg(17, managed);
        check(
            &body("v1", "ConfigMap", Enc::new().msg(1, metadata)),
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "x",
                    "uid": "0b5e",
                    "resourceVersion": "42",
                    "generation": 3,
                    "creationTimestamp": "2024-01-02T03:04:05Z",
                    "deletionGracePeriodSeconds": 0,
                    "ownerReferences": [{
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": "web-123",
                        "uid": "uid-1",
                        "controller": true
                    }],
                    "finalizers": ["example.com/cleanup"],
                    "managedFields": [{
                        "manager": "kubectl",
                        "operation": "Update",
                        "apiVersion": "v1",
                        "time": "2024-01-02T03:04:05Z",
                        "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:data": {".": {}}}
                    }]
                }
            }),
        );
    }

    /// A service (string and zero targetPort) and a service account.
    #[test]
    fn service_and_service_account() {
        let port = Enc::new()
            .str(1, "http")
            .str(2, "TCP")
            .varint(3, 80)
            .msg(4, int_or_string_str("web"))
            .varint(5, 0);
        let zero_target = Enc::new()
            .str(1, "")
            .str(2, "UDP")
            .varint(3, 53)
            .msg(4, int_or_string_int(0));
        let spec = Enc::new()
            .msg(1, port)
            .msg(1, zero_target)
            .entry(2, "app", b"web")
            .str(3, "None")
            .str(18, "None")
            .str(4, "ClusterIP")
            .str(7, "None")
            .str(10, "")
            .varint(13, 0)
            .str(19, "IPv4")
            .str(17, "SingleStack")
            .varint(20, 1);
        check(
            &body(
                "v1",
                "Service",
                Enc::new()
                    .msg(1, meta("web"))
                    .msg(2, spec)
                    .msg(3, Enc::new()),
            ),
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web"},
                "spec": {
                    "ports": [
                        {"name": "http", "protocol": "TCP", "port": 80, "targetPort": "web"},
                        {"protocol": "UDP", "port": 53}
                    ],
                    "selector": {"app": "web"},
                    "clusterIP": "None",
                    "clusterIPs": ["None"],
                    "type": "ClusterIP",
                    "sessionAffinity": "None",
                    "ipFamilies": ["IPv4"],
                    "ipFamilyPolicy": "SingleStack",
                    "allocateLoadBalancerNodePorts": true
                }
            }),
        );
        let sa = Enc::new()
            .msg(1, meta("robot"))
            .msg(2, Enc::new().str(1, "Secret").str(3, "robot-token"))
            .msg(3, Enc::new().str(1, "registry"))
            .varint(4, 0);
        check(
            &body("v1", "ServiceAccount", sa),
            json!({
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "robot"},
                "secrets": [{"kind": "Secret", "name": "robot-token"}],
                "imagePullSecrets": [{"name": "registry"}],
                "automountServiceAccountToken": false
            }),
        );
    }

    /// A pod: inline volume sources and probe handler, packed and unpacked repeated ints.
    #[test]
    fn pod_with_volumes_probes_and_packed_ints() {
        let mut packed = Enc::new();
        packed.raw_varint(1000);
        packed.raw_varint(2000);
        let security = Enc::new().varint(2, 1000).bytes(4, &packed.0).int(4, 3000);
        let probe = Enc::new()
            .msg(
                1,
                Enc::new().msg(
                    2,
                    Enc::new()
                        .str(1, "/healthz")
                        .msg(2, int_or_string_int(8080))
                        .str(3, "")
                        .str(4, "HTTP"),
                ),
            )
            .varint(2, 5)
            .varint(3, 0);
        let container = Enc::new()
            .str(1, "app")
            .str(2, "busybox")
            .str(3, "sh")
            .str(3, "-c")
            .str(4, "sleep 1")
            .msg(9, Enc::new().str(1, "data").varint(2, 1).str(3, "/data"))
            .msg(10, probe)
            .int(99, -1);
        let volumes = [
            Enc::new().str(1, "data").msg(
                2,
                Enc::new().msg(2, Enc::new().str(1, "").msg(2, Enc::new().str(1, "1Gi"))),
            ),
            Enc::new().str(1, "cfg").msg(
                2,
                Enc::new().msg(
                    19,
                    Enc::new().msg(1, Enc::new().str(1, "settings")).int(3, 420),
                ),
            ),
        ];
        let mut spec = Enc::new();
        for volume in volumes {
            spec = spec.msg(1, volume);
        }
        let spec = spec
            .msg(2, container)
            .str(3, "Never")
            .str(6, "ClusterFirst")
            .str(8, "robot")
            .str(10, "node-1")
            .str(19, "default-scheduler")
            .msg(14, security)
            .int(25, -5);
        check(
            &body("v1", "Pod", Enc::new().msg(1, meta("p")).msg(2, spec)),
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p"},
                "spec": {
                    "volumes": [
                        {"name": "data", "emptyDir": {"sizeLimit": "1Gi"}},
                        {"name": "cfg", "configMap": {"name": "settings", "defaultMode": 420}}
                    ],
                    "containers": [{
                        "name": "app",
                        "image": "busybox",
                        "command": ["sh", "-c"],
                        "args": ["sleep 1"],
                        "volumeMounts": [{"name": "data", "readOnly": true, "mountPath": "/data"}],
                        "livenessProbe": {
                            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                            "initialDelaySeconds": 5
                        }
                    }],
                    "restartPolicy": "Never",
                    "dnsPolicy": "ClusterFirst",
                    "serviceAccountName": "robot",
                    "nodeName": "node-1",
                    "securityContext": {"runAsUser": 1000, "supplementalGroups": [1000, 2000, 3000]},
                    "schedulerName": "default-scheduler",
                    "priority": -5
                }
            }),
        );
    }

    /// int32 values keep Go's low 32 bits, negative ones included.
    #[test]
    fn negative_int32_keeps_low_bits() {
        let spec = Enc::new().int(2, -1).varint(5, 0x1_0000_0007);
        check(
            &body("coordination.k8s.io/v1", "Lease", Enc::new().msg(2, spec)),
            json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "spec": {"leaseDurationSeconds": -1, "leaseTransitions": 7}
            }),
        );
    }

    /// Bodies without the magic are rejected.
    #[test]
    fn bad_magic() {
        for bad in [
            &b""[..],
            b"k8s",
            b"k8s\x01rest",
            b"{\"kind\":\"Namespace\"}",
        ] {
            let err = decode(bad).expect_err("bad magic");
            assert!(matches!(err, ProtobufError::BadMagic), "{err:?}");
        }
        assert!(ProtobufError::BadMagic.to_string().starts_with("bad magic"));
    }

    /// Every cut through the envelope or object is reported, as are overlong varints.
    #[test]
    fn truncated() {
        // Envelope with raw last, so every prefix longer than the typeMeta cuts into raw.
        let type_meta = Enc::new().msg(1, Enc::new().str(1, "v1").str(2, "Namespace"));
        let header_len = MAGIC.len() + type_meta.0.len();
        let mut full = MAGIC.to_vec();
        full.extend(type_meta.msg(2, Enc::new().msg(1, meta("demo"))).0);
        assert!(decode(&full).is_ok());
        for len in (MAGIC.len() + 1..header_len).chain(header_len + 1..full.len()) {
            let result = decode(full.get(..len).expect("in range"));
            assert!(result.is_err(), "prefix of {len} bytes decoded");
        }
        let mut long_length = MAGIC.to_vec();
        long_length.extend([0x12, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2]);
        assert!(matches!(
            decode(&long_length),
            Err(ProtobufError::Truncated)
        ));
        let mut cut_varint = MAGIC.to_vec();
        cut_varint.extend([0x08, 0x80]);
        assert!(matches!(decode(&cut_varint), Err(ProtobufError::Truncated)));
        assert_eq!(
            ProtobufError::Truncated.to_string(),
            "truncated protobuf message"
        );
        let mut long_varint = MAGIC.to_vec();
        long_varint.extend([
            0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01,
        ]);
        assert!(matches!(
            decode(&long_varint),
            Err(ProtobufError::VarintTooLong)
        ));
    }

    /// Kinds outside the table are rejected with a hint to use JSON.
    #[test]
    fn unsupported_kind() {
        for (api_version, kind) in [
            ("apps/v1", "StatefulSet"),
            ("v1", "Deployment"),
            ("apps/v1beta1", "Deployment"),
        ] {
            let err = decode(&body(api_version, kind, Enc::new())).expect_err("unsupported");
            assert!(
                matches!(err, ProtobufError::UnsupportedKind { .. }),
                "{err:?}"
            );
        }
        let err = decode(&body("batch/v1", "Job", Enc::new())).expect_err("unsupported");
        assert_eq!(
            err.to_string(),
            "unsupported kind \"Job\" (apiVersion \"batch/v1\") in a protobuf body; send it as application/json"
        );
    }

    /// Envelope problems: missing kind, content encoding, foreign content type.
    #[test]
    fn envelope_errors() {
        let mut no_kind = MAGIC.to_vec();
        no_kind.extend(Enc::new().msg(1, Enc::new().str(1, "v1")).0);
        assert!(matches!(
            decode(&no_kind),
            Err(ProtobufError::MissingTypeMeta)
        ));
        let mut gzip = MAGIC.to_vec();
        gzip.extend(
            Enc::new()
                .msg(1, Enc::new().str(1, "v1").str(2, "Namespace"))
                .str(3, "gzip")
                .0,
        );
        assert!(matches!(
            decode(&gzip),
            Err(ProtobufError::UnsupportedContentEncoding(_))
        ));
        let mut json_type = MAGIC.to_vec();
        json_type.extend(
            Enc::new()
                .msg(1, Enc::new().str(1, "v1").str(2, "Namespace"))
                .str(4, "application/json")
                .0,
        );
        assert!(matches!(
            decode(&json_type),
            Err(ProtobufError::UnsupportedContentType(_))
        ));
        let mut explicit = MAGIC.to_vec();
        explicit.extend(
            Enc::new()
                .msg(1, Enc::new().str(1, "v1").str(2, "Namespace"))
                .str(4, PROTOBUF_CONTENT_TYPE)
                .0,
        );
        assert_eq!(
            decode(&explicit).expect("decodes"),
            json!({"apiVersion": "v1", "kind": "Namespace"})
        );
    }

    /// Field problems: wire type, IntOrString type, time range, fieldsV1, groups, field 0.
    #[test]
    fn field_errors() {
        let wrong_wire = body(
            "v1",
            "Namespace",
            Enc::new().msg(1, Enc::new().varint(1, 5)),
        );
        let err = decode(&wrong_wire).expect_err("wrong wire type");
        assert_eq!(
            err.to_string(),
            "field ObjectMeta.name has protobuf wire type 0, expected 2"
        );
        let bad_int_or_string = body(
            "apps/v1",
            "Deployment",
            Enc::new().msg(
                2,
                Enc::new().msg(
                    4,
                    Enc::new().msg(2, Enc::new().msg(1, Enc::new().varint(1, 2))),
                ),
            ),
        );
        assert!(matches!(
            decode(&bad_int_or_string),
            Err(ProtobufError::InvalidIntOrString { value: 2, .. })
        ));
        let bad_time = body(
            "v1",
            "Namespace",
            Enc::new().msg(1, Enc::new().msg(8, Enc::new().int(1, i64::MAX))),
        );
        assert!(matches!(
            decode(&bad_time),
            Err(ProtobufError::TimeOutOfRange { .. })
        ));
        let bad_fields = body(
            "v1",
            "Namespace",
            Enc::new().msg(
                1,
                Enc::new().msg(17, Enc::new().msg(7, Enc::new().str(1, "{"))),
            ),
        );
        assert!(matches!(
            decode(&bad_fields),
            Err(ProtobufError::InvalidFieldsV1 { .. })
        ));
        let mut group = MAGIC.to_vec();
        group.extend([0x0b]);
        assert!(matches!(
            decode(&group),
            Err(ProtobufError::UnsupportedWireType {
                field: 1,
                wire_type: 3
            })
        ));
        let mut zero = MAGIC.to_vec();
        zero.extend([0x00, 0x00]);
        assert!(matches!(
            decode(&zero),
            Err(ProtobufError::InvalidFieldNumber)
        ));
    }

    proptest! {
        /// Arbitrary bytes, with and without the magic, never panic.
        #[test]
        fn never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode(&bytes);
            let mut with_magic = MAGIC.to_vec();
            with_magic.extend(&bytes);
            let _ = decode(&with_magic);
        }

        /// Arbitrary raw bytes behind a valid envelope never panic, for every kind.
        #[test]
        fn never_panics_on_arbitrary_raw(
            kind in 0usize..KINDS.len(),
            raw in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let (api_version, kind, _) = KINDS.get(kind).copied().expect("in range");
            let mut message = MAGIC.to_vec();
            message.extend(
                Enc::new()
                    .msg(1, Enc::new().str(1, api_version).str(2, kind))
                    .bytes(2, &raw)
                    .0,
            );
            let _ = decode(&message);
        }

        /// A valid body with one byte changed never panics.
        #[test]
        fn never_panics_on_mutated_valid_body(
            index in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            let mut valid = body("coordination.k8s.io/v1", "Lease", Enc::new()
                .msg(1, meta("leader"))
                .msg(2, Enc::new().str(1, "a").msg(3, Enc::new().varint(1, 5).varint(2, 7))));
            let at = index.index(valid.len());
            if let Some(slot) = valid.get_mut(at) {
                *slot = byte;
            }
            let _ = decode(&valid);
        }
    }
}
