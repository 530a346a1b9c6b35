//! `#[kopf_testing::test]` in its forms: the harness by value, by reference, or not at all;
//! the handlers named, CRDs, YAML and settings given; a `Result` returned. (trybuild builds
//! without `--test`, which drops test functions after expansion: the expanded code itself is
//! compiled and run by kopf-testing's `tests/harness`.)

use kopf_testing::OperatorHarness;

#[derive(
    kube::CustomResource, serde::Deserialize, serde::Serialize, Clone, Debug, schemars::JsonSchema,
)]
#[kube(group = "kopf.dev", version = "v1", kind = "KopfExample", namespaced)]
pub struct KopfExampleSpec {
    field: Option<String>,
}

#[kopf::on_create(KopfExample)]
async fn create_fn() -> &'static str {
    "done"
}

#[kopf_testing::test]
async fn collected(harness: OperatorHarness) {
    harness.stop().await.expect("a clean stop");
}

#[kopf_testing::test(handlers = [create_fn], crds = [KopfExample])]
async fn borrowed(harness: &OperatorHarness) {
    harness
        .wait_for("kopfexamples", "default", "kex", |o| {
            o["status"]["create_fn"] == "done"
        })
        .await;
}

#[kopf_testing::test(
    handlers = [create_fn],
    apply = "{apiVersion: v1, kind: ConfigMap, metadata: {name: config}}",
    apply = String::from("{apiVersion: v1, kind: Namespace, metadata: {name: other}}"),
    settings = kopf_testing::test_settings(),
)]
async fn without_the_harness() -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {}
