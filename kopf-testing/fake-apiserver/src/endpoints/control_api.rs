//! The control API under `/_fake/`, for tests written in other languages than Rust.
//!
//! | request | effect |
//! |---|---|
//! | `GET /_fake/stats` | [`Stats`](super::Stats) as JSON |
//! | `GET /_fake/requests`, `DELETE /_fake/requests` | the request log; forget it and the counters |
//! | `GET /_fake/faults`, `POST /_fake/faults` (a [`Fault`](super::Fault)), `DELETE /_fake/faults` | list, add, clear fault rules |
//! | `POST /_fake/faults/seed?seed=N` | reseed the generator behind probabilistic faults |
//! | `GET /_fake/held`, `POST /_fake/held/release`, `POST /_fake/held/cut` | the writes held by `hold` faults (a list of [`HeldWrite`](super::holding::HeldWrite)); let them go on; end them without an answer |
//! | `POST /_fake/close-watches` | end every open watch stream now |
//! | `POST /_fake/compact` | forget the watch history (the next watch from an old version gets 410) |
//! | `POST /_fake/restart` | drop every connection, keep the data |
//! | `PUT /_fake/bookmark-interval?millis=N` | how often bookmarks are sent |
//! | `POST /_fake/recreate` (an object) | re-create it under its name with a new uid (served by the router: it needs the resources' endpoints) |
//!
//! When the server requires a token, so does the control API (`401 Unauthorized` without it).
//! In front of a real API server, compacting, the bookmark interval, re-creating and the
//! `stale_view` fault are refused (`400 Bad Request`, saying that they work on the fake
//! server only).
//!
//! Fault rules in JSON name their action in snake case, for instance
//! `{"verb": "patch", "times": 1, "action": {"commit_then_fail": {"code": 500}}}`,
//! `{"verb": "watch", "action": "silent_watch"}`,
//! `{"verb": "list", "action": {"reset_mid_body": {"bytes": 10}}}` or
//! `{"verb": "update", "action": {"conflict": {"compete": true}}}` or
//! `{"verb": "patch", "after": 2, "times": 1, "action": {"hold": {"commit": true}}}`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::json;

use super::control::{Fault, lock};
use super::holding::Release;
use super::reply::Reply;
use super::request::Query;
use super::shared::{Shared, stats};
use crate::semantics::status::{ApiError, ApiResult};

pub(crate) async fn serve(
    shared: &Arc<Shared>,
    method: &Method,
    path: &str,
    query: &Query,
    body: Bytes,
) -> ApiResult<Reply> {
    let done = || Reply::json(StatusCode::OK, &json!({"status": "ok"}));
    let to_json = |value: serde_json::Result<serde_json::Value>| {
        value.map_err(|e| ApiError::internal(e.to_string()))
    };
    match (method.as_str(), path) {
        ("GET", "stats") => Ok(Reply::json(
            StatusCode::OK,
            &to_json(serde_json::to_value(stats(shared)))?,
        )),
        ("GET", "requests") => Ok(Reply::json(
            StatusCode::OK,
            &to_json(serde_json::to_value(shared.counters.logged()))?,
        )),
        ("DELETE", "requests") => {
            shared.counters.reset();
            Ok(done())
        }
        ("GET", "faults") => Ok(Reply::json(
            StatusCode::OK,
            &to_json(serde_json::to_value(shared.faults.list()))?,
        )),
        ("POST", "faults") => {
            let fault: Fault = serde_json::from_slice(&body)
                .map_err(|e| ApiError::bad_request(format!("not a fault rule: {e}")))?;
            shared
                .faults
                .add(fault, shared.upstream.as_ref().map(|u| u.url()))
                .map_err(ApiError::bad_request)?;
            Ok(done())
        }
        ("DELETE", "faults") => {
            shared.faults.clear();
            Ok(done())
        }
        ("GET", "held") => Ok(Reply::json(
            StatusCode::OK,
            &to_json(serde_json::to_value(shared.pen.held()))?,
        )),
        ("POST", "held/release") => Ok(Reply::json(
            StatusCode::OK,
            &to_json(serde_json::to_value(shared.pen.decide(Release::Answer)))?,
        )),
        ("POST", "held/cut") => Ok(Reply::json(
            StatusCode::OK,
            &to_json(serde_json::to_value(shared.pen.decide(Release::Cut)))?,
        )),
        ("POST", "faults/seed") => {
            let seed = query
                .number("seed")
                .ok_or_else(|| ApiError::bad_request("seed=N is required"))?;
            shared.faults.reseed(seed);
            Ok(done())
        }
        ("POST", "close-watches") => {
            shared.close_watches();
            Ok(done())
        }
        ("POST", "compact") => {
            shared
                .fake_only("compacting the watch history")
                .map_err(ApiError::bad_request)?;
            lock(&shared.state).compact();
            Ok(done())
        }
        ("POST", "restart") => {
            shared.restart();
            Ok(done())
        }
        ("PUT", "bookmark-interval") => {
            shared
                .fake_only("changing the bookmark interval")
                .map_err(ApiError::bad_request)?;
            let millis = query
                .number("millis")
                .ok_or_else(|| ApiError::bad_request("millis=N is required"))?;
            *lock(&shared.bookmark_interval) = Duration::from_millis(millis);
            Ok(done())
        }
        _ => Err(ApiError::no_route(&format!("/_fake/{path}"))),
    }
}
