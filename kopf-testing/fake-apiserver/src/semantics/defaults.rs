//! Defaulting of built-in kinds, as the real server's scheme defaults and the admission
//! plugins every cluster runs (ServiceAccount, DefaultTolerationSeconds) fill objects in:
//! pods and the pod templates of workloads, services, workloads, jobs, volumes and claims.
//!
//! Defaults apply on every write, before validation, so an object reads back as a real
//! cluster would store it. What needs the state (cluster IPs, node ports) is allocated at
//! creation, in `lifecycle`.

use serde_json::{Map, Value, json};

use crate::storage::catalog::ResourceDef;

/// Fills in the defaults of a built-in object.
pub(crate) fn apply(def: &ResourceDef, object: &mut Value) {
    match (def.group.as_str(), def.kind.as_str()) {
        ("", "Pod") => {
            pod_spec(&mut object["spec"]);
            pod_admission(&mut object["spec"]);
        }
        ("", "PodTemplate") => pod_template(&mut object["template"]),
        ("", "ReplicationController") => {
            set(&mut object["spec"], "replicas", json!(1));
            pod_template(&mut object["spec"]["template"]);
        }
        ("", "Service") => service(&mut object["spec"]),
        ("", "Secret") => set(object, "type", json!("Opaque")),
        ("", "PersistentVolumeClaim") => {
            set(&mut object["spec"], "volumeMode", json!("Filesystem"))
        }
        ("", "PersistentVolume") => {
            let spec = &mut object["spec"];
            set(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
            set(spec, "volumeMode", json!("Filesystem"));
        }
        ("apps", "Deployment") => deployment(&mut object["spec"]),
        ("apps", "ReplicaSet") => {
            set(&mut object["spec"], "replicas", json!(1));
            pod_template(&mut object["spec"]["template"]);
        }
        ("apps", "StatefulSet") => stateful_set(&mut object["spec"]),
        ("apps", "DaemonSet") => daemon_set(&mut object["spec"]),
        ("batch", "Job") => job(&mut object["spec"]),
        ("batch", "CronJob") => cron_job(&mut object["spec"]),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            webhooks(object, false)
        }
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => webhooks(object, true),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crd(object),
        _ => {}
    }
}

/// The defaults of admission webhooks (v1), on each webhook and its rules.
fn webhooks(configuration: &mut Value, mutating: bool) {
    let Some(webhooks) = configuration
        .get_mut("webhooks")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for webhook in webhooks.iter_mut().filter(|w| w.is_object()) {
        set(webhook, "failurePolicy", json!("Fail"));
        set(webhook, "matchPolicy", json!("Equivalent"));
        set(webhook, "namespaceSelector", json!({}));
        set(webhook, "objectSelector", json!({}));
        set(webhook, "timeoutSeconds", json!(10));
        if mutating {
            set(webhook, "reinvocationPolicy", json!("Never"));
        }
        for rule in items(webhook, "rules").filter(|r| r.is_object()) {
            set(rule, "scope", json!("*"));
        }
    }
}

/// The defaults of a CustomResourceDefinition: no conversion, and its list's kind.
fn crd(crd: &mut Value) {
    let Some(spec) = crd.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    set(spec, "conversion", json!({"strategy": "None"}));
    if let Some(kind) = spec["names"]["kind"].as_str().map(|k| format!("{k}List"))
        && spec["names"].is_object()
    {
        set(&mut spec["names"], "listKind", json!(kind));
    }
    // What Go's `omitempty` leaves out: empty short names and categories, a column's
    // priority of 0.
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        for key in ["shortNames", "categories"] {
            if names
                .get(key)
                .and_then(Value::as_array)
                .is_some_and(Vec::is_empty)
            {
                names.remove(key);
            }
        }
    }
    for version in items(spec, "versions") {
        for column in items(version, "additionalPrinterColumns") {
            if let Some(column) = column.as_object_mut()
                && column.get("priority").and_then(Value::as_i64) == Some(0)
            {
                column.remove("priority");
            }
        }
    }
}

/// The status a built-in object starts with (the rest of its status is the controllers').
pub(crate) fn initial_status(def: &ResourceDef, object: &Value) -> Option<Value> {
    match (def.group.as_str(), def.kind.as_str()) {
        ("", "Pod") => Some(json!({"phase": "Pending", "qosClass": qos_class(&object["spec"])})),
        ("", "Service") => Some(json!({"loadBalancer": {}})),
        ("", "PersistentVolumeClaim" | "PersistentVolume") => Some(json!({"phase": "Pending"})),
        _ => None,
    }
}

/// Sets `key` in an object (made one if it is null) unless it is set already.
fn set(object: &mut Value, key: &str, value: Value) {
    if object.is_null() {
        *object = json!({});
    }
    if let Some(map) = object.as_object_mut() {
        let slot = map.entry(key).or_insert(Value::Null);
        if slot.is_null() {
            *slot = value;
        }
    }
}

/// The items of the list at `key`, if there is one: a missing list stays missing (indexing
/// would add a `null` there, which the real server never stores).
fn items<'v>(object: &'v mut Value, key: &str) -> impl Iterator<Item = &'v mut Value> {
    object
        .get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

/// A pod template of a workload: its pod's defaults, and its metadata written even when empty
/// (Go's `omitempty` leaves no struct out: the real server answers `metadata: {}`).
fn pod_template(template: &mut Value) {
    if !template.is_object() {
        return;
    }
    set(template, "metadata", json!({}));
    if let Some(spec) = template.get_mut("spec") {
        pod_spec(spec);
    }
}

fn pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set(spec, "restartPolicy", json!("Always"));
    set(spec, "terminationGracePeriodSeconds", json!(30));
    set(spec, "dnsPolicy", json!("ClusterFirst"));
    set(spec, "securityContext", json!({}));
    set(spec, "schedulerName", json!("default-scheduler"));
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for container in items(spec, list) {
            container_defaults(container);
        }
    }
}

fn container_defaults(container: &mut Value) {
    let image = container["image"].as_str().unwrap_or_default();
    let policy = if image_is_latest(image) {
        "Always"
    } else {
        "IfNotPresent"
    };
    set(container, "imagePullPolicy", json!(policy));
    set(
        container,
        "terminationMessagePath",
        json!("/dev/termination-log"),
    );
    set(container, "terminationMessagePolicy", json!("File"));
    set(container, "resources", json!({}));
    for port in items(container, "ports") {
        set(port, "protocol", json!("TCP"));
    }
    // Requests default to the limits given without them.
    let limits = container["resources"]["limits"].clone();
    if let Value::Object(limits) = limits {
        let resources = &mut container["resources"];
        set(resources, "requests", json!({}));
        for (name, quantity) in limits {
            set(&mut resources["requests"], &name, quantity);
        }
    }
}

/// Whether an image reference pulls `:latest` (no tag and no digest, or the tag `latest`).
fn image_is_latest(image: &str) -> bool {
    if image.contains('@') {
        return false;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, tag)) => tag == "latest",
        None => true,
    }
}

/// What the admission plugins of every cluster add to a pod.
fn pod_admission(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set(spec, "serviceAccountName", json!("default"));
    let account = spec["serviceAccountName"].clone();
    set(spec, "serviceAccount", account);
    set(spec, "enableServiceLinks", json!(true));
    set(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    set(spec, "priority", json!(0));
    set(spec, "tolerations", json!([]));
    let tolerations = spec["tolerations"].as_array_mut().expect("set just above");
    for taint in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        if !tolerations.iter().any(|t| t["key"] == taint) {
            tolerations.push(json!({
                "key": taint,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }));
        }
    }
}

/// A pod's quality-of-service class, from its containers' requests and limits.
fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["initContainers", "containers"]
        .iter()
        .flat_map(|list| spec[*list].as_array().into_iter().flatten())
        .collect();
    let resources = |container: &Value, kind: &str| -> Map<String, Value> {
        container["resources"][kind]
            .as_object()
            .cloned()
            .unwrap_or_default()
    };
    let any = containers
        .iter()
        .any(|c| !resources(c, "requests").is_empty() || !resources(c, "limits").is_empty());
    if !any {
        return "BestEffort";
    }
    let guaranteed = containers.iter().all(|c| {
        let (requests, limits) = (resources(c, "requests"), resources(c, "limits"));
        ["cpu", "memory"]
            .iter()
            .all(|r| limits.get(*r).is_some() && requests.get(*r) == limits.get(*r))
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn service(spec: &mut Value) {
    if spec.is_null() {
        *spec = json!({});
    }
    set(spec, "type", json!("ClusterIP"));
    set(spec, "sessionAffinity", json!("None"));
    let external = spec["type"] == "ExternalName";
    for port in items(spec, "ports") {
        set(port, "protocol", json!("TCP"));
        let number = port["port"].clone();
        set(port, "targetPort", number);
    }
    if external {
        return;
    }
    set(spec, "internalTrafficPolicy", json!("Cluster"));
    if matches!(spec["type"].as_str(), Some("NodePort" | "LoadBalancer")) {
        set(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if spec["type"] == "LoadBalancer" {
        set(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
}

fn deployment(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set(spec, "replicas", json!(1));
    rolling_update(
        &mut spec["strategy"],
        &[("maxUnavailable", json!("25%")), ("maxSurge", json!("25%"))],
    );
    set(spec, "revisionHistoryLimit", json!(10));
    set(spec, "progressDeadlineSeconds", json!(600));
    pod_template(&mut spec["template"]);
}

/// A workload's update strategy: `RollingUpdate` unless another type is given, and then its
/// parameters filled in one by one (an empty `strategy: {}`, as kubectl's protobuf sends it,
/// is defaulted whole).
fn rolling_update(strategy: &mut Value, parameters: &[(&str, Value)]) {
    if strategy.is_null() {
        *strategy = json!({});
    }
    if strategy["type"].as_str().is_none_or(str::is_empty) {
        strategy["type"] = json!("RollingUpdate");
    }
    if strategy["type"] == "RollingUpdate" {
        let rolling = &mut strategy["rollingUpdate"];
        for (key, value) in parameters {
            set(rolling, key, value.clone());
        }
    }
}

fn stateful_set(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set(spec, "replicas", json!(1));
    set(spec, "podManagementPolicy", json!("OrderedReady"));
    rolling_update(&mut spec["updateStrategy"], &[("partition", json!(0))]);
    set(spec, "revisionHistoryLimit", json!(10));
    set(
        spec,
        "persistentVolumeClaimRetentionPolicy",
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
    );
    pod_template(&mut spec["template"]);
}

fn daemon_set(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    rolling_update(
        &mut spec["updateStrategy"],
        &[("maxUnavailable", json!(1)), ("maxSurge", json!(0))],
    );
    set(spec, "revisionHistoryLimit", json!(10));
    pod_template(&mut spec["template"]);
}

fn job(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set(spec, "parallelism", json!(1));
    set(spec, "completions", json!(1));
    set(spec, "backoffLimit", json!(6));
    set(spec, "completionMode", json!("NonIndexed"));
    set(spec, "suspend", json!(false));
    set(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
    pod_template(&mut spec["template"]);
}

fn cron_job(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set(spec, "concurrencyPolicy", json!("Allow"));
    set(spec, "suspend", json!(false));
    set(spec, "successfulJobsHistoryLimit", json!(3));
    set(spec, "failedJobsHistoryLimit", json!(1));
    if spec["jobTemplate"].is_object() {
        set(&mut spec["jobTemplate"], "metadata", json!({}));
    }
    let template = &mut spec["jobTemplate"]["spec"];
    if template.is_object() {
        set(template, "backoffLimit", json!(6));
        set(template, "completionMode", json!("NonIndexed"));
        set(template, "suspend", json!(false));
        set(
            template,
            "podReplacementPolicy",
            json!("TerminatingOrFailed"),
        );
        pod_template(&mut template["template"]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaulted(group: &str, plural: &str, mut object: Value) -> Value {
        let catalog = crate::storage::builtins::catalog();
        apply(catalog.get(group, plural).unwrap(), &mut object);
        object
    }

    #[test]
    fn pods_get_the_defaults_and_admission_of_a_real_cluster() {
        let pod = defaulted(
            "",
            "pods",
            json!({"spec": {"containers": [
                {"name": "a", "image": "nginx", "ports": [{"containerPort": 80}]},
                {"name": "b", "image": "registry.example:5000/app:1.2"},
            ]}}),
        );
        let spec = &pod["spec"];
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        assert_eq!(spec["serviceAccountName"], "default");
        assert_eq!(spec["tolerations"].as_array().unwrap().len(), 2);
        assert_eq!(spec["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(spec["containers"][1]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(spec["containers"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(
            spec["containers"][0]["terminationMessagePath"],
            "/dev/termination-log"
        );
    }

    #[test]
    fn quality_of_service_classes() {
        let with = |resources: Value| {
            let spec = json!({"containers": [{"name": "a", "image": "x", "resources": resources}]});
            let mut pod = json!({"spec": spec});
            pod_spec(&mut pod["spec"]);
            qos_class(&pod["spec"])
        };
        assert_eq!(with(json!({})), "BestEffort");
        assert_eq!(
            with(json!({"limits": {"cpu": "1", "memory": "1Gi"}})),
            "Guaranteed"
        );
        assert_eq!(with(json!({"requests": {"cpu": "1"}})), "Burstable");
    }

    #[test]
    fn services_and_workloads() {
        let service = defaulted(
            "",
            "services",
            json!({"spec": {"type": "NodePort", "ports": [{"port": 80}]}}),
        );
        assert_eq!(service["spec"]["ports"][0]["targetPort"], 80);
        assert_eq!(service["spec"]["externalTrafficPolicy"], "Cluster");
        assert_eq!(service["spec"]["sessionAffinity"], "None");
        let deployment = defaulted(
            "apps",
            "deployments",
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x:1"}]}}}}),
        );
        assert_eq!(deployment["spec"]["replicas"], 1);
        let empty = defaulted(
            "apps",
            "deployments",
            json!({"spec": {"strategy": {}, "template": {"spec": {"containers": []}}}}),
        );
        assert_eq!(
            empty["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        let recreate = defaulted(
            "apps",
            "deployments",
            json!({"spec": {"strategy": {"type": "Recreate"}}}),
        );
        assert_eq!(recreate["spec"]["strategy"], json!({"type": "Recreate"}));
        assert_eq!(deployment["spec"]["strategy"]["type"], "RollingUpdate");
        assert_eq!(
            deployment["spec"]["template"]["spec"]["restartPolicy"],
            "Always"
        );
        // A pod template is not a pod: no admission plugin touches it.
        assert!(deployment["spec"]["template"]["spec"]["serviceAccountName"].is_null());
        // Its metadata is there even when empty, as Go writes a struct; given, it is kept.
        assert_eq!(deployment["spec"]["template"]["metadata"], json!({}));
        let template = defaulted(
            "",
            "podtemplates",
            json!({"template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}}}),
        );
        assert_eq!(
            template["template"]["metadata"],
            json!({"labels": {"a": "b"}})
        );
        let cron = defaulted(
            "batch",
            "cronjobs",
            json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}}}),
        );
        assert_eq!(cron["spec"]["jobTemplate"]["metadata"], json!({}));
        assert_eq!(
            cron["spec"]["jobTemplate"]["spec"]["template"]["metadata"],
            json!({})
        );
    }
}
