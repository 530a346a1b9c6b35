//! The subresources of pods and ServiceAccounts that tools rely on: `pods/binding` (and the
//! top-level `bindings`), `pods/eviction` (`kubectl drain`), `pods/ephemeralcontainers`
//! (`kubectl debug`), `pods/log`, `pods/exec`, `pods/attach` and `pods/portforward` (as the
//! real server answers them for pods no kubelet runs), and `serviceaccounts/token`
//! (`kubectl create token`).

use http::StatusCode;
use serde_json::{Value, json};

use super::admitting;
use super::partial;
use super::target::Target;
use super::target::current;
use super::writes::{commit, delete_options, dry_run, parse_object, updater, write_object};
use crate::endpoints::reply::Reply;
use crate::endpoints::request::{Context, Verb};
use crate::endpoints::shared::Shared;
use crate::semantics::admission::FieldValidation;
use crate::semantics::lifecycle::{self, Scope};
use crate::semantics::selector::LabelSelector;
use crate::semantics::status::{ApiError, ApiResult, Subject, status_object};
use crate::semantics::webhooks::Operation;
use crate::storage::object;

/// How long a requested token lives unless the request says (as `kubectl create token`).
const TOKEN_SECONDS: u64 = 3600;

/// `POST .../serviceaccounts/NAME/token`: a token that acts as the account.
pub(super) fn token(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    body: &[u8],
) -> ApiResult<Reply> {
    let name = target.name();
    current(shared, target, name)?;
    let mut request = if body.is_empty() {
        json!({})
    } else {
        parse_object(context, body)?
    };
    let seconds = request["spec"]["expirationSeconds"]
        .as_u64()
        .unwrap_or(TOKEN_SECONDS);
    if seconds < 600 {
        return Err(ApiError::invalid_field(
            target.subject(name),
            "TokenRequest",
            "FieldValueInvalid",
            "spec.expirationSeconds",
            &format!("Invalid value: {seconds}: may not specify a duration less than 10 minutes"),
        ));
    }
    let expires =
        time::OffsetDateTime::now_utc() + time::Duration::seconds(seconds.min(1 << 32) as i64);
    let token = shared.access.service_account_token(&target.namespace, name);
    request["apiVersion"] = json!("authentication.k8s.io/v1");
    request["kind"] = json!("TokenRequest");
    request["metadata"] = json!({"name": name, "namespace": target.namespace});
    request["spec"]["expirationSeconds"] = json!(seconds);
    request["status"] = json!({
        "token": token,
        "expirationTimestamp": object::format_timestamp(expires),
    });
    Ok(Reply::json(StatusCode::CREATED, &request))
}

/// `POST .../pods/NAME/binding` or `.../bindings`: assigns a pod to a node, once. The Binding
/// is admitted as a creation on `admitted_as` (`pods/binding`, or the resource `bindings`);
/// the pod's change is not admitted (kube-apiserver assigns it without admission).
pub(super) async fn binding(
    shared: &Shared,
    context: &Context,
    (target, admitted_as): (&Target<'_>, &Target<'_>),
    pod_name: &str,
    body: &[u8],
) -> ApiResult<Reply> {
    let binding = requested(context, target, pod_name, admitting::BINDING, body)?;
    let dry_run = dry_run(context)?;
    let mut warnings = Vec::new();
    let binding = admitting::admit_other_kind(
        shared,
        (context, admitted_as, Operation::Create, pod_name),
        dry_run,
        (binding, None),
        admitting::BINDING,
        |binding| {
            if binding["target"]["name"].as_str().is_none_or(str::is_empty) {
                return Err(ApiError::invalid_field(
                    target.subject(pod_name),
                    "Binding",
                    "FieldValueRequired",
                    "target.name",
                    "Required value",
                ));
            }
            Ok(())
        },
        &mut warnings,
    )
    .await?;
    let node = binding["target"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let updater = updater(context, target);
    write_object(
        shared,
        None,
        target,
        pod_name,
        (Scope::Main, Some(&updater)),
        (FieldValidation::Ignore, dry_run),
        |pod| {
            if let Some(assigned) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "Conflict",
                    format!(
                        "Operation cannot be fulfilled on pods/binding \"{pod_name}\": pod {pod_name} is already assigned to node \"{assigned}\""
                    ),
                ));
            }
            let mut pod = pod.clone();
            pod["spec"]["nodeName"] = json!(node);
            Ok(pod)
        },
    )
    .await?;
    Ok(success().with_warnings(warnings))
}

/// The object of a request on a pod's subresource (a Binding, an Eviction) as admission sees
/// it: its apiVersion and kind filled in when left out, and the pod's namespace.
fn requested(
    context: &Context,
    target: &Target<'_>,
    pod_name: &str,
    (group, version, kind): (&str, &str, &str),
    body: &[u8],
) -> ApiResult<Value> {
    let mut object = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        parse_object(context, body)?
    };
    if object["apiVersion"].is_null() {
        object["apiVersion"] = json!(if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        });
    }
    if object["kind"].is_null() {
        object["kind"] = json!(kind);
    }
    let meta = object::meta_mut(&mut object);
    meta.entry("name").or_insert_with(|| json!(pod_name));
    meta.insert("namespace".into(), json!(target.namespace));
    Ok(object)
}

/// `POST .../pods/NAME/eviction`: deletes the pod unless a disruption budget forbids it. The
/// Eviction is admitted as a creation on `pods/eviction` (webhooks may refuse it); the pod's
/// deletion is not admitted (kube-apiserver deletes it without admission).
pub(super) async fn eviction(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    body: &[u8],
) -> ApiResult<Reply> {
    let name = target.name().to_string();
    let eviction = requested(context, target, &name, admitting::EVICTION, body)?;
    let mut warnings = Vec::new();
    // Webhooks are told of a dry run of the request, not of one its DeleteOptions ask for.
    let eviction = admitting::admit_other_kind(
        shared,
        (context, target, Operation::Create, &name),
        dry_run(context)?,
        (eviction, None),
        admitting::EVICTION,
        |_| Ok(()),
        &mut warnings,
    )
    .await?;
    let options_body = eviction
        .get("deleteOptions")
        .map(|o| o.to_string().into_bytes())
        .unwrap_or_default();
    let (options, dry_run) = delete_options(context, &options_body)?;
    commit(shared, dry_run, |state| {
        let pod = state
            .get(&target.def.key(), &target.key(&name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(target.subject(&name)))?;
        if let Some(budget) = blocking_budget(state, &target.namespace, &pod) {
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
            )
            .with_details(json!({"causes": [{"reason": "DisruptionBudget", "message": format!("The disruption budget {budget} does not allow any disruption")}]})));
        }
        lifecycle::delete(state, &target.def, &target.key(&name), &options).map(|_| ())
    })?;
    Ok(success().with_warnings(warnings))
}

/// The name of a PodDisruptionBudget that selects `pod` and allows no disruption now (no
/// controller computes budgets here, so one that was never computed allows none, as a real
/// cluster's eviction refuses until the disruption controller has looked).
fn blocking_budget(
    state: &crate::storage::state::State,
    namespace: &str,
    pod: &Value,
) -> Option<String> {
    let budgets = state.objects(&("policy".to_string(), "poddisruptionbudgets".to_string()))?;
    let labels = pod["metadata"]["labels"].as_object();
    budgets
        .iter()
        .filter(|(key, _)| key.0 == namespace)
        .map(|(_, budget)| budget)
        .find(|budget| {
            LabelSelector::from_object(&budget["spec"]["selector"])
                .is_some_and(|selector| selector.matches(labels))
                && budget["status"]["disruptionsAllowed"].as_i64().unwrap_or(0) < 1
        })
        .map(|budget| object::name(budget).to_string())
}

/// `pods/NAME/ephemeralcontainers`: reads the pod, or changes only its ephemeral containers
/// (which can be added, never changed or removed).
pub(super) async fn ephemeral_containers(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    verb: Verb,
    body: &[u8],
) -> ApiResult<Reply> {
    let name = target.name().to_string();
    partial::serve(
        shared,
        context,
        target,
        (verb, Scope::Main),
        body,
        |pod, proposed| {
            let before = pod["spec"]["ephemeralContainers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let after = proposed["spec"]["ephemeralContainers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            // As the real validation: every existing container stays as it was, matched by
            // name wherever it now sits (a strategic merge puts the new ones first).
            for old in &before {
                let problem = match after.iter().find(|new| new["name"] == old["name"]) {
                    None => "removed",
                    // Fields left out may be ones the server defaulted: only those given count.
                    Some(new)
                        if new.as_object().is_some_and(|fields| {
                            fields
                                .iter()
                                .any(|(field, value)| old.get(field) != Some(value))
                        }) =>
                    {
                        "changed"
                    }
                    Some(_) => continue,
                };
                let old_name = old["name"].as_str().unwrap_or_default();
                return Err(ApiError::invalid_field(
                    target.subject(&name),
                    "Pod",
                    "FieldValueForbidden",
                    "spec.ephemeralContainers",
                    &format!(
                        "Forbidden: existing ephemeral containers \"{old_name}\" may not be {problem}"
                    ),
                ));
            }
            let mut pod = pod.clone();
            pod["spec"]["ephemeralContainers"] = json!(after);
            Ok(pod)
        },
    )
    .await
}

/// `GET .../pods/NAME/log`: what the kubelet of the pod's node would stream. A pod on no node
/// has no logs: the real server answers `204 No Content` (its `LocationStreamer` has nowhere
/// to read from); a pod on a node would need that node's kubelet.
pub(super) fn log(shared: &Shared, context: &Context, target: &Target<'_>) -> ApiResult<Reply> {
    let name = target.name();
    let pod = current(shared, target, name)?;
    pod_container(&pod, name, context.query.get("container"))?;
    match assigned_node(&pod) {
        None => Ok(Reply {
            code: StatusCode::NO_CONTENT,
            body: crate::endpoints::reply::full(""),
            content_type: "text/plain",
            warnings: Vec::new(),
        }),
        Some(node) => Err(no_kubelet(shared, node)),
    }
}

/// `exec`, `attach` and `portforward` on a pod: streams to its node's kubelet. A pod on no
/// node is `400 Bad Request` (`pod NAME does not have a host assigned`), after the container
/// is checked as the real server checks it (not for `portforward`).
pub(super) fn stream(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    subresource: &str,
) -> ApiResult<Reply> {
    let name = target.name();
    let pod = current(shared, target, name)?;
    if subresource != "portforward" {
        pod_container(&pod, name, context.query.get("container"))?;
    }
    match assigned_node(&pod) {
        None => Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        ))),
        Some(node) => Err(no_kubelet(shared, node)),
    }
}

/// The node a pod is assigned to, if any.
fn assigned_node(pod: &Value) -> Option<&str> {
    pod["spec"]["nodeName"].as_str().filter(|node| !node.is_empty())
}

/// The container a request on a pod names, checked as kube-apiserver's `validateContainer`:
/// one must be named unless the pod has a single container, and it must be one of the pod's
/// (init, regular or ephemeral).
fn pod_container(pod: &Value, name: &str, given: Option<&str>) -> ApiResult<()> {
    let spec = &pod["spec"];
    let names = |field: &str| {
        spec[field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|container| container["name"].as_str())
            .collect::<Vec<_>>()
    };
    let all: Vec<&str> = ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(names)
        .collect();
    match given {
        Some(container) if all.contains(&container) => Ok(()),
        Some(container) => Err(ApiError::bad_request(format!(
            "container {container} is not valid for pod {name}"
        ))),
        None => match names("containers").len() {
            1 => Ok(()),
            0 => Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}"
            ))),
            _ => Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                all.join(" ")
            ))),
        },
    }
}

/// Why a request for a node's kubelet fails: the node does not exist (as on a cluster), or it
/// does, but the fake server runs no kubelet to dial.
fn no_kubelet(shared: &Shared, node: &str) -> ApiError {
    let exists = shared.read(|state| {
        state
            .get(
                &(String::new(), "nodes".to_string()),
                &(String::new(), node.to_string()),
            )
            .is_some()
    });
    if exists {
        ApiError::internal(format!(
            "error dialing backend: the fake API server runs no kubelet for node {node:?}"
        ))
    } else {
        ApiError::not_found(Subject {
            group: "",
            plural: "nodes",
            name: node,
        })
    }
}

/// A `Status` of success, as the real server answers bindings and evictions.
fn success() -> Reply {
    Reply::json(
        StatusCode::CREATED,
        &status_object("Success", 201, "", "", None),
    )
}
