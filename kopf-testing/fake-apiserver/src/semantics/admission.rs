//! What the server does to an object before storing it: typed normalisation of built-ins,
//! pruning, defaulting and validation of custom resources against their CRD's schema, and the
//! checks of `metadata` that every resource shares.

use base64::Engine as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};

use super::status::{ApiError, ApiResult, Subject};
use super::{defaults, names, schema};
use crate::storage::catalog::{Builtin, ResourceDef, RoundTrip};

/// `?fieldValidation=`: what to do with fields the schema does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldValidation {
    Strict,
    Warn,
    Ignore,
}

impl FieldValidation {
    pub(crate) fn parse(value: Option<&str>) -> ApiResult<Self> {
        match value {
            None | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation parameter unsupported: {other}, must be one of Ignore, Warn or Strict"
            ))),
        }
    }
}

/// Normalises and validates `object` for storage (`old`, in the same version, for updates);
/// returns the warnings to send back.
pub(crate) fn admit(
    def: &ResourceDef,
    version: &str,
    object: &mut Value,
    old: Option<&Value>,
    validation: FieldValidation,
) -> ApiResult<Vec<String>> {
    let unknown = decode(def, version, object)?;
    validate(def, version, object, old, validation, unknown)
}

/// The first half of [`admit`], what the server does before mutating admission: normalises
/// `object` as its type (built-ins) or prunes it by its schema (custom resources), and fills
/// in defaults. Returns the unknown fields it dropped.
pub(crate) fn decode(
    def: &ResourceDef,
    version: &str,
    object: &mut Value,
) -> ApiResult<Vec<String>> {
    let cannot = |e: String| {
        ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {e}",
            kind = def.kind
        ))
    };
    match def.round_trip {
        Some(round_trip) => {
            let unknown =
                normalize_builtin(def, round_trip, object).map_err(|e| cannot(e.to_string()))?;
            defaults::apply(def, object);
            Ok(unknown)
        }
        None => {
            let mut unknown = normalize_typed::<ObjectMeta>(&mut object["metadata"], "metadata")
                .map_err(|e| cannot(e.to_string()))?;
            if let Some(version) = def.version(version)
                && let Some(schema) = &version.schema
            {
                unknown.extend(schema::prune(object, schema));
                schema::apply_defaults(object, schema);
            }
            Ok(unknown)
        }
    }
}

/// The second half of [`admit`], after mutating admission: validates `object` against its
/// schema and rules and the checks of `metadata`, and applies `validation` to the `unknown`
/// fields [`decode`] found. Returns the warnings to send back.
pub(crate) fn validate(
    def: &ResourceDef,
    version: &str,
    object: &mut Value,
    old: Option<&Value>,
    validation: FieldValidation,
    unknown: Vec<String>,
) -> ApiResult<Vec<String>> {
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let subject = Subject {
        group: &def.group,
        plural: &def.plural,
        name: &name,
    };
    let mut warnings = Vec::new();
    if def.round_trip.is_none()
        && let Some(version) = def.version(version)
        && let Some(schema) = &version.schema
    {
        let mut errors = schema::validate(object, schema);
        let rules = version
            .derived
            .get_or_init(|| schema::CompiledRules::compile(schema));
        if let Some(rules) = rules {
            if let Some(blocking) = schema::blocking_error(&errors) {
                errors.push(blocking);
            } else {
                let limits = schema::Limits::APISERVER;
                let outcome = schema::validate_rules(&rules, schema, object, old, limits);
                errors.extend(outcome.errors);
                warnings.extend(outcome.warnings);
            }
        }
        if !errors.is_empty() {
            let message = schema::invalid_message(&def.kind_group(), &name, &errors);
            let causes = errors
                .into_iter()
                .map(|e| (e.reason.to_string(), e.message, e.field))
                .collect();
            return Err(ApiError::invalid(subject, &def.kind, message, causes));
        }
    }
    check_metadata(def, object, subject)?;
    match validation {
        FieldValidation::Ignore => Ok(warnings),
        _ if unknown.is_empty() => Ok(warnings),
        FieldValidation::Warn => Ok(unknown
            .iter()
            .map(|f| format!("unknown field \"{f}\""))
            .chain(warnings)
            .collect()),
        FieldValidation::Strict => Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            unknown
                .iter()
                .map(|f| format!("unknown field \"{f}\""))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Checks of `metadata` common to all resources (names, labels, annotations).
fn check_metadata(def: &ResourceDef, object: &Value, subject: Subject<'_>) -> ApiResult<()> {
    let meta = &object["metadata"];
    let invalid = |field: &str, value: &str, problem: String| {
        ApiError::invalid_field(
            subject,
            &def.kind,
            "FieldValueInvalid",
            field,
            &format!("Invalid value: \"{value}\": {problem}"),
        )
    };
    let name = meta["name"].as_str().unwrap_or_default();
    let problem = if def.builtin == Some(Builtin::Namespace) {
        names::check_label(name)
    } else {
        names::check_subdomain(name)
    };
    if let Some(problem) = problem {
        return Err(invalid("metadata.name", name, problem));
    }
    for (key, value) in meta["labels"].as_object().into_iter().flatten() {
        if let Some(problem) = names::check_qualified_name(key) {
            return Err(invalid("metadata.labels", key, problem));
        }
        let value = value.as_str().unwrap_or_default();
        if let Some(problem) = names::check_label_value(value) {
            return Err(invalid(&format!("metadata.labels.{key}"), value, problem));
        }
    }
    for key in meta["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        if let Some(problem) = names::check_qualified_name(key) {
            return Err(invalid("metadata.annotations", key, problem));
        }
    }
    // apimachinery's `TotalAnnotationSizeLimitB`: keys and values together.
    let total: usize = meta["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, value)| key.len() + value.as_str().map_or(0, str::len))
        .sum();
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        return Err(ApiError::invalid_field(
            subject,
            &def.kind,
            "FieldValueTooLong",
            "metadata.annotations",
            &format!("Too long: must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
        ));
    }
    Ok(())
}

/// The most bytes that all annotations of an object may take together (256 KiB).
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 262_144;

/// Round-trips a built-in object through its typed form, as the real server decodes it.
/// Returns the paths of fields that the type does not know (dropped).
fn normalize_builtin(
    def: &ResourceDef,
    round_trip: RoundTrip,
    object: &mut Value,
) -> Result<Vec<String>, String> {
    if def.builtin == Some(Builtin::Secret) {
        move_string_data(object);
    }
    let normalized = round_trip(object)?;
    let mut unknown = Vec::new();
    dropped_fields(object, &normalized, "", &mut unknown);
    *object = normalized;
    Ok(unknown)
}

/// `stringData` is write-only: the server merges it into `data`, base64-encoded.
fn move_string_data(object: &mut Value) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let Some(Value::Object(string_data)) = map.remove("stringData") else {
        return;
    };
    let data = map.entry("data").or_insert_with(|| json!({}));
    if !data.is_object() {
        *data = json!({});
    }
    for (key, value) in string_data {
        let text = value
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| value.to_string());
        data[key.as_str()] = json!(base64::engine::general_purpose::STANDARD.encode(text));
    }
}

fn normalize_typed<T: DeserializeOwned + Serialize>(
    value: &mut Value,
    prefix: &str,
) -> Result<Vec<String>, String> {
    if value.is_null() {
        return Ok(Vec::new());
    }
    let typed: T = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    let normalized = serde_json::to_value(typed).map_err(|e| e.to_string())?;
    let mut unknown = Vec::new();
    dropped_fields(value, &normalized, prefix, &mut unknown);
    *value = normalized;
    Ok(unknown)
}

/// Paths of non-null fields present in `before` and missing in `after`.
fn dropped_fields(before: &Value, after: &Value, path: &str, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (key, value) in b {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match a.get(key) {
                    Some(next) => dropped_fields(value, next, &child, out),
                    None if !value.is_null() => out.push(child),
                    None => {}
                }
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            for (i, (value, next)) in b.iter().zip(a).enumerate() {
                dropped_fields(value, next, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin(plural: &str) -> std::sync::Arc<ResourceDef> {
        let catalog = crate::storage::builtins::catalog();
        catalog.get("", plural).unwrap().clone()
    }

    #[test]
    fn unknown_fields_of_builtins() {
        let def = builtin("configmaps");
        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "bogus": 1}, "data": {"a": "b"}, "extra": true});
        let warnings = admit(&def, "v1", &mut object, None, FieldValidation::Warn).unwrap();
        assert_eq!(
            warnings,
            vec![
                "unknown field \"metadata.bogus\"",
                "unknown field \"extra\""
            ]
        );
        assert!(object.get("extra").is_none());

        let mut object = json!({"metadata": {"name": "x"}, "extra": true});
        let error = admit(&def, "v1", &mut object, None, FieldValidation::Strict).unwrap_err();
        assert_eq!(error.code, 400);
        assert!(
            error.message.contains("unknown field \"extra\""),
            "{}",
            error.message
        );
    }

    #[test]
    fn secret_string_data_becomes_data() {
        let def = builtin("secrets");
        let mut object = json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}});
        admit(&def, "v1", &mut object, None, FieldValidation::Strict).unwrap();
        assert_eq!(object["data"]["k"], "dg==");
        assert!(object.get("stringData").is_none());
    }

    #[test]
    fn bad_names_and_labels() {
        let def = builtin("configmaps");
        let mut object = json!({"metadata": {"name": "Bad_Name"}});
        let error = admit(&def, "v1", &mut object, None, FieldValidation::Warn).unwrap_err();
        assert_eq!(error.reason, "Invalid");
        assert!(error.message.contains("metadata.name"), "{}", error.message);
        let mut object = json!({"metadata": {"name": "ok", "labels": {"a": "-bad-"}}});
        let error = admit(&def, "v1", &mut object, None, FieldValidation::Warn).unwrap_err();
        assert!(
            error.message.contains("metadata.labels.a"),
            "{}",
            error.message
        );
    }

    #[test]
    fn annotations_over_256_kib_in_total_are_invalid() {
        let def = builtin("configmaps");
        let half = "x".repeat(131_072);
        let mut object = json!({"metadata": {"name": "ok", "annotations": {"a": half, "b": half}}});
        let error = admit(&def, "v1", &mut object, None, FieldValidation::Warn).unwrap_err();
        assert_eq!(error.code, 422);
        assert!(
            error
                .message
                .ends_with("metadata.annotations: Too long: must have at most 262144 bytes"),
            "{}",
            error.message
        );
        let mut object = json!({"metadata": {"name": "ok", "annotations": {"a": half}}});
        admit(&def, "v1", &mut object, None, FieldValidation::Warn).unwrap();
    }

    #[test]
    fn wrong_types_are_bad_requests() {
        let def = builtin("configmaps");
        let mut object = json!({"metadata": {"name": "x"}, "data": "not a map"});
        let error = admit(&def, "v1", &mut object, None, FieldValidation::Warn).unwrap_err();
        assert_eq!(error.code, 400);
        assert!(
            error
                .message
                .starts_with("ConfigMap in version \"v1\" cannot be handled"),
            "{}",
            error.message
        );
    }

    /// A CRD with one CEL rule on its spec.
    fn crd_with_rule() -> ResourceDef {
        let schema = json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "properties": {"replicas": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.replicas < 3", "message": "at most 2"}]
        }}});
        let crd = json!({"spec": {"group": "kopf.dev", "scope": "Namespaced",
            "names": {"plural": "kopfexamples", "kind": "KopfExample"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": schema}}]}});
        ResourceDef::from_crd(&crd).unwrap()
    }

    #[test]
    fn cel_rules_are_compiled_once_per_crd_and_break_writes() {
        let def = crd_with_rule();
        let mut object = json!({"metadata": {"name": "x"}, "spec": {"replicas": 5}});
        let error = admit(&def, "v1", &mut object, None, FieldValidation::Warn).unwrap_err();
        assert_eq!(
            error.message,
            r#"KopfExample.kopf.dev "x" is invalid: spec: Invalid value: "object": at most 2"#
        );
        // The first write compiled the rules; later writes, and copies of the definition
        // (as the catalog keeps them), find them compiled.
        let copy = def.clone();
        let compiled = copy.versions[0]
            .derived
            .get_or_init::<schema::CompiledRules>(|| panic!("compiled again"));
        assert!(compiled.is_some());
        let mut object = json!({"metadata": {"name": "x"}, "spec": {"replicas": 1}});
        admit(&copy, "v1", &mut object, None, FieldValidation::Warn).unwrap();
    }

    #[test]
    fn cel_rules_do_not_run_on_objects_with_blocking_schema_errors() {
        let def = crd_with_rule();
        let mut object = json!({"metadata": {"name": "x"}, "spec": {"replicas": "five"}});
        let error = admit(&def, "v1", &mut object, None, FieldValidation::Warn).unwrap_err();
        assert!(
            error.message.ends_with(r#"<nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"#),
            "{}",
            error.message
        );
    }
}
