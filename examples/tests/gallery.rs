//! The gallery's operators, tested as users test theirs: `#[kopf_testing::test]` starts a fake
//! API server with the CRDs and the operator's handlers; the test applies objects, waits for
//! what the operator does to them, and the attribute stops the operator afterwards, checking
//! that it left nothing behind.

use kopf_examples::gallery::{children, errors, filters, typed};
use kopf_testing::OperatorHarness;
use kopf_testing::fixtures::KOPFEXAMPLE_CRD;
use serde_json::json;

#[kopf_testing::test(handlers = [children::create_fn], apply = KOPFEXAMPLE_CRD)]
async fn a_parent_creates_its_child_and_takes_it_along_when_deleted(harness: OperatorHarness) {
    let parent = harness
        .apply(
            "{apiVersion: kopf.dev/v1, kind: KopfExample, \
              metadata: {name: parent, labels: {app: demo}}, spec: {field: x}}",
        )
        .await
        .remove(0);

    let child = harness
        .wait_for("configmaps", "default", "parent-child", |_| true)
        .await;
    let owner = &child["metadata"]["ownerReferences"][0];
    assert_eq!(owner["uid"], parent["metadata"]["uid"]);
    assert_eq!(owner["kind"], "KopfExample");
    assert_eq!(owner["controller"], true);
    assert_eq!(
        child["metadata"]["labels"]["app"], "demo",
        "the parent's labels"
    );
    assert_eq!(child["data"]["spec"], r#"{"field":"x"}"#);
    harness
        .wait_for("kopfexamples", "default", "parent", |p| {
            p["status"]["create_fn"] == json!({"children": ["parent-child"]})
        })
        .await;

    harness.delete("kopfexamples", "default", "parent").await;
    harness
        .wait_for_deletion("kopfexamples", "default", "parent")
        .await;
    // A real API server's garbage collector learns of a new custom resource's kind only at
    // its next rescan of discovery (every 30 s), so this waits longer than other waits.
    let collected = async {
        let path = "/api/v1/namespaces/default/configmaps/parent-child";
        while harness.request("GET", path, None).await.0 != 404 {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(4 * kopf_testing::DEADLINE, collected)
        .await
        .expect("the child is collected with its parent");
}

#[kopf_testing::test(
    handlers = [
        filters::create_with_label_value,
        filters::create_with_label_present,
        filters::create_with_label_absent,
        filters::create_with_annotation_callable,
        filters::create_when_good_enough,
        filters::update_to_value,
    ],
    apply = KOPFEXAMPLE_CRD,
)]
async fn filters_choose_the_handlers_of_each_object(harness: OperatorHarness) {
    harness
        .apply(
            r#"
            apiVersion: kopf.dev/v1
            kind: KopfExample
            metadata:
              name: labelled
              labels: {somelabel: somevalue}
              annotations: {someannotation: somevalue}
            spec: {field: good}
            ---
            apiVersion: kopf.dev/v1
            kind: KopfExample
            metadata:
              name: plain
              labels: {somelabel: othervalue}
            spec: {field: bad}
            ---
            apiVersion: kopf.dev/v1
            kind: KopfExample
            metadata: {name: unlabelled}
            "#,
        )
        .await;

    let ran = |object: &serde_json::Value| -> Vec<String> {
        let mut ran: Vec<String> = object["status"]
            .as_object()
            .map(|status| status.keys().cloned().collect())
            .unwrap_or_default();
        ran.sort();
        ran
    };
    let done = |o: &serde_json::Value| {
        o["metadata"]["annotations"]
            .get("kopf.zalando.org/last-handled-configuration")
            .is_some()
    };
    let labelled = harness
        .wait_for("kopfexamples", "default", "labelled", done)
        .await;
    assert_eq!(
        ran(&labelled),
        [
            "create_when_good_enough",
            "create_with_annotation_callable",
            "create_with_label_present",
            "create_with_label_value",
        ]
    );
    let plain = harness
        .wait_for("kopfexamples", "default", "plain", done)
        .await;
    assert_eq!(ran(&plain), ["create_with_label_present"]);
    let unlabelled = harness
        .wait_for("kopfexamples", "default", "unlabelled", done)
        .await;
    assert_eq!(ran(&unlabelled), ["create_with_label_absent"]);

    // A field filter: only a change of spec.field to "value" runs the update handler.
    harness
        .patch(
            "kopfexamples",
            "default",
            "plain",
            json!({"spec": {"field": "value"}}),
        )
        .await;
    let plain = harness
        .wait_for("kopfexamples", "default", "plain", |o| {
            !o["status"]["update_to_value/spec.field"].is_null()
        })
        .await;
    assert_eq!(
        plain["status"]["update_to_value/spec.field"],
        "bad -> value"
    );
}

#[kopf_testing::test(
    handlers = [
        errors::instant_failure_with_only_a_message,
        errors::eventual_success_with_few_messages,
        errors::eventual_failure_with_tracebacks,
        errors::instant_failure_with_traceback,
    ],
    apply = KOPFEXAMPLE_CRD,
)]
async fn errors_are_retried_or_final_as_their_kind_says(harness: OperatorHarness) {
    harness
        .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: failing}}")
        .await;

    // Temporary errors are retried until the handler succeeds.
    let object = harness
        .wait_for("kopfexamples", "default", "failing", |o| {
            !o["status"]["eventual_success_with_few_messages"].is_null()
        })
        .await;
    assert_eq!(
        object["status"]["eventual_success_with_few_messages"],
        json!({"attempts": 4})
    );
    // The log says what happened to each handler, as Kopf's does.
    harness
        .wait_for_log("Creation is processed: 1 succeeded; 3 failed.")
        .await;
    harness
        .wait_for_log("Handler 'instant_failure_with_only_a_message' failed permanently: Fail once and for all.")
        .await;
    // How many attempts each failing handler got: one for final errors, `retries` for others.
    let attempts = |handler: &str| {
        let failed = format!("Handler '{handler}' failed");
        harness
            .logs()
            .iter()
            .filter(|line| line.contains(&failed))
            .count()
    };
    assert_eq!(attempts("instant_failure_with_only_a_message"), 1);
    assert_eq!(attempts("instant_failure_with_traceback"), 1);
    assert_eq!(attempts("eventual_failure_with_tracebacks"), 3);
    assert_eq!(attempts("eventual_success_with_few_messages"), 3);

    // What the operator wrote on the way: Kopf's progress records, one per handler, with
    // the failures and retries counted.
    let progress = |handler: &str| -> Vec<serde_json::Value> {
        harness
            .patches_to("failing")
            .iter()
            .filter_map(|patch| {
                let key = format!("kopf.zalando.org/{handler}");
                let record = patch.body["metadata"]["annotations"][&key].as_str()?;
                serde_json::from_str(record).ok()
            })
            .collect()
    };
    let permanent = progress("instant_failure_with_only_a_message");
    assert!(
        permanent
            .iter()
            .any(|r| r["failure"] == true && r["retries"] == 1),
        "{permanent:?}"
    );
    let temporary = progress("eventual_success_with_few_messages");
    assert!(
        temporary
            .iter()
            .any(|r| r["retries"] == 3 && r["success"] == false),
        "{temporary:?}"
    );
}

#[kopf_testing::test(handlers = [typed::greet, typed::regreet], crds = [typed::Greeting])]
async fn typed_resources_arrive_as_their_types(harness: OperatorHarness) {
    let greeting = typed::Greeting::new(
        "world",
        typed::GreetingSpec {
            name: "world".into(),
            times: 2,
        },
    );
    let created = harness.create(&greeting).await;
    assert_eq!(created.spec.times, 2);

    let greeted = harness
        .wait_for("greetings", "default", "world", |o| {
            !o["status"]["greet"].is_null()
        })
        .await;
    let greeted: typed::Greeting = serde_json::from_value(greeted).expect("a Greeting");
    assert_eq!(
        greeted.status.and_then(|s| s.greet),
        Some(typed::Greeted {
            message: "hello, world; hello, world".into(),
            by: "world".into(),
        })
    );

    harness
        .patch(
            "Greeting",
            "default",
            "world",
            json!({"spec": {"name": "kopf", "times": 1}}),
        )
        .await;
    harness
        .wait_for("greetings", "default", "world", |o| {
            o["status"]["greet"]["message"] == "hello, kopf"
        })
        .await;
}
