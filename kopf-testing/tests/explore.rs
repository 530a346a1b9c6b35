//! The explorer (`kopf_testing::Explorer`) on a planted bug: a creation handler that makes a
//! child ConfigMap under a generated name is not idempotent. A crash after the child was
//! created and before the handler's success was recorded runs it again, and the cluster ends
//! with two children. The explorer finds that plan, says what differs from the fault-free
//! reference, and names the plan to replay. The careful twin (a child with a name of its own,
//! found there on a re-run) passes every plan.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kopf::Operator;
use kopf_testing::{Explorer, Plan, test_settings};
use kube::api::{Api, ObjectMeta, PostParams};

const CRD: &str = include_str!("../../examples/crd.yaml");

/// The bug: every run creates another child.
#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn careless(name: &str, client: &kube::Client) -> kopf::Result<&'static str> {
    let children: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let child = ConfigMap {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("parent".into(), name.into())])),
        ..ConfigMap::default()
    };
    children.create(&PostParams::default(), &child).await?;
    Ok("child created")
}

/// The fix: the child's name is the parent's; a re-run finds it there.
#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn careful(name: &str, client: &kube::Client) -> kopf::Result<&'static str> {
    let children: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let child = ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{name}-child")),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("parent".into(), name.into())])),
        ..ConfigMap::default()
    };
    match children.create(&PostParams::default(), &child).await {
        Ok(_) => Ok("child created"),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok("child created"),
        Err(error) => Err(error.into()),
    }
}

fn explorer(registry: fn() -> kopf::Registry) -> Explorer {
    Explorer::new(move || Operator::new(registry()).settings(test_settings()))
        .setup(CRD)
        .scenario(|harness| async move {
            harness
                .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: kex}}")
                .await;
            harness
                .wait_for("kopfexamples", "default", "kex", |o| {
                    !o["status"].is_null()
                        && !o["metadata"]["annotations"]
                            ["kopf.zalando.org/last-handled-configuration"]
                            .is_null()
                })
                .await;
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_explorer_finds_a_handler_that_is_not_idempotent() {
    let exploration = explorer(|| kopf::handlers![careless]).run().await;
    assert!(
        exploration.reference.problems.is_empty(),
        "{:?}",
        exploration.reference
    );
    let failures = exploration.failures();
    let crash_after_the_child = failures
        .iter()
        .find(|f| matches!(f.plan, Plan::CrashAfterWrite(_)))
        .expect("a crash after the child's creation is found");
    assert!(
        crash_after_the_child
            .problems
            .iter()
            .any(|p| p.contains("configmaps default/kex-*: 2 object(s), the reference has 1")),
        "{:?}",
        crash_after_the_child.problems
    );
    let Plan::CrashAfterWrite(n) = crash_after_the_child.plan else {
        unreachable!()
    };
    assert!(
        exploration.reference.writes[n as usize].starts_with("create configmaps default/"),
        "the failing plan crashes right after the child's creation: {:?}",
        exploration.reference.writes
    );
    // The report names the plan, and replaying it alone fails the same way.
    let report = std::panic::catch_unwind(|| exploration.assert_ok())
        .expect_err("assert_ok fails")
        .downcast::<String>()
        .expect("a message");
    assert!(
        report.contains("replay it with Explorer::only(\""),
        "{report}"
    );
    let plan = crash_after_the_child.plan.to_string();
    let replay = explorer(|| kopf::handlers![careless])
        .only(&plan)
        .run()
        .await;
    assert_eq!(replay.outcomes.len(), 1);
    assert!(
        !replay.outcomes[0].problems.is_empty(),
        "the replay fails too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_handler_passes_every_plan() {
    let exploration = explorer(|| kopf::handlers![careful]).run().await;
    exploration.assert_ok();
    let struck = exploration.outcomes.iter().filter(|o| o.struck).count();
    assert!(
        struck * 10 >= exploration.outcomes.len() * 8,
        "most plans' faults happened: {struck} of {}",
        exploration.outcomes.len()
    );
    for plan in [
        "crash-after-write-0",
        "crash-before-write-1",
        "fail-after-write-2",
    ] {
        assert!(
            exploration
                .outcomes
                .iter()
                .any(|o| o.plan.to_string() == plan),
            "{plan} was explored"
        );
    }
}
