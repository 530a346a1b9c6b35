//! Admission webhooks called by the fake API server as kube-apiserver calls them: over HTTPS
//! trusted by their caBundle, mutating ones in order (with reinvocation), validating ones
//! after, the real messages and codes of denials and failed calls, failure policies,
//! timeouts, rules and selectors, dry runs, deletions, and answers that break the protocol.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kopf_fake_apiserver::FakeApiServer;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support;
use crate::webhook_server::{Answer, Script, WebhookServer};

/// One webhook entry calling `path` of `webhook`, for ConfigMaps on every operation, with
/// `extra` fields on top.
pub(crate) fn entry(webhook: &WebhookServer, name: &str, path: &str, extra: Value) -> Value {
    let mut entry = json!({
        "name": name,
        "clientConfig": webhook.client_config(path),
        "rules": [{
            "operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"],
            "resources": ["configmaps"],
        }],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    for (key, value) in extra.as_object().into_iter().flatten() {
        entry[key] = value.clone();
    }
    entry
}

pub(crate) async fn validating(server: &FakeApiServer, name: &str, webhooks: Vec<Value>) {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(server.client());
    let configuration = json!({"metadata": {"name": name}, "webhooks": webhooks});
    api.create(
        &PostParams::default(),
        &serde_json::from_value(configuration).unwrap(),
    )
    .await
    .expect("the ValidatingWebhookConfiguration is created");
}

pub(crate) async fn mutating(server: &FakeApiServer, name: &str, webhooks: Vec<Value>) {
    let api: Api<MutatingWebhookConfiguration> = Api::all(server.client());
    let configuration = json!({"metadata": {"name": name}, "webhooks": webhooks});
    api.create(
        &PostParams::default(),
        &serde_json::from_value(configuration).unwrap(),
    )
    .await
    .expect("the MutatingWebhookConfiguration is created");
}

pub(crate) async fn unregister(server: &FakeApiServer, name: &str) {
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(server.client());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(server.client());
    let _ = validating.delete(name, &DeleteParams::default()).await;
    let _ = mutating.delete(name, &DeleteParams::default()).await;
}

pub(crate) fn config_map(name: &str, data: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": data})).unwrap()
}

/// The API error of a failed call.
pub(crate) fn api_error<T: std::fmt::Debug>(result: kube::Result<T>) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(error)) => *error,
        other => panic!("expected an API error, got {other:?}"),
    }
}

pub(crate) fn script(f: impl Fn(&str, &Value) -> Answer + Send + Sync + 'static) -> Script {
    Arc::new(f)
}

#[tokio::test]
async fn a_validating_webhook_denies_with_the_real_message_and_nothing_is_stored() {
    let webhook = WebhookServer::start(script(|_, review| {
        if review["request"]["object"]["data"]["forbidden"].is_string() {
            Answer::deny(review, "the key \"forbidden\" is not allowed", 403)
        } else if review["request"]["object"]["data"]["quiet"].is_string() {
            Answer::review(review, json!({"allowed": false}))
        } else {
            Answer::allow(review)
        }
    }))
    .await;
    let server = FakeApiServer::start().await.unwrap();
    let entry = entry(&webhook, "deny.example.com", "/validate", json!({}));
    validating(&server, "deny", vec![entry]).await;
    let api: Api<ConfigMap> = Api::default_namespaced(support::client_without_retries(&server));

    let denied = api_error(
        api.create(
            &PostParams::default(),
            &config_map("bad", json!({"forbidden": "x"})),
        )
        .await,
    );
    assert_eq!(denied.code, 403);
    assert_eq!(
        denied.message,
        "admission webhook \"deny.example.com\" denied the request: the key \"forbidden\" is not allowed"
    );
    assert!(
        api.get_opt("bad").await.unwrap().is_none(),
        "nothing is stored"
    );

    let review = &webhook.received("/validate")[0];
    assert_eq!(review.path, "/validate?timeout=10s");
    let request = &review.review["request"];
    assert_eq!(review.review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review.review["kind"], "AdmissionReview");
    assert!(
        request["uid"].as_str().is_some_and(|uid| !uid.is_empty()),
        "{request}"
    );
    assert_eq!(
        request["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        request["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(request["requestKind"], request["kind"]);
    assert_eq!(request["requestResource"], request["resource"]);
    assert!(request.get("subResource").is_none(), "{request}");
    assert_eq!(request["operation"], "CREATE");
    assert_eq!(request["namespace"], "default");
    assert_eq!(request["name"], "bad");
    assert!(request["userInfo"]["username"].is_string(), "{request}");
    assert_eq!(request["object"]["data"], json!({"forbidden": "x"}));
    assert_eq!(request["object"]["kind"], "ConfigMap");
    assert_eq!(request["oldObject"], Value::Null);
    assert_eq!(request["dryRun"], false);
    assert_eq!(request["options"]["kind"], "CreateOptions");

    let quiet = api_error(
        api.create(
            &PostParams::default(),
            &config_map("quiet", json!({"quiet": "x"})),
        )
        .await,
    );
    assert_eq!(quiet.code, 400, "a denial without a code is a 400");
    assert_eq!(
        quiet.message,
        "admission webhook \"deny.example.com\" denied the request without explanation"
    );

    api.create(
        &PostParams::default(),
        &config_map("good", json!({"k": "v"})),
    )
    .await
    .expect("an allowed object is created");
    let patch = Patch::Merge(json!({"data": {"forbidden": "now"}}));
    let denied = api_error(api.patch("good", &PatchParams::default(), &patch).await);
    assert_eq!(denied.code, 403);
    let stored = api.get("good").await.unwrap();
    assert_eq!(
        stored.data.unwrap().get("forbidden"),
        None,
        "nothing is stored"
    );
    let update = webhook.received("/validate").pop().unwrap().review;
    assert_eq!(
        update["request"]["operation"], "UPDATE",
        "a PATCH is an UPDATE"
    );
    assert_eq!(update["request"]["oldObject"]["data"], json!({"k": "v"}));
    assert_eq!(update["request"]["options"]["kind"], "UpdateOptions");
    server.stop().await;
}

#[tokio::test]
async fn mutating_webhooks_run_in_order_are_reinvoked_and_their_changes_are_stored() {
    let webhook = WebhookServer::start(script(|path, review| {
        let labels = &review["request"]["object"]["metadata"]["labels"];
        match path.split('?').next().unwrap_or_default() {
            // Reinvoked if needed: adds its label once the second one's is there.
            "/first" if labels["second"].is_string() && !labels["first"].is_string() => {
                Answer::patch(
                    review,
                    json!([{"op": "add", "path": "/metadata/labels/first", "value": "yes"}]),
                )
            }
            "/second" if !labels["second"].is_string() => Answer::patch(
                review,
                json!([
                    {"op": "add", "path": "/metadata/labels/second", "value": "yes"},
                    {"op": "add", "path": "/metadata/annotations", "value": {"defaulted": "by-webhook"}},
                ]),
            ),
            _ => Answer::allow(review),
        }
    }))
    .await;
    let server = FakeApiServer::start().await.unwrap();
    let first = entry(
        &webhook,
        "first.example.com",
        "/first",
        json!({"reinvocationPolicy": "IfNeeded"}),
    );
    let second = entry(&webhook, "second.example.com", "/second", json!({}));
    // Configurations run by name: "a-..." before "b-...", whatever the order of creation.
    mutating(&server, "b-second", vec![second]).await;
    mutating(&server, "a-first", vec![first]).await;
    let check = entry(&webhook, "check.example.com", "/check", json!({}));
    validating(&server, "check", vec![check]).await;

    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut object = config_map("mutated", json!({"k": "v"}));
    object.metadata.labels = Some([("app".to_string(), "x".to_string())].into());
    let created = api.create(&PostParams::default(), &object).await.unwrap();
    let labels = created.metadata.labels.clone().unwrap();
    assert_eq!(labels.get("first").map(String::as_str), Some("yes"));
    assert_eq!(labels.get("second").map(String::as_str), Some("yes"));
    let stored = api.get("mutated").await.unwrap();
    assert_eq!(stored.metadata.labels, created.metadata.labels);
    assert_eq!(
        stored
            .metadata
            .annotations
            .unwrap()
            .get("defaulted")
            .map(String::as_str),
        Some("by-webhook")
    );
    assert_eq!(
        webhook.received("/first").len(),
        2,
        "called, then reinvoked"
    );
    assert_eq!(webhook.received("/second").len(), 1);
    let checked = &webhook.received("/check")[0].review["request"]["object"];
    assert_eq!(
        checked["metadata"]["labels"]["first"], "yes",
        "validating webhooks see the mutated object: {checked}"
    );
    server.stop().await;
}

#[tokio::test]
async fn failure_policies_decide_for_webhooks_that_are_down_slow_or_broken() {
    let broken = WebhookServer::start(script(|path, review| {
        match path.split('?').next().unwrap_or_default() {
            "/slow" => Answer::allow(review).after(Duration::from_secs(3)),
            "/wrong-uid" => Answer::raw(
                200,
                json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "response": {"uid": "not-the-uid", "allowed": true}})
                .to_string(),
            ),
            "/patching-validator" => Answer::patch(review, json!([])),
            "/garbage" => Answer::raw(200, "this is not JSON"),
            "/error" => Answer::raw(500, "{\"oops\": true}"),
            _ => Answer::allow(review),
        }
    }))
    .await;
    let server = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(support::client_without_retries(&server));
    let down_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let down = json!({"url": format!("https://127.0.0.1:{down_port}/x"), "caBundle": broken.client_config("/")["caBundle"]});

    let ignored = entry(
        &broken,
        "down.example.com",
        "/",
        json!({"clientConfig": down, "failurePolicy": "Ignore"}),
    );
    validating(&server, "down", vec![ignored]).await;
    api.create(&PostParams::default(), &config_map("ignored", json!({})))
        .await
        .expect("an unreachable webhook with failurePolicy Ignore lets requests through");
    unregister(&server, "down").await;

    let failing = entry(
        &broken,
        "down.example.com",
        "/",
        json!({"clientConfig": down}),
    );
    validating(&server, "down", vec![failing]).await;
    let error = api_error(
        api.create(&PostParams::default(), &config_map("blocked", json!({})))
            .await,
    );
    assert_eq!(error.code, 500);
    assert_eq!(error.reason, "InternalError");
    let expected = format!(
        "Internal error occurred: failed calling webhook \"down.example.com\": failed to call webhook: Post \"https://127.0.0.1:{down_port}/x?timeout=10s\": dial tcp 127.0.0.1:{down_port}: "
    );
    assert!(error.message.starts_with(&expected), "{}", error.message);
    assert!(api.get_opt("blocked").await.unwrap().is_none());
    unregister(&server, "down").await;

    let cases = [
        ("/slow", "context deadline exceeded"),
        (
            "/wrong-uid",
            "received invalid webhook response: expected response.uid=",
        ),
        (
            "/patching-validator",
            "received invalid webhook response: validating webhook may not return response.patch",
        ),
        ("/garbage", "received invalid webhook response: "),
        ("/error", "the server responded with the status code 500"),
    ];
    for (path, cause) in cases {
        let failing = entry(
            &broken,
            "broken.example.com",
            path,
            json!({"timeoutSeconds": 1}),
        );
        validating(&server, "broken", vec![failing]).await;
        let error = api_error(
            api.create(&PostParams::default(), &config_map("broken", json!({})))
                .await,
        );
        assert_eq!(error.code, 500, "{path}: {}", error.message);
        assert!(
            error.message.starts_with(
                "Internal error occurred: failed calling webhook \"broken.example.com\": "
            ) && error.message.contains(cause),
            "{path}: {}",
            error.message
        );
        unregister(&server, "broken").await;
        let ignored = entry(
            &broken,
            "broken.example.com",
            path,
            json!({"timeoutSeconds": 1, "failurePolicy": "Ignore"}),
        );
        validating(&server, "broken", vec![ignored]).await;
        api.create(&PostParams::default(), &config_map("broken", json!({})))
            .await
            .unwrap_or_else(|e| panic!("{path} ignored: {e}"));
        api.delete("broken", &DeleteParams::default())
            .await
            .unwrap();
        unregister(&server, "broken").await;
    }
    assert_eq!(broken.received("/slow")[0].path, "/slow?timeout=1s");
    // None of it upset the server: it still answers.
    api.list(&Default::default())
        .await
        .expect("the server goes on after broken webhooks");
    server.stop().await;
}

#[tokio::test]
async fn dry_runs_and_deletions_are_admitted_as_kube_apiserver_admits_them() {
    let deny_deletes = Arc::new(AtomicBool::new(true));
    let denying = deny_deletes.clone();
    let webhook = WebhookServer::start(script(move |path, review| {
        let request = &review["request"];
        match path.split('?').next().unwrap_or_default() {
            "/deletes" if denying.load(Ordering::SeqCst) => Answer::deny(review, "keep it", 403),
            "/patch-deletes" if request["operation"] == "DELETE" => Answer::patch(
                review,
                json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]),
            ),
            _ => Answer::allow(review),
        }
    }))
    .await;
    let server = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(support::client_without_retries(&server));
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };

    let side_effects = entry(
        &webhook,
        "side-effects.example.com",
        "/effects",
        json!({"sideEffects": "Some"}),
    );
    validating(&server, "effects", vec![side_effects]).await;
    let error = api_error(api.create(&dry, &config_map("dry", json!({}))).await);
    assert_eq!(error.code, 400);
    assert_eq!(
        error.message,
        "admission webhook \"side-effects.example.com\" does not support dry run"
    );
    assert!(webhook.received("/effects").is_empty(), "not called");
    api.create(&PostParams::default(), &config_map("wet", json!({})))
        .await
        .expect("without a dry run, it is called");
    unregister(&server, "effects").await;

    let safe = entry(
        &webhook,
        "safe.example.com",
        "/safe",
        json!({"sideEffects": "NoneOnDryRun"}),
    );
    validating(&server, "safe", vec![safe]).await;
    api.create(&dry, &config_map("dry", json!({})))
        .await
        .unwrap();
    assert_eq!(
        webhook.received("/safe")[0].review["request"]["dryRun"],
        true
    );
    assert!(
        api.get_opt("dry").await.unwrap().is_none(),
        "a dry run stores nothing"
    );
    unregister(&server, "safe").await;

    let deletes = entry(
        &webhook,
        "deletes.example.com",
        "/deletes",
        json!({"rules": [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]}),
    );
    validating(&server, "deletes", vec![deletes]).await;
    let error = api_error(api.delete("wet", &DeleteParams::default()).await);
    assert_eq!(
        error.message,
        "admission webhook \"deletes.example.com\" denied the request: keep it"
    );
    assert!(
        api.get_opt("wet").await.unwrap().is_some(),
        "a denied deletion deletes nothing"
    );
    let request = &webhook.received("/deletes")[0].review["request"];
    assert_eq!(request["operation"], "DELETE");
    assert_eq!(request["object"], Value::Null);
    assert_eq!(request["oldObject"]["metadata"]["name"], "wet");
    assert_eq!(request["options"]["kind"], "DeleteOptions");
    let error = api_error(
        api.delete_collection(&DeleteParams::default(), &Default::default())
            .await,
    );
    assert!(
        error.message.contains("keep it"),
        "deletecollection admits each item: {}",
        error.message
    );
    deny_deletes.store(false, Ordering::SeqCst);
    api.delete("wet", &DeleteParams::default()).await.unwrap();
    unregister(&server, "deletes").await;

    api.create(&PostParams::default(), &config_map("kept", json!({})))
        .await
        .unwrap();
    let patching = entry(
        &webhook,
        "patch-deletes.example.com",
        "/patch-deletes",
        json!({}),
    );
    mutating(&server, "patch-deletes", vec![patching]).await;
    let error = api_error(api.delete("kept", &DeleteParams::default()).await);
    assert_eq!(error.code, 500);
    assert_eq!(
        error.message,
        "Internal error occurred: attempted to modify the object, which is not supported for this operation"
    );
    assert!(api.get_opt("kept").await.unwrap().is_some());
    server.stop().await;
}

#[tokio::test]
async fn kubectl_prints_denials_and_warnings_of_webhooks() {
    // No colons: the name is part of a KUBECONFIG path, which colons would split.
    let test = "webhooks-kubectl-denials-and-warnings";
    let Some((_turn, server, kubectl)) = crate::kubectl::setup(test).await else {
        return;
    };
    let webhook = WebhookServer::start(script(|_, review| {
        let warnings = json!([
            "configmaps are old-fashioned",
            "configmaps are old-fashioned"
        ]);
        if review["request"]["object"]["data"]["forbidden"].is_string() {
            Answer::review(
                review,
                json!({"allowed": false, "warnings": ["you were warned"],
                    "status": {"message": "spec.forbidden is forbidden", "code": 400}}),
            )
        } else {
            Answer::review(review, json!({"allowed": true, "warnings": warnings}))
        }
    }))
    .await;
    let entry = entry(&webhook, "kopf-like.example.com", "/validate", json!({}));
    validating(&server, "kopf-like", vec![entry]).await;

    let bad = kubectl.manifest(
        "bad.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\ndata:\n  forbidden: 'yes'\n",
    );
    let stderr = kubectl.fails(&["create", "-f", &bad]).await;
    let expected = format!(
        "Error from server: error when creating \"{bad}\": admission webhook \"kopf-like.example.com\" denied the request: spec.forbidden is forbidden"
    );
    assert!(stderr.contains(&expected), "{stderr}");
    assert!(
        stderr.contains("Warning: you were warned"),
        "warnings come with denials: {stderr}"
    );

    let good = kubectl.manifest(
        "good.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: good\ndata:\n  k: v\n",
    );
    let output = kubectl.run(&["create", "-f", &good]).await;
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr
            .matches("Warning: configmaps are old-fashioned")
            .count(),
        1,
        "warnings are deduplicated: {stderr}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_self_signed_certificate_given_as_its_own_ca_bundle_is_trusted_for_its_names() {
    let webhook = WebhookServer::self_signed(
        &["127.0.0.1"],
        script(|_, review| Answer::deny(review, "seen", 403)),
    )
    .await;
    let server = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(support::client_without_retries(&server));
    // As Kopf's servers answer: v1beta1 is spoken when v1 is not offered.
    let by_ip = entry(
        &webhook,
        "by-ip.example.com",
        "/ip",
        json!({"admissionReviewVersions": ["v1beta1"]}),
    );
    validating(&server, "by-ip", vec![by_ip]).await;
    let error = api_error(
        api.create(&PostParams::default(), &config_map("any", json!({})))
            .await,
    );
    assert_eq!(
        error.message,
        "admission webhook \"by-ip.example.com\" denied the request: seen"
    );
    assert_eq!(
        webhook.received("/ip")[0].review["apiVersion"],
        "admission.k8s.io/v1beta1"
    );
    unregister(&server, "by-ip").await;

    // The certificate names 127.0.0.1 only: dialled as localhost, it is not valid.
    let mut client_config = webhook.client_config("/name");
    client_config["url"] = json!(format!("https://localhost:{}/name", webhook.port));
    let by_name = entry(
        &webhook,
        "by-name.example.com",
        "/name",
        json!({"clientConfig": client_config}),
    );
    validating(&server, "by-name", vec![by_name]).await;
    let error = api_error(
        api.create(&PostParams::default(), &config_map("any", json!({})))
            .await,
    );
    assert_eq!(error.code, 500, "{}", error.message);
    assert!(error.message.contains("tls: "), "{}", error.message);
    assert!(webhook.received("/name").is_empty());
    server.stop().await;
}

#[tokio::test]
async fn a_server_stopped_during_a_webhook_call_stops_at_once() {
    let webhook = WebhookServer::start(script(|_, review| {
        Answer::allow(review).after(Duration::from_secs(25))
    }))
    .await;
    let server = FakeApiServer::start().await.unwrap();
    let slow = entry(
        &webhook,
        "slow.example.com",
        "/slow",
        json!({"timeoutSeconds": 30}),
    );
    validating(&server, "slow", vec![slow]).await;
    let api: Api<ConfigMap> = Api::default_namespaced(support::client_without_retries(&server));
    let creating = async {
        api.create(&PostParams::default(), &config_map("late", json!({})))
            .await
    };
    let stopping = async {
        support::wait("the webhook to be called", || async {
            (!webhook.received("/slow").is_empty()).then_some(())
        })
        .await;
        let stopped = tokio::time::timeout(Duration::from_secs(5), server.stop()).await;
        assert!(
            stopped.is_ok(),
            "the stop does not wait for the webhook's answer"
        );
    };
    let (created, ()) = tokio::join!(creating, stopping);
    assert!(created.is_err(), "the request is cut off: {created:?}");
}
