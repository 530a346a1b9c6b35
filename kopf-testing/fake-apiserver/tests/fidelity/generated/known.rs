//! The differences the project knew of before this suite (issue 49, item 5), being fixed in
//! the fake server elsewhere: what DELETE answers, `pods/log` and `pods/exec` of pods no
//! kubelet runs, TokenRequest validation. Anonymous requests are in `rbac/anonymous`.

use serde_json::json;

use super::{CONFIGMAPS, configmap, crd};
use crate::sequence::{Sequence, call, delete, get, post};

pub(super) fn sequences() -> Vec<Sequence> {
    let pods = "/api/v1/namespaces/{{ns}}/pods";
    let token = "/api/v1/namespaces/{{ns}}/serviceaccounts/default/token";
    let token_request = |spec: serde_json::Value| {
        post(
            token,
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}),
        )
    };
    vec![
        Sequence::new("known/delete-answers")
            .send("configmap", post(CONFIGMAPS, configmap("c", json!({}))))
            .send("delete-configmap", delete(&format!("{CONFIGMAPS}/c")))
            .send(
                "secret",
                post(
                    "/api/v1/namespaces/{{ns}}/secrets",
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
                ),
            )
            .send("delete-secret", delete("/api/v1/namespaces/{{ns}}/secrets/s"))
            .send(
                "account",
                post(
                    "/api/v1/namespaces/{{ns}}/serviceaccounts",
                    json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "a"}}),
                ),
            )
            .send("delete-account", delete("/api/v1/namespaces/{{ns}}/serviceaccounts/a"))
            .send("crd", post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd("gizmos")))
            .established("gizmos.{{u}}.fidelity.example")
            .send(
                "custom",
                post(
                    "/apis/{{u}}.fidelity.example/v1/namespaces/{{ns}}/gizmos",
                    json!({"apiVersion": "{{u}}.fidelity.example/v1", "kind": "Gizmo",
                           "metadata": {"name": "g"}, "spec": {}}),
                ),
            )
            .send(
                "delete-custom",
                delete("/apis/{{u}}.fidelity.example/v1/namespaces/{{ns}}/gizmos/g"),
            )
            .send("delete-missing", delete(&format!("{CONFIGMAPS}/c"))),
        Sequence::new("known/pods-without-kubelet")
            .send(
                "pod",
                post(
                    pods,
                    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
                ),
            )
            .send("log", get(&format!("{pods}/p/log")))
            .send("log-container", get(&format!("{pods}/p/log?container=other")))
            .send("log-missing", get(&format!("{pods}/absent/log")))
            .send(
                "exec",
                call("POST", &format!("{pods}/p/exec?command=true&stdout=true")),
            )
            .send(
                "attach",
                call("POST", &format!("{pods}/p/attach?stdout=true")),
            )
            .send(
                "portforward",
                call("POST", &format!("{pods}/p/portforward?ports=80")),
            )
            .send("proxy", get(&format!("{pods}/p/proxy/"))),
        Sequence::new("known/token-requests")
            .send("valid", token_request(json!({"expirationSeconds": 3600})))
            .send("too-short", token_request(json!({"expirationSeconds": 10})))
            .send("too-long", token_request(json!({"expirationSeconds": 1u64 << 40})))
            .send("audiences", token_request(json!({"audiences": ["a", "b"]})))
            .send(
                "bound-to-missing-pod",
                token_request(json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1",
                                                        "name": "absent"}})),
            )
            .send(
                "bound-to-bad-kind",
                token_request(json!({"boundObjectRef": {"kind": "ConfigMap", "apiVersion": "v1",
                                                        "name": "kube-root-ca.crt"}})),
            )
            .send(
                "wrong-kind",
                post(token, json!({"apiVersion": "v1", "kind": "ConfigMap"})),
            )
            .send("empty", call("POST", token))
            .send("review", post(
                "/apis/authentication.k8s.io/v1/tokenreviews",
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                       "spec": {"token": "{{valid.token}}"}}),
            ))
            .send("review-bad", post(
                "/apis/authentication.k8s.io/v1/tokenreviews",
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                       "spec": {"token": "nope"}}),
            )),
    ]
}
