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

use std::time::Duration;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use crate::configs::storage::timestamps::{format_iso8601, parse_iso8601};

/// One entry of a peering object's `status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Peer {
    /// The operator's identity (the entry's key).
    pub(crate) id: String,
    pub(crate) priority: i64,
    /// Whole seconds, as on the wire.
    pub(crate) lifetime: i64,
    pub(crate) lastseen: OffsetDateTime,
}

impl Peer {
    /// The entries of a peering object's `status` (Kopf's reader defaults for what is missing
    /// or malformed); none if `status` is not an object.
    pub(crate) fn all(status: &Value, now: OffsetDateTime) -> Vec<Peer> {
        let Some(entries) = status.as_object() else {
            return Vec::new();
        };
        entries
            .iter()
            .filter(|(_, entry)| !entry.is_null())
            .map(|(id, entry)| Peer {
                id: id.clone(),
                priority: entry["priority"].as_i64().unwrap_or(0),
                lifetime: entry["lifetime"]
                    .as_i64()
                    .or_else(|| entry["lifetime"].as_f64().map(|l| l as i64))
                    .unwrap_or(60),
                lastseen: entry["lastseen"]
                    .as_str()
                    .and_then(parse_iso8601)
                    .unwrap_or(now),
            })
            .collect()
    }

    /// When the entry expires.
    pub(crate) fn deadline(&self) -> OffsetDateTime {
        self.lastseen + time::Duration::seconds(self.lifetime)
    }

    /// Whether the entry has expired at `now`.
    pub(crate) fn is_dead(&self, now: OffsetDateTime) -> bool {
        self.deadline() <= now
    }
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

/// The merge patch of a keep-alive: this operator's entry, seen now.
pub(crate) fn touch(id: &str, priority: i64, lifetime: Duration, now: OffsetDateTime) -> Value {
    let lifetime = i64::try_from(lifetime.as_secs()).unwrap_or(i64::MAX);
    let now = now.to_offset(time::UtcOffset::UTC);
    let now = now
        .replace_nanosecond(now.nanosecond() / 1_000 * 1_000)
        .unwrap_or(now);
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
}

impl Judgement {
    /// Judges the `status` of a peering object for the operator `id` of this `priority`.
    /// Its own entry is never a peer; lower priorities pause nobody.
    pub(crate) fn of(status: &Value, id: &str, priority: i64, now: OffsetDateTime) -> Judgement {
        let mut judgement = Judgement::default();
        for peer in Peer::all(status, now) {
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

    #[test]
    fn keepalives_come_5_to_10_seconds_before_the_lifetime_ends_and_at_least_each_second() {
        let secs = |lifetime: u64, jitter: u64| {
            keepalive_interval(Duration::from_secs(lifetime), jitter).as_secs()
        };
        assert_eq!((secs(60, 5), secs(60, 10)), (55, 50));
        assert_eq!((secs(8, 7), secs(8, 10), secs(0, 5)), (1, 1, 1));
    }
}
