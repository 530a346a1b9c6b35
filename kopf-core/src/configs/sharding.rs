//! Assigned shards, the rules without I/O: which virtual shard an object belongs to, the
//! hash range of a shard and the one selector for a set of them, which member each shard
//! should go to, and the Leases that record membership and ownership.
//!
//! The facts:
//! 1. The 64-bit hash space of the objects' uids (FNV-1a, as the API server hashes them for
//!    `shardSelector`) is cut into `count` contiguous ranges, the virtual shards: shard `k`
//!    holds the hashes `h` with `floor(h × count / 2^64) = k`, i.e. `[⌈k × 2^64 / count⌉,
//!    ⌈(k + 1) × 2^64 / count⌉)`. So an object's shard and the server's range filter agree.
//! 2. Targets come from bounded-load rendezvous hashing: each member scores each shard
//!    (FNV-1a of `member/shard`, mixed); the pairs are taken best first, each shard going to the
//!    first member that has fewer than `⌈count / members⌉` shards. It is a pure function of the set
//!    of members: every replica that sees the same members computes the same targets, and a
//!    member joining or leaving moves about `count / members` shards.
//! 3. One Lease per member (its name derived from the member's incarnation, which is unique
//!    per process start) and one per shard (`<name>-<k>`), both labelled with the ring's name;
//!    a shard's `holderIdentity` is its owner's incarnation, its `leaseTransitions` counts
//!    the hand-offs.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::configs::leadership;
use crate::structs::shards::{ShardSelector, fnv1a_64};

/// The label that marks the Leases of one ring of replicas.
pub(crate) const RING_LABEL: &str = "kopf.dev/shard-ring";
/// The label that tells members' Leases (`member`) from shards' (`shard`).
pub(crate) const ROLE_LABEL: &str = "kopf.dev/shard-role";
/// The annotation with the number of virtual shards that a member splits the objects into.
pub(crate) const COUNT_ANNOTATION: &str = "kopf.dev/shards";
/// The most virtual shards a ring may have: each is a Lease, and every round looks at all.
pub(crate) const MAX_SHARDS: u32 = 4096;

/// The virtual shard of an object with this uid.
pub(crate) fn shard_of(uid: &str, count: u32) -> u32 {
    ((u128::from(fnv1a_64(uid.as_bytes())) * u128::from(count)) >> 64) as u32
}

/// Where shard `k` of `count` starts in the hash space (`2^64` for `k = count`).
fn start_of(k: u32, count: u32) -> u128 {
    (u128::from(k) << 64).div_ceil(u128::from(count))
}

/// The one selector of the objects in these shards: adjacent shards joined into one range,
/// the ranges joined by `||`; `None` for no shards.
pub(crate) fn selector(shards: &BTreeSet<u32>, count: u32) -> Option<ShardSelector> {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for &k in shards.iter().filter(|k| **k < count) {
        match ranges.last_mut() {
            Some((_, end)) if *end == k => *end = k + 1,
            _ => ranges.push((k, k + 1)),
        }
    }
    if ranges.is_empty() {
        return None;
    }
    let text = ranges
        .iter()
        .map(|&(first, end)| {
            format!(
                "shardRange(object.metadata.uid, '0x{:016x}', '0x{:016x}')",
                start_of(first, count),
                start_of(end, count)
            )
        })
        .collect::<Vec<_>>()
        .join(" || ");
    Some(ShardSelector::parse(&text).expect("the ranges are well-formed"))
}

/// Which member each shard should go to: indices into `members` (bounded-load rendezvous
/// hashing, fact 2); empty when there are no members.
pub(crate) fn assign(members: &[String], count: u32) -> Vec<usize> {
    if members.is_empty() {
        return Vec::new();
    }
    let capacity = count.div_ceil(members.len() as u32) as usize;
    let mut pairs: Vec<(u64, usize, u32)> = members
        .iter()
        .enumerate()
        .flat_map(|(i, member)| (0..count).map(move |k| (score(member, k), i, k)))
        .collect();
    // The best-scoring pairs first: each shard goes to its best member with room left.
    pairs.sort_unstable_by(|a, b| b.cmp(a));
    let mut load = vec![0usize; members.len()];
    let mut target: Vec<Option<usize>> = vec![None; count as usize];
    for (_, i, k) in pairs {
        if target[k as usize].is_none() && load[i] < capacity {
            target[k as usize] = Some(i);
            load[i] += 1;
        }
    }
    target
        .into_iter()
        .map(|t| t.expect("the members' capacity covers every shard"))
        .collect()
}

/// A member's score for a shard: FNV-1a of `member/shard`, mixed (MurmurHash3's finalizer)
/// so that similar names score independently.
fn score(member: &str, k: u32) -> u64 {
    let mut h = fnv1a_64(format!("{member}/{k}").as_bytes());
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The replicas that split the objects among them: the name and namespace of their Leases,
/// and the number of virtual shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ring {
    pub(crate) name: String,
    pub(crate) namespace: String,
    pub(crate) count: u32,
}

impl Ring {
    /// The name of a shard's Lease.
    pub(crate) fn shard_lease_name(&self, k: u32) -> String {
        format!("{}-{k}", self.name)
    }

    /// The name of a member's Lease: the ring's name and a hash of the incarnation (which may
    /// hold characters that names may not).
    pub(crate) fn member_lease_name(&self, incarnation: &str) -> String {
        format!(
            "{}-member-{:016x}",
            self.name,
            fnv1a_64(incarnation.as_bytes())
        )
    }

    /// The shard that a shard's Lease is for, from its name.
    pub(crate) fn shard_of_lease(&self, lease: &Value) -> Option<u32> {
        lease["metadata"]["name"]
            .as_str()?
            .strip_prefix(self.name.as_str())?
            .strip_prefix('-')?
            .parse()
            .ok()
            .filter(|k| *k < self.count)
    }

    /// A new Lease of the ring, held by `holder`, for a member or a shard (`role`).
    pub(crate) fn lease(
        &self,
        name: &str,
        role: &str,
        holder: &str,
        duration: Duration,
        now: OffsetDateTime,
    ) -> Value {
        json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {RING_LABEL: self.name, ROLE_LABEL: role},
                "annotations": {COUNT_ANNOTATION: self.count.to_string()},
            },
            "spec": leadership::taken(&Value::Null, holder, duration, now),
        })
    }
}

/// The Lease, renewed by its holder (client-go's record: the acquire time and transitions
/// kept).
pub(crate) fn renewed(lease: &Value, duration: Duration, now: OffsetDateTime) -> Value {
    handed(lease, holder(lease).unwrap_or_default(), duration, now)
}

/// The Lease taken by, or handed to, `holder`: one more transition if the holder changes.
pub(crate) fn handed(
    lease: &Value,
    holder: &str,
    duration: Duration,
    now: OffsetDateTime,
) -> Value {
    let mut lease = lease.clone();
    lease["spec"] = leadership::taken(&lease["spec"], holder, duration, now);
    lease
}

/// The Lease with no holder: released, or a member fenced.
pub(crate) fn released(lease: &Value, now: OffsetDateTime) -> Value {
    let mut lease = lease.clone();
    lease["spec"] = leadership::released(&lease["spec"], now);
    lease
}

/// The holder of a Lease: `None` when free.
pub(crate) fn holder(lease: &Value) -> Option<&str> {
    leadership::holder(&lease["spec"])
}

/// The number of virtual shards that a member's Lease announces.
pub(crate) fn count_of(lease: &Value) -> Option<u32> {
    lease["metadata"]["annotations"][COUNT_ANNOTATION]
        .as_str()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("replica-{i}")).collect()
    }

    #[test]
    fn an_objects_shard_agrees_with_the_servers_range_of_it() {
        for count in [1, 2, 3, 7, 16, 32] {
            for i in 0..2000 {
                let uid = format!("uid-{i}");
                let k = shard_of(&uid, count);
                assert!(k < count);
                let object = json!({"metadata": {"uid": uid}});
                let one = selector(&BTreeSet::from([k]), count).unwrap();
                assert!(one.matches(&object), "{uid} in shard {k} of {count}");
                let others: BTreeSet<u32> = (0..count).filter(|x| *x != k).collect();
                if let Some(others) = selector(&others, count) {
                    assert!(!others.matches(&object));
                }
            }
        }
    }

    #[test]
    fn adjacent_shards_make_one_range_and_all_make_the_whole_space() {
        let all = selector(&(0..4).collect(), 4).unwrap();
        assert_eq!(
            all.as_str(),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"
        );
        let some = selector(&BTreeSet::from([0, 1, 3]), 4).unwrap();
        assert_eq!(
            some.as_str(),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')"
        );
        assert!(selector(&BTreeSet::new(), 4).is_none());
    }

    #[test]
    fn the_targets_are_balanced_within_the_bound() {
        for n in 1..=8 {
            let targets = assign(&members(n), 32);
            let mut load = vec![0; n];
            for t in targets {
                load[t] += 1;
            }
            let capacity = 32usize.div_ceil(n);
            assert!(load.iter().all(|l| *l <= capacity), "{n}: {load:?}");
            assert_eq!(load.iter().sum::<usize>(), 32);
        }
    }

    #[test]
    fn a_join_or_a_leave_moves_about_one_nth_of_the_shards() {
        let count = 64;
        for n in 1..8 {
            let before = members(n);
            let after = members(n + 1);
            let a: Vec<&String> = assign(&before, count).iter().map(|&i| &before[i]).collect();
            let b: Vec<&String> = assign(&after, count).iter().map(|&i| &after[i]).collect();
            let moved = a.iter().zip(&b).filter(|(x, y)| x != y).count();
            // Ideally count / (n + 1); the bound on loads costs a few more.
            let ideal = count as usize / (n + 1);
            assert!(moved <= ideal * 3 / 2 + 2, "{n} → {}: {moved} moved", n + 1);
        }
    }

    #[test]
    fn the_targets_do_not_depend_on_who_computes_them() {
        let mut shuffled = members(5);
        shuffled.reverse();
        let mut sorted = shuffled.clone();
        sorted.sort();
        let a: Vec<String> = assign(&sorted, 16)
            .iter()
            .map(|&i| sorted[i].clone())
            .collect();
        let again: Vec<String> = assign(&sorted, 16)
            .iter()
            .map(|&i| sorted[i].clone())
            .collect();
        assert_eq!(a, again);
    }

    #[test]
    fn lease_records_round_trip() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let ring = Ring {
            name: "ring".into(),
            namespace: "ns".into(),
            count: 8,
        };
        let fifteen = Duration::from_secs(15);
        let lease = ring.lease(&ring.shard_lease_name(3), "shard", "me", fifteen, now);
        assert_eq!(holder(&lease), Some("me"));
        assert_eq!(lease["spec"]["leaseDurationSeconds"], 15);
        assert_eq!(count_of(&lease), Some(8));
        assert_eq!(ring.shard_of_lease(&lease), Some(3));
        let handed = handed(&lease, "you", fifteen, now);
        assert_eq!(holder(&handed), Some("you"));
        assert_eq!(handed["spec"]["leaseTransitions"], 1);
        let renewed = renewed(&handed, fifteen, now);
        assert_eq!(holder(&renewed), Some("you"));
        assert_eq!(renewed["spec"]["leaseTransitions"], 1, "kept on a renewal");
        assert_eq!(holder(&released(&renewed, now)), None);
        assert!(ring.member_lease_name("a@b/1").starts_with("ring-member-"));
        assert_eq!(
            ring.shard_of_lease(&ring.lease("ring-member-1", "member", "me", fifteen, now)),
            None
        );
    }
}
