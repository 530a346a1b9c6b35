//! Kopf's log lines that users rely on: each handler's outcome, and each cause once handled.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use kopf::registry::{ChangeHandler, EventHandler, Registry};
use kopf::{PermanentError, TemporaryError};
use kopf_testing::{DEADLINE, OperatorHarness};
use serde_json::json;

use crate::support::{create, delete, examples, patch, server_with_crd, wait_gone};

/// Everything logged in this test binary, from the first call on (other tests' lines too:
/// the test picks its object's lines by name).
pub(crate) fn logs() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let writer = Buffer(logs.clone());
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter("info")
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("no other global subscriber");
        logs
    })
}

#[derive(Clone)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buffer {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The logged lines about the object `name`.
pub(crate) fn lines_of(name: &str) -> Vec<String> {
    let logs = logs().lock().unwrap();
    String::from_utf8_lossy(&logs)
        .lines()
        .filter(|line| line.contains(&format!("\"{name}\"")))
        .map(String::from)
        .collect()
}

/// Waits until a line about `name` contains `text` (as long as any condition: [`DEADLINE`]).
pub(crate) async fn wait_line(name: &str, text: &str) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !lines_of(name).iter().any(|line| line.contains(text)) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no line {text:?} about {name} in:\n{}",
            lines_of(name).join("\n")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kopfs_log_lines_for_handlers_and_causes() {
    logs();
    let name = "log-lines";
    let registry = Registry::new()
        .with(ChangeHandler::on_create(
            examples(),
            "create_fn",
            |_| async { Ok(None) },
        ))
        .with(ChangeHandler::on_update(
            examples(),
            "flaky_fn",
            |inv| async move {
                if inv.retry() == 0 {
                    return Err(TemporaryError::new("not yet")
                        .delay(Duration::from_millis(50))
                        .into());
                }
                Ok(None)
            },
        ))
        .with(ChangeHandler::on_update(
            examples(),
            "broken_fn",
            |_| async { Err(PermanentError::new("no way").into()) },
        ))
        .with(ChangeHandler::on_delete(
            examples(),
            "delete_fn",
            |_| async { Ok(None) },
        ))
        .with(EventHandler::on_event(examples(), "event_fn", |_| async {
            Ok(None)
        }));
    let server = server_with_crd().await;
    let harness = OperatorHarness::start_on(
        server,
        kopf::operator::Operator::new(registry).settings(kopf_testing::test_settings()),
    )
    .await;
    let client = harness.client();

    create(&client, name, json!({"field": "a"})).await;
    wait_line(name, "Creation is processed: 1 succeeded; 0 failed.").await;
    patch(&client, name, json!({"spec": {"field": "b"}})).await;
    wait_line(name, "Updating is processed: 1 succeeded; 1 failed.").await;
    delete(&client, name).await;
    wait_gone(&harness, name).await;
    wait_line(name, "Deletion is processed: 1 succeeded; 0 failed.").await;
    harness.stop().await.expect("a clean stop");

    let lines = lines_of(name);
    let find = |text: &str| {
        lines
            .iter()
            .find(|line| line.contains(text))
            .unwrap_or_else(|| panic!("no line {text:?} in:\n{}", lines.join("\n")))
            .clone()
    };
    let succeeded = find("Handler 'create_fn' succeeded.");
    assert!(succeeded.contains(" INFO "), "{succeeded}");
    assert!(
        succeeded.contains("handler.id=create_fn"),
        "the handler's span: {succeeded}"
    );
    let temporary = find("Handler 'flaky_fn' failed temporarily: not yet");
    assert!(temporary.contains(" ERROR "), "{temporary}");
    find("Handler 'flaky_fn' succeeded.");
    let permanent = find("Handler 'broken_fn' failed permanently: no way");
    assert!(permanent.contains(" ERROR "), "{permanent}");
    find("Handler 'delete_fn' succeeded.");
    find("Handler 'event_fn' succeeded.");
    // Each cause is reported once, when it is fully handled.
    for cause in ["Creation", "Updating", "Deletion"] {
        let processed = lines
            .iter()
            .filter(|line| line.contains(&format!("{cause} is processed:")))
            .count();
        assert_eq!(processed, 1, "{cause}:\n{}", lines.join("\n"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_and_error_modes_are_logged_in_kopfs_words() {
    let name = "worded";
    let registry = Registry::new()
        .with(
            ChangeHandler::on_create(examples(), "limited_fn", |_| async {
                Err(kopf::Error::msg("boom"))
            })
            .retries(1),
        )
        .with(
            ChangeHandler::on_create(examples(), "ignoring_fn", |_| async {
                Err(kopf::Error::msg("meh"))
            })
            .errors(kopf::registry::ErrorsMode::Ignored),
        )
        .with(
            ChangeHandler::on_create(examples(), "slow_fn", |_| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(None)
            })
            .timeout(Duration::from_millis(200)),
        )
        .with(
            ChangeHandler::on_create(examples(), "backoff_fn", |_| async {
                Err(kopf::Error::msg("again"))
            })
            .backoff(Duration::from_millis(1500)),
        );
    lines_of(name); // Logs are captured from now on.
    let server = server_with_crd().await;
    let harness = OperatorHarness::start_on(
        server,
        kopf::operator::Operator::new(registry).settings(kopf_testing::test_settings()),
    )
    .await;
    create(&harness.client(), name, json!({})).await;
    wait_line(
        name,
        "Handler 'limited_fn' failed with an exception and will stop now (it would exceed 1 retries on the next attempt): boom",
    )
    .await;
    wait_line(
        name,
        "Handler 'ignoring_fn' failed with an exception and will ignore it: meh",
    )
    .await;
    wait_line(name, "Handler 'slow_fn' has timed out after 0:00:0").await;
    wait_line(
        name,
        "Handler 'backoff_fn' failed with an exception and will try again in 1.5 seconds: again",
    )
    .await;
    // The outcomes carry the framework's errors, as Kopf's carry `HandlerRetriesError` and
    // `HandlerTimeoutError`, with the lines logged.
    use kopf::outcomes::Failure;
    let limited = harness.outcome(name, "limited_fn");
    match limited.as_ref().and_then(|o| o.failure()) {
        Some(Failure::Retries(error)) => {
            assert_eq!(error.retries(), 1);
            assert_eq!(
                error.to_string(),
                "Handler 'limited_fn' failed with an exception and will stop now (it would exceed 1 retries on the next attempt): boom"
            );
        }
        other => panic!("out of retries, not {other:?} ({limited:?})"),
    }
    let slow = harness.outcome(name, "slow_fn");
    match slow.as_ref().and_then(|o| o.failure()) {
        Some(Failure::Timeout(error)) => {
            assert_eq!(error.timeout(), Duration::from_millis(200));
            assert!(
                error
                    .to_string()
                    .starts_with("Handler 'slow_fn' has timed out after 0:00:0"),
                "{error}"
            );
        }
        other => panic!("out of time, not {other:?} ({slow:?})"),
    }
    assert_eq!(
        harness
            .outcome(name, "ignoring_fn")
            .and_then(|o| o.failure().cloned()),
        None,
        "an ignored error is no failure"
    );
    harness.stop().await.expect("a clean stop");
    assert!(
        !lines_of(name)
            .iter()
            .any(|line| line.contains("Handler 'ignoring_fn' succeeded.")),
        "an ignored error is not reported as a success"
    );
}
