//! Live views for daemons and timers, next to the snapshots they keep.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct Spec {
    interval: u64,
}

#[kopf::daemon("kopf.dev", "v1", "kopfexamples")]
async fn poller(
    spec: kopf::Live<Spec>,
    body: kopf::Live,
    labels: kopf::Live<BTreeMap<String, String>>,
    status: kopf::Live<Option<Value>>,
    stopped: kopf::Stopped,
) -> kopf::Result<()> {
    while !stopped.is_cancelled() {
        let interval = spec.get()?.interval;
        let version = body.read(|body| body["metadata"]["resourceVersion"].clone());
        let _ = (version, labels.get()?, status.get()?);
        tokio::select! {
            _ = stopped.cancelled() => {}
            _ = spec.changed() => {}
            _ = tokio::time::sleep(Duration::from_secs(interval)) => {}
        }
    }
    Ok(())
}

#[kopf::daemon("kopfexamples")]
fn sync_poller(meta: kopf::Live, annotations: kopf::Live, stopped: tokio_util::sync::CancellationToken) {
    while !stopped.is_cancelled() {
        let _ = (meta.read(|meta| meta["name"].clone()), annotations.get());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[kopf::timer("kopfexamples", interval = 10)]
async fn checker(body: Value, spec: kopf::Live<Value>) -> kopf::Result<bool> {
    // The state when the call started, and the newest one.
    Ok(body["spec"] == spec.get()?)
}

fn main() {
    let registry = kopf::handlers![poller, sync_poller, checker];
    drop(registry);
}
