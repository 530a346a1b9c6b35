//! RBAC: a ServiceAccount's token (from a TokenRequest) without and then with a Role bound
//! to it: the `403` bodies, `SelfSubjectAccessReview`s and `SelfSubjectRulesReview`s,
//! ClusterRoles through RoleBindings, and what anonymous requests may see.

use serde_json::json;

use super::CONFIGMAPS;
use crate::sequence::{Condition, Sequence, Who, get, post};

/// A TokenRequest for the ServiceAccount `name`.
fn token_request(name: &str) -> crate::sequence::Call {
    post(
        &format!("/api/v1/namespaces/{{{{ns}}}}/serviceaccounts/{name}/token"),
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
               "spec": {"expirationSeconds": 3600}}),
    )
}

fn access_review(verb: &str, resource: &str) -> serde_json::Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
           "spec": {"resourceAttributes": {"namespace": "{{ns}}", "verb": verb,
                                           "resource": resource}}})
}

pub(super) fn sequences() -> Vec<Sequence> {
    let reviews = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    vec![
        Sequence::new("rbac/service-account")
            .send(
                "account",
                post(
                    "/api/v1/namespaces/{{ns}}/serviceaccounts",
                    json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "op"}}),
                ),
            )
            .send("token", token_request("op"))
            .send("list-forbidden", get(CONFIGMAPS).with_token_of("token"))
            .send(
                "get-forbidden",
                get(&format!("{CONFIGMAPS}/kube-root-ca.crt")).with_token_of("token"),
            )
            .send(
                "create-forbidden",
                post(CONFIGMAPS, json!({"apiVersion": "v1", "kind": "ConfigMap",
                                        "metadata": {"name": "x"}}))
                .with_token_of("token"),
            )
            .send(
                "cluster-forbidden",
                get("/api/v1/namespaces").with_token_of("token"),
            )
            .send(
                "crd-forbidden",
                get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions").with_token_of("token"),
            )
            .send(
                "review-denied",
                post(reviews, access_review("list", "configmaps")).with_token_of("token"),
            )
            .send(
                "rules",
                post(
                    "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                           "spec": {"namespace": "{{ns}}"}}),
                )
                .with_token_of("token"),
            )
            .send(
                "whoami",
                post(
                    "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
                )
                .with_token_of("token"),
            )
            .send("discovery", get("/api").with_token_of("token"))
            .send("version", get("/version").with_token_of("token"))
            .send(
                "role",
                post(
                    "/apis/rbac.authorization.k8s.io/v1/namespaces/{{ns}}/roles",
                    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                           "metadata": {"name": "reader"},
                           "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                                      "verbs": ["get", "list", "watch"]}]}),
                ),
            )
            .send(
                "binding",
                post(
                    "/apis/rbac.authorization.k8s.io/v1/namespaces/{{ns}}/rolebindings",
                    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                           "metadata": {"name": "reader"},
                           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                       "name": "reader"},
                           "subjects": [{"kind": "ServiceAccount", "name": "op",
                                         "namespace": "{{ns}}"}]}),
                ),
            )
            .poll(
                "list-allowed",
                get(&format!("{CONFIGMAPS}?fieldSelector=metadata.name%3Dkube-root-ca.crt"))
                    .with_token_of("token"),
                Condition::Code(200),
            )
            .send(
                "create-still-forbidden",
                post(CONFIGMAPS, json!({"apiVersion": "v1", "kind": "ConfigMap",
                                        "metadata": {"name": "x"}}))
                .with_token_of("token"),
            )
            .send(
                "review-allowed",
                post(reviews, access_review("list", "configmaps")).with_token_of("token"),
            )
            .send(
                "review-other-verb",
                post(reviews, access_review("delete", "configmaps")).with_token_of("token"),
            )
            .send(
                "rules-granted",
                post(
                    "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                           "spec": {"namespace": "{{ns}}"}}),
                )
                .with_token_of("token"),
            )
            .send("bad-token", get(CONFIGMAPS).who(Who::Token("not-a-token".into()))),
        Sequence::new("rbac/cluster-role")
            .send(
                "account",
                post(
                    "/api/v1/namespaces/{{ns}}/serviceaccounts",
                    json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "op"}}),
                ),
            )
            .send("token", token_request("op"))
            .send(
                "cluster-role",
                post(
                    "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                           "metadata": {"name": "{{u}}-secrets"},
                           "rules": [{"apiGroups": [""], "resources": ["secrets"],
                                      "resourceNames": ["s"], "verbs": ["get"]}]}),
                ),
            )
            .send(
                "binding",
                post(
                    "/apis/rbac.authorization.k8s.io/v1/namespaces/{{ns}}/rolebindings",
                    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                           "metadata": {"name": "secrets"},
                           "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                       "kind": "ClusterRole", "name": "{{u}}-secrets"},
                           "subjects": [{"kind": "ServiceAccount", "name": "op",
                                         "namespace": "{{ns}}"}]}),
                ),
            )
            .poll(
                "get-named",
                get("/api/v1/namespaces/{{ns}}/secrets/s").with_token_of("token"),
                Condition::Code(404),
            )
            .send(
                "get-other-name",
                get("/api/v1/namespaces/{{ns}}/secrets/t").with_token_of("token"),
            )
            .send(
                "list-by-name",
                get("/api/v1/namespaces/{{ns}}/secrets?fieldSelector=metadata.name%3Ds")
                    .with_token_of("token"),
            )
            .send(
                "bad-role-ref",
                post(
                    "/apis/rbac.authorization.k8s.io/v1/namespaces/{{ns}}/rolebindings",
                    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                           "metadata": {"name": "bad"},
                           "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                       "kind": "Secret", "name": "x"},
                           "subjects": []}),
                ),
            )
            .send(
                "token-for-missing-account",
                token_request("absent"),
            ),
        Sequence::new("rbac/anonymous")
            .send("version", get("/version").who(Who::Anonymous))
            .send("healthz", get("/healthz").who(Who::Anonymous))
            .send("readyz", get("/readyz").who(Who::Anonymous))
            .send("discovery", get("/api").who(Who::Anonymous))
            .send("configmaps", get(CONFIGMAPS).who(Who::Anonymous))
            .send("namespace", get("/api/v1/namespaces/{{ns}}").who(Who::Anonymous)),
    ]
}
