//! Reviews in, responses out: what kube-apiserver would receive for each request.

use base64::Engine as _;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::structs::errors::{AdmissionError, PermanentError, TemporaryError};
use crate::structs::filters::{MetaFilter, ValueFilter};
use crate::structs::resources::Selector;

/// A client whose every call fails: admission handlers here make none.
fn client() -> kube::Client {
    let service = crate::clients::auth::tower_service_fn(|_| async {
        Err::<http::Response<kube::client::Body>, _>("no API server in these tests".into())
    });
    kube::Client::new(service, "default")
}

fn examples() -> Selector {
    Selector::new("kopf.dev", "v1", "kopfexamples")
}

fn admission(handlers: impl IntoIterator<Item = AdmissionHandler>) -> Admission {
    let mut registry = Registry::new();
    for handler in handlers {
        registry.add(handler);
    }
    Admission::new(&registry, client(), Tasks::root(2))
}

fn object(labels: Value) -> Value {
    json!({
        "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
        "metadata": {"name": "one", "namespace": "ns", "uid": "u-1", "labels": labels},
        "spec": {"size": 3},
    })
}

/// A v1 review of an operation on a kopfexample.
fn review(operation: &str, object: Option<Value>, old: Option<Value>) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "req-1",
            "kind": {"group": "kopf.dev", "version": "v1", "kind": "KopfExample"},
            "resource": {"group": "kopf.dev", "version": "v1", "resource": "kopfexamples"},
            "name": "one",
            "namespace": "ns",
            "operation": operation,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": object,
            "oldObject": old,
            "dryRun": false,
        },
    })
}

fn create() -> Value {
    review("CREATE", Some(object(json!({"app": "web"}))), None)
}

async fn call(admission: &Admission, body: &Value, id: Option<&str>) -> WebhookResponse {
    admission
        .review(WebhookRequest {
            body: serde_json::to_vec(body).unwrap().into(),
            handler_id: id.map(str::to_owned),
            headers: http::HeaderMap::new(),
            peer_certificate: None,
        })
        .await
}

/// The `response` of a decision (asserting HTTP 200).
async fn decide(admission: &Admission, body: &Value, id: Option<&str>) -> Value {
    let response = call(admission, body, id).await;
    assert_eq!(response.status, http::StatusCode::OK, "{}", response.body);
    response.body["response"].clone()
}

fn decoded_patch(response: &Value) -> Value {
    let encoded = response["patch"].as_str().expect("a patch");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test]
async fn an_allowing_handler_allows_and_the_uid_and_version_are_echoed() {
    let admission = admission([AdmissionHandler::validating(examples(), "ok", |_| async {
        Ok(None)
    })]);
    let response = call(&admission, &create(), None).await;
    assert_eq!(response.status, http::StatusCode::OK);
    assert_eq!(
        response.body,
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": "req-1", "allowed": true},
        })
    );
}

#[tokio::test]
async fn v1beta1_reviews_are_answered_in_v1beta1() {
    let admission = admission([AdmissionHandler::validating(examples(), "ok", |_| async {
        Ok(None)
    })]);
    let mut body = create();
    body["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let response = call(&admission, &body, None).await;
    assert_eq!(response.body["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(response.body["kind"], "AdmissionReview");
    assert_eq!(response.body["response"]["allowed"], true);
}

#[tokio::test]
async fn an_admission_error_denies_with_its_message_and_code() {
    let admission = admission([AdmissionHandler::validating(examples(), "no", |_| async {
        Err(AdmissionError::new("size too big").code(422).into())
    })]);
    let response = decide(&admission, &create(), None).await;
    assert_eq!(
        response,
        json!({"uid": "req-1", "allowed": false, "status": {"message": "size too big", "code": 422}})
    );
}

#[tokio::test]
async fn other_errors_deny_with_500_and_admission_errors_rank_first() {
    let admission = admission([
        AdmissionHandler::validating(examples(), "arbitrary", |_| async {
            Err(crate::structs::errors::Error::msg("disk full"))
        }),
        AdmissionHandler::validating(examples(), "temporary", |_| async {
            Err(TemporaryError::new("later").into())
        }),
        AdmissionHandler::validating(examples(), "permanent", |_| async {
            Err(PermanentError::new("never").into())
        }),
    ]);
    let response = decide(&admission, &create(), None).await;
    assert_eq!(response["status"], json!({"message": "never", "code": 500}));

    let admission = admission_with_second_admission_error();
    let response = decide(&admission, &create(), None).await;
    assert_eq!(response["status"], json!({"message": "first", "code": 500}));
}

fn admission_with_second_admission_error() -> Admission {
    admission([
        AdmissionHandler::validating(examples(), "permanent", |_| async {
            Err(PermanentError::new("permanent").into())
        }),
        AdmissionHandler::validating(examples(), "a1", |_| async {
            Err(AdmissionError::new("first").into())
        }),
        AdmissionHandler::validating(examples(), "a2", |_| async {
            Err(AdmissionError::new("second").code(403).into())
        }),
    ])
}

#[tokio::test]
async fn a_panicking_handler_denies_with_500() {
    let admission = admission([AdmissionHandler::validating(
        examples(),
        "panics",
        |_| async { panic!("boom") },
    )]);
    let response = decide(&admission, &create(), None).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(
        response["status"],
        json!({"message": "the handler panicked: boom", "code": 500})
    );
}

#[tokio::test]
async fn warnings_are_returned_also_on_denial() {
    let admission = admission([
        AdmissionHandler::validating(examples(), "warns", |invocation| async move {
            invocation.warnings().push("size is deprecated");
            Ok(None)
        }),
        AdmissionHandler::validating(examples(), "denies", |invocation| async move {
            invocation.warnings().push("and this is why");
            Err(AdmissionError::new("no").code(400).into())
        }),
    ]);
    let response = decide(&admission, &create(), None).await;
    assert_eq!(response["allowed"], false);
    let mut warnings: Vec<String> = serde_json::from_value(response["warnings"].clone()).unwrap();
    warnings.sort();
    assert_eq!(warnings, ["and this is why", "size is deprecated"]);
}

#[tokio::test]
async fn no_warnings_no_key() {
    let admission = admission([AdmissionHandler::validating(examples(), "ok", |_| async {
        Ok(None)
    })]);
    let response = decide(&admission, &create(), None).await;
    assert!(response.get("warnings").is_none(), "{response}");
}

#[tokio::test]
async fn a_mutating_handlers_patch_comes_back_as_a_json_patch() {
    let admission = admission([AdmissionHandler::mutating(
        examples(),
        "defaults",
        |invocation| async move {
            invocation.patch().set("spec.replicas", 2);
            invocation
                .patch()
                .labels()
                .insert("owner".into(), json!("kopf"));
            invocation.patch().remove("spec.size");
            Ok(None)
        },
    )]);
    let response = decide(&admission, &create(), None).await;
    assert_eq!(response["allowed"], true);
    assert_eq!(response["patchType"], "JSONPatch");
    let patch = decoded_patch(&response);
    let mut patched = object(json!({"app": "web"}));
    json_patch::patch(
        &mut patched,
        &serde_json::from_value::<json_patch::Patch>(patch.clone()).unwrap(),
    )
    .unwrap();
    assert_eq!(patched["spec"], json!({"replicas": 2}), "{patch}");
    assert_eq!(
        patched["metadata"]["labels"],
        json!({"app": "web", "owner": "kopf"})
    );
    assert!(
        patch
            .as_array()
            .unwrap()
            .iter()
            .all(|op| op["op"] != "test"),
        "{patch}"
    );
}

#[tokio::test]
async fn a_mutating_handlers_json_patch_operations_are_applied_too() {
    let admission = admission([AdmissionHandler::mutating(
        examples(),
        "ops",
        |invocation| async move {
            invocation
                .patch()
                .operation(json!({"op": "add", "path": "/spec/items", "value": [1]}));
            Ok(None)
        },
    )]);
    let response = decide(&admission, &create(), None).await;
    assert_eq!(
        decoded_patch(&response),
        json!([{"op": "add", "path": "/spec/items", "value": [1]}])
    );
}

#[tokio::test]
async fn validating_handlers_cannot_patch() {
    let admission = admission([AdmissionHandler::validating(
        examples(),
        "tries",
        |invocation| async move {
            invocation.patch().set("spec.replicas", 2);
            Ok(None)
        },
    )]);
    let response = decide(&admission, &create(), None).await;
    assert_eq!(response, json!({"uid": "req-1", "allowed": true}));
}

#[tokio::test]
async fn a_mutation_that_changes_nothing_sends_no_patch() {
    let admission = admission([AdmissionHandler::mutating(
        examples(),
        "same",
        |invocation| async move {
            invocation.patch().set("spec.size", 3);
            Ok(None)
        },
    )]);
    let response = decide(&admission, &create(), None).await;
    assert!(
        response.get("patch").is_none() && response.get("patchType").is_none(),
        "{response}"
    );
}

/// Records which handlers ran.
fn recording(kind: AdmissionKind, id: &str, ran: &Arc<Mutex<Vec<String>>>) -> AdmissionHandler {
    let ran = ran.clone();
    let name = id.to_owned();
    let function = move |_: Invocation| {
        let ran = ran.clone();
        let name = name.clone();
        async move {
            lock(&ran).push(name);
            Ok(None)
        }
    };
    match kind {
        AdmissionKind::Validating => AdmissionHandler::validating(examples(), id, function),
        AdmissionKind::Mutating => AdmissionHandler::mutating(examples(), id, function),
    }
}

fn sorted(ran: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    let mut ran = std::mem::take(&mut *lock(ran));
    ran.sort();
    ran
}

#[tokio::test]
async fn the_id_in_the_path_selects_only_that_handler() {
    let ran = Arc::default();
    let admission = admission([
        recording(AdmissionKind::Validating, "v", &ran),
        recording(AdmissionKind::Mutating, "m", &ran),
    ]);
    decide(&admission, &create(), Some("m")).await;
    assert_eq!(sorted(&ran), ["m"]);
    decide(&admission, &create(), None).await;
    assert_eq!(sorted(&ran), ["m", "v"]);
    let response = decide(&admission, &create(), Some("nobody")).await;
    assert_eq!(response["allowed"], true);
    assert!(sorted(&ran).is_empty());
}

#[tokio::test]
async fn mutating_handlers_skip_deletions_unless_only_for_them() {
    let ran = Arc::default();
    let admission = admission([
        recording(AdmissionKind::Validating, "v", &ran),
        recording(AdmissionKind::Mutating, "m-all", &ran),
        recording(AdmissionKind::Mutating, "m-delete", &ran).operations([Operation::Delete]),
    ]);
    let deletion = review("DELETE", None, Some(object(json!({}))));
    decide(&admission, &deletion, None).await;
    assert_eq!(sorted(&ran), ["m-delete", "v"]);
}

#[tokio::test]
async fn filters_select_handlers() {
    let ran = Arc::default();
    let admission = admission([
        recording(AdmissionKind::Validating, "web", &ran)
            .label("app", MetaFilter::Value("web".into())),
        recording(AdmissionKind::Validating, "db", &ran)
            .label("app", MetaFilter::Value("db".into())),
        recording(AdmissionKind::Validating, "annotated", &ran)
            .annotation("note", MetaFilter::Present),
        recording(AdmissionKind::Validating, "small", &ran)
            .field("spec.size")
            .value(ValueFilter::Value(json!(3))),
        recording(AdmissionKind::Validating, "big", &ran)
            .field("spec.size")
            .value(ValueFilter::Value(json!(30))),
        recording(AdmissionKind::Validating, "by-alice", &ran)
            .when(|invocation| invocation.userinfo()["username"] == "alice"),
        recording(AdmissionKind::Validating, "dry", &ran).when(Invocation::dryrun),
    ]);
    decide(&admission, &create(), None).await;
    assert_eq!(sorted(&ran), ["by-alice", "small", "web"]);
}

#[tokio::test]
async fn subresources_select_handlers() {
    let ran = Arc::default();
    let admission = admission([
        recording(AdmissionKind::Validating, "main", &ran),
        recording(AdmissionKind::Validating, "status", &ran).subresource("status"),
        recording(AdmissionKind::Validating, "all", &ran).subresource("*"),
    ]);
    let mut status = review("UPDATE", Some(object(json!({}))), Some(object(json!({}))));
    status["request"]["subResource"] = json!("status");
    decide(&admission, &status, None).await;
    assert_eq!(sorted(&ran), ["all", "status"]);
    decide(&admission, &create(), None).await;
    assert_eq!(sorted(&ran), ["all", "main"]);
}

#[tokio::test]
async fn handlers_get_the_reviews_arguments() {
    let seen: Arc<Mutex<Option<Value>>> = Arc::default();
    let kept = seen.clone();
    let admission = admission([AdmissionHandler::validating(
        examples(),
        "sees",
        move |invocation| {
            let kept = kept.clone();
            async move {
                *lock(&kept) = Some(json!({
                    "operation": invocation.operation().map(|o| o.as_str()),
                    "subresource": invocation.subresource(),
                    "dryrun": invocation.dryrun(),
                    "userinfo": invocation.userinfo(),
                    "header": invocation.headers().get("x-request"),
                    "sslpeer": invocation.sslpeer().is_some(),
                    "old": invocation.old(),
                    "new": invocation.new(),
                    "diff": invocation.diff().len(),
                    "name": invocation.name(),
                    "body_size": invocation.body()["spec"]["size"],
                }));
                Ok(None)
            }
        },
    )]);
    let mut body = review(
        "UPDATE",
        Some(object(json!({"app": "web"}))),
        Some(object(json!({}))),
    );
    body["request"]["dryRun"] = json!(true);
    let mut headers = http::HeaderMap::new();
    headers.insert("X-Request", http::HeaderValue::from_static("abc"));
    let response = admission
        .review(WebhookRequest {
            body: serde_json::to_vec(&body).unwrap().into(),
            handler_id: None,
            headers,
            peer_certificate: Some(b"not a certificate".to_vec()),
        })
        .await;
    assert_eq!(response.body["response"]["allowed"], true);
    let seen = lock(&seen).take().expect("the handler ran");
    assert_eq!(seen["operation"], "UPDATE");
    assert_eq!(seen["subresource"], Value::Null);
    assert_eq!(seen["dryrun"], true);
    assert_eq!(seen["userinfo"]["username"], "alice");
    assert_eq!(seen["header"], "abc");
    assert_eq!(seen["sslpeer"], false);
    assert_eq!(seen["old"]["metadata"]["labels"], json!({}));
    assert_eq!(seen["new"]["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(seen["diff"], 1);
    assert_eq!(seen["name"], "one");
    assert_eq!(seen["body_size"], 3);
}

#[tokio::test]
async fn deletions_see_the_old_object_as_the_body() {
    let seen: Arc<Mutex<Option<Value>>> = Arc::default();
    let kept = seen.clone();
    let admission = admission([AdmissionHandler::validating(
        examples(),
        "sees",
        move |invocation| {
            let kept = kept.clone();
            async move {
                *lock(&kept) = Some(json!([
                    invocation.name(),
                    invocation.new(),
                    invocation.old().is_some()
                ]));
                Ok(None)
            }
        },
    )]);
    decide(
        &admission,
        &review("DELETE", None, Some(object(json!({})))),
        None,
    )
    .await;
    assert_eq!(lock(&seen).take(), Some(json!(["one", null, true])));
}

#[tokio::test]
async fn an_unknown_resource_is_404() {
    let admission = admission([AdmissionHandler::validating(
        Selector::new("kopf.dev", "v1", "others"),
        "elsewhere",
        |_| async { Ok(None) },
    )]);
    let response = call(&admission, &create(), None).await;
    assert_eq!(response.status, http::StatusCode::NOT_FOUND);
    assert_eq!(response.body["code"], 404);
    assert!(
        response.body["message"]
            .as_str()
            .unwrap()
            .starts_with("The specified resource has no handlers: "),
        "{}",
        response.body
    );
}

#[tokio::test]
async fn an_ambiguous_resource_is_409() {
    let served = Resource {
        group: "kopf.dev".into(),
        version: "v1".into(),
        plural: "kopfexamples".into(),
        preferred: true,
        ..Resource::default()
    };
    let (_sender, resources) = tokio::sync::watch::channel(vec![served.clone(), served]);
    let admission = admission([AdmissionHandler::validating(examples(), "ok", |_| async {
        Ok(None)
    })])
    .resources(resources);
    let response = call(&admission, &create(), None).await;
    assert_eq!(
        response.status,
        http::StatusCode::CONFLICT,
        "{}",
        response.body
    );
}

#[tokio::test]
async fn names_select_through_the_discovered_resources() {
    let served = Resource {
        group: "kopf.dev".into(),
        version: "v1".into(),
        plural: "kopfexamples".into(),
        singular: "kopfexample".into(),
        kind: "KopfExample".into(),
        short_names: vec!["kex".into()],
        preferred: true,
        ..Resource::default()
    };
    let (_sender, resources) = tokio::sync::watch::channel(vec![served]);
    let admission = admission([AdmissionHandler::validating(
        Selector::named("kex"),
        "by-short-name",
        |_| async { Err(AdmissionError::new("seen").into()) },
    )])
    .resources(resources);
    let response = decide(&admission, &create(), None).await;
    assert_eq!(response["status"]["message"], "seen");
}

/// Malformed requests: each is a 400 with a message saying what is wrong.
#[tokio::test]
async fn malformed_requests_are_400() {
    let admission = admission([AdmissionHandler::validating(examples(), "ok", |_| async {
        Ok(None)
    })]);
    let valid = create();
    let without = |pointer: &str| {
        let mut body = valid.clone();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        body.pointer_mut(parent)
            .unwrap()
            .as_object_mut()
            .unwrap()
            .remove(key);
        body
    };
    let with = |pointer: &str, value: Value| {
        let mut body = valid.clone();
        *body.pointer_mut(pointer).unwrap() = value;
        body
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("not JSON", b"{not json".to_vec()),
        ("empty", Vec::new()),
        ("an array", b"[]".to_vec()),
        (
            "no request",
            serde_json::to_vec(&without("/request")).unwrap(),
        ),
        (
            "request is a string",
            serde_json::to_vec(&with("/request", json!("x"))).unwrap(),
        ),
        (
            "no uid",
            serde_json::to_vec(&without("/request/uid")).unwrap(),
        ),
        (
            "uid a number",
            serde_json::to_vec(&with("/request/uid", json!(1))).unwrap(),
        ),
        (
            "no resource",
            serde_json::to_vec(&without("/request/resource")).unwrap(),
        ),
        (
            "resource a list",
            serde_json::to_vec(&with("/request/resource", json!([]))).unwrap(),
        ),
        (
            "no plural",
            serde_json::to_vec(&without("/request/resource/resource")).unwrap(),
        ),
        (
            "no operation",
            serde_json::to_vec(&without("/request/operation")).unwrap(),
        ),
        (
            "odd operation",
            serde_json::to_vec(&with("/request/operation", json!("PATCH"))).unwrap(),
        ),
        (
            "no userInfo",
            serde_json::to_vec(&without("/request/userInfo")).unwrap(),
        ),
        (
            "null userInfo",
            serde_json::to_vec(&with("/request/userInfo", Value::Null)).unwrap(),
        ),
        (
            "no objects",
            serde_json::to_vec(&with("/request/object", Value::Null)).unwrap(),
        ),
        (
            "object a string",
            serde_json::to_vec(&with("/request/object", json!("x"))).unwrap(),
        ),
        (
            "dryRun a string",
            serde_json::to_vec(&with("/request/dryRun", json!("yes"))).unwrap(),
        ),
        (
            "other apiVersion",
            serde_json::to_vec(&with("/apiVersion", json!("v1"))).unwrap(),
        ),
        (
            "other kind",
            serde_json::to_vec(&with("/kind", json!("Pod"))).unwrap(),
        ),
    ];
    for (case, body) in cases {
        let response = admission
            .review(WebhookRequest {
                body: body.into(),
                handler_id: None,
                headers: http::HeaderMap::new(),
                peer_certificate: None,
            })
            .await;
        assert_eq!(
            response.status,
            http::StatusCode::BAD_REQUEST,
            "{case}: {}",
            response.body
        );
        assert_eq!(response.body["kind"], "Status", "{case}");
        assert_eq!(response.body["code"], 400, "{case}");
        assert_eq!(response.body["reason"], "BadRequest", "{case}");
    }
    let response = call(&admission, &without("/request/userInfo"), None).await;
    assert_eq!(
        response.body["message"],
        "User info is missing from the admission request."
    );
}

/// Any JSON at any place of a review: an answer, never a panic.
fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-zA-Z]{0,8}".prop_map(Value::from),
        Just(json!("CREATE")),
        Just(json!("DELETE")),
        Just(json!("kopfexamples")),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn no_review_makes_it_panic(
        pointer in prop::sample::select(vec![
            "/request", "/request/uid", "/request/resource", "/request/resource/group",
            "/request/kind", "/request/subResource", "/request/operation",
            "/request/userInfo", "/request/object", "/request/oldObject",
            "/request/object/metadata", "/request/object/metadata/labels",
            "/request/object/spec", "/request/dryRun", "/apiVersion",
        ]),
        value in arbitrary_json(),
        bytes in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let admission = admission([
                AdmissionHandler::validating(examples(), "labels", |_| async { Ok(None) })
                    .label("app", MetaFilter::Present)
                    .field("spec.size"),
                AdmissionHandler::mutating(examples(), "mutates", |invocation| async move {
                    invocation.patch().set("spec.size", 1);
                    Ok(None)
                }),
            ]);
            let mut body = create();
            if let Some(place) = body.pointer_mut(pointer) {
                *place = value;
            }
            let response = call(&admission, &body, None).await;
            prop_assert!(
                [200, 400, 404].contains(&response.status.as_u16()),
                "{} for {}", response.status, body
            );
            let response = admission
                .review(WebhookRequest {
                    body: bytes.into(),
                    handler_id: None,
                    headers: http::HeaderMap::new(),
                    peer_certificate: None,
                })
                .await;
            prop_assert_eq!(response.status, http::StatusCode::BAD_REQUEST);
            Ok(())
        })?;
    }
}

#[tokio::test]
async fn existing_objects_get_their_own_memo_and_new_ones_a_throwaway() {
    let operator = Memo::new().with_value("region", "eu-1");
    let memos = ObjectMemos::default();
    let known = memos.get_or_copy("u-1", &operator);
    known.set("seen", 1);
    let got: Arc<Mutex<Vec<Memo>>> = Arc::default();
    let kept = got.clone();
    let admission = admission([AdmissionHandler::validating(
        examples(),
        "m",
        move |invocation| {
            let kept = kept.clone();
            async move {
                lock(&kept).push(invocation.memo().clone());
                Ok(None)
            }
        },
    )])
    .memo(operator)
    .memos(memos);
    let existing = object(json!({}));
    decide(
        &admission,
        &review("UPDATE", Some(existing.clone()), Some(existing.clone())),
        None,
    )
    .await;
    decide(&admission, &create(), None).await;
    let mut unknown = existing;
    unknown["metadata"]["uid"] = json!("u-2");
    decide(&admission, &review("DELETE", None, Some(unknown)), None).await;
    let got = std::mem::take(&mut *lock(&got));
    assert!(got[0].ptr_eq(&known), "an update gets the object's memo");
    assert!(!got[1].ptr_eq(&known), "a creation gets a throwaway memo");
    assert_eq!(got[1].value("region"), Some(json!("eu-1")));
    assert_eq!(got[1].value("seen"), None);
    assert!(!got[2].ptr_eq(&known));
    assert_eq!(got[2].value("region"), Some(json!("eu-1")));
}

/// The webhook server spawns a task per call: the review must be `Send + 'static`.
#[tokio::test]
async fn reviews_can_be_served_from_any_task() {
    fn send_and_static<T: Send + 'static>(_: &T) {}
    fn shared<T: Send + Sync + Clone + 'static>(_: &T) {}
    let admission = admission([]);
    shared(&admission);
    let request = WebhookRequest {
        body: bytes::Bytes::new(),
        handler_id: None,
        headers: http::HeaderMap::new(),
        peer_certificate: None,
    };
    let serving = async move { admission.review(request).await };
    send_and_static(&serving);
}
