//! Admission handlers written with the attribute macros, served as the operator's webhook
//! server serves them: an `AdmissionReview` in, the review's response out; and the same
//! reviews answered as Python Kopf answers them (`python/admission_reviews.py`).

use base64::Engine as _;
use kopf::admission::{Operation, Warnings};
use kopf::{AdmissionError, Memo, Patch};
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

/// As in Kopf, `operations` shapes the webhook's rules only: a review of another operation
/// that reaches this webhook runs it too.
#[kopf::on_mutate("kopfexamples", operations = [CREATE])]
fn default_size(spec: &Value, patch: &mut Patch) {
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

#[derive(serde::Deserialize)]
struct UserInfo {
    username: String,
    groups: Vec<String>,
}

/// Denies every request on objects labelled `echo`, saying what it was given.
#[kopf::on_validate("kopfexamples", id = "echo", labels("echo" = present))]
async fn echo(
    operation: String,
    userinfo: UserInfo,
    dryrun: bool,
    sslpeer: Value,
    headers: std::collections::BTreeMap<String, String>,
    subresource: Option<String>,
    old: Option<&Value>,
    diff: &kopf::diff::Diff,
) -> kopf::Result<()> {
    let said = json!({
        "operation": operation, "user": userinfo.username, "groups": userinfo.groups,
        "dryrun": dryrun, "sslpeer": sslpeer, "headers": headers.len(),
        "subresource": subresource, "old": old.is_some(), "diff": diff.len(),
    });
    Err(AdmissionError::new(said.to_string()).code(418).into())
}

/// Kopf's values of a first attempt: admission handlers run once per request.
#[kopf::on_validate("kopfexamples", id = "attempt")]
fn attempt(
    retry: u32,
    started: std::time::SystemTime,
    runtime: std::time::Duration,
) -> kopf::Result<()> {
    let age = started.elapsed().unwrap_or_default();
    let said = json!({
        "retry": retry,
        "fresh": age < std::time::Duration::from_secs(30) && runtime <= age,
    });
    Err(AdmissionError::new(said.to_string()).code(418).into())
}

/// A function in a mutating handler's patch (Kopf's `PatchFn`): applied to the object after
/// the merge changes, and in the response's JSON patch.
#[kopf::on_mutate("kopfexamples", id = "stamp")]
fn stamp(retry: u64, patch: &mut Patch) {
    patch.set("spec.size", 5);
    patch.function(move |body: &mut Value| {
        let size = body["spec"]["size"].clone();
        body["metadata"]["labels"]["stamped"] = json!(format!("{size}/{retry}"));
    });
}

fn registry() -> kopf::registry::Registry {
    kopf::handlers![check_size, default_size, protect, echo]
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
        kopf::testing::review_admission(&registry, server.client(), memo.clone(), body, None).await;
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
        kopf::testing::review_admission(&registry, server.client(), memo.clone(), body, None).await;
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
    let (_, answer) = kopf::testing::review_admission(
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
async fn handlers_get_the_arguments_of_the_review_in_the_forms_they_ask_for() {
    let server = server_with_crd().await;
    let old = example(json!({"size": 1}), json!({"echo": "yes"}));
    let new = example(json!({"size": 2}), json!({"echo": "yes"}));
    let body = review("UPDATE", Some(new), Some(old));
    let (_, answer) = kopf::testing::review_admission(
        &registry(),
        server.client(),
        Memo::new(),
        body,
        Some("echo"),
    )
    .await;
    let status = &answer["response"]["status"];
    assert_eq!(status["code"], 418, "{answer}");
    let said: Value = serde_json::from_str(status["message"].as_str().unwrap()).unwrap();
    assert_eq!(
        said,
        json!({
            "operation": "UPDATE", "user": "alice", "groups": ["system:authenticated"],
            "dryrun": false, "sslpeer": {}, "headers": 0, "subresource": null,
            "old": true, "diff": 1,
        })
    );
}

#[tokio::test]
async fn admission_handlers_get_kopfs_first_attempt_and_patch_functions() {
    let server = server_with_crd().await;
    let object = example(json!({"size": 1}), json!({}));
    let body = review("CREATE", Some(object.clone()), None);
    let registry = kopf::handlers![attempt];
    let (_, answer) =
        kopf::testing::review_admission(&registry, server.client(), Memo::new(), body, None).await;
    let message: Value =
        serde_json::from_str(answer["response"]["status"]["message"].as_str().unwrap()).unwrap();
    assert_eq!(message, json!({"retry": 0, "fresh": true}), "{answer}");

    let body = review("CREATE", Some(object), None);
    let registry = kopf::handlers![stamp];
    let (_, answer) =
        kopf::testing::review_admission(&registry, server.client(), Memo::new(), body, None).await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    let mut operations: Vec<Value> =
        serde_json::from_value(decoded_patch(&answer["response"])).unwrap();
    operations.sort_by_key(|op| op["path"].as_str().unwrap_or_default().to_owned());
    assert_eq!(
        operations,
        [
            json!({"op": "add", "path": "/metadata/labels/stamped", "value": "5/0"}),
            json!({"op": "replace", "path": "/spec/size", "value": 5}),
        ]
    );
}

#[tokio::test]
async fn deletions_reach_validating_handlers_with_the_old_object() {
    let server = server_with_crd().await;
    let registry = registry();
    let old = example(json!({"size": 1}), json!({"protected": "yes"}));
    let body = review("DELETE", None, Some(old));
    let (status, answer) =
        kopf::testing::review_admission(&registry, server.client(), Memo::new(), body, None).await;
    assert_eq!(status, 200);
    assert_eq!(
        answer["response"]["status"],
        json!({"message": "one is protected", "code": 403})
    );
    // Not protected: allowed, and no mutating handler ran (none is only for deletions).
    let old = example(json!({"size": 1}), json!({}));
    let body = review("DELETE", None, Some(old));
    let (_, answer) =
        kopf::testing::review_admission(&registry, server.client(), Memo::new(), body, None).await;
    assert_eq!(
        answer["response"],
        json!({"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": true})
    );
}

#[tokio::test]
async fn requests_that_are_no_reviews_get_4xx() {
    let server = server_with_crd().await;
    let registry = registry();
    let (status, answer) = kopf::testing::review_admission(
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
    let (status, _) = kopf::testing::review_admission(
        &registry,
        server.client(),
        Memo::new(),
        serde_json::to_vec(&unknown).unwrap(),
        None,
    )
    .await;
    assert_eq!(status, 404);
}

/// The reviews of the tests above, answered by kopf-rs and by Python Kopf 1.45.2 with the same
/// handlers: the same HTTP status, decision, message, code, warnings and (decoded) patch.
#[tokio::test]
async fn reviews_are_answered_as_python_kopf_answers_them() {
    let test = "reviews_are_answered_as_python_kopf_answers_them";
    let Some(python) = crate::interop::python(test).await else {
        return;
    };
    let protected = example(json!({"size": 1}), json!({"protected": "yes"}));
    let plain = example(json!({"size": 1}), json!({}));
    let mut beta: Value = serde_json::from_slice(&review(
        "UPDATE",
        Some(example(json!({"size": 5}), json!({}))),
        Some(plain.clone()),
    ))
    .unwrap();
    beta["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let mut anonymous: Value =
        serde_json::from_slice(&review("CREATE", Some(plain.clone()), None)).unwrap();
    anonymous["request"]
        .as_object_mut()
        .unwrap()
        .remove("userInfo");
    let mut unknown: Value =
        serde_json::from_slice(&review("CREATE", Some(plain.clone()), None)).unwrap();
    unknown["request"]["resource"] = json!({"group": "", "version": "v1", "resource": "pods"});
    let parsed = |body: Vec<u8>| -> Value { serde_json::from_slice(&body).unwrap() };
    let cases: Vec<(Value, Option<&str>)> = vec![
        (
            parsed(review(
                "CREATE",
                Some(example(json!({"size": 11}), json!({}))),
                None,
            )),
            None,
        ),
        (
            parsed(review("CREATE", Some(example(json!({}), json!({}))), None)),
            None,
        ),
        (
            parsed(review("CREATE", Some(example(json!({}), json!({}))), None)),
            Some("default_size"),
        ),
        (parsed(review("DELETE", None, Some(protected))), None),
        (parsed(review("DELETE", None, Some(plain.clone()))), None),
        (beta, None),
        (anonymous, None),
        (unknown, None),
        (parsed(review("UPDATE", None, None)), None),
    ];

    let input: String = cases
        .iter()
        .map(|(review, id)| json!({"review": review, "id": id}).to_string() + "\n")
        .collect();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/engine/python/admission_reviews.py");
    let output = tokio::task::spawn_blocking(move || {
        use std::io::Write as _;
        let mut child = std::process::Command::new(python)
            .arg(script)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("python starts");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().expect("python ends")
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let kopf_answers: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(
        kopf_answers.len(),
        cases.len(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let server = server_with_crd().await;
    let memo = Memo::new().with_value("limit", 10);
    for ((review, id), kopf_answer) in cases.iter().zip(kopf_answers) {
        let (status, ours) = kopf::testing::review_admission(
            &registry(),
            server.client(),
            memo.clone(),
            serde_json::to_vec(review).unwrap(),
            *id,
        )
        .await;
        assert_eq!(
            json!(status),
            kopf_answer["status"],
            "{review}: ours {ours}"
        );
        if status != 200 {
            continue;
        }
        let comparable = |answer: &Value| -> Value {
            let mut answer = answer.clone();
            if let Some(encoded) = answer["response"].get("patch").cloned() {
                answer["response"]["patch"] = decoded_patch(&json!({"patch": encoded}));
            }
            answer
        };
        assert_eq!(
            comparable(&ours),
            comparable(&kopf_answer["body"]),
            "{review}"
        );
    }
}

/// A filter that panics (`when`, a label's, an annotation's or a value's callable) fails the
/// review as a call error (HTTP 500, the panic's message said and logged), so that the
/// webhook's failurePolicy decides: the request is never admitted because a filter broke.
/// A handler that panics denies the request, as any failing handler does.
#[tokio::test]
async fn a_panicking_filter_fails_the_review_and_a_panicking_handler_denies_it() {
    use kopf::__private::{MetaFilter, ValueFilter};
    use kopf::registry::AdmissionHandler;
    use kopf::resources::Selector;
    let server = server_with_crd().await;
    let examples = || Selector::new("kopf.dev", "v1", "kopfexamples");
    let allow = |_| async { Ok(None) };
    let filtered: [(&str, AdmissionHandler); 4] = [
        (
            "when",
            AdmissionHandler::validating(examples(), "guard", allow)
                .when(|_| panic!("the when filter broke")),
        ),
        (
            "label",
            AdmissionHandler::validating(examples(), "guard", allow).label(
                "tier",
                MetaFilter::callable(|_| panic!("the label filter broke")),
            ),
        ),
        (
            "annotation",
            AdmissionHandler::validating(examples(), "guard", allow).annotation(
                "note",
                MetaFilter::callable(|_| panic!("the annotation filter broke")),
            ),
        ),
        (
            "value",
            AdmissionHandler::validating(examples(), "guard", allow)
                .field("spec.size")
                .value(ValueFilter::callable(|_| panic!("the value filter broke"))),
        ),
    ];
    for (kind, handler) in filtered {
        // A field filter makes the id `guard/spec.size`, as in Kopf.
        let id = handler.id().to_string();
        let registry = kopf::registry::Registry::new().with(handler);
        let body = review("CREATE", Some(example(json!({"size": 1}), json!({}))), None);
        for hint in [None, Some(id.as_str())] {
            let (status, answer) = kopf::testing::review_admission(
                &registry,
                server.client(),
                Memo::new(),
                body.clone(),
                hint,
            )
            .await;
            assert_eq!(status, 500, "{kind} ({hint:?}): {answer}");
            assert_ne!(answer["response"]["allowed"], true, "{kind}: {answer}");
            let message = answer["message"].as_str().unwrap_or_default();
            assert!(
                message.contains(&format!("the {kind} filter broke")) && message.contains("guard"),
                "{kind}: {answer}"
            );
        }
    }

    let registry = kopf::registry::Registry::new().with(AdmissionHandler::validating(
        examples(),
        "broken",
        |_| async { panic!("the handler broke") },
    ));
    let body = review("CREATE", Some(example(json!({"size": 1}), json!({}))), None);
    let (status, answer) =
        kopf::testing::review_admission(&registry, server.client(), Memo::new(), body, None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    assert_eq!(answer["response"]["status"]["code"], 500, "{answer}");
    let message = answer["response"]["status"]["message"].as_str().unwrap();
    assert!(message.contains("the handler broke"), "{answer}");
    server.stop().await;
}
