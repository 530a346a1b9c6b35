//! Handlers' outcomes, from the operator's memory: each attempt's end is kept
//! ([`kopf::operator::Operator::outcomes`]), so a test reads a handler's last outcome even after
//! the operator purged its progress record from the object at the end of the cycle (or, for a
//! first attempt that ended it, never wrote one).

use kopf::outcomes::HandlerOutcome;
use kopf_fake_apiserver::{DEADLINE, try_wait};

use super::operator::OperatorHarness;

impl OperatorHarness {
    /// The last outcome of the handler `handler_id` (its id: the function's name, or
    /// `scale_fn/spec.size` for a field handler) on the object `name` in the namespace
    /// `default` (or the cluster-scoped object `name`, or `namespace/name`); `None` if no
    /// attempt of it ended yet. The outcome is known as the attempt ends, before the operator
    /// writes its result and progress to the object: to check what was written, wait for the
    /// object ([`OperatorHarness::wait_for`]).
    ///
    /// ```no_run
    /// # async fn example(harness: kopf_testing::OperatorHarness) {
    /// use kopf::outcomes::HandlerOutcome;
    /// let outcome = harness.wait_for_outcome("kex", "create_fn").await;
    /// assert!(matches!(outcome, HandlerOutcome::Failed { .. }), "{outcome:?}");
    /// # }
    /// ```
    pub fn outcome(&self, name: &str, handler_id: &str) -> Option<HandlerOutcome> {
        let (namespace, name) = match name.split_once('/') {
            Some((namespace, name)) => (Some(namespace), name),
            None => (Some("default"), name),
        };
        self.outcomes
            .get(namespace, name, handler_id)
            .or_else(|| self.outcomes.get(None, name, handler_id))
    }

    /// Waits until the handler `handler_id` is done with the object `name` (succeeded or
    /// failed for good; see [`OperatorHarness::outcome`]) and returns how. Panics after
    /// [`DEADLINE`] with the last outcome seen.
    pub async fn wait_for_outcome(&self, name: &str, handler_id: &str) -> HandlerOutcome {
        let done = try_wait(|| async {
            self.outcome(name, handler_id)
                .filter(HandlerOutcome::is_final)
        })
        .await;
        done.unwrap_or_else(|| {
            panic!(
                "timed out after {DEADLINE:?} waiting for handler {handler_id:?} to finish with {name:?}; last outcome: {:?}",
                self.outcome(name, handler_id)
            )
        })
    }
}
