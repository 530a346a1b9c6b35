//! kubectl's switch from client-side to server-side apply: the last-applied annotation.

use super::*;

/// A Deployment as `kubectl apply` (client-side) creates it: the annotation and an `Update`
/// entry of `kubectl-client-side-apply`.
fn client_side_applied(replicas: i64) -> Value {
    let mut object = web(replicas);
    let annotation = format!("{}\n", web(replicas));
    object["metadata"]["annotations"] =
        json!({"kubectl.kubernetes.io/last-applied-configuration": annotation});
    let updater = Updater {
        manager: "kubectl-client-side-apply".into(),
        api_version: "apps/v1".into(),
        subresource: String::new(),
    };
    record_update(Some("Deployment"), None, &mut object, &updater, NOW);
    stored(object)
}

/// `kubectl` may take over fields that still have their last-applied values; the server
/// then rewrites the annotation as Go's encoder writes the applied object.
#[test]
fn ssa_kubectl_takes_over_last_applied_fields() {
    let live = client_side_applied(3);
    let mut applied = web(5);
    applied["metadata"]["labels"]["tier"] = json!("<front&end>");
    let out = server_side_apply(
        Some("Deployment"),
        Some(&live),
        &applied,
        "kubectl",
        false,
        LATER,
    )
    .expect("no conflict for kubectl");
    assert_eq!(out["spec"]["replicas"], 5);
    let kubectl = entry_of(&out, "kubectl").expect("kubectl");
    assert_eq!(kubectl["operation"], "Apply");
    assert_eq!(kubectl["fieldsV1"]["f:spec"]["f:replicas"], json!({}));
    let csa = entry_of(&out, "kubectl-client-side-apply").expect("csa");
    assert_eq!(csa["fieldsV1"]["f:spec"].get("f:replicas"), None);
    assert_eq!(
        csa["fieldsV1"]["f:metadata"]["f:annotations"],
        json!({".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}),
        "the annotation stays with the client-side manager"
    );
    let annotation =
        out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .expect("annotation");
    assert_eq!(
        annotation,
        concat!(
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"labels":{"app":"web","tier":"\u003cfront\u0026end\u003e"},"name":"web","namespace":"default"},"#,
            r#""spec":{"replicas":5,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"#,
            r#""spec":{"containers":[{"image":"nginx:1.25","name":"nginx","ports":[{"containerPort":80}]}]}}}}"#,
            "\n"
        )
    );

    // Other managers get the conflict.
    let error = server_side_apply(
        Some("Deployment"),
        Some(&live),
        &web(5),
        "alice",
        false,
        LATER,
    )
    .expect_err("conflict");
    assert!(
        error.to_string().starts_with(
            "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\""
        ),
        "{error}"
    );
    // An apply by another manager leaves the annotation alone.
    let out = server_side_apply(
        Some("Deployment"),
        Some(&live),
        &web(5),
        "alice",
        true,
        LATER,
    )
    .expect("forced");
    assert_eq!(
        out["metadata"]["annotations"],
        live["metadata"]["annotations"]
    );
}

/// Fields changed since the last client-side apply still conflict, and only those are
/// reported; an annotation for another apiVersion, or none, allows nothing.
#[test]
fn ssa_last_applied_exception_covers_only_unchanged_fields() {
    let mut live = client_side_applied(3);
    live["spec"]["paused"] = json!(true);
    live["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.26");
    let mut entries = managed(&live);
    entries[0]["fieldsV1"]["f:spec"]["f:paused"] = json!({});
    live["metadata"]["managedFields"] = Value::Array(entries);
    let mut applied = web(5);
    applied["spec"]["paused"] = json!(false);
    applied["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.27");
    let error = server_side_apply(
        Some("Deployment"),
        Some(&live),
        &applied,
        "kubectl",
        false,
        LATER,
    )
    .expect_err("conflict");
    assert_eq!(
        error.to_string(),
        format!(
            "Apply failed with 2 conflicts: conflicts with \"kubectl-client-side-apply\" using apps/v1 at {NOW}:\n- .spec.paused\n- .spec.template.spec.containers[name=\"nginx\"].image"
        ),
        ".spec.replicas still has its last-applied value"
    );

    let mut other = client_side_applied(3);
    other["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
        json!(web(3).to_string().replace("apps/v1", "apps/v1beta1"));
    let error = server_side_apply(
        Some("Deployment"),
        Some(&other),
        &web(5),
        "kubectl",
        false,
        LATER,
    )
    .expect_err("another apiVersion");
    assert!(error.to_string().ends_with(".spec.replicas"), "{error}");

    // Without managed fields, `before-first-apply` conflicts are forgiven as well; the
    // annotation is not added where there was none.
    let mut unmanaged = client_side_applied(3);
    if let Some(Value::Object(meta)) = unmanaged.get_mut("metadata") {
        meta.shift_remove("managedFields");
    }
    let out = server_side_apply(
        Some("Deployment"),
        Some(&unmanaged),
        &web(5),
        "kubectl",
        false,
        LATER,
    )
    .expect("forgiven");
    assert_eq!(out["spec"]["replicas"], 5);
    let out = server_side_apply(
        Some("Deployment"),
        Some(&stored(web(3))),
        &web(3),
        "kubectl",
        false,
        LATER,
    )
    .expect("same values");
    assert_eq!(out["metadata"].get("annotations"), None);
}
