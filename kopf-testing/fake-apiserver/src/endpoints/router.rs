//! One HTTP request, from arrival to answer: authentication and authorization, faults, counting, routing (to the
//! server's own endpoints, or through the proxy to a real server behind it), and turning
//! errors into `Status` objects.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Limited};
use hyper::body::Incoming;

use super::control::{FaultAction, LoggedRequest, RequestFacts};
use super::holding::{HeldWrite, Release};
use super::proxy;
use super::recording::Recorded;
use super::reply::{Body, Cut, CutBody, Reply, error_response, full, respond};
use super::request::{Context, Format, Query, Route, Verb};
use super::resources::{recreate, verbs};
use super::shared::Shared;
use super::{access, control_api, discovery};
use crate::semantics::authorization::Identity;
use crate::semantics::status::{ApiError, ApiResult};

/// The largest request body the server accepts, as the real one (3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// What injected faults do to a request once it is served.
#[derive(Debug, Default)]
struct Aftermath {
    /// Answer this code instead of the result of a successful write.
    fail_with: Option<u16>,
    /// Drop the connection instead of answering a successful write.
    reset: bool,
    /// Send this much of a list's body (`Some(None)`: half of it), then cut the connection.
    cut_list: Option<Option<u64>>,
    /// Hold the write until the test decides: after making it (`Some(true)`) or before.
    hold: Option<bool>,
    /// The test cut the held write: drop the connection without an answer.
    cut_held: bool,
}

/// Serves one request. Errors become `Status` answers; it fails (and hyper drops the
/// connection without an answer) only when an injected fault says so.
pub(crate) async fn handle(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Cut> {
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
            let verb = Verb::of(&parts.method, path, &query);
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
        requester: Identity::default(),
        user_agent: parts
            .headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        close_watch_after: None,
        reset_watch_after: None,
        break_stream: None,
        silent_watch: false,
        conflict: None,
        shuffle_seed: None,
        stale_by: None,
    };
    let mut aftermath = Aftermath::default();
    let mut fired_faults = Vec::new();
    // The body as read, for the recording mode.
    let mut read = Bytes::new();
    let is_control = matches!(context.route, Route::Control(_));
    if !is_control {
        shared.counters.count(verb.as_str(), &resource);
    }

    // A proxy in front of a real server forwards everything but its own control API, and
    // leaves authentication to the upstream.
    let proxied = shared.upstream.as_ref().filter(|_| !is_control);
    let mut failed_upstream = false;
    let result = async {
        if proxied.is_none() {
            context.requester = access::check(
                &shared.access,
                &shared.state,
                &parts,
                &context.route,
                verb.as_str(),
            )?;
        }
        if !is_control {
            let facts = RequestFacts {
                verb: verb.as_str(),
                resource: &resource,
                namespace: namespace.as_deref(),
                name: name.as_deref(),
                user_agent: context.user_agent.as_deref(),
                any_version: context.query.get("resourceVersion") == Some("0"),
            };
            for fired in shared.faults.fire(&facts) {
                shared.counters.fired(fired.action.name());
                fired_faults.push(fired.action.name().to_string());
                match fired.action {
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
                    FaultAction::CommitThenFail { code } => aftermath.fail_with = Some(code),
                    FaultAction::CommitThenReset => aftermath.reset = true,
                    FaultAction::ResetMidBody { events, bytes } => match verb {
                        Verb::Watch => context.reset_watch_after = Some(events),
                        _ => aftermath.cut_list = Some(bytes),
                    },
                    FaultAction::SilentWatch => context.silent_watch = true,
                    FaultAction::Conflict { compete } => context.conflict = Some(compete),
                    FaultAction::ShuffleList => context.shuffle_seed = Some(fired.seed),
                    FaultAction::Hold { commit } => aftermath.hold = Some(commit),
                    FaultAction::StaleView { versions } => context.stale_by = Some(versions),
                    FaultAction::BreakStream { breach, after } => {
                        context.break_stream = Some((breach, after))
                    }
                }
            }
        }
        let body = read_body(body, shared.body_timeout).await?;
        if shared.recorder.is_some() {
            read = body.clone();
        }
        let held = |committed: bool| HeldWrite {
            verb: verb.as_str().to_string(),
            resource: resource.clone(),
            namespace: namespace.clone(),
            name: name.clone(),
            body: String::from_utf8_lossy(&body).into_owned(),
            committed,
        };
        if aftermath.hold == Some(false) {
            let write = held(false);
            if shared.pen.hold(write, &shared.root).await == Release::Cut {
                aftermath.cut_held = true;
                return Err(ApiError::internal("the test cut this held write"));
            }
        }
        let write_after = (aftermath.hold == Some(true)).then(|| held(true));
        let mut response = match proxied {
            Some(upstream) => {
                let path_and_query = parts.uri.path_and_query().map_or("/", |p| p.as_str());
                let response = proxy::forward(
                    &shared,
                    upstream,
                    &context,
                    &parts.headers,
                    path_and_query,
                    body,
                )
                .await?;
                if !response.status().is_success() {
                    // A write that failed upstream was not made: it gets its real answer.
                    failed_upstream = true;
                    return Ok(response);
                }
                response
            }
            None => {
                let dispatched = dispatch(&shared, &context, body).await;
                // Nothing is answered (not even an error after a write, such as an injected
                // conflict's) before the state file holds what the answer may show.
                shared.saved().await?;
                respond(dispatched?)
            }
        };
        if let Some(write) = write_after
            && shared.pen.hold(write, &shared.root).await == Release::Cut
        {
            aftermath.cut_held = true;
        }
        if let Some(code) = aftermath.fail_with {
            let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return Err(ApiError::injected(code, None));
        }
        if let Some(bytes) = aftermath.cut_list {
            let (head, body) = response.into_parts();
            let whole = body.collect().await.map_err(|_| {
                ApiError::internal("a list's body could not be read to cut it short")
            })?;
            let whole = whole.to_bytes();
            let sent = bytes.map_or(whole.len() / 2, |b| b as usize);
            response = Response::from_parts(head, CutBody::new(&whole, sent).boxed_unsync());
        }
        Ok(response)
    }
    .await;

    // A write that failed on its own was not committed: it gets its real answer.
    let cut = (aftermath.reset && result.is_ok() && !failed_upstream) || aftermath.cut_held;
    let response = match result {
        Ok(response) => response,
        Err(error) => error_response(&error),
    };
    if !is_control && let Some(recorder) = &shared.recorder {
        recorder.record(Recorded {
            parts: &parts,
            body: &read,
            code: if cut { 0 } else { response.status().as_u16() },
            faults: &fired_faults,
        });
    }
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
            user_agent: context.user_agent.clone(),
            faults: fired_faults,
            code: if cut { 0 } else { response.status().as_u16() },
        });
    }
    if cut {
        return Err(Cut);
    }
    Ok(response)
}

/// The request's body, within `timeout`: a client that trickles it holds the connection no
/// longer.
async fn read_body(body: Incoming, timeout: Duration) -> ApiResult<Bytes> {
    let read = tokio::time::timeout(timeout, Limited::new(body, MAX_BODY).collect()).await;
    let Ok(read) = read else {
        return Err(ApiError::body_timeout(timeout));
    };
    match read {
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
            // As the real server's health handlers write it.
            content_type: "text/plain; charset=utf-8",
            warnings: vec![],
        }),
        Route::OpenIdConfiguration => get_only().map(|_| {
            let jwks_uri = format!("{}/openid/v1/jwks", shared.url);
            Reply::json(StatusCode::OK, &shared.access.signer().discovery(&jwks_uri))
        }),
        Route::OpenIdKeys => get_only().map(|_| {
            let keys = shared.access.signer().key_set();
            Reply::json_as(StatusCode::OK, &keys, "application/jwk-set+json")
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
        // Served here rather than by the control API, which sits below the resources' endpoints.
        Route::Control(path) if path == "recreate" && context.method == Method::POST => {
            shared
                .fake_only("re-creating an object")
                .map_err(ApiError::bad_request)?;
            let object = serde_json::from_slice(&body)
                .map_err(|e| ApiError::bad_request(format!("not an object to re-create: {e}")))?;
            let created = recreate(shared, object)?;
            Ok(Reply::json(StatusCode::CREATED, &created))
        }
        Route::Control(path) => {
            control_api::serve(shared, &context.method, path, &context.query, body).await
        }
        Route::Object(path) => verbs::serve(shared, context, path, body).await,
        Route::NotFound => Err(ApiError::no_route("")),
    }
}
