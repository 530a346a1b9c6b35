//! What the server does to an object before storing it: typed normalisation of built-ins,
//! pruning, defaulting and validation of custom resources against their CRD's schema, and the
//! checks of `metadata` that every resource shares.

use base64::Engine as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};

use super::selector::label_key_errors;
use super::status::{ApiError, ApiResult, Subject};
use super::{defaults, go_format, names, schema};
use crate::storage::catalog::{Builtin, ResourceDef, RoundTrip};

/// `?fieldValidation=`: what to do with fields the schema does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldValidation {
    Strict,
    Warn,
    Ignore,
}

impl FieldValidation {
    /// The parameter of a request whose options are of the kind `options` (`CreateOptions`,
    /// `UpdateOptions`, `PatchOptions`).
    pub(crate) fn parse(value: Option<&str>, options: &str) -> ApiResult<Self> {
        match value {
            None | Some("" | "Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some(other) => Err(ApiError::invalid_options(
                options,
                "FieldValueNotSupported",
                "fieldValidation",
                &format!(
                    "Unsupported value: \"{other}\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
                ),
            )),
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
            // What defaulting reached for and did not fill in.
            drop_nulls(object);
            omit_empty(def, object);
            Ok(unknown)
        }
        None => {
            let mut unknown = normalize_typed::<ObjectMeta>(&mut object["metadata"], "metadata")
                .map_err(|e| cannot(e.to_string()))?;
            omit_empty(def, object);
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
    check_metadata(def, object, old, subject)?;
    match validation {
        FieldValidation::Ignore => Ok(warnings),
        _ if unknown.is_empty() => Ok(warnings),
        FieldValidation::Warn => Ok(unknown
            .iter()
            .map(|f| format!("unknown field \"{f}\""))
            .chain(warnings)
            .collect()),
        FieldValidation::Strict => {
            let fields = unknown
                .iter()
                .map(|f| format!("unknown field \"{f}\""))
                .collect::<Vec<_>>()
                .join(", ");
            Err(ApiError::bad_request(format!(
                "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {fields}",
                kind = def.kind,
            )))
        }
    }
}

/// Checks of `metadata` common to all resources (names, labels, annotations), of the data of
/// ConfigMaps and Secrets, and of the `roleRef` of RBAC bindings: every error at once, as
/// kube-apiserver reports them.
fn check_metadata(
    def: &ResourceDef,
    object: &Value,
    old: Option<&Value>,
    subject: Subject<'_>,
) -> ApiResult<()> {
    let meta = &object["metadata"];
    let invalid = |field: &str, value: &str, problem: &str| {
        (
            "FieldValueInvalid",
            field.to_string(),
            format!("Invalid value: {}: {problem}", go_format::go_quote(value)),
        )
    };
    let check_name = |name: &str| {
        if def.builtin == Some(Builtin::Namespace) {
            names::check_label(name)
        } else {
            names::check_subdomain(name)
        }
    };
    let mut errors = Vec::new();
    // A `generateName` is checked as a name, with its trailing dash masked (the name made from
    // it is checked too, next).
    if let Some(prefix) = meta["generateName"].as_str().filter(|p| !p.is_empty())
        && let Some(problem) = check_name(&mask_trailing_dash(prefix))
    {
        errors.push(invalid("metadata.generateName", prefix, &problem));
    }
    let name = meta["name"].as_str().unwrap_or_default();
    if let Some(problem) = check_name(name) {
        errors.push(invalid("metadata.name", name, &problem));
    }
    for (key, value) in meta["labels"].as_object().into_iter().flatten() {
        for problem in label_key_errors(key) {
            errors.push(invalid("metadata.labels", key, &problem));
        }
        let value = value.as_str().unwrap_or_default();
        if let Some(problem) = names::check_label_value(value) {
            errors.push(invalid("metadata.labels", value, &problem));
        }
    }
    for key in meta["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        // As for labels, except that case does not matter.
        for problem in label_key_errors(&key.to_lowercase()) {
            errors.push(invalid("metadata.annotations", key, &problem));
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
        errors.push((
            "FieldValueTooLong",
            "metadata.annotations".into(),
            format!("Too long: must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
        ));
    }
    if matches!(def.builtin, Some(Builtin::ConfigMap | Builtin::Secret)) {
        errors.extend(data_key_errors(def, object));
        errors.extend(data_errors(def, object, old));
    }
    if matches!(
        def.builtin,
        Some(Builtin::RoleBinding | Builtin::ClusterRoleBinding)
    ) {
        errors.extend(role_ref_errors(def, object, old));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_fields(subject, &def.kind, errors))
    }
}

/// The keys of a ConfigMap's `data` and `binaryData` (or a Secret's `data`): valid config
/// keys, and in one of them only (core validation's `IsConfigMapKey`).
fn data_key_errors(def: &ResourceDef, object: &Value) -> Vec<(&'static str, String, String)> {
    let mut errors = Vec::new();
    let binary = object["binaryData"].as_object();
    let sections: &[&str] = if def.builtin == Some(Builtin::ConfigMap) {
        &["data", "binaryData"]
    } else {
        &["data"]
    };
    for section in sections {
        for key in object[*section]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            let field = format!("{section}[{key}]");
            for problem in config_key_errors(key) {
                errors.push((
                    "FieldValueInvalid",
                    field.clone(),
                    format!("Invalid value: {}: {problem}", go_format::go_quote(key)),
                ));
            }
            if *section == "data"
                && def.builtin == Some(Builtin::ConfigMap)
                && binary.is_some_and(|b| b.contains_key(key))
            {
                errors.push((
                    "FieldValueInvalid",
                    field,
                    format!(
                        "Invalid value: {}: duplicate of key present in binaryData",
                        go_format::go_quote(key)
                    ),
                ));
            }
        }
    }
    errors
}

/// What core validation checks of a Secret's type and of immutable ConfigMaps and Secrets:
/// the keys a type requires, a type that never changes, data that never changes once
/// `immutable`.
fn data_errors(
    def: &ResourceDef,
    object: &Value,
    old: Option<&Value>,
) -> Vec<(&'static str, String, String)> {
    let mut errors = Vec::new();
    let required = |key: &str| {
        (
            "FieldValueRequired",
            format!("data[{key}]"),
            "Required value".to_string(),
        )
    };
    if def.builtin == Some(Builtin::Secret) {
        let has = |key: &str| object["data"].get(key).is_some();
        let needed: &[&str] = match object["type"].as_str().unwrap_or_default() {
            "kubernetes.io/tls" => &["tls.crt", "tls.key"],
            "kubernetes.io/ssh-auth" => &["ssh-privatekey"],
            "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
            "kubernetes.io/dockercfg" => &[".dockercfg"],
            _ => &[],
        };
        errors.extend(needed.iter().filter(|k| !has(k)).map(|k| required(k)));
        if let Some(old) = old
            && old["type"] != object["type"]
        {
            let given = object["type"].as_str().unwrap_or_default();
            errors.push((
                "FieldValueInvalid",
                "type".to_string(),
                format!(
                    "Invalid value: {}: field is immutable",
                    go_format::go_quote(given)
                ),
            ));
        }
    }
    if let Some(old) = old
        && old["immutable"] == true
    {
        let forbidden = |field: &str| {
            (
                "FieldValueForbidden",
                field.to_string(),
                "Forbidden: field is immutable when `immutable` is set".to_string(),
            )
        };
        if object["immutable"] != true {
            errors.push(forbidden("immutable"));
        }
        for section in ["data", "binaryData"] {
            if object[section] != old[section] {
                errors.push(forbidden(section));
            }
        }
    }
    errors
}

/// apimachinery's `maskTrailingDash`, as it is: a prefix ending in a dash loses its last two
/// characters for an `a`.
fn mask_trailing_dash(prefix: &str) -> String {
    match prefix.strip_suffix('-') {
        Some(_) if prefix.len() > 1 => {
            let mut kept: Vec<char> = prefix.chars().collect();
            kept.truncate(kept.len() - 2);
            kept.into_iter().chain(['a']).collect()
        }
        _ => prefix.to_string(),
    }
}

/// What RBAC validation checks of a binding's `roleRef`: the RBAC group, a kind of role the
/// binding may name (a ClusterRoleBinding only ClusterRoles), a name that is a path segment,
/// and no change once bound.
fn role_ref_errors(
    def: &ResourceDef,
    object: &Value,
    old: Option<&Value>,
) -> Vec<(&'static str, String, String)> {
    const GROUP: &str = "rbac.authorization.k8s.io";
    let reference = &object["roleRef"];
    let text = |key: &str| reference[key].as_str().unwrap_or_default().to_string();
    let (group, kind, name) = (text("apiGroup"), text("kind"), text("name"));
    let quoted = |values: &[&str]| {
        values
            .iter()
            .map(|v| go_format::go_quote(v))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let not_supported = |field: &str, given: &str, supported: &[&str]| {
        (
            "FieldValueNotSupported",
            field.to_string(),
            format!(
                "Unsupported value: {}: supported values: {}",
                go_format::go_quote(given),
                quoted(supported)
            ),
        )
    };
    let mut errors = Vec::new();
    if group != GROUP {
        errors.push(not_supported("roleRef.apiGroup", &group, &[GROUP]));
    }
    let kinds: &[&str] = if def.builtin == Some(Builtin::ClusterRoleBinding) {
        &["ClusterRole"]
    } else {
        &["Role", "ClusterRole"]
    };
    if !kinds.contains(&kind.as_str()) {
        errors.push(not_supported("roleRef.kind", &kind, kinds));
    }
    if name.is_empty() {
        errors.push((
            "FieldValueRequired",
            "roleRef.name".to_string(),
            "Required value".to_string(),
        ));
    } else {
        // apimachinery's `IsValidPathSegmentName`.
        let problems = match name.as_str() {
            "." => vec!["may not be '.'".to_string()],
            ".." => vec!["may not be '..'".to_string()],
            _ => ["/", "%"]
                .iter()
                .filter(|c| name.contains(*c))
                .map(|c| format!("may not contain '{c}'"))
                .collect(),
        };
        for problem in problems {
            errors.push((
                "FieldValueInvalid",
                "roleRef.name".to_string(),
                format!("Invalid value: {}: {problem}", go_format::go_quote(&name)),
            ));
        }
    }
    if let Some(old) = old
        && old["roleRef"] != *reference
    {
        // Go's `%#v` of the `rbac.RoleRef` given.
        errors.push((
            "FieldValueInvalid",
            "roleRef".to_string(),
            format!(
                "Invalid value: rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}: cannot change roleRef",
                go_format::go_quote(&group),
                go_format::go_quote(&kind),
                go_format::go_quote(&name)
            ),
        ));
    }
    errors
}

/// apimachinery's `IsConfigMapKey`.
fn config_key_errors(key: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if key.len() > 253 {
        errors.push("must be no more than 253 characters".to_string());
    }
    let valid = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !valid {
        errors.push("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')".to_string());
    }
    match key {
        "." => errors.push("must not be '.'".to_string()),
        ".." => errors.push("must not be '..'".to_string()),
        _ if key.starts_with("..") => errors.push("must not start with '..'".to_string()),
        _ => {}
    }
    errors
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
    let mut normalized = round_trip(object)?;
    whole_numbers(&mut normalized);
    let mut unknown = Vec::new();
    dropped_fields(object, &normalized, "", &mut unknown);
    *object = normalized;
    Ok(unknown)
}

/// Leaves out the empty maps and lists that Go's `omitempty` leaves out of the stored object:
/// `metadata`'s labels, annotations, finalizers and owner references (of every kind), and the
/// data of ConfigMaps and Secrets.
pub(crate) fn omit_empty(def: &ResourceDef, object: &mut Value) {
    let empty = |value: &Value| match value {
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    };
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in ["labels", "annotations", "finalizers", "ownerReferences"] {
            if meta.get(key).is_some_and(empty) {
                meta.remove(key);
            }
        }
    }
    if matches!(def.builtin, Some(Builtin::ConfigMap | Builtin::Secret))
        && let Some(map) = object.as_object_mut()
    {
        for key in ["data", "binaryData"] {
            if map.get(key).is_some_and(empty) {
                map.remove(key);
            }
        }
    }
}

/// Removes every `null` from a built-in object: Go leaves nil fields out.
fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// Writes numbers of a whole value as integers (`0`, not `0.0`), as Go writes its floats (a
/// CRD schema's `minimum`, say): the typed round trip reads them as floats.
fn whole_numbers(value: &mut Value) {
    match value {
        Value::Object(map) => map.values_mut().for_each(whole_numbers),
        Value::Array(items) => items.iter_mut().for_each(whole_numbers),
        Value::Number(number) => {
            if let Some(float) = number.as_f64()
                && number.is_f64()
                && float.fract() == 0.0
                && float.abs() < 9.0e15
            {
                *number = serde_json::Number::from(float as i64);
            }
        }
        _ => {}
    }
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
    fn a_bad_generate_name_is_reported_with_the_name_made_from_it() {
        let def = builtin("configmaps");
        let mut object = json!({"metadata": {"generateName": "Bad_", "name": "Bad_x7k2z"}});
        let error = admit(&def, "v1", &mut object, None, FieldValidation::Strict).unwrap_err();
        let causes: Vec<&str> = error.details.as_ref().unwrap()["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["field"].as_str().unwrap())
            .collect();
        assert_eq!(causes, ["metadata.generateName", "metadata.name"]);
        // A trailing dash is masked as apimachinery masks it: `ab-` is checked as `aa`.
        assert_eq!(mask_trailing_dash("ab-"), "aa");
        assert_eq!(mask_trailing_dash("-"), "-");
        let mut object = json!({"metadata": {"generateName": "ok-", "name": "ok-x7k2z"}});
        admit(&def, "v1", &mut object, None, FieldValidation::Strict).unwrap();
    }

    #[test]
    fn bindings_name_a_role_of_rbac_and_keep_it() {
        let catalog = crate::storage::builtins::catalog();
        let def = catalog
            .get("rbac.authorization.k8s.io", "rolebindings")
            .unwrap()
            .clone();
        let binding = |reference: Value| json!({"metadata": {"name": "b", "namespace": "ns"}, "roleRef": reference, "subjects": []});
        let role = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"});
        let mut good = binding(role.clone());
        admit(&def, "v1", &mut good, None, FieldValidation::Strict).unwrap();

        let mut bad = binding(json!({"apiGroup": "x", "kind": "Secret", "name": "a/b"}));
        let error = admit(&def, "v1", &mut bad, None, FieldValidation::Strict).unwrap_err();
        assert_eq!(error.code, 422);
        assert_eq!(
            error.message,
            concat!(
                r#"RoleBinding.rbac.authorization.k8s.io "b" is invalid: ["#,
                r#"roleRef.apiGroup: Unsupported value: "x": supported values: "rbac.authorization.k8s.io", "#,
                r#"roleRef.kind: Unsupported value: "Secret": supported values: "Role", "ClusterRole", "#,
                r#"roleRef.name: Invalid value: "a/b": may not contain '/']"#,
            )
        );

        let mut changed = binding(
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"}),
        );
        let old = binding(role);
        let error = admit(
            &def,
            "v1",
            &mut changed,
            Some(&old),
            FieldValidation::Strict,
        )
        .unwrap_err();
        assert!(error.message.ends_with(r#"roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"r"}: cannot change roleRef"#), "{}", error.message);

        let def = catalog
            .get("rbac.authorization.k8s.io", "clusterrolebindings")
            .unwrap()
            .clone();
        let mut cluster = json!({"metadata": {"name": "c"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}});
        let error = admit(&def, "v1", &mut cluster, None, FieldValidation::Strict).unwrap_err();
        assert!(
            error.message.ends_with(
                r#"roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole""#
            ),
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
            error
                .message
                .contains(r#"metadata.labels: Invalid value: "-bad-""#),
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
            r#"KopfExample.kopf.dev "x" is invalid: spec: Invalid value: at most 2"#
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
            error.message.ends_with(r#"<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"#),
            "{}",
            error.message
        );
    }
}
