//! The verbs on resources: which of get, list, watch, create, update, patch, delete and
//! deletecollection, on an object or its `status`, `finalize` or `scale` subresource, serves a
//! request.

use std::sync::Arc;

use bytes::Bytes;

use super::approval;
use super::reads::{get, list};
use super::reviews;
use super::scale::scale;
use super::subresources;
use super::target::{Target, current, method_not_allowed};
use super::watch;
use super::writes::{competing_write, create, delete, delete_collection, patch, update};
use crate::endpoints::reply::Reply;
use crate::endpoints::request::{Context, ObjectPath, Verb};
use crate::endpoints::shared::Shared;
use crate::semantics::lifecycle::Scope;
use crate::semantics::status::{ApiError, ApiResult};
use crate::storage::catalog::Builtin;

/// Serves a request on a resource path.
pub(crate) async fn serve(
    shared: &Arc<Shared>,
    context: &Context,
    path: &ObjectPath,
    body: Bytes,
) -> ApiResult<Reply> {
    let def = shared
        .read(|s| s.catalog.lookup(&path.group, &path.version, &path.plural))
        .ok_or_else(|| ApiError::no_route(&format!("{}/{}", path.version, path.plural)))?;
    if path.namespace.is_some() && !def.namespaced {
        return Err(ApiError::no_route(&path.plural));
    }
    let namespace = if def.namespaced {
        path.namespace.clone().unwrap_or_default()
    } else {
        String::new()
    };
    if def.namespaced && namespace.is_empty() && path.name.is_some() {
        return Err(ApiError::no_route(&path.plural));
    }
    let target = Target {
        def,
        version: &path.version,
        path,
        namespace,
        format: context.format,
    };
    let needs_namespace = def_needs_namespace(&target, context.verb);
    if needs_namespace {
        return Err(ApiError::bad_request(
            "the namespace of the object must be given in the request path",
        ));
    }
    if let Some(compete) = context.conflict
        && matches!(context.verb, Verb::Update | Verb::Patch | Verb::Delete)
    {
        // An injected conflict: as if a competing writer had changed the object first.
        let name = target.name();
        current(shared, &target, name)?;
        if compete {
            competing_write(shared, &target, name)?;
        }
        return Err(ApiError::stale(target.subject(name)));
    }
    if path.subresource.is_none() && !target.def.verbs.contains(&context.verb.as_str()) {
        return Err(method_not_allowed());
    }
    match (path.subresource.as_deref(), context.verb) {
        (None, Verb::Create) if target.def.builtin.is_some_and(Builtin::is_review) => {
            reviews::review(shared, context, &target, &body)
        }
        (None, Verb::Create) if target.def.builtin == Some(Builtin::Binding) => {
            bind_named_pod(shared, context, &target, &body).await
        }
        (Some("token"), Verb::Create) if target.def.builtin == Some(Builtin::ServiceAccount) => {
            subresources::token(shared, context, &target, &body)
        }
        (Some("binding"), Verb::Create) if target.def.builtin == Some(Builtin::Pod) => {
            let admitted_as = (&target, &target);
            subresources::binding(shared, context, admitted_as, target.name(), &body).await
        }
        (Some("eviction"), Verb::Create) if target.def.builtin == Some(Builtin::Pod) => {
            subresources::eviction(shared, context, &target, &body).await
        }
        (Some("log"), Verb::Get) if target.def.builtin == Some(Builtin::Pod) => {
            subresources::log(shared, context, &target)
        }
        (Some(kubelet @ ("exec" | "attach" | "portforward")), Verb::Get | Verb::Create)
            if target.def.builtin == Some(Builtin::Pod) =>
        {
            subresources::stream(shared, context, &target, kubelet)
        }
        (Some("ephemeralcontainers"), verb) if target.def.builtin == Some(Builtin::Pod) => {
            subresources::ephemeral_containers(shared, context, &target, verb, &body).await
        }
        (Some("approval"), verb)
            if target.def.builtin == Some(Builtin::CertificateSigningRequest) =>
        {
            approval::approval(shared, context, &target, verb, &body).await
        }
        (None, Verb::Get) => get(shared, context, &target),
        (None, Verb::List) => list(shared, context, &target),
        (None, Verb::Watch) => watch::watch(shared, context, &target),
        (None, Verb::Create) => create(shared, context, &target, &body).await,
        (None, Verb::Update) => update(shared, context, &target, &body, Scope::Main).await,
        (None, Verb::Patch) => patch(shared, context, &target, &body, Scope::Main).await,
        (None, Verb::Delete) => delete(shared, context, &target, &body).await,
        (None, Verb::DeleteCollection) => delete_collection(shared, context, &target, &body).await,
        (Some("status"), verb) if target.def.version(target.version).is_some_and(|v| v.status) => {
            match verb {
                Verb::Get => get(shared, context, &target),
                Verb::Update => update(shared, context, &target, &body, Scope::Status).await,
                Verb::Patch => patch(shared, context, &target, &body, Scope::Status).await,
                _ => Err(method_not_allowed()),
            }
        }
        (Some("finalize"), Verb::Update) if target.def.builtin == Some(Builtin::Namespace) => {
            update(shared, context, &target, &body, Scope::Status).await
        }
        (Some("scale"), verb)
            if target
                .def
                .version(target.version)
                .is_some_and(|v| v.scale.is_some()) =>
        {
            scale(shared, context, &target, verb, &body).await
        }
        (Some(sub), _) => Err(ApiError::no_route(sub)),
        (None, _) => Err(method_not_allowed()),
    }
}

fn def_needs_namespace(target: &Target<'_>, verb: Verb) -> bool {
    target.def.namespaced
        && target.namespace.is_empty()
        && matches!(verb, Verb::Create | Verb::DeleteCollection)
}

/// `POST .../namespaces/NS/bindings`: the binding names its pod in `metadata.name`.
async fn bind_named_pod(
    shared: &Arc<Shared>,
    context: &Context,
    target: &Target<'_>,
    body: &Bytes,
) -> ApiResult<Reply> {
    let binding = super::writes::parse_json(body)?;
    let pod = binding["metadata"]["name"].as_str().unwrap_or_default();
    let pods = shared
        .read(|s| s.catalog.get("", "pods").cloned())
        .ok_or_else(|| ApiError::no_route("pods"))?;
    let path = ObjectPath {
        group: String::new(),
        version: "v1".into(),
        namespace: Some(target.namespace.clone()),
        plural: "pods".into(),
        name: Some(pod.to_string()),
        subresource: Some("binding".into()),
    };
    let pods = Target {
        def: pods,
        version: "v1",
        path: &path,
        namespace: target.namespace.clone(),
        format: context.format,
    };
    // Admitted as a creation of a `bindings` object, not on `pods/binding`.
    subresources::binding(shared, context, (&pods, target), pod, body).await
}
