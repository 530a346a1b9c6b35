//! Daemons, timers and sub-handlers: their options and the arguments only they get.

use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

#[kopf::daemon(
    "kopf.dev",
    "v1",
    "kopfexamples",
    initial_delay = "1s",
    cancellation_backoff = 5,
    cancellation_timeout = "1m",
    labels("app" = present),
    retries = 3
)]
async fn monitor(name: &str, stopped: &CancellationToken, retry: u32) -> kopf::Result<()> {
    while !stopped.is_cancelled() {
        tokio::select! {
            _ = stopped.cancelled() => {}
            _ = tokio::time::sleep(Duration::from_secs(10)) => println!("{name}: {retry}"),
        }
    }
    Ok(())
}

#[kopf::daemon("kopfexamples")]
async fn reasoned(stopped: kopf::Stopped) -> Option<String> {
    stopped.cancelled().await;
    stopped.reason().map(|reason| reason.to_string())
}

#[kopf::daemon("kopfexamples")]
fn sync_monitor(stopped: CancellationToken, patch: &mut kopf::Patch) {
    if !stopped.is_cancelled() {
        patch.status().insert("seen".into(), json!(true));
    }
}

#[kopf::timer("kopfexamples", interval = "1m", idle = 30, sharp, initial_delay = 0.5)]
async fn check(spec: &Value, _stopped: &CancellationToken) -> Value {
    json!({"checked": spec})
}

#[kopf::timer("kopfexamples", interval = Duration::from_millis(1500), sharp = false)]
fn sync_check(runtime: Duration) -> Option<u64> {
    Some(runtime.as_secs())
}

#[kopf::on_create("kopfexamples")]
async fn create_fn(subhandlers: &kopf::registry::SubHandlers, spec: Value) {
    for (key, value) in spec.as_object().into_iter().flatten() {
        let value = value.clone();
        subhandlers.add(key.clone(), move |_| {
            let value = value.clone();
            async move { Ok(Some(value)) }
        });
    }
}

fn main() {
    let registry = kopf::handlers![monitor, reasoned, sync_monitor, check, sync_check, create_fn];
    drop(registry);
}
