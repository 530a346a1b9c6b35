//! One HTTP request, from arrival to answer: authentication, faults, counting, routing, and
//! turning errors into `Status` objects.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Limited};
use hyper::body::Incoming;

use super::control::{FaultAction, LoggedRequest, RequestFacts};
use super::reply::{Body, Reply, error_response, full, respond};
use super::request::{Context, Format, Query, Route, Verb};
use super::resources::verbs;
use super::shared::Shared;
use super::{control_api, discovery};
use crate::apiserver::semantics::status::{ApiError, ApiResult};

/// The largest request body the server accepts, as the real one (3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// Serves one request. Never fails: errors become `Status` answers.
pub(crate) async fn handle(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let (parts, body) = request.into_parts();
    let route = Route::parse(parts.uri.path());
    let query = Query::parse(parts.uri.query());
    let (verb, resource, namespace, name) = match &route {
        Route::Object(path) => {
            let mut resource = if path.group.is_empty() {
                path.plural.clone()
            } else {
                format!("{}.{}", path.plural, path.group)
            };
            if let Some(sub) = &path.subresource {
                resource = format!("{resource}/{sub}");
            }
            let verb = Verb::of(&parts.method, path.name.is_some(), &query);
            let namespace = if path.plural == "namespaces" && path.group.is_empty() {
                path.name.clone()
            } else {
                path.namespace.clone()
            };
            (verb, resource, namespace, path.name.clone())
        }
        _ => (
            if parts.method == Method::GET {
                Verb::Get
            } else {
                Verb::Other
            },
            "-".to_string(),
            None,
            None,
        ),
    };
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.to_string());
    let mut context = Context {
        method: parts.method.clone(),
        route,
        query,
        verb,
        format: Format::of(&parts.headers),
        content_type: content_type.clone(),
        user_agent: parts
            .headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        close_watch_after: None,
    };
    let is_control = matches!(context.route, Route::Control(_));
    if !is_control {
        shared.counters.count(verb.as_str(), &resource);
    }

    let result = async {
        authenticate(&shared, &parts.headers, &context.route)?;
        if !is_control {
            let facts = RequestFacts {
                verb: verb.as_str(),
                resource: &resource,
                namespace: namespace.as_deref(),
                name: name.as_deref(),
            };
            for action in shared.faults.fire(&facts) {
                match action {
                    FaultAction::Respond { code, retry_after } => {
                        let code =
                            StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                        return Err(ApiError::injected(code, retry_after));
                    }
                    FaultAction::Delay { millis } => {
                        tokio::time::sleep(Duration::from_millis(millis)).await
                    }
                    FaultAction::CloseWatchAfter { events } => {
                        context.close_watch_after = Some(events)
                    }
                }
            }
        }
        let body = read_body(body).await?;
        dispatch(&shared, &context, body).await
    }
    .await;

    let response = match result {
        Ok(reply) => respond(reply),
        Err(error) => error_response(&error),
    };
    if !is_control {
        shared.counters.log(LoggedRequest {
            method: parts.method.to_string(),
            path: parts.uri.path().to_string(),
            query: parts.uri.query().unwrap_or_default().to_string(),
            verb: verb.as_str().to_string(),
            resource,
            namespace,
            name,
            content_type,
            code: response.status().as_u16(),
        });
    }
    Ok(response)
}

fn authenticate(shared: &Shared, headers: &http::HeaderMap, route: &Route) -> ApiResult<()> {
    let Some(token) = &shared.token else {
        return Ok(());
    };
    if matches!(route, Route::Health | Route::Control(_)) {
        return Ok(());
    }
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given == Some(token.as_str()) {
        Ok(())
    } else {
        Err(ApiError::unauthorized())
    }
}

async fn read_body(body: Incoming) -> ApiResult<Bytes> {
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => Err(ApiError::too_large()),
        Err(error) => Err(ApiError::bad_request(format!(
            "reading the request body failed: {error}"
        ))),
    }
}

async fn dispatch(shared: &Arc<Shared>, context: &Context, body: Bytes) -> ApiResult<Reply> {
    let get_only = || {
        if context.method == Method::GET {
            Ok(())
        } else {
            Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource".to_string(),
            ))
        }
    };
    match &context.route {
        Route::Version => get_only().map(|_| discovery::version()),
        Route::Health => Ok(Reply {
            code: StatusCode::OK,
            body: full("ok"),
            content_type: "text/plain",
            warnings: vec![],
        }),
        Route::CoreVersions => {
            get_only().and_then(|_| discovery::core_versions(shared, context.format))
        }
        Route::Groups => get_only().and_then(|_| discovery::groups(shared, context.format)),
        Route::Group(group) => get_only().and_then(|_| discovery::group(shared, group)),
        Route::Resources { group, version } => {
            get_only().and_then(|_| discovery::resources(shared, group, version))
        }
        Route::OpenApiV3 => get_only().map(|_| discovery::openapi_root(shared)),
        Route::OpenApiV3Doc { group, version } => {
            get_only().and_then(|_| discovery::openapi_document(shared, group, version))
        }
        Route::OpenApiV2 => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the fake server serves OpenAPI v3 only (/openapi/v3)",
        )),
        Route::Control(path) => {
            control_api::serve(shared, &context.method, path, &context.query, body).await
        }
        Route::Object(path) => verbs::serve(shared, context, path, body).await,
        Route::NotFound => Err(ApiError::no_route("")),
    }
}
