//! Kinds whose schemas are generated from `k8s.io/api`, as client-go encodes them.

use super::*;

/// A Job as `kubectl create job` sends it: zero pointers kept, zero non-pointer scalars of
/// `omitempty` fields dropped, packed int32 lists, and an empty status kept as `{}`.
#[test]
fn job_with_failure_policy_and_template() {
    let template = Enc::new().msg(1, meta("")).msg(
        2,
        Enc::new()
            .msg(
                2,
                Enc::new().str(1, "hello").str(2, "busybox").str(3, "echo"),
            )
            .str(3, "Never"),
    );
    let rule = Enc::new().str(1, "FailJob").msg(
        2,
        Enc::new()
            .str(1, "hello")
            .str(2, "In")
            .bytes(3, &[1, 42, 0x80, 0x01]),
    );
    let spec = Enc::new()
        .varint(1, 0)
        .msg(6, template)
        .msg(11, Enc::new().msg(1, rule))
        .str(9, "NonIndexed");
    let status = Enc::new().varint(4, 0).varint(5, 0).str(7, "");
    let raw = Enc::new().msg(1, meta("hello")).msg(2, spec).msg(3, status);
    check(
        &body("batch/v1", "Job", raw),
        json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "hello"},
            "spec": {
                "parallelism": 0,
                "podFailurePolicy": {"rules": [{
                    "action": "FailJob",
                    "onExitCodes": {"containerName": "hello", "operator": "In", "values": [1, 42, 128]}
                }]},
                "template": {
                    "metadata": {},
                    "spec": {
                        "containers": [{"name": "hello", "image": "busybox", "command": ["echo"]}],
                        "restartPolicy": "Never"
                    }
                },
                "completionMode": "NonIndexed"
            },
            "status": {}
        }),
    );
}

/// An aggregated ClusterRole and a RoleBinding: a non-`omitempty` empty string is kept.
#[test]
fn cluster_role_and_role_binding() {
    let selector = Enc::new().entry(1, "rbac.example.com/aggregate", b"true");
    let raw = Enc::new()
        .msg(1, meta("monitoring"))
        .msg(
            2,
            Enc::new()
                .str(1, "get")
                .str(5, "/healthz")
                .str(5, "/readyz"),
        )
        .msg(3, Enc::new().msg(1, selector));
    check(
        &body("rbac.authorization.k8s.io/v1", "ClusterRole", raw),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "monitoring"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz"]}],
            "aggregationRule": {"clusterRoleSelectors": [
                {"matchLabels": {"rbac.example.com/aggregate": "true"}}
            ]}
        }),
    );

    let raw = Enc::new()
        .msg(1, meta("readers").str(3, "default"))
        .msg(
            2,
            Enc::new()
                .str(1, "ServiceAccount")
                .str(2, "")
                .str(3, "robot")
                .str(4, "default"),
        )
        .msg(
            3,
            Enc::new().str(1, "").str(2, "ClusterRole").str(3, "view"),
        );
    check(
        &body("rbac.authorization.k8s.io/v1", "RoleBinding", raw),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "readers", "namespace": "default"},
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "default"}],
            "roleRef": {"apiGroup": "", "kind": "ClusterRole", "name": "view"}
        }),
    );
}

/// A SubjectAccessReview: user extras as sorted lists, `allowed: false` kept.
#[test]
fn subject_access_review_with_extra() {
    let extra_value = |items: &[&str]| {
        items
            .iter()
            .fold(Enc::new(), |enc, item| enc.str(1, item))
            .0
    };
    let spec = Enc::new()
        .msg(
            1,
            Enc::new()
                .str(1, "default")
                .str(2, "create")
                .str(3, "")
                .str(5, "pods"),
        )
        .str(3, "alice")
        .str(4, "devs")
        .entry(5, "scopes", &extra_value(&["read", "write"]))
        .entry(5, "empty", &[]);
    let status = Enc::new().varint(1, 0).varint(4, 0).str(2, "");
    let raw = Enc::new().msg(1, meta("")).msg(2, spec).msg(3, status);
    check(
        &body("authorization.k8s.io/v1", "SubjectAccessReview", raw),
        json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "metadata": {},
            "spec": {
                "resourceAttributes": {"namespace": "default", "verb": "create", "resource": "pods"},
                "user": "alice",
                "groups": ["devs"],
                "extra": {"empty": [], "scopes": ["read", "write"]}
            },
            "status": {"allowed": false}
        }),
    );
}

/// An Ingress: the rule's embedded IngressRuleValue is inlined, as Go's JSON encoder does.
#[test]
fn ingress_inlines_the_rule_value() {
    let backend = Enc::new().msg(
        4,
        Enc::new()
            .str(1, "api")
            .msg(2, Enc::new().str(1, "").varint(2, 8080)),
    );
    let path = Enc::new().str(1, "/api").str(3, "Prefix").msg(2, backend);
    let rule = Enc::new()
        .str(1, "example.com")
        .msg(2, Enc::new().msg(1, Enc::new().msg(1, path)));
    let raw = Enc::new()
        .msg(1, meta("web"))
        .msg(2, Enc::new().str(4, "nginx").msg(3, rule))
        .msg(3, Enc::new().msg(1, Enc::new()));
    check(
        &body("networking.k8s.io/v1", "Ingress", raw),
        json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {"name": "web"},
            "spec": {
                "ingressClassName": "nginx",
                "rules": [{
                    "host": "example.com",
                    "http": {"paths": [{
                        "path": "/api",
                        "pathType": "Prefix",
                        "backend": {"service": {"name": "api", "port": {"number": 8080}}}
                    }]}
                }]
            },
            "status": {"loadBalancer": {}}
        }),
    );
}

/// A ResourceQuota with quantities and a scope selector, and an Eviction with delete options.
#[test]
fn resource_quota_and_eviction() {
    let quantity = |q: &str| Enc::new().str(1, q).0;
    let spec = Enc::new()
        .entry(1, "pods", &quantity("2"))
        .entry(1, "cpu", &quantity("500m"))
        .msg(
            3,
            Enc::new().msg(
                1,
                Enc::new()
                    .str(1, "PriorityClass")
                    .str(2, "In")
                    .str(3, "high"),
            ),
        );
    check(
        &body(
            "v1",
            "ResourceQuota",
            Enc::new().msg(1, meta("small")).msg(2, spec),
        ),
        json!({
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "small"},
            "spec": {
                "hard": {"cpu": "500m", "pods": "2"},
                "scopeSelector": {"matchExpressions": [
                    {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}
                ]}
            }
        }),
    );

    let options = Enc::new().varint(1, 0).str(5, "All");
    check(
        &body(
            "policy/v1",
            "Eviction",
            Enc::new()
                .msg(1, meta("web-1").str(3, "default"))
                .msg(2, options),
        ),
        json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": "web-1", "namespace": "default"},
            "deleteOptions": {"gracePeriodSeconds": 0, "dryRun": ["All"]}
        }),
    );
}
