//! kubectl's typed commands (`create job`, `create role`, `auth can-i`, `create token`...),
//! which send protobuf bodies: each object is stored exactly as the same command's JSON is.
//!
//! For every `kubectl create KIND NAME ...`, the test also asks kubectl for the JSON it would
//! send (`--dry-run=client -o json`), creates that under a second name with `kubectl create -f`
//! (a JSON body), and compares the two stored objects.

use serde_json::{Value, json};

use crate::kubectl::{Kubectl, setup};

/// The name suffix of the twin created from kubectl's JSON.
const JSON_TWIN: &str = "-from-json";

/// Runs `kubectl create KIND NAME ARGS...` (a protobuf body) and the same with kubectl's JSON
/// under `NAME-from-json`; asserts that both are stored alike and returns the first as stored.
async fn create_both_ways(kubectl: &Kubectl, kind: &str, name: &str, args: &[&str]) -> Value {
    let out = kubectl.ok(&[&["create", kind, name], args].concat()).await;
    assert!(out.trim().ends_with(&format!("/{name} created")), "{out}");

    let twin = format!("{name}{JSON_TWIN}");
    // The flags go before ARGS, which may end with `-- COMMAND`.
    let dry_run = [
        &["create", kind, &twin, "--dry-run=client", "-o", "json"],
        args,
    ]
    .concat();
    let manifest = kubectl.manifest(&format!("{twin}.json"), &kubectl.ok(&dry_run).await);
    kubectl.ok(&["create", "-f", &manifest]).await;

    let from_protobuf = stored(kubectl, kind, name).await;
    let from_json = stored(kubectl, kind, &twin).await;
    let renamed: Value = serde_json::from_str(&from_json.to_string().replace(&twin, name))
        .expect("the renamed object is JSON");
    assert_eq!(
        without_identity(from_protobuf.clone()),
        without_identity(renamed),
        "`kubectl create {kind}` stored a different object from protobuf than from JSON"
    );
    from_protobuf
}

/// `kubectl get KIND NAME -o json`, parsed.
async fn stored(kubectl: &Kubectl, kind: &str, name: &str) -> Value {
    let out = kubectl.ok(&["get", kind, name, "-o", "json"]).await;
    serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("`kubectl get` printed no JSON ({e}): {out}"))
}

/// The object without what differs between any two objects (uid, resourceVersion, times).
fn without_identity(mut object: Value) -> Value {
    let metadata = object["metadata"]
        .as_object_mut()
        .expect("the object has metadata");
    for key in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "managedFields",
    ] {
        metadata.remove(key);
    }
    object
}

/// Jobs and CronJobs, with their pod templates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_jobs_and_cronjobs() {
    let Some((_turn, server, kubectl)) = setup("create_jobs_and_cronjobs").await else {
        return;
    };

    let job = create_both_ways(
        &kubectl,
        "job",
        "hello",
        &["--image=busybox", "--", "echo", "hi"],
    )
    .await;
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["name"], "hello");
    assert_eq!(container["image"], "busybox");
    assert_eq!(container["command"], json!(["echo", "hi"]));
    assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");

    let cronjob = create_both_ways(
        &kubectl,
        "cronjob",
        "tick",
        &["--image=busybox", "--schedule=*/5 * * * *", "--", "date"],
    )
    .await;
    assert_eq!(cronjob["spec"]["schedule"], "*/5 * * * *");
    let template = &cronjob["spec"]["jobTemplate"];
    assert_eq!(template["metadata"]["name"], "tick");
    let container = &template["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["command"], json!(["date"]));
    assert_eq!(
        template["spec"]["template"]["spec"]["restartPolicy"],
        "OnFailure"
    );

    drop(kubectl);
    server.stop().await;
}

/// Roles, ClusterRoles (one aggregated), and their bindings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_rbac_objects() {
    let Some((_turn, server, kubectl)) = setup("create_rbac_objects").await else {
        return;
    };

    let role = create_both_ways(
        &kubectl,
        "role",
        "reader",
        &[
            "--verb=get,list",
            "--resource=pods,configmaps",
            "--resource-name=web",
        ],
    )
    .await;
    assert_eq!(
        role["rules"],
        json!([{
            "apiGroups": [""],
            "resources": ["pods", "configmaps"],
            "resourceNames": ["web"],
            "verbs": ["get", "list"]
        }])
    );

    let binding = create_both_ways(
        &kubectl,
        "rolebinding",
        "readers",
        &[
            "--role=reader",
            "--user=alice",
            "--serviceaccount=default:robot",
        ],
    )
    .await;
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"})
    );
    assert_eq!(
        binding["subjects"],
        json!([
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"},
            {"kind": "ServiceAccount", "name": "robot", "namespace": "default"}
        ])
    );

    let health = create_both_ways(
        &kubectl,
        "clusterrole",
        "health",
        &["--verb=get", "--non-resource-url=/healthz"],
    )
    .await;
    assert_eq!(
        health["rules"],
        json!([{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}])
    );
    let aggregated = create_both_ways(
        &kubectl,
        "clusterrole",
        "monitoring",
        &["--aggregation-rule=rbac.example.com/aggregate-to-monitoring=true"],
    )
    .await;
    assert_eq!(
        aggregated["aggregationRule"],
        json!({"clusterRoleSelectors": [
            {"matchLabels": {"rbac.example.com/aggregate-to-monitoring": "true"}}
        ]})
    );

    create_both_ways(
        &kubectl,
        "clusterrolebinding",
        "health-checkers",
        &["--clusterrole=health", "--group=checkers"],
    )
    .await;

    drop(kubectl);
    server.stop().await;
}

/// PodDisruptionBudgets, PriorityClasses, ResourceQuotas and Ingresses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_policies_and_ingresses() {
    let Some((_turn, server, kubectl)) = setup("create_policies_and_ingresses").await else {
        return;
    };

    let budget = create_both_ways(
        &kubectl,
        "poddisruptionbudget",
        "web",
        &["--selector=app=web", "--min-available=50%"],
    )
    .await;
    assert_eq!(budget["spec"]["minAvailable"], "50%");
    assert_eq!(
        budget["spec"]["selector"],
        json!({"matchLabels": {"app": "web"}})
    );

    let priority = create_both_ways(
        &kubectl,
        "priorityclass",
        "urgent",
        &[
            "--value=1000",
            "--description=for urgent work",
            "--preemption-policy=Never",
        ],
    )
    .await;
    assert_eq!(priority["value"], 1000);
    assert_eq!(priority["description"], "for urgent work");
    assert_eq!(priority["preemptionPolicy"], "Never");

    let quota = create_both_ways(
        &kubectl,
        "quota",
        "small",
        &["--hard=cpu=1,memory=1Gi,pods=2", "--scopes=BestEffort"],
    )
    .await;
    assert_eq!(
        quota["spec"]["hard"],
        json!({"cpu": "1", "memory": "1Gi", "pods": "2"})
    );
    assert_eq!(quota["spec"]["scopes"], json!(["BestEffort"]));

    let ingress = create_both_ways(
        &kubectl,
        "ingress",
        "web",
        &[
            "--class=nginx",
            "--rule=example.com/api*=api:8080,tls=example-cert",
            "--default-backend=fallback:http",
        ],
    )
    .await;
    assert_eq!(ingress["spec"]["ingressClassName"], "nginx");
    assert_eq!(
        ingress["spec"]["rules"],
        json!([{
            "host": "example.com",
            "http": {"paths": [{
                "path": "/api",
                "pathType": "Prefix",
                "backend": {"service": {"name": "api", "port": {"number": 8080}}}
            }]}
        }])
    );
    assert_eq!(
        ingress["spec"]["defaultBackend"],
        json!({"service": {"name": "fallback", "port": {"name": "http"}}})
    );
    assert_eq!(
        ingress["spec"]["tls"],
        json!([{"hosts": ["example.com"], "secretName": "example-cert"}])
    );

    drop(kubectl);
    server.stop().await;
}

/// `kubectl auth can-i` and `auth whoami` (reviews) and `kubectl create token` (a TokenRequest).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_reviews_and_tokens() {
    let Some((_turn, server, kubectl)) = setup("auth_reviews_and_tokens").await else {
        return;
    };

    let out = kubectl.ok(&["auth", "can-i", "create", "pods"]).await;
    assert_eq!(out.trim(), "yes");
    let out = kubectl
        .ok(&[
            "auth",
            "can-i",
            "delete",
            "secrets",
            "--namespace=kube-system",
        ])
        .await;
    assert_eq!(out.trim(), "yes");
    let out = kubectl.ok(&["auth", "can-i", "--list"]).await;
    assert!(out.contains("*.*"), "{out}");

    let out = kubectl.ok(&["auth", "whoami", "-o", "json"]).await;
    let review: Value = serde_json::from_str(&out).expect("whoami prints JSON");
    assert_eq!(review["kind"], "SelfSubjectReview");
    assert!(
        review["status"]["userInfo"]["username"]
            .as_str()
            .is_some_and(|name| !name.is_empty()),
        "{review}"
    );

    let out = kubectl
        .ok(&["create", "token", "default", "--duration=2h", "-o", "json"])
        .await;
    let request: Value = serde_json::from_str(&out).expect("create token prints JSON");
    assert_eq!(request["kind"], "TokenRequest");
    assert_eq!(request["spec"]["expirationSeconds"], 7200);
    assert!(
        request["status"]["token"]
            .as_str()
            .is_some_and(|token| !token.is_empty()),
        "{request}"
    );
    // The requested duration is read from the protobuf body: too short a one is refused.
    let err = kubectl
        .fails(&["create", "token", "default", "--duration=5m"])
        .await;
    assert!(
        err.contains("may not specify a duration less than 10 minutes"),
        "{err}"
    );

    drop(kubectl);
    server.stop().await;
}
