//! What `#[kopf_testing::test]` runs: a runtime of the test's own whose threads capture the
//! operator's logs, a harness started before the body, and a stop with all its checks after
//! it, even when the body did not stop the harness itself.

use std::cell::RefCell;
use std::future::Future;

use kopf::registry::Registry;
use kopf_fake_apiserver::DEADLINE;

use crate::harness::{HarnessBuilder, LogCapture, OperatorHarness};

thread_local! {
    /// The capture that is the default subscriber of this runtime thread, while it lives.
    static CAPTURING: RefCell<Option<tracing::dispatcher::DefaultGuard>> = const { RefCell::new(None) };
}

/// Runs a test body with a started harness: builds a multi-thread runtime, starts the
/// harness from `builder` with `registry`, runs `body`, then stops the operator (unless the
/// body did) and checks that it left nothing behind. Panics if it did not.
///
/// Where the real API server is asked for and none can run on this machine, the test skips
/// loudly without running its body (under CI, it fails instead).
pub fn run<F, Fut>(builder: HarnessBuilder, registry: Registry, body: F) -> Fut::Output
where
    F: FnOnce(OperatorHarness) -> Fut,
    Fut: Future,
    Fut::Output: Skipped,
{
    let logs = LogCapture::default();
    let dispatch = logs.dispatch();
    let on_start = dispatch.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || {
            let guard = tracing::dispatcher::set_default(&on_start);
            CAPTURING.with(|capturing| *capturing.borrow_mut() = Some(guard));
        })
        .on_thread_stop(|| {
            CAPTURING.with(|capturing| capturing.borrow_mut().take());
        })
        .build()
        .expect("a tokio runtime for the test builds");
    let _capturing = tracing::dispatcher::set_default(&dispatch);
    let test = std::panic::AssertUnwindSafe(|| {
        runtime.block_on(async move {
            let thread = std::thread::current();
            let test = thread.name().unwrap_or("a test");
            let Some(mut harness) = builder.logs(logs).start_or_skip(registry, test).await else {
                return Fut::Output::skipped();
            };
            let finisher = harness.finisher();
            let output = body(harness).await;
            finisher.finish().await;
            output
        })
    });
    let outcome = std::panic::catch_unwind(test);
    // After a failure, the operator was only told to stop: work that ignores that (a stuck
    // sync handler) must not hang the test run.
    runtime.shutdown_timeout(DEADLINE);
    outcome.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// What a test returns when it skips: `()`, or `Ok` of that.
pub trait Skipped {
    /// The value of a skipped test.
    fn skipped() -> Self;
}

impl Skipped for () {
    fn skipped() -> Self {}
}

impl<T: Skipped, E> Skipped for Result<T, E> {
    fn skipped() -> Self {
        Ok(T::skipped())
    }
}
