//! The diff-base: the essence of an object as last handled, against which the next version is
//! compared to detect creation (no diff-base yet), updates (a diff) and no-ops (none).
//!
//! The *essence* is the body without what the system or Kopf itself changes: no `apiVersion`,
//! `kind`, `metadata` or `status`, except `metadata.labels` and `metadata.annotations` (minus
//! Kopf-based operators' annotations and `kubectl.kubernetes.io/last-applied-configuration`)
//! and the extra fields that handlers watch (`field="status.phase"`); empty stanzas are
//! dropped, then the storage's ignored fields.
//!
//! Kopf: `kopf/_cogs/configs/diffbase.py` (`DiffBaseStorage.build` and its storages).

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::{fields, keys, pyjson};

/// The annotation `kubectl apply` keeps its own "diff-base" in; never part of an essence.
const KUBECTL_LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Kopf's essence of an object (see the module docs), in the body's key order: the remaining
/// top-level fields first, then `metadata` (`labels`, then `annotations`), then extra fields
/// not already present, in the order given.
///
/// `extra_fields` and `ignored_fields` are paths of field names (`["status", "phase"]`), so
/// that names with dots (labels' keys) can be given. An extra field whose path runs through a
/// non-object is skipped; so is an ignored field.
///
/// ```
/// use serde_json::json;
///
/// let body = json!({
///     "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
///     "metadata": {"name": "x", "uid": "1", "labels": {"app": "a"},
///                  "annotations": {"kopf.zalando.org/create_fn": "{}", "note": "n"}},
///     "spec": {"size": 3},
///     "status": {"phase": "Running", "create_fn": {"done": true}},
/// });
/// let extra_fields = [vec!["status".to_owned(), "phase".to_owned()]];
/// let essence = kopf::storage::build_essence(&body, &extra_fields, &[]);
/// assert_eq!(essence, json!({
///     "spec": {"size": 3},
///     "metadata": {"labels": {"app": "a"}, "annotations": {"note": "n"}},
///     "status": {"phase": "Running"},
/// }));
/// ```
pub fn build_essence(
    body: &Value,
    extra_fields: &[Vec<String>],
    ignored_fields: &[Vec<String>],
) -> Value {
    // Only what is kept is copied (not the whole body, `metadata.managedFields` and all, to
    // drop most of it again): this runs at least twice per handled change.
    let essence = body
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, _)| !matches!(key.as_str(), "apiVersion" | "kind" | "metadata" | "status"))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let mut essence = Value::Object(essence);

    // The labels, and the annotations but Kopf's own (its records and this diff-base) and
    // kubectl's: only those kept are copied.
    let mut metadata = Map::new();
    if let Some(labels) = fields::resolve(body, &["metadata", "labels"]) {
        metadata.insert("labels".into(), labels.clone());
    }
    if let Some(annotations) = fields::resolve(body, &["metadata", "annotations"]) {
        let kept = match annotations.as_object() {
            Some(annotations) => {
                let marked = keys::detect_marked_prefixes(annotations.keys().map(String::as_str));
                let own = |key: &str| marked.iter().any(|prefix| keys::is_under(key, prefix));
                let kept = annotations
                    .iter()
                    .filter(|(key, _)| *key != KUBECTL_LAST_APPLIED && !own(key))
                    .map(|(key, value)| (key.clone(), value.clone()));
                Value::Object(kept.collect())
            }
            None => annotations.clone(),
        };
        metadata.insert("annotations".into(), kept);
    }
    if !metadata.is_empty() {
        fields::ensure(&mut essence, &["metadata"], Value::Object(metadata));
    }

    fields::cherrypick(body, &mut essence, extra_fields);
    fields::remove_empty_stanzas(&mut essence);
    for ignored in ignored_fields {
        let path: Vec<&str> = ignored.iter().map(String::as_str).collect();
        let _ = fields::remove(&mut essence, &path);
    }
    essence
}

/// Where the diff-base of an object is kept.
///
/// Implementations read from the object's `body` and write into `patch`, a JSON merge-patch
/// being built for the object (an object, or `null` for an empty one).
pub trait DiffBaseStorage: Send + Sync + fmt::Debug {
    /// The essence of this body as this storage sees it: [`build_essence`] with the storage's
    /// ignored fields, minus the storage's own fields.
    fn build(&self, body: &Value, extra_fields: &[Vec<String>]) -> Value;

    /// The essence stored on the object, if any.
    fn fetch(&self, body: &Value) -> Option<Value>;

    /// Writes the essence into the patch.
    fn store(&self, body: &Value, essence: &Value, patch: &mut Value);
}

/// The diff-base in an annotation, `kopf.zalando.org/last-handled-configuration` by default:
/// the essence as compact ASCII-only JSON plus `"\n"`, as Kopf writes it.
///
/// Keys are formed as for progress records ([annotation keys](crate::configs::storage#annotation-keys));
/// for prefixes that do not start with `kopf.`, it also writes `<prefix>/kopf-managed: "yes"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationsDiffBaseStorage {
    /// The annotation's prefix; `kopf.zalando.org` by default. Must not be empty.
    pub prefix: String,
    /// The annotation's name; `last-handled-configuration` by default.
    pub key: String,
    /// Also write the V1 key; on by default (as in Kopf). Irrelevant for short keys.
    pub v1: bool,
    /// Dotted paths left out of the essence (`spec.template.metadata`).
    pub ignored_fields: Vec<String>,
}

impl AnnotationsDiffBaseStorage {
    /// The storage with Kopf's defaults under another prefix.
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
            ..Self::default()
        }
    }

    fn annotation_keys(&self, body: &Value) -> Arc<[String]> {
        keys::make_keys(&self.prefix, self.v1, &self.key, body)
    }
}

impl Default for AnnotationsDiffBaseStorage {
    fn default() -> Self {
        Self {
            prefix: keys::DEFAULT_PREFIX.to_owned(),
            key: "last-handled-configuration".to_owned(),
            v1: true,
            ignored_fields: Vec::new(),
        }
    }
}

impl DiffBaseStorage for AnnotationsDiffBaseStorage {
    fn build(&self, body: &Value, extra_fields: &[Vec<String>]) -> Value {
        let mut essence = build_essence(body, extra_fields, &parse_fields(&self.ignored_fields));
        fields::remove_annotations(&mut essence, &self.annotation_keys(body));
        fields::remove_empty_stanzas(&mut essence);
        essence
    }

    fn fetch(&self, body: &Value) -> Option<Value> {
        self.annotation_keys(body).iter().find_map(|full_key| {
            let encoded = fields::resolve(body, &["metadata", "annotations", full_key])?;
            decode(encoded)
        })
    }

    fn store(&self, body: &Value, essence: &Value, patch: &mut Value) {
        // The newline keeps kubectl from wrapping the value, as for its own annotation.
        let encoded = pyjson::dumps(essence) + "\n";
        for full_key in &*self.annotation_keys(body) {
            let path = ["metadata", "annotations", full_key.as_str()];
            fields::ensure(patch, &path, Value::String(encoded.clone()));
        }
        keys::store_marker(&self.prefix, body, patch);
    }
}

/// The diff-base in a status field, `status.kopf.last-handled-configuration` by default: the
/// essence as a JSON **string** (no trailing newline), so that it is replaced, never merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusDiffBaseStorage {
    /// The dotted path of the field.
    pub field: String,
    /// Dotted paths left out of the essence (`spec.template.metadata`).
    pub ignored_fields: Vec<String>,
}

impl StatusDiffBaseStorage {
    /// The storage in `status.<name>.last-handled-configuration`.
    pub fn new(name: &str) -> Self {
        Self {
            field: format!("status.{name}.last-handled-configuration"),
            ignored_fields: Vec::new(),
        }
    }
}

impl Default for StatusDiffBaseStorage {
    fn default() -> Self {
        Self::new("kopf")
    }
}

impl DiffBaseStorage for StatusDiffBaseStorage {
    fn build(&self, body: &Value, extra_fields: &[Vec<String>]) -> Value {
        let mut essence = build_essence(body, extra_fields, &parse_fields(&self.ignored_fields));
        let _ = fields::remove(&mut essence, &fields::parse_field(&self.field));
        essence
    }

    fn fetch(&self, body: &Value) -> Option<Value> {
        decode(fields::resolve(body, &fields::parse_field(&self.field))?)
    }

    fn store(&self, _body: &Value, essence: &Value, patch: &mut Value) {
        let encoded = pyjson::dumps(essence);
        fields::ensure(
            patch,
            &fields::parse_field(&self.field),
            Value::String(encoded),
        );
    }
}

/// Several diff-base storages at once: builds through all of them, stores into all of them,
/// fetches from the first that has a diff-base.
#[derive(Debug, Default)]
pub struct MultiDiffBaseStorage {
    /// The storages, in the order of preference for fetching.
    pub storages: Vec<Box<dyn DiffBaseStorage>>,
}

impl DiffBaseStorage for MultiDiffBaseStorage {
    fn build(&self, body: &Value, extra_fields: &[Vec<String>]) -> Value {
        // Each storage cleans its own fields from what the previous ones left of the body.
        let essence = build_essence(body, extra_fields, &[]);
        self.storages.iter().fold(essence, |essence, storage| {
            storage.build(&essence, extra_fields)
        })
    }

    fn fetch(&self, body: &Value) -> Option<Value> {
        self.storages.iter().find_map(|storage| storage.fetch(body))
    }

    fn store(&self, body: &Value, essence: &Value, patch: &mut Value) {
        for storage in &self.storages {
            storage.store(body, essence, patch);
        }
    }
}

fn parse_fields(dotted: &[String]) -> Vec<Vec<String>> {
    dotted
        .iter()
        .map(|field| field.split('.').map(str::to_owned).collect())
        .collect()
}

/// A stored essence: a JSON string (surrounding whitespace allowed) that is not `null`.
/// Unparseable content counts as absent.
fn decode(encoded: &Value) -> Option<Value> {
    let decoded: Value = serde_json::from_str(encoded.as_str()?).ok()?;
    (!decoded.is_null()).then_some(decoded)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn storages() -> Vec<Box<dyn DiffBaseStorage>> {
        vec![
            Box::new(AnnotationsDiffBaseStorage::default()),
            Box::new(StatusDiffBaseStorage::default()),
            Box::new(MultiDiffBaseStorage {
                storages: vec![
                    Box::new(AnnotationsDiffBaseStorage::default()),
                    Box::new(StatusDiffBaseStorage::default()),
                ],
            }),
        ]
    }

    fn paths(dotted: &[&str]) -> Vec<Vec<String>> {
        dotted
            .iter()
            .map(|field| field.split('.').map(str::to_owned).collect())
            .collect()
    }

    fn assert_essence(body: Value, extra_fields: &[&str], expected: Value) {
        for storage in storages() {
            assert_eq!(
                storage.build(&body, &paths(extra_fields)),
                expected,
                "{storage:?} of {body}"
            );
        }
    }

    // Kopf's tests/persistence/test_essences.py, one case each.

    #[test]
    fn removes_resource_references() {
        assert_essence(
            json!({"apiVersion": "group/version", "kind": "Kind"}),
            &[],
            json!({}),
        );
    }

    const SYSTEM_FIELDS: [&str; 10] = [
        "uid",
        "name",
        "namespace",
        "selfLink",
        "generation",
        "finalizers",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
        "any-unexpected-field",
    ];

    #[test]
    fn removes_system_fields_and_cleans_parents() {
        for field in SYSTEM_FIELDS {
            assert_essence(json!({"metadata": {field: "x"}}), &[], json!({}));
        }
    }

    #[test]
    fn removes_system_fields_but_keeps_extra_fields() {
        for field in SYSTEM_FIELDS {
            assert_essence(
                json!({"metadata": {field: "x", "other": "y"}}),
                &["metadata.other"],
                json!({"metadata": {"other": "y"}}),
            );
        }
    }

    #[test]
    fn removes_kubectl_annotation_and_cleans_parents() {
        assert_essence(
            json!({"metadata": {"annotations": {KUBECTL_LAST_APPLIED: "x"}}}),
            &[],
            json!({}),
        );
    }

    #[test]
    fn removes_kubectl_annotation_but_keeps_others() {
        assert_essence(
            json!({"metadata": {"annotations": {KUBECTL_LAST_APPLIED: "x", "other": "y"}}}),
            &[],
            json!({"metadata": {"annotations": {"other": "y"}}}),
        );
    }

    #[test]
    fn keeps_annotations_mentioning_kopf_but_not_of_other_operators() {
        for prefix in [
            "kopf-domain.tld",
            "kopf.domain.tld",
            "domain.tld.kopf",
            "domain.tld-kopf",
            "domain.kopf.tld",
            "domain.kopf-tld",
            "domain-kopf.tld",
            "domain-kopf-tld",
        ] {
            let annotations = json!({format!("{prefix}/to-be-removed"): "x"});
            assert_essence(
                json!({"metadata": {"annotations": annotations.clone()}}),
                &[],
                json!({"metadata": {"annotations": annotations}}),
            );
        }
    }

    #[test]
    fn removes_other_operators_annotations_by_domain() {
        for prefix in [
            "kopf.zalando.org",
            "sub.kopf.zalando.org",
            "sub.sub.kopf.zalando.org",
        ] {
            assert_essence(
                json!({"metadata": {"annotations": {format!("{prefix}/to-be-removed"): "x", "other": "y"}}}),
                &[],
                json!({"metadata": {"annotations": {"other": "y"}}}),
            );
        }
    }

    #[test]
    fn removes_other_operators_annotations_by_marker() {
        assert_essence(
            json!({"metadata": {"annotations": {
                "domain.tld/to-be-removed": "x",
                "domain.tld/kopf-managed": "yes",
                "other": "y",
            }}}),
            &[],
            json!({"metadata": {"annotations": {"other": "y"}}}),
        );
    }

    #[test]
    fn removes_status_and_cleans_parents() {
        let body = json!({"status": {"kopf": {"progress": "x", "anything": "y"}, "other": "z"}});
        assert_essence(body, &[], json!({}));
    }

    #[test]
    fn removes_status_but_keeps_extra_fields() {
        let body = json!({"status": {"kopf": {"progress": "x", "anything": "y"}, "other": "z"}});
        assert_essence(body, &["status.other"], json!({"status": {"other": "z"}}));
    }

    #[test]
    fn removes_ignored_fields() {
        let body = json!({"a": {"b": {"c": "d"}, "e": {"f": "g"}}, "h": {"i": "j"}});
        let ignored = ["a.b", "a.e.f.g", "h", "k.l.m"];
        let expected = json!({"a": {"e": {"f": "g"}}});
        assert_eq!(build_essence(&body, &[], &paths(&ignored)), expected);
        let storage = AnnotationsDiffBaseStorage {
            ignored_fields: ignored.map(String::from).to_vec(),
            ..AnnotationsDiffBaseStorage::default()
        };
        assert_eq!(storage.build(&body, &[]), expected);
        let storage = StatusDiffBaseStorage {
            ignored_fields: ignored.map(String::from).to_vec(),
            ..StatusDiffBaseStorage::default()
        };
        assert_eq!(storage.build(&body, &[]), expected);
    }

    #[test]
    fn keeps_labels_before_annotations_and_empties_removed() {
        let body =
            json!({"metadata": {"annotations": {"a": "1"}, "labels": {"l": "2"}}, "spec": 1});
        assert_eq!(
            build_essence(
                &body,
                &[vec![
                    "metadata".into(),
                    "labels".into(),
                    "app.kubernetes.io/name".into()
                ]],
                &[]
            ),
            json!({"spec": 1, "metadata": {"labels": {"l": "2"}, "annotations": {"a": "1"}}}),
        );
        let essence = build_essence(&body, &[], &[]);
        assert_eq!(
            serde_json::to_string(&essence).unwrap(),
            r#"{"spec":1,"metadata":{"labels":{"l":"2"},"annotations":{"a":"1"}}}"#
        );
        let body = json!({"metadata": {"annotations": {}, "labels": {}}, "spec": {}});
        assert_eq!(build_essence(&body, &[], &[]), json!({"spec": {}}));
    }

    #[test]
    fn own_diffbase_key_removed_under_custom_prefixes() {
        let storage = AnnotationsDiffBaseStorage::new("my-op.example.com");
        let body = json!({"metadata": {"annotations": {
            "my-op.example.com/last-handled-configuration": "{}\n",
            "other": "y",
        }}});
        assert_eq!(
            storage.build(&body, &[]),
            json!({"metadata": {"annotations": {"other": "y"}}})
        );
    }

    #[test]
    fn extra_fields_through_non_objects_are_skipped() {
        let body = json!({"spec": "text", "status": null});
        assert_essence(body, &["spec.x", "status.phase"], json!({"spec": "text"}));
    }

    /// A body with unicode, floats, Kopf's and others' annotations: what Kopf 1.45.2's
    /// `AnnotationsDiffBaseStorage().build(body, extra_fields=['status.phase'])` and
    /// `.store(...)` wrote into the patch, byte for byte.
    fn kopf_body() -> Value {
        serde_json::from_str(
            r#"{
            "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
            "metadata": {"name": "ex", "namespace": "default", "uid": "u", "resourceVersion": "1",
                "annotations": {"zzz": "last", "kopf.zalando.org/create_fn": "{}",
                    "kopf.zalando.org/last-handled-configuration": "{}\n",
                    "kubectl.kubernetes.io/last-applied-configuration": "{}",
                    "other.kopf.zalando.org/x": "y", "my-op.example.com/kopf-managed": "yes",
                    "my-op.example.com/fn": "{}", "aaa": "first"},
                "labels": {"app": "\u00fc"}},
            "spec": {"field": "v\u00e4lue \"q\" \\ \t",
                "items": [1, 2.5, 1e+16, 1e-05, 0.0001, -0.0, 123456789012345678, true, null, {"b": 1, "a": 2}],
                "emoji": "\ud83d\ude00"},
            "status": {"phase": "Running", "kopf": {"progress": {}}},
            "zeta": 1
        }"#,
        )
        .unwrap()
    }

    const KOPF_ESSENCE_JSON: &str = r#"{"spec":{"field":"v\u00e4lue \"q\" \\ \t","items":[1,2.5,1e+16,1e-05,0.0001,-0.0,123456789012345678,true,null,{"b":1,"a":2}],"emoji":"\ud83d\ude00"},"zeta":1,"metadata":{"labels":{"app":"\u00fc"},"annotations":{"zzz":"last","aaa":"first"}},"status":{"phase":"Running"}}"#;

    #[test]
    fn annotation_written_exactly_as_kopf() {
        let storage = AnnotationsDiffBaseStorage::default();
        let body = kopf_body();
        let essence = storage.build(&body, &paths(&["status.phase"]));
        let mut patch = json!({});
        storage.store(&body, &essence, &mut patch);
        let expected = format!("{KOPF_ESSENCE_JSON}\n");
        assert_eq!(
            patch,
            json!({"metadata": {"annotations": {"kopf.zalando.org/last-handled-configuration": expected}}})
        );
    }

    #[test]
    fn status_field_written_exactly_as_kopf() {
        let storage = StatusDiffBaseStorage::default();
        let body = kopf_body();
        let essence = AnnotationsDiffBaseStorage::default().build(&body, &paths(&["status.phase"]));
        let mut patch = json!({});
        storage.store(&body, &essence, &mut patch);
        assert_eq!(
            patch,
            json!({"status": {"kopf": {"last-handled-configuration": KOPF_ESSENCE_JSON}}})
        );
    }

    #[test]
    fn diffbase_written_by_kopf_is_read_as_the_same_essence() {
        let storage = AnnotationsDiffBaseStorage::default();
        let mut body = kopf_body();
        fields::ensure(
            &mut body,
            &[
                "metadata",
                "annotations",
                "kopf.zalando.org/last-handled-configuration",
            ],
            Value::String(format!("{KOPF_ESSENCE_JSON}\n")),
        );
        let stored = storage.fetch(&body).expect("a diff-base");
        let built = storage.build(&body, &paths(&["status.phase"]));
        assert_eq!(stored, built);
        assert_eq!(pyjson::dumps(&stored), KOPF_ESSENCE_JSON);
    }

    #[test]
    fn fetching_from_empty_body_returns_none() {
        for storage in storages() {
            assert_eq!(storage.fetch(&json!({})), None, "{storage:?}");
        }
    }

    #[test]
    fn fetching_tolerates_surrounding_newlines_and_skips_garbage() {
        let essence = json!({"spec": {"string-field": "value1", "integer-field": 123, "float-field": 123.456, "false-field": false, "true-field": true}});
        let text = pyjson::dumps(&essence);
        let annotations = AnnotationsDiffBaseStorage {
            key: "diff-base".into(),
            ..AnnotationsDiffBaseStorage::new("my-operator.example.com")
        };
        let status = StatusDiffBaseStorage {
            field: "status.my-operator.diff-base".into(),
            ..StatusDiffBaseStorage::default()
        };
        for prefix in ["", "\n"] {
            for suffix in ["", "\n"] {
                let encoded = format!("{prefix}{text}{suffix}");
                let body = json!({"metadata": {"annotations": {"my-operator.example.com/diff-base": encoded.clone()}}});
                assert_eq!(annotations.fetch(&body), Some(essence.clone()));
                let body = json!({"status": {"my-operator": {"diff-base": encoded}}});
                assert_eq!(status.fetch(&body), Some(essence.clone()));
            }
        }
        let body =
            json!({"metadata": {"annotations": {"my-operator.example.com/diff-base": "{oops"}}});
        assert_eq!(annotations.fetch(&body), None);
        let body =
            json!({"metadata": {"annotations": {"my-operator.example.com/diff-base": "null"}}});
        assert_eq!(annotations.fetch(&body), None);
    }

    #[test]
    fn storing_populates_and_overwrites() {
        let essence1 = json!({"spec": {"hello": "world"}});
        let essence2 = json!({"spec": {"the-cake": false}});
        let annotations = AnnotationsDiffBaseStorage {
            key: "diff-base".into(),
            ..AnnotationsDiffBaseStorage::new("my-operator.example.com")
        };
        let mut patch = Value::Null;
        annotations.store(&json!({}), &essence1, &mut patch);
        annotations.store(&json!({}), &essence2, &mut patch);
        assert_eq!(
            patch,
            json!({"metadata": {"annotations": {
                "my-operator.example.com/diff-base": "{\"spec\":{\"the-cake\":false}}\n",
                "my-operator.example.com/kopf-managed": "yes",
            }}})
        );

        let status = StatusDiffBaseStorage {
            field: "status.my-operator.diff-base".into(),
            ..StatusDiffBaseStorage::default()
        };
        let mut patch = json!({});
        status.store(&json!({}), &essence1, &mut patch);
        status.store(&json!({}), &essence2, &mut patch);
        assert_eq!(
            patch,
            json!({"status": {"my-operator": {"diff-base": "{\"spec\":{\"the-cake\":false}}"}}})
        );
    }

    #[test]
    fn multi_storage_writes_all_and_reads_the_first() {
        let storage = MultiDiffBaseStorage {
            storages: vec![
                Box::new(AnnotationsDiffBaseStorage::default()),
                Box::new(StatusDiffBaseStorage::default()),
            ],
        };
        let essence = json!({"spec": {"x": 1}});
        let mut patch = json!({});
        storage.store(&json!({}), &essence, &mut patch);
        assert_eq!(
            patch,
            json!({
                "metadata": {"annotations": {"kopf.zalando.org/last-handled-configuration": "{\"spec\":{\"x\":1}}\n"}},
                "status": {"kopf": {"last-handled-configuration": "{\"spec\":{\"x\":1}}"}},
            })
        );
        let status_only =
            json!({"status": {"kopf": {"last-handled-configuration": "{\"spec\":{\"x\":2}}"}}});
        assert_eq!(storage.fetch(&status_only), Some(json!({"spec": {"x": 2}})));
        assert_eq!(storage.fetch(&patch), Some(essence));
    }

    #[test]
    fn status_storage_removes_its_own_field_from_extra_fields() {
        let body = json!({"status": {"kopf": {"last-handled-configuration": "{}"}, "phase": "x"}});
        let storage = StatusDiffBaseStorage::default();
        assert_eq!(
            storage.build(&body, &paths(&["status.kopf", "status.phase"])),
            json!({"status": {"phase": "x"}})
        );
    }
}
