//! Reading a schema leniently (anything ill-typed reads as absent): its keywords, properties,
//! items and extensions, and the paths of fields in messages.

use serde_json::{Map, Value};

use crate::semantics::go_format::Num;

/// Deepest nesting walked in values and schemas; anything deeper is left as it is.
pub(super) const MAX_DEPTH: usize = 256;
/// Fields of a resource that are the server's business rather than the schema's.
const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];
/// Extension keeping the fields a schema does not name.
pub(super) const PRESERVE: &str = "x-kubernetes-preserve-unknown-fields";
/// Extension marking an object as a whole resource (apiVersion, kind, metadata).
pub(super) const EMBEDDED: &str = "x-kubernetes-embedded-resource";
/// Extension allowing an integer or a string.
pub(super) const INT_OR_STRING: &str = "x-kubernetes-int-or-string";
/// Extension saying how a list merges: atomic, set or map.
pub(super) const LIST_TYPE: &str = "x-kubernetes-list-type";
/// Extension naming the keys of a list of type map.
pub(super) const LIST_MAP_KEYS: &str = "x-kubernetes-list-map-keys";
/// Extension saying how a map merges: atomic or granular.
pub(super) const MAP_TYPE: &str = "x-kubernetes-map-type";

/// String formats the apiserver keeps in CRD schemas (normalized: without dashes).
pub(super) const STRING_FORMATS: [&str; 26] = [
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "k8sshortname",
    "k8slongname",
];

/// What `additionalProperties` says.
#[derive(Clone, Copy)]
pub(super) enum Additional<'a> {
    /// Not given (or not a boolean nor a schema).
    Absent,
    /// A boolean.
    Allows(bool),
    /// A schema for the values.
    Schema(&'a Value),
}

/// A keyword of a schema node.
pub(super) fn kw<'a>(s: &'a Value, key: &str) -> Option<&'a Value> {
    s.as_object()?.get(key)
}

/// Whether a boolean keyword is true.
pub(super) fn is_true(s: &Value, key: &str) -> bool {
    matches!(kw(s, key), Some(Value::Bool(true)))
}

/// A string keyword.
pub(super) fn str_kw<'a>(s: &'a Value, key: &str) -> Option<&'a str> {
    kw(s, key)?.as_str()
}

/// The `properties` of a schema node.
pub(super) fn props(s: &Value) -> Option<&Map<String, Value>> {
    kw(s, "properties")?.as_object()
}

/// The schema of one named property.
pub(super) fn prop<'a>(s: &'a Value, key: &str) -> Option<&'a Value> {
    props(s)?.get(key)
}

/// The `items` schema, when it is a single schema object.
pub(super) fn items_schema(s: &Value) -> Option<&Value> {
    kw(s, "items").filter(|v| v.is_object())
}

/// The `additionalProperties` of a schema node.
pub(super) fn additional(s: &Value) -> Additional<'_> {
    match kw(s, "additionalProperties") {
        Some(Value::Bool(b)) => Additional::Allows(*b),
        Some(v @ Value::Object(_)) => Additional::Schema(v),
        _ => Additional::Absent,
    }
}

/// The schema of a field that is not a named property: additionalProperties' schema.
pub(super) fn field_schema<'a>(s: &'a Value, key: &str) -> Option<&'a Value> {
    prop(s, key).or(match additional(s) {
        Additional::Schema(a) => Some(a),
        _ => None,
    })
}

/// The `default` of a schema node (null counts as none, as in Kubernetes).
pub(super) fn default_of(s: &Value) -> Option<&Value> {
    kw(s, "default").filter(|v| !v.is_null())
}

/// The non-empty `type` of a schema node.
pub(super) fn type_str(s: &Value) -> Option<&str> {
    str_kw(s, "type").filter(|t| !t.is_empty())
}

/// An integer keyword (integral floats accepted).
pub(super) fn int_kw(s: &Value, key: &str) -> Option<i64> {
    match kw(s, key)? {
        Value::Number(n) => match Num::of(n) {
            Num::Int(i) => Some(i),
            Num::Float(f) => (f.fract() == 0.0 && f.abs() < 9.0e18).then_some(f as i64),
        },
        _ => None,
    }
}

/// A numeric keyword.
pub(super) fn num_kw(s: &Value, key: &str) -> Option<f64> {
    kw(s, key)?.as_f64()
}

/// Whether a key is one of apiVersion, kind, metadata.
pub(super) fn is_meta(key: &str) -> bool {
    META_FIELDS.contains(&key)
}

/// The path of a named child, as kube-openapi and field.Path join them.
pub(super) fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The path of an array element.
pub(super) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}
