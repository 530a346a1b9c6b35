//! Waiting for conditions in tests: polling with a deadline, and locks that survive a panicking
//! test.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

/// How long [`OperatorHarness::wait_for`](crate::OperatorHarness::wait_for) and friends wait before failing the test.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Polls `condition` until it returns `Some`; panics with `what` after [`DEADLINE`].
pub async fn wait<T, F, Fut>(what: &str, condition: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    wait_or_none(condition)
        .await
        .unwrap_or_else(|| panic!("timed out after {DEADLINE:?} waiting for {what}"))
}

/// Polls `condition` until it returns `Some`, or [`DEADLINE`] passes (then `None`).
pub(super) async fn wait_or_none<T, F, Fut>(mut condition: F) -> Option<T>
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
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Locks a mutex, recovering the data if a panicking test poisoned it.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
