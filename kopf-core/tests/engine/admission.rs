//! Admission handlers written with the attribute macros, served as the operator's webhook
//! server serves them: an `AdmissionReview` in, the review's response out.

use base64::Engine as _;
use kopf::{AdmissionError, Memo, Operation, Patch, Warnings};
use serde_json::{Value, json};

use crate::support::server_with_crd;

#[kopf::on_validate("kopf.dev", "v1", "kopfexamples", operations = [CREATE, UPDATE])]
async fn check_size(
    spec: &Value,
    memo: &Memo,
    warnings: &Warnings,
    userinfo: &Value,
) -> Result<(), AdmissionError> {
    let limit = memo.value("limit").and_then(|v| v.as_i64()).unwrap_or(100);
    if spec["size"].is_null() {
        warnings.push(format!(
            "{} left spec.size out",
            userinfo["username"].as_str().unwrap_or("someone")
        ));
    }
    match spec["size"].as_i64() {
        Some(size) if size > limit => {
            Err(AdmissionError::new(format!("spec.size is at most {limit}")).code(422))
        }
        _ => Ok(()),
    }
}

#[kopf::on_mutate("kopfexamples", operations = [CREATE])]
fn default_size(spec: &Value, patch: &mut Patch, operation: Operation) {
    assert_eq!(operation, Operation::Create);
    if spec["size"].is_null() {
        patch.set("spec.size", 1);
    }
}

#[kopf::on_validate("kopfexamples", id = "protect", labels("protected" = "yes"))]
fn protect(operation: Operation, name: &str) -> kopf::Result<()> {
    if operation == Operation::Delete {
        return Err(AdmissionError::new(format!("{name} is protected"))
            .code(403)
            .into());
    }
    Ok(())
}

fn registry() -> kopf::Registry {
    kopf::handlers![check_size, default_size, protect]
}

fn review(operation: &str, object: Option<Value>, old: Option<Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "kopf.dev", "version": "v1", "kind": "KopfExample"},
            "resource": {"group": "kopf.dev", "version": "v1", "resource": "kopfexamples"},
            "requestKind": {"group": "kopf.dev", "version": "v1", "kind": "KopfExample"},
            "requestResource": {"group": "kopf.dev", "version": "v1", "resource": "kopfexamples"},
            "name": "one",
            "namespace": "default",
            "operation": operation,
            "userInfo": {"username": "alice", "uid": "1", "groups": ["system:authenticated"]},
            "object": object,
            "oldObject": old,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }))
    .unwrap()
}

fn example(spec: Value, labels: Value) -> Value {
    json!({
        "apiVersion": "kopf.dev/v1",
        "kind": "KopfExample",
        "metadata": {"name": "one", "namespace": "default", "labels": labels},
        "spec": spec,
    })
}

fn decoded_patch(response: &Value) -> Value {
    let encoded = response["patch"].as_str().expect("a patch");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test]
async fn admission_handlers_allow_deny_warn_and_default() {
    let server = server_with_crd().await;
    let registry = registry();
    let memo = Memo::new().with_value("limit", 10);

    // Too big: denied with the handler's message and code.
    let body = review(
        "CREATE",
        Some(example(json!({"size": 11}), json!({}))),
        None,
    );
    let (status, answer) =
        kopf::__private::review_admission(&registry, server.client(), memo.clone(), body, None)
            .await;
    assert_eq!(status, 200);
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(
        answer["response"],
        json!({
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "allowed": false,
            "status": {"message": "spec.size is at most 10", "code": 422},
        })
    );

    // No size: allowed with a warning, and defaulted by the mutating handler.
    let body = review("CREATE", Some(example(json!({}), json!({}))), None);
    let (_, answer) =
        kopf::__private::review_admission(&registry, server.client(), memo.clone(), body, None)
            .await;
    let response = &answer["response"];
    assert_eq!(response["allowed"], true, "{answer}");
    assert_eq!(response["warnings"], json!(["alice left spec.size out"]));
    assert_eq!(response["patchType"], "JSONPatch");
    assert_eq!(
        decoded_patch(response),
        json!([{"op": "add", "path": "/spec/size", "value": 1}])
    );

    // Only the handler of the id in the path: the mutating one alone warns of nothing.
    let body = review("CREATE", Some(example(json!({}), json!({}))), None);
    let (_, answer) = kopf::__private::review_admission(
        &registry,
        server.client(),
        memo.clone(),
        body,
        Some("default_size"),
    )
    .await;
    assert!(answer["response"].get("warnings").is_none(), "{answer}");
    assert!(answer["response"]["patch"].is_string(), "{answer}");
}

#[tokio::test]
async fn deletions_reach_validating_handlers_with_the_old_object() {
    let server = server_with_crd().await;
    let registry = registry();
    let old = example(json!({"size": 1}), json!({"protected": "yes"}));
    let body = review("DELETE", None, Some(old));
    let (status, answer) =
        kopf::__private::review_admission(&registry, server.client(), Memo::new(), body, None)
            .await;
    assert_eq!(status, 200);
    assert_eq!(
        answer["response"]["status"],
        json!({"message": "one is protected", "code": 403})
    );
    // Not protected: allowed, and no mutating handler ran (none is only for deletions).
    let old = example(json!({"size": 1}), json!({}));
    let body = review("DELETE", None, Some(old));
    let (_, answer) =
        kopf::__private::review_admission(&registry, server.client(), Memo::new(), body, None)
            .await;
    assert_eq!(
        answer["response"],
        json!({"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": true})
    );
}

#[tokio::test]
async fn requests_that_are_no_reviews_get_4xx() {
    let server = server_with_crd().await;
    let registry = registry();
    let (status, answer) = kopf::__private::review_admission(
        &registry,
        server.client(),
        Memo::new(),
        b"{\"request\": 1".to_vec(),
        None,
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    let mut unknown: Value =
        serde_json::from_slice(&review("CREATE", Some(json!({})), None)).unwrap();
    unknown["request"]["resource"]["resource"] = json!("pods");
    unknown["request"]["resource"]["group"] = json!("");
    let (status, _) = kopf::__private::review_admission(
        &registry,
        server.client(),
        Memo::new(),
        serde_json::to_vec(&unknown).unwrap(),
        None,
    )
    .await;
    assert_eq!(status, 404);
}
