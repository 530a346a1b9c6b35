//! Retrying failed requests as Kopf does (`kopf/_cogs/clients/api.py`): the delays between
//! attempts (`settings.networking.error_backoffs`, `settings.posting.default_backoffs`, ...)
//! and a `429 Too Many Requests` answer's `Retry-After`, which is a minimum unless
//! `settings.networking.enforce_retry_after` makes it the delay.

use std::time::Duration;

/// The delays between the attempts of one request, and how a `Retry-After` counts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoffs<'a> {
    /// One delay before each retry: as many retries as delays.
    pub(crate) delays: &'a [Duration],
    /// A `Retry-After` replaces the delay even when shorter (Kopf's `enforce_retry_after`).
    pub(crate) enforce_retry_after: bool,
}

impl<'a> Backoffs<'a> {
    /// How long to wait before the retry that follows the failed attempt `attempt` (from 0),
    /// or `None` when no retry is left.
    pub(crate) fn wait(&self, attempt: usize, error: &kube::Error) -> Option<Duration> {
        let backoff = *self.delays.get(attempt)?;
        Some(match retry_after(error) {
            Some(asked) if self.enforce_retry_after || asked > backoff => asked,
            _ => backoff,
        })
    }
}

impl<'a> From<&'a [Duration]> for Backoffs<'a> {
    fn from(delays: &'a [Duration]) -> Backoffs<'a> {
        Backoffs {
            delays,
            enforce_retry_after: false,
        }
    }
}

impl<'a, const N: usize> From<&'a [Duration; N]> for Backoffs<'a> {
    fn from(delays: &'a [Duration; N]) -> Backoffs<'a> {
        Backoffs::from(delays.as_slice())
    }
}

impl<'a> From<&'a Vec<Duration>> for Backoffs<'a> {
    fn from(delays: &'a Vec<Duration>) -> Backoffs<'a> {
        Backoffs::from(delays.as_slice())
    }
}

/// What a `429` answer asks to wait (its `Retry-After`, which the API server also puts in the
/// `Status` as `details.retryAfterSeconds`, where kube-client leaves it for us).
pub(crate) fn retry_after(error: &kube::Error) -> Option<Duration> {
    match error {
        kube::Error::Api(status) if status.code == 429 => status
            .details
            .as_ref()
            .map(|details| details.retry_after_seconds)
            .filter(|seconds| *seconds > 0)
            .map(|seconds| Duration::from_secs(u64::from(seconds))),
        _ => None,
    }
}

/// Whether another attempt may succeed where this one failed, as Kopf judges it: connection
/// errors and timeouts, `5xx`, `429`, and `403` (API servers answer it for a while during
/// upgrades).
pub(crate) fn retriable(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code >= 500 || status.code == 429 || status.code == 403,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn too_many(seconds: u32) -> kube::Error {
        let mut status = kube::core::Status::failure("slow down", "TooManyRequests").with_code(429);
        status.details = serde_json::from_value(serde_json::json!({"retryAfterSeconds": seconds}))
            .expect("status details");
        kube::Error::Api(Box::new(status))
    }

    fn failed(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure("failed", "Failed").with_code(code),
        ))
    }

    /// Kopf's rule: the longer of the backoff and the `Retry-After`, or the `Retry-After`
    /// whatever its length when enforced; no retry once the backoffs are spent.
    #[test]
    fn retry_after_is_a_minimum_unless_enforced() {
        let s = Duration::from_secs;
        let delays = [s(1), s(10)];
        let kopf = Backoffs::from(&delays[..]);
        assert_eq!(kopf.wait(0, &too_many(5)), Some(s(5)), "longer: waited");
        assert_eq!(
            kopf.wait(1, &too_many(5)),
            Some(s(10)),
            "shorter: the backoff"
        );
        assert_eq!(kopf.wait(0, &failed(500)), Some(s(1)));
        assert_eq!(kopf.wait(2, &too_many(5)), None, "the backoffs are spent");
        let enforced = Backoffs {
            enforce_retry_after: true,
            ..kopf
        };
        assert_eq!(enforced.wait(1, &too_many(5)), Some(s(5)));
        assert_eq!(enforced.wait(1, &too_many(0)), Some(s(10)), "none asked");
        assert_eq!(enforced.wait(0, &failed(503)), Some(s(1)));
    }

    #[test]
    fn only_failures_that_may_pass_are_retried() {
        for code in [500, 502, 503, 504, 429, 403] {
            assert!(retriable(&failed(code)), "{code}");
        }
        for code in [400, 401, 404, 409, 410, 413, 422] {
            assert!(!retriable(&failed(code)), "{code}");
        }
    }
}
