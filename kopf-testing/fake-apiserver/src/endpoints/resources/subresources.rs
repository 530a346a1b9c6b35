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
use crate::semantics::tokens::{Binding, BoundKind, Grant, ISSUER};
use crate::semantics::webhooks::Operation;
use crate::storage::object;

/// How long a requested token lives unless the request says (the `TokenRequest` default).
const TOKEN_SECONDS: i64 = 3600;
/// The shortest life a token may be asked for (`MinTokenAgeSec`).
const MIN_TOKEN_SECONDS: i64 = 600;
/// The longest life a token may be asked for.
const MAX_TOKEN_SECONDS: i64 = 1 << 32;

/// What a `TokenRequest` asks for, read as the Go types would read it.
struct TokenRequestSpec {
    audiences: Vec<String>,
    expiration_seconds: i64,
    bound_object_ref: Option<Value>,
}

/// `POST .../serviceaccounts/NAME/token`: a token that acts as the account, signed by the
/// server, for the audiences asked (the API server's own by default), expiring when asked
/// (in an hour by default), and bound to a Pod, Secret or Node if asked.
pub(super) fn token(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    body: &[u8],
) -> ApiResult<Reply> {
    let name = target.name();
    let request = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        parse_object(context, body)?
    };
    let spec = token_request_spec(&request).map_err(|error| {
        ApiError::bad_request(format!(
            "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: {error}"
        ))
    })?;
    let token_request = Subject {
        group: "authentication.k8s.io",
        plural: "tokenrequests",
        name: "",
    };
    for (field, expected) in [("name", name), ("namespace", target.namespace.as_str())] {
        let given = request["metadata"][field].as_str().unwrap_or_default();
        if !given.is_empty() && given != expected {
            return Err(ApiError::invalid_field(
                Subject {
                    name,
                    ..token_request
                },
                "TokenRequest",
                "FieldValueInvalid",
                &format!("metadata.{field}"),
                &format!(
                    "Invalid value: {given:?}: must match the service account {field} if specified"
                ),
            ));
        }
    }
    let account = current(shared, target, name)?;
    let seconds = spec.expiration_seconds;
    let problem = if seconds < MIN_TOKEN_SECONDS {
        Some("may not specify a duration less than 10 minutes")
    } else if seconds > MAX_TOKEN_SECONDS {
        Some("may not specify a duration larger than 2^32 seconds")
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(ApiError::invalid_field(
            token_request,
            "TokenRequest",
            "FieldValueInvalid",
            "spec.expirationSeconds",
            &format!("Invalid value: {seconds}: {problem}"),
        ));
    }
    let binding = match &spec.bound_object_ref {
        Some(reference) => Some(bound_object(shared, target, name, reference)?),
        None => None,
    };
    let audiences = if spec.audiences.is_empty() {
        vec![ISSUER.to_string()]
    } else {
        spec.audiences
    };
    let uid = object::uid(&account);
    let issued = shared.access.signer().issue(&Grant {
        namespace: &target.namespace,
        name,
        uid,
        audiences: &audiences,
        lifetime: seconds,
        binding,
    });
    let created = issued.expires - time::Duration::seconds(seconds);
    let answer = json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {
            "name": name,
            "namespace": target.namespace,
            "uid": uid,
            "creationTimestamp": object::format_timestamp(created),
        },
        "spec": {
            "audiences": audiences,
            "expirationSeconds": seconds,
            "boundObjectRef": spec.bound_object_ref,
        },
        "status": {
            "token": issued.token,
            "expirationTimestamp": object::format_timestamp(issued.expires),
        },
    });
    Ok(Reply::json(StatusCode::CREATED, &answer))
}

/// Reads a `TokenRequest`'s spec as Go's JSON decoder reads it into the typed object: a field
/// of the wrong type is its error, word for word (`{"spec": 1}` is `json: cannot unmarshal
/// number into Go struct field TokenRequest.spec of type v1.TokenRequestSpec`).
fn token_request_spec(request: &Value) -> Result<TokenRequestSpec, String> {
    let wrong = |value: &Value, field: &str, go_type: &str| {
        let what = match value {
            Value::Bool(_) => "bool".to_string(),
            Value::Number(n) if go_type == "int64" => format!("number {n}"),
            Value::Number(_) => "number".to_string(),
            Value::String(_) => "string".to_string(),
            Value::Array(_) => "array".to_string(),
            Value::Object(_) => "object".to_string(),
            Value::Null => "null".to_string(),
        };
        format!("json: cannot unmarshal {what} into Go struct field {field} of type {go_type}")
    };
    let object_or_null = |value: &Value, field: &str, go_type: &str| match value {
        Value::Null | Value::Object(_) => Ok(()),
        other => Err(wrong(other, field, go_type)),
    };
    let strings = |parent: &Value, fields: &[&str], struct_field: &str| {
        for field in fields {
            match &parent[*field] {
                Value::Null | Value::String(_) => {}
                other => return Err(wrong(other, &format!("{struct_field}.{field}"), "string")),
            }
        }
        Ok(())
    };
    let metadata = &request["metadata"];
    object_or_null(metadata, "TokenRequest.metadata", "v1.ObjectMeta")?;
    strings(
        metadata,
        &["name", "namespace", "uid"],
        "ObjectMeta.metadata",
    )?;
    let spec = &request["spec"];
    object_or_null(spec, "TokenRequest.spec", "v1.TokenRequestSpec")?;
    let audiences_field = "TokenRequestSpec.spec.audiences";
    let audiences = match &spec["audiences"] {
        Value::Null => Vec::new(),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(audience) => Ok(audience.clone()),
                Value::Null => Ok(String::new()),
                other => Err(wrong(other, audiences_field, "string")),
            })
            .collect::<Result<_, _>>()?,
        other => return Err(wrong(other, audiences_field, "[]string")),
    };
    let expiration_field = "TokenRequestSpec.spec.expirationSeconds";
    let expiration_seconds = match &spec["expirationSeconds"] {
        Value::Null => TOKEN_SECONDS,
        Value::Number(n) => n
            .as_i64()
            .ok_or_else(|| wrong(&spec["expirationSeconds"], expiration_field, "int64"))?,
        other => return Err(wrong(other, expiration_field, "int64")),
    };
    let reference = &spec["boundObjectRef"];
    object_or_null(
        reference,
        "TokenRequestSpec.spec.boundObjectRef",
        "v1.BoundObjectReference",
    )?;
    strings(
        reference,
        &["kind", "apiVersion", "name", "uid"],
        "BoundObjectReference.spec.boundObjectRef",
    )?;
    Ok(TokenRequestSpec {
        audiences,
        expiration_seconds,
        bound_object_ref: (!reference.is_null()).then(|| reference.clone()),
    })
}

/// The object a token is to be bound to (`spec.boundObjectRef`), as the real server checks
/// it: a Pod (running as this account), a Secret or a Node, which exists with the uid given.
fn bound_object(
    shared: &Shared,
    target: &Target<'_>,
    account: &str,
    reference: &Value,
) -> ApiResult<Binding> {
    let text = |field: &str| reference[field].as_str().unwrap_or_default();
    let (group, version) = text("apiVersion")
        .rsplit_once('/')
        .unwrap_or(("", text("apiVersion")));
    let kind = text("kind");
    let bound = BoundKind::of(kind)
        .filter(|_| group.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "cannot bind token to object of type {group}/{version}, Kind={kind}"
            ))
        })?;
    let (plural, namespace) = match bound {
        BoundKind::Pod => ("pods", target.namespace.as_str()),
        BoundKind::Secret => ("secrets", target.namespace.as_str()),
        BoundKind::Node => ("nodes", ""),
    };
    let name = text("name");
    let found = shared.read(|state| {
        state
            .get(
                &(String::new(), plural.to_string()),
                &(namespace.to_string(), name.to_string()),
            )
            .cloned()
    });
    let object = found.ok_or_else(|| {
        ApiError::not_found(Subject {
            group: "",
            plural,
            name,
        })
    })?;
    if bound == BoundKind::Pod && object["spec"]["serviceAccountName"] != account {
        return Err(ApiError::bad_request(format!(
            "cannot bind token for serviceaccount {account:?} to pod running with different serviceaccount name."
        )));
    }
    let uid = object::uid(&object);
    let given = text("uid");
    if !given.is_empty() && given != uid {
        return Err(ApiError::conflict(
            Subject {
                group: "",
                plural: kind,
                name,
            },
            &format!(
                "the UID in the bound object reference ({given}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
        ));
    }
    Ok(Binding {
        kind: bound,
        name: name.to_string(),
        uid: uid.to_string(),
    })
}

/// A token for the ServiceAccount `namespace/name` that lives `lifetime` seconds, for the API
/// server's audience, as [`FakeApiServer::service_account_token`] gives tests. The account is
/// created when missing, and its namespace too, as `kubectl create namespace` and `kubectl
/// create serviceaccount` would (without admission: the server's own doing).
///
/// [`FakeApiServer::service_account_token`]: crate::FakeApiServer::service_account_token
pub(crate) fn service_account_token(
    shared: &Shared,
    namespace: &str,
    name: &str,
    lifetime: i64,
) -> ApiResult<String> {
    let account = shared.write(|state| {
        let namespaces = state
            .catalog
            .get("", "namespaces")
            .cloned()
            .ok_or_else(|| ApiError::internal("namespaces are not served"))?;
        if state
            .get(&namespaces.key(), &(String::new(), namespace.to_string()))
            .is_none()
        {
            let object =
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
            lifecycle::create(state, &namespaces, object, None)?;
        }
        let accounts = state
            .catalog
            .get("", "serviceaccounts")
            .cloned()
            .ok_or_else(|| ApiError::internal("serviceaccounts are not served"))?;
        let key = (namespace.to_string(), name.to_string());
        if let Some(account) = state.get(&accounts.key(), &key) {
            return Ok(account.clone());
        }
        let object = json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace},
        });
        lifecycle::create(state, &accounts, object, None)
    })?;
    let audiences = [ISSUER.to_string()];
    let issued = shared.access.signer().issue(&Grant {
        namespace,
        name,
        uid: object::uid(&account),
        audiences: &audiences,
        lifetime,
        binding: None,
    });
    Ok(issued.token)
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
    pod["spec"]["nodeName"]
        .as_str()
        .filter(|node| !node.is_empty())
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
