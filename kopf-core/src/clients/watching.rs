//! Watching one resource in one namespace (or cluster-wide): a paginated LIST, then WATCH
//! from its resourceVersion, with bookmarks; a stream silent for the inactivity timeout is
//! reconnected, `410 Gone` relists, other failures back off with jitter.
//!
//! The watcher is a plain async function that ends as soon as its token is cancelled: the
//! stream is dropped at once, nothing waits for the server.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use kube::api::{ListParams, WatchParams};
use kube::core::WatchEvent;
use rand::Rng as _;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::configs::settings::WatchingSettings;
use crate::structs::namespaces::ObservedNamespaces;
use crate::structs::resources::Resource;

/// What a watcher reports, in order.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// An object of the initial (or a re-) listing.
    Listed(Arc<Value>),
    /// The listing is complete: everything that exists was reported.
    ListingDone,
    /// A change from the watch stream: `ADDED`, `MODIFIED` or `DELETED`.
    Changed(&'static str, Arc<Value>),
    /// An object known before that a new listing lacks: deleted while it was not watched
    /// (a watch gap, a `410 Gone`), so no `DELETED` came. Only what identifies it is left
    /// (`apiVersion`, `kind`, and `metadata`'s `name`, `namespace`, `uid`). A watcher never
    /// reports it: the queue that routes its events to objects does, once a listing is done.
    Vanished(Arc<Value>),
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
    watch(client, &namespaces, None, None, settings, token, |event| {
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
    label_selector: Option<&str>,
    settings: &WatchingSettings,
    token: &CancellationToken,
    mut report: impl FnMut(Event),
) -> Result<(), WatchError> {
    let request = kube::core::Request::new(resource.collection_path(namespace));
    let mut failures = 0u32;
    'relist: loop {
        // LIST, page by page.
        let mut list_params = ListParams::default().limit(settings.list_page_size);
        if let Some(selector) = label_selector {
            list_params = list_params.labels(selector);
        }
        let mut resource_version: String;
        loop {
            let http = match request.list(&list_params) {
                Ok(http) => http,
                Err(error) => {
                    tracing::error!(%error, "cannot build a list request");
                    return Ok(());
                }
            };
            let page = tokio::select! {
                _ = token.cancelled() => return Ok(()),
                page = client.request::<Value>(http) => page,
            };
            match page {
                Ok(page) => {
                    failures = 0;
                    for item in page["items"].as_array().into_iter().flatten() {
                        report(Event::Listed(Arc::new(with_type(item.clone(), resource))));
                    }
                    resource_version = page["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    match page["metadata"]["continue"]
                        .as_str()
                        .filter(|c| !c.is_empty())
                    {
                        Some(next) => list_params.continue_token = Some(next.to_string()),
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

        // WATCH from the listing's version, reconnecting from the newest version seen.
        loop {
            let mut watch_params = WatchParams {
                bookmarks: true,
                ..WatchParams::default()
            };
            if let Some(selector) = label_selector {
                watch_params = watch_params.labels(selector);
            }
            if let Some(timeout) = settings.server_timeout {
                watch_params = watch_params.timeout(timeout.as_secs().clamp(1, 295) as u32);
            } else {
                // kube-rs caps its own timeout at 290 s; ask for the longest, the inactivity
                // timeout guards against stalls.
                watch_params = watch_params.timeout(290);
            }
            let http = match request.watch(&watch_params, &resource_version) {
                Ok(http) => http,
                Err(error) => {
                    tracing::error!(%error, "cannot build a watch request");
                    return Ok(());
                }
            };
            let stream = tokio::select! {
                _ = token.cancelled() => return Ok(()),
                stream = client.request_events::<Value>(http) => stream,
            };
            let mut stream = match stream {
                Ok(stream) => stream.boxed(),
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
                    continue;
                }
            };
            loop {
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
                            WatchEvent::Added(object) => ("ADDED", object),
                            WatchEvent::Modified(object) => ("MODIFIED", object),
                            WatchEvent::Deleted(object) => ("DELETED", object),
                            WatchEvent::Bookmark(bookmark) => {
                                failures = 0;
                                resource_version = bookmark.metadata.resource_version;
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
                        report(Event::Changed(kind, Arc::new(with_type(object, resource))));
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
        }
    }
}

/// Objects in lists come without `apiVersion` and `kind` from some servers; handlers expect them.
fn with_type(mut object: Value, resource: &Resource) -> Value {
    if let Some(map) = object.as_object_mut() {
        map.entry("apiVersion")
            .or_insert_with(|| resource.api_version().into());
        map.entry("kind")
            .or_insert_with(|| resource.kind.clone().into());
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
    use super::*;

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
        let resource = Resource {
            group: "kopf.dev".into(),
            version: "v1".into(),
            plural: "kopfexamples".into(),
            kind: "KopfExample".into(),
            namespaced: true,
            ..Resource::default()
        };
        let settings = WatchingSettings::default();
        let token = CancellationToken::new();
        let watching = watch(&client, &resource, None, None, &settings, &token, |_| {});
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
}
