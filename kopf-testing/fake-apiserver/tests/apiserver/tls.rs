//! HTTPS: the server's own CA is trusted by its client, config and kubeconfig and by no one
//! else; plain HTTP on the TLS port is answered as Go's servers answer it; a required token
//! guards every path but the health checks and `/version`, the control API included
//! (`authentication.rs` has the rest of who may do what).

use futures::StreamExt as _;
use http_body_util::BodyExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kopf_fake_apiserver::{FakeApiServer, TestClient};
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use crate::support::{self, DEADLINE};

async fn tls_server(token: Option<&str>) -> FakeApiServer {
    let builder = FakeApiServer::builder().tls();
    let builder = match token {
        Some(token) => builder.token(token),
        None => builder,
    };
    builder.start().await.expect("the server starts")
}

/// A client of the server with this token (or none), without retries.
fn client_with(server: &FakeApiServer, token: Option<&str>) -> TestClient {
    let mut config = server.config();
    config.auth_info.token = token.map(|token| token.to_string().into());
    config.default_retry = false;
    TestClient::new(kube::Client::try_from(config).expect("a client"))
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

#[tokio::test]
async fn kube_rs_creates_reads_and_watches_over_tls() {
    let server = tls_server(None).await;
    assert!(
        server.url().starts_with("https://127.0.0.1:"),
        "{}",
        server.url()
    );
    let ca = server.ca_pem().expect("a TLS server has a CA");
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");

    let client = server.client();
    let config_maps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let created = config_maps
        .create(&PostParams::default(), &config_map("over-tls"))
        .await
        .expect("created over TLS");
    let version = created.metadata.resource_version.clone().unwrap();
    let mut stream = config_maps
        .watch(&WatchParams::default(), &version)
        .await
        .expect("a watch over TLS")
        .boxed();
    config_maps
        .create(&PostParams::default(), &config_map("watched"))
        .await
        .expect("created");
    let event = tokio::time::timeout(DEADLINE, stream.next())
        .await
        .expect("an event in time")
        .expect("the stream is open")
        .expect("an event");
    match event {
        WatchEvent::Added(object) => assert_eq!(object.metadata.name.as_deref(), Some("watched")),
        other => panic!("expected ADDED, got {other:?}"),
    }
    drop(stream);

    // The certificate names localhost too.
    let mut config = server.config();
    config.cluster_url = server
        .url()
        .replace("127.0.0.1", "localhost")
        .parse()
        .unwrap();
    let by_name: Api<ConfigMap> = Api::default_namespaced(kube::Client::try_from(config).unwrap());
    by_name
        .get("over-tls")
        .await
        .expect("read through localhost");

    drop((config_maps, by_name, client));
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_ca_is_refused_and_the_server_goes_on() {
    let server = tls_server(None).await;
    let mut config = server.config();
    config.root_cert = None; // the system's roots only
    let stranger: Api<ConfigMap> = Api::default_namespaced(kube::Client::try_from(config).unwrap());
    let error = stranger.list(&Default::default()).await.unwrap_err();
    let chain = format!("{:?}", error_chain(&error));
    assert!(
        chain.contains("UnknownIssuer"),
        "refused for its certificate: {chain}"
    );
    let trusted: Api<ConfigMap> = Api::default_namespaced(server.client());
    trusted.list(&Default::default()).await.expect("served");
    server.stop().await;
}

/// Every error in the chain of `error`, for messages.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut chain = vec![error.to_string()];
    let mut source = error.source();
    while let Some(error) = source {
        chain.push(format!("{error:?}"));
        source = error.source();
    }
    chain
}

#[tokio::test]
async fn plain_http_to_the_tls_port_is_answered_400_and_the_server_goes_on() {
    let server = tls_server(Some("s3cret")).await;
    let request = http::Request::get("/api/v1/namespaces")
        .header("host", server.addr().to_string())
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let response = support::send(&server, request).await;
    assert_eq!(response.status(), 400);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(
        String::from_utf8_lossy(&body),
        "Client sent an HTTP request to an HTTPS server.\n",
        "Go's answer, word for word"
    );

    // kube-rs pointed at http:// gets the same 400, as an error it can show.
    let mut config = server.config();
    config.cluster_url = server.url().replace("https://", "http://").parse().unwrap();
    config.default_retry = false;
    let confused: Api<ConfigMap> = Api::default_namespaced(kube::Client::try_from(config).unwrap());
    let error = confused.list(&Default::default()).await.unwrap_err();
    assert!(
        matches!(&error, kube::Error::Api(status) if status.code == 400
            && status.message.contains("Client sent an HTTP request to an HTTPS server")),
        "{error:?}"
    );
    drop(confused);

    let served: Api<ConfigMap> = Api::default_namespaced(server.client());
    served
        .list(&Default::default())
        .await
        .expect("still serving over TLS");
    drop(served);
    support::wait("every connection to close", || async {
        (server.stats().open_connections == 0).then_some(())
    })
    .await;
    server.stop().await;
}

#[tokio::test]
async fn a_required_token_guards_the_control_api_but_not_health_or_version() {
    let server = tls_server(Some("s3cret")).await;
    for (method, path) in [
        ("GET", "/_fake/stats"),
        ("GET", "/_fake/requests"),
        ("POST", "/_fake/faults"),
        ("DELETE", "/_fake/faults"),
        ("GET", "/api/v1/namespaces"),
        ("GET", "/apis"),
    ] {
        let (code, body) = client_with(&server, Some("wrong"))
            .request(method, path, json!({}))
            .await;
        assert_eq!(code, 401, "{method} {path} with a wrong token: {body}");
        assert_eq!(body["reason"], "Unauthorized", "{body}");
        // Without a token, the request is system:anonymous's, whom no role lets in.
        let (code, body) = client_with(&server, None)
            .request(method, path, json!({}))
            .await;
        assert_eq!(code, 403, "{method} {path} with no token: {body}");
        assert_eq!(body["reason"], "Forbidden", "{body}");
    }
    let (code, stats) = client_with(&server, Some("s3cret"))
        .request("GET", "/_fake/stats", json!({}))
        .await;
    assert_eq!(code, 200, "{stats}");
    assert!(stats["open_connections"].as_u64() >= Some(1), "{stats}");

    for path in ["/healthz", "/livez", "/readyz", "/version"] {
        let (code, body) = client_with(&server, None)
            .request("GET", path, json!({}))
            .await;
        assert_eq!(
            code, 200,
            "{path} is open to requests with no token: {body}"
        );
        // Authentication comes first: a token the server does not know is turned away even
        // where none is needed, as on a cluster.
        let (code, body) = client_with(&server, Some("wrong"))
            .request("GET", path, json!({}))
            .await;
        assert_eq!(code, 401, "{path} with a wrong token: {body}");
    }
    server.stop().await;
}

#[tokio::test]
async fn under_rbac_a_service_account_may_not_steer_the_server() {
    let server = FakeApiServer::builder()
        .token("s3cret")
        .enforce_rbac()
        .start()
        .await
        .expect("the server starts");
    let token = server.service_account_token("default", "bot");
    let (code, body) = client_with(&server, Some(&token))
        .request("POST", "/_fake/faults", json!({}))
        .await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body,
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "forbidden: User \"system:serviceaccount:default:bot\" cannot post path \"/_fake/faults\"",
            "reason": "Forbidden",
            "details": {},
            "code": 403,
        })
    );
    let (code, body) = client_with(&server, Some(&token))
        .request("GET", "/version", json!({}))
        .await;
    assert_eq!(code, 200, "{body}");
    server.stop().await;
}
