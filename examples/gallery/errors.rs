//! Errors and retries (Kopf's `03-exceptions`): what each kind of failure does to a handler.
//!
//! - [`kopf::PermanentError`]: the handler fails at once and is not retried;
//! - [`kopf::TemporaryError`]: retried after its delay, until it succeeds;
//! - any other error: retried after `backoff`, and given up after `retries` attempts;
//! - any other error with `errors = "permanent"`: fails at once, as a permanent error.
//!
//! Progress lives in the object's `kopf.zalando.org/<handler>` annotations meanwhile (Kopf's
//! format); the log says what happened to each handler.
//!
//! ```sh
//! cargo run --example errors &   # with KUBECONFIG and the CRD as for `children`
//! kubectl apply -f examples/obj.yaml
//! ```

use std::time::Duration;

use kopf::{PermanentError, TemporaryError};
use serde_json::{Value, json};

/// An error of the operator's own, for the handlers that fail with arbitrary errors.
#[derive(Debug, thiserror::Error)]
#[error("an error that is supposed to be recoverable")]
pub struct MyError;

/// Fails once and for all.
#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
pub async fn instant_failure_with_only_a_message() -> kopf::Result<()> {
    Err(PermanentError::new("Fail once and for all.").into())
}

/// Fails temporarily three times, then succeeds; stores how many attempts it took.
#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
pub async fn eventual_success_with_few_messages(retry: u32) -> kopf::Result<Value> {
    if retry < 3 {
        return Err(TemporaryError::new("Expected recoverable error.")
            .delay(Duration::from_millis(200))
            .into());
    }
    Ok(json!({"attempts": retry + 1}))
}

/// Fails with an arbitrary error: retried after the backoff, given up after 3 attempts.
#[kopf::on_create("kopf.dev", "v1", "kopfexamples", retries = 3, backoff = "200ms")]
pub async fn eventual_failure_with_tracebacks() -> Result<(), MyError> {
    Err(MyError)
}

/// Fails with an arbitrary error that `errors = "permanent"` makes final at once.
#[kopf::on_create("kopf.dev", "v1", "kopfexamples", errors = "permanent")]
pub async fn instant_failure_with_traceback() -> Result<(), MyError> {
    Err(MyError)
}
