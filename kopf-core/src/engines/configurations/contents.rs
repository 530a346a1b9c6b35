//! What the managed configurations hold: their two kinds, the webhooks derived from the
//! admission handlers (as Kopf's `build_webhooks` makes them), and whether a stored list
//! holds what was written.

use serde_json::{Value, json};

use crate::configs::webhooks::ClientConfig;
use crate::intents::admission::{AdmissionHandler, AdmissionKind};
use crate::structs::resources::Resource;

/// Kubernetes' maximum, so that slow handlers are not cut short.
const TIMEOUT_SECONDS: u64 = 30;

/// One of the two configuration kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Kind {
    pub(super) admission: AdmissionKind,
    pub(super) name: &'static str,
    pub(super) plural: &'static str,
}

pub(super) const KINDS: [Kind; 2] = [
    Kind {
        admission: AdmissionKind::Validating,
        name: "ValidatingWebhookConfiguration",
        plural: "validatingwebhookconfigurations",
    },
    Kind {
        admission: AdmissionKind::Mutating,
        name: "MutatingWebhookConfiguration",
        plural: "mutatingwebhookconfigurations",
    },
];

impl Kind {
    pub(super) fn path(&self, name: Option<&str>) -> String {
        let collection = format!("/apis/admissionregistration.k8s.io/v1/{}", self.plural);
        match name {
            Some(name) => format!("{collection}/{name}"),
            None => collection,
        }
    }

    pub(super) fn resource(&self) -> Resource {
        Resource {
            group: "admissionregistration.k8s.io".into(),
            version: "v1".into(),
            plural: self.plural.into(),
            kind: self.name.into(),
            namespaced: false,
            ..Resource::default()
        }
    }
}

/// The webhooks of one configuration kind: one per handler of that kind (only the persistent
/// ones when asked), as Kopf's `build_webhooks` makes them.
pub(crate) fn webhooks(
    handlers: &[AdmissionHandler],
    kind: AdmissionKind,
    resources: &[Resource],
    managed: &str,
    config: &ClientConfig,
    persistent_only: bool,
) -> Vec<Value> {
    handlers
        .iter()
        .filter(|handler| handler.kind() == kind)
        .filter(|handler| !persistent_only || handler.is_persistent())
        .map(|handler| webhook(handler, resources, managed, config))
        .collect()
}

fn webhook(
    handler: &AdmissionHandler,
    resources: &[Resource],
    managed: &str,
    config: &ClientConfig,
) -> Value {
    let operations: Vec<&str> = match handler.operations_set() {
        Some(operations) => operations.iter().map(|op| op.as_str()).collect(),
        None => vec!["*"],
    };
    let rules: Vec<Value> = handler
        .selector()
        .select(resources)
        .into_iter()
        .map(|resource| {
            let plural = match handler.subresource_name() {
                None => resource.plural.clone(),
                Some(sub) => format!("{}/{sub}", resource.plural),
            };
            json!({
                "apiGroups": [resource.group],
                "apiVersions": [resource.version],
                "resources": [plural],
                "operations": operations,
                "scope": "*",
            })
        })
        .collect();
    let mut webhook = json!({
        "name": webhook_name(handler.id(), managed),
        "sideEffects": if handler.has_side_effects() { "NoneOnDryRun" } else { "None" },
        "failurePolicy": if handler.ignores_failures() { "Ignore" } else { "Fail" },
        "matchPolicy": "Equivalent",
        "rules": rules,
        "clientConfig": config.for_handler(handler.id()),
        "timeoutSeconds": TIMEOUT_SECONDS,
        "admissionReviewVersions": ["v1", "v1beta1"],
    });
    let requirements = handler.label_requirements();
    if !requirements.is_empty() {
        webhook["objectSelector"] = json!({"matchExpressions": requirements});
    }
    webhook
}

/// A webhook's name: the handler's id normalized as Kopf does (`/` → `.`, `_` → `-`, any
/// other character but word characters, `.` and `-` → the hex of its UTF-8), then `.` and
/// the managed name.
pub(crate) fn webhook_name(id: &str, managed: &str) -> String {
    let mut name = String::new();
    for c in id.chars() {
        match c {
            '/' => name.push('.'),
            '_' => name.push('-'),
            c if c.is_alphanumeric() || c == '.' || c == '-' => name.push(c),
            c => {
                let mut buffer = [0u8; 4];
                for byte in c.encode_utf8(&mut buffer).bytes() {
                    name.push_str(&format!("{byte:02x}"));
                }
            }
        }
    }
    format!("{name}.{managed}")
}

/// Whether the webhooks as stored hold what was written: the same entries in the same order,
/// each with every field written (the API server adds its defaults to them).
pub(super) fn holds(stored: &Value, written: &[Value]) -> bool {
    let stored = stored.as_array().map_or(&[][..], Vec::as_slice);
    stored.len() == written.len()
        && stored
            .iter()
            .zip(written)
            .all(|(stored, written)| contains(stored, written))
}

/// Whether `stored` has every field of `written`, recursively (lists element by element).
pub(super) fn contains(stored: &Value, written: &Value) -> bool {
    match (stored, written) {
        (Value::Object(stored), Value::Object(written)) => written
            .iter()
            .all(|(key, value)| stored.get(key).is_some_and(|s| contains(s, value))),
        (Value::Array(stored), Value::Array(written)) => {
            stored.len() == written.len() && stored.iter().zip(written).all(|(s, w)| contains(s, w))
        }
        (stored, written) => stored == written,
    }
}
