//! Sharded lists and watches (`shardSelector`, Kubernetes 1.36, KEP-5866, behind the
//! `ShardedListAndWatch` gate that the real server turns on): by namespace (the same shard
//! on both servers, as namespaces are named alike), the whole range, and invalid selectors.

use serde_json::json;

use super::CONFIGMAPS;
use crate::sequence::{Sequence, Until, enc, get, post};

pub(super) fn sequences() -> Vec<Sequence> {
    let sharded = |selector: &str, extra: &str| {
        get(&format!(
            "{CONFIGMAPS}?labelSelector=s&shardSelector={}{extra}",
            enc(selector)
        ))
    };
    let all_by_uid = "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')";
    let all_by_ns = "shardRange(object.metadata.namespace, '0x0', '0x10000000000000000')";
    let none_by_ns = "shardRange(object.metadata.namespace, '0x0', '0x0')";
    let sequence = ["a", "b", "c"]
        .into_iter()
        .fold(Sequence::new("shards/select"), |s, name| {
            s.send(
                &format!("create-{name}"),
                post(
                    CONFIGMAPS,
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "labels": {"s": "1"}}}),
                ),
            )
        });
    vec![
        sequence
            .send("all-by-uid", sharded(all_by_uid, ""))
            .send("all-by-namespace", sharded(all_by_ns, ""))
            .send("none", sharded(none_by_ns, ""))
            .send(
                "two-ranges",
                sharded(
                    &format!("{} || {}", none_by_ns, all_by_ns),
                    "",
                ),
            )
            .send("paged", sharded(all_by_uid, "&limit=2"))
            .send("empty", sharded("", ""))
            .send("bad-function", sharded("hash(object.metadata.uid) < 5", ""))
            .send("bad-field", sharded("shardRange(object.metadata.name, '0x0', '0x1')", ""))
            .send("bad-bounds", sharded("shardRange(object.metadata.uid, '0x10', '0x1')", ""))
            .send("bad-hex", sharded("shardRange(object.metadata.uid, 'zero', '0x1')", ""))
            .watch(
                "watch",
                get(&format!(
                    "{CONFIGMAPS}?watch=true&labelSelector=s&resourceVersion={{{{create-a.rv}}}}&shardSelector={}",
                    enc(all_by_ns)
                )),
                Until::Events(2),
            ),
    ]
}
