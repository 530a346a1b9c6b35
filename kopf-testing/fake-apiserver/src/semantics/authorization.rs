//! Kubernetes' RBAC authorizer: whether a user may do a request, judged by the stored Roles,
//! ClusterRoles, RoleBindings and ClusterRoleBindings (`rbac.authorization.k8s.io/v1`), and
//! the `403 Forbidden` answer in the API server's words when not.
//!
//! As in Kubernetes:
//! 1. A ClusterRoleBinding grants its ClusterRole's rules everywhere; a RoleBinding grants its
//!    Role's (in its namespace) or ClusterRole's rules only in the binding's namespace.
//! 2. A subject matches a ServiceAccount by name and namespace (a RoleBinding's subject
//!    without one means the binding's namespace), a `User` by name, a `Group` by name
//!    (`system:serviceaccounts`, `system:serviceaccounts:<namespace>`,
//!    `system:authenticated` for every service account, `system:unauthenticated` for
//!    `system:anonymous`).
//! 3. A rule matches when its `verbs`, `apiGroups` and `resources` (`plural`, `plural/sub`,
//!    `*`, `*/sub`, `plural/*`) cover the request, and its `resourceNames`, if any, name the
//!    object (a request without a name, such as a list or a create, never matches them).
//! 4. A request on a namespace object (`/api/v1/namespaces/x`) is in that namespace.
//!
//! 5. A request on a path outside resources (`/healthz`, `/apis`, ...) matches a rule's
//!    `nonResourceURLs` (exact, or a prefix ending in `*`) and its verb is the HTTP method in
//!    lower case: the bootstrap `system:discovery` and `system:public-info-viewer` roles open
//!    discovery to every authenticated user and the health checks to everyone.
//!
//! Only grants exist: what no rule allows is forbidden. Aggregated ClusterRoles
//! (`aggregationRule`) are not evaluated.

use serde_json::{Value, json};

use super::status::ApiError;
use crate::storage::state::State;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Who makes a request: a user and their groups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Identity {
    /// `system:serviceaccount:<namespace>:<name>` for service accounts.
    pub(crate) user: String,
    /// The user's uid, when known: a ServiceAccount's token authenticates with the account's.
    pub(crate) uid: Option<String>,
    pub(crate) groups: Vec<String>,
    /// For service accounts: their namespace and name.
    pub(crate) service_account: Option<(String, String)>,
    /// What the authenticator adds to `UserInfo.extra`, in order: the credential's id, the pod
    /// a token is bound to.
    pub(crate) extra: Vec<(String, String)>,
}

impl Identity {
    /// The identity of a ServiceAccount's token, with the groups Kubernetes gives it.
    pub(crate) fn service_account(namespace: &str, name: &str) -> Identity {
        Identity {
            user: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".to_string(),
                format!("system:serviceaccounts:{namespace}"),
                AUTHENTICATED.to_string(),
            ],
            service_account: Some((namespace.to_string(), name.to_string())),
            uid: None,
            extra: Vec::new(),
        }
    }

    /// Who a request without credentials is, on a server that authenticates them.
    pub(crate) fn anonymous() -> Identity {
        Identity {
            user: ANONYMOUS.to_string(),
            groups: vec![UNAUTHENTICATED.to_string()],
            ..Identity::default()
        }
    }

    /// Whether this is a request without credentials.
    pub(crate) fn is_anonymous(&self) -> bool {
        self.user == ANONYMOUS
    }

    /// The `UserInfo` of this identity (`authentication.k8s.io/v1`), as reviews and admission
    /// webhooks are told it: a ServiceAccount's token's has the account's uid, and the
    /// credential it used in `extra`.
    pub(crate) fn user_info(&self) -> Value {
        let mut info = json!({"username": self.user});
        if let Some(uid) = &self.uid {
            info["uid"] = json!(uid);
        }
        if !self.groups.is_empty() {
            info["groups"] = json!(self.groups);
        }
        if !self.extra.is_empty() {
            let mut extra = serde_json::Map::new();
            for (key, value) in &self.extra {
                extra.insert(key.clone(), json!([value]));
            }
            info["extra"] = Value::Object(extra);
        }
        info
    }

    /// The cluster's admin, as a kubeconfig from `kind` or `kubeadm` authenticates.
    pub(crate) fn admin() -> Identity {
        Identity::named("kubernetes-admin", vec![MASTERS.to_string()])
    }

    /// A user by name, in `groups` and `system:authenticated`; a
    /// `system:serviceaccount:<namespace>:<name>` user is that ServiceAccount.
    pub(crate) fn named(user: &str, mut groups: Vec<String>) -> Identity {
        if let Some(account) = user.strip_prefix("system:serviceaccount:")
            && let Some((namespace, name)) = account.split_once(':')
        {
            let mut identity = Identity::service_account(namespace, name);
            identity.groups.extend(groups);
            return identity;
        }
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.to_string());
        }
        Identity {
            user: user.to_string(),
            uid: None,
            groups,
            service_account: None,
            extra: Vec::new(),
        }
    }

    /// Whether RBAC is bypassed for this identity, as for `system:masters` in a real cluster.
    pub(crate) fn is_superuser(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }
}

/// The group whose members may do anything, whatever the roles say.
const MASTERS: &str = "system:masters";
const AUTHENTICATED: &str = "system:authenticated";
const ANONYMOUS: &str = "system:anonymous";
const UNAUTHENTICATED: &str = "system:unauthenticated";

/// What `who` may do in `namespace`: the rules of every role bound to them there and
/// cluster-wide (`SelfSubjectRulesReview`).
pub(crate) fn rules_of(state: &State, who: &Identity, namespace: Option<&str>) -> Vec<Value> {
    if who.is_superuser() {
        return vec![
            json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
            json!({"verbs": ["*"], "nonResourceURLs": ["*"]}),
        ];
    }
    granted_rules(state, who, namespace)
}

/// Whether `who` may `verb` the non-resource `path` (`/healthz`, `/metrics`, ...).
pub(crate) fn allows_path(state: &State, who: &Identity, verb: &str, path: &str) -> bool {
    who.is_superuser()
        || granted_rules(state, who, None).iter().any(|rule| {
            let listed = |key: &str, wanted: &str| {
                rule[key].as_array().is_some_and(|values| {
                    values.iter().filter_map(Value::as_str).any(|v| {
                        v == "*"
                            || v == wanted
                            || v.strip_suffix('*')
                                .is_some_and(|prefix| wanted.starts_with(prefix))
                    })
                })
            };
            listed("verbs", verb) && listed("nonResourceURLs", path)
        })
}

/// What a request does, as the authorizer sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attributes<'a> {
    /// A Kubernetes verb: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`.
    pub(crate) verb: &'a str,
    pub(crate) group: &'a str,
    /// The plural.
    pub(crate) resource: &'a str,
    pub(crate) subresource: Option<&'a str>,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) name: Option<&'a str>,
}

/// Whether `who` may do `what`; a `403 Forbidden` in the API server's words if not.
pub(crate) fn authorize(
    state: &State,
    who: &Identity,
    what: &Attributes<'_>,
) -> Result<(), ApiError> {
    if who.is_superuser()
        || granted_rules(state, who, what.namespace)
            .iter()
            .any(|rule| allows(rule, what))
    {
        Ok(())
    } else {
        Err(forbidden(who, what))
    }
}

/// The rules that apply to `who` in `namespace` (cluster-wide ones only, for `None`).
fn granted_rules(state: &State, who: &Identity, namespace: Option<&str>) -> Vec<Value> {
    let mut rules = Vec::new();
    for binding in objects(state, "clusterrolebindings") {
        if binds(&binding, who, None) && binding["roleRef"]["kind"] == "ClusterRole" {
            rules.extend(role_rules(state, "clusterroles", None, &binding["roleRef"]));
        }
    }
    if let Some(namespace) = namespace {
        for binding in objects(state, "rolebindings") {
            if binding["metadata"]["namespace"].as_str() != Some(namespace)
                || !binds(&binding, who, Some(namespace))
            {
                continue;
            }
            match binding["roleRef"]["kind"].as_str() {
                Some("Role") => rules.extend(role_rules(
                    state,
                    "roles",
                    Some(namespace),
                    &binding["roleRef"],
                )),
                Some("ClusterRole") => {
                    rules.extend(role_rules(state, "clusterroles", None, &binding["roleRef"]))
                }
                _ => {}
            }
        }
    }
    rules
}

fn objects(state: &State, plural: &str) -> Vec<Value> {
    state
        .objects(&(RBAC_GROUP.to_string(), plural.to_string()))
        .map(|objects| objects.values().map(|o| (**o).clone()).collect())
        .unwrap_or_default()
}

/// The rules of the role that `role_ref` names (a Role in `namespace`, or a ClusterRole).
fn role_rules(
    state: &State,
    plural: &str,
    namespace: Option<&str>,
    role_ref: &Value,
) -> Vec<Value> {
    objects(state, plural)
        .into_iter()
        .find(|role| {
            role["metadata"]["name"] == role_ref["name"]
                && role["metadata"]["namespace"].as_str() == namespace
        })
        .and_then(|role| role["rules"].as_array().cloned())
        .unwrap_or_default()
}

/// Whether one of the binding's subjects is `who`.
fn binds(binding: &Value, who: &Identity, namespace: Option<&str>) -> bool {
    let subjects = binding["subjects"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    subjects.iter().any(|subject| {
        let name = subject["name"].as_str().unwrap_or_default();
        match subject["kind"].as_str() {
            Some("ServiceAccount") => {
                let subject_namespace = subject["namespace"].as_str().or(namespace);
                who.service_account
                    .as_ref()
                    .is_some_and(|(ns, sa)| Some(ns.as_str()) == subject_namespace && sa == name)
            }
            Some("User") => who.user == name,
            Some("Group") => who.groups.iter().any(|group| group == name),
            _ => false,
        }
    })
}

/// Whether one rule allows the request.
fn allows(rule: &Value, what: &Attributes<'_>) -> bool {
    let listed = |key: &str, wanted: &str| {
        rule[key]
            .as_array()
            .is_some_and(|values| values.iter().any(|v| v == "*" || v == wanted))
    };
    let resource = match what.subresource {
        Some(sub) => format!("{}/{sub}", what.resource),
        None => what.resource.to_string(),
    };
    let resource_listed = rule["resources"].as_array().is_some_and(|values| {
        values.iter().filter_map(Value::as_str).any(|value| {
            value == "*"
                || value == resource
                || what.subresource.is_some_and(|sub| {
                    value == format!("*/{sub}") || value == format!("{}/*", what.resource)
                })
        })
    });
    let names = rule["resourceNames"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let named = names.is_empty()
        || what
            .name
            .is_some_and(|name| names.iter().any(|n| n == name));
    listed("verbs", what.verb) && listed("apiGroups", what.group) && resource_listed && named
}

/// The API server's answer to a forbidden request (`responsewriters.Forbidden`).
pub(crate) fn forbidden(who: &Identity, what: &Attributes<'_>) -> ApiError {
    let resource = match what.subresource {
        Some(sub) => format!("{}/{sub}", what.resource),
        None => what.resource.to_string(),
    };
    let scope = match what.namespace {
        Some(namespace) => format!("in the namespace {namespace:?}"),
        None => "at the cluster scope".to_string(),
    };
    let why = format!(
        "User {:?} cannot {} resource {resource:?} in API group {:?} {scope}",
        who.user, what.verb, what.group
    );
    let qualified = if what.group.is_empty() {
        what.resource.to_string()
    } else {
        format!("{}.{}", what.resource, what.group)
    };
    let message = match what.name {
        Some(name) => format!("{qualified} {name:?} is forbidden: {why}"),
        None => format!("{qualified} is forbidden: {why}"),
    };
    let mut details = json!({"kind": what.resource});
    if let Some(name) = what.name {
        details["name"] = json!(name);
    }
    if !what.group.is_empty() {
        details["group"] = json!(what.group);
    }
    ApiError::forbidden(message).with_details(details)
}

/// The API server's answer to a request on a path outside resources that no rule grants:
/// `verb` is the HTTP method in lower case, as Kubernetes names it for such paths.
pub(crate) fn forbidden_path(who: &Identity, verb: &str, path: &str) -> ApiError {
    ApiError::forbidden(format!(
        "forbidden: User {:?} cannot {verb} path {path:?}",
        who.user
    ))
    .with_details(json!({}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::state::State;

    fn state_with(objects: &[Value]) -> State {
        let mut state = State::new(100);
        for object in objects {
            let plural = match object["kind"].as_str().unwrap() {
                "Role" => "roles",
                "ClusterRole" => "clusterroles",
                "RoleBinding" => "rolebindings",
                _ => "clusterrolebindings",
            };
            let def = state
                .catalog
                .get(RBAC_GROUP, plural)
                .expect("RBAC is built in")
                .clone();
            state.put(&def, object.clone());
        }
        state
    }

    fn request<'a>(verb: &'a str, resource: &'a str, namespace: Option<&'a str>) -> Attributes<'a> {
        Attributes {
            verb,
            group: "apps",
            resource,
            subresource: None,
            namespace,
            name: None,
        }
    }

    fn operator() -> Identity {
        Identity::service_account("default", "op")
    }

    fn role_and_binding() -> Vec<Value> {
        vec![
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "op", "namespace": "default"},
                   "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create", "get"]},
                             {"apiGroups": ["apps"], "resources": ["deployments/scale"], "resourceNames": ["web"], "verbs": ["update"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "op", "namespace": "default"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "op"},
                   "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "default"}]}),
        ]
    }

    #[test]
    fn a_role_grants_its_verbs_in_its_namespace_only() {
        let state = state_with(&role_and_binding());
        let allowed = authorize(
            &state,
            &operator(),
            &request("create", "deployments", Some("default")),
        );
        assert_eq!(allowed, Ok(()));
        let error = authorize(
            &state,
            &operator(),
            &request("create", "deployments", Some("other")),
        )
        .unwrap_err();
        assert_eq!(error.code, http::StatusCode::FORBIDDEN);
        assert_eq!(
            error.message,
            "deployments.apps is forbidden: User \"system:serviceaccount:default:op\" cannot create resource \"deployments\" in API group \"apps\" in the namespace \"other\""
        );
        assert!(
            authorize(
                &state,
                &operator(),
                &request("delete", "deployments", Some("default"))
            )
            .is_err()
        );
        assert!(authorize(&state, &operator(), &request("list", "deployments", None)).is_err());
        let stranger = Identity::service_account("default", "stranger");
        assert!(
            authorize(
                &state,
                &stranger,
                &request("get", "deployments", Some("default"))
            )
            .is_err()
        );
    }

    #[test]
    fn resource_names_and_subresources_narrow_a_rule() {
        let state = state_with(&role_and_binding());
        let scale = |name| Attributes {
            subresource: Some("scale"),
            name: Some(name),
            ..request("update", "deployments", Some("default"))
        };
        assert_eq!(authorize(&state, &operator(), &scale("web")), Ok(()));
        let error = authorize(&state, &operator(), &scale("db")).unwrap_err();
        assert_eq!(
            error.message,
            "deployments.apps \"db\" is forbidden: User \"system:serviceaccount:default:op\" cannot update resource \"deployments/scale\" in API group \"apps\" in the namespace \"default\""
        );
        assert_eq!(
            error.details.as_deref(),
            Some(&json!({"kind": "deployments", "name": "db", "group": "apps"}))
        );
    }

    #[test]
    fn a_cluster_role_binding_grants_everywhere_and_groups_match() {
        let state = state_with(&[
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "reader"},
                   "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "reader"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "reader"},
                   "subjects": [{"kind": "Group", "name": "system:serviceaccounts:default"}]}),
        ]);
        assert_eq!(
            authorize(&state, &operator(), &request("list", "deployments", None)),
            Ok(())
        );
        assert_eq!(
            authorize(
                &state,
                &operator(),
                &request("watch", "deployments", Some("x"))
            ),
            Ok(())
        );
        let error =
            authorize(&state, &operator(), &request("patch", "deployments", None)).unwrap_err();
        assert!(
            error
                .message
                .ends_with("in API group \"apps\" at the cluster scope"),
            "{}",
            error.message
        );
        let elsewhere = Identity::service_account("kube-system", "op");
        assert!(authorize(&state, &elsewhere, &request("list", "deployments", None)).is_err());
    }
}
