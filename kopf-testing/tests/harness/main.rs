//! The operator harness and `#[kopf_testing::test]`: objects applied, created, patched and
//! waited for; what the operator sent and logged, kept apart from the test's own requests
//! and from other tests; the stop and its checks.

use kopf::outcomes::HandlerOutcome;
use kopf_testing::fixtures::KOPFEXAMPLE_CRD as CRD;
use kopf_testing::{Fault, OperatorHarness};
use serde_json::json;

#[derive(
    kube::CustomResource, serde::Deserialize, serde::Serialize, Clone, Debug, schemars::JsonSchema,
)]
#[kube(
    group = "harness.kopf.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus"
)]
struct WidgetSpec {
    size: u32,
}

#[derive(serde::Deserialize, serde::Serialize, Clone, Debug, Default, schemars::JsonSchema)]
struct WidgetStatus {
    measure: Option<u32>,
}

#[kopf::on_create(Widget)]
async fn measure(spec: WidgetSpec) -> u32 {
    spec.size * 2
}

#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn create_fn(name: &str, logger: &kopf::Logger) -> String {
    logger.info(format!("hello from {name}"));
    format!("created {name}")
}

#[kopf_testing::test(handlers = [create_fn], apply = CRD)]
async fn objects_are_applied_replaced_patched_and_deleted(harness: OperatorHarness) {
    let applied = harness
        .apply(
            "{apiVersion: v1, kind: ConfigMap, metadata: {name: one}, data: {a: '1'}}\n\
             ---\n\
             {apiVersion: v1, kind: ConfigMap, metadata: {name: two, namespace: kube-system}}",
        )
        .await;
    assert_eq!(applied.len(), 2);
    assert_eq!(applied[1]["metadata"]["namespace"], "kube-system");

    let replaced = harness
        .apply("{apiVersion: v1, kind: ConfigMap, metadata: {name: one}, data: {b: '2'}}")
        .await;
    assert_eq!(replaced[0]["data"], json!({"b": "2"}));

    let patched = harness
        .patch("configmaps", None, "one", json!({"data": {"c": "3"}}))
        .await;
    assert_eq!(patched["data"], json!({"b": "2", "c": "3"}));
    let got = harness.get("ConfigMap", "default", "one").await;
    assert_eq!(got.expect("the ConfigMap")["data"]["c"], "3");
    assert!(harness.get("configmaps", "default", "none").await.is_none());

    harness.delete("configmaps", "kube-system", "two").await;
    harness
        .wait_for_deletion("configmaps", "kube-system", "two")
        .await;
}

#[kopf_testing::test(handlers = [create_fn], apply = CRD)]
async fn what_the_operator_sent_and_logged_is_its_own(harness: &OperatorHarness) {
    harness
        .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: sender}}")
        .await;
    let object = harness
        .wait_for("kopfexamples.kopf.dev", "default", "sender", |o| {
            !o["status"]["create_fn"].is_null()
        })
        .await;
    assert_eq!(object["status"]["create_fn"], "created sender");

    let line = harness.wait_for_log("hello from sender").await;
    assert!(line.contains("INFO"), "{line}");
    // Another test's operator logs "hello from other" at the same time, on its own runtime.
    assert!(
        !harness
            .logs()
            .iter()
            .any(|l| l.contains("hello from other")),
        "another test's lines leaked in"
    );

    let patches = harness.patches_to("sender");
    assert!(
        patches
            .iter()
            .any(|p| p.subresource.as_deref() == Some("status")
                && p.body["status"]["create_fn"] == "created sender"),
        "{patches:#?}"
    );
    // The test's own requests (the apply above) are not the operator's.
    assert!(
        harness
            .sent()
            .iter()
            .all(|r| !(r.method == "POST" && r.resource.as_deref() == Some("kopfexamples"))),
        "the test's own create is not among the operator's requests"
    );
}

/// The operator's client names itself as a kopf-rs operator's own client does, so a fault
/// aimed at `kopf-rs/` hits its requests and not the test's.
#[kopf_testing::test(handlers = [create_fn], apply = CRD)]
async fn a_fault_aimed_at_kopf_rs_hits_the_operator_alone(harness: &OperatorHarness) {
    let aimed = Fault::respond(500).verb("patch").user_agent("kopf-rs/");
    harness.server().inject(aimed.times(1));
    harness
        .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: aimed}}")
        .await;
    // Its first write failed, was retried, and the handling went on.
    harness
        .wait_for("kopfexamples.kopf.dev", "default", "aimed", |o| {
            o["status"]["create_fn"] == "created aimed"
        })
        .await;
    let hit: Vec<_> = harness
        .server()
        .requests()
        .into_iter()
        .filter(|r| !r.faults.is_empty())
        .collect();
    assert_eq!(hit.len(), 1, "{hit:#?}");
    let agent = hit[0].user_agent.as_deref().unwrap_or_default();
    assert!(agent.starts_with("kopf-rs/"), "{agent}");
    // The operator's own log has the answers' codes: the failed write, then its retry.
    let codes: Vec<Option<u16>> = harness
        .sent()
        .into_iter()
        .filter(|sent| sent.method == "PATCH" && sent.name.as_deref() == Some("aimed"))
        .map(|sent| sent.code)
        .collect();
    assert_eq!(codes.first(), Some(&Some(500)), "{codes:?}");
    assert!(codes[1..].contains(&Some(200)), "{codes:?}");
}

#[kopf::on_validate("kopf.dev", "v1", "kopfexamples")]
async fn validate_fn() -> Result<(), kopf::AdmissionError> {
    Ok(())
}

/// A registry with admission handlers starts in a test that never calls its webhooks: the
/// harness gives it a server on 127.0.0.1 when its settings have none.
#[kopf_testing::test(handlers = [validate_fn, create_fn], apply = CRD)]
async fn admission_handlers_start_without_a_server_in_the_settings(harness: &OperatorHarness) {
    harness
        .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: admitted}}")
        .await;
    harness
        .wait_for("kopfexamples.kopf.dev", "default", "admitted", |o| {
            o["status"]["create_fn"] == "created admitted"
        })
        .await;
}

#[kopf_testing::test(handlers = [create_fn], apply = CRD)]
async fn another_operator_logs_on_its_own(harness: OperatorHarness) {
    harness
        .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: other}}")
        .await;
    harness.wait_for_log("hello from other").await;
    assert!(
        !harness
            .logs()
            .iter()
            .any(|l| l.contains("hello from sender"))
    );
    // Stopping in the body is fine: the attribute then has nothing left to stop.
    harness.stop().await.expect("a clean stop");
}

#[kopf_testing::test(handlers = [measure], crds = [Widget])]
async fn a_test_may_leave_the_harness_aside_and_return_a_result() -> Result<(), serde_json::Error> {
    let widget: WidgetSpec = serde_json::from_value(json!({"size": 1}))?;
    assert_eq!(widget.size, 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_harness_works_without_the_attribute() {
    let harness = OperatorHarness::builder()
        .crd::<Widget>()
        .start(kopf::handlers![measure])
        .await;
    let created = harness
        .create(&Widget::new("w", WidgetSpec { size: 21 }))
        .await;
    assert_eq!(created.spec.size, 21);
    assert!(created.metadata.uid.is_some());
    let measured = harness
        .wait_for("widgets", None, "w", |o| o["status"]["measure"] == 42)
        .await;
    let widget: Widget = serde_json::from_value(measured).expect("a Widget");
    assert_eq!(widget.status.and_then(|s| s.measure), Some(42));
    harness.stop().await.expect("a clean stop");
}

#[test]
#[should_panic(expected = "logs are captured only in #[kopf_testing::test] tests")]
fn logs_need_the_attribute() {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let harness = OperatorHarness::start(kopf::registry::Registry::new()).await;
        harness.logs();
    });
}

/// Where [`leak_client`] keeps the operator's client past the operator's life.
static LEAKED: std::sync::Mutex<Option<kube::Client>> = std::sync::Mutex::new(None);

#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn leak_client(client: kube::Client) {
    *LEAKED.lock().unwrap() = Some(client);
}

/// The stop's checks are real: an operator that keeps its client past `run()` fails the test
/// (after the deadline, waiting for the client to go).
#[kopf_testing::test(handlers = [leak_client], apply = CRD)]
#[should_panic(expected = "waiting for the operator to drop its kube client")]
async fn an_operator_keeping_its_client_fails_the_test(harness: OperatorHarness) {
    harness
        .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: leaky}}")
        .await;
    kopf_testing::wait("the handler to keep the client", || async {
        LEAKED.lock().unwrap().is_some().then_some(())
    })
    .await;
}

#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn reject_fn() -> kopf::Result<()> {
    Err(kopf::PermanentError::new("spec.size must be positive").into())
}

/// A permanent failure ends the handling: the operator purges the handler's progress record
/// from the object, and the harness still reads the outcome from what the operator wrote.
#[kopf_testing::test(handlers = [reject_fn], apply = CRD)]
async fn a_permanent_failure_is_read_after_its_record_is_purged(harness: OperatorHarness) {
    harness
        .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: bad}}")
        .await;
    harness
        .wait_for("kopfexamples", "default", "bad", |o| {
            let annotations = o["metadata"]["annotations"].as_object();
            annotations.is_some_and(|annotations| {
                annotations.contains_key("kopf.zalando.org/last-handled-configuration")
                    && !annotations.keys().any(|key| key.contains("reject_fn"))
            })
        })
        .await;
    assert_eq!(
        harness.outcome("bad", "reject_fn"),
        Some(HandlerOutcome::Failed {
            message: "spec.size must be positive".into(),
            retries: 1,
            error: kopf::outcomes::Failure::Permanent,
        })
    );
    assert_eq!(
        harness.wait_for_outcome("bad", "reject_fn").await.message(),
        Some("spec.size must be positive")
    );
    assert_eq!(
        harness.outcome("bad", "create_fn"),
        None,
        "no such handler ran"
    );
}

/// How often [`tick_fn`] ran.
static TICKS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

#[kopf::timer(
    "kopf.dev",
    "v1",
    "kopfexamples",
    interval = "60s",
    initial_delay = "60s"
)]
async fn tick_fn() -> u32 {
    TICKS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
}

/// A timer of a minute, after a minute's initial delay, runs again and again within the
/// test's deadline when the test caps intervals; the handler is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interval_cap_runs_a_minute_timer_quickly() {
    let harness = OperatorHarness::builder()
        .apply(CRD)
        .interval_cap(std::time::Duration::from_millis(100))
        .start(kopf::handlers![tick_fn])
        .await;
    harness
        .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: ticking}}")
        .await;
    let ticked = harness
        .wait_for("kopfexamples", "default", "ticking", |o| {
            o["status"]["tick_fn"]
                .as_u64()
                .is_some_and(|ticks| ticks >= 3)
        })
        .await;
    assert!(ticked["status"]["tick_fn"].as_u64() >= Some(3));
    harness.stop().await.expect("a clean stop");
}

/// A server that serves TLS and requires a token: the harness's recording client speaks HTTPS
/// with the server's CA and token, and the stop still sees every connection of the operator
/// closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_runs_against_a_tls_server_with_a_token() {
    let server = kopf_testing::FakeApiServer::builder()
        .token("s3cret")
        .start_on_own_runtime()
        .await
        .expect("the server starts");
    assert!(server.url().starts_with("https://"), "{}", server.url());
    server.apply(CRD).await; // over TLS, with the token
    let operator = kopf::operator::Operator::new(kopf::handlers![create_fn])
        .settings(kopf_testing::test_settings());
    let harness = OperatorHarness::start_on(server, operator).await;
    harness
        .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: secure}}")
        .await;
    let handled = harness
        .wait_for("kopfexamples", "default", "secure", |o| {
            !o["status"]["create_fn"].is_null()
        })
        .await;
    assert_eq!(handled["status"]["create_fn"], "created secure");
    assert!(
        harness.sent().iter().any(|sent| sent.method == "PATCH"),
        "the operator's own requests went through the recording client"
    );
    harness.stop().await.expect("a clean stop");
}

#[kopf::on_validate("kopf.dev", "v1", "kopfexamples", operations = [CREATE])]
async fn small_fn(spec: &serde_json::Value) -> Result<(), kopf::AdmissionError> {
    if spec["size"].as_i64().unwrap_or(0) > 10 {
        return Err(kopf::AdmissionError::new("spec.size is at most 10").code(422));
    }
    Ok(())
}

fn managed_admission() -> kopf::Settings {
    let mut settings = kopf_testing::test_settings();
    settings.admission.managed = Some("harness.kopf.dev".into());
    settings
}

/// What the troubleshooting chapter quotes for admission, as Kopf logs it: a denial is the
/// handler's permanent failure (ERROR), an admitted request one success per handler (INFO).
#[kopf_testing::test(handlers = [small_fn], apply = CRD, settings = managed_admission())]
async fn an_admission_denial_and_an_admission_log_as_kopf_logs_them(harness: &OperatorHarness) {
    let created = harness
        .test_client()
        .request(
            "POST",
            "/apis/kopf.dev/v1/namespaces/default/kopfexamples",
            json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                   "metadata": {"name": "big"}, "spec": {"size": 11}}),
        )
        .await;
    assert!(created.0.as_u16() >= 400, "denied: {created:?}");
    let denied = harness
        .wait_for_log("Handler 'small_fn' failed permanently: spec.size is at most 10")
        .await;
    assert!(denied.contains("ERROR"), "{denied}");

    harness
        .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: small}, spec: {size: 1}}")
        .await;
    harness.wait_for_log("Handler 'small_fn' succeeded.").await;
    let succeeded: Vec<String> = harness
        .logs()
        .into_iter()
        .filter(|line| line.contains("Handler 'small_fn' succeeded."))
        .collect();
    assert_eq!(
        succeeded.len(),
        1,
        "one line per handler and request: {succeeded:#?}"
    );
    assert!(succeeded[0].contains("INFO"), "{succeeded:?}");
    assert!(
        !harness
            .logs()
            .iter()
            .any(|line| line.contains("Rejected an admission request")),
        "that line is for malformed reviews, not for denials"
    );
}
