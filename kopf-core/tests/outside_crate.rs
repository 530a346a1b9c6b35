//! kopf-rs as a user's crate meets it: a new crate outside this workspace, depending on
//! kopf-core by path and on k8s-openapi with its own Kubernetes version (`latest`, not the
//! workspace's 1.33), with kopf-testing as a dev-dependency, builds. kopf-core and kopf-testing
//! enable no k8s-openapi version themselves (k8s-openapi's rule for libraries), so the
//! application's choice is the only one.
//!
//! The crate is checked (`cargo check --all-targets --offline`: everything it needs was
//! downloaded for the workspace) in a folder outside the workspace, so that the workspace's
//! `.cargo/config.toml` (which picks 1.33 for the workspace's own builds) does not apply; its
//! build folder is kept under the target's `tmp/`, so that later runs are quick.

use std::path::Path;
use std::process::Command;

const MANIFEST: &str = r#"
[package]
name = "outside-operator"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
kopf = { package = "kopf-core", path = "@WORKSPACE@/kopf-core" }
k8s-openapi = { version = "0.29", features = ["latest"] }
serde_json = "1"
tokio = { version = "1", features = ["macros", "rt-multi-thread"] }

[dev-dependencies]
kopf-testing = { path = "@WORKSPACE@/kopf-testing" }

[workspace]
"#;

const MAIN: &str = r#"
use k8s_openapi::api::core::v1::ConfigMap;

#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn create_fn(name: &str) -> kopf::Result<serde_json::Value> {
    let child = ConfigMap::default();
    Ok(serde_json::json!({"name": name, "child": child.metadata.name}))
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kopf::run().await
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_fake_server_is_at_hand() {
        let _ = kopf_testing::test_settings();
    }
}
"#;

#[test]
fn a_crate_with_its_own_kubernetes_version_builds_with_kopf() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("kopf-core sits in the workspace");
    let folder = tempfile::tempdir().expect("a temporary folder");
    let manifest = MANIFEST.replace("@WORKSPACE@", &workspace.display().to_string());
    std::fs::write(folder.path().join("Cargo.toml"), manifest).expect("writing Cargo.toml");
    std::fs::create_dir(folder.path().join("src")).expect("creating src/");
    std::fs::write(folder.path().join("src/main.rs"), MAIN).expect("writing main.rs");
    // The same versions as the workspace's, so that nothing new is needed.
    std::fs::copy(
        workspace.join("Cargo.lock"),
        folder.path().join("Cargo.lock"),
    )
    .expect("copying Cargo.lock");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("outside-crate");
    let output = Command::new(env!("CARGO"))
        .args([
            "check",
            "--all-targets",
            "--offline",
            "--quiet",
            "--target-dir",
        ])
        .arg(&target)
        .current_dir(folder.path())
        // The workspace's choice of a version must not leak into the user's crate.
        .env_remove("K8S_OPENAPI_ENABLED_VERSION")
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "the outside crate does not build:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
