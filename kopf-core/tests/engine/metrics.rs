//! The metrics endpoint: scraped over HTTP, its counters match the handlers that ran and the
//! requests the operator sent.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kopf::TemporaryError;
use kopf::operator::Operator;
use kopf::registry::{ChangeHandler, Registry};
use kopf_testing::{Fault, OperatorHarness, SentRequest, test_settings, wait};
use serde_json::json;

use crate::support::{
    create, examples, metrics_url, samples, scrape, server_with_crd, wait_object,
};

/// The Kubernetes verb of a request the operator sent, as the API server names it.
fn verb(request: &SentRequest) -> &'static str {
    let watching = request
        .query
        .split('&')
        .any(|p| p == "watch=true" || p == "watch=1");
    match request.method.as_str() {
        "GET" if watching => "watch",
        "GET" if request.name.is_none() && request.resource.is_some() => "list",
        "GET" => "get",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" if request.name.is_none() => "deletecollection",
        "DELETE" => "delete",
        _ => "other",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scraped_counters_match_the_handlers_that_ran_and_the_requests_sent() {
    let failed_once = Arc::new(AtomicBool::new(false));
    let registry = Registry::new()
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            |_| async { Ok(Some(json!({"message": "created"}))) },
        ))
        .with(ChangeHandler::on_create(
            examples(),
            "flaky_fn",
            move |_| {
                let first = !failed_once.swap(true, Ordering::SeqCst);
                async move {
                    if first {
                        return Err(TemporaryError::new("not yet")
                            .delay(Duration::from_millis(100))
                            .into());
                    }
                    Ok(Some(json!("done")))
                }
            },
        ));
    let server = server_with_crd().await;
    // The operator's first listing of the objects fails, to see a code other than 200.
    server.inject(
        Fault::respond(500)
            .verb("list")
            .resource("kopfexamples.kopf.dev")
            .times(1),
    );
    let operator = Operator::new(registry)
        .settings(test_settings())
        .metrics("http://127.0.0.1:0/metrics");
    let endpoint = operator.metrics_endpoint();
    let harness = OperatorHarness::start_on(server, operator).await;
    let url = metrics_url(&endpoint).await;
    let client = harness.client();
    for name in ["one", "two", "three"] {
        create(&client, name, json!({"field": name})).await;
    }
    for name in ["one", "two", "three"] {
        wait_object(&harness, name, "both handlers done", |o| {
            o["status"]["create_fn"]["message"] == "created" && o["status"]["flaky_fn"] == "done"
        })
        .await;
    }

    let (code, text) = scrape(&url).await;
    assert_eq!(code, 200, "{text}");
    let scraped = samples(&text);
    let value = |series: &str| scraped.get(series).copied().unwrap_or(0.0);
    let handlers = [
        (
            r#"kopf_handler_invocations_total{handler="create_fn",outcome="success"}"#,
            3.0,
        ),
        (
            r#"kopf_handler_invocations_total{handler="create_fn",outcome="retry"}"#,
            0.0,
        ),
        (
            r#"kopf_handler_invocations_total{handler="flaky_fn",outcome="success"}"#,
            3.0,
        ),
        (
            r#"kopf_handler_invocations_total{handler="flaky_fn",outcome="retry"}"#,
            1.0,
        ),
        (
            r#"kopf_handler_invocations_total{handler="flaky_fn",outcome="failure"}"#,
            0.0,
        ),
        (r#"kopf_handler_errors_total{handler="flaky_fn"}"#, 1.0),
        (r#"kopf_handler_retries_total{handler="flaky_fn"}"#, 1.0),
        (
            r#"kopf_handler_duration_seconds_count{handler="create_fn"}"#,
            3.0,
        ),
        (
            r#"kopf_handler_duration_seconds_count{handler="flaky_fn"}"#,
            4.0,
        ),
    ];
    for (series, expected) in handlers {
        assert_eq!(value(series), expected, "{series} in:\n{text}");
    }
    let resource = "kopfexamples.v1.kopf.dev";
    assert_eq!(
        value(&format!(
            r#"kopf_watch_events_total{{resource="{resource}",type="ADDED"}}"#
        )),
        3.0,
        "{text}"
    );
    assert!(
        value(&format!(
            r#"kopf_watch_starts_total{{resource="{resource}"}}"#
        )) >= 1.0
    );
    assert_eq!(
        value(r#"kopf_api_requests_total{verb="list",code="500"}"#),
        1.0,
        "the injected failure is counted with its code:\n{text}"
    );

    // Every request the operator sent is counted once, by verb (the operator may still be
    // writing its last patches: wait until both sides agree).
    wait(
        "the API request counts to match what the operator sent",
        || async {
            let (_, text) = scrape(&url).await;
            let mut counted: BTreeMap<String, f64> = BTreeMap::new();
            for (series, value) in samples(&text) {
                if let Some(labels) = series.strip_prefix("kopf_api_requests_total{verb=\"") {
                    let verb = labels.split('"').next().unwrap_or_default().to_string();
                    *counted.entry(verb).or_default() += value;
                }
            }
            let mut sent: BTreeMap<String, f64> = BTreeMap::new();
            for request in harness.sent() {
                *sent.entry(verb(&request).to_string()).or_default() += 1.0;
            }
            (counted == sent && counted.get("patch").copied().unwrap_or(0.0) >= 3.0).then_some(())
        },
    )
    .await;

    // Idle workers end (the test settings' idle timeout is short), and nothing stays queued.
    wait("the workers to idle out", || async {
        let scraped = samples(&scrape(&url).await.1);
        let gauge = |name: &str| {
            scraped
                .get(&format!(r#"{name}{{resource="{resource}"}}"#))
                .copied()
        };
        (gauge("kopf_workers") == Some(0.0) && gauge("kopf_queue_depth") == Some(0.0)).then_some(())
    })
    .await;

    let (code, _) = scrape(&url.replace("/metrics", "/elsewhere")).await;
    assert_eq!(code, 404);
    drop(client);
    harness.stop().await.expect("a clean stop");
    assert!(
        tokio::net::TcpStream::connect(
            url.trim_start_matches("http://")
                .trim_end_matches("/metrics")
        )
        .await
        .is_err(),
        "the endpoint is gone after the stop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_metrics_url_stops_the_operator_with_a_clear_error() {
    let server = server_with_crd().await;
    let error = Operator::new(Registry::new())
        .client(server.client())
        .metrics("https://127.0.0.1:0/metrics")
        .run(tokio_util::sync::CancellationToken::new())
        .await
        .expect_err("https is not served");
    let message = error.to_string();
    assert!(
        message.contains("expected http://HOST:PORT/PATH"),
        "{message}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_operators_in_one_process_count_apart() {
    let mut running = Vec::new();
    for id in ["first_fn", "second_fn"] {
        let registry = Registry::new().with(ChangeHandler::on_create(examples(), id, |_| async {
            Ok(None)
        }));
        let operator = Operator::new(registry)
            .settings(test_settings())
            .metrics("http://127.0.0.1:0/metrics");
        let endpoint = operator.metrics_endpoint();
        let harness = OperatorHarness::start_on(server_with_crd().await, operator).await;
        let url = metrics_url(&endpoint).await;
        create(&harness.client(), "one", json!({})).await;
        running.push((id, harness, url));
    }
    for (id, _, url) in &running {
        let series =
            format!(r#"kopf_handler_invocations_total{{handler="{id}",outcome="success"}}"#);
        wait("the operator's own handler counted", || async {
            let (_, text) = scrape(url).await;
            let scraped = samples(&text);
            let others = scraped
                .keys()
                .filter(|s| s.starts_with("kopf_handler_invocations_total") && !s.contains(id))
                .count();
            assert_eq!(
                others, 0,
                "{url} counts another operator's handlers:\n{text}"
            );
            (scraped.get(&series) == Some(&1.0)).then_some(())
        })
        .await;
    }
    for (_, harness, _) in running {
        harness.stop().await.expect("a clean stop");
    }
}

/// Sub-handlers' ids are often made from data (one per item of a list): their attempts are
/// counted under the id of the handler that registered them, so the metrics keep a bounded
/// number of series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_handlers_are_counted_under_their_parent() {
    let parent_calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = parent_calls.clone();
    let registry = Registry::new().with(ChangeHandler::on_create(
        examples(),
        "create_fn",
        move |invocation| {
            // The parent is called again in each cycle that runs one of its sub-handlers.
            counted.fetch_add(1, Ordering::SeqCst);
            async move {
                for item in 0..3 {
                    invocation
                        .subhandlers()
                        .add(format!("item-{item}"), |_| async { Ok(None) });
                }
                Ok(Some(json!("parent done")))
            }
        },
    ));
    let operator = Operator::new(registry)
        .settings(test_settings())
        .metrics("http://127.0.0.1:0/metrics");
    let endpoint = operator.metrics_endpoint();
    let harness = OperatorHarness::start_on(server_with_crd().await, operator).await;
    let url = metrics_url(&endpoint).await;
    create(&harness.client(), "items", json!({})).await;
    wait_object(&harness, "items", "the parent done", |o| {
        o["status"]["create_fn"] == "parent done"
    })
    .await;
    let (_, text) = scrape(&url).await;
    assert!(
        !text.contains("create_fn/item-"),
        "sub-handlers' ids are not label values:\n{text}"
    );
    let scraped = samples(&text);
    let expected = (parent_calls.load(Ordering::SeqCst) + 3) as f64;
    assert_eq!(
        scraped.get(r#"kopf_handler_invocations_total{handler="create_fn",outcome="success"}"#),
        Some(&expected),
        "the parent's calls and its three sub-handlers':\n{text}"
    );
    harness.stop().await.expect("a clean stop");
}
