//! What a real cluster has beyond the API server's storage: the objects it boots with
//! (namespaces, the `kubernetes` Service, the bootstrap RBAC roles, component statuses), and
//! the objects its controllers put in every namespace (the `default` ServiceAccount, the
//! `kube-root-ca.crt` ConfigMap).

use serde_json::{Value, json};

use super::lifecycle;
use crate::storage::object;
use crate::storage::state::State;

/// The `kubernetes` Service's address: the first of the Services' range (`10.96.0.0/12`).
const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";

/// Creates what every cluster starts with (once; a restored state keeps what it has).
/// Namespaces' `kube-root-ca.crt` carry [`State::root_ca`].
pub(crate) fn bootstrap(state: &mut State) {
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        ensure(state, "", "namespaces", namespace);
    }
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": KUBERNETES_SERVICE_IP,
            "clusterIPs": [KUBERNETES_SERVICE_IP],
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster",
            "sessionAffinity": "None",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
        },
        "status": {"loadBalancer": {}},
    });
    ensure(state, "", "services", service);
    for component in ["controller-manager", "etcd-0", "scheduler"] {
        let status = json!({
            "apiVersion": "v1",
            "kind": "ComponentStatus",
            "metadata": {"name": component},
            "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}],
        });
        ensure(state, "", "componentstatuses", status);
    }
    for (role, rules) in bootstrap_roles() {
        let role = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {
                "name": role,
                "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
            },
            "rules": rules,
        });
        ensure(state, "rbac.authorization.k8s.io", "clusterroles", role);
    }
    publish_root_ca(state);
    for (binding, role, groups) in bootstrap_bindings() {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|group| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}))
            .collect();
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {
                "name": binding,
                "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
            },
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": subjects,
        });
        ensure(
            state,
            "rbac.authorization.k8s.io",
            "clusterrolebindings",
            binding,
        );
    }
}

/// Gives every namespace's `kube-root-ca.crt` the current CA bundle, as the root CA
/// publisher does when the cluster's CA changes (a restored state, a new certificate).
fn publish_root_ca(state: &mut State) {
    let (Some(namespaces), Some(configmaps)) = (
        state.catalog.get("", "namespaces").cloned(),
        state.catalog.get("", "configmaps").cloned(),
    ) else {
        return;
    };
    let names: Vec<String> = state
        .objects(&namespaces.key())
        .into_iter()
        .flat_map(|objects| objects.values())
        .map(|namespace| object::name(namespace).to_string())
        .collect();
    for namespace in names {
        let key = (namespace.clone(), "kube-root-ca.crt".to_string());
        match state.get(&configmaps.key(), &key).cloned() {
            None => seed_namespace(state, &namespace),
            Some(bundle) if bundle["data"]["ca.crt"] != state.root_ca.as_str() => {
                let mut updated = (*bundle).clone();
                updated["data"]["ca.crt"] = json!(state.root_ca);
                if let Err(error) = lifecycle::update(
                    state,
                    &configmaps,
                    &bundle,
                    updated,
                    lifecycle::Scope::Main,
                    None,
                ) {
                    tracing::error!(?error, namespace, "updating kube-root-ca.crt failed");
                }
            }
            Some(_) => {}
        }
    }
}

/// Creates `object` unless it exists.
fn ensure(state: &mut State, group: &str, plural: &str, object: Value) {
    let Some(def) = state.catalog.get(group, plural).cloned() else {
        return;
    };
    let key = (
        object::namespace(&object).to_string(),
        object::name(&object).to_string(),
    );
    if state.get(&def.key(), &key).is_some() {
        return;
    }
    if let Err(error) = lifecycle::create(state, &def, object, None) {
        tracing::error!(
            ?error,
            plural,
            name = key.1,
            "creating a bootstrap object failed"
        );
    }
}

/// The ClusterRoles of a fresh cluster that users and tools rely on by name.
fn bootstrap_roles() -> Vec<(&'static str, Value)> {
    let read = json!(["get", "list", "watch"]);
    let write = json!(["create", "delete", "deletecollection", "patch", "update"]);
    let workloads = json!([
        "pods",
        "pods/log",
        "pods/exec",
        "pods/attach",
        "pods/portforward",
        "services",
        "endpoints",
        "configmaps",
        "secrets",
        "serviceaccounts",
        "persistentvolumeclaims",
        "replicationcontrollers",
        "replicationcontrollers/scale",
        "events",
    ]);
    let apps = json!([
        "deployments",
        "deployments/scale",
        "replicasets",
        "replicasets/scale",
        "statefulsets",
        "statefulsets/scale",
        "daemonsets",
        "controllerrevisions",
    ]);
    let namespaced = |verbs: &Value| {
        json!([
            {"apiGroups": [""], "resources": workloads, "verbs": verbs},
            {"apiGroups": ["apps"], "resources": apps, "verbs": verbs},
            {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": verbs},
            {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"], "verbs": verbs},
            {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses", "networkpolicies"], "verbs": verbs},
            {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": verbs},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": verbs},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": verbs},
        ])
    };
    let mut edit = namespaced(&read).as_array().cloned().unwrap_or_default();
    edit.extend(namespaced(&write).as_array().cloned().unwrap_or_default());
    edit.push(json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": read}));
    let mut admin = edit.clone();
    admin.push(json!({"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["*"]}));
    let mut view = namespaced(&read).as_array().cloned().unwrap_or_default();
    view.retain(|rule| rule["resources"] != json!(["leases"]));
    view.push(json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": read}));
    let reviews = json!([
        {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
    ]);
    vec![
        (
            "cluster-admin",
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
        ),
        ("admin", Value::from(admin)),
        ("edit", Value::from(edit)),
        ("view", Value::from(view)),
        ("system:basic-user", reviews),
        (
            "system:discovery",
            json!([{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
        ),
        (
            "system:public-info-viewer",
            json!([{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
        ),
        (
            "system:service-account-issuer-discovery",
            json!([{"nonResourceURLs": ["/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks", "/openid/v1/jwks/"], "verbs": ["get"]}]),
        ),
    ]
}

/// The ClusterRoleBindings of a fresh cluster: `(name, role, groups)`.
fn bootstrap_bindings() -> Vec<(&'static str, &'static str, &'static [&'static str])> {
    vec![
        ("cluster-admin", "cluster-admin", &["system:masters"]),
        (
            "system:basic-user",
            "system:basic-user",
            &["system:authenticated"],
        ),
        (
            "system:discovery",
            "system:discovery",
            &["system:authenticated"],
        ),
        (
            "system:public-info-viewer",
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
        (
            "system:service-account-issuer-discovery",
            "system:service-account-issuer-discovery",
            &["system:serviceaccounts"],
        ),
    ]
}

/// What the controllers put in a new namespace: its `default` ServiceAccount and the
/// `kube-root-ca.crt` ConfigMap.
pub(crate) fn seed_namespace(state: &mut State, namespace: &str) {
    let account = json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": namespace},
    });
    ensure(state, "", "serviceaccounts", account);
    let bundle = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "kube-root-ca.crt",
            "namespace": namespace,
            "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."},
        },
        "data": {"ca.crt": state.root_ca.clone()},
    });
    ensure(state, "", "configmaps", bundle);
}

/// Seeds the namespaces created since the last round; whether there were any.
pub(crate) fn seed_new_namespaces(state: &mut State) -> bool {
    let created = std::mem::take(&mut state.pending.created_namespaces);
    for namespace in &created {
        seed_namespace(state, namespace);
    }
    !created.is_empty()
}
