//! Watching one resource in one namespace (or cluster-wide): a paginated LIST, then WATCH
//! from its resourceVersion, with bookmarks; a stream silent for the inactivity timeout is
//! reconnected, `410 Gone` relists, other failures back off with jitter.
//!
//! With a shard selector ([`Selection::shard`]), lists and watches carry it as
//! `shardSelector`. A list without `metadata.shardInfo` comes from a server that ignored it
//! (one without the feature): the watcher then drops the objects and events outside the
//! shard itself, and logs once that it does, so the result is the same on any server.
//!
//! The watcher is a plain async function that ends as soon as its token is cancelled: the
//! stream is dropped at once, nothing waits for the server.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{ListParams, WatchParams};
use kube::core::WatchEvent;
use rand::Rng as _;
use tokio_util::sync::CancellationToken;

use crate::aiokits::budget::Share;
use crate::clients::reading::{Deferred, Object, Page, Unmanaged};
use crate::clients::streaming::Events;
use crate::configs::settings::WatchingSettings;
use crate::structs::bodies::Body;
use crate::structs::namespaces::ObservedNamespaces;
use crate::structs::resources::Resource;
use crate::structs::shards::ShardSelector;

/// What a watcher reports, in order.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// An object of the initial (or a re-) listing.
    Listed(Arc<Body>),
    /// The listing is complete: everything that exists was reported.
    ListingDone,
    /// A change from the watch stream: `ADDED`, `MODIFIED` or `DELETED`.
    Changed(&'static str, Arc<Body>),
    /// An object known before that a new listing lacks: deleted while it was not watched
    /// (a watch gap, a `410 Gone`), so no `DELETED` came. Only what identifies it is left
    /// (`apiVersion`, `kind`, and `metadata`'s `name`, `namespace`, `uid`). A watcher never
    /// reports it: the queue that routes its events to objects does, once a listing is done.
    Vanished(Arc<Body>),
}

/// Which objects of the resource are listed and watched (all by default), and how fast.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Selection<'a> {
    /// The handlers' own label selector, sent as `labelSelector` (with those of
    /// [`WatchingSettings::label_selectors`] that match the resource).
    pub(crate) labels: Option<&'a str>,
    /// A field selector, sent as `fieldSelector` (e.g. `metadata.name=NAME`, which RBAC
    /// authorizes as a request for that name).
    pub(crate) fields: Option<&'a str>,
    /// A shard selector, sent as `shardSelector` and applied here if the server ignores it.
    pub(crate) shard: Option<&'a ShardSelector>,
    /// The share of the operator's budget of objects in flight that this watcher's reports
    /// take: it reads the next event (or asks for the next page, of at most the budget's limit)
    /// only once the budget has room for it (see [`crate::aiokits::budget`]).
    pub(crate) budget: Option<&'a Share>,
}

/// Why a watcher stopped by itself.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WatchError {
    /// The resource is no longer served (its CRD was deleted).
    #[error("the resource {0} is no longer served")]
    Gone(String),
}

/// Watches the namespaces until `token` is cancelled (`Ok`) or the watch fails for good
/// (`Err`), calling `changed` with the namespaces served (those `observed`'s patterns match
/// that exist and are not being removed) each time they change.
pub(crate) async fn watch_namespaces(
    client: &kube::Client,
    mut observed: ObservedNamespaces,
    settings: &WatchingSettings,
    token: &CancellationToken,
    mut changed: impl FnMut(&BTreeSet<String>),
) -> Result<(), WatchError> {
    let namespaces = Resource::namespaces();
    let all = Selection::default();
    watch(client, &namespaces, None, all, settings, token, |event| {
        let served_changed = match event {
            Event::Listed(namespace) => {
                observed.listed(&namespace);
                false
            }
            Event::ListingDone => observed.listing_done(),
            Event::Changed(kind, namespace) => observed.changed(kind, &namespace),
            Event::Vanished(namespace) => observed.changed("DELETED", &namespace),
        };
        if served_changed {
            changed(observed.served());
        }
    })
    .await
}

/// Watches until `token` is cancelled (`Ok`) or the resource disappears (`Err`), calling
/// `report` for every event in order.
pub(crate) async fn watch(
    client: &kube::Client,
    resource: &Resource,
    namespace: Option<&str>,
    selection: Selection<'_>,
    settings: &WatchingSettings,
    token: &CancellationToken,
    report: impl FnMut(Event),
) -> Result<(), WatchError> {
    if settings.strip_managed_fields {
        watch_as::<Unmanaged>(
            client, resource, namespace, selection, settings, token, report,
        )
        .await
    } else {
        watch_as::<Deferred>(
            client, resource, namespace, selection, settings, token, report,
        )
        .await
    }
}

/// As [`watch`], reading each object as `K`.
async fn watch_as<K: Object>(
    client: &kube::Client,
    resource: &Resource,
    namespace: Option<&str>,
    selection: Selection<'_>,
    settings: &WatchingSettings,
    token: &CancellationToken,
    mut report: impl FnMut(Event),
) -> Result<(), WatchError> {
    let request = kube::core::Request::new(resource.collection_path(namespace));
    let (labels, fields) = server_selectors(settings, resource, selection.labels, selection.fields);
    let mut failures = 0u32;
    let mut told_filtering = false;
    'relist: loop {
        let mut resource_version = String::new();
        // The shard selector to apply here, when the listing shows the server ignores it.
        let mut filtering: Option<&ShardSelector>;
        // Whether the initial state comes from the watch (until its initial-events-end
        // bookmark) rather than from a listing.
        let mut streaming = settings.initial_streaming;
        if streaming {
            // Watch events do not tell whether the server applied the shard selector:
            // filtering here too is harmless, the hash is the same.
            filtering = selection.shard;
        } else {
            // LIST, page by page, each page once the budget has room for it: with a budget,
            // a page is at most its limit, also when `chunk_size` asks for no paging (`None`,
            // or `0`, which the server takes as no limit).
            let page_size = match selection.budget {
                Some(budget) => {
                    let limit = u32::try_from(budget.limit()).unwrap_or(u32::MAX);
                    let chunk_size = settings.chunk_size.filter(|&size| size > 0);
                    Some(chunk_size.map_or(limit, |size| size.min(limit)))
                }
                None => settings.chunk_size,
            };
            let mut list_params = ListParams {
                limit: page_size,
                label_selector: labels.clone(),
                field_selector: fields.clone(),
                ..ListParams::default()
            };
            loop {
                if let (Some(budget), Some(page_size)) = (selection.budget, page_size)
                    && !budget.room(page_size as usize, token).await
                {
                    return Ok(());
                }
                let http = match request
                    .list(&list_params)
                    .map(|http| sharded(http, selection.shard))
                {
                    Ok(http) => http,
                    Err(error) => {
                        tracing::error!(%error, "cannot build a list request");
                        return Ok(());
                    }
                };
                let page = tokio::select! {
                    _ = token.cancelled() => return Ok(()),
                    page = client.request::<Page<K>>(http) => page,
                };
                match page {
                    Ok(page) => {
                        failures = 0;
                        filtering = selection
                            .shard
                            .filter(|_| page.metadata.shard_info.is_none());
                        if let Some(shard) = filtering.filter(|_| !told_filtering) {
                            told_filtering = true;
                            tracing::info!(shard_selector = %shard, "the server's list tells no shardInfo (a server without the sharded list and watch feature ignores shardSelector; some that filter do not say so): the operator filters the objects of {resource} on its side too");
                        }
                        for item in page.items.into_iter().flatten() {
                            let item = item.into_body();
                            if filtering.is_some_and(|shard| !shard.matches(&item)) {
                                continue;
                            }
                            report(Event::Listed(Arc::new(with_type(item, resource))));
                        }
                        resource_version = page.metadata.resource_version.unwrap_or_default();
                        match page.metadata.next.filter(|next| !next.is_empty()) {
                            Some(next) => list_params.continue_token = Some(next),
                            None => break,
                        }
                    }
                    Err(kube::Error::Api(status)) if status.code == 404 => {
                        return Err(WatchError::Gone(resource.to_string()));
                    }
                    Err(kube::Error::Api(status)) if status.code == 410 => {
                        tracing::debug!("the list's continue token expired; listing again");
                        continue 'relist;
                    }
                    Err(error) => {
                        failures += 1;
                        tracing::warn!(%error, "listing {resource} failed; retrying");
                        if !pause(token, backoff(settings.reconnect_backoff, failures)).await {
                            return Ok(());
                        }
                        continue 'relist;
                    }
                }
            }
            report(Event::ListingDone);
        }

        // WATCH from the listing's version (or, streaming, from the current state), then
        // reconnecting from the newest version seen.
        loop {
            let mut watch_params = WatchParams {
                bookmarks: true,
                label_selector: labels.clone(),
                field_selector: fields.clone(),
                // Only the first request of a streamed listing: its reconnections go on from
                // the versions seen, as any watch does.
                send_initial_events: streaming,
                ..WatchParams::default()
            };
            if let Some(timeout) = settings.server_timeout {
                watch_params = watch_params.timeout(timeout.as_secs().clamp(1, 295) as u32);
            } else {
                // kube-rs caps its own timeout at 290 s; ask for the longest, the inactivity
                // timeout guards against stalls.
                watch_params = watch_params.timeout(290);
            }
            let http = match request
                .watch(&watch_params, &resource_version)
                .map(|http| sharded(http, selection.shard))
            {
                Ok(http) => http,
                Err(error) => {
                    tracing::error!(%error, "cannot build a watch request");
                    return Ok(());
                }
            };
            // As Kopf, the inactivity timeout bounds the wait for the stream to begin too
            // (the client's connect timeouts bound it as well: `clients/timeouts.rs`).
            let opening =
                tokio::time::timeout(settings.inactivity_timeout, Events::<K>::open(client, http));
            let stream = tokio::select! {
                _ = token.cancelled() => return Ok(()),
                stream = opening => stream,
            };
            let stream = match stream {
                Err(_) => {
                    tracing::debug!(
                        "the watch of {resource} did not begin within the inactivity timeout; watching again"
                    );
                    if !pause(token, backoff(settings.reconnect_backoff, failures)).await {
                        return Ok(());
                    }
                    if streaming {
                        continue 'relist;
                    }
                    continue;
                }
                Ok(stream) => stream,
            };
            let mut stream = match stream {
                Ok(stream) => stream,
                Err(kube::Error::Api(status)) if status.code == 410 => continue 'relist,
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    return Err(WatchError::Gone(resource.to_string()));
                }
                Err(error) => {
                    failures += 1;
                    tracing::warn!(%error, "watching {resource} failed; retrying");
                    if !pause(token, backoff(settings.reconnect_backoff, failures)).await {
                        return Ok(());
                    }
                    if streaming {
                        continue 'relist;
                    }
                    continue;
                }
            };
            loop {
                // Past the budget, the stream is read no further: the server keeps the events
                // (a real one may close a watcher that lags too long; it is watched again from
                // the last version seen).
                if let Some(budget) = selection.budget
                    && !budget.room(1, token).await
                {
                    return Ok(());
                }
                let next = tokio::select! {
                    _ = token.cancelled() => return Ok(()),
                    next = tokio::time::timeout(settings.inactivity_timeout, stream.next()) => next,
                };
                match next {
                    Err(_) => {
                        tracing::debug!(
                            "the watch stream of {resource} was silent for too long; reconnecting"
                        );
                        break;
                    }
                    Ok(None) => break,
                    Ok(Some(Ok(event))) => {
                        let (kind, object) = match event {
                            WatchEvent::Added(object) => ("ADDED", object.into_body()),
                            WatchEvent::Modified(object) => ("MODIFIED", object.into_body()),
                            WatchEvent::Deleted(object) => ("DELETED", object.into_body()),
                            WatchEvent::Bookmark(bookmark) => {
                                failures = 0;
                                resource_version = bookmark.metadata.resource_version;
                                if streaming && ends_initial_events(&bookmark.metadata.annotations)
                                {
                                    streaming = false;
                                    report(Event::ListingDone);
                                }
                                continue;
                            }
                            WatchEvent::Error(status) if status.code == 410 => {
                                tracing::debug!("the watch of {resource} expired; listing again");
                                continue 'relist;
                            }
                            WatchEvent::Error(status) => {
                                // A failure like any other: the reconnections back off more
                                // with each (a stream that only ever says ERROR is not a
                                // healthy one).
                                failures += 1;
                                tracing::warn!(message = %status.message, code = status.code, "the watch of {resource} failed");
                                break;
                            }
                        };
                        failures = 0;
                        if let Some(rv) = object["metadata"]["resourceVersion"].as_str() {
                            resource_version = rv.to_string();
                        }
                        if filtering.is_some_and(|shard| !shard.matches(&object)) {
                            continue;
                        }
                        let object = Arc::new(with_type(object, resource));
                        if streaming {
                            // The initial state, as a listing would report it (Kopf forces
                            // these events' type to its listing's `None` as well).
                            report(Event::Listed(object));
                        } else {
                            report(Event::Changed(kind, object));
                        }
                    }
                    Ok(Some(Err(error))) => {
                        failures += 1;
                        tracing::debug!(%error, "the watch stream of {resource} broke");
                        break;
                    }
                }
            }
            if !pause(token, backoff(settings.reconnect_backoff, failures)).await {
                return Ok(());
            }
            if streaming {
                // The initial state was not complete: streamed again from the start, so that
                // what the stream did not tell yet is not taken as deleted.
                tracing::debug!(
                    "the initial events of {resource} were cut short; streaming them again"
                );
                continue 'relist;
            }
        }
    }
}

/// Whether a bookmark ends the initial events of a streamed listing.
fn ends_initial_events(annotations: &std::collections::BTreeMap<String, String>) -> bool {
    annotations
        .get(INITIAL_EVENTS_END)
        .is_some_and(|value| value == "true")
}

/// The annotation of the bookmark after a watch's initial events (`sendInitialEvents`).
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// The label and field selectors sent for a resource: every entry of the settings that
/// matches it, and the caller's own (`labels`, `fields`), each joined as Kopf joins them
/// (sorted, without duplicates, with commas); `None` for none.
pub(crate) fn server_selectors(
    settings: &WatchingSettings,
    resource: &Resource,
    labels: Option<&str>,
    fields: Option<&str>,
) -> (Option<String>, Option<String>) {
    let joined = |entries: &[(crate::structs::resources::Selector, String)],
                  extra: Option<&str>| {
        let parts: BTreeSet<&str> = entries
            .iter()
            .filter(|(selector, _)| selector.check(resource))
            .map(|(_, text)| text.as_str())
            .chain(extra)
            .filter(|text| !text.is_empty())
            .collect();
        (!parts.is_empty()).then(|| parts.into_iter().collect::<Vec<_>>().join(","))
    };
    (
        joined(&settings.label_selectors, labels),
        joined(&settings.field_selectors, fields),
    )
}

/// The request with the shard selector, if any, as `shardSelector` (which kube-rs's
/// parameters do not know yet).
fn sharded(
    mut http: http::Request<Vec<u8>>,
    shard: Option<&ShardSelector>,
) -> http::Request<Vec<u8>> {
    if let Some(shard) = shard {
        let uri = http.uri().to_string();
        let separator = if uri.contains('?') { '&' } else { '?' };
        let value: String = form_urlencoded::byte_serialize(shard.as_str().as_bytes()).collect();
        match format!("{uri}{separator}shardSelector={value}").parse() {
            Ok(uri) => *http.uri_mut() = uri,
            Err(error) => unreachable!("an encoded query parameter keeps the URI valid: {error}"),
        }
    }
    http
}

/// Objects in lists come without `apiVersion` and `kind` from some servers; handlers expect them.
fn with_type(mut object: Body, resource: &Resource) -> Body {
    // Looked up first: most objects have both, and `entry` would copy each key to look.
    if let Some(map) = object.value_mut().as_object_mut() {
        if !map.contains_key("apiVersion") {
            map.insert("apiVersion".into(), resource.api_version().into());
        }
        if !map.contains_key("kind") {
            map.insert("kind".into(), resource.kind.clone().into());
        }
    }
    object
}

/// Exponential backoff from `base`, capped at 30 s, with ±25 % jitter.
fn backoff(base: Duration, failures: u32) -> Duration {
    let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(10));
    let delay = base.saturating_mul(factor).min(Duration::from_secs(30));
    let jitter = rand::rng().random_range(0.75..1.25);
    delay.mul_f64(jitter)
}

/// Sleeps unless cancelled; `false` when cancelled.
async fn pause(token: &CancellationToken, delay: Duration) -> bool {
    tokio::select! {
        _ = token.cancelled() => false,
        _ = tokio::time::sleep(delay) => true,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn objects_get_the_resources_api_version_and_kind_only_where_they_lack_them() {
        let resource = Resource::kopf_examples();
        let bare = serde_json::json!({"metadata": {"name": "a"}});
        let bare = with_type(bare.into(), &resource);
        assert_eq!(bare["apiVersion"], "kopf.dev/v1");
        assert_eq!(bare["kind"], "KopfExample");
        let typed = serde_json::json!({"apiVersion": "other/v2", "kind": "Other", "metadata": {}});
        assert_eq!(with_type(typed.clone().into(), &resource), typed);
        assert_eq!(with_type(Value::Null.into(), &resource), Value::Null);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let base = Duration::from_millis(100);
        assert!(backoff(base, 0) <= Duration::from_millis(125));
        assert!(backoff(base, 3) >= Duration::from_millis(300));
        assert!(backoff(base, 100) <= Duration::from_millis(37_500));
    }

    /// A watch that answers every reconnection with an in-stream `ERROR` event (not `410`)
    /// is reconnected ever more slowly, not every `reconnect_backoff`.
    #[tokio::test(start_paused = true)]
    async fn in_stream_errors_back_off_more_with_each() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let watches = Arc::new(AtomicUsize::new(0));
        let counted = watches.clone();
        let service = crate::clients::auth::tower_service_fn(
            move |request: http::Request<kube::client::Body>| {
                let counted = counted.clone();
                async move {
                    let watching = request
                        .uri()
                        .query()
                        .is_some_and(|q| q.contains("watch=true"));
                    let body = if watching {
                        counted.fetch_add(1, Ordering::SeqCst);
                        serde_json::json!({"type": "ERROR", "object": {
                            "kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "message": "etcd is unwell",
                            "reason": "InternalError", "code": 500,
                        }})
                    } else {
                        serde_json::json!({"kind": "List", "apiVersion": "v1",
                            "metadata": {"resourceVersion": "1"}, "items": []})
                    };
                    let mut body = serde_json::to_vec(&body).expect("JSON serializes");
                    body.push(b'\n');
                    Ok(http::Response::new(kube::client::Body::from(body)))
                }
            },
        );
        let client = kube::Client::new(service, "default");
        let resource = Resource::kopf_examples();
        let settings = WatchingSettings::default();
        let token = CancellationToken::new();
        let everything = Selection::default();
        let watching = watch(
            &client,
            &resource,
            None,
            everything,
            &settings,
            &token,
            |_| {},
        );
        // Ten seconds of (paused, auto-advancing) time: with a fixed 0.1 s between them,
        // about a hundred reconnections; backing off from 0.1 s, doubling each time, seven.
        let ended = tokio::time::timeout(Duration::from_secs(10), watching).await;
        assert!(ended.is_err(), "the watcher goes on reconnecting");
        let watches = watches.load(Ordering::SeqCst);
        assert!(
            (3..=10).contains(&watches),
            "{watches} reconnections in 10 s"
        );
    }

    /// Lists and watches carry the shard selector; a list without `shardInfo` (a server
    /// without the feature) makes the watcher drop what is outside the shard, in the list and
    /// in the watch; a list with it is trusted as filtered.
    #[tokio::test(start_paused = true)]
    async fn shard_selectors_are_sent_and_applied_here_when_the_server_ignores_them() {
        use std::sync::Mutex;
        // The uid "a" hashes to 0xaf63dc4c8601ec8c; "b" to 0xaf63df4c8601f1a5.
        let text = "shardRange(object.metadata.uid, '0xaf63dc4c8601ec8c', '0xaf63dc4c8601ec8d')";
        let shard = ShardSelector::parse(text).expect("valid");
        for server_filters in [false, true] {
            let queries = Arc::new(Mutex::new(Vec::new()));
            let logged = queries.clone();
            let service = crate::clients::auth::tower_service_fn(
                move |request: http::Request<kube::client::Body>| {
                    let query = request.uri().query().unwrap_or_default().to_string();
                    logged.lock().unwrap().push(query.clone());
                    let object = |uid: &str| serde_json::json!({"metadata": {"name": uid, "uid": uid, "resourceVersion": "2"}});
                    let body = if query.contains("watch=true") {
                        let events = ["b", "a"].map(|uid| {
                            serde_json::json!({"type": "ADDED", "object": object(uid)}).to_string()
                        });
                        events.join("\n") + "\n"
                    } else {
                        let mut metadata = serde_json::json!({"resourceVersion": "1"});
                        if server_filters {
                            metadata["shardInfo"] = serde_json::json!({"selector": text});
                        }
                        serde_json::json!({"kind": "List", "apiVersion": "v1", "metadata": metadata, "items": [object("a"), object("b")]}).to_string()
                    };
                    async move {
                        Ok(http::Response::new(kube::client::Body::from(
                            body.into_bytes(),
                        )))
                    }
                },
            );
            let client = kube::Client::new(service, "default");
            let resource = Resource::kopf_examples();
            let settings = WatchingSettings::default();
            let token = CancellationToken::new();
            let (mut listed, mut changed) = (BTreeSet::new(), BTreeSet::new());
            let selection = Selection {
                shard: Some(&shard),
                ..Selection::default()
            };
            let watching = watch(
                &client,
                &resource,
                None,
                selection,
                &settings,
                &token,
                |event| {
                    match event {
                        Event::Listed(object) => {
                            listed.insert(object["metadata"]["uid"].to_string())
                        }
                        Event::Changed(_, object) => {
                            changed.insert(object["metadata"]["uid"].to_string())
                        }
                        _ => false,
                    };
                },
            );
            let ended = tokio::time::timeout(Duration::from_secs(1), watching).await;
            assert!(ended.is_err(), "the watcher goes on watching");
            let expected: BTreeSet<String> = if server_filters {
                BTreeSet::from(["\"a\"".into(), "\"b\"".into()])
            } else {
                BTreeSet::from(["\"a\"".into()])
            };
            assert_eq!(
                (&listed, &changed),
                (&expected, &expected),
                "server filters: {server_filters}"
            );
            let queries = queries.lock().unwrap();
            let encoded: String = form_urlencoded::byte_serialize(text.as_bytes()).collect();
            assert!(queries.len() >= 2, "{queries:?}");
            assert!(
                queries
                    .iter()
                    .all(|q| q.contains(&format!("shardSelector={encoded}"))),
                "{queries:?}"
            );
        }
    }

    /// With a budget of 2, a listing asks for pages of 2 and the next page only once there is
    /// room for it; the watch stream is read one event at a time, as room is given back.
    #[tokio::test]
    async fn a_watcher_reads_no_further_than_its_budget() {
        use crate::aiokits::budget::Budget;
        use std::sync::Mutex;
        let queries = Arc::new(Mutex::new(Vec::new()));
        let logged = queries.clone();
        let service = crate::clients::auth::tower_service_fn(
            move |request: http::Request<kube::client::Body>| {
                let query = request.uri().query().unwrap_or_default().to_string();
                logged.lock().unwrap().push(query.clone());
                let object = |uid: String| serde_json::json!({"metadata": {"name": uid, "uid": uid, "resourceVersion": "2"}});
                let body = if query.contains("watch=true") {
                    let events: Vec<String> = (0..5)
                        .map(|n| {
                            serde_json::json!({"type": "ADDED", "object": object(format!("w{n}"))})
                                .to_string()
                        })
                        .collect();
                    events.join("\n") + "\n"
                } else {
                    let first = !query.contains("continue=");
                    let (items, next) = if first {
                        (vec![object("l0".into()), object("l1".into())], "more")
                    } else {
                        (vec![object("l2".into())], "")
                    };
                    serde_json::json!({"kind": "List", "apiVersion": "v1",
                        "metadata": {"resourceVersion": "1", "continue": next}, "items": items})
                    .to_string()
                };
                async move {
                    Ok(http::Response::new(kube::client::Body::from(
                        body.into_bytes(),
                    )))
                }
            },
        );
        let client = kube::Client::new(service, "default");
        let resource = Resource::kopf_examples();
        let settings = WatchingSettings::default();
        let token = CancellationToken::new();
        let budget = Budget::new(2, None);
        let share = budget.share();
        let reported: Arc<Mutex<Vec<String>>> = Arc::default();
        let selection = Selection {
            budget: Some(&share),
            ..Selection::default()
        };
        let seen = reported.clone();
        let taker = share.clone();
        let watching = watch(&client, &resource, None, selection, &settings, &token, {
            move |event| {
                if let Event::Listed(object) | Event::Changed(_, object) = event {
                    taker.take(1);
                    seen.lock()
                        .unwrap()
                        .push(object["metadata"]["uid"].as_str().unwrap().to_string());
                }
            }
        });
        tokio::pin!(watching);
        let reported_now = || reported.lock().unwrap().clone();
        // Polled until it waits: for room, or for a stream that has nothing more.
        async fn settle<F: Future<Output = Result<(), WatchError>>>(
            mut watching: std::pin::Pin<&mut F>,
        ) {
            for _ in 0..200 {
                assert!(
                    futures::poll!(watching.as_mut()).is_pending(),
                    "the watcher goes on"
                );
                tokio::task::yield_now().await;
            }
        }
        settle(watching.as_mut()).await;
        assert_eq!(reported_now(), ["l0", "l1"], "the first page only");
        assert!(queries.lock().unwrap()[0].contains("limit=2"));
        share.give(1);
        settle(watching.as_mut()).await;
        assert_eq!(reported_now().len(), 2, "no room for a page yet");
        share.give(1);
        settle(watching.as_mut()).await;
        assert_eq!(
            reported_now(),
            ["l0", "l1", "l2", "w0"],
            "the second page, and one event of the stream"
        );
        share.give(1);
        settle(watching.as_mut()).await;
        assert_eq!(reported_now().len(), 5, "one more");
        share.give(2);
        settle(watching.as_mut()).await;
        assert_eq!(reported_now().len(), 7, "two more");
        assert_eq!(budget.held(), 2);
        assert_eq!(budget.peak(), 2, "never more than the budget");
    }

    /// Streaming the initial state, the watch is read as far as the budget allows, as any
    /// watch is: with a budget of 2, two initial events, then one more for each given back.
    #[tokio::test]
    async fn a_streamed_listing_reads_no_further_than_its_budget() {
        use crate::aiokits::budget::Budget;
        use std::sync::Mutex;
        let queries = Arc::new(Mutex::new(Vec::new()));
        let logged = queries.clone();
        let service = crate::clients::auth::tower_service_fn(
            move |request: http::Request<kube::client::Body>| {
                let query = request.uri().query().unwrap_or_default().to_string();
                logged.lock().unwrap().push(query.clone());
                let object = |uid: String| serde_json::json!({"metadata": {"name": uid, "uid": uid, "resourceVersion": "2"}});
                let body = if query.contains("sendInitialEvents=true") {
                    let mut events: Vec<String> = (0..4)
                        .map(|n| {
                            serde_json::json!({"type": "ADDED", "object": object(format!("s{n}"))})
                                .to_string()
                        })
                        .collect();
                    events.push(
                        serde_json::json!({"type": "BOOKMARK", "object": {
                            "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                            "metadata": {"resourceVersion": "3",
                                "annotations": {INITIAL_EVENTS_END: "true"}}}})
                        .to_string(),
                    );
                    events.push(
                        serde_json::json!({"type": "ADDED", "object": object("w0".into())})
                            .to_string(),
                    );
                    events.join("\n") + "\n"
                } else {
                    String::new()
                };
                async move {
                    Ok(http::Response::new(kube::client::Body::from(
                        body.into_bytes(),
                    )))
                }
            },
        );
        let client = kube::Client::new(service, "default");
        let resource = Resource::kopf_examples();
        let settings = WatchingSettings {
            initial_streaming: true,
            ..WatchingSettings::default()
        };
        let token = CancellationToken::new();
        let budget = Budget::new(2, None);
        let share = budget.share();
        let reported: Arc<Mutex<Vec<String>>> = Arc::default();
        let selection = Selection {
            budget: Some(&share),
            ..Selection::default()
        };
        let seen = reported.clone();
        let taker = share.clone();
        let watching = watch(&client, &resource, None, selection, &settings, &token, {
            move |event| {
                let uid = |object: &Body| object["metadata"]["uid"].as_str().unwrap().to_string();
                let told = match event {
                    Event::Listed(object) => format!("listed {}", uid(&object)),
                    Event::Changed(kind, object) => format!("{kind} {}", uid(&object)),
                    Event::ListingDone => "done".to_string(),
                    Event::Vanished(object) => format!("vanished {}", uid(&object)),
                };
                if told != "done" {
                    taker.take(1);
                }
                seen.lock().unwrap().push(told);
            }
        });
        tokio::pin!(watching);
        let reported_now = || reported.lock().unwrap().clone();
        async fn settle<F: Future<Output = Result<(), WatchError>>>(
            mut watching: std::pin::Pin<&mut F>,
        ) {
            for _ in 0..200 {
                assert!(
                    futures::poll!(watching.as_mut()).is_pending(),
                    "the watcher goes on"
                );
                tokio::task::yield_now().await;
            }
        }
        settle(watching.as_mut()).await;
        assert_eq!(
            reported_now(),
            ["listed s0", "listed s1"],
            "two events only"
        );
        share.give(1);
        settle(watching.as_mut()).await;
        assert_eq!(reported_now().len(), 3, "one more");
        share.give(2);
        settle(watching.as_mut()).await;
        assert_eq!(
            reported_now(),
            [
                "listed s0",
                "listed s1",
                "listed s2",
                "listed s3",
                "done",
                "ADDED w0"
            ],
            "the rest of the initial state, its end, and one change"
        );
        assert_eq!(budget.peak(), 2, "never more than the budget");
        let queries = queries.lock().unwrap().clone();
        assert!(
            queries.iter().all(|query| query.contains("watch=true")),
            "no listing: {queries:?}"
        );
    }
}
