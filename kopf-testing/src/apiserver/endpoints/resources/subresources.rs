//! The subresources of pods and ServiceAccounts that tools rely on: `pods/binding` (and the
//! top-level `bindings`), `pods/eviction` (`kubectl drain`), `pods/ephemeralcontainers`
//! (`kubectl debug`), and `serviceaccounts/token` (`kubectl create token`).

use http::StatusCode;
use serde_json::{Value, json};

use super::partial;
use super::target::Target;
use super::target::current;
use super::writes::{commit, delete_options, dry_run, parse_object, updater, write_object};
use crate::apiserver::endpoints::reply::Reply;
use crate::apiserver::endpoints::request::{Context, Verb};
use crate::apiserver::endpoints::shared::Shared;
use crate::apiserver::semantics::admission::FieldValidation;
use crate::apiserver::semantics::lifecycle::{self, Scope};
use crate::apiserver::semantics::selector::LabelSelector;
use crate::apiserver::semantics::status::{ApiError, ApiResult, status_object};
use crate::apiserver::storage::object;

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

/// `POST .../pods/NAME/binding` or `.../bindings`: assigns a pod to a node, once.
pub(super) async fn binding(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    pod_name: &str,
    body: &[u8],
) -> ApiResult<Reply> {
    let binding = parse_object(context, body)?;
    let node = binding["target"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if node.is_empty() {
        return Err(ApiError::invalid_field(
            target.subject(pod_name),
            "Binding",
            "FieldValueRequired",
            "target.name",
            "Required value",
        ));
    }
    let updater = updater(context, target);
    // Webhooks that ask for `pods/binding` would see a `Binding`; this server does not call
    // them for it (see the crate's docs).
    write_object(
        shared,
        None,
        target,
        pod_name,
        (Scope::Main, Some(&updater)),
        (FieldValidation::Ignore, dry_run(context)?),
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
    Ok(success())
}

/// `POST .../pods/NAME/eviction`: deletes the pod unless a disruption budget forbids it.
pub(super) fn eviction(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    body: &[u8],
) -> ApiResult<Reply> {
    let name = target.name().to_string();
    let eviction = if body.is_empty() {
        json!({})
    } else {
        parse_object(context, body)?
    };
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
    Ok(success())
}

/// The name of a PodDisruptionBudget that selects `pod` and allows no disruption now (no
/// controller computes budgets here, so one that was never computed allows none, as a real
/// cluster's eviction refuses until the disruption controller has looked).
fn blocking_budget(
    state: &crate::apiserver::storage::state::State,
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

/// A `Status` of success, as the real server answers bindings and evictions.
fn success() -> Reply {
    Reply::json(
        StatusCode::CREATED,
        &status_object("Success", 201, "", "", None),
    )
}
