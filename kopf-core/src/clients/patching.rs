//! Writing to objects: the merge patches of handlers (body and `/status`), JSON-patch
//! operations (the handlers' and the finalizer's), retries on transient failures. A 404 means
//! the object is gone: not an error. And the read of an object as stored, for a writer whose
//! own write has not come back on the watch in time ([`fetch`]).
//!
//! Invariants:
//! 1. Every request carries the resourceVersion that its writer last knew of the object: the
//!    JSON patches in a `test`, the merge patches in `metadata.resourceVersion`. The API server
//!    applies it to that version only, or answers `409 Conflict` (`422` for a failed `test`):
//!    a request that lands late (held by a slow server past its writer's term) writes nothing
//!    once another writer has written.
//! 2. Right before each request leaves (the first, each retry, each read after a conflict),
//!    the writer's [`Gate`] is asked whether it may still write, and the request must be
//!    answered by the deadline it gives (the end of the writer's term): it is dropped then,
//!    unless the term was renewed meanwhile.
//! 3. A merge patch that meets a newer version (a user's change, another write of this
//!    operator) is sent again for the newest version, read right then: what the handlers did
//!    is written whatever else changed, as Kopf writes it. Only the handlers' JSON-patch
//!    operations, made for the version they saw, are not.

use serde::ser::{Serialize, SerializeMap as _, Serializer};
use serde_json::{Map, Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::clients::answers::{self, Answer, Wanted};
use crate::clients::reading::Object;
use crate::clients::retries::Backoffs;
use crate::structs::bodies::Body;
use crate::structs::patch::Patch;
use crate::structs::resources::Resource;

/// How many times in a row a merge patch is sent again after a conflict before the write
/// fails (and is tried again later): other writers that keep changing the object.
const CONFLICTS: usize = 3;

/// Whether a writer may still write an object, asked right before each request leaves.
pub(crate) trait Gate: Send + Sync {
    /// `Ok` with the instant by which the request must be answered (`None`: no term bounds
    /// it), or why it may not be sent.
    fn deadline(&self) -> Result<Option<Instant>, Closed>;
}

/// The gate of writes that no term bounds: peering's own entries (peering decides the
/// terms; it is never paused itself).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ungated;

impl Gate for Ungated {
    fn deadline(&self) -> Result<Option<Instant>, Closed> {
        Ok(None)
    }
}

/// Why a write was not sent on: its writer may not write the object any more (its term
/// ended, the object is another's to write).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Closed(pub(crate) &'static str);

/// Why a write did not land, or not whole.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    /// A request failed or was refused.
    #[error(transparent)]
    Request(#[from] kube::Error),
    /// The gate closed before a request was sent, or before it was answered.
    #[error("not sent on: {0}")]
    Closed(Closed),
}

impl WriteError {
    /// Whether the server rejected the write for good: the same request would fail again
    /// (e.g. `422 Invalid` for annotations over 262,144 bytes in all; `400`; `413`).
    pub(crate) fn rejected_for_good(&self) -> bool {
        matches!(self, WriteError::Request(error) if rejected_for_good(error))
    }
}

/// Where the patches go.
pub(crate) struct Target<'a> {
    pub(crate) client: &'a kube::Client,
    pub(crate) resource: &'a Resource,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) name: &'a str,
    /// The writing worker's token: once the operator stops, a failed write is not retried
    /// (the retries could outlast the grace period; the next run writes again).
    pub(crate) stop: &'a CancellationToken,
    /// Asked before each request.
    pub(crate) gate: &'a dyn Gate,
}

impl Target<'_> {
    /// Requests for the object's collection (its namespace's, for a namespaced resource).
    fn requests(&self) -> kube::core::Request {
        kube::core::Request::new(self.resource.collection_path(self.namespace))
    }

    /// The object's URL path, or its subresource's.
    fn path(&self, subresource: Option<&str>) -> String {
        let mut path = self.resource.collection_path(self.namespace);
        path.push('/');
        path.push_str(self.name);
        if let Some(subresource) = subresource {
            path.push('/');
            path.push_str(subresource);
        }
        path
    }

    /// A JSON merge patch of the object (or of its subresource), as kube-rs builds one with
    /// default parameters, built directly: every write sends one or two.
    fn merge_patch(
        &self,
        subresource: Option<&str>,
        merge: &impl Serialize,
    ) -> Result<http::Request<Vec<u8>>, kube::core::request::Error> {
        use kube::core::request::Error;
        if self.name.is_empty() {
            return Err(Error::Validation("A non-empty name is required".into()));
        }
        let body = serde_json::to_vec(merge).map_err(Error::SerializeBody)?;
        http::Request::patch(self.path(subresource))
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
            .body(body)
            .map_err(Error::BuildRequest)
    }
}

/// A merge patch as it is sent: guarded by the resourceVersion it is meant for, which it
/// carries in `metadata.resourceVersion` (none when the version is not known).
struct Guarded<'a> {
    merge: &'a Map<String, Value>,
    version: &'a str,
}

impl Serialize for Guarded<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.version.is_empty() {
            return self.merge.serialize(serializer);
        }
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.merge {
            if key != "metadata" {
                map.serialize_entry(key, value)?;
            }
        }
        let metadata = Metadata {
            fields: self.merge.get("metadata").and_then(Value::as_object),
            version: self.version,
        };
        map.serialize_entry("metadata", &metadata)?;
        map.end()
    }
}

/// The `metadata` of a guarded merge patch: the patch's own, and the version.
struct Metadata<'a> {
    fields: Option<&'a Map<String, Value>>,
    version: &'a str,
}

impl Serialize for Metadata<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.fields.into_iter().flatten() {
            if key != "resourceVersion" {
                map.serialize_entry(key, value)?;
            }
        }
        map.serialize_entry("resourceVersion", self.version)?;
        map.end()
    }
}

/// What a write did.
#[derive(Debug, Default)]
pub(crate) struct Written {
    /// The resourceVersions that the writes made (and, when outdated, the newer one found),
    /// all of which a watch will deliver; none if the object is gone or nothing was sent.
    pub(crate) versions: Vec<String>,
    /// The handlers' JSON-patch operations met a newer version of the object: neither they
    /// nor what follows them (the handlers' records) were written, so that the handlers run
    /// again on the newer state (their operations were made for the older one).
    pub(crate) outdated: bool,
    /// The fields of `status` that were sent with a value but are not in the object the
    /// server answered with: its schema pruned them (a typed CRD that does not declare them).
    pub(crate) pruned: Vec<String>,
}

/// The fields of the `status` sent that the stored `status` lacks (sent with a value, so not
/// removals): pruned by the server's schema.
fn pruned(sent: &Value, stored: &Value) -> Vec<String> {
    sent.as_object()
        .into_iter()
        .flatten()
        .filter(|(key, value)| !value.is_null() && stored.get(key.as_str()).is_none())
        .map(|(key, _)| key.clone())
        .collect()
}

/// Sends the patch, and then the framework's JSON-patch operation on the finalizers (made
/// from the object's current list, so never kept for a later try). What is written is taken
/// out of `patch`: after an error, it holds what is still to be written.
///
/// The order keeps a handler from being recorded done before its effects are stored: the
/// `status` first (results), then the handlers' JSON-patch operations (as they were made for
/// the object at `resource_version`), then the rest of the merge patch (the records in
/// annotations), then the finalizer. Each request is guarded by the version that the one
/// before it made.
pub(crate) async fn apply(
    target: &Target<'_>,
    patch: &mut Patch,
    finalizer: Option<Value>,
    resource_version: &str,
    backoffs: impl Into<Backoffs<'_>>,
) -> Result<Written, WriteError> {
    let backoffs = backoffs.into();
    let mut written = Written::default();
    let mut finalizer = finalizer;
    // A finalizer leaving (the deletion handlers are done, or no handler needs it) goes
    // first, alone: the records that the same cycle purges stay until it is gone, so that a
    // write that fails (or a crash) here runs no deletion handler again, and the object does
    // not stay in deletion for want of a write that is not tried again.
    if finalizer.as_ref().is_some_and(|op| op["op"] == "remove")
        && let Some(operation) = finalizer.take()
    {
        match guarded(
            target,
            resource_version,
            &[operation],
            Wanted::Lifecycle,
            backoffs,
        )
        .await?
        {
            // The last finalizer of an object in deletion: the server deletes it now, and
            // nothing is left to write. Its version (the DELETED event's) is still awaited,
            // so that no older event on its way runs a deletion handler again.
            Some(object) if object.deleting && object.finalizers.is_empty() => {
                *patch = Patch::default();
                written.versions.extend(object.resource_version);
                written.versions = moved_on(resource_version, written.versions);
                return Ok(written);
            }
            Some(object) => written.versions.extend(object.resource_version),
            None => return Ok(gone(patch)),
        }
    }
    let mut version = written
        .versions
        .last()
        .cloned()
        .unwrap_or_else(|| resource_version.to_string());
    // A crash between the status and the records re-runs the handler instead of losing its
    // result. A watch delivers each version; the caller waits until all have come back.
    if target.resource.status_subresource
        && let Some(status) = patch.take_status()
    {
        let merge = Map::from_iter([("status".to_string(), status)]);
        let sent = merged(
            target,
            Some("status"),
            &merge,
            &mut version,
            Wanted::Status,
            backoffs,
        );
        match sent.await {
            Ok(Some(object)) => {
                written.pruned = pruned(&merge["status"], &object.status);
                written.versions.extend(object.resource_version);
            }
            Ok(None) => return Ok(gone(patch)),
            Err(error) => {
                merge
                    .into_iter()
                    .for_each(|(key, value)| patch.merge_raw(&key, value));
                return Err(error);
            }
        }
        version = written.versions.last().cloned().unwrap_or(version);
    }
    let operations = patch.take_operations();
    if !operations.is_empty() {
        match guarded(target, &version, &operations, Wanted::Version, backoffs).await {
            Ok(Some(object)) => written.versions.extend(object.resource_version),
            Ok(None) => return Ok(gone(patch)),
            Err(WriteError::Request(kube::Error::Api(status)))
                if status.code == 422 || status.code == 409 =>
            {
                match read(target, backoffs).await {
                    Ok(None) => return Ok(gone(patch)),
                    Ok(Some(object)) if object.resource_version.as_ref() != Some(&version) => {
                        tracing::debug!(message = %status.message, "the handlers' JSON-patch operations met a newer version; the handlers run again on it");
                        written.versions.extend(object.resource_version);
                        written.outdated = true;
                        *patch = Patch::default();
                        written.versions = moved_on(resource_version, written.versions);
                        return Ok(written);
                    }
                    Ok(Some(_)) => {
                        tracing::error!(target: "kopf::patching", message = %status.message, object.name = target.name, "the server rejected the handlers' JSON-patch operations for the current version of the object, so they are dropped; check the operations that the handlers add with `Patch::operation`");
                    }
                    Err(error) => {
                        operations.into_iter().for_each(|o| patch.operation(o));
                        return Err(error);
                    }
                }
            }
            Err(error) => {
                operations.into_iter().for_each(|o| patch.operation(o));
                return Err(error);
            }
        }
        version = written.versions.last().cloned().unwrap_or(version);
    }
    if let Some(merge) = patch.take_merge() {
        let wanted = match merge.get("status") {
            Some(_) => Wanted::Status,
            None => Wanted::Version,
        };
        let sent = merged(target, None, &merge, &mut version, wanted, backoffs);
        match sent.await {
            Ok(Some(object)) => {
                if let Some(status) = merge.get("status") {
                    written.pruned = pruned(status, &object.status);
                }
                written.versions.extend(object.resource_version);
            }
            Ok(None) => return Ok(gone(patch)),
            Err(error) => {
                merge
                    .into_iter()
                    .for_each(|(key, value)| patch.merge_raw(&key, value));
                // A patch rejected for good must not keep the finalizer on a deleted object
                // (the deletion would wait for a write that never lands): it is sent anyway.
                if error.rejected_for_good()
                    && let Some(operation) = finalizer
                    && let Err(also) =
                        guarded(target, &version, &[operation], Wanted::Version, backoffs).await
                {
                    tracing::debug!(error = %also, "the finalizer's JSON patch failed too; retrying later");
                }
                return Err(error);
            }
        }
        version = written.versions.last().cloned().unwrap_or(version);
    }
    if let Some(operation) = finalizer {
        match guarded(target, &version, &[operation], Wanted::Version, backoffs).await {
            // The later writes (the `test` made sure): the one version to wait for.
            Ok(Some(object)) => written.versions = object.resource_version.into_iter().collect(),
            Ok(None) => return Ok(Written::default()),
            // 409 or 422 included: the object changed meanwhile, or the server says so for
            // another reason. No event need follow: the caller tries again on the newest
            // state it has, after a delay.
            Err(error) => return Err(error),
        }
    }
    written.versions = moved_on(resource_version, written.versions);
    Ok(written)
}

/// Of the versions that a series of writes answered with, in order, from the object at
/// `base`: those that each write moved on to. A write that changed nothing (a result equal to
/// the one stored) answers with the version it found, and no watch event comes for it: it
/// must not be waited for.
fn moved_on(base: &str, versions: Vec<String>) -> Vec<String> {
    let mut before = base.to_string();
    let mut moved = Vec::new();
    for version in versions {
        if version != before {
            moved.push(version.clone());
        }
        before = version;
    }
    moved
}

/// The object is gone (404): nothing is left to write.
fn gone(patch: &mut Patch) -> Written {
    *patch = Patch::default();
    Written::default()
}

/// Sends JSON-patch operations guarded by a `test` that the object is still at `version`.
async fn guarded(
    target: &Target<'_>,
    version: &str,
    operations: &[Value],
    wanted: Wanted,
    backoffs: Backoffs<'_>,
) -> Result<Option<Answer>, WriteError> {
    let mut guarded =
        vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": version})];
    guarded.extend(operations.iter().cloned());
    let body = serde_json::to_vec(&Value::Array(guarded)).map_err(kube::Error::SerdeError)?;
    let url = target.path(None);
    retried(target, backoffs, || {
        let request = http::Request::patch(url.as_str())
            .header(http::header::CONTENT_TYPE, "application/json-patch+json")
            .body(body.clone())
            .expect("a PATCH request with a static header always builds");
        answers::request(target.client, request, wanted)
    })
    .await
}

/// Sends a merge patch of the object (or of its subresource) guarded by `version`; after a
/// conflict, reads the object's newest version into `version` and sends the patch again for
/// it (invariant 3).
async fn merged(
    target: &Target<'_>,
    subresource: Option<&str>,
    merge: &Map<String, Value>,
    version: &mut String,
    wanted: Wanted,
    backoffs: Backoffs<'_>,
) -> Result<Option<Answer>, WriteError> {
    let mut conflicts = 0;
    loop {
        let request = target.merge_patch(subresource, &Guarded { merge, version });
        let sent = retried(target, backoffs, || send(target, request.as_ref(), wanted)).await;
        match sent {
            Err(WriteError::Request(kube::Error::Api(status)))
                if status.code == 409 && conflicts < CONFLICTS =>
            {
                conflicts += 1;
                tracing::debug!(message = %status.message, "the object changed since it was read; writing again to its newest version");
                match read(target, backoffs).await? {
                    Some(object) => *version = object.resource_version.unwrap_or_default(),
                    None => return Ok(None),
                }
            }
            sent => return sent,
        }
    }
}

/// Reads the object's resourceVersion; `None` when it is gone.
async fn read(target: &Target<'_>, backoffs: Backoffs<'_>) -> Result<Option<Answer>, WriteError> {
    let request = target
        .requests()
        .get(target.name, &kube::api::GetParams::default());
    retried(target, backoffs, || {
        send(target, request.as_ref(), Wanted::Version)
    })
    .await
}

/// Reads the whole object as stored now (`Ok(None)`: it is gone), made the [`Body`] that the
/// engine keeps as `K` reads it (its managed fields kept apart, or stripped), retried as a
/// write's requests are, and sent only while the target's gate lets it: for a worker whose
/// own write has not come back on the watch in time, so that it never handles a state older
/// than that write.
pub(crate) async fn fetch<K: Object>(
    target: &Target<'_>,
    backoffs: Backoffs<'_>,
) -> Result<Option<Body>, WriteError> {
    let request = target
        .requests()
        .get(target.name, &kube::api::GetParams::default());
    let fetched = retried(target, backoffs, || async {
        match request.as_ref() {
            Ok(request) => target.client.request::<K>(request.clone()).await,
            Err(error) => Err(kube::Error::BuildRequest(
                kube::core::request::Error::Validation(error.to_string()),
            )),
        }
    });
    Ok(fetched.await?.map(K::into_body))
}

/// Sends a request built by kube-rs (or the error building it) and reads what is `wanted` of
/// the answer.
async fn send(
    target: &Target<'_>,
    request: Result<&http::Request<Vec<u8>>, &kube::core::request::Error>,
    wanted: Wanted,
) -> Result<Answer, kube::Error> {
    match request {
        Ok(request) => answers::request(target.client, request.clone(), wanted).await,
        Err(error) => Err(kube::Error::BuildRequest(
            kube::core::request::Error::Validation(error.to_string()),
        )),
    }
}

/// Calls `request` if and while the target's gate lets it (invariant 2), retrying connection
/// errors, 5xx and 429 after the given delays (at least a 429's `Retry-After`), until the
/// target's worker stops; `Ok(None)` for 404.
async fn retried<T, F, Fut>(
    target: &Target<'_>,
    backoffs: Backoffs<'_>,
    mut request: F,
) -> Result<Option<T>, WriteError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut attempt = 0;
    loop {
        match within_gate(target.gate, request()).await? {
            Ok(object) => return Ok(Some(object)),
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
            Err(error) if transient(&error) => {
                let Some(wait) = backoffs.wait(attempt, &error) else {
                    return Err(error.into());
                };
                tracing::debug!(%error, ?wait, "a write failed; retrying");
                tokio::select! {
                    _ = target.stop.cancelled() => return Err(error.into()),
                    _ = tokio::time::sleep(wait) => {}
                }
                attempt += 1;
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// Sends a request if the gate lets it, and waits for its answer until the gate's deadline,
/// asking the gate again then (a renewed term goes on); `Err` when it closed first: the
/// request, if sent, is dropped (the connection closes).
pub(crate) async fn within_gate<T>(
    gate: &dyn Gate,
    request: impl std::future::Future<Output = T>,
) -> Result<T, WriteError> {
    let mut deadline = gate.deadline().map_err(WriteError::Closed)?;
    let request = std::pin::pin!(request);
    let mut request = request;
    loop {
        let Some(until) = deadline else {
            return Ok(request.await);
        };
        tokio::select! {
            biased;
            answer = &mut request => return Ok(answer),
            _ = tokio::time::sleep_until(until) => {}
        }
        deadline = gate.deadline().map_err(WriteError::Closed)?;
    }
}

/// Whether the server rejected a write for good: the same request would fail again (e.g.
/// `422 Invalid` for annotations over 262,144 bytes in all; `400`; `413`).
pub(crate) fn rejected_for_good(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if matches!(status.code, 400 | 413 | 422))
}

fn transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code >= 500 || status.code == 429,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// JSON-patch operations adding the finalizer (given the current list).
pub(crate) fn add_finalizer(finalizers: Option<&Value>, finalizer: &str) -> Value {
    match finalizers.and_then(Value::as_array) {
        Some(_) => json!({"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}),
        None => json!({"op": "add", "path": "/metadata/finalizers", "value": [finalizer]}),
    }
}

/// The JSON-patch operation removing the finalizer, if present.
pub(crate) fn remove_finalizer(finalizers: Option<&Value>, finalizer: &str) -> Option<Value> {
    let index = finalizers?
        .as_array()?
        .iter()
        .position(|f| f == finalizer)?;
    Some(json!({"op": "remove", "path": format!("/metadata/finalizers/{index}")}))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clients::reading::Deferred;
    use std::sync::{Arc, Mutex};

    #[test]
    fn fields_sent_with_a_value_but_not_stored_were_pruned() {
        let sent = json!({"create_fn": {"ok": true}, "kept": 1, "removed": null});
        let stored = json!({"kept": 1});
        assert_eq!(pruned(&sent, &stored), ["create_fn"]);
        assert!(pruned(&sent, &json!({"create_fn": {}, "kept": 1})).is_empty());
    }

    /// The merge patches built here are those that kube-rs builds with default parameters.
    #[tokio::test]
    async fn merge_patches_are_kube_rs_ones() {
        let service = crate::clients::auth::tower_service_fn(|_| async {
            Err::<http::Response<kube::client::Body>, _>("no API server in this test".into())
        });
        let client = kube::Client::new(service, "default");
        let resource = Resource::kopf_examples();
        let stop = CancellationToken::new();
        let target = Target {
            client: &client,
            resource: &resource,
            namespace: Some("ns"),
            name: "one",
            stop: &stop,
            gate: &Ungated,
        };
        let merge = json!({"metadata": {"annotations": {"a": "b"}}, "spec": {"x": [1, null]}});
        let params = kube::api::PatchParams::default();
        let patch = kube::api::Patch::Merge(&merge);
        let requests = target.requests();
        let expected = [
            (None, requests.patch("one", &params, &patch).unwrap()),
            (
                Some("status"),
                requests
                    .patch_subresource("status", "one", &params, &patch)
                    .unwrap(),
            ),
        ];
        for (subresource, expected) in expected {
            let built = target.merge_patch(subresource, &merge).unwrap();
            assert_eq!(built.method(), expected.method());
            assert_eq!(built.uri().path(), expected.uri().path(), "{subresource:?}");
            assert_eq!(
                built.uri().query().unwrap_or(""),
                expected.uri().query().unwrap_or("")
            );
            assert_eq!(built.headers(), expected.headers());
            assert_eq!(built.body(), expected.body());
        }
        let nameless = Target { name: "", ..target };
        assert!(nameless.merge_patch(None, &merge).is_err());
    }

    #[test]
    fn merge_patches_carry_the_version_they_were_made_for() {
        let sent = |merge: Value, version: &str| {
            let Value::Object(merge) = merge else {
                unreachable!()
            };
            serde_json::to_value(Guarded {
                merge: &merge,
                version,
            })
            .unwrap()
        };
        assert_eq!(
            sent(json!({"status": {"a": 1}}), "7"),
            json!({"status": {"a": 1}, "metadata": {"resourceVersion": "7"}})
        );
        assert_eq!(
            sent(
                json!({"metadata": {"annotations": {"x": "y"}, "resourceVersion": "1"}}),
                "7"
            ),
            json!({"metadata": {"annotations": {"x": "y"}, "resourceVersion": "7"}}),
            "the version of the write, whatever the patch says"
        );
        assert_eq!(
            sent(json!({"metadata": null, "spec": {"b": 2}}), "7"),
            json!({"metadata": {"resourceVersion": "7"}, "spec": {"b": 2}})
        );
        assert_eq!(
            sent(json!({"spec": {"b": 2}}), ""),
            json!({"spec": {"b": 2}}),
            "no version known: not guarded"
        );
    }

    /// A fake API server for the writes: answers each request with what `answer` says of
    /// it (`None`: never answers), and records them.
    struct Server {
        client: kube::Client,
        sent: Arc<Mutex<Vec<(String, Value)>>>,
    }

    type Answering = fn(&str, &Value, usize) -> Option<(u16, Value)>;

    impl Server {
        fn new(answer: Answering) -> Server {
            let sent: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
            let recorded = sent.clone();
            let service = crate::clients::auth::tower_service_fn(move |request| {
                let recorded = recorded.clone();
                async move {
                    let line = format!("{} {}", request.method(), request.uri().path());
                    let bytes = request.into_body().collect_bytes().await?;
                    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                    let count = {
                        let mut all = recorded.lock().unwrap();
                        all.push((line.clone(), body.clone()));
                        all.len()
                    };
                    let Some((code, answer)) = answer(&line, &body, count) else {
                        return std::future::pending().await;
                    };
                    let response = http::Response::builder()
                        .status(code)
                        .body(kube::client::Body::from(answer.to_string().into_bytes()))?;
                    Ok(response)
                }
            });
            Server {
                client: kube::Client::new(service, "default"),
                sent,
            }
        }

        fn sent(&self) -> Vec<(String, Value)> {
            self.sent.lock().unwrap().clone()
        }
    }

    /// A gate that closes at an instant, or when told.
    struct Term {
        ends: Mutex<Option<Instant>>,
    }

    impl Gate for Term {
        fn deadline(&self) -> Result<Option<Instant>, Closed> {
            match *self.ends.lock().unwrap() {
                Some(ends) if Instant::now() < ends => Ok(Some(ends)),
                _ => Err(Closed("the term ended")),
            }
        }
    }

    fn object(version: &str) -> Value {
        json!({"metadata": {"name": "one", "resourceVersion": version}, "status": {}})
    }

    fn conflict() -> Value {
        json!({"kind": "Status", "code": 409, "reason": "Conflict", "message": "the object has been modified"})
    }

    /// Writes a result and a record, as a handler's cycle does.
    async fn write(server: &Server, gate: &dyn Gate) -> Result<Written, WriteError> {
        let resource = Resource::kopf_examples();
        let stop = CancellationToken::new();
        let target = Target {
            client: &server.client,
            resource: &resource,
            namespace: Some("ns"),
            name: "one",
            stop: &stop,
            gate,
        };
        let mut patch = Patch::default();
        patch.merge_raw("status", json!({"create_fn": {"done": true}}));
        patch.merge_raw("metadata", json!({"annotations": {"record": "done"}}));
        apply(&target, &mut patch, None, "1", &[Duration::from_millis(1)]).await
    }

    #[tokio::test]
    async fn each_request_is_guarded_by_the_version_the_one_before_made() {
        let server = Server::new(|line, _, count| match line {
            _ if line.starts_with("PATCH") => Some((200, object(&format!("{}", count + 1)))),
            _ => None,
        });
        let written = write(&server, &Ungated).await.expect("written");
        assert_eq!(written.versions, ["2", "3"]);
        let sent = server.sent();
        assert_eq!(
            sent[0].0,
            "PATCH /apis/kopf.dev/v1/namespaces/ns/kopfexamples/one/status"
        );
        assert_eq!(sent[0].1["metadata"], json!({"resourceVersion": "1"}));
        assert_eq!(
            sent[1].0,
            "PATCH /apis/kopf.dev/v1/namespaces/ns/kopfexamples/one"
        );
        assert_eq!(
            sent[1].1["metadata"],
            json!({"annotations": {"record": "done"}, "resourceVersion": "2"})
        );
    }

    /// A user changed the object meanwhile: the result is written to the newest version,
    /// read right then, as Kopf writes it whatever changed.
    #[tokio::test]
    async fn a_merge_patch_that_meets_a_newer_version_is_sent_again_for_it() {
        let server = Server::new(|line, body, _| match line {
            _ if line.starts_with("GET") => Some((200, object("5"))),
            _ if body["metadata"]["resourceVersion"] == "1" => Some((409, conflict())),
            _ if body["metadata"]["resourceVersion"] == "5" => Some((200, object("6"))),
            _ => Some((200, object("7"))),
        });
        let written = write(&server, &Ungated).await.expect("written");
        assert_eq!(written.versions, ["6", "7"]);
        let lines: Vec<String> = server.sent().into_iter().map(|(line, _)| line).collect();
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[1].starts_with("GET"), "{lines:?}");
    }

    /// The term ends while the first request waits for its answer: it is dropped at the
    /// term's end, and nothing more is sent.
    #[tokio::test(start_paused = true)]
    async fn a_request_unanswered_at_the_end_of_the_term_is_dropped() {
        let server = Server::new(|_, _, _| None);
        let gate = Term {
            ends: Mutex::new(Some(Instant::now() + Duration::from_secs(10))),
        };
        let started = Instant::now();
        let error = write(&server, &gate).await.expect_err("not written");
        assert!(matches!(error, WriteError::Closed(_)), "{error:?}");
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        assert_eq!(server.sent().len(), 1);
    }

    /// A term renewed while a request waits lets it wait on, until the renewed term's end.
    #[tokio::test(start_paused = true)]
    async fn a_request_waits_on_while_its_term_is_renewed() {
        let server = Server::new(|_, _, _| None);
        let gate = Arc::new(Term {
            ends: Mutex::new(Some(Instant::now() + Duration::from_secs(10))),
        });
        let renewing = {
            let gate = gate.clone();
            async move {
                tokio::time::sleep(Duration::from_secs(5)).await;
                *gate.ends.lock().unwrap() = Some(Instant::now() + Duration::from_secs(10));
            }
        };
        let started = Instant::now();
        let (written, ()) = tokio::join!(write(&server, &*gate), renewing);
        assert!(matches!(written, Err(WriteError::Closed(_))));
        assert_eq!(started.elapsed(), Duration::from_secs(15));
    }

    /// The object read as stored: retried after a server error, gone on 404, its managed
    /// fields kept apart as the watchers keep them, and not read once the term has ended.
    #[tokio::test]
    async fn an_object_is_read_whole_as_the_watchers_read_it() {
        let server = Server::new(|line, _, count| match (line, count) {
            (_, 1) => Some((503, json!({"kind": "Status", "code": 503}))),
            (_, 2) => Some((
                200,
                json!({
                    "metadata": {"name": "one", "resourceVersion": "9",
                                 "managedFields": [{"manager": "kubectl"}]},
                    "spec": {"seq": 3},
                }),
            )),
            _ => Some((
                404,
                json!({"kind": "Status", "code": 404, "reason": "NotFound"}),
            )),
        });
        let resource = Resource::kopf_examples();
        let stop = CancellationToken::new();
        let target = Target {
            client: &server.client,
            resource: &resource,
            namespace: Some("ns"),
            name: "one",
            stop: &stop,
            gate: &Ungated,
        };
        let backoffs = &[Duration::from_millis(1)];
        let body = fetch::<Deferred>(&target, backoffs.into())
            .await
            .expect("read")
            .expect("there");
        assert_eq!(body["metadata"]["resourceVersion"], "9");
        assert_eq!(body["spec"], json!({"seq": 3}));
        assert!(
            body["metadata"].get("managedFields").is_none(),
            "kept apart"
        );
        let lines: Vec<String> = server.sent().into_iter().map(|(line, _)| line).collect();
        assert_eq!(
            lines, ["GET /apis/kopf.dev/v1/namespaces/ns/kopfexamples/one"; 2],
            "once more after the server error"
        );
        let gone = fetch::<Deferred>(&target, backoffs.into()).await;
        assert!(matches!(gone, Ok(None)), "{gone:?}");

        let ended = Term {
            ends: Mutex::new(None),
        };
        let closed = fetch::<Deferred>(
            &Target {
                gate: &ended,
                ..target
            },
            backoffs.into(),
        )
        .await;
        assert!(matches!(closed, Err(WriteError::Closed(_))), "{closed:?}");
        assert_eq!(server.sent().len(), 3, "nothing sent once the term ended");
    }

    /// The term ends between two requests of one write: the second is not sent.
    #[tokio::test]
    async fn no_request_leaves_once_the_term_has_ended() {
        static GATE: Term = Term {
            ends: Mutex::new(None),
        };
        *GATE.ends.lock().unwrap() = Some(Instant::now() + Duration::from_secs(3600));
        let server = Server::new(|_, _, _| {
            *GATE.ends.lock().unwrap() = None;
            Some((200, object("2")))
        });
        let error = write(&server, &GATE).await.expect_err("not written whole");
        assert!(matches!(error, WriteError::Closed(_)), "{error:?}");
        assert_eq!(server.sent().len(), 1, "the status only");
        let ended = write(&server, &GATE).await.expect_err("not written");
        assert!(matches!(ended, WriteError::Closed(_)));
        assert_eq!(server.sent().len(), 1, "nothing sent once ended");
    }
}
