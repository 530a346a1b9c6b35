//! Reading objects: get, and list with pagination (`continue` tokens), snapshots at a
//! resourceVersion, selectors and tables; lists in a seeded random order when a fault says so.

use std::ops::Bound;
use std::sync::Arc;

use base64::Engine as _;
use http::StatusCode;
use rand::SeedableRng as _;
use rand::rngs::StdRng;
use rand::seq::SliceRandom as _;
use serde_json::{Value, json};

use super::selectors::Selectors;
use super::target::{Target, current};
use crate::endpoints::reply::Reply;
use crate::endpoints::request::{Context, Format};
use crate::endpoints::shared::Shared;
use crate::semantics::status::{ApiError, ApiResult};
use crate::semantics::table;
use crate::storage::object::{self, ObjectKey};
use crate::storage::state::{Snapshot, State};

pub(super) fn get(shared: &Shared, context: &Context, target: &Target<'_>) -> ApiResult<Reply> {
    target.acceptable(false)?;
    let any_version = context.query.get("resourceVersion") == Some("0");
    let object = match context.stale_by.filter(|_| any_version) {
        None => current(shared, target, target.name())?,
        Some(lag) => shared
            .read(|state| {
                let objects = state.objects_at(&target.def.key(), stale_version(state, lag))?;
                objects.get(&target.key(target.name())).cloned()
            })
            .ok_or_else(|| ApiError::not_found(target.subject(target.name())))?,
    };
    if context.format == Format::Table {
        let rv = object::resource_version(&object).to_string();
        return Ok(table_reply(
            target,
            &[target.render(&object)],
            json!({"resourceVersion": rv}),
        ));
    }
    Ok(Reply::json(StatusCode::OK, &target.answer(&object)))
}

fn table_reply(target: &Target<'_>, objects: &[Value], list_meta: Value) -> Reply {
    let table = table_for(target, objects, list_meta);
    Reply::json(StatusCode::OK, &table)
}

pub(crate) fn table_for(target: &Target<'_>, objects: &[Value], list_meta: Value) -> Value {
    let columns = target
        .def
        .version(target.version)
        .map(|v| v.printer_columns.as_slice())
        .unwrap_or_default();
    table::build_table(objects, columns, list_meta, time::OffsetDateTime::now_utc())
}

/// A `continue` token: the snapshot's version and the last key served.
fn encode_continue(rv: u64, last: &ObjectKey) -> String {
    let token =
        json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{}/{}\u{0}", last.0, last.1)});
    base64::engine::general_purpose::URL_SAFE.encode(token.to_string())
}

fn decode_continue(token: &str) -> ApiResult<(u64, ObjectKey)> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token}"));
    let bytes = base64::engine::general_purpose::URL_SAFE
        .decode(token)
        .map_err(|_| bad())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let rv = value["rv"].as_u64().ok_or_else(bad)?;
    let start = value["start"]
        .as_str()
        .ok_or_else(bad)?
        .trim_end_matches('\u{0}');
    let (namespace, name) = start.split_once('/').ok_or_else(bad)?;
    Ok((rv, (namespace.to_string(), name.to_string())))
}

/// Which snapshot a list reads: its version and, for continued lists, where to start.
fn list_snapshot<'s>(
    state: &'s State,
    context: &Context,
    target: &Target<'_>,
) -> ApiResult<(u64, Snapshot<'s>, Option<ObjectKey>)> {
    let current = state.resource_version();
    let resource = target.def.key();
    if let Some(token) = context.query.get("continue") {
        let (rv, start) = decode_continue(token)?;
        let objects = state.objects_at(&resource, rv).ok_or_else(|| {
            ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
        })?;
        return Ok((rv, objects, Some(start)));
    }
    let requested = context.query.get("resourceVersion");
    let exact = context.query.get("resourceVersionMatch") == Some("Exact");
    match requested.map(|v| v.parse::<u64>()) {
        None | Some(Ok(0)) if !exact => match context.stale_by.filter(|_| requested.is_some()) {
            None => Ok((current, state.snapshot(&resource), None)),
            Some(lag) => {
                let rv = stale_version(state, lag);
                let objects = state.objects_at(&resource, rv).unwrap_or_default();
                Ok((rv, objects, None))
            }
        },
        Some(Ok(rv)) if rv > current => Err(ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "Timeout",
            format!("Too large resource version: {rv}, current: {current}"),
        )
        .with_details(json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}))),
        Some(Ok(rv)) if exact => {
            let objects = state.objects_at(&resource, rv).ok_or_else(|| {
                ApiError::expired(format!("too old resource version: {rv} ({})", state.compacted_rv().saturating_add(1)))
            })?;
            Ok((rv, objects, None))
        }
        Some(Ok(_)) => Ok((current, state.snapshot(&resource), None)),
        _ => Err(ApiError::bad_request(format!(
            "invalid resource version: resourceVersion: Invalid value: {:?}: strconv.ParseUint: parsing {:?}: invalid syntax",
            requested.unwrap_or_default(),
            requested.unwrap_or_default()
        ))),
    }
}

/// One page of a list, read under the state's lock.
struct Page {
    /// The version of the snapshot it comes from.
    rv: u64,
    /// The matching objects, up to the limit.
    objects: Vec<Arc<Value>>,
    /// The key of the last of them.
    last: Option<ObjectKey>,
    /// Whether more objects match after them.
    more: bool,
    /// How many more objects there are after them, when nothing filters the list (as the real
    /// server, which counts them only then).
    remaining: Option<usize>,
}

/// Reads a page: only the objects from where it starts, in its namespace, are looked at, so
/// that each page of a long list costs its own length. The objects after it are counted by
/// their keys alone when nothing filters the list, and looked at until the first that matches
/// otherwise: a list in pages stays linear in the objects, however many pages it takes.
fn read_page(
    state: &State,
    context: &Context,
    target: &Target<'_>,
    selectors: &Selectors,
    limit: Option<usize>,
) -> ApiResult<Page> {
    let (rv, snapshot, start) = list_snapshot(state, context, target)?;
    let namespace = &target.namespace;
    let namespace_start = (namespace.clone(), String::new());
    let from = match &start {
        Some(start) if namespace.is_empty() || start.0 >= *namespace => Bound::Excluded(start),
        _ if namespace.is_empty() => Bound::Unbounded,
        _ => Bound::Included(&namespace_start),
    };
    let filtered = !selectors.is_empty();
    let mut matching = snapshot
        .range(from)
        .take_while(|(key, _)| namespace.is_empty() || key.0 == *namespace)
        .filter(|(_, object)| !filtered || selectors.matches(object));
    let mut objects = Vec::new();
    let mut last = None;
    for (key, object) in matching.by_ref().take(limit.unwrap_or(usize::MAX)) {
        objects.push(object.clone());
        last = Some(key);
    }
    let (more, remaining) = if filtered {
        (matching.next().is_some(), None)
    } else {
        let remaining = matching.count();
        (remaining > 0, Some(remaining))
    };
    Ok(Page {
        rv,
        objects,
        last: last.cloned(),
        more,
        remaining,
    })
}

/// Checks the numbers a list or watch takes as kube-apiserver decodes its query: a value that
/// is not a number is a `400`, in Go's words.
pub(super) fn check_numbers(context: &Context) -> ApiResult<()> {
    for key in ["limit", "timeoutSeconds"] {
        if let Some(text) = context.query.get(key)
            && text.parse::<i64>().is_err()
        {
            let digits = text.strip_prefix('-').unwrap_or(text);
            let why = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                "value out of range"
            } else {
                "invalid syntax"
            };
            return Err(ApiError::bad_request(format!(
                "strconv.ParseInt: parsing {text:?}: {why}"
            )));
        }
    }
    Ok(())
}

/// Checks a list's `resourceVersion` and `resourceVersionMatch` as kube-apiserver validates
/// its `ListOptions`.
fn check_versions(context: &Context) -> ApiResult<()> {
    let version = context.query.get("resourceVersion").unwrap_or_default();
    let forbidden = |detail: String| {
        ApiError::invalid_options(
            "ListOptions",
            "FieldValueForbidden",
            "resourceVersionMatch",
            &format!("Forbidden: {detail}"),
        )
    };
    match context
        .query
        .get("resourceVersionMatch")
        .unwrap_or_default()
    {
        "" => Ok(()),
        _ if version.is_empty() => Err(forbidden(
            "resourceVersionMatch is forbidden unless resourceVersion is provided".into(),
        )),
        "Exact" if version == "0" => Err(forbidden(format!(
            "resourceVersionMatch \"exact\" is forbidden for resourceVersion {version:?}"
        ))),
        "Exact" | "NotOlderThan" => Ok(()),
        other => Err(ApiError::invalid_options(
            "ListOptions",
            "FieldValueNotSupported",
            "resourceVersionMatch",
            &format!(
                "Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""
            ),
        )),
    }
}

pub(super) fn list(shared: &Shared, context: &Context, target: &Target<'_>) -> ApiResult<Reply> {
    target.acceptable(true)?;
    check_numbers(context)?;
    check_versions(context)?;
    let selectors = Selectors::parse(context, &target.def, shared.sharded_watches)?;
    let limit = context
        .query
        .number("limit")
        .filter(|l| *l > 0)
        .map(|l| l as usize);
    let Page {
        rv,
        objects,
        last,
        more,
        remaining,
    } = shared.read(|state| read_page(state, context, target, &selectors, limit))?;
    let mut items: Vec<Value> = objects.iter().map(|object| target.answer(object)).collect();
    if let Some(seed) = context.shuffle_seed {
        // Within the page: the continue token still names the last key in the usual order.
        shuffle(&mut items, seed);
    }
    let shard_info = selectors.shard_info();
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if more && let Some(last) = &last {
        meta["continue"] = json!(encode_continue(rv, last));
        if let Some(remaining) = remaining {
            meta["remainingItemCount"] = json!(remaining);
        }
    } else if target.def.is_custom() && context.format == Format::Json {
        // Lists of custom resources (unstructured in kube-apiserver) always carry it.
        meta["continue"] = json!("");
    }
    // The real server keeps `shardInfo` only on full lists: its metadata-only lists and
    // tables copy the other list fields but not this one, and (Kubernetes 1.36) lists of
    // custom resources, filtered all the same, are unstructured ones without the field.
    if let Some(info) = shard_info
        && context.format == Format::Json
        && !target.def.is_custom()
    {
        meta["shardInfo"] = info;
    }
    if context.format == Format::Table {
        return Ok(table_reply(target, &items, meta));
    }
    Ok(Reply::json(StatusCode::OK, &target.list_of(items, meta)))
}

/// The version a view lagging `lag` changes behind serves: never older than what the history
/// still holds.
pub(crate) fn stale_version(state: &State, lag: u64) -> u64 {
    state
        .resource_version()
        .saturating_sub(lag)
        .max(state.compacted_rv())
}

/// Puts items in the random order that `seed` (drawn from the faults' seeded generator) gives.
pub(crate) fn shuffle<T>(items: &mut [T], seed: u64) {
    items.shuffle(&mut StdRng::seed_from_u64(seed));
}
