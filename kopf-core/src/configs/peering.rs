//! Kopf's peering records: what each operator keeps in the `status` of a `KopfPeering` or
//! `ClusterKopfPeering` object, and who is paused in favour of whom.
//!
//! The format (Kopf: `kopf/_core/engines/peering.py`): `status` maps an operator's identity
//! to `{"priority": int, "lifetime": int seconds, "lastseen": "<isoformat>"}`, where
//! `lastseen` is Python's `isoformat()` of an aware UTC time (`+00:00`, the fraction left out
//! when it is zero). Written with JSON merge patches, one key per writer; `null` removes an
//! entry. Readers default what is missing (priority 0, lifetime 60 s, lastseen now) and ignore
//! unknown keys, as Kopf does.
//!
//! A peer is live while `lastseen + lifetime > now` on the reader's clock.
//!
//! Entries are read as Kopf's `Peer(**entry)` reads them: the lifetime through Python's
//! `int()` (whole numbers, truncated floats, numeric strings), a `null` lastseen as missing.
//! Two things make Kopf's reader raise, and its peering observer die with the operator's
//! pause frozen as it was: an entry it cannot read (a lastseen that is no timestamp, a
//! lifetime that is no number, a priority that cannot be compared, an entry that is no
//! object), and a deadline past the end of Python's calendar (year 9999). Here, the first
//! reads the unreadable field as missing (Kopf's default) and names it in
//! [`Peer::unreadable`], for a warning; the second lives for ever (a negative lifetime is
//! dead at once). What this operator writes stays within Python's calendar ([`touch`]), so
//! that Python Kopf's peers can read it.

use std::time::Duration;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use time::macros::datetime;

use crate::configs::storage::timestamps::{format_iso8601, parse_iso8601};

/// The last moment of Python's calendar (`datetime.max`), in UTC: Kopf's peers cannot add a
/// lifetime that ends after it.
const END_OF_TIME: OffsetDateTime = datetime!(9999-12-31 23:59:59.999999 UTC);

/// One entry of a peering object's `status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Peer {
    /// The operator's identity (the entry's key).
    pub(crate) id: String,
    pub(crate) priority: i64,
    /// Whole seconds, as on the wire.
    pub(crate) lifetime: i64,
    pub(crate) lastseen: OffsetDateTime,
    /// The fields that could not be read, and were read as missing (`entry`: all of them).
    pub(crate) unreadable: Vec<&'static str>,
}

impl Peer {
    /// The entries of a peering object's `status` (Kopf's reader defaults for what is missing
    /// or unreadable); none if `status` is not an object.
    pub(crate) fn all(status: &Value, now: OffsetDateTime) -> Vec<Peer> {
        let Some(entries) = status.as_object() else {
            return Vec::new();
        };
        entries
            .iter()
            .filter(|(_, entry)| !entry.is_null())
            .map(|(id, entry)| Peer::read(id, entry, now))
            .collect()
    }

    /// One entry, as Kopf's `Peer(identity=id, **entry)` reads it.
    fn read(id: &str, entry: &Value, now: OffsetDateTime) -> Peer {
        let mut peer = Peer {
            id: id.to_string(),
            priority: 0,
            lifetime: 60,
            lastseen: now,
            unreadable: Vec::new(),
        };
        let Some(fields) = entry.as_object() else {
            peer.unreadable.push("entry");
            return peer;
        };
        if let Some(priority) = fields.get("priority") {
            match number(priority) {
                Some(priority) => peer.priority = priority,
                None => peer.unreadable.push("priority"),
            }
        }
        if let Some(lifetime) = fields.get("lifetime") {
            match number(lifetime).or_else(|| python_int(lifetime)) {
                Some(lifetime) => peer.lifetime = lifetime,
                None => peer.unreadable.push("lifetime"),
            }
        }
        match fields.get("lastseen") {
            None | Some(Value::Null) => {}
            Some(lastseen) => match lastseen.as_str().and_then(parse_iso8601) {
                Some(lastseen) => peer.lastseen = lastseen,
                None => peer.unreadable.push("lastseen"),
            },
        }
        peer
    }

    /// When the entry expires: never, for a deadline past the end of the calendar.
    pub(crate) fn deadline(&self) -> OffsetDateTime {
        let end = self
            .lastseen
            .checked_add(time::Duration::seconds(self.lifetime));
        match end {
            Some(end) => end,
            None if self.lifetime > 0 => time::PrimitiveDateTime::MAX.assume_utc(),
            None => time::PrimitiveDateTime::MIN.assume_utc(),
        }
    }

    /// Whether the entry has expired at `now`.
    pub(crate) fn is_dead(&self, now: OffsetDateTime) -> bool {
        self.deadline() <= now
    }
}

/// A JSON number (or boolean, which Python counts as 0 and 1) as a whole number: saturated
/// beyond `i64`, fractions truncated.
fn number(value: &Value) -> Option<i64> {
    match value {
        Value::Bool(flag) => Some(i64::from(*flag)),
        Value::Number(number) => number
            .as_i64()
            .or_else(|| number.as_u64().map(|_| i64::MAX))
            // Saturating: `as` clamps to i64's range.
            .or_else(|| number.as_f64().map(|float| float as i64)),
        _ => None,
    }
}

/// Python's `int()` of a string: an optionally signed whole number, spaces around it
/// allowed; saturated beyond `i64`.
fn python_int(value: &Value) -> Option<i64> {
    let text = value.as_str()?.trim();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(match (digits.parse::<i64>(), negative) {
        (Ok(n), true) => -n,
        (Ok(n), false) => n,
        (Err(_), true) => i64::MIN,
        (Err(_), false) => i64::MAX,
    })
}

/// Shown in logs as Kopf shows peers: identity, priority and lifetime.
impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "<Peer {}: priority={}, lifetime={}, lastseen='{}'>",
            self.id,
            self.priority,
            self.lifetime,
            isoformat(self.lastseen)
        )
    }
}

/// Python's `datetime.isoformat()`: microseconds only when there are any.
pub(crate) fn isoformat(timestamp: OffsetDateTime) -> String {
    let text = format_iso8601(timestamp);
    if timestamp.microsecond() == 0 {
        text.replacen(".000000", "", 1)
    } else {
        text
    }
}

/// The merge patch of a keep-alive: this operator's entry, seen now. A lifetime beyond the
/// end of Python's calendar is cut to end with it, so that Kopf's peers can read the entry.
pub(crate) fn touch(id: &str, priority: i64, lifetime: Duration, now: OffsetDateTime) -> Value {
    let now = now.to_offset(time::UtcOffset::UTC);
    let now = now
        .replace_nanosecond(now.nanosecond() / 1_000 * 1_000)
        .unwrap_or(now);
    let left = (END_OF_TIME - now).whole_seconds().max(0);
    let lifetime = i64::try_from(lifetime.as_secs()).map_or(left, |l| l.min(left));
    json!({"status": {id: {"priority": priority, "lifetime": lifetime, "lastseen": isoformat(now)}}})
}

/// The merge patch that removes these entries (an operator leaving, or dead peers).
pub(crate) fn removal<'a>(ids: impl IntoIterator<Item = &'a str>) -> Value {
    let entries: Map<String, Value> = ids
        .into_iter()
        .map(|id| (id.to_string(), Value::Null))
        .collect();
    json!({"status": entries})
}

/// What one peering object says to an operator (Kopf's `process_peering_event`).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Judgement {
    /// Expired entries, to be removed.
    pub(crate) dead: Vec<Peer>,
    /// Live peers of a higher priority: this operator pauses in their favour.
    pub(crate) higher: Vec<Peer>,
    /// Live peers of the same priority: all of them pause, this one included.
    pub(crate) same: Vec<Peer>,
    /// Live peers of a lower priority: they pause in favour of this one (no concern of its
    /// decision, but they may take over what it keeps when it leaves).
    pub(crate) lower: Vec<Peer>,
    /// Peers whose entries have fields that could not be read (read as missing).
    pub(crate) unreadable: Vec<Peer>,
}

impl Judgement {
    /// Judges the `status` of a peering object for the operator `id` of this `priority`.
    /// Its own entry is never a peer; lower priorities pause nobody.
    pub(crate) fn of(status: &Value, id: &str, priority: i64, now: OffsetDateTime) -> Judgement {
        let mut judgement = Judgement::default();
        for peer in Peer::all(status, now) {
            if !peer.unreadable.is_empty() && peer.id != id {
                judgement.unreadable.push(peer.clone());
            }
            if peer.is_dead(now) {
                judgement.dead.push(peer);
            } else if peer.id == id {
                continue;
            } else if peer.priority > priority {
                judgement.higher.push(peer);
            } else if peer.priority == priority {
                judgement.same.push(peer);
            } else {
                judgement.lower.push(peer);
            }
        }
        judgement
    }

    /// Whether any other operator lives in this peering object, whatever its priority.
    pub(crate) fn others_alive(&self) -> bool {
        !(self.higher.is_empty() && self.same.is_empty() && self.lower.is_empty())
    }

    /// When the earliest of the peers that pause this operator expires: then it looks again.
    pub(crate) fn recheck_at(&self) -> Option<OffsetDateTime> {
        self.higher
            .iter()
            .chain(&self.same)
            .map(Peer::deadline)
            .min()
    }
}

/// Kopf's keep-alive interval: `max(1, min(L, max(1, L - rand(5..=10))))` seconds.
pub(crate) fn keepalive_interval(lifetime: Duration, jitter: u64) -> Duration {
    let lifetime = lifetime.as_secs();
    let interval = lifetime.saturating_sub(jitter).max(1).min(lifetime).max(1);
    Duration::from_secs(interval)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-03-01 12:00:00 UTC);

    #[test]
    fn a_touch_is_kopfs_entry_with_isoformat_timestamps() {
        let patch = touch(
            "me@host/20260301120000/abc",
            5,
            Duration::from_secs(60),
            NOW,
        );
        assert_eq!(
            patch,
            json!({"status": {"me@host/20260301120000/abc": {
                "priority": 5, "lifetime": 60, "lastseen": "2026-03-01T12:00:00+00:00"}}})
        );
        let keys: Vec<&String> = patch["status"]["me@host/20260301120000/abc"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(
            keys,
            ["priority", "lifetime", "lastseen"],
            "Kopf's key order"
        );
        let fraction = NOW + time::Duration::nanoseconds(123_456_789);
        assert_eq!(
            touch("x", 0, Duration::from_millis(1500), fraction)["status"]["x"],
            json!({"priority": 0, "lifetime": 1, "lastseen": "2026-03-01T12:00:00.123456+00:00"})
        );
    }

    #[test]
    fn a_removal_nulls_every_entry_named() {
        assert_eq!(
            removal(["a", "b"]),
            json!({"status": {"a": null, "b": null}})
        );
    }

    #[test]
    fn entries_are_read_with_kopfs_defaults() {
        let status = json!({
            "full": {"priority": 3, "lifetime": 30, "lastseen": "2026-03-01T11:59:50.5+00:00"},
            "naive": {"lastseen": "2026-03-01T11:59:00", "extra": "ignored"},
            "empty": {},
            "removed": null,
        });
        let peers = Peer::all(&status, NOW);
        assert_eq!(peers.len(), 3);
        let by_id = |id: &str| peers.iter().find(|p| p.id == id).unwrap().clone();
        assert_eq!(by_id("full").lastseen, datetime!(2026-03-01 11:59:50.5 UTC));
        assert_eq!((by_id("naive").priority, by_id("naive").lifetime), (0, 60));
        assert_eq!(by_id("naive").lastseen, datetime!(2026-03-01 11:59:00 UTC));
        assert_eq!(by_id("empty").lastseen, NOW);
    }

    /// What Python's `int()` reads is read; what makes Kopf's reader raise is read as missing
    /// and named, so that the operator warns of it (Kopf's peering observer dies of it).
    #[test]
    fn unreadable_fields_are_read_as_missing_and_named() {
        let status = json!({
            "strings": {"priority": 5, "lifetime": " 120 ", "lastseen": "2026-03-01T11:59:00"},
            "floats": {"priority": 2.9, "lifetime": 30.7, "lastseen": null},
            "flags": {"priority": true, "lifetime": false},
            "garbage": {"priority": "high", "lifetime": "forever", "lastseen": "yesterday"},
            "typed": {"priority": null, "lifetime": [60], "lastseen": 1_700_000_000},
            "not-an-object": "frozen",
        });
        let peers = Peer::all(&status, NOW);
        let by_id = |id: &str| peers.iter().find(|p| p.id == id).unwrap().clone();
        let strings = by_id("strings");
        assert_eq!((strings.priority, strings.lifetime), (5, 120));
        assert!(strings.unreadable.is_empty());
        let floats = by_id("floats");
        assert_eq!(
            (floats.priority, floats.lifetime, floats.lastseen),
            (2, 30, NOW)
        );
        assert!(
            floats.unreadable.is_empty(),
            "a null lastseen is a missing one"
        );
        let flags = by_id("flags");
        assert_eq!((flags.priority, flags.lifetime), (1, 0));
        let garbage = by_id("garbage");
        assert_eq!(
            (garbage.priority, garbage.lifetime, garbage.lastseen),
            (0, 60, NOW)
        );
        assert_eq!(garbage.unreadable, ["priority", "lifetime", "lastseen"]);
        assert_eq!(
            by_id("typed").unreadable,
            ["priority", "lifetime", "lastseen"]
        );
        let whole = by_id("not-an-object");
        assert_eq!(
            (whole.priority, whole.lifetime, whole.lastseen),
            (0, 60, NOW)
        );
        assert_eq!(whole.unreadable, ["entry"]);
        assert_eq!(
            (
                python_int(&json!("-7")),
                python_int(&json!("+7")),
                python_int(&json!("7.5"))
            ),
            (Some(-7), Some(7), None)
        );
        assert_eq!(
            python_int(&json!("99999999999999999999999")),
            Some(i64::MAX)
        );
    }

    #[test]
    fn higher_priorities_pause_equal_ones_pause_all_lower_and_dead_ones_do_not() {
        let entry = |priority: i64, seconds_ago: i64| {
            json!({"priority": priority, "lifetime": 60,
                   "lastseen": isoformat(NOW - time::Duration::seconds(seconds_ago))})
        };
        let status = json!({
            "me": entry(10, 0),
            "higher": entry(20, 30),
            "same": entry(10, 10),
            "lower": entry(5, 0),
            "dead": entry(99, 60),
        });
        let judgement = Judgement::of(&status, "me", 10, NOW);
        let ids = |peers: &[Peer]| peers.iter().map(|p| p.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&judgement.higher), ["higher"]);
        assert_eq!(ids(&judgement.same), ["same"]);
        assert_eq!(ids(&judgement.dead), ["dead"], "lastseen + lifetime <= now");
        assert_eq!(
            judgement.recheck_at(),
            Some(NOW + time::Duration::seconds(30)),
            "the earliest deadline of the blockers"
        );
        let alone = Judgement::of(
            &json!({"me": entry(10, 0), "lower": entry(1, 0)}),
            "me",
            10,
            NOW,
        );
        assert!(alone.higher.is_empty() && alone.same.is_empty());
        assert_eq!(alone.recheck_at(), None);
        assert!(alone.others_alive(), "a lower peer may take over");
        let dead_only = Judgement::of(
            &json!({"me": entry(10, 0), "x": entry(1, 60)}),
            "me",
            10,
            NOW,
        );
        assert!(!dead_only.others_alive());
    }

    /// Lifetimes and timestamps so large that `lastseen + lifetime` passes the end of the
    /// calendar (year 9999, where Python's `datetime` ends too), as `freeze --lifetime
    /// 1000000000000` or any peer may write them, live for ever; negative ones are dead.
    #[test]
    fn absurd_lifetimes_never_overflow_and_live_or_die_as_their_sign_says() {
        let status = json!({
            "forever": {"priority": 100, "lifetime": 1_000_000_000_000_i64,
                        "lastseen": "2026-03-01T12:00:00+00:00"},
            "max": {"priority": 100, "lifetime": i64::MAX, "lastseen": "9999-12-31T23:59:59+00:00"},
            "beyond-i64": {"priority": 100, "lifetime": u64::MAX},
            "float": {"priority": 100, "lifetime": 1e300},
            "past": {"priority": 100, "lifetime": i64::MIN, "lastseen": "0001-01-01T00:00:00+00:00"},
        });
        let judgement = Judgement::of(&status, "me", 0, NOW);
        let ids = |peers: &[Peer]| peers.iter().map(|p| p.id.clone()).collect::<Vec<_>>();
        assert_eq!(
            ids(&judgement.higher),
            ["forever", "max", "beyond-i64", "float"]
        );
        assert_eq!(ids(&judgement.dead), ["past"]);
        let recheck = judgement.recheck_at().expect("blocked");
        assert!(
            recheck > NOW + time::Duration::days(365 * 7000),
            "{recheck}"
        );
    }

    /// What this operator writes, Python Kopf's peers must be able to read: `lastseen +
    /// lifetime` within the year 9999 (beyond it, Python raises `OverflowError`).
    #[test]
    fn a_touch_of_an_absurd_lifetime_stays_within_pythons_calendar() {
        for lifetime in [Duration::from_secs(1_000_000_000_000), Duration::MAX] {
            let patch = touch("x", 0, lifetime, NOW);
            let written = patch["status"]["x"]["lifetime"].as_i64().unwrap();
            let end = NOW + time::Duration::seconds(written);
            assert!(end <= datetime!(9999-12-31 23:59:59.999999 UTC), "{end}");
            assert!(
                end > datetime!(9999-12-31 23:59:58 UTC),
                "as long as it can be: {end}"
            );
        }
    }

    #[test]
    fn absurd_settings_give_keepalive_intervals_that_a_clock_can_add() {
        let interval = keepalive_interval(Duration::MAX, 5);
        assert!(interval > Duration::from_secs(3600));
        let _ = crate::helpers::deadlines::after(interval);
    }

    #[test]
    fn keepalives_come_5_to_10_seconds_before_the_lifetime_ends_and_at_least_each_second() {
        let secs = |lifetime: u64, jitter: u64| {
            keepalive_interval(Duration::from_secs(lifetime), jitter).as_secs()
        };
        assert_eq!((secs(60, 5), secs(60, 10)), (55, 50));
        assert_eq!((secs(8, 7), secs(8, 10), secs(0, 5)), (1, 1, 1));
    }
}
