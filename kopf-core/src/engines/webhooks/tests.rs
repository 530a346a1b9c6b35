//! The webhook server over real HTTPS: what it answers, and its certificate reloads.

use std::net::{IpAddr, Ipv4Addr};

use base64::Engine as _;
use http_body_util::BodyExt as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use super::*;
use crate::aiokits::tls::Identity;

const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Echoes what the server passed on: the handler id, the body, and whether a peer certificate
/// came.
fn echo() -> Review {
    Arc::new(|call: WebhookRequest| {
        Box::pin(async move {
            let body: Value = serde_json::from_slice(&call.body).unwrap_or(Value::Null);
            WebhookResponse {
                status: StatusCode::OK,
                body: json!({
                    "id": call.handler_id,
                    "body": body,
                    "peer": call.peer_certificate.is_some(),
                    "agent": call.headers.get("user-agent").and_then(|v| v.to_str().ok()),
                }),
            }
        })
    })
}

/// One HTTPS request to `url` (`https://host:port/path`), trusting only `ca_pem`; the status
/// and the JSON answer, or why the call failed (e.g. the certificate is not trusted).
pub(crate) async fn call(
    url: &str,
    ca_pem: &str,
    method: &str,
    body: Value,
) -> Result<(StatusCode, Value), String> {
    call_as(url, ca_pem, method, body, None).await
}

/// [`call`], presenting this client certificate (a chain and its key) if given.
async fn call_as(
    url: &str,
    ca_pem: &str,
    method: &str,
    body: Value,
    identity: Option<Identity>,
) -> Result<(StatusCode, Value), String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("{e}"))?;
    let host = uri
        .host()
        .unwrap_or_default()
        .trim_matches(['[', ']'])
        .to_string();
    let port = uri.port_u16().unwrap_or(443);
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(ca.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let config = rustls::ClientConfig::builder_with_provider(crate::aiokits::tls::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let config = match identity {
        None => config.with_no_client_auth(),
        Some(identity) => config
            .with_client_auth_cert(identity.chain, identity.key)
            .map_err(|e| e.to_string())?,
    };
    let stream = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from(host.clone()).map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, stream)
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
    let request = Request::builder()
        .method(method)
        .uri(uri.path())
        .header("host", format!("{host}:{port}"))
        .header("content-type", "application/json")
        .header("user-agent", "kube-apiserver-admission")
        .header("connection", "close")
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| e.to_string())?;
    let (response, _) = tokio::join!(sender.send_request(request), connection);
    let response = response.map_err(|e| e.to_string())?;
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}

fn url_of(config: &ClientConfig) -> String {
    match &config.target {
        Target::Url(url) => url.clone(),
        Target::Service { .. } => panic!("a URL was expected"),
    }
}

#[tokio::test]
async fn posts_reach_the_review_with_the_handler_id_and_other_calls_get_json_errors() {
    let server = WebhookServer::new().addr(LOCALHOST).path("/hooks");
    let webhooks = Webhooks::start(&server, &ServingSettings::default(), 1, None, None, |_| {
        echo()
    })
    .await
    .unwrap();
    let config = webhooks.client_config().borrow().clone();
    let url = url_of(&config);
    assert_eq!(
        url,
        format!("https://127.0.0.1:{}/hooks", webhooks.address().port())
    );
    let ca = config.ca_bundle.clone().unwrap();

    let review = json!({"kind": "AdmissionReview"});
    let (status, answer) = call(&format!("{url}/check%2Fspec"), &ca, "POST", review.clone())
        .await
        .unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        answer,
        json!({"id": "check/spec", "body": review, "peer": false, "agent": "kube-apiserver-admission"})
    );
    let (_, answer) = call(&url, &ca, "POST", json!({})).await.unwrap();
    assert_eq!(answer["id"], Value::Null, "no id: every handler");
    let client = Identity::generate(&["kube-apiserver".to_string()]).unwrap();
    let (_, answer) = call_as(&url, &ca, "POST", json!({}), Some(client))
        .await
        .unwrap();
    assert_eq!(answer["peer"], true, "a client certificate is passed on");

    let (status, answer) = call(&format!("{url}/check"), &ca, "GET", json!({}))
        .await
        .unwrap();
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(answer["error"], "GET is not allowed; webhooks take POST");
    let elsewhere = url.replace("/hooks", "/other");
    let (status, answer) = call(&elsewhere, &ca, "POST", json!({})).await.unwrap();
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("POST /hooks/<handler-id>")
    );

    webhooks
        .stop(Duration::from_secs(5), &CancellationToken::new())
        .await;
    assert!(
        call(&url, &ca, "POST", json!({})).await.is_err(),
        "nothing listens after the stop"
    );
}

#[tokio::test]
async fn a_generated_certificate_is_announced_with_its_own_ca_whatever_cadata_says() {
    let other = Identity::generate(&["elsewhere".to_string()]).unwrap();
    let server = WebhookServer::new()
        .addr(LOCALHOST)
        .cadata(other.ca_pem.clone());
    let webhooks = Webhooks::start(&server, &ServingSettings::default(), 1, None, None, |_| {
        echo()
    })
    .await
    .unwrap();
    let config = webhooks.client_config().borrow().clone();
    let ca = config.ca_bundle.clone().unwrap();
    assert_ne!(
        ca, other.ca_pem,
        "no other CA issued the generated certificate"
    );
    let answered = call(&url_of(&config), &ca, "POST", json!({})).await;
    assert_eq!(
        answered.map(|(status, _)| status),
        Ok(StatusCode::OK),
        "the announced CA is trusted by the server's certificate"
    );
    webhooks
        .stop(Duration::from_secs(5), &CancellationToken::new())
        .await;
}

/// The operator's error (`OperatorError::Webhooks`) says "cannot serve the admission
/// webhooks: "; these messages follow it, so they do not say it again.
#[tokio::test]
async fn start_errors_name_the_file_or_the_address_without_repeating_the_operators_words() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("tls.crt");
    let server = WebhookServer::new()
        .addr(LOCALHOST)
        .certificate(&missing, dir.path().join("tls.key"));
    let shown = Webhooks::start(&server, &ServingSettings::default(), 1, None, None, |_| {
        echo()
    })
    .await
    .unwrap_err()
    .to_string();
    let expected = format!("cannot read {}: ", missing.display());
    assert!(shown.starts_with(&expected), "{shown}");

    let taken = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let port = taken.local_addr().unwrap().port();
    let server = WebhookServer::new().addr(LOCALHOST).port(port);
    let shown = Webhooks::start(&server, &ServingSettings::default(), 1, None, None, |_| {
        echo()
    })
    .await
    .unwrap_err()
    .to_string();
    let expected = format!("cannot listen on 127.0.0.1:{port}: ");
    assert!(shown.starts_with(&expected), "{shown}");
}

#[tokio::test]
async fn a_review_in_flight_finishes_during_the_stop_and_new_connections_are_refused() {
    let entered = Arc::new(tokio::sync::Notify::new());
    let release = Arc::new(tokio::sync::Notify::new());
    let slow: Review = {
        let (entered, release) = (entered.clone(), release.clone());
        Arc::new(move |_call| {
            let (entered, release) = (entered.clone(), release.clone());
            Box::pin(async move {
                entered.notify_one();
                release.notified().await;
                WebhookResponse {
                    status: StatusCode::OK,
                    body: json!({"finished": true}),
                }
            })
        })
    };
    let server = WebhookServer::new().addr(LOCALHOST);
    let webhooks = Webhooks::start(
        &server,
        &ServingSettings::default(),
        1,
        None,
        None,
        move |_| slow,
    )
    .await
    .unwrap();
    let config = webhooks.client_config().borrow().clone();
    let (url, ca) = (url_of(&config), config.ca_bundle.unwrap());
    let (slow_url, late_url) = (format!("{url}/slow"), format!("{url}/late"));
    let never = CancellationToken::new();
    let in_flight = call(&slow_url, &ca, "POST", json!({}));
    let stopping = async {
        entered.notified().await;
        let stop = webhooks.stop(Duration::from_secs(30), &never);
        tokio::pin!(stop);
        // The stop waits for the review; meanwhile, nothing new is accepted.
        tokio::select! {
            _ = &mut stop => panic!("the stop did not wait for the review in flight"),
            refused = call(&late_url, &ca, "POST", json!({})) => {
                assert!(refused.is_err(), "a new call was accepted during the stop: {refused:?}");
            }
        }
        release.notify_one();
        stop.await
    };
    let (answer, graceful) = tokio::join!(in_flight, stopping);
    assert!(graceful, "nothing had to be aborted");
    assert_eq!(answer.unwrap(), (StatusCode::OK, json!({"finished": true})));
}

/// PEM files of a certificate for 127.0.0.1, issued by a new CA: (cert, key, ca).
fn pem_files() -> (String, String, String) {
    let identity = Identity::generate(&["127.0.0.1".to_string()]).unwrap();
    let pem = |label: &str, der: &[u8]| {
        let body = base64::engine::general_purpose::STANDARD.encode(der);
        format!("-----BEGIN {label}-----\n{body}\n-----END {label}-----\n")
    };
    let key = match &identity.key {
        PrivateKeyDer::Pkcs8(key) => key.secret_pkcs8_der().to_vec(),
        _ => unreachable!("generated as PKCS#8"),
    };
    (
        pem("CERTIFICATE", &identity.chain[0]),
        pem("PRIVATE KEY", &key),
        identity.ca_pem,
    )
}

#[tokio::test]
async fn rewritten_certificate_files_are_served_and_announced() {
    let dir = tempfile::tempdir().unwrap();
    let (certfile, pkeyfile, cafile) = (
        dir.path().join("tls.crt"),
        dir.path().join("tls.key"),
        dir.path().join("ca.crt"),
    );
    let (cert, key, ca) = pem_files();
    for (path, text) in [(&certfile, &cert), (&pkeyfile, &key), (&cafile, &ca)] {
        std::fs::write(path, text).unwrap();
    }
    let server = WebhookServer::new()
        .addr(LOCALHOST)
        .certificate(&certfile, &pkeyfile)
        .cafile(&cafile)
        .cadump(dir.path().join("dumped.pem"))
        .reload_interval(Duration::from_millis(50));
    let dumped = || std::fs::read_to_string(dir.path().join("dumped.pem")).unwrap();
    let webhooks = Webhooks::start(&server, &ServingSettings::default(), 1, None, None, |_| {
        echo()
    })
    .await
    .unwrap();
    let mut configs = webhooks.client_config();
    let first = configs.borrow_and_update().clone();
    assert_eq!(first.ca_bundle.as_deref(), Some(ca.as_str()));
    assert_eq!(
        dumped(),
        ca,
        "the CA bundle is dumped before the start returns"
    );
    let url = url_of(&first);
    call(&url, &ca, "POST", json!({}))
        .await
        .expect("the first certificate is served");

    // A half-written file is not served: the old certificate goes on.
    std::fs::write(&certfile, "-----BEGIN CERTIFICATE-----\n").unwrap();
    let (new_cert, new_key, new_ca) = pem_files();
    std::fs::write(&pkeyfile, &new_key).unwrap();
    std::fs::write(&cafile, &new_ca).unwrap();
    std::fs::write(&certfile, &new_cert).unwrap();
    // The files are not written at once: wait until the new CA verifies the served one.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while call(&url, &new_ca, "POST", json!({})).await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new certificate is not served"
        );
        tokio::time::timeout_at(deadline, configs.changed())
            .await
            .expect("a new client config within the deadline")
            .unwrap();
    }
    let second = configs.borrow_and_update().clone();
    assert_eq!(second.ca_bundle.as_deref(), Some(new_ca.as_str()));
    assert_eq!(dumped(), new_ca, "dumped again before it is announced");
    assert_eq!(url_of(&second), url, "the same port");
    let old = call(&url, &ca, "POST", json!({})).await;
    assert!(old.is_err(), "the old CA no longer verifies: {old:?}");
    webhooks
        .stop(Duration::from_secs(5), &CancellationToken::new())
        .await;
}

#[tokio::test]
async fn with_client_verification_only_certificates_of_the_given_ca_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let apiserver = Identity::generate(&["kube-apiserver".to_string()]).unwrap();
    let cafile = dir.path().join("clients.crt");
    std::fs::write(&cafile, &apiserver.ca_pem).unwrap();
    let server = WebhookServer::new().addr(LOCALHOST).verify_clients(&cafile);
    let webhooks = Webhooks::start(&server, &ServingSettings::default(), 1, None, None, |_| {
        echo()
    })
    .await
    .unwrap();
    let config = webhooks.client_config().borrow().clone();
    let (url, ca) = (url_of(&config), config.ca_bundle.unwrap());

    let (status, answer) = call_as(&url, &ca, "POST", json!({}), Some(apiserver))
        .await
        .expect("a client of the given CA is served");
    assert_eq!((status, &answer["peer"]), (StatusCode::OK, &json!(true)));
    let stranger = Identity::generate(&["stranger".to_string()]).unwrap();
    let refused = call_as(&url, &ca, "POST", json!({}), Some(stranger)).await;
    assert!(
        refused.is_err(),
        "another CA's client is refused: {refused:?}"
    );
    let anonymous = call(&url, &ca, "POST", json!({})).await;
    assert!(
        anonymous.is_err(),
        "a client without a certificate is refused: {anonymous:?}"
    );
    webhooks
        .stop(Duration::from_secs(5), &CancellationToken::new())
        .await;
}

#[tokio::test]
async fn a_review_that_outlives_the_grace_period_is_aborted() {
    let entered = Arc::new(tokio::sync::Notify::new());
    let stuck: Review = {
        let entered = entered.clone();
        Arc::new(move |_call| {
            entered.notify_one();
            Box::pin(std::future::pending())
        })
    };
    let server = WebhookServer::new().addr(LOCALHOST);
    let webhooks = Webhooks::start(
        &server,
        &ServingSettings::default(),
        1,
        None,
        None,
        move |_| stuck,
    )
    .await
    .unwrap();
    let config = webhooks.client_config().borrow().clone();
    let (url, ca) = (url_of(&config), config.ca_bundle.unwrap());
    let never = CancellationToken::new();
    let in_flight = call(&url, &ca, "POST", json!({}));
    let stopping = async {
        entered.notified().await;
        webhooks.stop(Duration::from_millis(100), &never).await
    };
    let (answer, graceful) = tokio::join!(in_flight, stopping);
    assert!(!graceful, "the stuck review was aborted");
    assert!(
        answer.is_err(),
        "no answer from an aborted review: {answer:?}"
    );
    assert_eq!(webhooks.tree.len(), 0, "nothing of the server is left");
}

/// A generated certificate is renewed, on the same CA, before it expires: a client that
/// trusts what was announced at the start is still served after the first certificate's end.
#[tokio::test]
async fn a_generated_certificate_is_renewed_before_it_expires_on_the_same_ca() {
    let validity = Duration::from_secs(3);
    let server = WebhookServer::new()
        .addr(LOCALHOST)
        .certificate_validity(validity);
    let started = std::time::Instant::now();
    let webhooks = Webhooks::start(&server, &ServingSettings::default(), 1, None, None, |_| {
        echo()
    })
    .await
    .unwrap();
    let config = webhooks.client_config().borrow().clone();
    let (url, ca) = (url_of(&config), config.ca_bundle.clone().unwrap());
    call(&url, &ca, "POST", json!({}))
        .await
        .expect("served at the start");
    // Past the end of the first serving certificate (not of its CA, ten times as long).
    tokio::time::sleep_until((started + validity + Duration::from_secs(1)).into()).await;
    let answered = call(&url, &ca, "POST", json!({})).await;
    assert_eq!(
        answered.map(|(status, _)| status),
        Ok(StatusCode::OK),
        "the renewed certificate is served and trusted by the same CA"
    );
    assert_eq!(
        webhooks.client_config().borrow().ca_bundle.as_deref(),
        Some(ca.as_str()),
        "what the cluster trusts did not change"
    );
    webhooks
        .stop(Duration::from_secs(5), &CancellationToken::new())
        .await;
}

/// The client CA file is read again when it changes (Kopf's `verify_cafile`, read once
/// before): clients of the new CA are served, those of the old one refused.
#[tokio::test]
async fn a_changed_client_ca_file_is_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (
        Identity::generate(&["kube-apiserver".to_string()]).unwrap(),
        Identity::generate(&["kube-apiserver".to_string()]).unwrap(),
    );
    let cafile = dir.path().join("clients.crt");
    std::fs::write(&cafile, &old.ca_pem).unwrap();
    let server = WebhookServer::new()
        .addr(LOCALHOST)
        .verify_clients(&cafile)
        .reload_interval(Duration::from_millis(50));
    let webhooks = Webhooks::start(&server, &ServingSettings::default(), 1, None, None, |_| {
        echo()
    })
    .await
    .unwrap();
    let config = webhooks.client_config().borrow().clone();
    let (url, ca) = (url_of(&config), config.ca_bundle.unwrap());
    let client_of = |identity: &Identity| Identity {
        chain: identity.chain.clone(),
        key: identity.key.clone_key(),
        ca_pem: identity.ca_pem.clone(),
    };
    call_as(&url, &ca, "POST", json!({}), Some(client_of(&old)))
        .await
        .expect("a client of the first CA is served");

    std::fs::write(&cafile, &new.ca_pem).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while call_as(&url, &ca, "POST", json!({}), Some(client_of(&new)))
        .await
        .is_err()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a client of the new CA is never served"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let refused = call_as(&url, &ca, "POST", json!({}), Some(client_of(&old))).await;
    assert!(
        refused.is_err(),
        "the old CA's clients are refused: {refused:?}"
    );
    webhooks
        .stop(Duration::from_secs(5), &CancellationToken::new())
        .await;
}

/// One plain-HTTP POST to `url`: the status and the JSON answer.
async fn post_plain(url: &str, body: Value) -> Result<(StatusCode, Value), String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("{e}"))?;
    let (host, port) = (uri.host().unwrap_or_default(), uri.port_u16().unwrap_or(80));
    let stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
    let request = Request::post(uri.path())
        .header("host", format!("{host}:{port}"))
        .header("connection", "close")
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| e.to_string())?;
    let (response, _) = tokio::join!(sender.send_request(request), connection);
    let response = response.map_err(|e| e.to_string())?;
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}

/// Kopf's `insecure=True`: plain HTTP, `http://` URLs, no certificate made; the cluster is
/// told to trust what `cadata` says (e.g. the CA of a proxy that terminates TLS), and that is
/// what `cadump` writes.
#[tokio::test]
async fn an_insecure_server_serves_plain_http_and_announces_http_urls() {
    let dir = tempfile::tempdir().unwrap();
    let dumped = dir.path().join("ca.pem");
    let server = WebhookServer::new()
        .addr(LOCALHOST)
        .path("/hooks")
        .insecure()
        .cadata("PROXY CA")
        .cadump(&dumped);
    let webhooks = Webhooks::start(&server, &ServingSettings::default(), 1, None, None, |_| {
        echo()
    })
    .await
    .unwrap();
    let config = webhooks.client_config().borrow().clone();
    let url = url_of(&config);
    assert_eq!(
        url,
        format!("http://127.0.0.1:{}/hooks", webhooks.address().port())
    );
    assert_eq!(config.ca_bundle.as_deref(), Some("PROXY CA"));
    assert_eq!(std::fs::read_to_string(&dumped).unwrap(), "PROXY CA");
    let (status, answer) = post_plain(&format!("{url}/check"), json!({"a": 1}))
        .await
        .expect("answered over plain HTTP");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["id"], "check");
    assert_eq!(answer["body"], json!({"a": 1}));
    webhooks
        .stop(Duration::from_secs(5), &CancellationToken::new())
        .await;

    let bare = WebhookServer::new().addr(LOCALHOST).insecure();
    let webhooks = Webhooks::start(&bare, &ServingSettings::default(), 1, None, None, |_| {
        echo()
    })
    .await
    .unwrap();
    assert_eq!(
        webhooks.client_config().borrow().ca_bundle,
        None,
        "nothing to trust: no caBundle"
    );
    webhooks
        .stop(Duration::from_secs(5), &CancellationToken::new())
        .await;
}

/// An "API server" that presents a self-signed certificate of this common name to whoever
/// connects, until dropped; its URL.
async fn cluster_named(common_name: &str, tasks: &Tasks) -> http::Uri {
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, common_name);
    let key = rcgen::KeyPair::generate().unwrap();
    let certificate = params.self_signed(&key).unwrap();
    let identity = Identity {
        chain: vec![certificate.der().clone()],
        key: PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap(),
        ca_pem: certificate.pem(),
    };
    let config = identity.server_config(None).unwrap();
    let listener = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let token = tasks.token().clone();
    tasks.spawn(async move {
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = token.cancelled() => return,
            };
            if let Ok((stream, _)) = accepted {
                let _ = acceptor.accept(stream).await;
            }
        }
    });
    format!("https://127.0.0.1:{port}").parse().unwrap()
}

/// Kopf's `WebhookAutoServer`: the host is guessed from the API server's certificate (here a
/// minikube's); a host given wins; an unknown cluster gets a plain local server.
#[tokio::test]
async fn an_auto_server_takes_the_host_of_the_cluster_its_api_server_names() {
    let tasks = Tasks::root(1);
    let minikube = cluster_named("minikube", &tasks).await;
    let auto = WebhookServer::auto().addr(LOCALHOST);
    let webhooks = Webhooks::start(
        &auto,
        &ServingSettings::default(),
        1,
        None,
        Some(&minikube),
        |_| echo(),
    )
    .await
    .unwrap();
    let port = webhooks.address().port();
    assert_eq!(
        url_of(&webhooks.client_config().borrow()),
        format!("https://host.minikube.internal:{port}")
    );
    webhooks
        .stop(Duration::from_secs(5), &CancellationToken::new())
        .await;

    let given = auto.clone().host("operator.example");
    let webhooks = Webhooks::start(
        &given,
        &ServingSettings::default(),
        1,
        None,
        Some(&minikube),
        |_| echo(),
    )
    .await
    .unwrap();
    let port = webhooks.address().port();
    assert_eq!(
        url_of(&webhooks.client_config().borrow()),
        format!("https://operator.example:{port}")
    );
    webhooks
        .stop(Duration::from_secs(5), &CancellationToken::new())
        .await;

    let unknown = cluster_named("kube-apiserver", &tasks).await;
    let webhooks = Webhooks::start(
        &auto,
        &ServingSettings::default(),
        1,
        None,
        Some(&unknown),
        |_| echo(),
    )
    .await
    .unwrap();
    let port = webhooks.address().port();
    assert_eq!(
        url_of(&webhooks.client_config().borrow()),
        format!("https://127.0.0.1:{port}"),
        "an unknown cluster: the address"
    );
    webhooks
        .stop(Duration::from_secs(5), &CancellationToken::new())
        .await;
    tasks.cancel(StopReason::OperatorExiting);
    tasks.wait().await;
}

/// Kopf's `password`: an encrypted PKCS#8 `pkeyfile` is decrypted with it; without it, or
/// with a wrong one, the start fails saying so.
#[tokio::test]
async fn an_encrypted_key_file_is_served_with_its_password() {
    let dir = tempfile::tempdir().unwrap();
    let (certfile, pkeyfile) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let (cert, key, ca) = pem_files();
    let body: String = key
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap();
    let info = pkcs8::PrivateKeyInfo::try_from(der.as_slice()).unwrap();
    let params =
        pkcs8::pkcs5::pbes2::Parameters::pbkdf2_sha256_aes256cbc(2048, &[7; 16], &[9; 16]).unwrap();
    let encrypted = info.encrypt_with_params(params, "s3cret").unwrap();
    let encrypted = encrypted
        .to_pem("ENCRYPTED PRIVATE KEY", pkcs8::LineEnding::LF)
        .unwrap();
    std::fs::write(&certfile, &cert).unwrap();
    std::fs::write(&pkeyfile, encrypted.as_bytes()).unwrap();
    let server = WebhookServer::new()
        .addr(LOCALHOST)
        .certificate(&certfile, &pkeyfile)
        .cadata(ca.clone());

    let error = Webhooks::start(&server, &ServingSettings::default(), 1, None, None, |_| {
        echo()
    })
    .await
    .expect_err("no password")
    .to_string();
    assert!(
        error.contains("it is encrypted and no password is given"),
        "{error}"
    );
    let wrong = server.clone().password("wrong");
    let error = Webhooks::start(&wrong, &ServingSettings::default(), 1, None, None, |_| {
        echo()
    })
    .await
    .expect_err("a wrong password")
    .to_string();
    assert!(error.contains("a wrong password?"), "{error}");
    assert!(
        !format!("{wrong:?}").contains("wrong\""),
        "not in Debug: {wrong:?}"
    );

    let webhooks = Webhooks::start(
        &server.password("s3cret"),
        &ServingSettings::default(),
        1,
        None,
        None,
        |_| echo(),
    )
    .await
    .unwrap();
    let url = url_of(&webhooks.client_config().borrow());
    call(&url, &ca, "POST", json!({}))
        .await
        .expect("the decrypted key serves");
    webhooks
        .stop(Duration::from_secs(5), &CancellationToken::new())
        .await;
}
