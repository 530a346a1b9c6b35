//! Client-go's leader election record in a `coordination.k8s.io/v1` Lease, and its rules
//! without I/O: the validation of the durations, the record that a candidate writes, and when
//! a Lease held by another may be taken.
//!
//! The facts (client-go's `tools/leaderelection`):
//! 1. An empty `holderIdentity` is free; a Lease held by another is taken only when its record
//!    has not been seen to change for `leaseDuration`, judged on the local monotonic clock
//!    from the moment the change was observed (stored times are never compared with it).
//! 2. `leaseTransitions` grows by one whenever the holder changes; a renewal keeps it and the
//!    `acquireTime`.
//! 3. Times are `MicroTime`: RFC 3339 in UTC with six fractional digits.

use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::configs::settings::LeaseSettings;

/// Client-go's jitter factor for the acquire attempts.
pub(crate) const JITTER_FACTOR: f64 = 1.2;

/// The longest duration a Lease can record: `leaseDurationSeconds` is an int32.
pub(crate) const MAX_LEASE_DURATION: Duration = Duration::from_secs(i32::MAX as u64);

/// Why a lease duration cannot be recorded in a Lease, if it cannot.
pub(crate) fn check_recordable(what: &str, duration: Duration) -> Result<(), String> {
    if duration > MAX_LEASE_DURATION {
        return Err(format!(
            "the {what} ({duration:?}) must fit the Lease's leaseDurationSeconds: at most {} s",
            MAX_LEASE_DURATION.as_secs()
        ));
    }
    Ok(())
}

/// Client-go's checks of the durations and the identity (`NewLeaderElector`).
pub(crate) fn validate(settings: &LeaseSettings, identity: &str) -> Result<(), String> {
    let (ld, rd, rp) = (
        settings.lease_duration,
        settings.renew_deadline,
        settings.retry_period,
    );
    if ld <= rd {
        return Err(format!(
            "the lease duration ({ld:?}) must be greater than the renew deadline ({rd:?})"
        ));
    }
    if rd.as_secs_f64() <= JITTER_FACTOR * rp.as_secs_f64() {
        return Err(format!(
            "the renew deadline ({rd:?}) must be greater than {JITTER_FACTOR} × the retry period ({rp:?})"
        ));
    }
    if ld.is_zero() || rd.is_zero() || rp.is_zero() {
        return Err(
            "the lease duration, renew deadline and retry period must be above zero".into(),
        );
    }
    // The others are shorter: nothing added to a clock overflows.
    check_recordable("lease duration", ld)?;
    if settings.name.is_empty() {
        return Err("the lease's name must not be empty".into());
    }
    if identity.is_empty() {
        return Err("the identity must not be empty".into());
    }
    Ok(())
}

/// The time until the next acquire attempt: `retry_period` plus up to 1.2 times more
/// (`wait.Jitter`), for a `random` in `0..1`.
pub(crate) fn jittered(retry_period: Duration, random: f64) -> Duration {
    retry_period.mul_f64(1.0 + JITTER_FACTOR * random.clamp(0.0, 1.0))
}

/// Kubernetes' `MicroTime`: `2026-03-01T12:00:00.123456Z`.
pub(crate) fn micro_time(timestamp: OffsetDateTime) -> String {
    let t = timestamp.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.microsecond()
    )
}

/// The holder of a Lease's `spec`: `None` when it is free (no or an empty `holderIdentity`).
pub(crate) fn holder(spec: &Value) -> Option<&str> {
    spec["holderIdentity"].as_str().filter(|h| !h.is_empty())
}

/// The lease duration that a Lease's `spec` records, if it records one.
pub(crate) fn recorded_duration(spec: &Value) -> Option<Duration> {
    spec["leaseDurationSeconds"]
        .as_u64()
        .map(Duration::from_secs)
}

/// Whether `identity` may write the Lease whose `spec` is this, that spec having been seen to
/// change `unchanged_for` ago: it is free, ours, or its holder's record has expired. A holder
/// acts for less than the duration it recorded (client-go judges by the record), and may have
/// been run with other settings than this candidate (a rolling update): the record is
/// expired after the longer of the recorded duration and `lease_duration`.
pub(crate) fn may_take(
    spec: &Value,
    identity: &str,
    unchanged_for: Duration,
    lease_duration: Duration,
) -> bool {
    match holder(spec) {
        None => true,
        Some(holder) if holder == identity => true,
        Some(_) => {
            let recorded = recorded_duration(spec).unwrap_or_default();
            unchanged_for >= lease_duration.max(recorded)
        }
    }
}

/// The `spec` that `identity` writes to take or renew the Lease whose current `spec` is `old`
/// (`Value::Null` for a new Lease): the acquire time and the transitions kept on a renewal,
/// the transitions counted up on a change of the holder.
pub(crate) fn taken(
    old: &Value,
    identity: &str,
    lease_duration: Duration,
    now: OffsetDateTime,
) -> Value {
    let now = micro_time(now);
    let transitions = old["leaseTransitions"].as_i64().unwrap_or(0);
    let renewing = holder(old) == Some(identity);
    let (acquired, transitions) = match (renewing, old.is_null()) {
        (true, _) => (
            old["acquireTime"].as_str().unwrap_or(&now).to_string(),
            transitions,
        ),
        (false, true) => (now.clone(), 0),
        // An int32 in the API: whatever another writer left there, never past it.
        (false, false) => (
            now.clone(),
            transitions.saturating_add(1).min(i64::from(i32::MAX)),
        ),
    };
    json!({
        "holderIdentity": identity,
        "leaseDurationSeconds": whole_seconds(lease_duration),
        "acquireTime": acquired,
        "renewTime": now,
        "leaseTransitions": transitions,
    })
}

/// The `spec` of a released Lease (client-go's `ReleaseOnCancel`): no holder, a duration of
/// one second, the times now; the transitions kept.
pub(crate) fn released(old: &Value, now: OffsetDateTime) -> Value {
    let now = micro_time(now);
    json!({
        "holderIdentity": "",
        "leaseDurationSeconds": 1,
        "acquireTime": now,
        "renewTime": now,
        "leaseTransitions": old["leaseTransitions"].as_i64().unwrap_or(0),
    })
}

/// Whole seconds, at least one and at most an int32's, as `leaseDurationSeconds` holds them.
fn whole_seconds(duration: Duration) -> i64 {
    duration.min(MAX_LEASE_DURATION).as_secs().max(1) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-03-01 12:00:00.123456789 UTC);

    fn settings(ld: u64, rd: u64, rp: u64) -> LeaseSettings {
        let mut settings = LeaseSettings::new("lease");
        settings.lease_duration = Duration::from_millis(ld);
        settings.renew_deadline = Duration::from_millis(rd);
        settings.retry_period = Duration::from_millis(rp);
        settings
    }

    #[test]
    fn durations_are_validated_as_client_go_does() {
        assert_eq!(validate(&LeaseSettings::new("lease"), "me"), Ok(()));
        assert_eq!(validate(&settings(3000, 2000, 500), "me"), Ok(()));
        let error = validate(&settings(2000, 2000, 500), "me").unwrap_err();
        assert!(error.contains("greater than the renew deadline"), "{error}");
        let error = validate(&settings(3000, 1200, 1000), "me").unwrap_err();
        assert!(error.contains("1.2 × the retry period"), "{error}");
        let error = validate(&settings(3000, 2000, 0), "me").unwrap_err();
        assert!(error.contains("above zero"), "{error}");
        let error = validate(&LeaseSettings::new("lease"), "").unwrap_err();
        assert!(error.contains("identity"), "{error}");
        let error = validate(&LeaseSettings::new(""), "me").unwrap_err();
        assert!(error.contains("name"), "{error}");
    }

    #[test]
    fn attempts_come_every_retry_period_with_a_jitter_of_1_2() {
        let rp = Duration::from_secs(2);
        assert_eq!(jittered(rp, 0.0), rp);
        assert_eq!(jittered(rp, 1.0), Duration::from_millis(4400));
    }

    #[test]
    fn micro_times_are_rfc3339_with_microseconds_in_utc() {
        assert_eq!(micro_time(NOW), "2026-03-01T12:00:00.123456Z");
        let offset = datetime!(2026-03-01 14:00:00 +02:00);
        assert_eq!(micro_time(offset), "2026-03-01T12:00:00.000000Z");
    }

    #[test]
    fn a_lease_is_free_ours_or_expired_to_be_taken() {
        let ld = Duration::from_secs(15);
        let held = json!({"holderIdentity": "other"});
        assert!(may_take(&json!({}), "me", Duration::ZERO, ld));
        assert!(may_take(
            &json!({"holderIdentity": ""}),
            "me",
            Duration::ZERO,
            ld
        ));
        assert!(may_take(
            &json!({"holderIdentity": "me"}),
            "me",
            Duration::ZERO,
            ld
        ));
        assert!(!may_take(&held, "me", Duration::from_secs(14), ld));
        assert!(may_take(&held, "me", ld, ld));
        // The record's duration when it is longer (a holder run with other settings).
        let longer = json!({"holderIdentity": "other", "leaseDurationSeconds": 40});
        assert!(!may_take(&longer, "me", Duration::from_secs(39), ld));
        assert!(may_take(&longer, "me", Duration::from_secs(40), ld));
        let shorter = json!({"holderIdentity": "other", "leaseDurationSeconds": 1});
        assert!(!may_take(&shorter, "me", Duration::from_secs(14), ld));
        let absurd = json!({"holderIdentity": "other", "leaseDurationSeconds": u64::MAX});
        assert!(!may_take(&absurd, "me", Duration::from_secs(1 << 40), ld));
    }

    #[test]
    fn durations_no_lease_can_record_are_refused_and_never_written() {
        let mut huge = settings(3000, 2000, 500);
        huge.lease_duration = Duration::MAX;
        let error = validate(&huge, "me").unwrap_err();
        assert!(error.contains("at most 2147483647 s"), "{error}");
        let spec = taken(&Value::Null, "me", Duration::MAX, NOW);
        assert_eq!(spec["leaseDurationSeconds"], i64::from(i32::MAX));
    }

    #[test]
    fn transitions_count_changes_of_the_holder_and_renewals_keep_the_acquire_time() {
        let ld = Duration::from_millis(15_500);
        let created = taken(&Value::Null, "me", ld, NOW);
        assert_eq!(
            created,
            json!({"holderIdentity": "me", "leaseDurationSeconds": 15,
                   "acquireTime": "2026-03-01T12:00:00.123456Z",
                   "renewTime": "2026-03-01T12:00:00.123456Z", "leaseTransitions": 0})
        );
        let later = NOW + time::Duration::seconds(2);
        let renewed = taken(&created, "me", ld, later);
        assert_eq!(renewed["acquireTime"], created["acquireTime"]);
        assert_eq!(renewed["renewTime"], "2026-03-01T12:00:02.123456Z");
        assert_eq!(renewed["leaseTransitions"], 0);
        let stolen = taken(&renewed, "other", ld, later);
        assert_eq!(stolen["acquireTime"], "2026-03-01T12:00:02.123456Z");
        assert_eq!(stolen["leaseTransitions"], 1);
        let free = released(&stolen, later);
        assert_eq!(
            free,
            json!({"holderIdentity": "", "leaseDurationSeconds": 1,
                   "acquireTime": "2026-03-01T12:00:02.123456Z",
                   "renewTime": "2026-03-01T12:00:02.123456Z", "leaseTransitions": 1})
        );
        assert_eq!(taken(&free, "me", ld, later)["leaseTransitions"], 2);
        let absurd = json!({"holderIdentity": "other", "leaseTransitions": i64::MAX});
        assert_eq!(
            taken(&absurd, "me", ld, later)["leaseTransitions"],
            i64::from(i32::MAX),
            "no overflow, and an int32 as the API holds it"
        );
    }
}
