//! The admission webhook server and the managed webhook configurations, against the fake API
//! server: the configurations appear at the start with a caBundle that the server's HTTPS
//! answers to, shrink to the persistent webhooks at the stop, follow a rotated certificate;
//! an operator with admission handlers and no server fails to start; a review in flight
//! finishes during the stop.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use kopf::AdmissionError;
use kopf::admission::Operation;
use kopf::operator::{Operator, OperatorError};
use kopf::registry::{AdmissionHandler, Registry};
use kopf_testing::{OperatorHarness, TestClient, wait};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};

use crate::support::{examples, install_crd, server_with_crd};

const MANAGED: &str = "auto.kopf.dev";
const VALIDATING: &str =
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/auto.kopf.dev";
const MUTATING: &str =
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/auto.kopf.dev";
const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// A validating handler that denies sizes above 10, for creations and updates, kept at exit;
/// and a mutating handler that defaults the size, for objects labelled `defaulted=yes`.
fn registry() -> Registry {
    Registry::new()
        .with(
            AdmissionHandler::validating(examples(), "check_size", |invocation| async move {
                if invocation.spec()["size"].as_i64().unwrap_or(0) > 10 {
                    return Err(AdmissionError::new("spec.size is at most 10")
                        .code(422)
                        .into());
                }
                Ok(None)
            })
            .operations([Operation::Create, Operation::Update])
            .persistent(),
        )
        .with(
            AdmissionHandler::mutating(examples(), "default/size", |invocation| async move {
                if invocation.spec()["size"].is_null() {
                    invocation.patch().set("spec.size", 1);
                }
                Ok(None)
            })
            .label("defaulted", "yes".into())
            .side_effects()
            .ignore_failures(),
        )
}

fn settings(server: kopf::admission::WebhookServer) -> kopf::Settings {
    let mut settings = kopf_testing::test_settings();
    settings.admission.server = Some(server);
    settings.admission.managed = Some(MANAGED.into());
    settings
}

/// The configuration at `path` once its webhooks satisfy `condition` (the last one seen, in
/// the panic, if they do not in time).
async fn configuration(
    client: &TestClient,
    path: &str,
    condition: impl Fn(&Value) -> bool,
) -> Value {
    let last = std::sync::Mutex::new(Value::Null);
    let found = tokio::time::timeout(kopf_testing::DEADLINE, async {
        loop {
            let object = client.request("GET", path, None).await.1;
            if condition(&object["webhooks"]) {
                return object;
            }
            *last.lock().unwrap() = object;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    found.unwrap_or_else(|_| {
        panic!(
            "{path} not as expected in time; last seen: {:#}",
            last.lock().unwrap()
        )
    })
}

/// Cancels `stop` and waits for the operator's `run()` to end without an error.
async fn stop_cleanly(
    stop: &tokio_util::sync::CancellationToken,
    running: tokio::task::JoinHandle<Result<(), OperatorError>>,
) {
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(60), running)
        .await
        .expect("the operator stops")
        .expect("its task did not panic")
        .expect("a clean stop");
}

/// The names of a configuration's webhooks, in order.
fn names(configuration: &Value) -> Vec<Value> {
    configuration["webhooks"]
        .as_array()
        .map_or_else(Vec::new, |w| w.iter().map(|w| w["name"].clone()).collect())
}

fn url_of(configuration: &Value) -> String {
    let url = &configuration["webhooks"][0]["clientConfig"]["url"];
    url.as_str().expect("a url").to_string()
}

fn ca_bundle(webhook: &Value) -> String {
    let encoded = webhook["clientConfig"]["caBundle"]
        .as_str()
        .expect("a caBundle");
    let pem = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("base64");
    String::from_utf8(pem).expect("PEM")
}

/// One HTTPS POST to `url`, trusting only `ca_pem`: the status and the JSON answer, or why
/// the call failed (a certificate not trusted, nothing listening).
async fn post(url: &str, ca_pem: &str, body: &Value) -> Result<(u16, Value), String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("{e}"))?;
    let host = uri.host().unwrap_or_default().to_string();
    let port = uri.port_u16().unwrap_or(443);
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(ca.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(ring()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let stream = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from(host.clone()).map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, stream)
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
    let request = http::Request::post(uri.path())
        .header("host", format!("{host}:{port}"))
        .header("content-type", "application/json")
        .header("connection", "close")
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| e.to_string())?;
    let (response, _) = tokio::join!(sender.send_request(request), connection);
    let response = response.map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}

/// An AdmissionReview of a KopfExample's creation, as kube-apiserver sends it.
fn review(uid: &str, spec: Value) -> Value {
    let kind = json!({"group": "kopf.dev", "version": "v1", "kind": "KopfExample"});
    let resource = json!({"group": "kopf.dev", "version": "v1", "resource": "kopfexamples"});
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": kind, "resource": resource,
            "requestKind": kind, "requestResource": resource,
            "name": "example", "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters"]},
            "object": {
                "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                "metadata": {"name": "example", "namespace": "default"},
                "spec": spec,
            },
            "oldObject": null,
            "dryRun": false,
        },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_configurations_appear_at_the_start_and_their_urls_answer_over_https() {
    let server = server_with_crd().await;
    let client = TestClient::new(server.client());
    let operator = Operator::new(registry()).settings(settings(
        kopf::admission::WebhookServer::new()
            .addr(LOCALHOST)
            .path("/hooks"),
    ));
    let harness = OperatorHarness::start_on(server, operator).await;

    let validating = configuration(&client, VALIDATING, |w| {
        w.as_array().is_some_and(|w| !w.is_empty())
    })
    .await;
    let webhooks = validating["webhooks"].as_array().unwrap();
    assert_eq!(webhooks.len(), 1, "{webhooks:#?}");
    let webhook = &webhooks[0];
    let url = webhook["clientConfig"]["url"].as_str().unwrap().to_string();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    assert!(url.ends_with("/hooks/check_size"), "{url}");
    assert_eq!(webhook["name"], "check-size.auto.kopf.dev");
    assert_eq!(webhook["failurePolicy"], "Fail");
    assert_eq!(webhook["sideEffects"], "None");
    assert_eq!(webhook["matchPolicy"], "Equivalent");
    assert_eq!(webhook["timeoutSeconds"], 30);
    assert_eq!(webhook["admissionReviewVersions"], json!(["v1", "v1beta1"]));
    assert_eq!(
        webhook["rules"],
        json!([{
            "apiGroups": ["kopf.dev"], "apiVersions": ["v1"], "resources": ["kopfexamples"],
            "operations": ["CREATE", "UPDATE"], "scope": "*",
        }])
    );

    let mutating = configuration(&client, MUTATING, |w| {
        w.as_array().is_some_and(|w| !w.is_empty())
    })
    .await;
    let webhook = &mutating["webhooks"][0];
    assert_eq!(webhook["name"], "default.size.auto.kopf.dev");
    assert_eq!(webhook["failurePolicy"], "Ignore");
    assert_eq!(webhook["sideEffects"], "NoneOnDryRun");
    assert_eq!(webhook["rules"][0]["operations"], json!(["*"]));
    assert_eq!(
        webhook["objectSelector"],
        json!({"matchExpressions": [{"key": "defaulted", "operator": "In", "values": ["yes"]}]})
    );
    assert!(
        webhook["clientConfig"]["url"]
            .as_str()
            .unwrap()
            .ends_with("/hooks/default/size"),
        "{webhook:#?}"
    );

    // The URL answers over HTTPS, trusted by the caBundle alone.
    let ca = ca_bundle(&validating["webhooks"][0]);
    let (status, answer) = post(&url, &ca, &review("u-1", json!({"size": 11})))
        .await
        .expect("the webhook answers");
    assert_eq!(status, 200, "{answer:#}");
    assert_eq!(answer["response"]["uid"], "u-1");
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(
        answer["response"]["status"]["message"],
        "spec.size is at most 10"
    );
    assert_eq!(answer["response"]["status"]["code"], 422);
    let (_, answer) = post(&url, &ca, &review("u-2", json!({"size": 3})))
        .await
        .unwrap();
    assert_eq!(answer["response"]["allowed"], true, "{answer:#}");
    assert!(
        matches!(
            harness.outcome("example", "check_size"),
            Some(kopf::outcomes::HandlerOutcome::Succeeded { .. })
        ),
        "the reviews' handlers are recorded as the operator's others are"
    );

    harness.stop().await.expect("a clean stop");
    assert!(
        post(&url, &ca, &review("u-3", json!({}))).await.is_err(),
        "nothing listens after the stop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_stop_the_configurations_shrink_to_the_persistent_webhooks() {
    // The operator alone (not the harness, whose stop stops the server too), to read the
    // configurations after it stopped.
    let tasks_before = crate::stopping::alive_tasks();
    let server = server_with_crd().await;
    let client = TestClient::new(server.client());
    let stop = tokio_util::sync::CancellationToken::new();
    let operator = Operator::new(registry())
        .client(server.client())
        .settings(settings(
            kopf::admission::WebhookServer::new().addr(LOCALHOST),
        ));
    let running = tokio::spawn(operator.run(stop.clone()));
    configuration(&client, MUTATING, |w| {
        w.as_array().is_some_and(|w| w.len() == 1)
    })
    .await;
    let validating = configuration(&client, VALIDATING, |w| {
        w.as_array().is_some_and(|w| w.len() == 1)
    })
    .await;
    let url = url_of(&validating);
    let ca = ca_bundle(&validating["webhooks"][0]);
    post(&url, &ca, &review("u-1", json!({})))
        .await
        .expect("a review");

    stop_cleanly(&stop, running).await;
    let validating = client.request("GET", VALIDATING, None).await.1;
    assert_eq!(
        names(&validating),
        [json!("check-size.auto.kopf.dev")],
        "the persistent one stays: {validating:#}"
    );
    let mutating = client.request("GET", MUTATING, None).await.1;
    assert_eq!(
        mutating["metadata"]["name"], MANAGED,
        "the configuration itself stays"
    );
    assert_eq!(
        names(&mutating),
        Vec::<Value>::new(),
        "the non-persistent one is gone"
    );
    let late = post(&url, &ca, &review("u-2", json!({}))).await;
    assert!(late.is_err(), "the server is gone: {late:?}");
    drop(client);
    crate::stopping::assert_nothing_left(&server, tasks_before).await;
    server.stop().await;
}

/// PEM files of a certificate for 127.0.0.1 issued by a new CA: (cert, key, ca).
fn certificate() -> (String, String, String) {
    let now = time::OffsetDateTime::now_utc();
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::default();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
    ca.not_before = now - time::Duration::hours(1);
    ca.not_after = now + time::Duration::days(1);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let mut serving = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    serving.not_before = now - time::Duration::hours(1);
    serving.not_after = now + time::Duration::days(1);
    let cert = serving.signed_by(&key, &issuer).unwrap();
    (cert.pem(), key.serialize_pem(), ca_cert.pem())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_certificate_is_served_and_patched_into_the_ca_bundles() {
    let dir = tempfile::tempdir().unwrap();
    let (certfile, pkeyfile, cafile) = (
        dir.path().join("tls.crt"),
        dir.path().join("tls.key"),
        dir.path().join("ca.crt"),
    );
    let write = |(cert, key, ca): &(String, String, String)| {
        // Each file replaced at once, as Kubernetes' Secret volumes do (a rename).
        for (path, text) in [(&cafile, ca), (&pkeyfile, key), (&certfile, cert)] {
            let temporary = path.with_extension("new");
            std::fs::write(&temporary, text).unwrap();
            std::fs::rename(&temporary, path).unwrap();
        }
    };
    let first = certificate();
    write(&first);
    let webhook_server = kopf::admission::WebhookServer::new()
        .addr(LOCALHOST)
        .certificate(&certfile, &pkeyfile)
        .cafile(&cafile)
        .reload_interval(Duration::from_millis(100));
    let server = server_with_crd().await;
    let client = TestClient::new(server.client());
    let harness = OperatorHarness::start_on(
        server,
        Operator::new(registry()).settings(settings(webhook_server)),
    )
    .await;
    let validating = configuration(&client, VALIDATING, |w| {
        w.as_array().is_some_and(|w| !w.is_empty())
    })
    .await;
    assert_eq!(ca_bundle(&validating["webhooks"][0]), first.2);
    let url = validating["webhooks"][0]["clientConfig"]["url"]
        .as_str()
        .unwrap()
        .to_string();
    post(&url, &first.2, &review("u-1", json!({})))
        .await
        .expect("served with the first certificate");

    let second = certificate();
    write(&second);
    for path in [VALIDATING, MUTATING] {
        configuration(&client, path, |w| {
            w.as_array()
                .is_some_and(|w| !w.is_empty() && w.iter().all(|w| ca_bundle(w) == second.2))
        })
        .await;
    }
    wait("the new certificate served", || async {
        post(&url, &second.2, &review("u-2", json!({}))).await.ok()
    })
    .await;
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_handlers_without_a_server_fail_the_start_with_what_to_configure() {
    let server = server_with_crd().await;
    let stop = tokio_util::sync::CancellationToken::new();
    let running = Operator::new(registry())
        .client(server.client())
        .settings(kopf_testing::test_settings())
        .run(stop);
    let result = tokio::time::timeout(Duration::from_secs(60), running)
        .await
        .expect("the operator stops by itself");
    let error = result.expect_err("no server is an error");
    assert!(
        matches!(error, OperatorError::AdmissionServer { .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "the admission handlers check_size, default/size need a webhook server: set \
         settings.admission.server (e.g. to kopf::admission::WebhookServer::new()) in the \
         operator's settings or in a startup handler"
    );
}

/// A stop while the first discovery of the admission handlers' resources hangs (before the
/// webhook server starts) ends the operator at once, not when the request times out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_the_admission_resources_are_first_discovered_ends_the_operator_at_once() {
    let server = server_with_crd().await;
    // Discovery requests (`/apis/...`) hang for an hour.
    server.inject(
        kopf_testing::Fault::delay(Duration::from_secs(3600))
            .verb("get")
            .resource("-"),
    );
    let stop = tokio_util::sync::CancellationToken::new();
    let operator = Operator::new(registry())
        .client(server.client())
        .settings(settings(
            kopf::admission::WebhookServer::new().addr(LOCALHOST),
        ));
    let running = tokio::spawn(operator.run(stop.clone()));
    wait("a discovery request to hang", || async {
        let fired = server.stats().faults.get("delay").copied().unwrap_or(0);
        (fired > 0).then_some(())
    })
    .await;
    stop_cleanly(&stop, running).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_in_flight_finishes_after_the_configurations_shrank_and_before_the_stop_ends() {
    let entered = Arc::new(tokio::sync::Notify::new());
    let release = Arc::new(tokio::sync::Notify::new());
    let handler = {
        let (entered, release) = (entered.clone(), release.clone());
        AdmissionHandler::validating(examples(), "slow", move |_| {
            let (entered, release) = (entered.clone(), release.clone());
            async move {
                entered.notify_one();
                release.notified().await;
                Ok(None)
            }
        })
    };
    let server = server_with_crd().await;
    let client = TestClient::new(server.client());
    let operator = Operator::new(Registry::new().with(handler)).settings(settings(
        kopf::admission::WebhookServer::new().addr(LOCALHOST),
    ));
    let harness = OperatorHarness::start_on(server, operator).await;
    let validating = configuration(&client, VALIDATING, |w| {
        w.as_array().is_some_and(|w| w.len() == 1)
    })
    .await;
    let url = validating["webhooks"][0]["clientConfig"]["url"]
        .as_str()
        .unwrap()
        .to_string();
    let ca = ca_bundle(&validating["webhooks"][0]);

    let body = review("u-1", json!({}));
    let in_flight = post(&url, &ca, &body);
    let stopping = async {
        entered.notified().await;
        let stop = harness.stop();
        tokio::pin!(stop);
        let shrunk = configuration(&client, VALIDATING, |w| {
            w.as_array().is_none_or(Vec::is_empty)
        });
        tokio::select! {
            result = &mut stop => panic!("the stop ended before the review in flight: {result:?}"),
            _ = shrunk => {}
        }
        release.notify_one();
        stop.await
    };
    let (answer, stopped) = tokio::join!(in_flight, stopping);
    let (status, answer) = answer.expect("the review in flight is answered");
    assert_eq!(
        (status, &answer["response"]["allowed"]),
        (200, &json!(true)),
        "{answer:#}"
    );
    stopped.expect("a clean stop");
}

const ACCOUNT: &str = "kex-operator";

/// A server that enforces RBAC, with the CRD and the registry's `rbac -A ARGS` output applied.
async fn server_with_rbac(args: &[&str]) -> kopf_testing::FakeApiServer {
    server_with_edited_rbac(args, |_| {}).await
}

/// [`server_with_rbac`], each document of the RBAC changed by `edit` before it is applied.
async fn server_with_edited_rbac(
    args: &[&str],
    edit: impl Fn(&mut Value),
) -> kopf_testing::FakeApiServer {
    let server =
        crate::support::apiserver(kopf_testing::FakeApiServer::builder().enforce_rbac()).await;
    install_crd(&server).await;
    let options = ["-A", "--service-account", ACCOUNT].iter().chain(args);
    let rbac = kopf::rbac::rbac_manifest(&registry(), options).expect("valid rbac options");
    let client = TestClient::new(server.client());
    for document in serde_norway::Deserializer::from_str(&rbac) {
        let mut document: Value = serde::Deserialize::deserialize(document).expect("YAML");
        edit(&mut document);
        client.apply_value(document).await;
    }
    server
}

/// The operator acting as the ServiceAccount, standalone.
async fn operator_as_account(server: &kopf_testing::FakeApiServer) -> Operator {
    let mut settings = settings(kopf::admission::WebhookServer::new().addr(LOCALHOST));
    settings.peering.standalone = true;
    let client = kopf_testing::service_account_client(server, "default", ACCOUNT).await;
    Operator::new(registry()).client(client).settings(settings)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rbac_output_with_the_managed_name_lets_the_operator_keep_its_configurations() {
    let server = server_with_rbac(&["--admission-managed", MANAGED]).await;
    let client = TestClient::new(server.client());
    let stop = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(operator_as_account(&server).await.run(stop.clone()));
    configuration(&client, VALIDATING, |w| {
        w.as_array().is_some_and(|w| w.len() == 1)
    })
    .await;
    configuration(&client, MUTATING, |w| {
        w.as_array().is_some_and(|w| w.len() == 1)
    })
    .await;
    stop_cleanly(&stop, running).await;
    let mutating = client.request("GET", MUTATING, None).await.1;
    assert!(
        mutating["webhooks"].as_array().is_none_or(Vec::is_empty),
        "shrunk at the stop, which patching by name allows: {mutating:#}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_rbac_for_the_configurations_the_operator_stops_saying_what_it_needs() {
    let server = server_with_rbac(&[]).await;
    let running = operator_as_account(&server)
        .await
        .run(tokio_util::sync::CancellationToken::new());
    let error = tokio::time::timeout(Duration::from_secs(60), running)
        .await
        .expect("the operator stops by itself")
        .expect_err("forbidden is an error");
    assert!(
        matches!(error, OperatorError::ManagedWebhooks(_)),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "cannot manage the webhook configurations: cannot create the \
         ValidatingWebhookConfiguration \"auto.kopf.dev\": forbidden; the operator's RBAC needs \
         `create` and `patch` on validatingwebhookconfigurations and \
         mutatingwebhookconfigurations (admissionregistration.k8s.io), and `get`, `list` and \
         `watch` on those named \"auto.kopf.dev\": see the `rbac` subcommand's \
         --admission-managed"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_write_cut_short_is_still_shrunk_at_the_stop() {
    // Patching the mutating configuration fails: the validating one is written, the mutating
    // one never is, and the write is retried until the stop.
    let server = server_with_crd().await;
    server.inject(
        kopf_testing::Fault::respond(500)
            .verb("patch")
            .resource("mutatingwebhookconfigurations.admissionregistration.k8s.io"),
    );
    let client = TestClient::new(server.client());
    let stop = tokio_util::sync::CancellationToken::new();
    let registry = registry().with(AdmissionHandler::validating(
        examples(),
        "audit",
        |_| async { Ok(None) },
    ));
    let operator = Operator::new(registry)
        .client(server.client())
        .settings(settings(
            kopf::admission::WebhookServer::new().addr(LOCALHOST),
        ));
    let running = tokio::spawn(operator.run(stop.clone()));
    configuration(&client, VALIDATING, |w| {
        w.as_array().is_some_and(|w| w.len() == 2)
    })
    .await;
    stop_cleanly(&stop, running).await;
    let validating = client.request("GET", VALIDATING, None).await.1;
    assert_eq!(
        names(&validating),
        [json!("check-size.auto.kopf.dev")],
        "the non-persistent webhook is not left pointing at a stopped server: {validating:#}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_rbac_to_patch_the_configurations_the_operator_stops_saying_what_it_needs() {
    // Creating is granted, patching by name is not.
    let server = server_with_edited_rbac(&["--admission-managed", MANAGED], |document| {
        if let Some(rules) = document["rules"].as_array_mut() {
            rules.retain(|rule| rule.get("resourceNames").is_none());
        }
    })
    .await;
    let running = operator_as_account(&server)
        .await
        .run(tokio_util::sync::CancellationToken::new());
    let error = tokio::time::timeout(Duration::from_secs(60), running)
        .await
        .expect("the operator stops by itself, not retrying what RBAC refuses")
        .expect_err("forbidden is an error");
    assert_eq!(
        error.to_string(),
        "cannot manage the webhook configurations: cannot patch the \
         ValidatingWebhookConfiguration \"auto.kopf.dev\": forbidden; the operator's RBAC needs \
         `create` and `patch` on validatingwebhookconfigurations and \
         mutatingwebhookconfigurations (admissionregistration.k8s.io), and `get`, `list` and \
         `watch` on those named \"auto.kopf.dev\": see the `rbac` subcommand's \
         --admission-managed"
    );
    server.stop().await;
}

/// Settings for a candidate of the Lease `lease-webhooks`, serving at this port.
fn candidate(identity: &str, port: u16) -> kopf::Settings {
    let mut settings = settings(
        kopf::admission::WebhookServer::new()
            .addr(LOCALHOST)
            .port(port),
    );
    settings.peering.standalone = true;
    let mut lease = kopf::settings::LeaseSettings::new("lease-webhooks");
    lease.namespace = Some("default".into());
    lease.identity = Some(identity.into());
    lease.lease_duration = Duration::from_secs(3);
    lease.renew_deadline = Duration::from_secs(2);
    lease.retry_period = Duration::from_millis(500);
    settings.peering.lease = Some(lease);
    settings
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_writes_the_configurations_and_the_next_leader_points_them_at_itself() {
    let server = journaled_server().await;
    let client = TestClient::new(server.client());
    let (port_a, port_b) = (
        crate::activities::free_port(),
        crate::activities::free_port(),
    );
    let url_of = |port: u16| format!("https://127.0.0.1:{port}/check_size");
    let start = |identity: &str, port: u16| {
        let operator = Operator::new(registry())
            .client(server.client())
            .settings(candidate(identity, port));
        let stop = tokio_util::sync::CancellationToken::new();
        (stop.clone(), tokio::spawn(operator.run(stop)))
    };
    let url = |object: &Value| object["webhooks"][0]["clientConfig"]["url"].clone();

    let (stop_a, running_a) = start("a", port_a);
    configuration(&client, VALIDATING, |w| {
        w[0]["clientConfig"]["url"] == url_of(port_a)
    })
    .await;
    let (stop_b, running_b) = start("b", port_b);
    wait("the second candidate's server", || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port_b))
            .await
            .ok()
    })
    .await;
    let validating = client.request("GET", VALIDATING, None).await.1;
    assert_eq!(
        url(&validating),
        json!(url_of(port_a)),
        "the candidate does not write"
    );

    // The leader's graceful stop hands the lists over: it releases the Lease and serves until
    // the next leader has pointed the webhooks at its own server, trusted by its own CA; they
    // never shrink meanwhile.
    let handed_from = server.journal().len();
    stop_a.cancel();
    running_a.await.unwrap().expect("a clean stop");
    let validating = client.request("GET", VALIDATING, None).await.1;
    assert_eq!(
        url(&validating),
        json!(url_of(port_b)),
        "handed over before the stop ended"
    );
    for change in &server.journal()[handed_from..] {
        if change.resource == MUTATINGS {
            assert_eq!(
                names(&change.object).len(),
                1,
                "never shrunk: {:#}",
                change.object
            );
        }
    }
    let mutating = configuration(&client, MUTATING, |w| {
        w.as_array().is_some_and(|w| w.len() == 1)
    })
    .await;
    assert!(
        mutating["webhooks"][0]["clientConfig"]["url"]
            .as_str()
            .unwrap()
            .starts_with(&format!("https://127.0.0.1:{port_b}/")),
        "{mutating:#}"
    );
    let ca = ca_bundle(&validating["webhooks"][0]);
    let (status, _) = post(&url_of(port_b), &ca, &review("u-1", json!({})))
        .await
        .expect("the new leader answers");
    assert_eq!(status, 200);
    stop_b.cancel();
    running_b.await.unwrap().expect("a clean stop");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_served_later_gets_its_rules_in_the_configurations() {
    let server = crate::support::apiserver(kopf_testing::FakeApiServer::builder()).await;
    let mut settings = settings(kopf::admission::WebhookServer::new().addr(LOCALHOST));
    settings.scanning.interval = Duration::from_millis(200);
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry()).settings(settings)).await;
    let client = harness.test_client().clone();
    let validating = configuration(&client, VALIDATING, |w| {
        w.as_array().is_some_and(|w| w.len() == 1)
    })
    .await;
    // No such resource yet: no rules (a real API server leaves the empty list out, as Go's
    // `omitempty` does; the fake one keeps it).
    let rules = &validating["webhooks"][0]["rules"];
    assert!(
        rules.is_null() || *rules == json!([]),
        "no such resource yet: {rules}"
    );

    install_crd(harness.server()).await;
    let validating = configuration(&client, VALIDATING, |w| {
        w[0]["rules"].as_array().is_some_and(|r| r.len() == 1)
    })
    .await;
    assert_eq!(
        validating["webhooks"][0]["rules"][0]["resources"],
        json!(["kopfexamples"])
    );
    let url = url_of(&validating);
    let (status, answer) = post(
        &url,
        &ca_bundle(&validating["webhooks"][0]),
        &review("u-1", json!({"size": 11})),
    )
    .await
    .expect("the webhook answers");
    assert_eq!(
        (status, &answer["response"]["allowed"]),
        (200, &json!(false)),
        "{answer:#}"
    );
    drop(client);
    harness.stop().await.expect("a clean stop");
}

/// The configurations' resources, as the server's journal and counters name them.
const VALIDATINGS: &str = "validatingwebhookconfigurations.admissionregistration.k8s.io";
const MUTATINGS: &str = "mutatingwebhookconfigurations.admissionregistration.k8s.io";
const LEASES: &str = "leases.coordination.k8s.io";
const CLUSTER_PEERINGS: &str = "clusterkopfpeerings.kopf.dev";

/// A server with the KopfExample CRD that keeps a journal of every change.
async fn journaled_server() -> kopf_testing::FakeApiServer {
    let server = crate::support::apiserver(kopf_testing::FakeApiServer::builder().journal()).await;
    install_crd(&server).await;
    server
}

/// Every state of the configurations of this resource in the journal, in order.
fn states(server: &kopf_testing::FakeApiServer, resource: &str) -> Vec<Value> {
    server
        .journal()
        .into_iter()
        .filter(|change| change.resource == resource)
        .map(|change| change.object)
        .collect()
}

/// The ports that a configuration's webhooks point at.
fn ports(configuration: &Value) -> Vec<u16> {
    configuration["webhooks"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|webhook| webhook["clientConfig"]["url"].as_str())
        .filter_map(|url| url.parse::<http::Uri>().ok()?.port_u16())
        .collect()
}

/// Starts an operator of the registry with these settings; its stop token and task.
fn start(
    server: &kopf_testing::FakeApiServer,
    settings: kopf::Settings,
) -> (
    tokio_util::sync::CancellationToken,
    tokio::task::JoinHandle<Result<(), OperatorError>>,
) {
    let operator = Operator::new(registry())
        .client(server.client())
        .settings(settings);
    let stop = tokio_util::sync::CancellationToken::new();
    (stop.clone(), tokio::spawn(operator.run(stop)))
}

/// Waits until something listens on the port (the operator's webhook server).
async fn listening(port: u16) {
    wait("the webhook server to listen", || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
    })
    .await;
}

/// Settings for an operator of this priority in the peering `webhook-peers`, serving at this
/// port.
fn peer(priority: i64, port: u16) -> kopf::Settings {
    let mut settings = settings(
        kopf::admission::WebhookServer::new()
            .addr(LOCALHOST)
            .port(port),
    );
    settings.peering.name = "webhook-peers".into();
    settings.peering.priority = priority;
    settings.peering.lifetime = Duration::from_secs(5);
    settings
}

/// With Kopf's peering, a replica paused in favour of another never writes the
/// configurations, not even before it has heard its peers (here its first listing of the
/// peering object is slow); the active one repairs them when someone else changes them; a
/// paused replica's stop leaves them alone; the active one's graceful stop hands them over to
/// the next one without ever shrinking them, and the last one's stop shrinks them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_peer_never_writes_the_configurations_and_the_active_one_repairs_them() {
    let server = journaled_server().await;
    let client = TestClient::new(server.client());
    crate::peering::create_peering_crd(client.client(), "kopf.dev", "Cluster").await;
    let object = json!({"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering",
                        "metadata": {"name": "webhook-peers"}});
    let created = client
        .request("POST", crate::peering::PEERINGS, object)
        .await
        .1;
    assert_eq!(created["metadata"]["name"], "webhook-peers", "{created}");
    let (port_a, port_b, port_c) = (
        crate::activities::free_port(),
        crate::activities::free_port(),
        crate::activities::free_port(),
    );
    let (stop_a, running_a) = start(&server, peer(100, port_a));
    configuration(&client, VALIDATING, |w| {
        w[0]["clientConfig"]["url"] == format!("https://127.0.0.1:{port_a}/check_size")
    })
    .await;

    // The lower one hears of the higher one late: its first listing is slow.
    server.inject(
        kopf_testing::Fault::delay(Duration::from_millis(1500))
            .verb("list")
            .resource(CLUSTER_PEERINGS),
    );
    let (stop_b, running_b) = start(&server, peer(50, port_b));
    listening(port_b).await;
    crate::peering::wait_lines("webhook-peers", "Pausing operations in favour of", 1).await;
    server.clear_faults();
    assert!(
        server
            .wait_quiet_but(
                &[CLUSTER_PEERINGS, LEASES],
                Duration::from_millis(1500),
                kopf_testing::DEADLINE
            )
            .await
    );
    for resource in [VALIDATINGS, MUTATINGS] {
        for state in states(&server, resource) {
            assert!(
                !ports(&state).contains(&port_b),
                "the paused replica wrote the configuration: {state:#}"
            );
        }
    }

    // Someone empties the list: the active replica writes it again.
    let emptied = client
        .request("PATCH", VALIDATING, json!({"webhooks": []}))
        .await
        .1;
    assert_eq!(names(&emptied), Vec::<Value>::new(), "{emptied:#}");
    configuration(&client, VALIDATING, |w| {
        w[0]["clientConfig"]["url"] == format!("https://127.0.0.1:{port_a}/check_size")
    })
    .await;

    // The paused replica's stop leaves them as they are.
    stop_cleanly(&stop_b, running_b).await;
    let validating = client.request("GET", VALIDATING, None).await.1;
    assert_eq!(ports(&validating), [port_a], "{validating:#}");

    // The active replica's stop hands them over to the next one, which points them at itself.
    let (stop_c, running_c) = start(&server, peer(50, port_c));
    listening(port_c).await;
    crate::peering::wait_lines("webhook-peers", "Pausing operations in favour of", 2).await;
    let handed_from = server.journal().len();
    stop_cleanly(&stop_a, running_a).await;
    let mutating = configuration(&client, MUTATING, |w| {
        w[0]["clientConfig"]["url"] == format!("https://127.0.0.1:{port_c}/default/size")
    })
    .await;
    assert_eq!(ports(&mutating), [port_c]);
    let changes: Vec<Value> = server.journal()[handed_from..]
        .iter()
        .filter(|change| change.resource == MUTATINGS)
        .map(|change| change.object.clone())
        .collect();
    for state in &changes {
        assert_eq!(
            names(state),
            [json!("default.size.auto.kopf.dev")],
            "never shrunk while another replica takes over: {changes:#?}"
        );
    }

    // The last one's stop shrinks them.
    stop_cleanly(&stop_c, running_c).await;
    let mutating = client.request("GET", MUTATING, None).await.1;
    assert_eq!(names(&mutating), Vec::<Value>::new(), "{mutating:#}");
    server.stop().await;
}

/// An operator is ready (`/readyz`, `Operator::ready()`, hence the harness and the explorer)
/// only once its webhook configurations are written: a request right after it meets its own webhooks, even when the
/// API server is slow to store them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_is_ready_only_once_its_configurations_are_written() {
    let server = server_with_crd().await;
    let client = TestClient::new(server.client());
    let port = crate::activities::free_port();
    server.inject(
        kopf_testing::Fault::delay(Duration::from_secs(2))
            .verb("patch")
            .resource(VALIDATINGS),
    );
    let probes = crate::activities::free_port();
    let operator = Operator::new(registry())
        .client(server.client())
        .settings(settings(
            kopf::admission::WebhookServer::new()
                .addr(LOCALHOST)
                .port(port),
        ))
        .liveness(format!("http://127.0.0.1:{probes}/healthz"));
    let ready = operator.ready();
    let stop = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(operator.run(stop.clone()));
    // The readiness endpoint says so only once they are written, as the handle does.
    wait("/readyz to answer 200", || async {
        let (status, _) = crate::activities::http_get(probes, "/readyz").await.ok()?;
        (status == 200).then_some(())
    })
    .await;
    let validating = client.request("GET", VALIDATING, None).await.1;
    assert_eq!(
        ports(&validating),
        [port],
        "written before /readyz: {validating:#}"
    );
    tokio::time::timeout(kopf_testing::DEADLINE, ready.wait())
        .await
        .expect("ready in time");
    let validating = client.request("GET", VALIDATING, None).await.1;
    assert_eq!(
        ports(&validating),
        [port],
        "written before ready: {validating:#}"
    );
    let mutating = client.request("GET", MUTATING, None).await.1;
    assert_eq!(
        ports(&mutating),
        [port],
        "written before ready: {mutating:#}"
    );
    stop_cleanly(&stop, running).await;
    server.stop().await;
}

/// Settings for a replica with assigned shards (4, short timings) serving at this port.
fn sharded(identity: &str, port: u16) -> kopf::Settings {
    let mut settings = settings(
        kopf::admission::WebhookServer::new()
            .addr(LOCALHOST)
            .port(port),
    );
    settings.peering.standalone = true;
    let mut sharding = kopf::settings::ShardingSettings::new(4);
    sharding.identity = Some(identity.into());
    sharding.namespace = Some("default".into());
    sharding.lease_duration = Duration::from_secs(3);
    sharding.renew_deadline = Duration::from_secs(2);
    sharding.retry_period = Duration::from_millis(500);
    settings.peering.sharding = Some(sharding);
    settings
}

/// With assigned shards no replica pauses, yet only one writes the configurations: the
/// holder of their Lease. Its graceful stop hands them over to the other, which points them at
/// itself, and they never shrink meanwhile; the last one's stop shrinks them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_replicas_write_the_configurations_one_at_a_time_and_hand_them_over() {
    let server = journaled_server().await;
    let client = TestClient::new(server.client());
    let (port_a, port_b) = (
        crate::activities::free_port(),
        crate::activities::free_port(),
    );
    let (stop_a, running_a) = start(&server, sharded("a", port_a));
    configuration(&client, MUTATING, |w| {
        w[0]["clientConfig"]["url"] == format!("https://127.0.0.1:{port_a}/default/size")
    })
    .await;
    let (stop_b, running_b) = start(&server, sharded("b", port_b));
    listening(port_b).await;
    // Both serve their shards: each has joined the ring.
    wait("both members in the ring", || async {
        let leases = client
            .request(
                "GET",
                "/apis/coordination.k8s.io/v1/namespaces/default/leases",
                None,
            )
            .await
            .1;
        let members = leases["items"].as_array().map_or(0, |items| {
            items
                .iter()
                .filter(|l| {
                    l["metadata"]["name"]
                        .as_str()
                        .is_some_and(|n| n.contains("member"))
                })
                .count()
        });
        (members == 2).then_some(())
    })
    .await;
    assert!(
        server
            .wait_quiet_but(
                &[LEASES],
                Duration::from_millis(1500),
                kopf_testing::DEADLINE
            )
            .await
    );
    for resource in [VALIDATINGS, MUTATINGS] {
        for state in states(&server, resource) {
            assert!(
                !ports(&state).contains(&port_b),
                "the second replica wrote too: {state:#}"
            );
        }
    }

    let handed_from = server.journal().len();
    stop_cleanly(&stop_a, running_a).await;
    let validating = client.request("GET", VALIDATING, None).await.1;
    assert_eq!(
        ports(&validating),
        [port_b],
        "handed over before the stop ended: {validating:#}"
    );
    let changes: Vec<Value> = server.journal()[handed_from..]
        .iter()
        .filter(|change| change.resource == MUTATINGS)
        .map(|change| change.object.clone())
        .collect();
    assert!(!changes.is_empty());
    for state in &changes {
        assert_eq!(names(state).len(), 1, "never shrunk: {changes:#?}");
    }
    let ca = ca_bundle(&validating["webhooks"][0]);
    let (status, _) = post(&url_of(&validating), &ca, &review("u-1", json!({})))
        .await
        .expect("the new owner answers");
    assert_eq!(status, 200);

    stop_cleanly(&stop_b, running_b).await;
    let mutating = client.request("GET", MUTATING, None).await.1;
    assert_eq!(
        names(&mutating),
        Vec::<Value>::new(),
        "the last one shrank them"
    );
    server.stop().await;
}

/// Replicas that keep their certificate in one Secret serve the same one: the first makes it,
/// the other reads it, so whichever writes the configurations, their caBundle trusts every
/// replica (as behind a Service). Generated certificates are renewed in the Secret before they
/// expire (here after 3 s), and every replica serves the renewed one, still trusted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_the_certificate_of_a_secret_and_its_renewals() {
    let server = journaled_server().await;
    let client = TestClient::new(server.client());
    let (port_a, port_b) = (
        crate::activities::free_port(),
        crate::activities::free_port(),
    );
    let shared = |identity: &str, port: u16| {
        let mut settings = sharded(identity, port);
        let validity = Duration::from_secs(3);
        settings.admission.server = Some(
            kopf::admission::WebhookServer::new()
                .addr(LOCALHOST)
                .port(port)
                .secret("default", "webhook-tls")
                .certificate_validity(validity)
                .reload_interval(Duration::from_millis(200)),
        );
        settings
    };
    let started = std::time::Instant::now();
    let (stop_a, running_a) = start(&server, shared("a", port_a));
    let validating = configuration(&client, VALIDATING, |w| {
        w[0]["clientConfig"]["url"] == format!("https://127.0.0.1:{port_a}/check_size")
    })
    .await;
    let (stop_b, running_b) = start(&server, shared("b", port_b));
    listening(port_b).await;
    let ca = ca_bundle(&validating["webhooks"][0]);
    for port in [port_a, port_b] {
        let url = format!("https://127.0.0.1:{port}/check_size");
        let (status, _) = post(&url, &ca, &review("u-1", json!({})))
            .await
            .unwrap_or_else(|error| panic!("the replica at {port} is trusted: {error}"));
        assert_eq!(status, 200);
    }
    let secret = client
        .request(
            "GET",
            "/api/v1/namespaces/default/secrets/webhook-tls",
            None,
        )
        .await
        .1;
    assert_eq!(secret["type"], "kubernetes.io/tls", "{secret:#}");
    for key in ["tls.crt", "tls.key", "ca.crt", "ca.key"] {
        assert!(secret["data"][key].is_string(), "{key} in {secret:#}");
    }

    // Past the first serving certificate's end: renewed in the Secret, served by both, and
    // trusted by what the configurations say.
    tokio::time::sleep_until((started + Duration::from_secs(5)).into()).await;
    let validating = client.request("GET", VALIDATING, None).await.1;
    let ca = ca_bundle(&validating["webhooks"][0]);
    for port in [port_a, port_b] {
        let url = format!("https://127.0.0.1:{port}/check_size");
        let (status, _) = post(&url, &ca, &review("u-2", json!({})))
            .await
            .unwrap_or_else(|error| {
                panic!("the replica at {port} serves a renewed certificate: {error}")
            });
        assert_eq!(status, 200);
    }
    let renewals = server
        .journal()
        .into_iter()
        .filter(|change| change.resource == "secrets" && change.event == "MODIFIED")
        .count();
    assert!(renewals >= 1, "renewed in the Secret");
    let created = server
        .journal()
        .into_iter()
        .filter(|change| change.resource == "secrets" && change.event == "ADDED")
        .count();
    assert_eq!(created, 1, "made once, by the first replica");

    stop_cleanly(&stop_b, running_b).await;
    stop_cleanly(&stop_a, running_a).await;
    server.stop().await;
}

/// The `rbac` output with `--webhook-secret` lets the operator, as its ServiceAccount, make
/// the shared certificate's Secret and keep the configurations trusting it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rbac_output_with_the_webhook_secret_lets_the_operator_keep_its_certificate() {
    let server = server_with_rbac(&[
        "--admission-managed",
        MANAGED,
        "--webhook-secret",
        "default/webhook-tls",
    ])
    .await;
    let client = TestClient::new(server.client());
    let mut settings = settings(
        kopf::admission::WebhookServer::new()
            .addr(LOCALHOST)
            .secret("default", "webhook-tls"),
    );
    settings.peering.standalone = true;
    let client_as_account = kopf_testing::service_account_client(&server, "default", ACCOUNT).await;
    let operator = Operator::new(registry())
        .client(client_as_account)
        .settings(settings);
    let stop = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(operator.run(stop.clone()));
    let validating = configuration(&client, VALIDATING, |w| {
        w.as_array().is_some_and(|w| w.len() == 1)
    })
    .await;
    let secret = client
        .request(
            "GET",
            "/api/v1/namespaces/default/secrets/webhook-tls",
            None,
        )
        .await
        .1;
    let ca = ca_bundle(&validating["webhooks"][0]);
    let kept = base64::engine::general_purpose::STANDARD
        .decode(secret["data"]["ca.crt"].as_str().expect("ca.crt"))
        .unwrap();
    assert_eq!(
        ca.as_bytes(),
        kept,
        "the configurations trust the Secret's CA"
    );
    let (status, _) = post(&url_of(&validating), &ca, &review("u-1", json!({})))
        .await
        .expect("the webhook answers");
    assert_eq!(status, 200);
    stop_cleanly(&stop, running).await;
    server.stop().await;
}

/// Ring's crypto provider, which kube-rs builds with.
#[allow(
    deprecated,
    reason = "rustls 0.23.48 deprecates it only for lacking post-quantum key exchange, which \
              calls on 127.0.0.1 do not need"
)]
fn ring() -> rustls::crypto::CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// A leader's patch of the configurations that the server holds past the leader's term (it
/// cannot renew meanwhile), let go of only after the next leader pointed them at its own
/// server: it never lands. Like the writes to objects, the old leader's request was sent
/// within its term, bounded by it, and guarded by the version it was made for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_write_held_past_the_leaders_term_does_not_land_over_the_next_leaders() {
    let server = journaled_server().await;
    let client = TestClient::new(server.client());
    let (port_old, port_new) = (
        crate::activities::free_port(),
        crate::activities::free_port(),
    );
    let start = |identity: &'static str, port: u16| {
        let operator = Operator::new(registry())
            .client(crate::leadership::client_as(&server, identity))
            .settings(candidate(identity, port));
        let stop = tokio_util::sync::CancellationToken::new();
        (stop.clone(), tokio::spawn(operator.run(stop)))
    };
    server.inject(
        kopf_testing::Fault::hold_before_commit()
            .verb("patch")
            .resource(VALIDATINGS)
            .user_agent("old/"),
    );
    let (stop_old, running_old) = start("old", port_old);
    let held = server
        .wait_held(kopf_testing::DEADLINE)
        .await
        .expect("the old leader's patch is held");
    assert!(held.body.contains(&format!(":{port_old}/")), "{held:?}");

    // The old leader cannot renew: its term ends on its clock; the other takes the Lease once
    // it has not changed for the lease duration, and points the configurations at itself.
    let (stop_new, running_new) = start("new", port_new);
    server.inject(
        kopf_testing::Fault::respond(500)
            .verb("update")
            .resource(LEASES)
            .user_agent("old/"),
    );
    configuration(&client, VALIDATING, |w| {
        w[0]["clientConfig"]["url"] == format!("https://127.0.0.1:{port_new}/check_size")
    })
    .await;

    server.release_held();
    let quiet = Duration::from_millis(1500);
    assert!(
        server
            .wait_quiet_but(&[LEASES], quiet, kopf_testing::DEADLINE)
            .await
    );
    for state in states(&server, VALIDATINGS) {
        assert!(
            !ports(&state).contains(&port_old),
            "the old leader's late patch landed: {state:#}"
        );
    }
    server.clear_faults();
    stop_old.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(60), running_old).await;
    stop_cleanly(&stop_new, running_new).await;
    server.stop().await;
}
