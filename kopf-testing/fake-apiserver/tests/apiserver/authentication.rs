//! Authentication as kube-apiserver does it: a request without credentials is
//! `system:anonymous`, judged by RBAC (never the admin); ServiceAccount tokens are JWTs signed
//! by the server, for an audience, with an expiry, that stop working when their account goes;
//! `TokenRequest`s answer the real shape and refuse malformed bodies with a `400`; the issuer
//! publishes its discovery document and keys.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http_body_util::BodyExt as _;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, ServiceAccount};
use kopf_fake_apiserver::FakeApiServer;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

/// `method path` with this token (or none), without retries: the status code and the body,
/// as JSON when it is.
async fn call(
    server: &FakeApiServer,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, Value) {
    let mut config = server.config();
    config.auth_info.token = token.map(|token| token.to_string().into());
    config.default_retry = false;
    let client = kube::Client::try_from(config).expect("a client");
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(body.as_bytes().to_vec()))
        .expect("a request");
    let response = client.send(request).await.expect("an answer");
    let code = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("the body")
        .to_bytes();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (code, body)
}

/// The claims of a JWT, unverified.
fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("a JWT has a payload");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).expect("base64url")).expect("JSON")
}

/// A `TokenReview` of `token` (for `audiences`, if any), by the admin: its `status`.
async fn review(server: &FakeApiServer, token: &str, audiences: &[&str]) -> Value {
    let mut spec = json!({"token": token});
    if !audiences.is_empty() {
        spec["audiences"] = json!(audiences);
    }
    let review =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec});
    let answer = create(
        &server.client(),
        "/apis/authentication.k8s.io/v1/tokenreviews",
        review,
    )
    .await;
    answer["status"].clone()
}

/// Creates `object` at `path` as the client; the answer.
async fn create(client: &kube::Client, path: &str, object: Value) -> Value {
    let request = http::Request::post(path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&object).unwrap())
        .unwrap();
    client.request(request).await.expect("created")
}

#[tokio::test]
async fn a_request_without_credentials_is_anonymous_and_sees_only_public_info() {
    for server in [
        FakeApiServer::builder()
            .token("s3cret")
            .start()
            .await
            .unwrap(),
        FakeApiServer::builder()
            .enforce_rbac()
            .start()
            .await
            .unwrap(),
    ] {
        let (code, body) = call(&server, "GET", "/api/v1/namespaces", None, "").await;
        assert_eq!(code, 403, "{body}");
        assert_eq!(
            body["message"],
            "namespaces is forbidden: User \"system:anonymous\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
        );
        for (method, path) in [
            ("GET", "/apis"),
            ("GET", "/_fake/stats"),
            ("POST", "/_fake/faults"),
            ("GET", "/readyz/ping"),
        ] {
            let (code, body) = call(&server, method, path, None, "{}").await;
            assert_eq!(code, 403, "{method} {path}: {body}");
            let verb = method.to_ascii_lowercase();
            assert_eq!(
                body["message"],
                format!("forbidden: User \"system:anonymous\" cannot {verb} path \"{path}\""),
            );
        }
        for path in ["/healthz", "/livez", "/readyz", "/version"] {
            let (code, body) = call(&server, "GET", path, None, "").await;
            assert_eq!(code, 200, "{path} is public: {body}");
            // Authentication comes first: a wrong token is turned away even there.
            let (code, body) = call(&server, "GET", path, Some("wrong"), "").await;
            assert_eq!(code, 401, "{path} with a wrong token: {body}");
        }
        let (code, _) = call(&server, "GET", "/api/v1/namespaces", Some("wrong"), "").await;
        assert_eq!(code, 401);

        // Anonymous requests are judged by the roles, as any user's.
        let admin = server.client();
        let open: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": "open"}})).expect("a ConfigMap");
        Api::<ConfigMap>::default_namespaced(admin.clone())
            .create(&PostParams::default(), &open)
            .await
            .unwrap();
        let rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/default";
        create(
            &admin,
            &format!("{rbac}/roles"),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "read-configmaps"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
            }),
        )
        .await;
        create(&admin, &format!("{rbac}/rolebindings"), json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "everyone-reads-configmaps"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-configmaps"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:unauthenticated"}],
        }))
        .await;
        let (code, body) = call(
            &server,
            "GET",
            "/api/v1/namespaces/default/configmaps/open",
            None,
            "",
        )
        .await;
        assert_eq!(code, 200, "{body}");
        drop(admin);
        server.stop().await;
    }
}

#[tokio::test]
async fn without_credentials_configured_every_request_is_the_admin() {
    let server = FakeApiServer::start().await.unwrap();
    let (code, body) = call(&server, "GET", "/api/v1/namespaces", None, "").await;
    assert_eq!(code, 200, "{body}");
    // A token is checked all the same: the admin's (which its client sends) works, another
    // one does not.
    let namespaces: Api<Namespace> = Api::all(server.client());
    namespaces
        .list(&ListParams::default())
        .await
        .expect("the admin's token");
    drop(namespaces);
    let (code, _) = call(&server, "GET", "/api/v1/namespaces", Some("made-up"), "").await;
    assert_eq!(code, 401);
    server.stop().await;
}

#[tokio::test]
async fn service_account_tokens_are_signed_and_end_with_their_account() {
    let server = FakeApiServer::builder()
        .token("s3cret")
        .start()
        .await
        .unwrap();
    let token = server.service_account_token("default", "robot");
    let accounts: Api<ServiceAccount> = Api::default_namespaced(server.client());
    let account = accounts
        .get("robot")
        .await
        .expect("the account was made for the token");
    let uid = account.metadata.uid.clone().unwrap();
    let header: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(token.split('.').next().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["alg"], "ES256");
    let claims = claims(&token);
    assert_eq!(
        claims["iss"],
        "https://kubernetes.default.svc.cluster.local"
    );
    assert_eq!(claims["sub"], "system:serviceaccount:default:robot");
    assert_eq!(
        claims["aud"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );
    assert_eq!(
        claims["kubernetes.io"],
        json!({"namespace": "default", "serviceaccount": {"name": "robot", "uid": uid}})
    );
    for claim in ["exp", "iat", "nbf"] {
        assert!(claims[claim].is_i64(), "{claim}: {claims}");
    }
    assert!(claims["exp"].as_i64() > claims["iat"].as_i64());

    // It verifies with the issuer's published key.
    let (code, keys) = call(&server, "GET", "/openid/v1/jwks", Some(&token), "").await;
    assert_eq!(code, 200, "{keys}");
    let key = &keys["keys"][0];
    assert_eq!(key["kid"], header["kid"]);
    let mut point = vec![4u8];
    for coordinate in ["x", "y"] {
        point.extend(
            URL_SAFE_NO_PAD
                .decode(key[coordinate].as_str().unwrap())
                .unwrap(),
        );
    }
    let (signed, signature) = token.rsplit_once('.').unwrap();
    ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, &point)
        .verify(
            signed.as_bytes(),
            &URL_SAFE_NO_PAD.decode(signature).unwrap(),
        )
        .expect("the token is signed by the published key");
    let (code, discovery) = call(
        &server,
        "GET",
        "/.well-known/openid-configuration",
        Some(&token),
        "",
    )
    .await;
    assert_eq!(code, 200, "{discovery}");
    assert_eq!(discovery["issuer"], claims["iss"]);
    assert_eq!(
        discovery["jwks_uri"],
        format!("{}/openid/v1/jwks", server.url())
    );

    let (code, body) = call(
        &server,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        Some(&token),
        "",
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let status = review(&server, &token, &[]).await;
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(status["user"]["uid"], uid.as_str());
    assert!(
        status["user"]["extra"]["authentication.kubernetes.io/credential-id"][0]
            .as_str()
            .is_some_and(|id| id == format!("JTI={}", claims["jti"].as_str().unwrap())),
        "{status}"
    );

    // Changed claims break the signature; the old guessable tokens are no tokens at all.
    let mut forged_claims = claims.clone();
    forged_claims["sub"] = json!("system:serviceaccount:kube-system:admin");
    let mut parts: Vec<String> = token.split('.').map(String::from).collect();
    parts[1] = URL_SAFE_NO_PAD.encode(forged_claims.to_string());
    let forged = parts.join(".");
    for refused in [forged.as_str(), "kopf-fake-sa.default.robot"] {
        let (code, body) = call(
            &server,
            "GET",
            "/api/v1/namespaces/default/configmaps",
            Some(refused),
            "",
        )
        .await;
        assert_eq!(code, 401, "{refused}: {body}");
    }

    // Deleting the account ends its tokens; a new account of the same name does not revive
    // them.
    accounts
        .delete("robot", &DeleteParams::default())
        .await
        .unwrap();
    let (code, _) = call(
        &server,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        Some(&token),
        "",
    )
    .await;
    assert_eq!(code, 401);
    let status = review(&server, &token, &[]).await;
    assert_eq!(
        status,
        json!({"user": {}, "error": "serviceaccounts \"robot\" not found"})
    );
    accounts
        .create(&PostParams::default(), &account_named("robot"))
        .await
        .unwrap();
    let (code, _) = call(
        &server,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        Some(&token),
        "",
    )
    .await;
    assert_eq!(code, 401);
    let status = review(&server, &token, &[]).await;
    let error = status["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("service account UID (")
            && error.ends_with(&format!("does not match claim ({uid})")),
        "{status}"
    );
    // A token of no authenticator is just not authenticated.
    assert_eq!(review(&server, "made-up", &[]).await, json!({"user": {}}));
    drop(accounts);
    server.stop().await;
}

fn account_named(name: &str) -> ServiceAccount {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

#[tokio::test]
async fn token_requests_answer_the_real_shape_and_refuse_malformed_bodies() {
    let server = FakeApiServer::start().await.unwrap();
    let accounts: Api<ServiceAccount> = Api::default_namespaced(server.client());
    let account = accounts
        .create(&PostParams::default(), &account_named("robot"))
        .await
        .unwrap();
    let request = |seconds: Option<i64>, audiences: &[&str]| TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: seconds,
            audiences: audiences.iter().map(|a| a.to_string()).collect(),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let issued = accounts
        .create_token_request("robot", &PostParams::default(), &request(Some(1200), &[]))
        .await
        .unwrap();
    assert_eq!(issued.metadata.name.as_deref(), Some("robot"));
    assert_eq!(issued.metadata.uid, account.metadata.uid);
    assert!(issued.metadata.creation_timestamp.is_some());
    assert_eq!(issued.spec.expiration_seconds, Some(1200));
    assert_eq!(
        issued.spec.audiences,
        ["https://kubernetes.default.svc.cluster.local"]
    );
    let status = issued.status.unwrap();
    let claims = claims(&status.token);
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        1200
    );
    let expires = serde_json::to_value(&status.expiration_timestamp).unwrap();
    let expires = time::OffsetDateTime::parse(
        expires.as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert_eq!(claims["exp"].as_i64().unwrap(), expires.unix_timestamp());

    // The default is an hour; less than ten minutes is refused, as the real server refuses it.
    let issued = accounts
        .create_token_request("robot", &PostParams::default(), &request(None, &[]))
        .await
        .unwrap();
    assert_eq!(issued.spec.expiration_seconds, Some(3600));
    let error = accounts
        .create_token_request("robot", &PostParams::default(), &request(Some(599), &[]))
        .await
        .unwrap_err();
    match error {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 422);
            assert_eq!(
                status.message,
                "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"
            );
        }
        other => panic!("expected 422, got {other:?}"),
    }
    let path = "/api/v1/namespaces/default/serviceaccounts/robot/token";
    let (_, answer) = call(
        &server,
        "POST",
        path,
        None,
        r#"{"spec":{"expirationSeconds":599}}"#,
    )
    .await;
    assert_eq!(
        answer["details"],
        json!({
            "group": "authentication.k8s.io",
            "kind": "TokenRequest",
            "causes": [{
                "reason": "FieldValueInvalid",
                "message": "Invalid value: 599: may not specify a duration less than 10 minutes",
                "field": "spec.expirationSeconds",
            }],
        }),
        "no name, as Go leaves an empty one out"
    );

    // Malformed bodies are 400 with Go's decoding error, and the server goes on.
    for (body, error) in [
        (
            r#"{"spec":1}"#,
            "json: cannot unmarshal number into Go struct field TokenRequest.spec of type v1.TokenRequestSpec",
        ),
        (
            r#"{"spec":{"expirationSeconds":"1h"}}"#,
            "json: cannot unmarshal string into Go struct field TokenRequestSpec.spec.expirationSeconds of type int64",
        ),
        (
            r#"{"spec":{"expirationSeconds":600.5}}"#,
            "json: cannot unmarshal number 600.5 into Go struct field TokenRequestSpec.spec.expirationSeconds of type int64",
        ),
        (
            r#"{"spec":{"audiences":"vault"}}"#,
            "json: cannot unmarshal string into Go struct field TokenRequestSpec.spec.audiences of type []string",
        ),
        (
            r#"{"metadata":[]}"#,
            "json: cannot unmarshal array into Go struct field TokenRequest.metadata of type v1.ObjectMeta",
        ),
    ] {
        let (code, answer) = call(&server, "POST", path, None, body).await;
        assert_eq!(code, 400, "{body}: {answer}");
        assert_eq!(answer["reason"], "BadRequest");
        assert_eq!(
            answer["message"],
            format!("TokenRequest in version \"v1\" cannot be handled as a TokenRequest: {error}"),
            "{body}"
        );
    }
    let (code, answer) = call(
        &server,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts/ghost/token",
        None,
        "{}",
    )
    .await;
    assert_eq!(code, 404, "{answer}");
    assert_eq!(answer["message"], "serviceaccounts \"ghost\" not found");

    // A token for another audience is no credential for the API, but reviews for its own.
    let vault = accounts
        .create_token_request("robot", &PostParams::default(), &request(None, &["vault"]))
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let (code, _) = call(&server, "GET", "/api/v1/namespaces", Some(&vault), "").await;
    assert_eq!(code, 401);
    let status = review(&server, &vault, &["vault"]).await;
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(status["audiences"], json!(["vault"]));
    let status = review(&server, &vault, &[]).await;
    assert_eq!(
        status["error"],
        "token audiences [\"vault\"] is invalid for the target audiences [\"https://kubernetes.default.svc.cluster.local\"]"
    );
    drop(accounts);
    server.stop().await;
}

#[tokio::test]
async fn a_token_bound_to_a_pod_ends_with_the_pod() {
    let server = FakeApiServer::start().await.unwrap();
    let accounts: Api<ServiceAccount> = Api::default_namespaced(server.client());
    accounts
        .create(&PostParams::default(), &account_named("robot"))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "worker"},
        "spec": {"serviceAccountName": "robot", "containers": [{"name": "c", "image": "app:1"}]},
    }))
    .unwrap();
    let pod = pods.create(&PostParams::default(), &pod).await.unwrap();
    let bound =
        json!({"spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "worker"}}});
    let path = "/api/v1/namespaces/default/serviceaccounts/robot/token";
    let (code, issued) = call(&server, "POST", path, None, &bound.to_string()).await;
    assert_eq!(code, 201, "{issued}");
    let token = issued["status"]["token"].as_str().unwrap().to_string();
    assert_eq!(
        claims(&token)["kubernetes.io"]["pod"],
        json!({"name": "worker", "uid": pod.metadata.uid})
    );
    let status = review(&server, &token, &[]).await;
    assert_eq!(
        status["user"]["extra"]["authentication.kubernetes.io/pod-name"],
        json!(["worker"])
    );
    let (code, _) = call(&server, "GET", "/api/v1/namespaces", Some(&token), "").await;
    assert_eq!(code, 200);
    pods.delete("worker", &DeleteParams::default())
        .await
        .unwrap();
    let (code, _) = call(&server, "GET", "/api/v1/namespaces", Some(&token), "").await;
    assert_eq!(code, 401);
    assert_eq!(
        review(&server, &token, &[]).await["error"],
        "service account token has been invalidated"
    );
    // Only a pod that runs as the account.
    let other: Pod = serde_json::from_value(json!({
        "metadata": {"name": "other"},
        "spec": {"containers": [{"name": "c", "image": "app:1"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &other).await.unwrap();
    let bound =
        json!({"spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "other"}}});
    let (code, answer) = call(&server, "POST", path, None, &bound.to_string()).await;
    assert_eq!(code, 400, "{answer}");
    assert_eq!(
        answer["message"],
        "cannot bind token for serviceaccount \"robot\" to pod running with different serviceaccount name."
    );
    drop((accounts, pods));
    server.stop().await;
}

#[tokio::test]
async fn under_rbac_the_issuer_documents_are_for_service_accounts_and_not_anonymous() {
    let server = FakeApiServer::builder()
        .enforce_rbac()
        .start()
        .await
        .unwrap();
    let token = server.service_account_token("default", "robot");
    for path in ["/.well-known/openid-configuration", "/openid/v1/jwks"] {
        let (code, body) = call(&server, "GET", path, None, "").await;
        assert_eq!(code, 403, "{path}: {body}");
        let (code, body) = call(&server, "GET", path, Some(&token), "").await;
        assert_eq!(code, 200, "{path}: {body}");
    }
    // The account's own rights come from its roles only.
    let namespaces: Api<Namespace> = Api::all(server.client_as_service_account("default", "robot"));
    match namespaces.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403),
        other => panic!("expected 403, got {other:?}"),
    }
    drop(namespaces);
    server.stop().await;
}
