//! Lists: label and field selectors (valid and not), pagination with `limit` and
//! `continue`, the resourceVersion parameters, tables, and cluster-wide lists.

use serde_json::json;

use super::CONFIGMAPS;
use crate::sequence::{Sequence, enc, get, post};

/// Creates ConfigMaps `a`, `b`, `c`, labelled `app` = their name, `tier` = `x` (but `c`) and
/// `seq` = the namespace.
fn labelled(sequence: Sequence) -> Sequence {
    ["a", "b", "c"]
        .into_iter()
        .fold(sequence, |sequence, name| {
            let mut labels = json!({"app": name, "tier": "x", "seq": "{{ns}}"});
            if name == "c" {
                labels = json!({"app": name, "seq": "{{ns}}"});
            }
            sequence.send(
                &format!("create-{name}"),
                post(
                    CONFIGMAPS,
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "labels": labels}, "data": {"n": name}}),
                ),
            )
        })
}

pub(super) fn sequences() -> Vec<Sequence> {
    let list = |query: &str| get(&format!("{CONFIGMAPS}?{query}"));
    let labels = |selector: &str| list(&format!("labelSelector={}", enc(selector)));
    let fields = |selector: &str| list(&format!("fieldSelector={}", enc(selector)));
    vec![
        labelled(Sequence::new("lists/label-selectors"))
            .send("all", list(""))
            .send("equals", labels("app=a"))
            .send("double-equals", labels("app==b"))
            .send("not-equals", labels("app!=a,tier"))
            .send("in", labels("app in (a,c)"))
            .send("notin", labels("app notin (a)"))
            .send("exists", labels("tier"))
            .send("not-exists", labels("!tier"))
            .send("greater", labels("app>1"))
            .send("bad-syntax", labels("app in a"))
            .send("bad-key", labels("-app=a"))
            .send("bad-value", labels("app=a b"))
            .send("empty-in", labels("app in ()")),
        labelled(Sequence::new("lists/field-selectors"))
            .send("name", fields("metadata.name=b"))
            .send("not-name", fields("metadata.name!=b,metadata.name!=kube-root-ca.crt"))
            .send("namespace", fields("metadata.namespace={{ns}}"))
            .send("unsupported", fields("data.n=a"))
            .send("bad-syntax", fields("metadata.name"))
            .send("set-based", fields("metadata.name in (a)"))
            .send(
                "pods-phase",
                get(&format!(
                    "/api/v1/namespaces/{{{{ns}}}}/pods?fieldSelector={}",
                    enc("status.phase=Running,spec.nodeName=")
                )),
            )
            .send(
                "secrets-type",
                get(&format!(
                    "/api/v1/namespaces/{{{{ns}}}}/secrets?fieldSelector={}",
                    enc("type=Opaque")
                )),
            )
            .send(
                "events-involved",
                get(&format!(
                    "/api/v1/namespaces/{{{{ns}}}}/events?fieldSelector={}",
                    enc("involvedObject.kind=Pod")
                )),
            )
            .send(
                "pods-unsupported",
                get(&format!(
                    "/api/v1/namespaces/{{{{ns}}}}/pods?fieldSelector={}",
                    enc("spec.restartPolicy=Always")
                )),
            ),
        labelled(Sequence::new("lists/pagination"))
            .send("page-1", list("limit=2&labelSelector=app"))
            .send("page-2", list("limit=2&labelSelector=app&continue={{page-1.continue}}"))
            .send("limit-0", list("limit=0&labelSelector=app"))
            .send("bad-limit", list("limit=-1"))
            .send("not-a-number", list("limit=many"))
            .send("bad-continue", list("limit=1&continue=bm90IGEgdG9rZW4"))
            .send(
                "continue-with-version",
                list("limit=1&resourceVersion=0&continue={{page-1.continue}}"),
            )
            .send("one", list("limit=1&labelSelector=app")),
        labelled(Sequence::new("lists/versions"))
            .send("any", list("resourceVersion=0&labelSelector=app"))
            .send(
                "not-older",
                list("resourceVersion={{create-c.rv}}&resourceVersionMatch=NotOlderThan&labelSelector=app"),
            )
            .send(
                "exact",
                list("resourceVersion={{create-b.rv}}&resourceVersionMatch=Exact&labelSelector=app"),
            )
            .send("match-without-version", list("resourceVersionMatch=Exact"))
            .send("bad-match", list("resourceVersion=1&resourceVersionMatch=Sometimes"))
            .send("bad-version", list("resourceVersion=abc"))
            .send("exact-zero", list("resourceVersion=0&resourceVersionMatch=Exact")),
        labelled(Sequence::new("lists/tables"))
            .send(
                "table",
                get(&format!("{CONFIGMAPS}?labelSelector=app")).header(
                    "accept",
                    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
                ),
            )
            .send(
                "table-object",
                get(&format!("{CONFIGMAPS}/a")).header(
                    "accept",
                    "application/json;as=Table;v=v1;g=meta.k8s.io",
                ),
            )
            .send(
                "table-no-object",
                get(&format!("{CONFIGMAPS}?labelSelector=app&includeObject=None")).header(
                    "accept",
                    "application/json;as=Table;v=v1;g=meta.k8s.io",
                ),
            )
            .send(
                "metadata-only",
                get(&format!("{CONFIGMAPS}?labelSelector=app")).header(
                    "accept",
                    "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
                ),
            )
            .send(
                "unacceptable",
                get(&format!("{CONFIGMAPS}/a")).header("accept", "application/x-unknown"),
            ),
        labelled(Sequence::new("lists/cluster-wide"))
            .send(
                "all-namespaces",
                get("/api/v1/configmaps?labelSelector=tier%3Dx,seq%3D{{ns}}"),
            )
            .send(
                "namespaces-by-name",
                get("/api/v1/namespaces?fieldSelector=metadata.name%3D{{ns}}"),
            ),
    ]
}
