//! Admission webhooks (Kopf's `17-admission`): kube-apiserver asks the operator before it
//! stores a `KopfExample`. Validating handlers allow or deny the request (with a message the
//! client prints) and add warnings; mutating handlers fill in defaults and fix values.
//!
//! The operator serves its webhooks over HTTPS, with a certificate it makes at start, and
//! keeps one `ValidatingWebhookConfiguration` and one `MutatingWebhookConfiguration`, both
//! named `auto.kopf.dev`, pointing at them: [`configure`] says so. When the operator stops,
//! the configurations shrink to the handlers marked `persistent` (here [`keep_protected`]),
//! which keep guarding the objects while the operator is away (or, failing open, let them
//! through: [`note_deletions`]).
//!
//! ```sh
//! cargo run --example admission &   # with KUBECONFIG and the CRD as for `children`
//! kubectl apply -f - <<EOF
//! {apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: kex}, spec: {numbers: [1, "2"]}}
//! EOF
//! kubectl get kex kex -o jsonpath='{.spec.numbers}'   # [1,2]
//! ```
//!
//! The webhook server listens on 127.0.0.1, which suits an API server on the same machine
//! (the fake one of `kopf-testing`); for a cluster, see [`kopf::admission::WebhookServer`]'s
//! presets.

use std::net::Ipv4Addr;

use kopf::admission::{Warnings, WebhookServer};
use kopf::{AdmissionError, Patch, Settings};
use serde_json::Value;

/// The name of the webhook configurations the operator keeps.
pub const MANAGED: &str = "auto.kopf.dev";

/// This operator's handlers.
pub fn registry() -> kopf::registry::Registry {
    kopf::handlers![
        configure,
        say_hello,
        check_numbers,
        keep_protected,
        note_deletions,
        default_numbers,
        convert_numbers,
    ]
}

/// Serves the webhooks on 127.0.0.1 and keeps their configurations (Kopf's
/// `settings.admission`).
#[kopf::on_startup]
pub async fn configure(settings: &mut Settings) {
    settings.admission.server = Some(WebhookServer::new().addr(Ipv4Addr::LOCALHOST.into()));
    settings.admission.managed = Some(MANAGED.into());
}

/// Every request hears that the operator looked at it: a warning that kubectl prints.
#[kopf::on_validate("kopf.dev", "v1", "kopfexamples", operations = [CREATE, UPDATE])]
pub async fn say_hello(warnings: &Warnings) {
    warnings.push("Verified with the operator's hook.");
}

/// `spec.numbers`, when present, must be a list of numbers (after [`convert_numbers`]).
#[kopf::on_validate("kopf.dev", "v1", "kopfexamples", operations = [CREATE, UPDATE])]
pub async fn check_numbers(spec: &Value) -> Result<(), AdmissionError> {
    match spec.get("numbers") {
        None => Ok(()),
        Some(Value::Array(items)) if items.iter().all(Value::is_number) => Ok(()),
        Some(Value::Array(_)) => {
            Err(AdmissionError::new("spec.numbers must contain only numbers.").code(422))
        }
        Some(_) => Err(AdmissionError::new("spec.numbers must be a list if present.").code(422)),
    }
}

/// Objects labelled `protected` cannot be deleted. Persistent: its webhook stays in the
/// configuration after the operator stops, and since it fails closed, protected objects
/// cannot be deleted while the operator is away either.
#[kopf::on_validate(
    "kopf.dev",
    "v1",
    "kopfexamples",
    operations = [DELETE],
    labels("protected" = present),
    persistent
)]
pub async fn keep_protected(name: &str) -> Result<(), AdmissionError> {
    Err(AdmissionError::new(format!(
        "{name} is protected: remove its `protected` label before deleting it."
    ))
    .code(403))
}

/// Every deletion is noted in the operator's log. Persistent too, but it fails open
/// (`ignore_failures`): while the operator is away, deletions go on unnoted.
#[kopf::on_validate(
    "kopf.dev",
    "v1",
    "kopfexamples",
    operations = [DELETE],
    persistent,
    ignore_failures
)]
pub async fn note_deletions(name: &str, userinfo: &Value, logger: &kopf::Logger) {
    let who = userinfo["username"].as_str().unwrap_or("somebody");
    logger.info(format_args!("{who} deletes {name}"));
}

/// New objects get `spec.numbers` when they have none.
#[kopf::on_mutate("kopf.dev", "v1", "kopfexamples", operations = [CREATE])]
pub async fn default_numbers(spec: &Value, patch: &mut Patch) {
    if spec.get("numbers").is_none() {
        patch.set("spec.numbers", [1, 2, 3]);
    }
}

/// Numbers written as strings (`"2"`) become numbers, so that [`check_numbers`] accepts them.
#[kopf::on_mutate("kopf.dev", "v1", "kopfexamples", operations = [CREATE, UPDATE])]
pub async fn convert_numbers(spec: &Value, patch: &mut Patch) {
    let Some(Value::Array(items)) = spec.get("numbers") else {
        return;
    };
    let converted: Vec<Value> = items
        .iter()
        .map(|item| match item.as_str().map(str::parse::<i64>) {
            Some(Ok(number)) => number.into(),
            _ => item.clone(),
        })
        .collect();
    if &converted != items {
        patch.set("spec.numbers", converted);
    }
}
