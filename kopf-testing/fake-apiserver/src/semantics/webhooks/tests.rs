//! Matching rules and selectors, reading answers, and keeping warnings to their budget.

use serde_json::{Value, json};

use super::configuration::{Phase, Webhook};
use super::matching::{Attributes, Operation};
use super::review::{record_warnings, verdict};
use crate::semantics::authorization::Identity;

fn webhook(phase: Phase, entry: Value) -> Webhook {
    let mut base = json!({
        "name": "w.example.com",
        "clientConfig": {"url": "https://127.0.0.1:1/"},
        "rules": [],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    for (key, value) in entry.as_object().into_iter().flatten() {
        base[key] = value.clone();
    }
    Webhook::parse(phase, &base).expect("a webhook")
}

fn pod_attributes(subresource: &str, operation: Operation) -> Attributes {
    let catalog = crate::storage::builtins::catalog();
    Attributes {
        operation,
        def: catalog.get("", "pods").unwrap().clone(),
        version: "v1".into(),
        subresource: subresource.into(),
        subresource_kind: None,
        namespace: "default".into(),
        name: "p".into(),
        object: Some(json!({"metadata": {"name": "p", "labels": {"app": "a"}}})),
        old_object: None,
        user: Identity::default(),
        dry_run: false,
        options: json!({}),
    }
}

fn rule(resources: &[&str]) -> Value {
    json!({"rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": resources}]})
}

#[test]
fn resources_and_subresources_match_as_kube_apiserver_matches_them() {
    let cases: &[(&[&str], &str, bool)] = &[
        (&["pods"], "", true),
        (&["pods"], "status", false),
        (&["*"], "", true),
        (&["*"], "status", false),
        (&["pods/*"], "", true),
        (&["pods/*"], "status", true),
        (&["*/status"], "status", true),
        (&["*/status"], "", false),
        (&["*/*"], "scale", true),
        (&["configmaps"], "", false),
    ];
    for (resources, subresource, expected) in cases {
        let webhook = webhook(Phase::Validating, rule(resources));
        let attributes = pod_attributes(subresource, Operation::Update);
        assert_eq!(
            attributes.matched_version(&webhook).is_some(),
            *expected,
            "{resources:?} for pods/{subresource}"
        );
    }
    let webhook = webhook(Phase::Validating, rule(&["pods"]));
    assert!(
        pod_attributes("", Operation::Delete)
            .matched_version(&webhook)
            .is_none(),
        "DELETE is not among the operations"
    );
}

#[test]
fn scopes_and_selectors() {
    let mut entry = rule(&["*"]);
    entry["rules"][0]["scope"] = json!("Cluster");
    let attributes = pod_attributes("", Operation::Create);
    assert!(
        attributes
            .matched_version(&webhook(Phase::Validating, entry))
            .is_none()
    );

    let selected = webhook(
        Phase::Validating,
        json!({"objectSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}),
    );
    assert!(attributes.selected_object(&selected));
    let mut unlabelled = attributes.clone();
    unlabelled.object = Some(json!({"metadata": {"name": "p"}}));
    assert!(!unlabelled.selected_object(&selected));
    unlabelled.old_object = attributes.object.clone();
    assert!(
        unlabelled.selected_object(&selected),
        "the old object's labels count too"
    );
}

#[test]
fn answers_that_break_the_protocol_are_call_errors() {
    let mutating = webhook(Phase::Mutating, json!({}));
    let validating = webhook(Phase::Validating, json!({}));
    let answer = |response: Value| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
            .to_string()
    };
    let ok = answer(json!({"uid": "u", "allowed": true}));
    assert!(
        verdict(&validating, "v1", "u", ok.as_bytes())
            .unwrap()
            .allowed
    );
    let errors = [
        (
            &validating,
            answer(json!({"uid": "x", "allowed": true})),
            "expected response.uid=\"u\", got \"x\"",
        ),
        (
            &mutating,
            answer(json!({"uid": "u", "allowed": true, "patch": "W10="})),
            "webhook returned response.patch but not response.patchType",
        ),
        (
            &mutating,
            answer(json!({"uid": "u", "allowed": true, "patchType": "JSONPatch"})),
            "webhook returned response.patchType but not response.patch",
        ),
        (
            &mutating,
            answer(
                json!({"uid": "u", "allowed": true, "patch": "W10=", "patchType": "MergePatch"}),
            ),
            "webhook returned invalid response.patchType of \"MergePatch\"",
        ),
        (
            &validating,
            answer(json!({"uid": "u", "allowed": true, "patchType": "JSONPatch"})),
            "validating webhook may not return response.patchType",
        ),
        (
            &validating,
            json!({"apiVersion": "v1", "kind": "Status"}).to_string(),
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got v1, Kind=Status",
        ),
        (
            &validating,
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).to_string(),
            "webhook response was absent",
        ),
    ];
    for (webhook, body, expected) in errors {
        assert_eq!(
            verdict(webhook, "v1", "u", body.as_bytes()).unwrap_err(),
            expected,
            "{body}"
        );
    }
}

#[test]
fn warnings_are_deduplicated_and_kept_to_their_budget() {
    let mut warnings = Vec::new();
    record_warnings(
        &mut warnings,
        ["a".to_string(), "a".to_string(), "b".to_string()],
    );
    assert_eq!(warnings, ["a", "b"]);
    let long = "x".repeat(4000);
    record_warnings(&mut warnings, [long.clone()]);
    assert_eq!(warnings[2], long, "within the budget, kept whole");
    record_warnings(&mut warnings, ["y".repeat(1000)]);
    assert_eq!(
        warnings,
        [
            "a".to_string(),
            "b".to_string(),
            "x".repeat(256),
            "y".repeat(256)
        ],
        "past the budget, every warning is cut"
    );
}
