//! Admission webhooks: the suite's HTTPS webhook registered on both servers (each server with
//! a path of its own, scoped to the sequence's namespace), the AdmissionReviews each server
//! sends it, and what clients get back: denials, patches, dry runs, deletions, unreachable
//! webhooks with each failure policy.

use serde_json::json;

use super::CONFIGMAPS;
use crate::sequence::{Condition, Sequence, delete, get, post};

const VALIDATING: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
const MUTATING: &str = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";

/// One webhook of a configuration: ConfigMaps labelled `hook: <label>` in the sequence's
/// namespace, sent to `url` (a template).
fn hook(
    name: &str,
    url: &str,
    label: &str,
    operations: &[&str],
    policy: &str,
) -> serde_json::Value {
    json!({
        "name": format!("{name}.fidelity.example"),
        "clientConfig": {"url": url, "caBundle": "{{webhook_ca}}"},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": operations,
                   "resources": ["configmaps"], "scope": "Namespaced"}],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "{{ns}}"}},
        "objectSelector": {"matchLabels": {"hook": label}},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "failurePolicy": policy,
        "timeoutSeconds": 5,
    })
}

fn labelled(name: &str, label: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "labels": {"hook": label}}, "data": {"k": "v"}})
}

pub(super) fn sequences() -> Vec<Sequence> {
    vec![
        Sequence::new("webhooks/validating")
            .send(
                "configuration",
                post(
                    VALIDATING,
                    json!({"apiVersion": "admissionregistration.k8s.io/v1",
                           "kind": "ValidatingWebhookConfiguration",
                           "metadata": {"name": "{{u}}-deny"},
                           "webhooks": [hook("deny", "{{webhook}}/{{ns}}/deny", "deny",
                                             &["CREATE", "UPDATE", "DELETE"], "Fail")]}),
                ),
            )
            .poll(
                "active",
                post(
                    &format!("{CONFIGMAPS}?dryRun=All"),
                    labelled("probe", "deny"),
                ),
                Condition::Code(403),
            )
            .send("denied", post(CONFIGMAPS, labelled("a", "deny")))
            .send("not-selected", post(CONFIGMAPS, labelled("b", "other")))
            .send(
                "relabel-denied",
                crate::sequence::patch(
                    &format!("{CONFIGMAPS}/b"),
                    "application/merge-patch+json",
                    json!({"metadata": {"labels": {"hook": "deny"}}}),
                ),
            )
            .reviews("reviews", "/{{ns}}/deny"),
        Sequence::new("webhooks/mutating")
            .send(
                "configuration",
                post(
                    MUTATING,
                    json!({"apiVersion": "admissionregistration.k8s.io/v1",
                           "kind": "MutatingWebhookConfiguration",
                           "metadata": {"name": "{{u}}-patch"},
                           "webhooks": [hook("patch", "{{webhook}}/{{ns}}/patch", "patch",
                                             &["CREATE"], "Fail")]}),
                ),
            )
            .poll(
                "active",
                post(
                    &format!("{CONFIGMAPS}?dryRun=All"),
                    labelled("probe", "patch"),
                ),
                Condition::Equals("/metadata/labels/patched".into(), "yes".into()),
            )
            .send("patched", post(CONFIGMAPS, labelled("a", "patch")))
            .send("get", get(&format!("{CONFIGMAPS}/a")))
            .reviews("reviews", "/{{ns}}/patch"),
        Sequence::new("webhooks/deletion")
            .send("create", post(CONFIGMAPS, labelled("a", "gone")))
            .send("create-kept", post(CONFIGMAPS, labelled("k", "kept")))
            .send(
                "configuration",
                post(
                    VALIDATING,
                    json!({"apiVersion": "admissionregistration.k8s.io/v1",
                    "kind": "ValidatingWebhookConfiguration",
                    "metadata": {"name": "{{u}}-delete"},
                    "webhooks": [
                        hook("allow", "{{webhook}}/{{ns}}/allow", "gone", &["DELETE"], "Fail"),
                        hook("deny", "{{webhook}}/{{ns}}/deny", "kept", &["DELETE"], "Fail"),
                    ]}),
                ),
            )
            .poll(
                "active",
                delete(&format!("{CONFIGMAPS}/k?dryRun=All")),
                Condition::Code(403),
            )
            .send("delete", delete(&format!("{CONFIGMAPS}/a")))
            .reviews("reviews", "/{{ns}}/allow"),
        Sequence::new("webhooks/unreachable")
            .send(
                "configuration",
                post(
                    VALIDATING,
                    json!({"apiVersion": "admissionregistration.k8s.io/v1",
                    "kind": "ValidatingWebhookConfiguration",
                    "metadata": {"name": "{{u}}-down"},
                    "webhooks": [
                        hook("fail", "https://127.0.0.1:1/down", "fail", &["CREATE"], "Fail"),
                        hook("ignore", "https://127.0.0.1:1/down", "ignore", &["CREATE"], "Ignore"),
                    ]}),
                ),
            )
            .poll(
                "failing",
                post(
                    &format!("{CONFIGMAPS}?dryRun=All"),
                    labelled("probe", "fail"),
                ),
                Condition::Code(500),
            )
            .send("ignored", post(CONFIGMAPS, labelled("i", "ignore")))
            .send(
                "bad-configuration",
                post(
                    VALIDATING,
                    json!({"apiVersion": "admissionregistration.k8s.io/v1",
                           "kind": "ValidatingWebhookConfiguration",
                           "metadata": {"name": "{{u}}-bad"},
                           "webhooks": [{"name": "nodots", "clientConfig": {"url": "http://x"},
                                         "sideEffects": "Maybe",
                                         "admissionReviewVersions": ["v0"]}]}),
                ),
            ),
    ]
}
