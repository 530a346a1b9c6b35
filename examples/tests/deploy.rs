//! `examples/deploy/`: its manifests apply to a cluster (the fake API server's, with a real
//! kubectl), and `rbac.yaml` grants what `kopfexample`'s handlers need.
//!
//! `rbac.yaml` is what `kopfexample rbac -A` prints (see `examples/deploy/README.md`); the
//! printing is behind the operator's command line, so this test checks the rules that the
//! handlers need rather than the text: regenerate the file when the handlers change.

mod support;

use std::path::Path;
use std::time::Duration;

use kopf_testing::FakeApiServer;
use serde_json::{Value, json};
use support::kubectl::Kubectl;

#[tokio::test]
async fn the_manifests_apply_with_kubectl() {
    let test = "the_manifests_apply_with_kubectl";
    let server = kopf_testing::ApiServer::from_env()
        .start(FakeApiServer::builder())
        .await;
    let Some(kubectl) = Kubectl::for_server(test, &server) else {
        return;
    };

    let crd = examples_dir().join("crd.yaml").display().to_string();
    let deploy = examples_dir().join("deploy").display().to_string();
    let out = kubectl.ok(&["apply", "-f", &crd, "-f", &deploy]).await;
    for applied in [
        "customresourcedefinition.apiextensions.k8s.io/kopfexamples.kopf.dev created",
        "serviceaccount/kopf-operator created",
        "clusterrole.rbac.authorization.k8s.io/kopf-operator created",
        "clusterrolebinding.rbac.authorization.k8s.io/kopf-operator created",
        "deployment.apps/kopf-operator created",
    ] {
        assert!(
            out.lines().any(|line| line.trim() == applied),
            "`kubectl apply` did not say {applied:?}:\n{out}"
        );
    }

    let out = kubectl
        .ok(&[
            "get",
            "deployment",
            "kopf-operator",
            "-o",
            "jsonpath={.spec.template.spec.terminationGracePeriodSeconds} \
             {.spec.template.spec.serviceAccountName} {.spec.replicas} {.spec.strategy.type}",
        ])
        .await;
    assert_eq!(out.trim(), "30 kopf-operator 1 Recreate");

    let out = kubectl
        .ok(&[
            "get",
            "clusterrolebinding",
            "kopf-operator",
            "-o",
            "jsonpath={.roleRef.name} {.subjects[0].kind} {.subjects[0].name} \
             {.subjects[0].namespace}",
        ])
        .await;
    assert_eq!(
        out.trim(),
        "kopf-operator ServiceAccount kopf-operator default"
    );

    // Applying again changes nothing. (The API server, real or fake, stores the CRD without
    // the `priority: 0` of Kopf's printer columns, as Go's `omitempty` drops zeros, so kubectl
    // sends the columns again and says "configured" for the CRD alone.)
    let out = kubectl.ok(&["apply", "-f", &crd, "-f", &deploy]).await;
    let reconfigured =
        "customresourcedefinition.apiextensions.k8s.io/kopfexamples.kopf.dev configured";
    assert!(
        out.lines()
            .all(|line| line.trim().ends_with(" unchanged") || line.trim() == reconfigured),
        "a second `kubectl apply` changed something:\n{out}"
    );
}

#[test]
fn the_deployment_outlasts_the_operators_grace_period() {
    let text = read(&examples_dir().join("deploy/deployment.yaml"));
    let deployment: Value = serde_norway::from_str(&text).expect("deployment.yaml is YAML");
    let pod = &deployment["spec"]["template"]["spec"];
    let grace = pod["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("terminationGracePeriodSeconds is set");
    let process = kopf::Settings::default().process;
    let operators = process.grace_period + process.cleanup_timeout;
    assert!(
        Duration::from_secs(grace) > operators,
        "terminationGracePeriodSeconds ({grace} s) must exceed the operator's grace period \
         plus its cleanup timeout ({operators:?})"
    );
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("the operator's arguments")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(args, ["-A", "--liveness", "http://0.0.0.0:8080/healthz"]);
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(pod["serviceAccountName"], "kopf-operator");
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert_eq!(deployment["spec"]["strategy"]["type"], "Recreate");
}

#[test]
fn the_rbac_grants_what_the_handlers_need() {
    let text = read(&examples_dir().join("deploy/rbac.yaml"));
    let documents: Vec<Value> = text
        .split("\n---")
        .filter(|document| {
            document
                .lines()
                .any(|line| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
        })
        .map(|document| serde_norway::from_str(document).expect("rbac.yaml is YAML"))
        .collect();
    let kinds: Vec<&str> = documents
        .iter()
        .map(|document| {
            document["kind"]
                .as_str()
                .expect("every document has a kind")
        })
        .collect();
    assert_eq!(
        kinds,
        ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"],
        "rbac.yaml is not what `kopfexample rbac -A` prints: regenerate it \
         (examples/deploy/README.md)"
    );

    let account = &documents[0];
    assert_eq!(account["metadata"]["name"], "kopf-operator");
    assert_eq!(account["metadata"]["namespace"], "default");

    let rules = documents[1]["rules"]
        .as_array()
        .expect("the ClusterRole has rules");
    for (group, resource, verbs) in [
        (
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            &["list", "watch"][..],
        ),
        (
            "kopf.dev",
            "kopfexamples",
            &["get", "list", "watch", "patch"],
        ),
        ("kopf.dev", "kopfexamples/status", &["patch"]),
        ("", "events", &["create"]),
    ] {
        for verb in verbs {
            assert!(
                rules.iter().any(|rule| grants(rule, group, resource, verb)),
                "the ClusterRole does not grant {verb} on {group}/{resource}: regenerate \
                 rbac.yaml (examples/deploy/README.md)"
            );
        }
    }

    assert_eq!(
        documents[2]["roleRef"],
        json!({
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "kopf-operator",
        })
    );
    assert_eq!(
        documents[2]["subjects"],
        json!([{"kind": "ServiceAccount", "name": "kopf-operator", "namespace": "default"}])
    );
}

/// Whether one rule of a role grants `verb` on `resource` of `group`.
fn grants(rule: &Value, group: &str, resource: &str, verb: &str) -> bool {
    let has = |field: &str, value: &str| {
        rule[field]
            .as_array()
            .is_some_and(|values| values.iter().any(|v| v == value || v == "*"))
    };
    has("apiGroups", group) && has("resources", resource) && has("verbs", verb)
}

/// The `examples/` folder.
fn examples_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}
