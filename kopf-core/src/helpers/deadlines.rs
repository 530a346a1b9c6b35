//! Deadlines on the monotonic clock from durations that may be absurd (a lifetime of a
//! thousand years, `Duration::MAX`): adding those to an `Instant` panics, so they saturate.

use std::time::Duration;

use tokio::time::Instant;

/// As far as any wait goes: about 30 years, tokio's own "far future".
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// The moment `delay` after now; about 30 years from now at most.
pub(crate) fn after(delay: Duration) -> Instant {
    let now = Instant::now();
    now + delay.min(FAR_FUTURE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_delays_saturate_instead_of_panicking() {
        let now = Instant::now();
        assert!(after(Duration::from_secs(5)) >= now + Duration::from_secs(5));
        let far = after(Duration::MAX);
        assert!(far >= now + FAR_FUTURE && far <= Instant::now() + FAR_FUTURE);
    }
}
