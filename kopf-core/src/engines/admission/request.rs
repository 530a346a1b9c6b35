//! An `AdmissionReview` request as kube-apiserver sends it (`admission.k8s.io/v1` or
//! `v1beta1`), read strictly enough that nothing later can fail on its shape.

use http::StatusCode;
use serde_json::{Map, Value};

use crate::structs::reviews::Operation;

/// The review versions this operator answers; the response is of the request's version.
const VERSIONS: [&str; 2] = ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"];

/// What one review asks, checked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ReviewRequest {
    /// Echoed in the response.
    pub(crate) api_version: String,
    /// Echoed in the response.
    pub(crate) kind: String,
    /// Echoed as `response.uid`.
    pub(crate) uid: String,
    /// `request.resource`: the resource as the webhook's rules matched it.
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) plural: String,
    /// `request.kind.kind` (may be empty in hand-made reviews).
    pub(crate) object_kind: String,
    /// `None` for the main object.
    pub(crate) subresource: Option<String>,
    pub(crate) operation: Operation,
    pub(crate) userinfo: Value,
    /// `request.object`: absent on `DELETE` (and `CONNECT`).
    pub(crate) object: Option<Value>,
    /// `request.oldObject`: on `UPDATE` and `DELETE`.
    pub(crate) old_object: Option<Value>,
    pub(crate) dryrun: bool,
    /// `request.namespace`, absent for cluster-scoped objects.
    pub(crate) namespace: Option<String>,
}

impl ReviewRequest {
    /// `object`, or `oldObject` when there is no object (Kopf's `body`).
    pub(crate) fn body(&self) -> &Value {
        match (&self.object, &self.old_object) {
            (Some(object), _) | (None, Some(object)) => object,
            // `parse` refuses a review with neither.
            (None, None) => &Value::Null,
        }
    }
}

/// Why a request is not a review that can be judged: the HTTP status and what to say.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub(crate) struct RequestError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl RequestError {
    pub(crate) fn bad(message: impl Into<String>) -> RequestError {
        RequestError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }
}

/// Reads a review from the body of a webhook call.
pub(crate) fn parse(body: &[u8]) -> Result<ReviewRequest, RequestError> {
    let review: Value = serde_json::from_slice(body)
        .map_err(|error| RequestError::bad(format!("the body is not JSON: {error}")))?;
    let review = review.as_object().ok_or_else(|| {
        RequestError::bad("the body is not an AdmissionReview: expected a JSON object")
    })?;
    let api_version = optional_string(review, "apiVersion", "")?
        .unwrap_or(VERSIONS[0])
        .to_owned();
    if !VERSIONS.contains(&api_version.as_str()) {
        return Err(RequestError::bad(format!(
            "unsupported apiVersion {api_version:?}: expected one of {}",
            VERSIONS.join(", ")
        )));
    }
    let kind = optional_string(review, "kind", "")?
        .unwrap_or("AdmissionReview")
        .to_owned();
    if kind != "AdmissionReview" {
        return Err(RequestError::bad(format!(
            "unsupported kind {kind:?}: expected AdmissionReview"
        )));
    }
    let request = object(review, "request", "")?
        .ok_or_else(|| RequestError::bad("the AdmissionReview has no request"))?;
    let uid = optional_string(request, "uid", "request.")?
        .ok_or_else(|| RequestError::bad("the AdmissionReview has no request.uid"))?
        .to_owned();
    let resource = object(request, "resource", "request.")?
        .ok_or_else(|| RequestError::bad("the AdmissionReview has no request.resource"))?;
    let group = optional_string(resource, "group", "request.resource.")?.unwrap_or_default();
    let version = optional_string(resource, "version", "request.resource.")?.unwrap_or_default();
    let plural = optional_string(resource, "resource", "request.resource.")?.unwrap_or_default();
    if version.is_empty() || plural.is_empty() {
        return Err(RequestError::bad(
            "request.resource needs a version and a resource",
        ));
    }
    let object_kind = match object(request, "kind", "request.")? {
        Some(kind) => optional_string(kind, "kind", "request.kind.")?.unwrap_or_default(),
        None => "",
    };
    let subresource = optional_string(request, "subResource", "request.")?
        .filter(|subresource| !subresource.is_empty())
        .map(str::to_owned);
    let operation = optional_string(request, "operation", "request.")?
        .ok_or_else(|| RequestError::bad("the AdmissionReview has no request.operation"))?
        .parse::<Operation>()
        .map_err(|error| RequestError::bad(format!("request.operation: {error}")))?;
    let userinfo = match request.get("userInfo") {
        None | Some(Value::Null) => {
            return Err(RequestError::bad(
                "User info is missing from the admission request.",
            ));
        }
        Some(userinfo @ Value::Object(_)) => userinfo.clone(),
        Some(_) => return Err(RequestError::bad("request.userInfo is not an object")),
    };
    let object_of = |key: &str| -> Result<Option<Value>, RequestError> {
        Ok(object(request, key, "request.")?.map(|map| Value::Object(map.clone())))
    };
    let new = object_of("object")?;
    let old = object_of("oldObject")?;
    if new.is_none() && old.is_none() {
        return Err(RequestError::bad(
            "Either old or new object is missing from the admission request.",
        ));
    }
    let dryrun = match request.get("dryRun") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(dryrun)) => *dryrun,
        Some(_) => return Err(RequestError::bad("request.dryRun is not a boolean")),
    };
    let namespace = optional_string(request, "namespace", "request.")?
        .filter(|namespace| !namespace.is_empty())
        .map(str::to_owned);
    Ok(ReviewRequest {
        api_version,
        kind,
        uid,
        group: group.to_owned(),
        version: version.to_owned(),
        plural: plural.to_owned(),
        object_kind: object_kind.to_owned(),
        subresource,
        operation,
        userinfo,
        object: new,
        old_object: old,
        dryrun,
        namespace,
    })
}

/// A string field; absent or `null` is `None`, another type is a mistake of the caller.
fn optional_string<'a>(
    map: &'a Map<String, Value>,
    key: &str,
    prefix: &str,
) -> Result<Option<&'a str>, RequestError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(value)) => Ok(Some(value)),
        Some(_) => Err(RequestError::bad(format!("{prefix}{key} is not a string"))),
    }
}

/// An object field; absent or `null` is `None`, another type is a mistake of the caller.
fn object<'a>(
    map: &'a Map<String, Value>,
    key: &str,
    prefix: &str,
) -> Result<Option<&'a Map<String, Value>>, RequestError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(value)) => Ok(Some(value)),
        Some(_) => Err(RequestError::bad(format!("{prefix}{key} is not an object"))),
    }
}
