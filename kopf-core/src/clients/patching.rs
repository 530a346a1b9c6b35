//! Writing to objects: the merge patches of handlers (body and `/status`), JSON-patch
//! operations guarded by a `test` of the resourceVersion (finalizers), retries on transient
//! failures. A 404 means the object is gone: not an error.

use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch as KubePatch, PatchParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

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
    fn api(&self) -> Api<DynamicObject> {
        let resource = self.resource.api_resource();
        match self.namespace {
            Some(namespace) if self.resource.namespaced => {
                Api::namespaced_with(self.client.clone(), namespace, &resource)
            }
            _ => Api::all_with(self.client.clone(), &resource),
        }
    }
}

/// Sends the patch to the object at `resource_version`; returns the new resourceVersions
/// that the writes made, all of which a watch will deliver (none if the object is gone,
/// nothing was sent, or nothing changed).
pub(crate) async fn apply(
    target: &Target<'_>,
    patch: Patch,
    resource_version: &str,
    backoffs: &[Duration],
) -> Result<Vec<String>, kube::Error> {
    let api = target.api();
    let params = PatchParams::default();
    let (body, status, operations) = if target.resource.status_subresource {
        patch.split_status()
    } else {
        let (body, operations) = patch.into_merge();
        (body, None, operations)
    };
    // The status first, then the object: a handler's result (in `status`) is stored before
    // its record says it is done (in the annotations), so a crash between the two writes
    // re-runs the handler instead of losing its result. A watch delivers each version; the
    // caller waits until both have come back.
    let body_sent = async {
        match &body {
            Some(body) => {
                let merge = KubePatch::Merge(body);
                retried(backoffs, target.stop, || {
                    api.patch(target.name, &params, &merge)
                })
                .await
                .map(Some)
            }
            None => Ok(None),
        }
    };
    let status_sent = async {
        match &status {
            Some(status) => {
                let merge = KubePatch::Merge(status);
                retried(backoffs, target.stop, || {
                    api.patch_status(target.name, &params, &merge)
                })
                .await
                .map(Some)
            }
            None => Ok(None),
        }
    };
    // `Some(None)`: the object is gone (404).
    let status_sent = status_sent.await?;
    if matches!(status_sent, Some(None)) {
        return Ok(Vec::new());
    }
    let body_sent = body_sent.await?;
    if matches!(body_sent, Some(None)) {
        return Ok(Vec::new());
    }
    let version_of = |sent: Option<Option<DynamicObject>>| {
        sent.flatten()
            .and_then(|object| object.metadata.resource_version)
    };
    let (body_version, status_version) = (version_of(body_sent), version_of(status_sent));
    // A write that changed nothing (a result equal to the one stored) answers with the version
    // it found, and no watch event comes for it: only the versions that each write moved on
    // from the one before are waited for.
    let mut written: Vec<String> = Vec::new();
    let mut before = resource_version;
    for version in [&status_version, &body_version].into_iter().flatten() {
        if version != before {
            written.push(version.clone());
        }
        before = version;
    }
    if !operations.is_empty() {
        // The `test` needs the object's current version: the later of the two writes'.
        let version =
            latest(body_version, status_version).unwrap_or_else(|| resource_version.to_string());
        let mut guarded =
            vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": version})];
        guarded.extend(operations);
        let body = serde_json::to_vec(&Value::Array(guarded)).map_err(kube::Error::SerdeError)?;
        let url = format!(
            "{}/{}",
            target.resource.collection_path(target.namespace),
            target.name
        );
        let result = retried(backoffs, target.stop, || {
            let request = http::Request::patch(url.as_str())
                .header(http::header::CONTENT_TYPE, "application/json-patch+json")
                .body(body.clone())
                .expect("a PATCH request with a static header always builds");
            target.client.request::<DynamicObject>(request)
        })
        .await;
        match result {
            // After both merges (the `test` made sure): the one version to wait for.
            Ok(Some(object)) => written = object.metadata.resource_version.into_iter().collect(),
            Ok(None) => return Ok(Vec::new()),
            // The object changed meanwhile: the next cycle sees it and tries again.
            Err(kube::Error::Api(status)) if status.code == 422 || status.code == 409 => {
                tracing::debug!(message = %status.message, "a guarded JSON patch met a newer version; retrying later");
            }
            Err(error) => return Err(error),
        }
    }
    Ok(written)
}

/// The later of two resourceVersions. They are opaque to clients, but servers (etcd, the fake
/// server) make them increasing numbers; a wrong guess only costs a retried JSON patch.
fn latest(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => match (a.parse::<u64>(), b.parse::<u64>()) {
            (Ok(x), Ok(y)) if x > y => Some(a),
            _ => Some(b),
        },
        (a, b) => a.or(b),
    }
}

/// Calls `request`, retrying connection errors, 5xx and 429 after the given delays (until
/// `stop` is cancelled); `Ok(None)` for 404.
async fn retried<F, Fut>(
    backoffs: &[Duration],
    stop: &CancellationToken,
    mut request: F,
) -> Result<Option<DynamicObject>, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<DynamicObject, kube::Error>>,
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
