//! Reviews: objects that are created, answered and never stored. Access reviews ask the RBAC
//! authorizer (`kubectl auth can-i`, `kubectl auth can-i --list`), token reviews ask who a
//! token is (`TokenReview`, `SelfSubjectReview`: `kubectl auth whoami`).

use http::StatusCode;
use serde_json::{Value, json};

use super::target::Target;
use super::writes::parse_body;
use crate::endpoints::access;
use crate::endpoints::reply::Reply;
use crate::endpoints::request::Context;
use crate::endpoints::shared::Shared;
use crate::semantics::authorization::{self, Attributes, Identity};
use crate::semantics::status::{ApiError, ApiResult, Subject};
use crate::semantics::tokens::{ISSUER, Rejection};
use crate::storage::catalog::Builtin;

/// Answers a review: the object as sent, with its `status` filled in.
pub(super) fn review(
    shared: &Shared,
    context: &Context,
    target: &Target<'_>,
    body: &[u8],
) -> ApiResult<Reply> {
    let mut review = parse_body(context, target, body)?;
    if let Some(round_trip) = target.def.round_trip {
        review = round_trip(&review).map_err(|e| {
            ApiError::bad_request(format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: {e}",
                kind = target.def.kind,
                version = target.version,
            ))
        })?;
    }
    let spec = review.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status = match target.def.builtin {
        Some(Builtin::SelfSubjectAccessReview) => {
            access_review(shared, &context.requester, &spec, None)?
        }
        Some(Builtin::SubjectAccessReview) => {
            access_review(shared, &subject_of(&spec)?, &spec, None)?
        }
        Some(Builtin::LocalSubjectAccessReview) => {
            access_review(shared, &subject_of(&spec)?, &spec, Some(&target.namespace))?
        }
        Some(Builtin::SelfSubjectRulesReview) => {
            let namespace = spec["namespace"].as_str().unwrap_or_default();
            rules_review(shared, &context.requester, namespace)
        }
        Some(Builtin::TokenReview) => token_review(shared, &spec)?,
        Some(Builtin::SelfSubjectReview) => json!({"userInfo": context.requester.user_info()}),
        _ => return Err(ApiError::internal("not a review")),
    };
    review["status"] = status;
    let metadata = review
        .get("metadata")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    review["metadata"] = metadata;
    Ok(Reply::json(StatusCode::CREATED, &target.render(&review)))
}

/// Who the token of a `TokenReview` is, for the audiences it asks about (the API server's own
/// when it names none), as the real server answers: a token of no authenticator's is just not
/// authenticated; one of this server's that is invalid says why in `error`.
fn token_review(shared: &Shared, spec: &Value) -> ApiResult<Value> {
    let token = spec["token"].as_str().unwrap_or_default();
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let mut audiences: Vec<String> = spec["audiences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|audience| audience.as_str().map(String::from))
        .collect();
    if audiences.is_empty() {
        audiences.push(ISSUER.to_string());
    }
    Ok(
        match access::review(&shared.access, &shared.state, token, &audiences) {
            Ok((who, granted)) => json!({
                "authenticated": true,
                "user": who.user_info(),
                "audiences": granted,
            }),
            Err(Rejection::NotOurs) => json!({"user": {}}),
            Err(Rejection::Invalid(error)) => json!({"user": {}, "error": error}),
        },
    )
}

fn review_subject() -> Subject<'static> {
    Subject {
        group: "authorization.k8s.io",
        plural: "subjectaccessreviews",
        name: "",
    }
}

/// The user a `SubjectAccessReview` asks about.
fn subject_of(spec: &Value) -> ApiResult<Identity> {
    let user = spec["user"].as_str().unwrap_or_default();
    let groups: Vec<String> = spec["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g.as_str().map(String::from))
        .collect();
    if user.is_empty() && groups.is_empty() {
        return Err(ApiError::invalid_field(
            review_subject(),
            "SubjectAccessReview",
            "FieldValueInvalid",
            "spec.user",
            "Invalid value: \"\": at least one of user or group must be specified",
        ));
    }
    Ok(Identity::named(user, groups))
}

/// Whether `who` may do what `spec` describes (`resourceAttributes` or
/// `nonResourceAttributes`); `namespace` overrides the attributes' for a local review.
fn access_review(
    shared: &Shared,
    who: &Identity,
    spec: &Value,
    namespace: Option<&str>,
) -> ApiResult<Value> {
    let resource = &spec["resourceAttributes"];
    let non_resource = &spec["nonResourceAttributes"];
    let allowed = if resource.is_object() {
        let text = |key: &str| resource[key].as_str().filter(|s| !s.is_empty());
        let attributes = Attributes {
            verb: text("verb").unwrap_or_default(),
            group: text("group").unwrap_or_default(),
            resource: text("resource").unwrap_or_default(),
            subresource: text("subresource"),
            namespace: namespace.filter(|n| !n.is_empty()).or(text("namespace")),
            name: text("name"),
        };
        shared.read(|state| authorization::authorize(state, who, &attributes).is_ok())
    } else if non_resource.is_object() {
        let verb = non_resource["verb"].as_str().unwrap_or_default();
        let path = non_resource["path"].as_str().unwrap_or_default();
        shared.read(|state| authorization::allows_path(state, who, verb, path))
    } else {
        return Err(ApiError::invalid_field(
            review_subject(),
            "SubjectAccessReview",
            "FieldValueInvalid",
            "spec.resourceAttributes",
            "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    };
    let mut status = json!({"allowed": allowed});
    if allowed && who.is_superuser() {
        status["reason"] = json!("allowed: the user is in the group \"system:masters\"");
    }
    Ok(status)
}

/// What `who` may do in `namespace`, as `kubectl auth can-i --list` shows it.
fn rules_review(shared: &Shared, who: &Identity, namespace: &str) -> Value {
    let namespace = (!namespace.is_empty()).then_some(namespace);
    let rules = shared.read(|state| authorization::rules_of(state, who, namespace));
    let field = |rule: &Value, key: &str| rule.get(key).cloned().unwrap_or_else(|| json!([]));
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    for rule in &rules {
        if rule.get("nonResourceURLs").is_some() {
            non_resource_rules.push(json!({
                "verbs": field(rule, "verbs"),
                "nonResourceURLs": field(rule, "nonResourceURLs"),
            }));
        } else {
            let mut resource = json!({
                "verbs": field(rule, "verbs"),
                "apiGroups": field(rule, "apiGroups"),
                "resources": field(rule, "resources"),
            });
            if let Some(names) = rule.get("resourceNames") {
                resource["resourceNames"] = names.clone();
            }
            resource_rules.push(resource);
        }
    }
    json!({
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": false,
    })
}
