//! The explorer (`kopf_testing::Explorer`) on a planted bug: a creation handler that makes a
//! child ConfigMap under a generated name is not idempotent. A crash after the child was
//! created and before the handler's success was recorded runs it again, and the cluster ends
//! with two children. The explorer finds that plan, says what differs from the fault-free
//! reference, and names the plan to replay. The careful twin (a child with a name of its own,
//! found there on a re-run) passes every plan.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kopf::operator::Operator;
use kopf_testing::fixtures::KOPFEXAMPLE_CRD as CRD;
use kopf_testing::{ApiServer, Explorer, Plan, test_settings};
use kube::api::{Api, ObjectMeta, PostParams};

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

fn explorer(registry: fn() -> kopf::registry::Registry) -> Explorer {
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

/// The level-based way: the child mirrors the spec, whatever the history.
async fn mirror(name: &str, spec: &serde_json::Value, client: &kube::Client) -> kopf::Result<()> {
    let children: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let data: BTreeMap<String, String> = spec
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, value)| (key.clone(), value.to_string()))
        .collect();
    let child = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": format!("{name}-mirror")},
        "data": data,
    });
    let params = kube::api::PatchParams::apply("mirror").force();
    children
        .patch(
            &format!("{name}-mirror"),
            &params,
            &kube::api::Patch::Apply(child),
        )
        .await?;
    Ok(())
}

#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn mirror_created(
    name: &str,
    spec: &serde_json::Value,
    client: &kube::Client,
) -> kopf::Result<()> {
    mirror(name, spec, client).await
}

#[kopf::on_update("kopf.dev", "v1", "kopfexamples")]
async fn mirror_updated(
    name: &str,
    spec: &serde_json::Value,
    client: &kube::Client,
) -> kopf::Result<()> {
    mirror(name, spec, client).await
}

/// The history-dependent way: a count of updates, which no rollback undoes.
#[kopf::on_update("kopf.dev", "v1", "kopfexamples")]
async fn count_updates(status: &serde_json::Value, patch: &mut kopf::Patch) {
    let updates = status["updates"].as_u64().unwrap_or(0) + 1;
    patch.status().insert("updates".into(), updates.into());
}

const MUTATED: &str = "{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: kex}, spec: {size: 1, mode: fast, enabled: true}}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_level_based_operator_passes_the_mutation_campaign() {
    let mutations = Explorer::new(|| {
        Operator::new(kopf::handlers![mirror_created, mirror_updated]).settings(test_settings())
    })
    .setup(CRD)
    .mutate(MUTATED)
    .await;
    mutations.assert_ok();
    let fields: Vec<&str> = mutations
        .mutations
        .iter()
        .map(|m| m.field.as_str())
        .collect();
    assert_eq!(fields, ["spec.enabled", "spec.mode", "spec.size"]);
    assert_eq!(
        mutations.without_effect(),
        Vec::<&str>::new(),
        "the mirror shows every field"
    );
    let size = &mutations.mutations[2];
    assert_eq!(
        (size.from.clone(), size.to.clone()),
        (serde_json::json!(1), serde_json::json!(2))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mutation_campaign_finds_a_state_that_depends_on_history() {
    let mutations = Explorer::new(|| {
        Operator::new(kopf::handlers![
            mirror_created,
            mirror_updated,
            count_updates
        ])
        .settings(test_settings())
    })
    .setup(CRD)
    .mutate(MUTATED)
    .await;
    let failures = mutations.failures();
    assert_eq!(
        failures.len(),
        3,
        "every mutation: {:?}",
        mutations.mutations
    );
    let problems = failures[0].problems.join("\n");
    assert!(
        problems.contains("after changing it back") && problems.contains(r#"{"updates":2}"#),
        "{problems}"
    );
    assert!(
        problems.contains("created so on a fresh server"),
        "{problems}"
    );
}

/// Reads its input at `resourceVersion=0`, which a real server may answer from a cache that
/// lags behind: under stale reads, it copies an old value.
#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn copy_setting(client: &kube::Client) -> kopf::Result<String> {
    let settings: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let setting = settings
        .get_with("setting", &kube::api::GetParams::any())
        .await?;
    Ok(setting.data.unwrap_or_default()["value"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_explorer_finds_a_handler_that_trusts_a_stale_read() {
    if ApiServer::from_env().fake_only("serving reads from a lagging view") {
        return;
    }
    let exploration = Explorer::new(|| {
        Operator::new(kopf::handlers![copy_setting]).settings(test_settings())
    })
    .setup(CRD)
    .scenario(|harness| async move {
        for value in ["a", "b", "c"] {
            harness
                .apply(&format!(
                    "{{apiVersion: v1, kind: ConfigMap, metadata: {{name: setting}}, data: {{value: {value}}}}}"
                ))
                .await;
        }
        harness
            .apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: kex}}")
            .await;
        harness
            .wait_for("kopfexamples", "default", "kex", |o| {
                !o["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"]
                    .is_null()
            })
            .await;
    })
    .only("stale-reads")
    .run()
    .await;
    assert_eq!(
        exploration.reference.state["kopfexamples.kopf.dev default/kex"][0]["status"]["copy_setting"],
        "c"
    );
    let stale = &exploration.outcomes[0];
    assert!(stale.struck, "the handler's read was served stale");
    assert!(
        stale
            .problems
            .iter()
            .any(|p| p.contains("status.copy_setting") && p.contains("instead of \"c\"")),
        "{:?}",
        stale.problems
    );
}
