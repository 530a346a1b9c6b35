//! How a message type is described: its fields with their numbers, JSON names, value kinds and
//! cardinalities.

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
    /// `map<string, ExtraValue>` (ExtraValue {1: repeated string items}), a JSON object of string
    /// arrays.
    StringListMap,
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
    pub(super) number: u64,
    /// The JSON name.
    pub(super) name: &'static str,
    /// The value type.
    pub(super) kind: Kind,
    /// Cardinality and omission rule.
    pub(super) card: Card,
}

/// A message type: its name (for errors) and its known fields in Go struct (JSON output) order.
pub(crate) struct Schema {
    /// The message name, used in error messages.
    pub(super) name: &'static str,
    /// The fields decoded; any other field number is skipped.
    pub(super) fields: &'static [Field],
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
