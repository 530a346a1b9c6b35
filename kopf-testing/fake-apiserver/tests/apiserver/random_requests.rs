//! Random requests against one running server: whatever comes, it answers (no dropped
//! connection, no panic, no error of its own) and what it stores stays valid.

use std::sync::OnceLock;

use http::{Method, Request, StatusCode};
use http_body_util::BodyExt as _;
use kopf_fake_apiserver::FakeApiServer;
use proptest::prelude::*;
use serde_json::{Value, json};

/// One server for all cases, on a runtime of its own that keeps serving between them.
fn server() -> &'static (tokio::runtime::Runtime, FakeApiServer) {
    static SERVER: OnceLock<(tokio::runtime::Runtime, FakeApiServer)> = OnceLock::new();
    SERVER.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let server = runtime
            .block_on(FakeApiServer::start())
            .expect("the server starts");
        // Objects for the random requests to hit (most names they pick are these).
        for name in ["a", "b"] {
            let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"x": "y"}});
            let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                "spec": {"selector": {"matchLabels": {"app": name}}, "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "app:1"}]}}}});
            for (path, object) in [
                ("/api/v1/namespaces/default/configmaps", configmap),
                ("/apis/apps/v1/namespaces/default/deployments", deployment),
            ] {
                let (status, _) = runtime
                    .block_on(exchange(&server, Method::POST, path, "application/json", object.to_string().into_bytes()))
                    .expect("an answer");
                assert_eq!(status, StatusCode::CREATED);
            }
        }
        (runtime, server)
    })
}

/// Sends one request on a fresh connection; the status and the body, or why there was none.
async fn exchange(
    server: &FakeApiServer,
    method: Method,
    uri: &str,
    content_type: &str,
    body: Vec<u8>,
) -> Result<(StatusCode, Vec<u8>), String> {
    let stream = tokio::net::TcpStream::connect(server.addr())
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
    let connection = tokio::spawn(connection);
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("host", server.addr().to_string())
        .header("content-type", content_type)
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .map_err(|e| format!("request: {e}"))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("no answer: {e}"))?;
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("the body broke off: {e}"))?
        .to_bytes()
        .to_vec();
    connection.abort();
    Ok((status, bytes))
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z/.~0-9-]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map(
                prop_oneof![
                    Just("metadata".to_string()),
                    Just("name".to_string()),
                    Just("spec".to_string()),
                    Just("data".to_string()),
                    Just("op".to_string()),
                    Just("path".to_string()),
                    Just("from".to_string()),
                    Just("value".to_string()),
                    Just("finalizers".to_string()),
                    Just("ownerReferences".to_string()),
                    "[a-zA-Z]{1,6}",
                ],
                inner,
                0..6,
            )
            .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Bodies: random JSON, objects that are nearly right, and JSON patches (hostile ones too).
fn body() -> impl Strategy<Value = Value> {
    let name = names();
    prop_oneof![
        json_value(),
        (name.clone(), json_value()).prop_map(|(name, data)| json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "finalizers": ["x/y"], "labels": {"a": "b"}},
            "data": data,
        })),
        (name, json_value()).prop_map(|(name, spec)| json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name}, "spec": spec,
        })),
        prop::collection::vec(
            (
                prop_oneof![
                    Just("add"),
                    Just("remove"),
                    Just("replace"),
                    Just("move"),
                    Just("copy"),
                    Just("test")
                ],
                prop_oneof![
                    Just("/data"),
                    Just("/data/x"),
                    Just("/metadata"),
                    Just("/metadata/finalizers/0"),
                    Just("/spec"),
                    Just(""),
                    Just("/"),
                ],
                json_value(),
            ),
            0..50,
        )
        .prop_map(|ops| {
            Value::from(
                ops.into_iter()
                    .map(|(op, path, value)| {
                        json!({"op": op, "path": path, "from": "/data", "value": value})
                    })
                    .collect::<Vec<_>>(),
            )
        }),
    ]
}

/// Names: mostly those of the objects made at the start.
fn names() -> BoxedStrategy<String> {
    prop_oneof![
        3 => Just("a".to_string()),
        2 => Just("b".to_string()),
        1 => "[a-z]{1,3}",
    ]
    .boxed()
}

fn uri() -> impl Strategy<Value = String> {
    let resource = prop_oneof![
        Just("/api/v1/namespaces/default/configmaps"),
        Just("/api/v1/namespaces/other/configmaps"),
        Just("/api/v1/namespaces"),
        Just("/apis/apps/v1/namespaces/default/deployments"),
        Just("/api/v1/namespaces/default/pods"),
        Just("/api/v1/nodes"),
        Just("/apis/batch/v1/namespaces/default/jobs"),
        Just("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"),
        Just("/apis/nope/v1/things"),
        Just("/api/v1/namespaces/default/serviceaccounts"),
    ];
    let name = prop::option::of(names());
    let sub = prop::option::of(prop_oneof![
        Just("status"),
        Just("scale"),
        Just("token"),
        Just("eviction"),
        Just("binding"),
        Just("finalize"),
        Just("bogus"),
    ]);
    let query = prop::collection::vec(
        (
            prop_oneof![
                Just("resourceVersion"),
                Just("resourceVersionMatch"),
                Just("limit"),
                Just("continue"),
                Just("labelSelector"),
                Just("fieldSelector"),
                Just("dryRun"),
                Just("fieldManager"),
                Just("fieldValidation"),
                Just("propagationPolicy"),
                Just("force"),
            ],
            prop_oneof![
                "[0-9]{1,20}".boxed(),
                Just("18446744073709551615".to_string()).boxed(),
                "[a-zA-Z=!,()]{0,8}".boxed(),
                Just("All".to_string()).boxed(),
            ],
        ),
        0..3,
    );
    (resource, name, sub, query).prop_map(|(resource, name, sub, query)| {
        let mut uri = resource.to_string();
        if let Some(name) = name {
            uri.push('/');
            uri.push_str(&name);
            if let Some(sub) = sub {
                uri.push('/');
                uri.push_str(sub);
            }
        }
        let query: Vec<String> = query
            .into_iter()
            .map(|(key, value)| {
                let value: String = form_urlencoded::byte_serialize(value.as_bytes()).collect();
                format!("{key}={value}")
            })
            .collect();
        if !query.is_empty() {
            uri.push('?');
            uri.push_str(&query.join("&"));
        }
        uri
    })
}

/// Errors of the server's own that a real cluster also gives: an object over etcd's limit
/// (`500 etcdserver: request is too large`) and a version from the future (`504`).
fn deliberate(status: StatusCode, body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    (status == StatusCode::INTERNAL_SERVER_ERROR && text.contains("request is too large"))
        || (status == StatusCode::GATEWAY_TIMEOUT && text.contains("Too large resource version"))
}

/// Every stored object of the checked resources has a name, a uid and a resourceVersion,
/// and lists still parse.
async fn state_is_valid(server: &FakeApiServer) -> Result<(), String> {
    for list in [
        "/api/v1/configmaps",
        "/apis/apps/v1/deployments",
        "/api/v1/namespaces",
    ] {
        let (status, body) =
            exchange(server, Method::GET, list, "application/json", Vec::new()).await?;
        if status != StatusCode::OK {
            return Err(format!("GET {list}: {status}"));
        }
        let list: Value = serde_json::from_slice(&body).map_err(|e| format!("a list: {e}"))?;
        for item in list["items"].as_array().into_iter().flatten() {
            let meta = &item["metadata"];
            for field in ["name", "uid", "resourceVersion"] {
                if meta[field].as_str().is_none_or(str::is_empty) {
                    return Err(format!("an object without {field}: {item}"));
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_server_answers_every_request_and_its_state_stays_valid(
        method in prop_oneof![
            Just(Method::GET), Just(Method::POST), Just(Method::PUT),
            Just(Method::PATCH), Just(Method::DELETE),
        ],
        uri in uri(),
        content_type in prop_oneof![
            Just("application/json"),
            Just("application/merge-patch+json"),
            Just("application/strategic-merge-patch+json"),
            Just("application/json-patch+json"),
            Just("application/apply-patch+yaml"),
            Just("application/vnd.kubernetes.protobuf"),
        ],
        body in body(),
    ) {
        let (runtime, server) = server();
        let outcome = runtime.block_on(async {
            let (status, answer) =
                exchange(server, method.clone(), &uri, content_type, body.to_string().into_bytes())
                    .await?;
            if status.is_server_error() && !deliberate(status, &answer) {
                return Err(format!(
                    "{status}: {}", String::from_utf8_lossy(&answer)
                ));
            }
            state_is_valid(server).await
        });
        prop_assert!(outcome.is_ok(), "{method} {uri} ({content_type}) {body}: {outcome:?}");
    }
}
