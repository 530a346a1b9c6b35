//! One HTTP request, from arrival to answer: authentication, faults, counting, routing, and
//! turning errors into `Status` objects.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use serde_json::Value;

use super::control::{FaultAction, LoggedRequest, RequestFacts};
use super::request::{Format, Query, Route, Verb};
use super::server::Shared;
use super::status::{ApiError, ApiResult};
use super::{control_api, discovery, verbs};

/// Response bodies: whole JSON documents or watch streams.
pub(crate) type Body = UnsyncBoxBody<Bytes, Infallible>;

/// The largest request body the server accepts, as the real one (3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// What a request handler answers.
pub(crate) struct Reply {
    pub(crate) code: StatusCode,
    pub(crate) body: Body,
    pub(crate) content_type: &'static str,
    pub(crate) warnings: Vec<String>,
}

impl Reply {
    pub(crate) fn json(code: StatusCode, value: &Value) -> Reply {
        Reply::json_as(code, value, "application/json")
    }

    pub(crate) fn json_as(code: StatusCode, value: &Value, content_type: &'static str) -> Reply {
        let bytes = serde_json::to_vec(value).unwrap_or_default();
        Reply {
            code,
            body: full(bytes),
            content_type,
            warnings: Vec::new(),
        }
    }

    pub(crate) fn with_warnings(mut self, warnings: Vec<String>) -> Reply {
        self.warnings = warnings;
        self
    }
}

pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

/// Everything known about a request before its body is read.
#[derive(Debug)]
pub(crate) struct Context {
    pub(crate) method: Method,
    pub(crate) route: Route,
    pub(crate) query: Query,
    pub(crate) verb: Verb,
    pub(crate) format: Format,
    pub(crate) content_type: Option<String>,
    /// The `User-Agent` header: names the manager of writes without a `fieldManager`.
    pub(crate) user_agent: Option<String>,
    /// Watch streams end after this many events (an injected fault).
    pub(crate) close_watch_after: Option<u64>,
}

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

fn respond(reply: Reply) -> Response<Body> {
    let mut response = Response::new(reply.body);
    *response.status_mut() = reply.code;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(reply.content_type),
    );
    add_warnings(&mut response, &reply.warnings);
    response
}

fn add_warnings(response: &mut Response<Body>, warnings: &[String]) {
    for warning in warnings {
        let text = format!("299 - \"{}\"", warning.replace('"', "\\\""));
        if let Ok(value) = HeaderValue::from_str(&text) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
}

/// The `Status` answer for an error, with `Retry-After` and `Warning` headers where due.
pub(crate) fn error_response(error: &ApiError) -> Response<Body> {
    let bytes = serde_json::to_vec(&error.to_status()).unwrap_or_default();
    let mut response = Response::new(full(bytes));
    *response.status_mut() = error.code;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(seconds) = error.retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    add_warnings(&mut response, &error.warnings);
    response
}
