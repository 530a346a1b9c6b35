//! The built-in catalog as real clients see it: every resource a default cluster serves, the
//! objects it boots with, defaults and initial status, allocated addresses, and the reviews
//! behind `kubectl auth`.

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kopf_fake_apiserver::FakeApiServer;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::kubectl::setup;
use crate::support::{self, DEADLINE};

#[tokio::test]
async fn kubectl_sees_the_whole_catalog_and_the_objects_a_cluster_boots_with() {
    let Some((_turn, _server, kubectl)) = setup("catalog_kubectl_resources").await else {
        return;
    };
    let resources = kubectl.ok(&["api-resources", "-o", "name"]).await;
    for expected in [
        "nodes",
        "persistentvolumes",
        "replicationcontrollers",
        "componentstatuses",
        "jobs.batch",
        "cronjobs.batch",
        "daemonsets.apps",
        "statefulsets.apps",
        "replicasets.apps",
        "endpointslices.discovery.k8s.io",
        "ingresses.networking.k8s.io",
        "poddisruptionbudgets.policy",
        "storageclasses.storage.k8s.io",
        "priorityclasses.scheduling.k8s.io",
        "runtimeclasses.node.k8s.io",
        "certificatesigningrequests.certificates.k8s.io",
        "apiservices.apiregistration.k8s.io",
        "tokenreviews.authentication.k8s.io",
        "selfsubjectaccessreviews.authorization.k8s.io",
        "horizontalpodautoscalers.autoscaling",
    ] {
        assert!(
            resources.lines().any(|line| line == expected),
            "{expected} is served: {resources}"
        );
    }
    assert!(kubectl.ok(&["get", "nodes"]).await.is_empty());
    let namespaces = kubectl.ok(&["get", "namespaces", "-o", "name"]).await;
    for namespace in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(namespaces.contains(&format!("namespace/{namespace}\n")));
    }
    let service = kubectl
        .ok(&[
            "get",
            "service",
            "kubernetes",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ])
        .await;
    assert_eq!(service, "10.96.0.1");
    let roles = kubectl.ok(&["get", "clusterroles", "-o", "name"]).await;
    for role in ["cluster-admin", "admin", "edit", "view"] {
        assert!(roles.contains(&format!("clusterrole.rbac.authorization.k8s.io/{role}\n")));
    }
    // Every namespace, new ones too, gets its ServiceAccount and CA bundle.
    kubectl.ok(&["create", "namespace", "fresh"]).await;
    let seeded = kubectl
        .ok(&[
            "get",
            "serviceaccounts,configmaps",
            "-n",
            "fresh",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(
        seeded, "serviceaccount/default\nconfigmap/kube-root-ca.crt\n",
        "{seeded}"
    );
}

#[tokio::test]
async fn kubectl_creates_workloads_that_come_back_defaulted() {
    let Some((_turn, _server, kubectl)) = setup("catalog_kubectl_workloads").await else {
        return;
    };
    kubectl
        .ok(&[
            "create",
            "job",
            "hello",
            "--image=busybox:1.36",
            "--",
            "echo",
            "hi",
        ])
        .await;
    let job: Value =
        serde_json::from_str(&kubectl.ok(&["get", "job", "hello", "-o", "json"]).await).unwrap();
    assert_eq!(job["spec"]["backoffLimit"], 6, "{job}");
    assert_eq!(job["spec"]["completionMode"], "NonIndexed");
    assert_eq!(job["metadata"]["generation"], 1);
    let template = &job["spec"]["template"]["spec"];
    assert_eq!(template["dnsPolicy"], "ClusterFirst");
    assert_eq!(template["containers"][0]["imagePullPolicy"], "IfNotPresent");

    kubectl
        .ok(&[
            "create",
            "cronjob",
            "tick",
            "--image=busybox",
            "--schedule=*/5 * * * *",
        ])
        .await;
    let limit = kubectl
        .ok(&[
            "get",
            "cronjob",
            "tick",
            "-o",
            "jsonpath={.spec.successfulJobsHistoryLimit}",
        ])
        .await;
    assert_eq!(limit, "3");

    kubectl
        .ok(&[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=2",
        ])
        .await;
    let deployment: Value = serde_json::from_str(
        &kubectl
            .ok(&["get", "deployment", "web", "-o", "json"])
            .await,
    )
    .unwrap();
    assert_eq!(deployment["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(
        deployment["spec"]["strategy"]["rollingUpdate"]["maxSurge"],
        "25%"
    );
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "Always"
    );
    kubectl
        .ok(&["scale", "deployment", "web", "--replicas=3"])
        .await;

    kubectl
        .ok(&["create", "service", "nodeport", "edge", "--tcp=80:8080"])
        .await;
    let service: Value =
        serde_json::from_str(&kubectl.ok(&["get", "service", "edge", "-o", "json"]).await).unwrap();
    let ip = service["spec"]["clusterIP"].as_str().unwrap();
    assert!(ip.starts_with("10.9") && ip != "10.96.0.1", "{service}");
    let node_port = service["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
    assert!((30000..=32767).contains(&node_port), "{service}");
    assert_eq!(service["spec"]["sessionAffinity"], "None");

    kubectl.ok(&["create", "configmap", "plain"]).await;
    let configmap: Value = serde_json::from_str(
        &kubectl
            .ok(&["get", "configmap", "plain", "-o", "json"])
            .await,
    )
    .unwrap();
    assert!(
        configmap["metadata"].get("generation").is_none(),
        "ConfigMaps have no generation: {configmap}"
    );
    kubectl.ok(&["get", "componentstatuses"]).await;
    let error = kubectl
        .fails(&["delete", "componentstatuses", "scheduler"])
        .await;
    assert!(!error.is_empty());
}

#[tokio::test]
async fn kubectl_auth_asks_the_reviews() {
    let Some((_turn, server, kubectl)) = setup("catalog_kubectl_auth").await else {
        return;
    };
    assert_eq!(
        kubectl.ok(&["auth", "can-i", "create", "pods"]).await,
        "yes\n"
    );
    let whoami = kubectl.ok(&["auth", "whoami", "-o", "json"]).await;
    let whoami: Value = serde_json::from_str(&whoami).unwrap();
    assert_eq!(whoami["status"]["userInfo"]["username"], "kubernetes-admin");

    // A ServiceAccount may do what its roles allow, nothing more.
    let bot = "--as=system:serviceaccount:default:bot";
    let output = kubectl
        .run(&["auth", "can-i", "list", "configmaps", bot])
        .await;
    assert_eq!(String::from_utf8_lossy(&output.stdout), "no\n");
    assert!(!output.status.success(), "kubectl exits 1 for no");
    kubectl
        .ok(&[
            "create",
            "role",
            "reader",
            "--verb=list,get",
            "--resource=configmaps",
        ])
        .await;
    kubectl
        .ok(&[
            "create",
            "rolebinding",
            "bot-reads",
            "--role=reader",
            "--serviceaccount=default:bot",
        ])
        .await;
    assert_eq!(
        kubectl
            .ok(&["auth", "can-i", "list", "configmaps", bot])
            .await,
        "yes\n"
    );
    assert_eq!(
        String::from_utf8_lossy(
            &kubectl
                .run(&[
                    "auth",
                    "can-i",
                    "list",
                    "configmaps",
                    bot,
                    "-n",
                    "kube-system"
                ])
                .await
                .stdout
        ),
        "no\n"
    );
    let rules = kubectl.ok(&["auth", "can-i", "--list", bot]).await;
    assert!(rules.contains("configmaps"), "{rules}");

    // A TokenReview knows the tokens the server issued.
    let token = server.service_account_token("default", "bot");
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}});
    let path = kubectl.manifest("review.json", &review.to_string());
    let answer: Value =
        serde_json::from_str(&kubectl.ok(&["create", "-f", &path, "-o", "json"]).await).unwrap();
    assert_eq!(answer["status"]["authenticated"], true, "{answer}");
    assert_eq!(
        answer["status"]["user"]["username"],
        "system:serviceaccount:default:bot"
    );
}

#[tokio::test]
async fn pods_and_services_start_with_their_status() {
    let server = FakeApiServer::start().await.unwrap();
    let pods: Api<Pod> = Api::default_namespaced(server.client());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "app:1", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]},
    }))
    .unwrap();
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    let status = created.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert_eq!(status.qos_class.as_deref(), Some("Guaranteed"));
    let spec = created.spec.unwrap();
    assert_eq!(spec.service_account_name.as_deref(), Some("default"));
    let requests = spec.containers[0]
        .resources
        .clone()
        .unwrap()
        .requests
        .unwrap();
    assert_eq!(requests["cpu"].0, "1", "requests default to limits");

    let services: Api<Service> = Api::default_namespaced(server.client());
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "s"},
        "spec": {"ports": [{"port": 80}], "selector": {"app": "x"}},
    }))
    .unwrap();
    let created = services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let spec = created.spec.clone().unwrap();
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    assert!(spec.cluster_ip.is_some());
    assert!(created.status.unwrap().load_balancer.is_some());
    // A taken address is refused, as the allocator refuses it.
    let mut twin = service.clone();
    twin.metadata.name = Some("twin".into());
    twin.spec.as_mut().unwrap().cluster_ip = spec.cluster_ip.clone();
    let error = services
        .create(&PostParams::default(), &twin)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("already allocated"), "{error}");

    let configmaps: Api<ConfigMap> = Api::namespaced(server.client(), "kube-public");
    let bundle = configmaps.get("kube-root-ca.crt").await.unwrap();
    assert!(bundle.data.unwrap().contains_key("ca.crt"));
    server.stop().await;
}

#[tokio::test]
async fn the_python_client_works_with_the_new_kinds() {
    let Some(python) = support::python("catalog_python_client").await else {
        return;
    };
    let server = FakeApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/client_builtins.py");
    let run = tokio::process::Command::new(python)
        .arg(script)
        .env("KUBECONFIG", &kubeconfig)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(DEADLINE * 2, run)
        .await
        .expect("the script finishes")
        .expect("python runs");
    assert!(
        output.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("all good"));
    server.stop().await;
}

#[tokio::test]
async fn pods_are_bound_evicted_and_debugged_and_accounts_get_tokens() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use kube::api::{EvictParams, Patch, PatchParams};

    let server = FakeApiServer::start().await.unwrap();
    // No retries: kube's default client retries a 429 (a refused eviction) for minutes.
    let client = support::client_without_retries(&server);
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let pod = |name: &str| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "app:1"}]},
        }))
        .unwrap()
    };
    pods.create(&PostParams::default(), &pod("bound"))
        .await
        .unwrap();

    // The scheduler's binding, once only.
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bound"}, "target": {"kind": "Node", "name": "node-1"}});
    let request = http::Request::post("/api/v1/namespaces/default/pods/bound/binding")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&binding).unwrap())
        .unwrap();
    let answer: Value = client.request(request).await.unwrap();
    assert_eq!(answer["status"], "Success", "{answer}");
    let bound = pods.get("bound").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("node-1"));
    let again = http::Request::post("/api/v1/namespaces/default/bindings")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&binding).unwrap())
        .unwrap();
    let error = client.request::<Value>(again).await.unwrap_err();
    assert!(error.to_string().contains("already assigned"), "{error}");

    // Ephemeral containers can be added through their subresource only.
    let debug =
        json!({"spec": {"ephemeralContainers": [{"name": "debugger", "image": "busybox"}]}});
    let debugged = pods
        .patch_ephemeral_containers("bound", &PatchParams::default(), &Patch::Strategic(debug))
        .await
        .unwrap();
    let added = debugged.spec.unwrap().ephemeral_containers.unwrap();
    assert_eq!(added[0].name, "debugger");
    assert_eq!(added[0].termination_message_policy.as_deref(), Some("File"));

    // Evictions: refused while a budget allows no disruption, then done.
    pods.create(&PostParams::default(), &pod("guarded"))
        .await
        .unwrap();
    let budgets: Api<PodDisruptionBudget> = Api::default_namespaced(client.clone());
    let budget: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "keep"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }))
    .unwrap();
    budgets
        .create(&PostParams::default(), &budget)
        .await
        .unwrap();
    let refused = pods
        .evict("guarded", &EvictParams::default())
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("disruption budget"),
        "{refused}"
    );
    pods.evict("bound", &EvictParams::default()).await.unwrap();
    assert!(pods.get_opt("bound").await.unwrap().is_none());

    // `kubectl create token`: a token that the server knows as the account.
    let accounts: Api<ServiceAccount> = Api::default_namespaced(client.clone());
    let request = serde_json::from_value(json!({"spec": {"audiences": []}})).unwrap();
    let token = accounts
        .create_token_request("default", &PostParams::default(), &request)
        .await
        .unwrap();
    let token = token.status.unwrap().token;
    let mut config = kube::Config::new(server.url().parse().unwrap());
    config.auth_info.token = Some(token.into());
    let as_account = kube::Client::try_from(config).unwrap();
    let who: Value = as_account
        .request(
            http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
                .header("content-type", "application/json")
                .body(
                    br#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#
                        .to_vec(),
                )
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        who["status"]["userInfo"]["username"],
        "system:serviceaccount:default:default"
    );
    server.stop().await;
}
