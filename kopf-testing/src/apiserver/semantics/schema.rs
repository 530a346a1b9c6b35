//! Structural schemas of custom resources (a CRD version's `schema.openAPIV3Schema`): pruning, defaulting, validation and CRD schema checks, worded as the Kubernetes apiserver words them.
//!
//! The behaviour follows k8s.io/apiextensions-apiserver (pruning, defaulting, structural
//! checks, embedded resources, list types) and kube-openapi's `validate` package (value
//! validation), with their messages as apimachinery's `field.Error` renders them.
//! Schemas come from users and may be malformed: unknown or ill-typed parts are ignored
//! (or reported by [`check_structural`]), and nothing here panics.

use std::collections::HashMap;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use regex::{Regex, RegexBuilder};
use serde_json::{Map, Number, Value};

/// Deepest nesting walked in values and schemas; anything deeper is left as it is.
const MAX_DEPTH: usize = 256;
/// Fields of a resource that are the server's business rather than the schema's.
const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];
/// Extension keeping the fields a schema does not name.
const PRESERVE: &str = "x-kubernetes-preserve-unknown-fields";
/// Extension marking an object as a whole resource (apiVersion, kind, metadata).
const EMBEDDED: &str = "x-kubernetes-embedded-resource";
/// Extension allowing an integer or a string.
const INT_OR_STRING: &str = "x-kubernetes-int-or-string";
/// Extension saying how a list merges: atomic, set or map.
const LIST_TYPE: &str = "x-kubernetes-list-type";
/// Extension naming the keys of a list of type map.
const LIST_MAP_KEYS: &str = "x-kubernetes-list-map-keys";
/// Extension saying how a map merges: atomic or granular.
const MAP_TYPE: &str = "x-kubernetes-map-type";

/// Cause type of a missing required field.
const REQUIRED: &str = "FieldValueRequired";
/// Cause type of a value outside an enum.
const NOT_SUPPORTED: &str = "FieldValueNotSupported";
/// Cause type of a value breaking a constraint.
const INVALID: &str = "FieldValueInvalid";
/// Cause type of a value of the wrong type or format.
const TYPE_INVALID: &str = "FieldValueTypeInvalid";
/// Cause type of a string over maxLength.
const TOO_LONG: &str = "FieldValueTooLong";
/// Cause type of a list or object over maxItems / maxProperties.
const TOO_MANY: &str = "FieldValueTooMany";
/// Cause type of a repeated entry in a list of type set or map.
const DUPLICATE: &str = "FieldValueDuplicate";

/// String formats the apiserver keeps in CRD schemas (normalized: without dashes).
const STRING_FORMATS: [&str; 26] = [
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

/// One validation failure, as Kubernetes reports it in Status.details.causes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    /// The field path, e.g. `spec.replicas` or `spec.items[2].name`; `<nil>` where the apiserver has none (anyOf/oneOf/allOf/not and number-range failures).
    pub(crate) field: String,
    /// The cause type: `FieldValueRequired`, `FieldValueNotSupported`, `FieldValueInvalid`, `FieldValueTypeInvalid`, `FieldValueTooLong`, `FieldValueTooMany` or `FieldValueDuplicate`.
    pub(crate) reason: &'static str,
    /// The message without the field, e.g. `Required value`.
    pub(crate) message: String,
}

impl fmt::Display for FieldError {
    /// Renders `field: message`, as apimachinery's field.Error does.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Drops fields not in the schema, in place (honouring x-kubernetes-preserve-unknown-fields at any level, additionalProperties for maps, items for arrays, x-kubernetes-embedded-resource keeping apiVersion/kind/metadata). At the root, apiVersion, kind and metadata are never pruned (metadata is the server's business). Returns the dotted paths of pruned fields (used for fieldValidation=Strict/Warn: "unknown field \"spec.foo\"").
///
/// As the apiserver does right after pruning, null values of non-nullable fields without
/// a default are dropped too (they are not reported). `additionalProperties: false`
/// drops the unnamed fields even under x-kubernetes-preserve-unknown-fields, so that
/// [`validate`] never reports them as forbidden afterwards.
pub(crate) fn prune(object: &mut Value, schema: &Value) -> Vec<String> {
    let mut unknown = Vec::new();
    prune_node(object, Some(schema), true, "", &mut unknown, 0);
    drop_null_fields(object, Some(schema), true, 0);
    unknown.sort();
    unknown.dedup();
    unknown
}

/// Applies `default` values from the schema, in place, where the field is absent (and, as Kubernetes does, where it is null only if `nullable` is false). Defaults inside defaults are applied too; defaulting happens before validation.
///
/// Default values are pruned against their own schema before they are inserted. The
/// root's apiVersion, kind and metadata are left alone.
pub(crate) fn apply_defaults(object: &mut Value, schema: &Value) {
    default_node(object, schema, true, 0);
}

/// Validates against the schema: type (object, array, string, integer, number, boolean; x-kubernetes-int-or-string; nullable), required, enum, minimum/maximum (+exclusive), minLength/maxLength, pattern, minItems/maxItems, minProperties/maxProperties, format (int32/int64 range, date-time loosely), uniqueItems, and x-kubernetes-list-type set/map uniqueness. The root's apiVersion/kind/metadata are not validated against the schema.
///
/// Also checks multipleOf, allOf/anyOf/oneOf/not (ignoring additionalProperties inside
/// them, which is not structural there), and the apiVersion and kind of nested embedded
/// resources. Order: schema errors as kube-openapi finds them (properties in schema
/// order), then embedded resources, then list duplicates. As in the apiserver, errors
/// that kube-openapi does not tie to a field (anyOf/oneOf/allOf/not, number ranges) have
/// the field `<nil>` and name the field in their message; a null never matches an enum.
pub(crate) fn validate(object: &Value, schema: &Value) -> Vec<FieldError> {
    let mut raw = Vec::new();
    Validator::new().node(object, schema, "", true, 0, &mut raw);
    let mut errors: Vec<FieldError> = raw.into_iter().map(Raw::into_field_error).collect();
    embedded_checks(object, schema, "", true, 0, &mut errors);
    if let Value::Object(map) = object {
        list_checks_map(map, schema, "", true, 0, &mut errors);
    }
    let mut unique: Vec<FieldError> = Vec::with_capacity(errors.len());
    for error in errors {
        if !unique.contains(&error) {
            unique.push(error);
        }
    }
    unique
}

/// Checks that a schema is structural enough to serve (returns human-readable problems, e.g. a missing `type` where required); used to reject bad CRDs with 422.
///
/// Each problem reads like the apiserver's, with a path relative to the version's
/// `schema`, e.g. `openAPIV3Schema.properties[spec].type: Required value: must not be
/// empty for specified object fields`; prefix `spec.versions[N].schema.` for the full
/// field. Sorted and without duplicates; empty when the schema is fine.
pub(crate) fn check_structural(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let path = "openAPIV3Schema";
    if is_true(schema, "nullable") {
        out.push(format!(
            "{path}.nullable: Forbidden: nullable cannot be true at the root"
        ));
    }
    check_schema(schema, path, Level::Root, false, &mut out, 0);
    out.sort();
    out.dedup();
    out
}

/// The full message of a 422 Invalid Status for these errors: `KopfExample.kopf.dev "name" is invalid: [field: message, ...]` (single error without brackets), as the apiserver formats it.
pub(crate) fn invalid_message(kind_group: &str, name: &str, errors: &[FieldError]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for error in errors {
        let text = error.to_string();
        if !seen.contains(&text) {
            seen.push(text);
        }
    }
    let head = format!("{kind_group} {} is invalid", go_quote(name));
    match seen.len() {
        0 => head,
        1 => format!("{head}: {}", seen.join(", ")),
        _ => format!("{head}: [{}]", seen.join(", ")),
    }
}

// ---------------------------------------------------------------------------------------
// Schema access (lenient: anything ill-typed reads as absent)

/// What `additionalProperties` says.
#[derive(Clone, Copy)]
enum Additional<'a> {
    /// Not given (or not a boolean nor a schema).
    Absent,
    /// A boolean.
    Allows(bool),
    /// A schema for the values.
    Schema(&'a Value),
}

/// A keyword of a schema node.
fn kw<'a>(s: &'a Value, key: &str) -> Option<&'a Value> {
    s.as_object()?.get(key)
}

/// Whether a boolean keyword is true.
fn is_true(s: &Value, key: &str) -> bool {
    matches!(kw(s, key), Some(Value::Bool(true)))
}

/// A string keyword.
fn str_kw<'a>(s: &'a Value, key: &str) -> Option<&'a str> {
    kw(s, key)?.as_str()
}

/// The `properties` of a schema node.
fn props(s: &Value) -> Option<&Map<String, Value>> {
    kw(s, "properties")?.as_object()
}

/// The schema of one named property.
fn prop<'a>(s: &'a Value, key: &str) -> Option<&'a Value> {
    props(s)?.get(key)
}

/// The `items` schema, when it is a single schema object.
fn items_schema(s: &Value) -> Option<&Value> {
    kw(s, "items").filter(|v| v.is_object())
}

/// The `additionalProperties` of a schema node.
fn additional(s: &Value) -> Additional<'_> {
    match kw(s, "additionalProperties") {
        Some(Value::Bool(b)) => Additional::Allows(*b),
        Some(v @ Value::Object(_)) => Additional::Schema(v),
        _ => Additional::Absent,
    }
}

/// The schema of a field that is not a named property: additionalProperties' schema.
fn field_schema<'a>(s: &'a Value, key: &str) -> Option<&'a Value> {
    prop(s, key).or(match additional(s) {
        Additional::Schema(a) => Some(a),
        _ => None,
    })
}

/// The `default` of a schema node (null counts as none, as in Kubernetes).
fn default_of(s: &Value) -> Option<&Value> {
    kw(s, "default").filter(|v| !v.is_null())
}

/// The non-empty `type` of a schema node.
fn type_str(s: &Value) -> Option<&str> {
    str_kw(s, "type").filter(|t| !t.is_empty())
}

/// An integer keyword (integral floats accepted).
fn int_kw(s: &Value, key: &str) -> Option<i64> {
    match kw(s, key)? {
        Value::Number(n) => match Num::of(n) {
            Num::Int(i) => Some(i),
            Num::Float(f) => (f.fract() == 0.0 && f.abs() < 9.0e18).then_some(f as i64),
        },
        _ => None,
    }
}

/// A numeric keyword.
fn num_kw(s: &Value, key: &str) -> Option<f64> {
    kw(s, key)?.as_f64()
}

/// Whether a key is one of apiVersion, kind, metadata.
fn is_meta(key: &str) -> bool {
    META_FIELDS.contains(&key)
}

/// The path of a named child, as kube-openapi and field.Path join them.
fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The path of an array element.
fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// A JSON number as the apiserver decodes it: int64 when it fits, float64 otherwise.
#[derive(Clone, Copy, Debug)]
enum Num {
    /// An integer that fits in int64.
    Int(i64),
    /// Anything else.
    Float(f64),
}

impl Num {
    /// Reads a serde_json number.
    fn of(n: &Number) -> Num {
        match n.as_i64() {
            Some(i) => Num::Int(i),
            None => Num::Float(n.as_f64().unwrap_or(0.0)),
        }
    }

    /// The value as float64.
    fn as_f64(self) -> f64 {
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

// ---------------------------------------------------------------------------------------
// Pruning

/// Prunes one value against its schema (`None`: no schema, as k8s' nil), recording paths.
fn prune_node(
    x: &mut Value,
    s: Option<&Value>,
    root: bool,
    path: &str,
    unknown: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    if let Some(s) = s
        && is_true(s, PRESERVE)
    {
        skip_prune(x, s, root, path, unknown, depth);
        return;
    }
    match x {
        Value::Object(map) => {
            let Some(s) = s else {
                unknown.extend(map.keys().map(|k| child(path, k)));
                map.clear();
                return;
            };
            let embedded = root || is_true(s, EMBEDDED);
            let addl = additional(s);
            map.retain(|k, v| {
                if embedded && is_meta(k) {
                    return true;
                }
                let p = child(path, k);
                if let Some(ps) = prop(s, k) {
                    prune_node(v, Some(ps), false, &p, unknown, depth + 1);
                    return true;
                }
                match addl {
                    Additional::Schema(a) => {
                        prune_node(v, Some(a), false, &p, unknown, depth + 1);
                        true
                    }
                    Additional::Allows(true) => {
                        prune_node(v, None, false, &p, unknown, depth + 1);
                        true
                    }
                    _ => {
                        unknown.push(p);
                        false
                    }
                }
            });
        }
        Value::Array(items) => {
            let it = s.and_then(items_schema);
            for (i, v) in items.iter_mut().enumerate() {
                prune_node(v, it, false, &index(path, i), unknown, depth + 1);
            }
        }
        _ => {}
    }
}

/// Walks a value under x-kubernetes-preserve-unknown-fields: unknown fields stay, known ones are pruned.
fn skip_prune(
    x: &mut Value,
    s: &Value,
    root: bool,
    path: &str,
    unknown: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    match x {
        Value::Object(map) => {
            let embedded = root || is_true(s, EMBEDDED);
            let addl = additional(s);
            map.retain(|k, v| {
                if embedded && is_meta(k) {
                    return true;
                }
                let p = child(path, k);
                if let Some(ps) = prop(s, k) {
                    prune_node(v, Some(ps), false, &p, unknown, depth + 1);
                    return true;
                }
                match addl {
                    Additional::Schema(a) => {
                        prune_node(v, Some(a), false, &p, unknown, depth + 1);
                        true
                    }
                    Additional::Allows(true) => {
                        prune_node(v, None, false, &p, unknown, depth + 1);
                        true
                    }
                    Additional::Allows(false) => {
                        unknown.push(p);
                        false
                    }
                    Additional::Absent => true,
                }
            });
        }
        Value::Array(items) => {
            if let Some(it) = items_schema(s) {
                for (i, v) in items.iter_mut().enumerate() {
                    skip_prune(v, it, false, &index(path, i), unknown, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// Drops null fields whose schema is neither nullable nor defaulted (k8s' PruneNonNullableNullsWithoutDefaults).
fn drop_null_fields(x: &mut Value, s: Option<&Value>, root: bool, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match x {
        Value::Object(map) => map.retain(|k, v| {
            if root && is_meta(k) {
                return true;
            }
            let sub = s.and_then(|s| field_schema(s, k));
            if v.is_null()
                && let Some(sub) = sub
                && !is_true(sub, "nullable")
                && default_of(sub).is_none()
            {
                return false;
            }
            drop_null_fields(v, sub, false, depth + 1);
            true
        }),
        Value::Array(items) => {
            let it = s.and_then(items_schema);
            for v in items.iter_mut() {
                drop_null_fields(v, it, false, depth + 1);
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------
// Defaulting

/// Applies defaults below one value (k8s' structural defaulting algorithm).
fn default_node(x: &mut Value, s: &Value, root: bool, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match x {
        Value::Object(map) => {
            if let Some(ps) = props(s) {
                for (k, p) in ps {
                    if root && is_meta(k) {
                        continue;
                    }
                    let Some(d) = default_of(p) else { continue };
                    let missing = match map.get(k) {
                        None => true,
                        Some(Value::Null) => !is_true(p, "nullable"),
                        Some(_) => false,
                    };
                    if missing {
                        map.insert(k.clone(), pruned_default(d, p));
                    }
                }
            }
            let addl = additional(s);
            for (k, v) in map.iter_mut() {
                if root && is_meta(k) {
                    continue;
                }
                if let Some(p) = prop(s, k) {
                    default_node(v, p, false, depth + 1);
                } else if let Additional::Schema(a) = addl {
                    if v.is_null()
                        && !is_true(a, "nullable")
                        && let Some(d) = default_of(a)
                    {
                        *v = pruned_default(d, a);
                    }
                    default_node(v, a, false, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(it) = items_schema(s) {
                for v in items.iter_mut() {
                    if v.is_null()
                        && !is_true(it, "nullable")
                        && let Some(d) = default_of(it)
                    {
                        *v = pruned_default(d, it);
                    }
                    default_node(v, it, false, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// A copy of a default value, pruned against its schema (as the apiserver prunes defaults).
fn pruned_default(d: &Value, s: &Value) -> Value {
    let mut value = d.clone();
    let mut sink = Vec::new();
    prune_node(&mut value, Some(s), false, "", &mut sink, 0);
    value
}

// ---------------------------------------------------------------------------------------
// Validation (kube-openapi's SchemaValidator, as apiextensions converts its errors)

/// One kube-openapi error before it becomes a field error.
struct Raw {
    /// kube-openapi's Name (a dotted path); `None` for errors that are not `errors.Validation`.
    name: Option<String>,
    /// The cause type.
    reason: &'static str,
    /// The message (field.Error's ErrorBody).
    message: String,
}

impl Raw {
    /// The field error the apiserver makes of it (with a nil base path).
    fn into_field_error(self) -> FieldError {
        FieldError {
            field: raw_field(self.name.as_deref()).unwrap_or_else(|| "<nil>".to_string()),
            reason: self.reason,
            message: self.message,
        }
    }
}

/// The field of a kube-openapi error name: the name without one leading dot; none when empty.
fn raw_field(name: Option<&str>) -> Option<String> {
    let name = name?;
    if name.is_empty() || name == "." {
        return None;
    }
    Some(name.strip_prefix('.').unwrap_or(name).to_string())
}

/// `field.Invalid(path, value, detail)`.
fn invalid(path: &str, shown_value: &str, detail: &str) -> Raw {
    Raw {
        name: Some(path.to_string()),
        reason: INVALID,
        message: format!("Invalid value: {shown_value}: {detail}"),
    }
}

/// An error that is not an `errors.Validation`: apiextensions reports it at a nil path with an empty value.
fn plain(detail: &str) -> Raw {
    Raw {
        name: None,
        reason: INVALID,
        message: format!("Invalid value: \"\": {detail}"),
    }
}

/// `errors.InvalidType` as `field.TypeInvalid`.
fn type_error(path: &str, expected: &str, actual: &str) -> Raw {
    let actual = go_quote(actual);
    Raw {
        name: Some(path.to_string()),
        reason: TYPE_INVALID,
        message: format!(
            "Invalid value: {actual}: {path} in body must be of type {expected}: {actual}"
        ),
    }
}

/// `field.TooLong` body.
fn too_long(max: i64) -> String {
    if max >= 0 {
        let unit = if max == 1 { "byte" } else { "bytes" };
        format!("Too long: may not be more than {max} {unit}")
    } else {
        "Too long: value is too long".to_string()
    }
}

/// `field.TooMany` body.
fn too_many(actual: i64, max: i64) -> String {
    let detail = if max >= 0 {
        let unit = if max == 1 { "item" } else { "items" };
        format!("must have at most {max} {unit}")
    } else {
        "has too many items".to_string()
    };
    format!("Too many: {actual}: {detail}")
}

/// The type and format kube-openapi infers for a decoded JSON value.
fn type_of_value(v: &Value) -> (&'static str, &'static str) {
    match v {
        Value::Null => ("null", ""),
        Value::Bool(_) => ("boolean", ""),
        Value::String(_) => ("string", ""),
        Value::Number(n) => match Num::of(n) {
            Num::Int(_) => ("integer", "int64"),
            Num::Float(_) => ("number", "float64"),
        },
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
    }
}

/// The allowed types of a schema node (int-or-string is integer,string).
fn schema_types(s: &Value) -> Vec<&str> {
    if is_true(s, INT_OR_STRING) {
        vec!["integer", "string"]
    } else {
        type_str(s).into_iter().collect()
    }
}

/// The format kept after the apiserver strips unsupported ones.
fn effective_format<'a>(s: &'a Value, types: &[&str]) -> Option<&'a str> {
    let f = str_kw(s, "format").filter(|f| !f.is_empty())?;
    let single = match types {
        [t] => *t,
        _ => "",
    };
    let keep = match single {
        "" | "string" => STRING_FORMATS.contains(&f.replace('-', "").as_str()),
        "integer" => matches!(f, "int32" | "int64"),
        "number" => matches!(f, "float" | "double"),
        _ => false,
    };
    keep.then_some(f)
}

/// Compiles a user's pattern (RE2 syntax, as Go's regexp), bounded in size; the error is one line.
fn compile_pattern(pattern: &str) -> Result<Regex, String> {
    RegexBuilder::new(pattern)
        .size_limit(1 << 22)
        .dfa_size_limit(1 << 22)
        .build()
        .map_err(|e| {
            let text = e.to_string();
            let last = text
                .lines()
                .map(str::trim)
                .rev()
                .find(|l| !l.is_empty())
                .unwrap_or("invalid pattern");
            let last = last.strip_prefix("error: ").unwrap_or(last);
            format!("error parsing regexp: {last}")
        })
}

/// Runs kube-openapi's validators over a value, with compiled patterns cached.
struct Validator {
    /// Patterns compiled so far.
    patterns: HashMap<String, Result<Regex, String>>,
    /// How many allOf/anyOf/oneOf/not branches we are inside; there additionalProperties is
    /// ignored, as it is not structural there and pruning never honours it.
    nested: usize,
}

impl Validator {
    /// A validator with an empty pattern cache.
    fn new() -> Self {
        Validator {
            patterns: HashMap::new(),
            nested: 0,
        }
    }

    /// A compiled pattern.
    fn pattern(&mut self, p: &str) -> &Result<Regex, String> {
        self.patterns
            .entry(p.to_string())
            .or_insert_with(|| compile_pattern(p))
    }

    /// Whether a fixed (known-good) pattern matches.
    fn matches(&mut self, p: &str, text: &str) -> bool {
        match self.pattern(p) {
            Ok(re) => re.is_match(text),
            Err(_) => true,
        }
    }

    /// Validates one value against one schema node (kube-openapi's SchemaValidator.Validate).
    fn node(
        &mut self,
        v: &Value,
        s: &Value,
        path: &str,
        root: bool,
        depth: usize,
        out: &mut Vec<Raw>,
    ) {
        if depth > MAX_DEPTH || !s.is_object() {
            return;
        }
        let types = schema_types(s);
        let format = effective_format(s, &types);
        if v.is_null() {
            if !types.is_empty() && !types.contains(&"null") && !is_true(s, "nullable") {
                out.push(type_error(path, &types.join(","), "null"));
            }
            check_enum(v, s, path, out);
            return;
        }
        check_type(v, &types, format, path, out);
        self.check_combinators(v, s, path, root, depth, out);
        if let Value::String(text) = v {
            self.check_string(text, s, path, out);
            if let Some(f) = format
                && !self.format_ok(f, text)
            {
                let shown = go_quote(text);
                out.push(Raw {
                    name: Some(path.to_string()),
                    reason: TYPE_INVALID,
                    message: format!(
                        "Invalid value: {shown}: {path} in body must be of type {f}: {shown}"
                    ),
                });
            }
        }
        if let Value::Number(n) = v {
            check_number(Num::of(n), s, &types, format, path, out);
        }
        if let Value::Array(items) = v {
            self.check_array(items, s, path, depth, out);
        }
        check_enum(v, s, path, out);
        if let Value::Object(map) = v {
            self.check_object(map, s, path, root, depth, out);
        }
    }

    /// Validates against one branch, returning its errors.
    fn branch(&mut self, v: &Value, s: &Value, path: &str, root: bool, depth: usize) -> Vec<Raw> {
        let mut errors = Vec::new();
        self.nested += 1;
        self.node(v, s, path, root, depth + 1, &mut errors);
        self.nested -= 1;
        errors
    }

    /// anyOf, oneOf, allOf and not.
    fn check_combinators(
        &mut self,
        v: &Value,
        s: &Value,
        path: &str,
        root: bool,
        depth: usize,
        out: &mut Vec<Raw>,
    ) {
        let quoted = go_quote(path);
        if let Some(Value::Array(branches)) = kw(s, "anyOf")
            && !branches.is_empty()
        {
            let mut best: Option<Vec<Raw>> = None;
            let mut valid = false;
            for b in branches {
                let errors = self.branch(v, b, path, root, depth);
                if errors.is_empty() {
                    valid = true;
                    break;
                }
                if best.as_ref().is_none_or(|e| errors.len() < e.len()) {
                    best = Some(errors);
                }
            }
            if !valid {
                out.push(plain(&format!(
                    "{quoted} must validate at least one schema (anyOf)"
                )));
                out.extend(best.unwrap_or_default());
            }
        }
        if let Some(Value::Array(branches)) = kw(s, "oneOf")
            && !branches.is_empty()
        {
            let mut best: Option<Vec<Raw>> = None;
            let mut valid = 0usize;
            for b in branches {
                let errors = self.branch(v, b, path, root, depth);
                if errors.is_empty() {
                    valid += 1;
                } else if valid == 0 && best.as_ref().is_none_or(|e| errors.len() < e.len()) {
                    best = Some(errors);
                }
            }
            if valid != 1 {
                let found = if valid == 0 {
                    "Found none valid".to_string()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                out.push(plain(&format!(
                    "{quoted} must validate one and only one schema (oneOf). {found}"
                )));
                if valid == 0 {
                    out.extend(best.unwrap_or_default());
                }
            }
        }
        if let Some(Value::Array(branches)) = kw(s, "allOf")
            && !branches.is_empty()
        {
            let mut valid = 0usize;
            for b in branches {
                let errors = self.branch(v, b, path, root, depth);
                if errors.is_empty() {
                    valid += 1;
                }
                out.extend(errors);
            }
            if valid != branches.len() {
                let none = if valid == 0 { ". None validated" } else { "" };
                out.push(plain(&format!(
                    "{quoted} must validate all the schemas (allOf){none}"
                )));
            }
        }
        if let Some(not @ Value::Object(_)) = kw(s, "not")
            && self.branch(v, not, path, root, depth).is_empty()
        {
            out.push(plain(&format!(
                "{quoted} must not validate the schema (not)"
            )));
        }
    }

    /// maxLength, minLength and pattern (the first failure only, as kube-openapi).
    fn check_string(&mut self, text: &str, s: &Value, path: &str, out: &mut Vec<Raw>) {
        let runes = text.chars().count() as i64;
        if let Some(max) = int_kw(s, "maxLength")
            && runes > max
        {
            out.push(Raw {
                name: Some(path.to_string()),
                reason: TOO_LONG,
                message: too_long(max),
            });
            return;
        }
        if let Some(min) = int_kw(s, "minLength")
            && runes < min
        {
            out.push(invalid(
                path,
                &go_quote(text),
                &format!("{path} in body should be at least {min} chars long"),
            ));
            return;
        }
        if let Some(p) = str_kw(s, "pattern")
            && !p.is_empty()
        {
            let detail = match self.pattern(p) {
                Ok(re) if re.is_match(text) => None,
                Ok(_) => Some(format!("{path} in body should match '{p}'")),
                Err(e) => Some(format!(
                    "{path} in body should match '{p}, but pattern is invalid: {e}'"
                )),
            };
            if let Some(detail) = detail {
                out.push(invalid(path, &go_quote(text), &detail));
            }
        }
    }

    /// Whether a string satisfies a (kept) string format; unknown or exotic formats pass.
    fn format_ok(&mut self, format: &str, text: &str) -> bool {
        match format.replace('-', "").as_str() {
            "datetime" => is_date_time(text),
            "date" => is_date(text),
            "uuid" => self.matches(
                r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
                text,
            ),
            "uuid3" => self.matches(
                r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
                text,
            ),
            "uuid4" => self.matches(
                r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$",
                text,
            ),
            "uuid5" => self.matches(
                r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$",
                text,
            ),
            "ipv4" => text.parse::<Ipv4Addr>().is_ok(),
            "ipv6" => text.contains(':') && text.parse::<Ipv6Addr>().is_ok(),
            "cidr" => is_cidr(text),
            "mac" => is_mac(text),
            "byte" => self.matches(
                r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$",
                text,
            ),
            "hostname" => {
                text.len() <= 255
                    && text.split('.').all(|label| label.len() <= 63)
                    && self.matches(
                        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$",
                        text,
                    )
            }
            "email" => is_email(text),
            "uri" => self.matches(r"^(?:[A-Za-z][A-Za-z0-9+.\-]*:|/)[^\s]*$", text),
            "bsonobjectid" => self.matches(r"^[0-9a-fA-F]{24}$", text),
            "hexcolor" => self.matches(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$", text),
            "rgbcolor" => self.matches(
                r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$",
                text,
            ),
            "ssn" => self.matches(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$", text),
            "duration" => self.is_duration(text),
            "k8sshortname" => {
                text.len() <= 63 && self.matches(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", text)
            }
            "k8slongname" => {
                text.len() <= 253
                    && self.matches(
                        r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
                        text,
                    )
            }
            _ => true,
        }
    }

    /// Loosely, strfmt's duration: Go's time.ParseDuration syntax, or "<n> <unit>" parts.
    fn is_duration(&mut self, text: &str) -> bool {
        if self.matches(
            r"^[-+]?(0|((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)$",
            text,
        ) {
            return true;
        }
        let Ok(re) = self.pattern(r"(\d+)\s*([A-Za-zµ]+)") else {
            return true;
        };
        re.captures_iter(text).any(|c| {
            let unit = c.get(2).map_or("", |m| m.as_str()).to_lowercase();
            [
                "ns", "nano", "us", "µs", "micro", "ms", "milli", "s", "sec", "m", "min", "h",
                "hr", "hour", "d", "day", "w", "wk", "week",
            ]
            .iter()
            .any(|u| unit == *u || (u.len() > 2 && unit.starts_with(u)))
        })
    }

    /// items, minItems, maxItems, uniqueItems.
    fn check_array(
        &mut self,
        items: &[Value],
        s: &Value,
        path: &str,
        depth: usize,
        out: &mut Vec<Raw>,
    ) {
        match kw(s, "items") {
            Some(it @ Value::Object(_)) => {
                for (i, e) in items.iter().enumerate() {
                    self.node(e, it, &index(path, i), false, depth + 1, out);
                }
            }
            Some(Value::Array(tuple)) => {
                for (i, (e, it)) in items.iter().zip(tuple).enumerate() {
                    self.node(e, it, &index(path, i), false, depth + 1, out);
                }
            }
            _ => {}
        }
        let size = items.len() as i64;
        if let Some(min) = int_kw(s, "minItems")
            && size < min
        {
            out.push(invalid(
                path,
                &size.to_string(),
                &format!("{path} in body should have at least {min} items"),
            ));
        }
        if let Some(max) = int_kw(s, "maxItems")
            && size > max
        {
            out.push(Raw {
                name: Some(path.to_string()),
                reason: TOO_MANY,
                message: too_many(size, max),
            });
        }
        if is_true(s, "uniqueItems") && !second_occurrences(items).is_empty() {
            out.push(invalid(
                path,
                "\"\"",
                &format!("{path} in body shouldn't contain duplicates"),
            ));
        }
    }

    /// minProperties, maxProperties, additionalProperties, properties, required.
    fn check_object(
        &mut self,
        map: &Map<String, Value>,
        s: &Value,
        path: &str,
        root: bool,
        depth: usize,
        out: &mut Vec<Raw>,
    ) {
        let count = map.len() as i64;
        if let Some(min) = int_kw(s, "minProperties")
            && count < min
        {
            out.push(invalid(
                path,
                &count.to_string(),
                &format!("{path} in body should have at least {min} properties"),
            ));
        }
        if let Some(max) = int_kw(s, "maxProperties")
            && count > max
        {
            out.push(Raw {
                name: Some(path.to_string()),
                reason: TOO_MANY,
                message: too_many(count, max),
            });
        }
        let skipped = |k: &str| root && is_meta(k);
        let embedded = root || is_true(s, EMBEDDED);
        let kept_meta = |k: &str| embedded && is_meta(k);
        let addl = if self.nested > 0 {
            Additional::Absent
        } else {
            additional(s)
        };
        match addl {
            Additional::Allows(false) => {
                for k in map.keys() {
                    if !kept_meta(k) && prop(s, k).is_none() {
                        out.push(invalid(
                            path,
                            &go_quote(k),
                            &format!("{path}.{k} in body is a forbidden property"),
                        ));
                    }
                }
            }
            Additional::Schema(a) => {
                for (k, val) in map {
                    if !skipped(k) && prop(s, k).is_none() {
                        self.node(val, a, &format!("{path}.{k}"), false, depth + 1, out);
                    }
                }
            }
            _ => {}
        }
        if let Some(ps) = props(s) {
            for (k, p) in ps {
                if skipped(k) {
                    continue;
                }
                if let Some(val) = map.get(k) {
                    self.node(val, p, &child(path, k), false, depth + 1, out);
                }
            }
        }
        if let Some(Value::Array(required)) = kw(s, "required") {
            for r in required {
                if let Value::String(k) = r
                    && !map.contains_key(k)
                {
                    out.push(Raw {
                        name: Some(format!("{path}.{k}")),
                        reason: REQUIRED,
                        message: "Required value".to_string(),
                    });
                }
            }
        }
    }
}

/// The type validator (kube-openapi's typeValidator, with the formats the apiserver keeps).
fn check_type(v: &Value, types: &[&str], format: Option<&str>, path: &str, out: &mut Vec<Raw>) {
    if types.is_empty() && format.is_none() {
        return;
    }
    let (actual, actual_format) = type_of_value(v);
    let integral_float = matches!(v, Value::Number(n)
        if matches!(Num::of(n), Num::Float(f) if f.is_finite() && f.fract() == 0.0));
    let float_int = integral_float && types.contains(&"integer");
    let int_float = actual == "integer" && types.contains(&"number");
    let stringish = matches!(v, Value::String(_) | Value::Array(_));
    if let Some(f) = format
        && !stringish
        && !(types.contains(&actual) || actual_format == f || float_int || int_float)
    {
        out.push(type_error(path, f, actual_format));
        return;
    }
    if format.is_some() && stringish && !types.iter().any(|t| matches!(*t, "number" | "integer")) {
        return;
    }
    if !(types.contains(&actual) || float_int || int_float) {
        out.push(type_error(path, &types.join(","), actual));
    }
}

/// The enum check (kube-openapi's common validator); null never matches, as there.
fn check_enum(v: &Value, s: &Value, path: &str, out: &mut Vec<Raw>) {
    let Some(Value::Array(options)) = kw(s, "enum") else {
        return;
    };
    if options.is_empty() || (!v.is_null() && options.iter().any(|o| enum_matches(v, o))) {
        return;
    }
    let supported = options
        .iter()
        .map(|o| match o {
            Value::String(text) => go_quote(text),
            other => go_quote(&go_json(other)),
        })
        .collect::<Vec<_>>()
        .join(", ");
    out.push(Raw {
        name: Some(path.to_string()),
        reason: NOT_SUPPORTED,
        message: format!(
            "Unsupported value: {}: supported values: {supported}",
            go_value(v)
        ),
    });
}

/// Whether a value equals an enum entry (numbers compare by value).
fn enum_matches(v: &Value, option: &Value) -> bool {
    match (v, option) {
        (Value::Number(a), Value::Number(b)) => match (Num::of(a), Num::of(b)) {
            (Num::Int(x), Num::Int(y)) => x == y,
            (x, y) => x.as_f64() == y.as_f64(),
        },
        _ => v == option,
    }
}

/// The number validator: type range, multipleOf, minimum, maximum.
fn check_number(
    num: Num,
    s: &Value,
    types: &[&str],
    format: Option<&str>,
    path: &str,
    out: &mut Vec<Raw>,
) {
    let type_name = match types {
        [t @ ("integer" | "number")] => *t,
        _ => "",
    };
    let fmt = match (type_name, format) {
        ("integer", Some(f @ ("int32" | "int64"))) | ("number", Some(f @ ("float" | "double"))) => {
            f
        }
        _ => "",
    };
    let range = |n: Num, prefix: &str| range_error(n, type_name, fmt, prefix, path);
    if let Some(e) = range(num, "Checked") {
        out.push(e);
    }
    if let Some(factor) = num_kw(s, "multipleOf") {
        match range(Num::Float(factor), "MultipleOf") {
            Some(e) => {
                out.push(e);
                multiple_of_float(num.as_f64(), factor, path, out);
            }
            None => multiple_of_native(num, factor, path, out),
        }
    }
    for (key, exclusive_key, upper) in [
        ("minimum", "exclusiveMinimum", false),
        ("maximum", "exclusiveMaximum", true),
    ] {
        let Some(bound) = num_kw(s, key) else {
            continue;
        };
        let valid_bound = match range(
            Num::Float(bound),
            if upper {
                "Maximum boundary"
            } else {
                "Minimum boundary"
            },
        ) {
            Some(e) => {
                out.push(e);
                false
            }
            None => true,
        };
        let exclusive = is_true(s, exclusive_key);
        let (fails, shown_value, shown_bound) = match num {
            Num::Int(i) if valid_bound => {
                let b = bound as i64;
                let fails = match (upper, exclusive) {
                    (true, false) => i > b,
                    (true, true) => i >= b,
                    (false, false) => i < b,
                    (false, true) => i <= b,
                };
                (fails, i.to_string(), b.to_string())
            }
            _ => {
                let x = num.as_f64();
                let fails = match (upper, exclusive) {
                    (true, false) => x > bound,
                    (true, true) => x >= bound,
                    (false, false) => x < bound,
                    (false, true) => x <= bound,
                };
                (fails, go_float_v(x), go_float_v(bound))
            }
        };
        if fails {
            let relation = match (upper, exclusive) {
                (true, false) => "less than or equal to",
                (true, true) => "less than",
                (false, false) => "greater than or equal to",
                (false, true) => "greater than",
            };
            out.push(invalid(
                path,
                &shown_value,
                &format!("{path} in body should be {relation} {shown_bound}"),
            ));
        }
    }
}

/// kube-openapi's IsValueValidAgainstRange: whether a number fits the type and format.
fn range_error(num: Num, type_name: &str, format: &str, prefix: &str, path: &str) -> Option<Raw> {
    let rep = match num {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => format!("{f}"),
    };
    let ok = match type_name {
        "integer" if format == "int32" => rep.parse::<i32>().is_ok(),
        "integer" => rep.parse::<i64>().is_ok(),
        _ if format == "float" => rep
            .parse::<f64>()
            .is_ok_and(|f| f.abs() <= f64::from(f32::MAX)),
        _ => true,
    };
    if ok {
        return None;
    }
    Some(plain(&if format.is_empty() {
        format!("{prefix} value must be of type {type_name} (default format) in {path}")
    } else {
        format!("{prefix} value must be of type {type_name} with format {format} in {path}")
    }))
}

/// multipleOf on the value's own type (integers divide exactly).
fn multiple_of_native(num: Num, factor: f64, path: &str, out: &mut Vec<Raw>) {
    match num {
        Num::Int(i) => {
            let f = factor as i64;
            if f < 0 {
                must_be_positive(path, &f.to_string(), out);
            } else if f == 0 {
                multiple_of_float(i as f64, factor, path, out);
            } else if i.checked_rem(f) != Some(0) {
                out.push(invalid(
                    path,
                    &i.to_string(),
                    &format!("{path} in body should be a multiple of {f}"),
                ));
            }
        }
        Num::Float(x) => multiple_of_float(x, factor, path, out),
    }
}

/// multipleOf on floats (kube-openapi's MultipleOf).
fn multiple_of_float(x: f64, factor: f64, path: &str, out: &mut Vec<Raw>) {
    if factor < 0.0 {
        must_be_positive(path, &go_float_v(factor), out);
        return;
    }
    let mult = if factor < 1.0 {
        (1.0 / factor) * x
    } else {
        x / factor
    };
    if mult.fract() != 0.0 {
        out.push(invalid(
            path,
            &go_float_v(x),
            &format!(
                "{path} in body should be a multiple of {}",
                go_float_v(factor)
            ),
        ));
    }
}

/// The error for a negative multipleOf.
fn must_be_positive(path: &str, shown: &str, out: &mut Vec<Raw>) {
    out.push(invalid(
        path,
        shown,
        &format!("factor MultipleOf declared for {path} must be positive: {shown}"),
    ));
}

/// RFC 3339 full-date, with real month lengths (as Go's time.Parse).
fn is_date(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = text.get(r)?;
        if part.bytes().all(|c| c.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10)) else {
        return false;
    };
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// strfmt's IsDateTime: a full-date, `t`, then hh:mm:ss[.frac](z|±hh:mm).
fn is_date_time(text: &str) -> bool {
    if text.len() < 4 {
        return false;
    }
    let lower = text.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let b = time.as_bytes();
    if b.len() < 9 || b[2] != b':' || b[5] != b':' {
        return false;
    }
    let two = |i: usize| b[i].is_ascii_digit() && b[i + 1].is_ascii_digit();
    if !(two(0) && two(3) && two(6)) {
        return false;
    }
    if &time[0..2] > "23" || &time[3..5] > "59" || &time[6..8] > "59" {
        return false;
    }
    let mut rest = &time[8..];
    if let Some(first) = rest.chars().next()
        && first != 'z'
        && first != '+'
        && first != '-'
    {
        // `.` in strfmt's pattern is any character, followed by digits.
        let after = &rest[first.len_utf8()..];
        let n = after.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &after[n..];
    }
    if rest == "z" {
        return true;
    }
    let z = rest.as_bytes();
    z.len() == 6
        && (z[0] == b'+' || z[0] == b'-')
        && z[1].is_ascii_digit()
        && z[2].is_ascii_digit()
        && z[3] == b':'
        && z[4].is_ascii_digit()
        && z[5].is_ascii_digit()
}

/// Go's net.ParseCIDR, roughly.
fn is_cidr(text: &str) -> bool {
    let Some((ip, bits)) = text.split_once('/') else {
        return false;
    };
    if bits.is_empty() || bits.len() > 3 || !bits.bytes().all(|c| c.is_ascii_digit()) {
        return false;
    }
    let Ok(bits) = bits.parse::<u32>() else {
        return false;
    };
    if ip.parse::<Ipv4Addr>().is_ok() {
        bits <= 32
    } else {
        ip.contains(':') && ip.parse::<Ipv6Addr>().is_ok() && bits <= 128
    }
}

/// Go's net.ParseMAC: 6, 8 or 20 octets, `:`/`-` separated pairs or `.` separated quads.
fn is_mac(text: &str) -> bool {
    let hex = |part: &str, n: usize| part.len() == n && part.bytes().all(|c| c.is_ascii_hexdigit());
    for sep in [':', '-'] {
        let parts: Vec<&str> = text.split(sep).collect();
        if matches!(parts.len(), 6 | 8 | 20) && parts.iter().all(|p| hex(p, 2)) {
            return true;
        }
    }
    let parts: Vec<&str> = text.split('.').collect();
    matches!(parts.len(), 3 | 4 | 10) && parts.iter().all(|p| hex(p, 4))
}

/// Loosely, Go's mail.ParseAddress: `local@domain`, optionally as `Name <local@domain>`.
fn is_email(text: &str) -> bool {
    let addr = match (text.rfind('<'), text.ends_with('>')) {
        (Some(start), true) => text.get(start + 1..text.len() - 1).unwrap_or(""),
        _ => text.trim(),
    };
    match addr.rsplit_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !addr
                    .chars()
                    .any(|c| c.is_whitespace() || c == '<' || c == '>')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
        }
        None => false,
    }
}

// ---------------------------------------------------------------------------------------
// Embedded resources and list types (checked after the schema, as the apiserver does)

/// apiVersion and kind of nested x-kubernetes-embedded-resource objects (k8s' objectmeta.Validate).
fn embedded_checks(
    x: &Value,
    s: &Value,
    path: &str,
    root: bool,
    depth: usize,
    out: &mut Vec<FieldError>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    match x {
        Value::Object(map) => {
            if !root && is_true(s, EMBEDDED) {
                check_type_meta(map, path, out);
            }
            let addl = additional(s);
            for (k, v) in map {
                if root && is_meta(k) {
                    continue;
                }
                if let Some(p) = prop(s, k) {
                    embedded_checks(v, p, &child(path, k), false, depth + 1, out);
                } else if let Additional::Schema(a) = addl {
                    embedded_checks(v, a, &format!("{path}[{k}]"), false, depth + 1, out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(it) = items_schema(s) {
                for (i, v) in items.iter().enumerate() {
                    embedded_checks(v, it, &index(path, i), false, depth + 1, out);
                }
            }
        }
        _ => {}
    }
}

/// The apiVersion and kind of one embedded resource.
fn check_type_meta(map: &Map<String, Value>, path: &str, out: &mut Vec<FieldError>) {
    let mut push = |field: String, reason: &'static str, message: String| {
        out.push(FieldError {
            field,
            reason,
            message,
        })
    };
    for key in ["apiVersion", "kind"] {
        if !map.contains_key(key) {
            push(child(path, key), REQUIRED, "Required value".to_string());
        }
    }
    for (key, v) in map {
        if key != "apiVersion" && key != "kind" {
            continue;
        }
        let field = child(path, key);
        let problem = match v {
            Value::String(text) if text.is_empty() => Some("must not be empty".to_string()),
            Value::String(text) if key == "apiVersion" => (text.matches('/').count() > 1)
                .then(|| format!("unexpected GroupVersion string: {text}")),
            Value::String(text) => {
                let errors = dns1035_label_errors(&text.to_lowercase());
                (!errors.is_empty()).then(|| {
                    format!(
                        "may have mixed case, but should otherwise match: {}",
                        errors.join(",")
                    )
                })
            }
            _ => Some("must be a string".to_string()),
        };
        if let Some(problem) = problem {
            push(
                field,
                INVALID,
                format!("Invalid value: {}: {problem}", go_value(v)),
            );
        }
    }
}

/// apimachinery's IsDNS1035Label.
fn dns1035_label_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push("must be no more than 63 characters".to_string());
    }
    let b = value.as_bytes();
    let ok = b.first().is_some_and(u8::is_ascii_lowercase)
        && b.last()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
    if !ok {
        errors.push("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".to_string());
    }
    errors
}

/// k8s' ValidateListSetsAndMaps over an object.
fn list_checks_map(
    map: &Map<String, Value>,
    s: &Value,
    path: &str,
    root: bool,
    depth: usize,
    out: &mut Vec<FieldError>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    if let Additional::Schema(a) = additional(s) {
        for (k, v) in map {
            if !(root && is_meta(k)) {
                list_checks_value(v, a, &format!("{path}[{k}]"), depth + 1, out);
            }
        }
    }
    if let Some(ps) = props(s) {
        for (k, v) in map {
            if root && is_meta(k) {
                continue;
            }
            if let Some(p) = ps.get(k) {
                list_checks_value(v, p, &child(path, k), depth + 1, out);
            }
        }
    }
}

/// List checks below one value.
fn list_checks_value(v: &Value, s: &Value, path: &str, depth: usize, out: &mut Vec<FieldError>) {
    match v {
        Value::Array(items) => list_checks_array(items, s, path, depth, out),
        Value::Object(map) => list_checks_map(map, s, path, false, depth, out),
        _ => {}
    }
}

/// Duplicates in lists of type set or map, then the items.
fn list_checks_array(
    items: &[Value],
    s: &Value,
    path: &str,
    depth: usize,
    out: &mut Vec<FieldError>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let duplicate = |i: usize, shown: String| FieldError {
        field: index(path, i),
        reason: DUPLICATE,
        message: format!("Duplicate value: {shown}"),
    };
    match str_kw(s, LIST_TYPE) {
        Some("set") => {
            for i in second_occurrences(items) {
                if let Some(v) = items.get(i) {
                    out.push(duplicate(i, go_value(v)));
                }
            }
        }
        Some("map") => {
            if let Some((i, v)) = items
                .iter()
                .enumerate()
                .find(|(_, v)| !v.is_null() && !v.is_object())
            {
                out.push(FieldError {
                    field: index(path, i),
                    reason: INVALID,
                    message: format!(
                        "Invalid value: {}: must be an object for an array of list-type map",
                        go_value(v)
                    ),
                });
            } else if items.len() > 1 {
                let keys: Vec<&str> = match kw(s, LIST_MAP_KEYS) {
                    Some(Value::Array(keys)) => keys.iter().filter_map(Value::as_str).collect(),
                    _ => Vec::new(),
                };
                let key_values: Vec<Value> = items
                    .iter()
                    .map(|item| {
                        let mut key = Map::new();
                        for k in &keys {
                            if let Some(v) = item.get(*k) {
                                key.insert((*k).to_string(), v.clone());
                            }
                        }
                        Value::Object(key)
                    })
                    .collect();
                for i in second_occurrences(&key_values) {
                    if let Some(key) = key_values.get(i) {
                        out.push(duplicate(i, go_json(key)));
                    }
                }
            }
        }
        _ => {}
    }
    if let Some(it) = items_schema(s) {
        for (i, v) in items.iter().enumerate() {
            list_checks_value(v, it, &index(path, i), depth + 1, out);
        }
    }
}

/// Indices of values seen exactly once before (k8s reports each duplicated value once).
fn second_occurrences(values: &[Value]) -> Vec<usize> {
    let mut seen: HashMap<String, usize> = HashMap::with_capacity(values.len());
    let mut found = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let times = seen.entry(canonical(v)).or_insert(0);
        if *times == 1 {
            found.push(i);
        }
        *times += 1;
    }
    found
}

/// A key equal for equal values (keys sorted; integers and floats kept apart, as Go's types are).
fn canonical(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out, 0);
    out
}

/// Appends the canonical key of a value.
fn write_canonical(v: &Value, out: &mut String, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::Number(n) => match Num::of(n) {
            Num::Int(i) => out.push_str(&format!("i{i}")),
            Num::Float(f) => out.push_str(&format!("f{f:?}")),
        },
        Value::Array(items) => {
            out.push('[');
            for item in items {
                write_canonical(item, out, depth + 1);
                out.push(',');
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for k in keys {
                write_go_json_string(k, out);
                out.push(':');
                if let Some(item) = map.get(k) {
                    write_canonical(item, out, depth + 1);
                }
                out.push(',');
            }
            out.push('}');
        }
        other => write_go_json(other, out, depth),
    }
}

// ---------------------------------------------------------------------------------------
// Structural checks of a CRD schema

/// Where a schema node sits, for the wording of a missing type.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    /// openAPIV3Schema itself.
    Root,
    /// An array's items.
    Item,
    /// A property or additionalProperties.
    Field,
}

/// Checks one structural schema node and everything below it.
fn check_schema(
    s: &Value,
    path: &str,
    level: Level,
    in_meta: bool,
    out: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let Some(m) = s.as_object() else {
        out.push(format!(
            "{path}: Invalid value: {}: must be a schema object",
            go_value(s)
        ));
        return;
    };
    check_shapes(m, path, out);
    let ty = type_str(s);
    if let Some(t) = ty {
        if !matches!(
            t,
            "array" | "boolean" | "integer" | "number" | "object" | "string"
        ) {
            out.push(format!("{path}.type: Unsupported value: {}: supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\"", go_quote(t)));
        }
        if t == "null" {
            out.push(format!(
                "{path}.type: Forbidden: type cannot be set to null, use nullable as an alternative"
            ));
        }
    }
    for (key, detail) in [
        ("id", "id is not supported"),
        ("additionalItems", "additionalItems is not supported"),
        ("patternProperties", "patternProperties is not supported"),
        ("definitions", "definitions is not supported"),
        ("dependencies", "dependencies is not supported"),
        ("$ref", "$ref is not supported"),
    ] {
        if m.get(key).is_some_and(|v| !is_empty_json(v)) {
            out.push(format!("{path}.{key}: Forbidden: {detail}"));
        }
    }
    if let Some(Value::Array(_)) = m.get("items") {
        out.push(format!(
            "{path}.items: Forbidden: items must be a schema object and not an array"
        ));
    }
    if is_true(s, "uniqueItems") {
        out.push(format!("{path}.uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"));
    }
    let addl = additional(s);
    let has_props = props(s).is_some_and(|p| !p.is_empty());
    if has_props && matches!(addl, Additional::Allows(false) | Additional::Schema(_)) {
        out.push(format!("{path}.additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"));
    }
    let has_addl = !matches!(addl, Additional::Absent);
    if has_addl && level == Level::Root {
        out.push(format!(
            "{path}.additionalProperties: Forbidden: must not be used at the root"
        ));
    }
    if let Some(Value::Bool(false)) = m.get(PRESERVE) {
        out.push(format!(
            "{path}.{PRESERVE}: Invalid value: false: must be true or undefined"
        ));
    }
    check_list_and_map_types(s, ty, path, out);

    let embedded = is_true(s, EMBEDDED);
    let int_or_string = is_true(s, INT_OR_STRING);
    let preserve = is_true(s, PRESERVE);
    if ty == Some("array") && kw(s, "items").is_none() {
        out.push(format!("{path}.items: Required value: must be specified"));
    }
    if embedded && ty != Some("object") {
        match ty {
            None => out.push(format!("{path}.type: Required value: must be object if x-kubernetes-embedded-resource is true")),
            Some(t) => out.push(format!("{path}.type: Invalid value: {}: must be object if x-kubernetes-embedded-resource is true", go_quote(t))),
        }
    } else if ty.is_none() && !int_or_string && !preserve {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        out.push(format!("{path}.type: Required value: {detail}"));
    }
    if embedded && has_addl {
        out.push(format!("{path}.additionalProperties: Forbidden: must not be used if x-kubernetes-embedded-resource is set"));
    }
    if level == Level::Root
        && let Some(t) = ty
        && t != "object"
    {
        out.push(format!(
            "{path}.type: Invalid value: {}: must be object at the root",
            go_quote(t)
        ));
    }
    if int_or_string && preserve {
        out.push(format!("{path}.{PRESERVE}: Invalid value: true: must be false if x-kubernetes-int-or-string is true"));
    }
    if int_or_string && embedded {
        out.push(format!("{path}.{EMBEDDED}: Invalid value: true: must be false if x-kubernetes-int-or-string is true"));
    }
    let check_meta = level == Level::Root || embedded;
    if check_meta {
        for key in ["kind", "apiVersion"] {
            if let Some(p) = prop(s, key)
                && type_str(p) != Some("string")
            {
                out.push(format!(
                    "{path}.properties[{key}].type: Invalid value: {}: must be string",
                    go_quote(type_str(p).unwrap_or(""))
                ));
            }
        }
    }
    if let Some(md) = prop(s, "metadata") {
        if check_meta && type_str(md) != Some("object") {
            out.push(format!(
                "{path}.properties[metadata].type: Invalid value: {}: must be object",
                go_quote(type_str(md).unwrap_or(""))
            ));
        }
        if level == Level::Root && !is_plain_metadata(md) {
            out.push(format!("{path}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"));
        }
    }
    if embedded && !preserve && !has_props {
        out.push(format!("{path}.properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"));
    }
    check_pattern(s, path, out);
    if let Some(d) = default_of(s)
        && !in_meta
    {
        check_default(d, s, path, out);
    }
    check_value_validations(s, path, out, depth);
    check_completeness(s, s, path, path, out, depth);

    if let Some(it) = items_schema(s) {
        check_schema(
            it,
            &format!("{path}.items"),
            Level::Item,
            in_meta,
            out,
            depth + 1,
        );
    }
    if let Some(ps) = props(s) {
        for (k, p) in ps {
            let meta = in_meta || (level == Level::Root && k == "metadata");
            check_schema(
                p,
                &format!("{path}.properties[{k}]"),
                Level::Field,
                meta,
                out,
                depth + 1,
            );
        }
    }
    if let Additional::Schema(a) = addl {
        check_schema(
            a,
            &format!("{path}.additionalProperties"),
            Level::Field,
            in_meta,
            out,
            depth + 1,
        );
    }
}

/// Whether a JSON value is empty (null, false, "", [], {}), i.e. as good as absent.
fn is_empty_json(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::String(text) => text.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        Value::Bool(true) | Value::Number(_) => false,
    }
}

/// Whether the root's metadata schema says nothing beyond type, default, name and generateName.
fn is_plain_metadata(md: &Value) -> bool {
    let Some(m) = md.as_object() else {
        return true;
    };
    m.iter().all(|(k, v)| match k.as_str() {
        "type" | "default" => true,
        "properties" => v
            .as_object()
            .is_none_or(|p| p.keys().all(|k| k == "name" || k == "generateName")),
        _ => is_empty_json(v),
    })
}

/// Keywords whose JSON type is wrong (the apiserver would refuse to decode them).
fn check_shapes(m: &Map<String, Value>, path: &str, out: &mut Vec<String>) {
    for (key, v) in m {
        let expected = match key.as_str() {
            "properties" | "not" => (!v.is_object()).then_some("an object"),
            "required" | LIST_MAP_KEYS => {
                (!v.as_array().is_some_and(|a| a.iter().all(Value::is_string)))
                    .then_some("a list of strings")
            }
            "enum" | "allOf" | "anyOf" | "oneOf" => (!v.is_array()).then_some("a list"),
            "minimum" | "maximum" | "multipleOf" => (!v.is_number()).then_some("a number"),
            "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties"
            | "maxProperties" => {
                (!v.as_f64().is_some_and(|f| f.fract() == 0.0)).then_some("an integer")
            }
            "type" | "format" | "pattern" | "description" | "title" | LIST_TYPE | MAP_TYPE => {
                (!v.is_string()).then_some("a string")
            }
            "nullable" | "exclusiveMinimum" | "exclusiveMaximum" | "uniqueItems" | PRESERVE
            | EMBEDDED | INT_OR_STRING => (!v.is_boolean()).then_some("a boolean"),
            "items" => (!(v.is_object() || v.is_array())).then_some("an object or a list"),
            "additionalProperties" => {
                (!(v.is_object() || v.is_boolean())).then_some("an object or a boolean")
            }
            _ => None,
        };
        if let Some(expected) = expected {
            out.push(format!(
                "{path}.{key}: Invalid value: {}: must be {expected}",
                go_value(v)
            ));
        }
    }
}

/// x-kubernetes-list-type, x-kubernetes-list-map-keys and x-kubernetes-map-type.
fn check_list_and_map_types(s: &Value, ty: Option<&str>, path: &str, out: &mut Vec<String>) {
    let must_be = |out: &mut Vec<String>, wanted: &str, why: &str| match ty {
        None => out.push(format!(
            "{path}.type: Required value: must be {wanted} if {why} is specified"
        )),
        Some(t) => out.push(format!(
            "{path}.type: Invalid value: {}: must be {wanted} if {why} is specified",
            go_quote(t)
        )),
    };
    if let Some(mt) = kw(s, MAP_TYPE) {
        if ty != Some("object") {
            must_be(out, "object", MAP_TYPE);
        }
        if !matches!(mt.as_str(), Some("atomic" | "granular")) {
            out.push(format!(
                "{path}.{MAP_TYPE}: Unsupported value: {}: supported values: \"atomic\", \"granular\"",
                go_value(mt)
            ));
        }
    }
    let list_type = kw(s, LIST_TYPE);
    if let Some(lt) = list_type {
        if ty != Some("array") {
            must_be(out, "array", LIST_TYPE);
        }
        if !matches!(lt.as_str(), Some("atomic" | "set" | "map")) {
            out.push(format!(
                "{path}.{LIST_TYPE}: Unsupported value: {}: supported values: \"atomic\", \"map\", \"set\"",
                go_value(lt)
            ));
        }
    }
    let keys: Vec<&str> = match kw(s, LIST_MAP_KEYS) {
        Some(Value::Array(keys)) => keys.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let is_map = list_type.and_then(Value::as_str) == Some("map");
    if !keys.is_empty() && !is_map {
        match list_type {
            None => out.push(format!("{path}.{LIST_TYPE}: Required value: must be map if x-kubernetes-list-map-keys is non-empty")),
            Some(lt) => out.push(format!("{path}.{LIST_TYPE}: Invalid value: {}: must be map if x-kubernetes-list-map-keys is non-empty", go_value(lt))),
        }
    }
    if is_map {
        if keys.is_empty() {
            out.push(format!("{path}.{LIST_MAP_KEYS}: Required value: must not be empty if x-kubernetes-list-type is map"));
        }
        match items_schema(s) {
            None => out.push(format!(
                "{path}.items: Required value: must have a schema if x-kubernetes-list-type is map"
            )),
            Some(it) => {
                if type_str(it) != Some("object") {
                    out.push(format!("{path}.items.type: Invalid value: {}: must be object if parent array's x-kubernetes-list-type is map", go_quote(type_str(it).unwrap_or(""))));
                }
                let shown = go_json(&Value::from(keys.clone()));
                if keys.iter().any(|k| prop(it, k).is_none()) {
                    out.push(format!("{path}.{LIST_MAP_KEYS}: Invalid value: {shown}: entries must all be names of item properties"));
                }
                if keys.iter().enumerate().any(|(i, k)| keys[..i].contains(k)) {
                    out.push(format!("{path}.{LIST_MAP_KEYS}: Invalid value: {shown}: must not contain duplicate entries"));
                }
                for k in &keys {
                    if let Some(p) = prop(it, k)
                        && matches!(type_str(p), Some("object" | "array"))
                    {
                        out.push(format!("{path}.items.properties[{k}].type: Invalid value: {}: must be a scalar type if parent array's x-kubernetes-list-type is map", go_quote(type_str(p).unwrap_or(""))));
                    }
                }
            }
        }
    }
}

/// A `pattern` that does not compile.
fn check_pattern(s: &Value, path: &str, out: &mut Vec<String>) {
    if let Some(p) = str_kw(s, "pattern")
        && !p.is_empty()
        && let Err(e) = compile_pattern(p)
    {
        out.push(format!(
            "{path}.pattern: Invalid value: {}: must be a valid regular expression, but isn't: {e}",
            go_quote(p)
        ));
    }
}

/// A default must be pruned already and valid against its own schema.
fn check_default(d: &Value, s: &Value, path: &str, out: &mut Vec<String>) {
    let base = format!("{path}.default");
    if pruned_default(d, s) != *d {
        out.push(format!(
            "{base}: Invalid value: {}: must not have unknown fields",
            go_value(d)
        ));
    }
    let mut raw = Vec::new();
    Validator::new().node(d, s, "", false, 0, &mut raw);
    for r in raw {
        let field = match raw_field(r.name.as_deref()) {
            Some(name) => format!("{base}.{name}"),
            None => base.clone(),
        };
        out.push(format!("{field}: {}", r.message));
    }
}

/// Whether anyOf is exactly int-or-string's `[{type: integer}, {type: string}]`.
fn is_int_or_string_any_of(any_of: Option<&Value>) -> bool {
    matches!(any_of, Some(Value::Array(a))
        if a.len() == 2
            && a[0] == serde_json::json!({"type": "integer"})
            && a[1] == serde_json::json!({"type": "string"}))
}

/// The allOf/anyOf/oneOf/not of a structural node.
fn check_value_validations(s: &Value, path: &str, out: &mut Vec<String>, depth: usize) {
    let skip_any_of = is_int_or_string_any_of(kw(s, "anyOf"));
    let skip_first_all_of_any_of = match kw(s, "allOf") {
        Some(Value::Array(all)) => all
            .first()
            .is_some_and(|f| is_int_or_string_any_of(kw(f, "anyOf"))),
        _ => false,
    };
    check_combinator_lists(s, path, skip_any_of, skip_first_all_of_any_of, out, depth);
}

/// Checks the nested schemas of allOf/anyOf/oneOf/not under one node.
fn check_combinator_lists(
    s: &Value,
    path: &str,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    out: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    for key in ["anyOf", "allOf", "oneOf"] {
        if key == "anyOf" && skip_any_of {
            continue;
        }
        if let Some(Value::Array(list)) = kw(s, key) {
            for (i, n) in list.iter().enumerate() {
                let skip = key == "allOf" && i == 0 && skip_first_all_of_any_of;
                check_nested(n, &format!("{path}.{key}[{i}]"), skip, out, depth + 1);
            }
        }
    }
    if let Some(n) = kw(s, "not") {
        check_nested(n, &format!("{path}.not"), false, out, depth + 1);
    }
}

/// A schema inside allOf/anyOf/oneOf/not: value validations only.
fn check_nested(v: &Value, path: &str, skip_any_of: bool, out: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let Some(m) = v.as_object() else {
        out.push(format!(
            "{path}: Invalid value: {}: must be a schema object",
            go_value(v)
        ));
        return;
    };
    check_shapes(m, path, out);
    check_combinator_lists(v, path, skip_any_of, false, out, depth);
    check_pattern(v, path, out);
    if let Some(it) = items_schema(v) {
        check_nested(it, &format!("{path}.items"), false, out, depth + 1);
    }
    if let Some(ps) = props(v) {
        for (k, p) in ps {
            check_nested(p, &format!("{path}.properties[{k}]"), false, out, depth + 1);
        }
    }
    let mut forbid =
        |key: &str, detail: &str| out.push(format!("{path}.{key}: Forbidden: {detail}"));
    let non_empty = |key: &str| m.get(key).is_some_and(|v| !is_empty_json(v));
    if non_empty("type") {
        forbid("type", "must be empty to be structural");
    }
    if m.contains_key("additionalProperties") {
        forbid("additionalProperties", "must be undefined to be structural");
    }
    if m.get("default").is_some_and(|d| !d.is_null()) {
        forbid("default", "must be undefined to be structural");
    }
    for key in ["title", "description"] {
        if non_empty(key) {
            forbid(key, "must be empty to be structural");
        }
    }
    for key in ["nullable", PRESERVE, EMBEDDED, INT_OR_STRING] {
        if is_true(v, key) {
            forbid(key, "must be false to be structural");
        }
    }
    if non_empty(LIST_MAP_KEYS) {
        forbid(LIST_MAP_KEYS, "must be empty to be structural");
    }
    for key in [LIST_TYPE, MAP_TYPE] {
        if m.get(key).is_some_and(|v| !v.is_null()) {
            forbid(key, "must be undefined to be structural");
        }
    }
    if non_empty("x-kubernetes-validations") {
        forbid("x-kubernetes-validations", "must be empty to be structural");
    }
    if prop(v, "metadata").is_some() {
        out.push(format!(
            "{path}.properties[metadata]: Forbidden: must not be specified in a nested context"
        ));
    }
}

/// Every property named in allOf/anyOf/oneOf/not must exist in the structural part.
fn check_completeness(
    v: &Value,
    s: &Value,
    s_path: &str,
    v_path: &str,
    out: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    for key in ["not", "allOf", "anyOf", "oneOf"] {
        match kw(v, key) {
            Some(n @ Value::Object(_)) if key == "not" => {
                nested_completeness(n, Some(s), s_path, &format!("{v_path}.not"), out, depth + 1);
            }
            Some(Value::Array(list)) if key != "not" => {
                for (i, n) in list.iter().enumerate() {
                    let vp = format!("{v_path}.{key}[{i}]");
                    nested_completeness(n, Some(s), s_path, &vp, out, depth + 1);
                }
            }
            _ => {}
        }
    }
}

/// Completeness of one nested schema against the structural node at the same place.
fn nested_completeness(
    v: &Value,
    s: Option<&Value>,
    s_path: &str,
    v_path: &str,
    out: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH || !v.is_object() {
        return;
    }
    let Some(s) = s.filter(|s| s.is_object()) else {
        out.push(format!(
            "{s_path}: Required value: because it is defined in {v_path}"
        ));
        return;
    };
    check_completeness(v, s, s_path, v_path, out, depth);
    if let Some(it) = items_schema(v) {
        nested_completeness(
            it,
            items_schema(s),
            &format!("{s_path}.items"),
            &format!("{v_path}.items"),
            out,
            depth + 1,
        );
    }
    if let Some(ps) = props(v) {
        for (k, p) in ps {
            let sp = format!("{s_path}.properties[{k}]");
            let vp = format!("{v_path}.properties[{k}]");
            match prop(s, k) {
                Some(sf) => nested_completeness(p, Some(sf), &sp, &vp, out, depth + 1),
                None => out.push(format!(
                    "{sp}: Required value: because it is defined in {vp}"
                )),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Go-compatible rendering of values

/// How field.Error renders a bad value: Go `%v` for numbers and booleans, `%q` for strings, JSON otherwise.
fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => Num::of(n).show(),
        Value::String(text) => go_quote(text),
        Value::Array(_) | Value::Object(_) => go_json(v),
    }
}

/// Go's `strconv.Quote`.
fn go_quote(text: &str) -> String {
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
fn write_go_json(v: &Value, out: &mut String, depth: usize) {
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
fn write_go_json_string(text: &str, out: &mut String) {
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
fn go_float_v(f: f64) -> String {
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

/// Table tests and properties of pruning, defaulting, validation and structural checks.
#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// A CR schema with the usual root.
    fn root(spec: Value) -> Value {
        json!({"type": "object", "properties": {"spec": spec}})
    }

    /// A CR with the usual meta fields around a spec.
    fn cr(spec: Value) -> Value {
        json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "x"}, "spec": spec})
    }

    /// An error as (field, reason, message), for compact assertions.
    type Triple = (String, &'static str, String);

    /// Validation errors as triples.
    fn errs(object: &Value, schema: &Value) -> Vec<Triple> {
        validate(object, schema)
            .into_iter()
            .map(|e| (e.field, e.reason, e.message))
            .collect()
    }

    /// One expected error.
    fn e(field: &str, reason: &'static str, message: &str) -> Triple {
        (field.to_string(), reason, message.to_string())
    }

    // ---------------- validation: keywords, one by one

    #[test]
    fn keyword_table() {
        let cases: Vec<(Value, Value, Vec<Triple>)> = vec![
            // type
            (
                json!({"type": "object", "properties": {"replicas": {"type": "integer"}}}),
                json!({"replicas": "3"}),
                vec![e(
                    "spec.replicas",
                    TYPE_INVALID,
                    r#"Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
                )],
            ),
            (
                json!({"type": "object", "properties": {"on": {"type": "boolean"}}}),
                json!({"on": 1}),
                vec![e(
                    "spec.on",
                    TYPE_INVALID,
                    r#"Invalid value: "integer": spec.on in body must be of type boolean: "integer""#,
                )],
            ),
            (
                json!({"type": "object", "properties": {"o": {"type": "object"}}}),
                json!({"o": [1]}),
                vec![e(
                    "spec.o",
                    TYPE_INVALID,
                    r#"Invalid value: "array": spec.o in body must be of type object: "array""#,
                )],
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}}),
                json!({"a": {"x": 1}}),
                vec![e(
                    "spec.a",
                    TYPE_INVALID,
                    r#"Invalid value: "object": spec.a in body must be of type array: "object""#,
                )],
            ),
            // numbers: integers pass as numbers, integral floats as integers
            (
                json!({"type": "object", "properties": {"n": {"type": "number"}, "i": {"type": "integer"}}}),
                json!({"n": 3, "i": 4.0}),
                vec![],
            ),
            // a fractional number for an integer: the type error, then the range error as kube-openapi adds it
            (
                json!({"type": "object", "properties": {"i": {"type": "integer"}}}),
                json!({"i": 1.5}),
                vec![
                    e(
                        "spec.i",
                        TYPE_INVALID,
                        r#"Invalid value: "number": spec.i in body must be of type integer: "number""#,
                    ),
                    e(
                        "<nil>",
                        INVALID,
                        r#"Invalid value: "": Checked value must be of type integer (default format) in spec.i"#,
                    ),
                ],
            ),
            // null
            (
                json!({"type": "object", "properties": {"s": {"type": "string"}}}),
                json!({"s": null}),
                vec![e(
                    "spec.s",
                    TYPE_INVALID,
                    r#"Invalid value: "null": spec.s in body must be of type string: "null""#,
                )],
            ),
            (
                json!({"type": "object", "properties": {"s": {"type": "string", "nullable": true}}}),
                json!({"s": null}),
                vec![],
            ),
            // required
            (
                json!({"type": "object", "required": ["name", "size"], "properties": {"name": {"type": "string"}}}),
                json!({"name": "a"}),
                vec![e("spec.size", REQUIRED, "Required value")],
            ),
            // enum
            (
                json!({"type": "object", "properties": {"mode": {"type": "string", "enum": ["a", "b"]}}}),
                json!({"mode": "x"}),
                vec![e(
                    "spec.mode",
                    NOT_SUPPORTED,
                    r#"Unsupported value: "x": supported values: "a", "b""#,
                )],
            ),
            (
                json!({"type": "object", "properties": {"n": {"type": "integer", "enum": [1, 2.5, {"k": "v"}]}}}),
                json!({"n": 3}),
                vec![e(
                    "spec.n",
                    NOT_SUPPORTED,
                    r#"Unsupported value: 3: supported values: "1", "2.5", "{\"k\":\"v\"}""#,
                )],
            ),
            (
                json!({"type": "object", "properties": {"n": {"type": "number", "enum": [1, 2]}}}),
                json!({"n": 2.0}),
                vec![],
            ),
            // minimum / maximum / exclusive
            (
                json!({"type": "object", "properties": {"replicas": {"type": "integer", "minimum": 1}}}),
                json!({"replicas": 0}),
                vec![e(
                    "spec.replicas",
                    INVALID,
                    "Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
                )],
            ),
            (
                json!({"type": "object", "properties": {"r": {"type": "integer", "minimum": 1, "exclusiveMinimum": true}}}),
                json!({"r": 1}),
                vec![e(
                    "spec.r",
                    INVALID,
                    "Invalid value: 1: spec.r in body should be greater than 1",
                )],
            ),
            (
                json!({"type": "object", "properties": {"r": {"type": "integer", "maximum": 10}}}),
                json!({"r": 11}),
                vec![e(
                    "spec.r",
                    INVALID,
                    "Invalid value: 11: spec.r in body should be less than or equal to 10",
                )],
            ),
            (
                json!({"type": "object", "properties": {"r": {"type": "number", "maximum": 1.5, "exclusiveMaximum": true}}}),
                json!({"r": 1.5}),
                vec![e(
                    "spec.r",
                    INVALID,
                    "Invalid value: 1.5: spec.r in body should be less than 1.5",
                )],
            ),
            (
                json!({"type": "object", "properties": {"r": {"type": "number", "minimum": 0.5}}}),
                json!({"r": 0.25}),
                vec![e(
                    "spec.r",
                    INVALID,
                    "Invalid value: 0.25: spec.r in body should be greater than or equal to 0.5",
                )],
            ),
            // multipleOf
            (
                json!({"type": "object", "properties": {"m": {"type": "integer", "multipleOf": 5}}}),
                json!({"m": 7}),
                vec![e(
                    "spec.m",
                    INVALID,
                    "Invalid value: 7: spec.m in body should be a multiple of 5",
                )],
            ),
            (
                json!({"type": "object", "properties": {"m": {"type": "number", "multipleOf": 0.5}}}),
                json!({"m": 1.5}),
                vec![],
            ),
            // strings
            (
                json!({"type": "object", "properties": {"n": {"type": "string", "minLength": 3}}}),
                json!({"n": "ab"}),
                vec![e(
                    "spec.n",
                    INVALID,
                    r#"Invalid value: "ab": spec.n in body should be at least 3 chars long"#,
                )],
            ),
            (
                json!({"type": "object", "properties": {"n": {"type": "string", "maxLength": 3}}}),
                json!({"n": "abcd"}),
                vec![e(
                    "spec.n",
                    TOO_LONG,
                    "Too long: may not be more than 3 bytes",
                )],
            ),
            (
                json!({"type": "object", "properties": {"n": {"type": "string", "maxLength": 1}}}),
                json!({"n": "ab"}),
                vec![e(
                    "spec.n",
                    TOO_LONG,
                    "Too long: may not be more than 1 byte",
                )],
            ),
            (
                json!({"type": "object", "properties": {"n": {"type": "string", "maxLength": 2}}}),
                json!({"n": "éé"}),
                vec![],
            ),
            (
                json!({"type": "object", "properties": {"n": {"type": "string", "pattern": "^[a-z]+$"}}}),
                json!({"n": "A1"}),
                vec![e(
                    "spec.n",
                    INVALID,
                    r#"Invalid value: "A1": spec.n in body should match '^[a-z]+$'"#,
                )],
            ),
            // arrays
            (
                json!({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "string"}, "minItems": 1}}}),
                json!({"l": []}),
                vec![e(
                    "spec.l",
                    INVALID,
                    "Invalid value: 0: spec.l in body should have at least 1 items",
                )],
            ),
            (
                json!({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "string"}, "maxItems": 2}}}),
                json!({"l": ["a", "b", "c"]}),
                vec![e(
                    "spec.l",
                    TOO_MANY,
                    "Too many: 3: must have at most 2 items",
                )],
            ),
            (
                json!({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "integer"}, "uniqueItems": true}}}),
                json!({"l": [1, 2, 1]}),
                vec![e(
                    "spec.l",
                    INVALID,
                    r#"Invalid value: "": spec.l in body shouldn't contain duplicates"#,
                )],
            ),
            // objects
            (
                json!({"type": "object", "properties": {"o": {"type": "object", "minProperties": 2, "additionalProperties": {"type": "string"}}}}),
                json!({"o": {"a": "x"}}),
                vec![e(
                    "spec.o",
                    INVALID,
                    "Invalid value: 1: spec.o in body should have at least 2 properties",
                )],
            ),
            (
                json!({"type": "object", "properties": {"o": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}}}}),
                json!({"o": {"a": "x", "b": "y"}}),
                vec![e(
                    "spec.o",
                    TOO_MANY,
                    "Too many: 2: must have at most 1 item",
                )],
            ),
            (
                json!({"type": "object", "properties": {"o": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false}}}),
                json!({"o": {"a": "x", "b": "y"}}),
                vec![e(
                    "spec.o",
                    INVALID,
                    r#"Invalid value: "b": spec.o.b in body is a forbidden property"#,
                )],
            ),
            // formats
            (
                json!({"type": "object", "properties": {"i": {"type": "integer", "format": "int32"}}}),
                json!({"i": 2147483648i64}),
                vec![e(
                    "<nil>",
                    INVALID,
                    r#"Invalid value: "": Checked value must be of type integer with format int32 in spec.i"#,
                )],
            ),
            (
                json!({"type": "object", "properties": {"i": {"type": "integer", "format": "int32"}}}),
                json!({"i": 2147483647}),
                vec![],
            ),
            (
                json!({"type": "object", "properties": {"i": {"type": "integer", "format": "int64"}}}),
                json!({"i": 1e19}),
                vec![e(
                    "<nil>",
                    INVALID,
                    r#"Invalid value: "": Checked value must be of type integer with format int64 in spec.i"#,
                )],
            ),
            (
                json!({"type": "object", "properties": {"t": {"type": "string", "format": "date-time"}}}),
                json!({"t": "2024-02-30T10:00:00Z"}),
                vec![e(
                    "spec.t",
                    TYPE_INVALID,
                    r#"Invalid value: "2024-02-30T10:00:00Z": spec.t in body must be of type date-time: "2024-02-30T10:00:00Z""#,
                )],
            ),
            (
                json!({"type": "object", "properties": {"t": {"type": "string", "format": "date-time"}}}),
                json!({"t": "2024-02-29T10:00:00.123+02:00"}),
                vec![],
            ),
            (
                json!({"type": "object", "properties": {"t": {"type": "string", "format": "no-such-format"}}}),
                json!({"t": "anything"}),
                vec![],
            ),
            (
                json!({"type": "object", "properties": {"u": {"type": "string", "format": "uuid"}, "ip": {"type": "string", "format": "ipv4"}}}),
                json!({"u": "not-a-uuid", "ip": "10.0.0.1"}),
                vec![e(
                    "spec.u",
                    TYPE_INVALID,
                    r#"Invalid value: "not-a-uuid": spec.u in body must be of type uuid: "not-a-uuid""#,
                )],
            ),
            // int-or-string
            (
                json!({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": true}}}),
                json!({"p": 80}),
                vec![],
            ),
            (
                json!({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": true}}}),
                json!({"p": "http"}),
                vec![],
            ),
            (
                json!({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": true}}}),
                json!({"p": true}),
                vec![e(
                    "spec.p",
                    TYPE_INVALID,
                    r#"Invalid value: "boolean": spec.p in body must be of type integer,string: "boolean""#,
                )],
            ),
            (
                json!({"type": "object", "properties": {"p": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": "^\\d+%$"}}}),
                json!({"p": "50"}),
                vec![e(
                    "spec.p",
                    INVALID,
                    r#"Invalid value: "50": spec.p in body should match '^\d+%$'"#,
                )],
            ),
            // combinators
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}),
                json!({}),
                vec![
                    e(
                        "<nil>",
                        INVALID,
                        r#"Invalid value: "": "spec" must validate at least one schema (anyOf)"#,
                    ),
                    e("spec.a", REQUIRED, "Required value"),
                ],
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
                json!({"a": "x", "b": "y"}),
                vec![e(
                    "<nil>",
                    INVALID,
                    r#"Invalid value: "": "spec" must validate one and only one schema (oneOf). Found 2 valid alternatives"#,
                )],
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "not": {"required": ["a"]}}),
                json!({"a": "x"}),
                vec![e(
                    "<nil>",
                    INVALID,
                    r#"Invalid value: "": "spec" must not validate the schema (not)"#,
                )],
            ),
        ];
        for (i, (spec_schema, spec, expected)) in cases.into_iter().enumerate() {
            let schema = root(spec_schema);
            let got = errs(&cr(spec.clone()), &schema);
            assert_eq!(got, expected, "case {i}: {spec}");
        }
    }

    #[test]
    fn brief_examples_render_as_the_apiserver_does() {
        let schema = root(
            json!({"type": "object", "required": ["name"], "properties": {
                "replicas": {"type": "integer", "minimum": 1},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "name": {"type": "string"},
            }}),
        );
        let errors = validate(&cr(json!({"replicas": 0, "mode": "x"})), &schema);
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            vec![
                "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
                r#"spec.mode: Unsupported value: "x": supported values: "a", "b""#,
                "spec.name: Required value",
            ]
        );
    }

    #[test]
    fn nested_paths_use_dots_and_indices() {
        let schema = root(json!({"type": "object", "properties": {
            "items": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string", "maxLength": 2},
                "ports": {"type": "array", "items": {"type": "integer"}},
            }}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        }}));
        let object = cr(json!({
            "items": [{"name": "ok"}, {"name": "ok", "ports": [1, "x"]}, {"name": "long"}, {}],
            "labels": {"a": "b", "c": 1},
        }));
        assert_eq!(
            errs(&object, &schema),
            vec![
                e(
                    "spec.items[1].ports[1]",
                    TYPE_INVALID,
                    r#"Invalid value: "string": spec.items[1].ports[1] in body must be of type integer: "string""#
                ),
                e(
                    "spec.items[2].name",
                    TOO_LONG,
                    "Too long: may not be more than 2 bytes"
                ),
                e("spec.items[3].name", REQUIRED, "Required value"),
                e(
                    "spec.labels.c",
                    TYPE_INVALID,
                    r#"Invalid value: "integer": spec.labels.c in body must be of type string: "integer""#
                ),
            ]
        );
    }

    #[test]
    fn root_meta_fields_are_not_validated() {
        let schema = json!({"type": "object", "required": ["spec"], "properties": {
            "apiVersion": {"type": "integer"},
            "kind": {"type": "integer"},
            "metadata": {"type": "string"},
            "spec": {"type": "object"},
        }});
        let object = cr(json!({}));
        assert_eq!(errs(&object, &schema), vec![]);
        let missing = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {}});
        assert_eq!(
            errs(&missing, &schema),
            vec![e("spec", REQUIRED, "Required value")]
        );
    }

    #[test]
    fn embedded_resources_need_api_version_and_kind() {
        let schema = root(json!({"type": "object", "properties": {
            "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
            "others": {"type": "array", "items": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}},
        }}));
        let object = cr(json!({
            "template": {"metadata": {"name": "x"}},
            "others": [{"apiVersion": "v1", "kind": "ConfigMap"}, {"apiVersion": "a/b/c", "kind": "Bad_Kind"}, {"apiVersion": 1, "kind": ""}],
        }));
        let text: Vec<String> = validate(&object, &schema)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            text,
            vec![
                "spec.template.apiVersion: Required value",
                "spec.template.kind: Required value",
                r#"spec.others[1].apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#,
                r#"spec.others[1].kind: Invalid value: "Bad_Kind": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#,
                "spec.others[2].apiVersion: Invalid value: 1: must be a string",
                r#"spec.others[2].kind: Invalid value: "": must not be empty"#,
            ]
        );
    }

    #[test]
    fn list_types_report_duplicates() {
        let schema = root(json!({"type": "object", "properties": {
            "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "map": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}, "v": {"type": "integer"}}}},
            "map2": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a", "b"],
                    "items": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}},
        }}));
        let object = cr(json!({
            "set": ["a", "b", "a", "a"],
            "map": [{"name": "x", "v": 1}, {"name": "x", "v": 2}, {"v": 3}],
            "map2": [{"a": "1", "b": "2"}, {"b": "2", "a": "1"}],
        }));
        let text: Vec<String> = validate(&object, &schema)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            text,
            vec![
                r#"spec.set[2]: Duplicate value: "a""#,
                r#"spec.map[1]: Duplicate value: {"name":"x"}"#,
                r#"spec.map2[1]: Duplicate value: {"a":"1","b":"2"}"#,
            ]
        );
    }

    // ---------------- pruning

    #[test]
    fn prune_drops_unknown_fields_and_reports_paths() {
        let schema = root(json!({"type": "object", "properties": {
            "keep": {"type": "string"},
            "list": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "integer"}}}},
            "map": {"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {"type": "string"}}}},
        }}));
        let mut object = cr(json!({
            "keep": "k", "foo": 1,
            "list": [{"a": 1, "b": 2}, {"c": {"d": 1}}],
            "map": {"m1": {"x": "y", "z": 1}},
        }));
        object["status"] = json!({"s": 1});
        object["metadata"]["whatever"] = json!(1);
        let pruned = prune(&mut object, &schema);
        assert_eq!(
            pruned,
            vec![
                "spec.foo",
                "spec.list[0].b",
                "spec.list[1].c",
                "spec.map.m1.z",
                "status"
            ]
        );
        assert_eq!(
            object,
            json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "x", "whatever": 1},
                   "spec": {"keep": "k", "list": [{"a": 1}, {}], "map": {"m1": {"x": "y"}}}})
        );
    }

    #[test]
    fn prune_keeps_field_order() {
        let schema = root(
            json!({"type": "object", "properties": {"a": {"type": "string"}, "c": {"type": "string"}, "e": {"type": "string"}}}),
        );
        let mut object = cr(json!({"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}));
        prune(&mut object, &schema);
        let keys: Vec<&String> = object["spec"].as_object().unwrap().keys().collect();
        assert_eq!(keys, vec!["a", "c", "e"]);
    }

    #[test]
    fn prune_honours_preserve_unknown_fields() {
        // At the root: nothing unknown is dropped, known parts still are.
        let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
            "spec": {"type": "object", "properties": {"a": {"type": "string"}}},
        }});
        let mut object = cr(json!({"a": "x", "b": "y"}));
        object["extra"] = json!({"deep": [1, {"x": 2}]});
        let pruned = prune(&mut object, &schema);
        assert_eq!(pruned, vec!["spec.b"]);
        assert_eq!(object["extra"], json!({"deep": [1, {"x": 2}]}));

        // Nested, with known fields inside still pruned.
        let schema = root(json!({"type": "object", "properties": {
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
                "typed": {"type": "object", "properties": {"k": {"type": "string"}}},
            }},
        }}));
        let mut object =
            cr(json!({"free": {"any": {"thing": [1]}, "typed": {"k": "v", "junk": 1}}, "junk": 2}));
        let pruned = prune(&mut object, &schema);
        assert_eq!(pruned, vec!["spec.free.typed.junk", "spec.junk"]);
        assert_eq!(
            object["spec"],
            json!({"free": {"any": {"thing": [1]}, "typed": {"k": "v"}}})
        );
    }

    #[test]
    fn prune_embedded_resources_keep_type_meta() {
        let schema = root(json!({"type": "object", "properties": {
            "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {
                "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
            }},
        }}));
        let mut object = cr(json!({"template": {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"a": "b"}},
            "spec": {"replicas": 1, "unknown": true}, "status": {},
        }}));
        let pruned = prune(&mut object, &schema);
        assert_eq!(
            pruned,
            vec!["spec.template.spec.unknown", "spec.template.status"]
        );
        assert_eq!(
            object["spec"]["template"],
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"a": "b"}}, "spec": {"replicas": 1}})
        );
    }

    #[test]
    fn prune_root_meta_fields_survive_any_schema() {
        for schema in [
            json!({}),
            json!({"type": "object"}),
            json!(42),
            json!({"properties": {"metadata": {"type": "string"}}}),
        ] {
            let mut object = cr(json!({"a": 1}));
            prune(&mut object, &schema);
            assert_eq!(object["apiVersion"], "kopf.dev/v1");
            assert_eq!(object["kind"], "KopfExample");
            assert_eq!(object["metadata"], json!({"name": "x"}));
        }
    }

    #[test]
    fn prune_drops_non_nullable_nulls_without_defaults() {
        let schema = root(json!({"type": "object", "properties": {
            "plain": {"type": "string"},
            "nullable": {"type": "string", "nullable": true},
            "defaulted": {"type": "string", "default": "d"},
            "map": {"type": "object", "additionalProperties": {"type": "string"}},
        }}));
        let mut object =
            cr(json!({"plain": null, "nullable": null, "defaulted": null, "map": {"k": null}}));
        let pruned = prune(&mut object, &schema);
        assert!(pruned.is_empty());
        assert_eq!(
            object["spec"],
            json!({"nullable": null, "defaulted": null, "map": {}})
        );
        apply_defaults(&mut object, &schema);
        assert_eq!(
            object["spec"],
            json!({"nullable": null, "defaulted": "d", "map": {}})
        );
        assert_eq!(errs(&object, &schema), vec![]);
    }

    #[test]
    fn prune_without_items_or_with_additional_false() {
        let schema = root(json!({"type": "object", "properties": {
            "list": {"type": "array"},
            "closed": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false},
        }}));
        let mut object =
            cr(json!({"list": [1, {"a": 1}, [{"b": 2}]], "closed": {"a": "x", "b": "y"}}));
        let pruned = prune(&mut object, &schema);
        assert_eq!(
            pruned,
            vec!["spec.closed.b", "spec.list[1].a", "spec.list[2][0].b"]
        );
        assert_eq!(
            object["spec"],
            json!({"list": [1, {}, [{}]], "closed": {"a": "x"}})
        );
    }

    // ---------------- defaulting

    #[test]
    fn defaults_fill_absent_fields_only() {
        let schema = root(json!({"type": "object", "default": {}, "properties": {
            "replicas": {"type": "integer", "default": 1},
            "mode": {"type": "string", "default": "auto"},
            "nested": {"type": "object", "default": {}, "properties": {
                "deep": {"type": "object", "default": {"x": 1, "junk": true}, "properties": {
                    "x": {"type": "integer"},
                    "y": {"type": "string", "default": "yy"},
                }},
            }},
            "items": {"type": "array", "items": {"type": "object", "properties": {
                "port": {"type": "integer", "default": 80},
                "proto": {"type": "string", "default": "TCP"},
            }}},
            "nullable": {"type": "string", "nullable": true, "default": "n"},
            "labels": {"type": "object", "additionalProperties": {"type": "string", "default": "v"}},
        }}));
        let mut object = cr(json!({
            "mode": "manual",
            "items": [{"port": 8080}, {}, {"proto": "UDP"}],
            "nullable": null,
            "labels": {"a": null, "b": "x"},
        }));
        apply_defaults(&mut object, &schema);
        assert_eq!(
            object["spec"],
            json!({
                "mode": "manual",
                "items": [{"port": 8080, "proto": "TCP"}, {"port": 80, "proto": "TCP"}, {"proto": "UDP", "port": 80}],
                "nullable": null,
                "labels": {"a": "v", "b": "x"},
                "replicas": 1,
                "nested": {"deep": {"x": 1, "y": "yy"}},
            })
        );

        // A missing spec is created from its default, with defaults inside it.
        let mut bare = json!({"apiVersion": "a/v1", "kind": "K", "metadata": {}});
        apply_defaults(&mut bare, &schema);
        assert_eq!(
            bare["spec"],
            json!({"replicas": 1, "mode": "auto", "nested": {"deep": {"x": 1, "y": "yy"}}, "nullable": "n"})
        );
    }

    #[test]
    fn defaults_replace_null_items_and_skip_root_meta() {
        let schema = json!({"type": "object", "properties": {
            "metadata": {"type": "object", "default": {"name": "nope"}},
            "kind": {"type": "string", "default": "Nope"},
            "spec": {"type": "object", "properties": {
                "list": {"type": "array", "items": {"type": "string", "default": "d"}},
            }},
        }});
        let mut object = json!({"apiVersion": "a/v1", "spec": {"list": ["a", null]}});
        apply_defaults(&mut object, &schema);
        assert_eq!(
            object,
            json!({"apiVersion": "a/v1", "spec": {"list": ["a", "d"]}})
        );
    }

    // ---------------- structural checks

    #[test]
    fn structural_problems_are_worded_like_the_apiserver() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"properties": {
                "list": {"type": "array"},
                "u": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
                "both": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}},
                "bad": {"type": "strnig"},
                "re": {"type": "string", "pattern": "("},
                "emb": {"type": "object", "x-kubernetes-embedded-resource": true},
                "def": {"type": "integer", "default": "one"},
                "items": {"type": "array", "items": {"properties": {}}},
            }},
            "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}},
        }, "anyOf": [{"type": "object", "properties": {"other": {"type": "string"}}}]});
        let problems = check_structural(&schema);
        let expected = [
            "openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
            "openAPIV3Schema.properties[spec].properties[list].items: Required value: must be specified",
            "openAPIV3Schema.properties[spec].properties[u].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            "openAPIV3Schema.properties[spec].properties[both].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
            r#"openAPIV3Schema.properties[spec].properties[bad].type: Unsupported value: "strnig": supported values: "array", "boolean", "integer", "number", "object", "string""#,
            "openAPIV3Schema.properties[spec].properties[emb].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
            r#"openAPIV3Schema.properties[spec].properties[def].default: Invalid value: "string":  in body must be of type integer: "string""#,
            "openAPIV3Schema.properties[spec].properties[items].items.type: Required value: must not be empty for specified array items",
            "openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified",
            "openAPIV3Schema.anyOf[0].type: Forbidden: must be empty to be structural",
            "openAPIV3Schema.anyOf[0].properties[other].type: Forbidden: must be empty to be structural",
            "openAPIV3Schema.properties[other]: Required value: because it is defined in openAPIV3Schema.anyOf[0].properties[other]",
        ];
        for want in expected {
            assert!(
                problems.iter().any(|p| p == want),
                "missing {want:?} in {problems:#?}"
            );
        }
        assert!(
            problems.iter().any(|p| p.starts_with(
                r#"openAPIV3Schema.properties[spec].properties[re].pattern: Invalid value: "(": must be a valid regular expression, but isn't: error parsing regexp:"#
            )),
            "{problems:#?}"
        );
        assert_eq!(problems.len(), expected.len() + 1, "{problems:#?}");
    }

    #[test]
    fn structural_root_rules() {
        assert_eq!(
            check_structural(&json!({"properties": {}})),
            vec!["openAPIV3Schema.type: Required value: must not be empty at the root"]
        );
        assert_eq!(
            check_structural(&json!({"type": "string"})),
            vec![r#"openAPIV3Schema.type: Invalid value: "string": must be object at the root"#]
        );
        assert_eq!(
            check_structural(
                &json!({"type": "object", "nullable": true, "additionalProperties": {"type": "string"}})
            ),
            vec![
                "openAPIV3Schema.additionalProperties: Forbidden: must not be used at the root",
                "openAPIV3Schema.nullable: Forbidden: nullable cannot be true at the root",
            ]
        );
        assert_eq!(
            check_structural(
                &json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"n": {"type": "integer", "default": 1}}, "default": {"n": 2, "zz": 1}}}})
            ),
            vec![
                r#"openAPIV3Schema.properties[spec].default: Invalid value: {"n":2,"zz":1}: must not have unknown fields"#
            ]
        );
    }

    #[test]
    fn structural_accepts_usual_schemas() {
        let schema = json!({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}}},
            "spec": {"type": "object", "required": ["replicas"], "properties": {
                "replicas": {"type": "integer", "minimum": 0, "default": 1, "format": "int32"},
                "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"x-kubernetes-preserve-unknown-fields": true},
                "list": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                         "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}},
                "either": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                           "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
                "tpl": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
            }},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        }});
        assert_eq!(check_structural(&schema), Vec::<String>::new());
    }

    // ---------------- messages and rendering

    #[test]
    fn invalid_message_formats_like_status_errors() {
        let one = FieldError {
            field: "spec.replicas".into(),
            reason: REQUIRED,
            message: "Required value".into(),
        };
        let two = FieldError {
            field: "spec.mode".into(),
            reason: NOT_SUPPORTED,
            message: r#"Unsupported value: "x": supported values: "a", "b""#.into(),
        };
        assert_eq!(
            invalid_message("KopfExample.kopf.dev", "name", std::slice::from_ref(&one)),
            r#"KopfExample.kopf.dev "name" is invalid: spec.replicas: Required value"#
        );
        assert_eq!(
            invalid_message(
                "KopfExample.kopf.dev",
                "name",
                &[one.clone(), two.clone(), one.clone()]
            ),
            r#"KopfExample.kopf.dev "name" is invalid: [spec.replicas: Required value, spec.mode: Unsupported value: "x": supported values: "a", "b"]"#
        );
        assert_eq!(
            invalid_message("KopfExample.kopf.dev", "name", &[one.clone(), one]),
            r#"KopfExample.kopf.dev "name" is invalid: spec.replicas: Required value"#
        );
        assert_eq!(
            invalid_message("K.g", "n\"q", &[]),
            r#"K.g "n\"q" is invalid"#
        );
    }

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

    #[test]
    fn date_and_time_formats() {
        for good in [
            "2024-01-01T00:00:00Z",
            "2024-12-31t23:59:59.999999z",
            "2000-02-29T12:00:00-07:30",
        ] {
            assert!(is_date_time(good), "{good}");
        }
        for bad in [
            "2023-02-29T00:00:00Z",
            "2024-01-01",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:00:00",
            "2024-01-01T00:00:00+0100",
            "",
            "zzzz",
        ] {
            assert!(!is_date_time(bad), "{bad}");
        }
        assert!(is_date("1900-02-28") && !is_date("1900-02-29") && !is_date("24-01-01"));
        assert!(
            is_cidr("10.0.0.0/8")
                && is_cidr("fd00::/64")
                && !is_cidr("10.0.0.0/33")
                && !is_cidr("10.0.0.0")
        );
        assert!(is_mac("00:1a:2B:3c:4d:5e") && is_mac("001a.2b3c.4d5e") && !is_mac("00:1a:2b"));
        assert!(
            is_email("a@b.c") && is_email("Name <a@b.c>") && !is_email("a b@c") && !is_email("@b")
        );
    }

    #[test]
    fn malformed_schemas_do_not_panic() {
        let schemas = [
            json!(null),
            json!(true),
            json!("object"),
            json!([]),
            json!({"type": 5}),
            json!({"type": ["object", "null"]}),
            json!({"type": "object", "properties": []}),
            json!({"type": "object", "properties": {"spec": 7}}),
            json!({"type": "object", "properties": {"spec": {"type": "object", "required": "a", "enum": {}, "items": 3}}}),
            json!({"type": "object", "properties": {"spec": {"type": "integer", "minimum": "1", "maximum": null, "multipleOf": 0}}}),
            json!({"type": "object", "properties": {"spec": {"type": "integer", "multipleOf": -2.5, "minimum": 1.5}}}),
            json!({"type": "object", "properties": {"spec": {"type": "string", "pattern": "(((", "minLength": -1, "maxLength": -1}}}),
            json!({"type": "object", "properties": {"spec": {"type": "array", "items": [{"type": "string"}, 5], "minItems": 1.5}}}),
            json!({"type": "object", "properties": {"spec": {"allOf": "x", "anyOf": [1, null], "oneOf": [{}], "not": []}}}),
            json!({"type": "object", "properties": {"spec": {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [1, "a"], "type": "array"}}}),
            json!({"type": "object", "properties": {"spec": {"additionalProperties": "yes", "default": {"a": [null]}}}}),
            json!({"type": "object", "properties": {"spec": {"format": "int32", "type": "boolean"}}}),
        ];
        let objects = [
            cr(json!({"a": [1, null, {"b": "c"}], "n": -9223372036854775808i64})),
            cr(json!(-5)),
            cr(json!("x")),
            cr(json!(null)),
            cr(json!([[], {}, 1.5e300])),
            json!([1, 2]),
            json!(null),
        ];
        for schema in &schemas {
            let _ = check_structural(schema);
            for object in &objects {
                let mut o = object.clone();
                let _ = prune(&mut o, schema);
                apply_defaults(&mut o, schema);
                let _ = validate(&o, schema);
                let _ = validate(object, schema);
            }
        }
    }

    #[test]
    fn int_minimum_against_int64_extremes() {
        let schema = root(json!({"type": "object", "properties": {
            "n": {"type": "integer", "minimum": -1e300, "maximum": 1e300, "multipleOf": 3},
        }}));
        for n in [i64::MIN, i64::MAX, 0] {
            let _ = validate(&cr(json!({"n": n})), &schema);
        }
    }

    #[test]
    fn pipeline_as_the_server_runs_it() {
        let schema = root(
            json!({"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 1},
                "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
            }}),
        );
        let mut object = cr(json!({"size": 0, "typo": true}));
        let unknown = prune(&mut object, &schema);
        assert_eq!(unknown, vec!["spec.typo"]);
        apply_defaults(&mut object, &schema);
        assert_eq!(object["spec"], json!({"size": 0, "mode": "fast"}));
        let errors = validate(&object, &schema);
        assert_eq!(
            invalid_message("KopfExample.kopf.dev", "x", &errors),
            r#"KopfExample.kopf.dev "x" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"#
        );
        assert_eq!(errors[0].reason, "FieldValueInvalid");
    }

    #[test]
    fn deep_values_stop_at_the_depth_limit() {
        let mut deep = json!("leaf");
        for _ in 0..(MAX_DEPTH * 2) {
            deep = json!({"a": [deep]});
        }
        let schema =
            root(json!({"type": "object", "properties": {"a": {"type": "string"}}, "enum": ["x"]}));
        let mut object = cr(deep.clone());
        let _ = prune(&mut object, &schema);
        apply_defaults(&mut object, &schema);
        let errors = validate(&cr(deep.clone()), &schema);
        assert!(!errors.is_empty());
        let preserve = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                              "properties": {"spec": {"type": "object", "properties": {"a": {"type": "array"}}}}});
        let mut object = cr(deep);
        let _ = prune(&mut object, &preserve);
        let _ = go_json(&object);
    }

    // ---------------- properties

    /// Arbitrary small JSON values, with keys likely to meet schema property names.
    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-5i64..5).prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
            "[a-c]{0,3}".prop_map(Value::String),
            ".{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::vec(("[a-c]|apiVersion|kind|metadata|spec", inner), 0..5)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// One keyword with a plausible (sometimes wrong) value.
    fn arb_keyword() -> impl Strategy<Value = (String, Value)> {
        let names = prop::collection::vec("[a-c]", 0..3).prop_map(|v| json!(v));
        prop_oneof![
            names.clone().prop_map(|v| ("required".to_string(), v)),
            prop::collection::vec(arb_json(), 0..3)
                .prop_map(|v| ("enum".to_string(), Value::Array(v))),
            prop_oneof![
                "minimum",
                "maximum",
                "multipleOf",
                "minLength",
                "maxLength",
                "minItems",
                "maxItems",
                "minProperties",
                "maxProperties"
            ]
            .prop_flat_map(|k| (
                Just(k.to_string()),
                prop_oneof![
                    (-3i64..4).prop_map(Value::from),
                    Just(json!(0.5)),
                    Just(json!(-1.5)),
                    Just(json!("x"))
                ]
            )),
            prop_oneof![
                "exclusiveMinimum",
                "exclusiveMaximum",
                "uniqueItems",
                "nullable",
                PRESERVE,
                EMBEDDED,
                INT_OR_STRING
            ]
            .prop_flat_map(|k| (Just(k.to_string()), any::<bool>().prop_map(Value::Bool))),
            prop_oneof![Just("^a"), Just("("), Just("b+"), Just(""), Just("[a-")]
                .prop_map(|p| ("pattern".to_string(), json!(p))),
            prop_oneof![
                Just("int32"),
                Just("int64"),
                Just("date-time"),
                Just("date"),
                Just("uuid"),
                Just("ipv4"),
                Just("ipv6"),
                Just("cidr"),
                Just("mac"),
                Just("byte"),
                Just("hostname"),
                Just("email"),
                Just("uri"),
                Just("duration"),
                Just("float"),
                Just("bogus")
            ]
            .prop_map(|f| ("format".to_string(), json!(f))),
            arb_json().prop_map(|d| ("default".to_string(), d)),
            prop_oneof![Just("set"), Just("map"), Just("atomic"), Just("nope")]
                .prop_map(|t| (LIST_TYPE.to_string(), json!(t))),
            names.prop_map(|v| (LIST_MAP_KEYS.to_string(), v)),
            (
                prop_oneof![
                    "properties",
                    "items",
                    "additionalProperties",
                    "type",
                    "anyOf",
                    "not"
                ],
                arb_json()
            )
                .prop_map(|(k, v)| (k.to_string(), v)),
        ]
    }

    /// A type name, sometimes a wrong one.
    fn arb_type() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(json!("object")),
            Just(json!("array")),
            Just(json!("string")),
            Just(json!("integer")),
            Just(json!("number")),
            Just(json!("boolean")),
            Just(json!("null")),
            Just(json!("")),
            Just(json!(3)),
        ]
    }

    /// Arbitrary small schemas: mostly schema-shaped, sometimes junk.
    fn arb_schema() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(json!({})),
            arb_type().prop_map(|t| json!({"type": t})),
            arb_json(),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            (
                prop::option::of(arb_type()),
                prop::option::of(prop::collection::vec(
                    ("[a-c]|spec|metadata|kind", inner.clone()),
                    0..4,
                )),
                prop::option::of(inner.clone()),
                prop::option::of(prop_oneof![
                    any::<bool>().prop_map(Value::Bool),
                    inner.clone()
                ]),
                prop::collection::vec(arb_keyword(), 0..4),
                prop::option::of(prop::collection::vec(inner, 1..3)),
                0..3usize,
            )
                .prop_map(
                    |(ty, properties, items, additional, keywords, branches, which)| {
                        let mut m = Map::new();
                        if let Some(t) = ty {
                            m.insert("type".into(), t);
                        }
                        if let Some(p) = properties {
                            m.insert("properties".into(), Value::Object(p.into_iter().collect()));
                        }
                        if let Some(i) = items {
                            m.insert("items".into(), i);
                        }
                        if let Some(a) = additional {
                            m.insert("additionalProperties".into(), a);
                        }
                        for (k, v) in keywords {
                            m.insert(k, v);
                        }
                        if let Some(b) = branches {
                            let key = ["anyOf", "oneOf", "allOf"][which];
                            m.insert(key.into(), Value::Array(b));
                        }
                        Value::Object(m)
                    },
                )
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn nothing_panics(object in arb_json(), schema in arb_schema()) {
            let _ = check_structural(&schema);
            let _ = validate(&object, &schema);
            let mut o = object.clone();
            let _ = prune(&mut o, &schema);
            apply_defaults(&mut o, &schema);
            let errors = validate(&o, &schema);
            let _ = invalid_message("K.g", "n", &errors);
        }

        #[test]
        fn prune_is_idempotent(object in arb_json(), schema in arb_schema()) {
            let mut once = object.clone();
            prune(&mut once, &schema);
            let mut twice = once.clone();
            let again = prune(&mut twice, &schema);
            prop_assert!(again.is_empty(), "second prune reported {again:?}");
            prop_assert_eq!(once, twice);
        }

        #[test]
        fn pruned_objects_have_no_unknown_fields(object in arb_json(), schema in arb_schema()) {
            let mut o = object.clone();
            prune(&mut o, &schema);
            for error in validate(&o, &schema) {
                prop_assert!(!error.message.contains("is a forbidden property"), "{error}");
            }
        }

        #[test]
        fn preserved_root_is_never_pruned(
            entries in prop::collection::vec(("[a-z]{1,3}|apiVersion|kind|metadata", arb_json()), 0..6),
            keywords in prop::collection::vec(arb_keyword(), 0..3),
        ) {
            let mut m: Map<String, Value> = keywords
                .into_iter()
                .filter(|(k, _)| !matches!(k.as_str(), "properties" | "items" | "additionalProperties"))
                .collect();
            m.insert("type".into(), json!("object"));
            m.insert(PRESERVE.into(), json!(true));
            let schema = Value::Object(m);
            let object = Value::Object(entries.into_iter().collect());
            let mut o = object.clone();
            let pruned = prune(&mut o, &schema);
            prop_assert!(pruned.is_empty());
            prop_assert_eq!(o, object);
        }

        #[test]
        fn defaults_are_idempotent(object in arb_json(), schema in arb_schema()) {
            let mut once = object.clone();
            prune(&mut once, &schema);
            apply_defaults(&mut once, &schema);
            let mut twice = once.clone();
            apply_defaults(&mut twice, &schema);
            prop_assert_eq!(once, twice);
        }
    }
}
