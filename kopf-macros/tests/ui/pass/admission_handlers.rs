//! Validating and mutating handlers: their options and the arguments only they get.

use std::collections::BTreeMap;

use serde_json::Value;

#[kopf::on_validate(
    "kopf.dev",
    "v1",
    "kopfexamples",
    id = "check-size",
    operations = [CREATE, UPDATE],
    subresource = "*",
    persistent,
    side_effects = true,
    ignore_failures,
    labels("app" = "web", "tier" = present),
    annotations("skip" = absent),
    field = "spec.size",
    value = present,
    when = |invocation: &kopf::Invocation| !invocation.dryrun(),
    param = {"limit": 10}
)]
async fn check_size(
    spec: &Value,
    param: Option<&Value>,
    warnings: &kopf::admission::Warnings,
    operation: kopf::admission::Operation,
) -> Result<(), kopf::AdmissionError> {
    let limit = param.and_then(|p| p["limit"].as_i64()).unwrap_or(10);
    if operation == kopf::admission::Operation::Update {
        warnings.push("updating the size");
    }
    match spec["size"].as_i64() {
        Some(size) if size > limit => Err(kopf::AdmissionError::new("too big").code(422)),
        _ => Ok(()),
    }
}

#[kopf::on_validate("kopfexamples", operations = ["DELETE"])]
fn sync_check(
    userinfo: &Value,
    headers: &BTreeMap<String, String>,
    sslpeer: Option<&kopf::admission::PeerCertificate>,
    subresource: Option<&str>,
    dryrun: bool,
    old: Option<&Value>,
    new: Option<&Value>,
    diff: &kopf::diff::Diff,
) -> kopf::Result<()> {
    let _ = (headers, sslpeer, subresource, dryrun, old, new, diff);
    if userinfo["username"] == "mallory" {
        return Err(kopf::PermanentError::new("not you").into());
    }
    Ok(())
}

#[derive(serde::Deserialize)]
struct UserInfo {
    username: String,
}

#[kopf::on_validate("kopfexamples")]
async fn owned_arguments(
    userinfo: UserInfo,
    headers: BTreeMap<String, String>,
    sslpeer: Value,
    warnings: kopf::admission::Warnings,
    operation: Option<kopf::admission::Operation>,
    subresource: Option<String>,
) {
    let _ = (userinfo.username, headers, sslpeer, warnings, operation, subresource);
}

#[kopf::on_mutate("kopfexamples", operations = [CREATE])]
async fn default_size(spec: &Value, patch: &mut kopf::Patch, memo: &kopf::Memo) {
    let _ = memo;
    if spec["size"].is_null() {
        patch.set("spec.size", 1);
    }
}

#[kopf::on_mutate("v1", "pods", operations = [DELETE], subresource = "status")]
fn sync_mutation(patch: &mut kopf::Patch, sslpeer: Option<kopf::admission::PeerCertificate>) {
    if let Some(peer) = sslpeer {
        patch.set("metadata.annotations.seen-by", peer.common_name());
    }
}

// Kopf's values of a first attempt: admission handlers run once per request.
#[kopf::on_mutate("kopfexamples", id = "first_attempt")]
fn first_attempt(
    retry: u32,
    started: std::time::SystemTime,
    runtime: std::time::Duration,
    patch: &mut kopf::Patch,
) {
    patch.function(move |body: &mut serde_json::Value| {
        body["metadata"]["annotations"]["seen"] = format!("{retry} {started:?} {runtime:?}").into();
    });
}

fn main() {
    let registry = kopf::handlers![
        check_size,
        sync_check,
        owned_arguments,
        default_size,
        sync_mutation,
        first_attempt,
    ];
    let _ = registry;
}
