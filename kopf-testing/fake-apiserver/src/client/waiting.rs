//! Waiting for conditions in tests: polling with one generous deadline, never a fixed sleep.

use std::future::Future;
use std::time::Duration;

/// How long the waits of tests ([`TestClient::wait_for`](crate::TestClient::wait_for),
/// [`wait`], and the harness's) wait before failing the test: generous, so that a slow or
/// busy machine never fails a test that would pass.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// How often a condition is asked again.
const POLL: Duration = Duration::from_millis(20);

/// Polls `condition` until it returns `Some`; returns what it returned.
///
/// ```no_run
/// # async fn example(server: kopf_fake_apiserver::FakeApiServer) {
/// kopf_fake_apiserver::wait("every watch to close", || async {
///     (server.stats().open_watches == 0).then_some(())
/// })
/// .await;
/// # }
/// ```
///
/// # Panics
///
/// After [`DEADLINE`], naming `what` it waited for.
pub async fn wait<T, F, Fut>(what: &str, condition: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    try_wait(condition)
        .await
        .unwrap_or_else(|| panic!("timed out after {DEADLINE:?} waiting for {what}"))
}

/// Polls `condition` until it returns `Some`, or [`DEADLINE`] passes (then `None`): for
/// waits that fail with a message of their own, such as the last state they saw.
///
/// ```no_run
/// # async fn example(server: kopf_fake_apiserver::FakeApiServer) {
/// let quiet = kopf_fake_apiserver::try_wait(|| async {
///     (server.stats().open_connections == 0).then_some(())
/// })
/// .await;
/// assert!(quiet.is_some(), "still open: {:?}", server.stats());
/// # }
/// ```
pub async fn try_wait<T, F, Fut>(mut condition: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let until = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(value) = condition().await {
            return Some(value);
        }
        if tokio::time::Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}
