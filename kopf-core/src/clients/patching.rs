//! Writing to objects: the merge patches of handlers (body and `/status`), JSON-patch
//! operations (the handlers' and the finalizer's) guarded by a `test` of the resourceVersion,
//! retries on transient failures. A 404 means the object is gone: not an error.

use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::clients::answers::{self, Answer, Wanted};
use crate::structs::patch::Patch;
use crate::structs::resources::Resource;

/// Where the patches go.
pub(crate) struct Target<'a> {
    pub(crate) client: &'a kube::Client,
    pub(crate) resource: &'a Resource,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) name: &'a str,
    /// The writing worker's token: once the operator stops, a failed write is not retried
    /// (the retries could outlast the grace period; the next run writes again).
    pub(crate) stop: &'a CancellationToken,
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
        merge: &Value,
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
/// `status` first (results), then the handlers' JSON-patch operations (guarded by a `test` of
/// the resourceVersion, as they were made for that version), then the rest of the merge patch
/// (the records in annotations), then the finalizer (guarded likewise).
pub(crate) async fn apply(
    target: &Target<'_>,
    patch: &mut Patch,
    finalizer: Option<Value>,
    resource_version: &str,
    backoffs: &[Duration],
) -> Result<Written, kube::Error> {
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
    // A crash between the status and the records re-runs the handler instead of losing its
    // result. A watch delivers each version; the caller waits until all have come back.
    if target.resource.status_subresource
        && let Some(status) = patch.take_status()
    {
        let merge = json!({ "status": status });
        let request = target.merge_patch(Some("status"), &merge);
        match retried(backoffs, target.stop, || {
            send(target, request.as_ref(), Wanted::Status)
        })
        .await
        {
            Ok(Some(object)) => {
                written.pruned = pruned(&status, &object.status);
                written.versions.extend(object.resource_version);
            }
            Ok(None) => return Ok(gone(patch)),
            Err(error) => {
                patch.merge_raw("status", status);
                return Err(error);
            }
        }
    }
    let mut version = written
        .versions
        .last()
        .cloned()
        .unwrap_or_else(|| resource_version.to_string());
    let operations = patch.take_operations();
    if !operations.is_empty() {
        match guarded(target, &version, &operations, Wanted::Version, backoffs).await {
            Ok(Some(object)) => written.versions.extend(object.resource_version),
            Ok(None) => return Ok(gone(patch)),
            Err(kube::Error::Api(status)) if status.code == 422 || status.code == 409 => {
                let request = target
                    .requests()
                    .get(target.name, &kube::api::GetParams::default());
                match retried(backoffs, target.stop, || {
                    send(target, request.as_ref(), Wanted::Version)
                })
                .await
                {
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
        let body = Value::Object(merge);
        let request = target.merge_patch(None, &body);
        let wanted = match body.get("status") {
            Some(_) => Wanted::Status,
            None => Wanted::Version,
        };
        let sent = retried(backoffs, target.stop, || {
            send(target, request.as_ref(), wanted)
        })
        .await;
        match sent {
            Ok(Some(object)) => {
                if let Some(status) = body.get("status") {
                    written.pruned = pruned(status, &object.status);
                }
                written.versions.extend(object.resource_version);
            }
            Ok(None) => return Ok(gone(patch)),
            Err(error) => {
                if let Value::Object(merge) = body {
                    merge.into_iter().for_each(|(k, v)| patch.merge_raw(&k, v));
                }
                // A patch rejected for good must not keep the finalizer on a deleted object
                // (the deletion would wait for a write that never lands): it is sent anyway.
                if rejected_for_good(&error)
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
    backoffs: &[Duration],
) -> Result<Option<Answer>, kube::Error> {
    let mut guarded =
        vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": version})];
    guarded.extend(operations.iter().cloned());
    let body = serde_json::to_vec(&Value::Array(guarded)).map_err(kube::Error::SerdeError)?;
    let url = target.path(None);
    retried(backoffs, target.stop, || {
        let request = http::Request::patch(url.as_str())
            .header(http::header::CONTENT_TYPE, "application/json-patch+json")
            .body(body.clone())
            .expect("a PATCH request with a static header always builds");
        answers::request(target.client, request, wanted)
    })
    .await
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

/// Calls `request`, retrying connection errors, 5xx and 429 after the given delays (until
/// `stop` is cancelled); `Ok(None)` for 404.
async fn retried<F, Fut>(
    backoffs: &[Duration],
    stop: &CancellationToken,
    mut request: F,
) -> Result<Option<Answer>, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Answer, kube::Error>>,
{
    let mut attempt = 0;
    loop {
        match request().await {
            Ok(object) => return Ok(Some(object)),
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
            Err(error) if transient(&error) && attempt < backoffs.len() => {
                tracing::debug!(%error, "a write failed; retrying");
                tokio::select! {
                    _ = stop.cancelled() => return Err(error),
                    _ = tokio::time::sleep(backoffs[attempt]) => {}
                }
                attempt += 1;
            }
            Err(error) => return Err(error),
        }
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
    use super::*;

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
}
