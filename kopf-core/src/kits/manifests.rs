//! What the operator binary's `crd` and `rbac` subcommands print: multi-document YAML.
//!
//! The RBAC is computed statically from the registry, without a cluster:
//! - a resource given exactly (`("kopf.dev", "v1", "kopfexamples")`, a typed resource) gets
//!   `get`, `list`, `watch`, `patch` on its plural and `patch` on its `/status`;
//! - a resource given by a name that discovery resolves (`("kex")`, `("KopfExample.kopf.dev")`)
//!   is printed as given: its group if given, else `*`, and the name as the resource. A short
//!   name, singular or kind must be changed to the plural by hand;
//! - categories, `EVERYTHING` and predicates need every resource: `*` in `*`;
//! - every operator creates core `events` and lists and watches `customresourcedefinitions`
//!   (it watches them to rediscover resources); it lists and watches `namespaces` when the
//!   namespace patterns are not plain names;
//! - what the program declares: `owns = [..]`/`reads = [..]` on handlers (or their
//!   `rbac_rule`), and [`Registry::rbac_rule`]; namespaced resources' rules go where the
//!   handled resources' go, cluster-scoped ones to the ClusterRole. The output's comments
//!   list the declarations and name the handlers that take a `client` but declare nothing;
//! - every operator gets, lists, watches and patches Kopf's peering objects (`kopf.dev`):
//!   `clusterkopfpeerings` when cluster-wide, `kopfpeerings` in the served namespaces
//!   otherwise (as Kopf's `deployment-rbac.yaml`); but not with `--lease`, which implies
//!   `run --standalone` (no peering);
//! - with `--admission-managed NAME` (as `settings.admission.managed`), the ClusterRole
//!   creates `validatingwebhookconfigurations` and `mutatingwebhookconfigurations`, and
//!   patches, gets, lists and watches those of that name (Kopf's `create, patch`; the watch,
//!   by a field selector on the name, lets the replica that owns them repair them);
//! - with `--webhook-secret [NAMESPACE/]NAME`, a Role in that namespace creates Secrets and
//!   gets and updates that one (the webhook certificate that replicas share).
//!
//! The CRDs are those declared with [`Registry::crd`], then Kopf's two peering CRDs
//! (`peering.yaml`): `clusterkopfpeerings.kopf.dev` (Cluster) and `kopfpeerings.kopf.dev`
//! (Namespaced), whose `status` keeps unknown fields and is no subresource.
//!
//! Without `-n`, or with `-A`, or with namespace globs, it is one ClusterRole. With plain
//! namespace names, each namespace gets a Role with the resources' rules, and a ClusterRole
//! keeps the cluster-wide ones.

use serde_json::{Value, json};

use crate::intents::registry::Registry;
use crate::structs::namespaces::{NamespacePatternError, NamespacePatterns};
use crate::structs::rbac::RbacRule;
use crate::structs::resources::Selector;

/// The comment heading the `rbac` output.
const RBAC_HEADER: &str = "\
# RBAC for the operator, computed from its registry without a cluster. It covers what the
# framework does (watching and patching the handled resources and their status, posting
# events, watching CRDs, peering) and what the program declares: `owns = [..]` and
# `reads = [..]` on handlers, `Registry::rbac_rule(..)`.
# Not covered: any other API call a handler makes with its `client` (declare it); the
# managed webhook configurations unless `--admission-managed` is given; a Lease unless
# `--lease` is given; the Leases of assigned shards unless `--shards` is given; the
# webhook certificate's Secret unless `--webhook-secret` is given.
# Resources given by a name that discovery resolves (a short name, a kind, no group) are
# printed as given: check their apiGroups and resources before applying.
";

/// What the operator does with the resources it serves and with its peering objects.
const RESOURCE_VERBS: &[&str] = &["get", "list", "watch", "patch"];

/// Where the RBAC goes: the options of the `rbac` subcommand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RbacOptions {
    /// The namespace patterns; `None` serves the cluster.
    pub(crate) namespaces: Option<Vec<String>>,
    /// The ServiceAccount the roles are bound to (also the roles' names).
    pub(crate) service_account: String,
    /// The ServiceAccount's namespace.
    pub(crate) service_account_namespace: String,
    /// Whether to print the ServiceAccount too.
    pub(crate) with_service_account: bool,
    /// The Lease the operator elects a leader with, if any.
    pub(crate) lease: Option<LeaseRef>,
    /// The name of the managed webhook configurations, if the operator keeps them.
    pub(crate) admission_managed: Option<String>,
    /// Whether the operator runs with assigned shards (`run --shards N`): the Leases of its
    /// ring, in the ServiceAccount's namespace.
    pub(crate) shards: bool,
    /// The Secret that keeps the webhook certificate, if any.
    pub(crate) webhook_secret: Option<SecretRef>,
}

/// A Secret by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SecretRef {
    pub(crate) namespace: String,
    pub(crate) name: String,
}

/// A Lease by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaseRef {
    pub(crate) namespace: String,
    pub(crate) name: String,
}

/// The CRDs declared with [`Registry::crd`] and Kopf's peering CRDs, as YAML documents.
pub(crate) fn crd_yaml(registry: &Registry) -> String {
    let mut documents: Vec<Value> = registry
        .crds
        .iter()
        .map(|crd| serde_json::to_value(crd).unwrap_or_default())
        .collect();
    let header = if documents.is_empty() {
        "# No CRDs are declared (declare them with `Registry::crd::<K>()`): only Kopf's peering CRDs.\n"
    } else {
        "# The CRDs declared with `Registry::crd::<K>()`, then Kopf's peering CRDs.\n"
    };
    documents.extend(peering_crds());
    format!("{header}{}", yaml(&documents))
}

/// Kopf's peering CRDs (`peering.yaml`) as JSON: `ClusterKopfPeering` and `KopfPeering` in
/// `kopf.dev/v1`, their `status` an object that keeps unknown fields, no status subresource.
/// What the `crd` subcommand prints after the program's own CRDs; tests create them on a fake
/// API server to run operators with peering.
///
/// ```
/// let crds = kopf::peering::peering_crds();
/// assert_eq!(crds[0]["metadata"]["name"], "clusterkopfpeerings.kopf.dev");
/// ```
pub fn peering_crds() -> Vec<Value> {
    [
        ("Cluster", "ClusterKopfPeering", "clusterkopfpeering"),
        ("Namespaced", "KopfPeering", "kopfpeering"),
    ]
    .into_iter()
    .map(|(scope, kind, singular)| {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{singular}s.kopf.dev")},
            "spec": {
                "scope": scope,
                "group": "kopf.dev",
                "names": {"kind": kind, "plural": format!("{singular}s"), "singular": singular},
                "versions": [{
                    "name": "v1",
                    "served": true,
                    "storage": true,
                    "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "properties": {"status": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": true,
                        }},
                    }},
                }],
            },
        })
    })
    .collect()
}

/// The RBAC of the registry's handlers, as YAML documents.
pub(crate) fn rbac_yaml(
    registry: &Registry,
    options: &RbacOptions,
) -> Result<String, NamespacePatternError> {
    let admission = if registry.admissions.is_empty() || options.admission_managed.is_some() {
        ""
    } else {
        "# NOT COVERED: the webhook configurations of the admission handlers; if the operator \
         keeps them (settings.admission.managed), give --admission-managed NAME.\n"
    };
    Ok(format!(
        "{RBAC_HEADER}{}{admission}{}",
        declarations(registry),
        yaml(&rbac_documents(registry, options)?)
    ))
}

/// The comment lines that say what each handler declared, and which handlers take a
/// `client` but declare nothing (what they do with it is not in the output).
fn declarations(registry: &Registry) -> String {
    let mut text = String::new();
    let needs = registry.rbac_needs();
    for (id, needs) in &needs {
        for rule in &needs.rules {
            text.push_str(&format!("# Declared by {id}: {}\n", rule.describe()));
        }
    }
    for rule in &registry.rbac {
        text.push_str(&format!(
            "# Declared with Registry::rbac_rule: {}\n",
            rule.describe()
        ));
    }
    let silent: Vec<&str> = needs
        .iter()
        .filter(|(_, needs)| needs.takes_client && needs.rules.is_empty())
        .map(|(id, _)| *id)
        .collect();
    let (take, declare, touch) = match silent.len() {
        0 => return text,
        1 => ("takes", "declares", "it touches"),
        _ => ("take", "declare", "they touch"),
    };
    text.push_str(&format!(
        "# NOT COVERED: {} {take} a `client` but {declare} nothing {touch} through it; \
         add `owns = [..]`/`reads = [..]` to the handler or `Registry::rbac_rule(..)`.\n",
        silent.join(", ")
    ));
    text
}

/// Every rule the program declares (handlers' first, then the registry's), each once.
fn declared_rules(registry: &Registry) -> Vec<&RbacRule> {
    let mut rules: Vec<&RbacRule> = Vec::new();
    let handlers = registry
        .rbac_needs()
        .into_iter()
        .flat_map(|(_, needs)| needs.rules.iter());
    for rule in handlers.chain(registry.rbac.iter()) {
        if !rules.contains(&rule) {
            rules.push(rule);
        }
    }
    rules
}

/// The RBAC documents: the ServiceAccount, the roles and their bindings.
pub(crate) fn rbac_documents(
    registry: &Registry,
    options: &RbacOptions,
) -> Result<Vec<Value>, NamespacePatternError> {
    let exact = match &options.namespaces {
        None => None,
        Some(patterns) => NamespacePatterns::parse(patterns)?.is_exact(),
    };
    let globs = options.namespaces.is_some() && exact.is_none();
    let mut resources = resource_rules(&registry.selectors());
    let declared = declared_rules(registry);
    let (cluster_scoped, namespaced): (Vec<&RbacRule>, Vec<&RbacRule>) =
        declared.into_iter().partition(|rule| rule.cluster_scoped);
    resources.extend(namespaced.iter().map(|rule| rule.to_value()));
    let mut cluster = vec![rule(
        "apiextensions.k8s.io",
        &["customresourcedefinitions"],
        &["list", "watch"],
    )];
    if globs {
        cluster.push(rule("", &["namespaces"], &["list", "watch"]));
    }
    cluster.extend(cluster_scoped.iter().map(|rule| rule.to_value()));
    if let Some(managed) = &options.admission_managed {
        let configurations = [
            "validatingwebhookconfigurations",
            "mutatingwebhookconfigurations",
        ];
        // Creating cannot be limited to a name; patching can, and so can watching by a field
        // selector on the name.
        cluster.push(rule(
            "admissionregistration.k8s.io",
            &configurations,
            &["create"],
        ));
        cluster.push(json!({
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": configurations,
            "resourceNames": [managed],
            "verbs": ["get", "list", "watch", "patch"],
        }));
    }
    let peering = |plural: &str| rule("kopf.dev", &[plural], RESOURCE_VERBS);
    // A Lease's operator runs standalone: it never reads or writes Kopf's peering objects.
    let peers = options.lease.is_none();
    match (&exact, globs) {
        (None, false) if peers => cluster.push(peering("clusterkopfpeerings")),
        (None, true) if peers => cluster.push(peering("kopfpeerings")),
        _ => {}
    }
    let events = rule("", &["events"], &["create"]);
    let name = &options.service_account;
    let subject = json!([{
        "kind": "ServiceAccount",
        "name": name,
        "namespace": options.service_account_namespace,
    }]);
    let mut documents = Vec::new();
    if options.with_service_account {
        documents.push(json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": options.service_account_namespace},
        }));
    }
    let mut cluster_role = |rules: Vec<Value>| {
        documents.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        }));
        documents.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subject,
        }));
    };
    match exact {
        None => {
            cluster.extend(resources);
            cluster.push(events);
            cluster_role(cluster);
        }
        Some(namespaces) => {
            cluster_role(cluster);
            let mut rules = resources;
            if peers {
                rules.push(peering("kopfpeerings"));
            }
            rules.push(events);
            for namespace in namespaces {
                documents.push(json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "Role",
                    "metadata": {"name": name, "namespace": namespace},
                    "rules": rules,
                }));
                documents.push(json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {"name": name, "namespace": namespace},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                    "subjects": subject,
                }));
            }
        }
    }
    if let Some(lease) = &options.lease {
        // A Role of its own (not the served namespace's): the Lease's namespace may be served
        // too. Creating cannot be limited to a name; reading and renewing can.
        let role = format!("{name}-leader-election");
        documents.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": role, "namespace": lease.namespace},
            "rules": [
                rule("coordination.k8s.io", &["leases"], &["create"]),
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": [lease.name],
                    "verbs": ["get", "update"],
                },
            ],
        }));
        documents.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": role, "namespace": lease.namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": subject,
        }));
    }
    if let Some(secret) = &options.webhook_secret {
        // Creating cannot be limited to a name; reading and renewing can.
        let role = format!("{name}-webhook-secret");
        documents.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": role, "namespace": secret.namespace},
            "rules": [
                rule("", &["secrets"], &["create"]),
                {
                    "apiGroups": [""],
                    "resources": ["secrets"],
                    "resourceNames": [secret.name],
                    "verbs": ["get", "update"],
                },
            ],
        }));
        documents.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": role, "namespace": secret.namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": subject,
        }));
    }
    if options.shards {
        // The ring's Leases are named after the members' incarnations: not limited by name.
        let role = format!("{name}-shards");
        let namespace = &options.service_account_namespace;
        documents.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": role, "namespace": namespace},
            "rules": [rule(
                "coordination.k8s.io",
                &["leases"],
                &["get", "list", "watch", "create", "update", "delete"],
            )],
        }));
        documents.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": role, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": subject,
        }));
    }
    Ok(documents)
}

/// The rules for the handled resources: one per group, in order of first use.
fn resource_rules(selectors: &[Selector]) -> Vec<Value> {
    // (group, resources, status subresources)
    let mut groups: Vec<(String, Vec<String>, Vec<String>)> = Vec::new();
    let mut add = |group: &str, resource: &str, status: bool| {
        let index = match groups.iter().position(|(g, ..)| g == group) {
            Some(index) => index,
            None => {
                groups.push((group.to_string(), Vec::new(), Vec::new()));
                groups.len() - 1
            }
        };
        let (_, resources, statuses) = &mut groups[index];
        if !resources.iter().any(|r| r == resource) {
            resources.push(resource.to_string());
        }
        let subresource = format!("{resource}/status");
        if status && !statuses.contains(&subresource) {
            statuses.push(subresource);
        }
    };
    for selector in selectors {
        match selector {
            Selector::Exact { group, plural, .. } => add(group, plural, true),
            Selector::Name { group, name, .. } => add(group.as_deref().unwrap_or("*"), name, true),
            Selector::Category(_) | Selector::Everything | Selector::Matching(_) => {
                add("*", "*", false)
            }
        }
    }
    let mut rules = Vec::new();
    for (group, resources, statuses) in groups {
        let resources: Vec<&str> = resources.iter().map(String::as_str).collect();
        rules.push(rule(&group, &resources, RESOURCE_VERBS));
        if !statuses.is_empty() && !resources.contains(&"*") {
            let statuses: Vec<&str> = statuses.iter().map(String::as_str).collect();
            rules.push(rule(&group, &statuses, &["patch"]));
        }
    }
    rules
}

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": [group], "resources": resources, "verbs": verbs})
}

/// Documents as YAML, each starting with `---`.
fn yaml(documents: &[Value]) -> String {
    let mut text = String::new();
    for document in documents {
        text.push_str("---\n");
        // Serializing JSON values to YAML cannot fail.
        text.push_str(&serde_norway::to_string(document).unwrap_or_default());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intents::handlers::ChangeHandler;
    use crate::intents::handlers::EventHandler;

    fn registry() -> Registry {
        Registry::new()
            .with(ChangeHandler::on_create(
                Selector::new("kopf.dev", "v1", "kopfexamples"),
                "create_fn",
                |_| async { Ok(None) },
            ))
            .with(ChangeHandler::on_update(
                Selector::new("", "v1", "pods"),
                "pods_fn",
                |_| async { Ok(None) },
            ))
            .with(EventHandler::on_event(
                Selector::named("kex"),
                "event_fn",
                |_| async { Ok(None) },
            ))
    }

    fn options(namespaces: Option<&[&str]>) -> RbacOptions {
        RbacOptions {
            namespaces: namespaces.map(|n| n.iter().map(|s| s.to_string()).collect()),
            service_account: "kopf-operator".into(),
            service_account_namespace: "default".into(),
            with_service_account: true,
            lease: None,
            admission_managed: None,
            shards: false,
            webhook_secret: None,
        }
    }

    /// `run --lease` implies `--standalone`: no peering objects are read or written.
    #[test]
    fn with_a_lease_no_peering_objects_are_granted() {
        let lease = Some(LeaseRef {
            namespace: "operators".into(),
            name: "my-operator".into(),
        });
        for namespaces in [None, Some(&["ns1"][..]), Some(&["ns-*"][..])] {
            let leading = RbacOptions {
                lease: lease.clone(),
                ..options(namespaces)
            };
            let text = rbac_yaml(&registry(), &leading).unwrap();
            assert!(!text.contains("kopfpeerings"), "{namespaces:?}: {text}");
            assert!(text.contains("leases"), "{namespaces:?}: {text}");
            let peering = rbac_yaml(&registry(), &options(namespaces)).unwrap();
            assert!(
                peering.contains("kopfpeerings"),
                "{namespaces:?}: {peering}"
            );
        }
    }

    #[test]
    fn the_webhook_secret_is_created_and_read_and_renewed_by_name() {
        let shared = RbacOptions {
            webhook_secret: Some(SecretRef {
                namespace: "operators".into(),
                name: "webhook-tls".into(),
            }),
            ..options(None)
        };
        let documents = rbac_documents(&registry(), &shared).unwrap();
        let role = documents
            .iter()
            .find(|d| d["kind"] == "Role")
            .expect("a Role");
        assert_eq!(role["metadata"]["namespace"], "operators");
        assert_eq!(
            role["rules"],
            json!([
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
                {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["webhook-tls"],
                 "verbs": ["get", "update"]},
            ])
        );
    }

    /// Parses the printed YAML back into documents.
    pub(crate) fn parse(text: &str) -> Vec<Value> {
        text.split("\n---\n")
            .map(|doc| doc.trim_start_matches("---\n"))
            .filter(|doc| doc.lines().any(|l| !l.starts_with('#') && !l.is_empty()))
            .map(|doc| serde_norway::from_str(doc).unwrap())
            .collect()
    }

    fn kinds(documents: &[Value]) -> Vec<&str> {
        documents
            .iter()
            .map(|d| d["kind"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn clusterwide_is_one_cluster_role() {
        let text = rbac_yaml(&registry(), &options(None)).unwrap();
        assert!(text.starts_with("# RBAC"), "{text}");
        let documents = parse(&text);
        assert_eq!(
            kinds(&documents),
            ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"]
        );
        assert_eq!(
            documents[1]["rules"],
            json!([
                {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["list", "watch"]},
                {"apiGroups": ["kopf.dev"], "resources": ["clusterkopfpeerings"], "verbs": ["get", "list", "watch", "patch"]},
                {"apiGroups": ["kopf.dev"], "resources": ["kopfexamples"], "verbs": ["get", "list", "watch", "patch"]},
                {"apiGroups": ["kopf.dev"], "resources": ["kopfexamples/status"], "verbs": ["patch"]},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
                {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
                {"apiGroups": ["*"], "resources": ["kex"], "verbs": ["get", "list", "watch", "patch"]},
                {"apiGroups": ["*"], "resources": ["kex/status"], "verbs": ["patch"]},
                {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
            ])
        );
        assert_eq!(documents[0]["metadata"]["namespace"], "default");
        assert_eq!(documents[2]["roleRef"]["name"], "kopf-operator");
        assert_eq!(
            documents[2]["subjects"],
            json!([{"kind": "ServiceAccount", "name": "kopf-operator", "namespace": "default"}])
        );
    }

    #[test]
    fn the_managed_webhook_configurations_are_created_and_patched_by_name() {
        let managed = RbacOptions {
            admission_managed: Some("auto.kopf.dev".into()),
            ..options(Some(&["default"]))
        };
        let documents = rbac_documents(&registry(), &managed).unwrap();
        let cluster_role = documents
            .iter()
            .find(|d| d["kind"] == "ClusterRole")
            .unwrap();
        let rules = cluster_role["rules"].as_array().unwrap();
        let configurations = json!([
            "validatingwebhookconfigurations",
            "mutatingwebhookconfigurations"
        ]);
        assert!(rules.contains(&json!({
            "apiGroups": ["admissionregistration.k8s.io"], "resources": configurations,
            "verbs": ["create"],
        })));
        assert!(rules.contains(&json!({
            "apiGroups": ["admissionregistration.k8s.io"], "resources": configurations,
            "resourceNames": ["auto.kopf.dev"], "verbs": ["get", "list", "watch", "patch"],
        })));
        let without = rbac_documents(&registry(), &options(None)).unwrap();
        assert!(
            !serde_json::to_string(&without)
                .unwrap()
                .contains("webhookconfigurations"),
            "nothing without the option"
        );
    }

    #[test]
    fn exact_namespaces_get_roles() {
        let documents =
            rbac_documents(&registry(), &options(Some(&["ns1", "ns2", "ns1"]))).unwrap();
        assert_eq!(
            kinds(&documents),
            [
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
                "Role",
                "RoleBinding"
            ]
        );
        assert_eq!(
            documents[1]["rules"],
            json!([{"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["list", "watch"]}])
        );
        assert_eq!(documents[3]["metadata"]["namespace"], "ns1");
        assert_eq!(documents[5]["metadata"]["namespace"], "ns2");
        let rules = documents[3]["rules"].as_array().unwrap();
        assert_eq!(rules[0]["resources"], json!(["kopfexamples"]));
        assert_eq!(
            rules[rules.len() - 2..],
            [
                json!({"apiGroups": ["kopf.dev"], "resources": ["kopfpeerings"], "verbs": ["get", "list", "watch", "patch"]}),
                json!({"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}),
            ]
        );
        assert_eq!(documents[4]["roleRef"]["kind"], "Role");
        assert_eq!(documents[6]["metadata"]["namespace"], "ns2");
    }

    #[test]
    fn globs_need_namespaces_and_a_cluster_role() {
        let mut options = options(Some(&["ns-*,!ns-x"]));
        options.with_service_account = false;
        let documents = rbac_documents(&registry(), &options).unwrap();
        assert_eq!(kinds(&documents), ["ClusterRole", "ClusterRoleBinding"]);
        let rules = documents[0]["rules"].as_array().unwrap();
        assert_eq!(
            rules[1],
            json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]})
        );
        assert!(rules.iter().any(|r| r["resources"] == json!(["pods"])));
        assert_eq!(
            rules[2],
            json!({"apiGroups": ["kopf.dev"], "resources": ["kopfpeerings"], "verbs": ["get", "list", "watch", "patch"]}),
            "a KopfPeering in each namespace that the globs match"
        );
        assert!(rbac_documents(&registry(), &super::tests::options(Some(&["a,,b"]))).is_err());
    }

    #[test]
    fn declared_rules_are_printed_where_their_scope_needs_them() {
        use k8s_openapi::api::apps::v1::Deployment;
        use k8s_openapi::api::core::v1::Namespace;

        let registry = registry()
            .with(
                ChangeHandler::on_create(
                    Selector::new("kopf.dev", "v1", "kopfexamples"),
                    "child_fn",
                    |_| async { Ok(None) },
                )
                .owns::<Deployment>()
                .reads::<Namespace>(),
            )
            .with(
                ChangeHandler::on_delete(Selector::named("kex"), "silent_fn", |_| async {
                    Ok(None)
                })
                .takes_client(),
            )
            .rbac_rule(RbacRule::new("", ["secrets"], ["get"]).names(["credentials"]));
        let text = rbac_yaml(&registry, &options(Some(&["ns1"]))).unwrap();
        assert!(text.contains("# Not covered: any other API call"), "{text}");
        assert!(
            text.contains("# Declared by child_fn: apps/deployments: get, list, watch, create, update, patch, delete\n"),
            "{text}"
        );
        assert!(text.contains("# Declared by child_fn: core/namespaces: get, list, watch\n"));
        assert!(text.contains(
            "# Declared with Registry::rbac_rule: core/secrets named credentials: get\n"
        ));
        assert!(
            text.contains("# NOT COVERED: silent_fn takes a `client` but declares nothing it touches through it"),
            "{text}"
        );
        let documents = parse(&text);
        assert_eq!(
            kinds(&documents)[1..4],
            ["ClusterRole", "ClusterRoleBinding", "Role"]
        );
        let cluster_rules = documents[1]["rules"].as_array().unwrap();
        assert!(cluster_rules.contains(&json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]})));
        let role_rules = documents[3]["rules"].as_array().unwrap();
        assert!(role_rules.contains(&json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]})));
        assert!(role_rules.contains(&json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["credentials"]})));
        assert!(
            !cluster_rules
                .iter()
                .any(|r| r["resources"] == json!(["deployments"]))
        );
    }

    #[test]
    fn everything_needs_everything() {
        let registry = Registry::new()
            .with(ChangeHandler::on_create(
                Selector::Everything,
                "all",
                |_| async { Ok(None) },
            ))
            .with(ChangeHandler::on_create(
                Selector::category("all"),
                "category",
                |_| async { Ok(None) },
            ));
        let documents = rbac_documents(&registry, &options(None)).unwrap();
        assert_eq!(
            documents[1]["rules"][2],
            json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch", "patch"]})
        );
        assert_eq!(documents[1]["rules"].as_array().unwrap().len(), 4);
    }

    /// A typed custom resource, as users derive them.
    #[derive(
        kube::CustomResource,
        serde::Serialize,
        serde::Deserialize,
        Clone,
        Debug,
        schemars::JsonSchema,
    )]
    #[kube(
        group = "kopf.dev",
        version = "v1",
        kind = "KopfExample",
        plural = "kopfexamples",
        shortname = "kex",
        namespaced,
        status = "ExampleStatus"
    )]
    struct ExampleSpec {
        field: Option<String>,
    }

    #[derive(serde::Serialize, serde::Deserialize, Clone, Debug, schemars::JsonSchema)]
    struct ExampleStatus {
        message: Option<String>,
    }

    #[test]
    fn crds_print_as_declared() {
        let text = crd_yaml(&Registry::new());
        assert!(text.starts_with("# No CRDs"), "{text}");
        let peering = parse(&text);
        let names: Vec<&Value> = peering.iter().map(|d| &d["metadata"]["name"]).collect();
        assert_eq!(
            names,
            ["clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev"]
        );
        let scopes: Vec<&Value> = peering.iter().map(|d| &d["spec"]["scope"]).collect();
        assert_eq!(scopes, ["Cluster", "Namespaced"]);
        let version = &peering[1]["spec"]["versions"][0];
        assert_eq!(
            (&version["name"], &version["served"], &version["storage"]),
            (&json!("v1"), &json!(true), &json!(true))
        );
        assert_eq!(
            version["schema"]["openAPIV3Schema"]["properties"]["status"],
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
        );
        assert!(version["subresources"].is_null(), "no status subresource");
        assert_eq!(peering[1]["spec"]["names"]["kind"], "KopfPeering");

        let registry = Registry::new().crd::<KopfExample>().crd::<KopfExample>();
        let documents = parse(&crd_yaml(&registry));
        assert_eq!(kinds(&documents), ["CustomResourceDefinition"; 3]);
        assert_eq!(documents[0]["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(documents[0]["metadata"]["name"], "kopfexamples.kopf.dev");
        assert_eq!(documents[0]["spec"]["names"]["shortNames"], json!(["kex"]));
    }

    /// The printed RBAC, applied to the fake API server, is accepted as it is: every document
    /// is a valid object of its kind, namespaced where it must be.
    #[tokio::test]
    async fn printed_rbac_applies_to_the_fake_server() {
        let server = kopf_testing::FakeApiServer::start().await.unwrap();
        let client = server.client();
        for namespaces in [None, Some(&["default", "kube-system"][..])] {
            let text = rbac_yaml(&registry(), &options(namespaces)).unwrap();
            for document in parse(&text) {
                let kind = document["kind"].as_str().unwrap().to_string();
                let name = document["metadata"]["name"].as_str().unwrap().to_string();
                let (prefix, plural) = match kind.as_str() {
                    "ServiceAccount" => ("/api/v1".to_string(), "serviceaccounts"),
                    "ClusterRole" => (
                        "/apis/rbac.authorization.k8s.io/v1".to_string(),
                        "clusterroles",
                    ),
                    "ClusterRoleBinding" => (
                        "/apis/rbac.authorization.k8s.io/v1".to_string(),
                        "clusterrolebindings",
                    ),
                    "Role" => ("/apis/rbac.authorization.k8s.io/v1".to_string(), "roles"),
                    "RoleBinding" => (
                        "/apis/rbac.authorization.k8s.io/v1".to_string(),
                        "rolebindings",
                    ),
                    other => panic!("an unexpected kind in the RBAC output: {other}"),
                };
                let path = match document["metadata"]["namespace"].as_str() {
                    Some(ns) => format!("{prefix}/namespaces/{ns}/{plural}/{name}"),
                    None => format!("{prefix}/{plural}/{name}"),
                };
                let request = http::Request::patch(format!("{path}?fieldManager=kopf&force=true"))
                    .header("content-type", "application/apply-patch+yaml")
                    .body(serde_json::to_vec(&document).unwrap())
                    .unwrap();
                let text = client
                    .request_text(request)
                    .await
                    .unwrap_or_else(|e| panic!("{kind} {name}: {e}"));
                let applied: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(applied["kind"], kind.as_str(), "{applied}");
            }
        }
        drop(client);
        server.stop().await;
    }

    /// The printed CRD, applied to the fake API server, serves its resource.
    #[tokio::test]
    async fn printed_crds_apply_to_the_fake_server() {
        let server = kopf_testing::FakeApiServer::start().await.unwrap();
        let client = server.client();
        let registry = Registry::new().crd::<KopfExample>();
        let send = |method: &str, path: &str, content_type: &str, body: Value| {
            let request = http::Request::builder()
                .method(method)
                .uri(path)
                .header("content-type", content_type)
                .body(serde_json::to_vec(&body).unwrap())
                .unwrap();
            let client = client.clone();
            async move {
                let text = client.request_text(request).await.unwrap();
                serde_json::from_str::<Value>(&text).unwrap()
            }
        };
        for crd in parse(&crd_yaml(&registry)) {
            let name = crd["metadata"]["name"].as_str().unwrap().to_string();
            let applied = send(
                "PATCH",
                &format!(
                    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}?fieldManager=kopf&force=true"
                ),
                "application/apply-patch+yaml",
                crd,
            )
            .await;
            assert_eq!(applied["kind"], "CustomResourceDefinition", "{applied}");
        }
        let mut created = Value::Null;
        for _ in 0..50 {
            let object = json!({
                "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                "metadata": {"name": "one"}, "spec": {"field": "x"},
            });
            let request = http::Request::post("/apis/kopf.dev/v1/namespaces/default/kopfexamples")
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&object).unwrap())
                .unwrap();
            if let Ok(text) = client.request_text(request).await {
                created = serde_json::from_str(&text).unwrap();
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(created["spec"]["field"], "x", "{created}");
    }
}
