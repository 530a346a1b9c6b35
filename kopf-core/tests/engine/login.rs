//! Login handlers: the operator's credentials come from them, and a `401` logs in again, for
//! every clone of the operator's client, including the one a handler holds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kopf::login::ConnectionInfo;
use kopf::operator::{Operator, OperatorError};
use kopf::registry::{ChangeHandler, LoginHandler, Registry};
use kopf::{PermanentError, TemporaryError};
use kopf_testing::fixtures::KOPFEXAMPLE_CRD;
use kopf_testing::{FakeApiServer, Fault, OperatorHarness, test_settings};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::{create, examples, wait_object};

/// A server that requires `token` (and so serves TLS).
async fn server_with_token(token: &str) -> FakeApiServer {
    crate::support::apiserver(FakeApiServer::builder().token(token)).await
}

/// The server's address and CA, without credentials: what a login handler would know.
fn connection(server: &FakeApiServer) -> ConnectionInfo {
    ConnectionInfo::new(server.url())
        .ca_data(server.ca_pem().expect("a server with a token serves TLS"))
}

/// A create handler that reads the `default` namespace through its own `client` argument, and
/// stores what it read.
fn reading_create_handler() -> ChangeHandler {
    ChangeHandler::on_create(examples(), "create_fn", |invocation| async move {
        let request = http::Request::get("/api/v1/namespaces/default")
            .body(Vec::new())
            .expect("a request");
        let namespace: Value = invocation.client().request(request).await?;
        Ok(Some(json!({"read": namespace["metadata"]["name"]})))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_credentials_are_used_and_a_401_logs_in_again() {
    let server = server_with_token("secret").await;
    let base = connection(&server);
    let logins = Arc::new(AtomicUsize::new(0));
    let counted = logins.clone();
    let registry = Registry::new()
        .with(LoginHandler::on_login("login_fn", move |_invocation| {
            let login = counted.fetch_add(1, Ordering::SeqCst) + 1;
            // The first credentials are stale: the server refuses them with a real 401.
            let token = if login == 1 { "stale" } else { "secret" };
            let info = base.clone().token(token);
            async move { Ok(Some(info)) }
        }))
        .with(reading_create_handler());
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await;
    assert_eq!(
        logins.load(Ordering::SeqCst),
        2,
        "the refused credentials were replaced at the first 401"
    );
    harness.apply(KOPFEXAMPLE_CRD).await;
    let client = harness.client();

    create(&client, "one", json!({"field": 1})).await;
    wait_object(&harness, "one", "the first object handled", |o| {
        o["status"]["create_fn"]["read"] == "default"
    })
    .await;
    assert_eq!(logins.load(Ordering::SeqCst), 2);

    // Now the server refuses the handler's own request once: the handler's clone of the
    // client logs in again, and its request goes through with the new credentials.
    harness.server().inject(
        Fault::respond(401)
            .verb("get")
            .resource("namespaces")
            .times(1),
    );
    create(&client, "two", json!({"field": 2})).await;
    wait_object(
        &harness,
        "two",
        "the second object handled after a re-login",
        |o| o["status"]["create_fn"]["read"] == "default",
    )
    .await;
    assert_eq!(logins.load(Ordering::SeqCst), 3, "one 401, one more login");
    let refused: Vec<String> = harness
        .server()
        .requests()
        .into_iter()
        .filter(|r| r.code == 401)
        .map(|r| r.resource)
        .collect();
    assert_eq!(
        refused.iter().filter(|r| *r == "namespaces").count(),
        1,
        "the handler's read was refused once, then went through: {refused:?}"
    );

    drop(client);
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_refused_together_log_in_once() {
    let server = server_with_token("secret").await;
    let base = connection(&server);
    let logins = Arc::new(AtomicUsize::new(0));
    let (release, released) = tokio::sync::watch::channel(false);
    let counted = logins.clone();
    let registry = Registry::new()
        .with(LoginHandler::on_login("login_fn", move |_invocation| {
            let login = counted.fetch_add(1, Ordering::SeqCst) + 1;
            let info = base.clone().token("secret");
            let mut released = released.clone();
            async move {
                // The re-login waits until the test saw every request refused.
                if login > 1 {
                    released.wait_for(|r| *r).await?;
                }
                Ok(Some(info))
            }
        }))
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            |invocation| async move {
                let reads = (0..3).map(|_| {
                    let request = http::Request::get("/api/v1/namespaces/default")
                        .body(Vec::new())
                        .expect("a request");
                    invocation.client().request::<Value>(request)
                });
                let read = futures::future::try_join_all(reads).await?;
                Ok(Some(json!({"reads": read.len()})))
            },
        ));
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await;
    harness.apply(KOPFEXAMPLE_CRD).await;
    harness.server().inject(
        Fault::respond(401)
            .verb("get")
            .resource("namespaces")
            .times(3),
    );
    let client = harness.client();
    create(&client, "one", json!({})).await;
    kopf_testing::wait("the three reads refused", || async {
        let refused = harness
            .server()
            .requests()
            .iter()
            .filter(|r| r.code == 401 && r.resource == "namespaces")
            .count();
        (refused == 3).then_some(())
    })
    .await;
    release.send_replace(true);
    wait_object(&harness, "one", "the object handled", |o| {
        o["status"]["create_fn"]["reads"] == 3
    })
    .await;
    assert_eq!(
        logins.load(Ordering::SeqCst),
        2,
        "three requests refused with the same credentials: one login for all"
    );
    drop(client);
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_login_is_retried_then_a_login_without_credentials_stops_the_operator() {
    let server = server_with_token("secret").await;
    let base = connection(&server);
    let attempts = Arc::new(AtomicUsize::new(0));
    let counted = attempts.clone();
    let registry = Registry::new().with(
        LoginHandler::on_login("login_fn", move |_invocation| {
            let attempt = counted.fetch_add(1, Ordering::SeqCst) + 1;
            let base = base.clone();
            async move {
                match attempt {
                    1 => Err(TemporaryError::new("the vault is sealed")
                        .delay(Duration::from_millis(50))
                        .into()),
                    2 => Ok(Some(base.token("secret"))),
                    _ => Err(PermanentError::new("the vault is gone").into()),
                }
            }
        })
        .backoff(Duration::from_millis(50)),
    );
    let harness =
        OperatorHarness::start_on(server, Operator::new(registry).settings(test_settings())).await;
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        2,
        "retried after the temporary error"
    );
    let server_url = harness.server().url().to_string();
    harness.stop().await.expect("a clean stop");

    // A login that gives no credentials: the operator does not start, and says why.
    let registry = Registry::new().with(LoginHandler::on_login(
        "empty_login",
        |_invocation| async move { Ok(None::<ConnectionInfo>) },
    ));
    let stop = CancellationToken::new();
    let stopped = tokio::time::timeout(
        kopf_testing::DEADLINE,
        Operator::new(registry).settings(test_settings()).run(stop),
    )
    .await
    .expect("the operator stops by itself");
    let error = stopped.expect_err("no credentials, no operator");
    assert!(matches!(error, OperatorError::Login(_)), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("empty_login: no credentials"),
        "the message names the handler: {message}"
    );

    // Credentials that cannot make a client: a clear error too.
    let registry = Registry::new().with(LoginHandler::on_login(
        "bad_url",
        |_invocation| async move { Ok(Some(ConnectionInfo::new("not a url"))) },
    ));
    let error = Operator::new(registry)
        .settings(test_settings())
        .run(CancellationToken::new())
        .await
        .expect_err("invalid credentials, no operator");
    assert!(
        error.to_string().contains("invalid"),
        "the message says what is wrong: {error}"
    );
    drop(server_url);
}

#[kopf::on_login(retries = 3, backoff = 0.05)]
async fn macro_login(
    retry: u32,
    memo: &kopf::Memo,
    activity: kopf::activities::Activity,
) -> kopf::Result<ConnectionInfo> {
    // As Kopf passes `activity=Activity.AUTHENTICATION` to login handlers.
    if activity != kopf::activities::Activity::Authentication {
        return Err(
            kopf::PermanentError::new(format!("a login in the {activity} activity")).into(),
        );
    }
    let url: String = memo
        .value_as("url")
        .expect("the test puts the url in the memo");
    let ca: String = memo
        .value_as("ca")
        .expect("the test puts the CA in the memo");
    if retry == 0 {
        return Err(TemporaryError::new("not yet")
            .delay(std::time::Duration::from_millis(50))
            .into());
    }
    Ok(ConnectionInfo::new(url).ca_data(ca).token("secret"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_on_login_attribute_gives_the_credentials() {
    let server = server_with_token("secret").await;
    let memo = kopf::Memo::new()
        .with_value("url", server.url())
        .with_value("ca", server.ca_pem());
    let registry = kopf::handlers![macro_login].with(reading_create_handler());
    let harness = OperatorHarness::start_on(
        server,
        Operator::new(registry).settings(test_settings()).memo(memo),
    )
    .await;
    harness.apply(KOPFEXAMPLE_CRD).await;
    let client = harness.client();
    create(&client, "one", json!({})).await;
    wait_object(&harness, "one", "the object handled", |o| {
        o["status"]["create_fn"]["read"] == "default"
    })
    .await;
    drop(client);
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logged_in_operator_leaves_no_connection_open_when_it_stops() {
    let server = server_with_token("secret").await;
    let base = connection(&server);
    let logins = Arc::new(AtomicUsize::new(0));
    let counted = logins.clone();
    let registry = Registry::new()
        .with(LoginHandler::on_login("login_fn", move |_invocation| {
            let login = counted.fetch_add(1, Ordering::SeqCst) + 1;
            let token = if login == 1 { "stale" } else { "secret" };
            let info = base.clone().token(token);
            async move { Ok(Some(info)) }
        }))
        .with(reading_create_handler());
    let operator = Operator::new(registry).settings(test_settings());
    let ready = operator.ready();
    let stop = CancellationToken::new();
    let running = tokio::spawn(operator.run(stop.clone()));
    tokio::time::timeout(kopf_testing::DEADLINE, ready.wait())
        .await
        .expect("the operator gets ready");
    kopf_testing::wait("the CRDs watched with the new credentials", || async {
        (server.stats().open_watches == 1).then_some(())
    })
    .await;
    assert_eq!(logins.load(Ordering::SeqCst), 2, "two clients were made");
    stop.cancel();
    tokio::time::timeout(kopf_testing::DEADLINE, running)
        .await
        .expect("the operator stops")
        .expect("its task did not panic")
        .expect("a clean stop");
    kopf_testing::wait("every connection of the operator closed", || async {
        (server.stats().open_connections == 0).then_some(())
    })
    .await;
    server.stop().await;
}

/// The examples' names (all under one key), which the login handler below reads.
#[kopf::index("kopf.dev", "v1", "kopfexamples")]
fn login_names(name: String) -> (String, String) {
    ("all".to_string(), name)
}

/// Changes a setting that the login handler then reads at its re-logins.
#[kopf::on_startup]
async fn set_instance(settings: &mut kopf::Settings) {
    settings.posting.reporting_instance = "after-startup".to_string();
}

/// Logs in with the connection in the operator's memo; records the settings and the index it
/// was given.
#[kopf::on_login]
async fn attributed_login(
    settings: &kopf::Settings,
    login_names: &kopf::Index<String, String>,
    memo: &kopf::Memo,
) -> Option<ConnectionInfo> {
    let seen = memo.get::<crate::support::Calls>()?;
    seen.record(json!({
        "instance": settings.posting.reporting_instance,
        "indexed": login_names.get("all").map_or(0, |store| store.len()),
    }));
    memo.get::<ConnectionInfo>().map(|info| (*info).clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_handlers_get_the_settings_and_the_indexes_as_they_are() {
    let server = server_with_token("secret").await;
    let logins = crate::support::Calls::default();
    let memo = kopf::Memo::new()
        .with(connection(&server).token("secret"))
        .with(logins.clone());
    let registry =
        kopf::handlers![login_names, set_instance, attributed_login].with(reading_create_handler());
    let operator = Operator::new(registry).settings(test_settings()).memo(memo);
    let harness = OperatorHarness::start_on(server, operator).await;
    harness.apply(KOPFEXAMPLE_CRD).await;
    let client = harness.client();
    create(&client, "one", json!({"field": 1})).await;
    wait_object(&harness, "one", "the first object handled", |o| {
        o["status"]["create_fn"]["read"] == "default"
    })
    .await;
    // The handler's own request is refused once: the re-login sees the settings that the
    // startup handler left, and the index as it is.
    harness.server().inject(
        Fault::respond(401)
            .verb("get")
            .resource("namespaces")
            .times(1),
    );
    create(&client, "two", json!({"field": 2})).await;
    wait_object(&harness, "two", "the second object handled", |o| {
        o["status"]["create_fn"]["read"] == "default"
    })
    .await;
    drop(client);
    harness.stop().await.expect("a clean stop");
    assert_eq!(
        logins.all(),
        [
            // The first login comes before anything else: the settings as given, no index
            // filled yet.
            json!({"instance": test_settings().posting.reporting_instance, "indexed": 0}),
            json!({"instance": "after-startup", "indexed": 2}),
        ]
    );
}
