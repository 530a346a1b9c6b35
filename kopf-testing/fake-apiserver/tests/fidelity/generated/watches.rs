//! Watches: from a version (the changes since), from none (the state, then changes), left
//! open while objects change, `sendInitialEvents` ending with its bookmark, `timeoutSeconds`,
//! single objects, bad parameters, versions too new, and too old (`410 Gone` in the stream).

use std::time::Duration;

use serde_json::json;

use super::{CONFIGMAPS, configmap, crd};
use crate::sequence::{Sequence, Until, delete, get, patch, post};

pub(super) fn sequences() -> Vec<Sequence> {
    let watch = |query: &str| get(&format!("{CONFIGMAPS}?watch=true&{query}"));
    let quiet = Until::Quiet(Duration::from_millis(700));
    vec![
        Sequence::new("watches/from-version")
            .send("create", post(CONFIGMAPS, configmap("a", json!({"k": "1"}))))
            .send(
                "change",
                patch(&format!("{CONFIGMAPS}/a"), "application/merge-patch+json", json!({"data": {"k": "2"}})),
            )
            .send("delete", delete(&format!("{CONFIGMAPS}/a")))
            .watch(
                "since-create",
                watch("resourceVersion={{create.rv}}&fieldSelector=metadata.name%3Da"),
                Until::Events(2),
            )
            .watch(
                "since-change",
                watch("resourceVersion={{change.rv}}&fieldSelector=metadata.name%3Da"),
                Until::Events(1),
            ),
        Sequence::new("watches/open-while-writing")
            .send("list", get(&format!("{CONFIGMAPS}?labelSelector=w")))
            .open("watch", watch("resourceVersion={{list.rv}}&labelSelector=w&allowWatchBookmarks=true"))
            .send(
                "create",
                post(
                    CONFIGMAPS,
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "a", "labels": {"w": "1"}}}),
                ),
            )
            .send(
                "unlabel",
                patch(&format!("{CONFIGMAPS}/a"), "application/merge-patch+json",
                      json!({"metadata": {"labels": {"w": null}}})),
            )
            .send(
                "relabel",
                patch(&format!("{CONFIGMAPS}/a"), "application/merge-patch+json",
                      json!({"metadata": {"labels": {"w": "2"}}})),
            )
            .send("delete", delete(&format!("{CONFIGMAPS}/a")))
            .read("watch", Until::Events(4)),
        Sequence::new("watches/initial-state")
            .send(
                "create-a",
                post(CONFIGMAPS, json!({"apiVersion": "v1", "kind": "ConfigMap",
                                        "metadata": {"name": "a", "labels": {"i": "1"}}})),
            )
            .send(
                "create-b",
                post(CONFIGMAPS, json!({"apiVersion": "v1", "kind": "ConfigMap",
                                        "metadata": {"name": "b", "labels": {"i": "1"}}})),
            )
            .watch("no-version", watch("labelSelector=i"), quiet.clone())
            .watch("version-0", watch("labelSelector=i&resourceVersion=0"), quiet.clone())
            .watch(
                "initial-events",
                watch("labelSelector=i&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"),
                Until::InitialEventsEnd,
            )
            .watch(
                "initial-events-no-bookmarks",
                watch("labelSelector=i&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"),
                quiet.clone(),
            )
            .watch(
                "initial-events-no-match",
                watch("labelSelector=i&sendInitialEvents=true&allowWatchBookmarks=true"),
                quiet.clone(),
            )
            .watch(
                "no-initial-events",
                watch("labelSelector=i&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"),
                quiet.clone(),
            ),
        Sequence::new("watches/ends")
            .send("create", post(CONFIGMAPS, configmap("a", json!({}))))
            .watch(
                "timeout",
                watch("resourceVersion={{create.rv}}&timeoutSeconds=1"),
                Until::Closed,
            )
            .watch(
                "single-object",
                get("/api/v1/watch/namespaces/{{ns}}/configmaps/a"),
                quiet.clone(),
            )
            .watch("bad-selector", watch("labelSelector=a%20in%20b"), quiet.clone())
            .watch("bad-version", watch("resourceVersion=abc"), quiet.clone())
            .watch(
                "too-new",
                watch("resourceVersion=999999999&timeoutSeconds=5"),
                Until::Closed,
            )
            .watch("bad-timeout", watch("timeoutSeconds=soon"), quiet.clone())
            .watch("post", crate::sequence::call("POST", &format!("{CONFIGMAPS}?watch=true")).json(json!({})), quiet),
        Sequence::new("watches/too-old")
            .send("before", get(&format!("{CONFIGMAPS}?labelSelector=none")))
            .send("crd", post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd("olds")))
            .established("olds.{{u}}.fidelity.example")
            .send(
                "create",
                post(
                    "/apis/{{u}}.fidelity.example/v1/namespaces/{{ns}}/olds",
                    json!({"apiVersion": "{{u}}.fidelity.example/v1", "kind": "Old",
                           "metadata": {"name": "o"}, "spec": {}}),
                ),
            )
            .forget()
            .watch(
                "from-before",
                get("/apis/{{u}}.fidelity.example/v1/namespaces/{{ns}}/olds?watch=true&resourceVersion={{before.rv}}"),
                Until::Closed,
            )
            .send(
                "list-from-before",
                get("/apis/{{u}}.fidelity.example/v1/namespaces/{{ns}}/olds?resourceVersion={{before.rv}}&resourceVersionMatch=NotOlderThan"),
            ),
    ]
}
