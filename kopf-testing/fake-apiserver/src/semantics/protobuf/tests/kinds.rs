//! Each decodable kind, as client-go encodes it, comes out as the JSON the same client sends.

use super::*;

/// A namespace as `kubectl create namespace` sends it.
#[test]
fn namespace() {
    let raw = Enc::new()
        .msg(1, meta("demo"))
        .msg(2, Enc::new())
        .msg(3, Enc::new().str(1, ""));
    check(
        &body("v1", "Namespace", raw),
        json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "demo"},
            "spec": {},
            "status": {}
        }),
    );
}

/// A config map: sorted map keys, zero pointer kept, zero strings dropped.
#[test]
fn config_map_with_data_and_labels() {
    let raw = Enc::new()
        .msg(
            1,
            meta("settings")
                .str(3, "default")
                .entry(11, "tier", b"backend")
                .entry(11, "app", b"web")
                .entry(12, "note", b""),
        )
        .entry(2, "b.txt", b"two")
        .entry(2, "a.txt", b"one")
        .entry(3, "blob", &[0, 1, 2])
        .varint(4, 0);
    check(
        &body("v1", "ConfigMap", raw),
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "settings",
                "namespace": "default",
                "labels": {"app": "web", "tier": "backend"},
                "annotations": {"note": ""}
            },
            "immutable": false,
            "data": {"a.txt": "one", "b.txt": "two"},
            "binaryData": {"blob": "AAEC"}
        }),
    );
}

/// A secret: bytes values as base64, unknown fields of every wire type skipped.
#[test]
fn secret_with_bytes_and_unknown_fields() {
    let raw = Enc::new()
        .msg(1, meta("creds"))
        .entry(2, "password", b"s3cr\xff")
        .msg(2, Enc::new().str(1, "empty"))
        .str(3, "Opaque")
        .fixed32(90, 7)
        .fixed64(91, 8)
        .varint(92, 9)
        .str(93, "ignored");
    check(
        &body("v1", "Secret", raw),
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds"},
            "data": {"empty": "", "password": "czNjcv8="},
            "type": "Opaque"
        }),
    );
}

/// A deployment with a pod template, IntOrString, quantities, an inline selector name and a
/// zero status (kept as `{}`, as Go's JSON encoder writes it).
#[test]
fn deployment_with_template_and_int_or_string() {
    let container = Enc::new()
        .str(1, "web")
        .str(2, "nginx:1.27")
        .str(5, "")
        .msg(
            6,
            Enc::new()
                .str(1, "")
                .varint(2, 0)
                .varint(3, 80)
                .str(4, "TCP")
                .str(5, ""),
        )
        .msg(
            7,
            Enc::new().str(1, "TOKEN").str(2, "").msg(
                3,
                Enc::new().msg(
                    4,
                    Enc::new()
                        .msg(1, Enc::new().str(1, "creds"))
                        .str(2, "token"),
                ),
            ),
        )
        .msg(7, Enc::new().str(1, "MODE").str(2, "fast"))
        .msg(
            8,
            Enc::new()
                .msg(
                    1,
                    Enc::new().str(1, "cpu").msg(2, Enc::new().str(1, "500m")),
                )
                .msg(
                    2,
                    Enc::new()
                        .str(1, "memory")
                        .msg(2, Enc::new().str(1, "64Mi")),
                ),
        )
        .str(13, "")
        .str(14, "")
        .varint(16, 0);
    let template = Enc::new().msg(1, meta("").entry(11, "app", b"web")).msg(
        2,
        Enc::new()
            .msg(2, container)
            .str(3, "")
            .str(6, "")
            .int(4, 30)
            .str(8, "")
            .str(10, "")
            .varint(11, 0),
    );
    let spec = Enc::new()
        .varint(1, 3)
        .msg(2, Enc::new().entry(1, "app", b"web"))
        .msg(3, template)
        .msg(
            4,
            Enc::new().str(1, "RollingUpdate").msg(
                2,
                Enc::new()
                    .msg(1, int_or_string_int(1))
                    .msg(2, int_or_string_str("25%")),
            ),
        )
        .varint(5, 0)
        .varint(6, 10)
        .varint(7, 0)
        .varint(9, 600);
    let raw = Enc::new()
        .msg(1, meta("web").str(3, "default"))
        .msg(2, spec)
        .msg(3, Enc::new().varint(1, 0));
    check(
        &body("apps/v1", "Deployment", raw),
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [{
                            "name": "web",
                            "image": "nginx:1.27",
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "env": [
                                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
                                {"name": "MODE", "value": "fast"}
                            ],
                            "resources": {"limits": {"cpu": "500m"}, "requests": {"memory": "64Mi"}}
                        }],
                        "terminationGracePeriodSeconds": 30
                    }
                },
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "25%"}
                },
                "revisionHistoryLimit": 10,
                "progressDeadlineSeconds": 600
            },
            "status": {}
        }),
    );
}

/// A lease: MicroTime with microseconds truncated, zero pointer ints kept.
#[test]
fn lease_with_micro_time() {
    let spec = Enc::new()
        .str(1, "node-a")
        .varint(2, 15)
        .msg(
            3,
            Enc::new().varint(1, 1_704_164_645).varint(2, 123_456_789),
        )
        .msg(4, Enc::new().varint(1, 1_704_164_645))
        .varint(5, 0);
    let raw = Enc::new()
        .msg(1, meta("leader").str(3, "kube-system"))
        .msg(2, spec);
    check(
        &body("coordination.k8s.io/v1", "Lease", raw),
        json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "leader", "namespace": "kube-system"},
            "spec": {
                "holderIdentity": "node-a",
                "leaseDurationSeconds": 15,
                "acquireTime": "2024-01-02T03:04:05.123456Z",
                "renewTime": "2024-01-02T03:04:05.000000Z",
                "leaseTransitions": 0
            }
        }),
    );
}

/// ObjectMeta: Time drops nanoseconds, owner references, fieldsV1 embedded as JSON.
#[test]
fn object_meta_times_owners_and_managed_fields() {
    let owner = Enc::new()
        .str(1, "ReplicaSet")
        .str(3, "web-123")
        .str(4, "uid-1")
        .str(5, "apps/v1")
        .varint(6, 1);
    let managed = Enc::new()
        .str(1, "kubectl")
        .str(2, "Update")
        .str(3, "v1")
        .msg(4, Enc::new().varint(1, 1_704_164_645).varint(2, 999))
        .str(6, "FieldsV1")
        .msg(7, Enc::new().bytes(1, br#"{"f:data":{".":{}}}"#))
        .str(8, "");
    let metadata = meta("x")
        .str(5, "0b5e")
        .str(6, "42")
        .varint(7, 3)
        .msg(8, Enc::new().varint(1, 1_704_164_645).varint(2, 5))
        .int(10, 0)
        .msg(13, owner)
        .str(14, "example.com/cleanup")
        .msg(17, managed);
    check(
        &body("v1", "ConfigMap", Enc::new().msg(1, metadata)),
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "x",
                "uid": "0b5e",
                "resourceVersion": "42",
                "generation": 3,
                "creationTimestamp": "2024-01-02T03:04:05Z",
                "deletionGracePeriodSeconds": 0,
                "ownerReferences": [{
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-123",
                    "uid": "uid-1",
                    "controller": true
                }],
                "finalizers": ["example.com/cleanup"],
                "managedFields": [{
                    "manager": "kubectl",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2024-01-02T03:04:05Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {".": {}}}
                }]
            }
        }),
    );
}

/// A service (string and zero targetPort) and a service account.
#[test]
fn service_and_service_account() {
    let port = Enc::new()
        .str(1, "http")
        .str(2, "TCP")
        .varint(3, 80)
        .msg(4, int_or_string_str("web"))
        .varint(5, 0);
    let zero_target = Enc::new()
        .str(1, "")
        .str(2, "UDP")
        .varint(3, 53)
        .msg(4, int_or_string_int(0));
    let spec = Enc::new()
        .msg(1, port)
        .msg(1, zero_target)
        .entry(2, "app", b"web")
        .str(3, "None")
        .str(18, "None")
        .str(4, "ClusterIP")
        .str(7, "None")
        .str(10, "")
        .varint(13, 0)
        .str(19, "IPv4")
        .str(17, "SingleStack")
        .varint(20, 1);
    check(
        &body(
            "v1",
            "Service",
            Enc::new()
                .msg(1, meta("web"))
                .msg(2, spec)
                .msg(3, Enc::new()),
        ),
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {
                "ports": [
                    {"name": "http", "protocol": "TCP", "port": 80, "targetPort": "web"},
                    {"protocol": "UDP", "port": 53}
                ],
                "selector": {"app": "web"},
                "clusterIP": "None",
                "clusterIPs": ["None"],
                "type": "ClusterIP",
                "sessionAffinity": "None",
                "ipFamilies": ["IPv4"],
                "ipFamilyPolicy": "SingleStack",
                "allocateLoadBalancerNodePorts": true
            }
        }),
    );
    let sa = Enc::new()
        .msg(1, meta("robot"))
        .msg(2, Enc::new().str(1, "Secret").str(3, "robot-token"))
        .msg(3, Enc::new().str(1, "registry"))
        .varint(4, 0);
    check(
        &body("v1", "ServiceAccount", sa),
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "robot"},
            "secrets": [{"kind": "Secret", "name": "robot-token"}],
            "imagePullSecrets": [{"name": "registry"}],
            "automountServiceAccountToken": false
        }),
    );
}

/// A pod: inline volume sources and probe handler, packed and unpacked repeated ints.
#[test]
fn pod_with_volumes_probes_and_packed_ints() {
    let mut packed = Enc::new();
    packed.raw_varint(1000);
    packed.raw_varint(2000);
    let security = Enc::new().varint(2, 1000).bytes(4, &packed.0).int(4, 3000);
    let probe = Enc::new()
        .msg(
            1,
            Enc::new().msg(
                2,
                Enc::new()
                    .str(1, "/healthz")
                    .msg(2, int_or_string_int(8080))
                    .str(3, "")
                    .str(4, "HTTP"),
            ),
        )
        .varint(2, 5)
        .varint(3, 0);
    let container = Enc::new()
        .str(1, "app")
        .str(2, "busybox")
        .str(3, "sh")
        .str(3, "-c")
        .str(4, "sleep 1")
        .msg(9, Enc::new().str(1, "data").varint(2, 1).str(3, "/data"))
        .msg(10, probe)
        .int(99, -1);
    let volumes = [
        Enc::new().str(1, "data").msg(
            2,
            Enc::new().msg(2, Enc::new().str(1, "").msg(2, Enc::new().str(1, "1Gi"))),
        ),
        Enc::new().str(1, "cfg").msg(
            2,
            Enc::new().msg(
                19,
                Enc::new().msg(1, Enc::new().str(1, "settings")).int(3, 420),
            ),
        ),
    ];
    let mut spec = Enc::new();
    for volume in volumes {
        spec = spec.msg(1, volume);
    }
    let spec = spec
        .msg(2, container)
        .str(3, "Never")
        .str(6, "ClusterFirst")
        .str(8, "robot")
        .str(10, "node-1")
        .str(19, "default-scheduler")
        .msg(14, security)
        .int(25, -5);
    check(
        &body("v1", "Pod", Enc::new().msg(1, meta("p")).msg(2, spec)),
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {
                "volumes": [
                    {"name": "data", "emptyDir": {"sizeLimit": "1Gi"}},
                    {"name": "cfg", "configMap": {"name": "settings", "defaultMode": 420}}
                ],
                "containers": [{
                    "name": "app",
                    "image": "busybox",
                    "command": ["sh", "-c"],
                    "args": ["sleep 1"],
                    "volumeMounts": [{"name": "data", "readOnly": true, "mountPath": "/data"}],
                    "livenessProbe": {
                        "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                        "initialDelaySeconds": 5
                    }
                }],
                "restartPolicy": "Never",
                "dnsPolicy": "ClusterFirst",
                "serviceAccountName": "robot",
                "nodeName": "node-1",
                "securityContext": {"runAsUser": 1000, "supplementalGroups": [1000, 2000, 3000]},
                "schedulerName": "default-scheduler",
                "priority": -5
            }
        }),
    );
}

/// int32 values keep Go's low 32 bits, negative ones included.
#[test]
fn negative_int32_keeps_low_bits() {
    let spec = Enc::new().int(2, -1).varint(5, 0x1_0000_0007);
    check(
        &body("coordination.k8s.io/v1", "Lease", Enc::new().msg(2, spec)),
        json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "spec": {"leaseDurationSeconds": -1, "leaseTransitions": 7}
        }),
    );
}
