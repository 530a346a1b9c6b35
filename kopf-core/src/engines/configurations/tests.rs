//! The managed configurations' contents: webhooks from handlers, names, and what holds.

use super::contents::{holds, webhook_name, webhooks};
use super::*;
use crate::configs::webhooks::WebhookServer;
use crate::intents::admission::AdmissionKind;
use crate::structs::filters::MetaFilter;
use crate::structs::resources::Selector;
use crate::structs::reviews::Operation;

fn resource(group: &str, version: &str, plural: &str) -> Resource {
    Resource {
        group: group.into(),
        version: version.into(),
        plural: plural.into(),
        ..Resource::default()
    }
}

fn resources() -> Vec<Resource> {
    vec![
        Resource {
            preferred: true,
            ..resource("kopf.dev", "v1", "kopfexamples")
        },
        resource("kopf.dev", "v2", "kopfexamples"),
        resource("", "v1", "pods"),
    ]
}

fn config() -> ClientConfig {
    WebhookServer::new()
        .addr("127.0.0.1".parse().unwrap())
        .client_config(9443, Some("PEM".into()))
}

fn validating(id: &str) -> AdmissionHandler {
    AdmissionHandler::validating(Selector::named("kopfexamples.kopf.dev"), id, |_| async {
        Ok(None)
    })
}

#[test]
fn stored_webhooks_hold_what_was_written_with_the_servers_defaults_added() {
    let written = webhooks(
        &[validating("check")],
        AdmissionKind::Validating,
        &resources(),
        "a.b",
        &config(),
        false,
    );
    let mut stored = json!(written.clone());
    stored[0]["namespaceSelector"] = json!({});
    stored[0]["objectSelector"] = json!({});
    assert!(holds(&stored, &written), "defaults added");
    let mut moved = stored.clone();
    moved[0]["clientConfig"]["url"] = json!("https://127.0.0.1:1/check");
    assert!(!holds(&moved, &written), "pointing elsewhere");
    assert!(!holds(&json!([]), &written), "emptied");
    assert!(!holds(&Value::Null, &written), "no list");
    let mut more = stored.clone();
    more.as_array_mut()
        .unwrap()
        .push(json!({"name": "foreign.a.b"}));
    assert!(!holds(&more, &written), "a foreign entry");
    assert!(complete(
        &Seen::Stored(json!({"webhooks": moved})),
        &written
    ));
    assert!(!complete(&Seen::Missing, &written));
}

#[test]
fn names_are_kopfs_normalized_ids_under_the_managed_name() {
    assert_eq!(
        webhook_name("check", "auto.kopf.dev"),
        "check.auto.kopf.dev"
    );
    assert_eq!(
        webhook_name("check_size/spec.x", "auto.kopf.dev"),
        "check-size.spec.x.auto.kopf.dev"
    );
    assert_eq!(webhook_name("id!", "a.b"), "id21.a.b");
    assert_eq!(webhook_name("a b:c", "a.b"), "a20b3ac.a.b");
    assert_eq!(
        webhook_name("Über", "a.b"),
        "Über.a.b",
        "word characters stay"
    );
    assert_eq!(
        webhook_name("a\u{2603}", "a.b"),
        "ae29883.a.b",
        "UTF-8 bytes in hex"
    );
}

#[test]
fn managed_names_need_two_dns_segments() {
    assert!(check_name("auto.kopf.dev").is_ok());
    assert!(check_name("kopf.dev").is_ok());
    for bad in [
        "kopf",
        "Auto.kopf.dev",
        "auto..dev",
        "-a.dev",
        "a_b.dev",
        "",
    ] {
        let error = check_name(bad).unwrap_err().to_string();
        assert!(error.contains("at least two segments"), "{bad}: {error}");
    }
}

#[test]
fn a_webhook_has_kopfs_fields_and_a_rule_per_matching_resource() {
    let every_version = Selector::matching(|r| r.plural == "kopfexamples");
    let handler = AdmissionHandler::validating(every_version, "check_size", |_| async { Ok(None) })
        .operations([Operation::Update, Operation::Create]);
    let hooks = webhooks(
        &[handler],
        AdmissionKind::Validating,
        &resources(),
        "auto.kopf.dev",
        &config(),
        false,
    );
    assert_eq!(
        hooks,
        [json!({
            "name": "check-size.auto.kopf.dev",
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "matchPolicy": "Equivalent",
            "rules": [
                {"apiGroups": ["kopf.dev"], "apiVersions": ["v1"], "resources": ["kopfexamples"],
                 "operations": ["CREATE", "UPDATE"], "scope": "*"},
                {"apiGroups": ["kopf.dev"], "apiVersions": ["v2"], "resources": ["kopfexamples"],
                 "operations": ["CREATE", "UPDATE"], "scope": "*"},
            ],
            "clientConfig": {"url": "https://127.0.0.1:9443/check_size", "caBundle": "UEVN"},
            "timeoutSeconds": 30,
            "admissionReviewVersions": ["v1", "v1beta1"],
        })]
    );
}

#[test]
fn subresources_side_effects_and_failures_shape_the_webhook() {
    let status = validating("status").subresource("status");
    let every = validating("every").subresource("*").side_effects();
    let relaxed = validating("relaxed").ignore_failures();
    let pods = AdmissionHandler::mutating(Selector::new("", "v1", "pods"), "pods", |_| async {
        Ok(None)
    });
    let handlers = [status, every, relaxed, pods];
    let hooks = webhooks(
        &handlers,
        AdmissionKind::Validating,
        &resources()[..1],
        "a.b",
        &config(),
        false,
    );
    let first = |hook: &Value, field: &str| hook["rules"][0][field].clone();
    assert_eq!(hooks.len(), 3, "only the validating ones");
    assert_eq!(
        first(&hooks[0], "resources"),
        json!(["kopfexamples/status"])
    );
    assert_eq!(first(&hooks[0], "operations"), json!(["*"]));
    assert_eq!(first(&hooks[1], "resources"), json!(["kopfexamples/*"]));
    assert_eq!(hooks[1]["sideEffects"], "NoneOnDryRun");
    assert_eq!(hooks[2]["failurePolicy"], "Ignore");
    let mutating = webhooks(
        &handlers,
        AdmissionKind::Mutating,
        &resources(),
        "a.b",
        &config(),
        false,
    );
    assert_eq!(mutating.len(), 1);
    assert_eq!(mutating[0]["rules"][0]["apiGroups"], json!([""]));
    assert_eq!(mutating[0]["rules"][0]["resources"], json!(["pods"]));
}

#[test]
fn label_filters_but_callables_make_the_object_selector() {
    let handler = validating("labelled")
        .label("present", MetaFilter::Present)
        .label("absent", MetaFilter::Absent)
        .label("value", "yes".into())
        .label("judged", MetaFilter::callable(|_| true));
    let hooks = webhooks(
        &[handler],
        AdmissionKind::Validating,
        &[],
        "a.b",
        &config(),
        false,
    );
    assert_eq!(
        hooks[0]["objectSelector"],
        json!({"matchExpressions": [
            {"key": "absent", "operator": "DoesNotExist"},
            {"key": "present", "operator": "Exists"},
            {"key": "value", "operator": "In", "values": ["yes"]},
        ]})
    );
    assert_eq!(hooks[0]["rules"], json!([]), "no resource discovered yet");
    let plain = webhooks(
        &[validating("plain")],
        AdmissionKind::Validating,
        &[],
        "a.b",
        &config(),
        false,
    );
    assert!(
        plain[0].get("objectSelector").is_none(),
        "no selector: every object"
    );
}

#[test]
fn at_the_stop_only_persistent_webhooks_are_kept_and_services_get_the_id_in_their_path() {
    let handlers = [validating("kept").persistent(), validating("dropped")];
    let service = WebhookServer::service("ops", "op")
        .path("/hooks")
        .client_config(9443, None);
    let hooks = webhooks(
        &handlers,
        AdmissionKind::Validating,
        &[],
        "a.b",
        &service,
        true,
    );
    assert_eq!(hooks.len(), 1);
    assert_eq!(hooks[0]["name"], "kept.a.b");
    assert_eq!(
        hooks[0]["clientConfig"],
        json!({"service": {"namespace": "ops", "name": "op", "port": 443, "path": "/hooks/kept"}})
    );
}
