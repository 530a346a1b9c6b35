//! The replicas' handlers in `shards.rs`: a mutual-exclusion probe. Each writes marks into
//! ConfigMaps of its own (never into the KopfExample, which the operator writes too), every
//! write guarded by the resourceVersion just read, and never retried: if two replicas handle
//! one object at once, one of them gets `409 Conflict` or finds the other's mark on its next
//! look, and prints a [`CONFLICT`] (or [`OVERLAP`]) line.
//!
//! - The create handler counts its runs per object in `created-<name>` (`count`, `by`,
//!   `history`); with `spec.gated`, it then waits until the test sets `spec.release` (a
//!   handler in flight for as long as the test wants).
//! - The daemon, every [`PACE`], marks `daemon-<name>` as its replica's (`holder`, `marks`,
//!   `history` of the holders in turn). A running daemon that finds another holder than
//!   itself, after it has marked the object, overlaps with that other one. Stopped, it winds
//!   down for a while and marks once more: the hand-off must wait for its end.

use std::time::Duration;

use kopf::registry::HandlerResult;
use kopf::{Invocation, TemporaryError};
use kopf_testing::{ApiRequest, RequestError, TestClient, fixtures};
use serde_json::{Value, json};

/// Printed by a replica that caught another one handling the same object at once.
pub(crate) const CONFLICT: &str = "PROBE-CONFLICT";
/// Printed by a running daemon that finds its object marked by another replica's daemon
/// since its own last mark: both run at once (or this one was frozen and continued).
pub(crate) const OVERLAP: &str = "PROBE-OVERLAP";
/// Where the probe's ConfigMaps live.
pub(crate) const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
/// How often a daemon marks its object.
const PACE: Duration = Duration::from_millis(700);
/// How long a stopped daemon takes to wind down, before its last mark.
const WINDING_DOWN: Duration = Duration::from_millis(300);

/// The create handler: counts this run in `created-<name>`, then, for a gated object, waits
/// until the test releases it.
pub(crate) async fn create(kopf: Invocation, me: String) -> HandlerResult {
    let client = TestClient::new(kopf.client().clone());
    let name = kopf.name().to_string();
    let probe = format!("created-{name}");
    let current = read(&client, &probe)
        .await
        .map_err(|error| TemporaryError::new(format!("reading {probe}: {error}")))?;
    let written = match current {
        None => {
            let body = json!({"metadata": {"name": probe},
                              "data": {"count": "1", "by": me, "history": me}});
            write(&client, "POST", CONFIGMAPS.to_string(), body).await
        }
        Some(mut cm) => {
            let count: u64 = cm["data"]["count"]
                .as_str()
                .unwrap_or("0")
                .parse()
                .unwrap_or(0);
            let history = cm["data"]["history"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            cm["data"] = json!({"count": (count + 1).to_string(), "by": me,
                                "history": format!("{history},{me}")});
            write(&client, "PUT", format!("{CONFIGMAPS}/{probe}"), cm).await
        }
    };
    match written {
        Ok(_) => eprintln!("PROBE-CREATED {name} {me}"),
        // Never retried: whoever else wrote meanwhile ran the same handler at the same time.
        Err(RequestError::Refused { status, .. }) if status == 409 => {
            eprintln!("{CONFLICT} {name} {me}: the create handler's count was written meanwhile");
        }
        Err(error) => {
            eprintln!("PROBE-ERROR {name} {me}: {error}");
            return Err(TemporaryError::new(format!("writing {probe}: {error}")).into());
        }
    }
    while kopf.body()["spec"]["gated"] == true {
        let object = read_object(&client, &name).await;
        if object.is_some_and(|o| o["spec"]["release"] == true) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(Some(json!({"by": me})))
}

/// The daemon: marks `daemon-<name>` as this replica's every [`PACE`] until stopped.
pub(crate) async fn daemon(kopf: Invocation, me: String) -> HandlerResult {
    let client = TestClient::new(kopf.client().clone());
    let name = kopf.name().to_string();
    let mut marked = false;
    while !kopf.stopped().is_cancelled() {
        if !look_and_mark(&client, &name, &me, &mut marked, kopf.stopped()).await {
            return Ok(None);
        }
        tokio::select! {
            _ = kopf.stopped().cancelled() => {}
            _ = tokio::time::sleep(PACE) => {}
        }
    }
    // Winding down takes a while, and ends with a last mark: a hand-off made before the
    // daemon has ended shows up as the new owner's mark found here.
    if marked {
        tokio::time::sleep(WINDING_DOWN).await;
        let never = tokio_util::sync::CancellationToken::new();
        look_and_mark(&client, &name, &me, &mut marked, &never).await;
    }
    let reason = kopf
        .stop_reason()
        .map(|r| r.to_string())
        .unwrap_or_default();
    eprintln!("PROBE-STOPPED {name} {me}: {reason}");
    Ok(None)
}

/// A look at the daemon's ConfigMap and, unless `stopped` meanwhile, a mark: `false` if
/// another replica's daemon was caught at it (then this one ends).
async fn look_and_mark(
    client: &TestClient,
    name: &str,
    me: &str,
    marked: &mut bool,
    stopped: &tokio_util::sync::CancellationToken,
) -> bool {
    let probe = format!("daemon-{name}");
    let Ok(current) = read(client, &probe).await else {
        // The server restarted, or this replica is cut off: the next look tells.
        return true;
    };
    let holder = current
        .as_ref()
        .and_then(|cm| cm["data"]["holder"].as_str())
        .unwrap_or_default()
        .to_string();
    if *marked && holder != me {
        eprintln!("{OVERLAP} {name} {me}: {holder} marked it while this daemon runs");
        return false;
    }
    if stopped.is_cancelled() {
        return true;
    }
    match mark(client, &probe, current, me).await {
        Ok(()) => *marked = true,
        Err(RequestError::Refused { status, .. }) if status == 409 => {
            eprintln!("{CONFLICT} {name} {me}: the daemon's mark was written meanwhile");
            return false;
        }
        Err(_) => {}
    }
    true
}

/// One mark of the daemon's ConfigMap, guarded by the version read.
async fn mark(
    client: &TestClient,
    probe: &str,
    current: Option<Value>,
    me: &str,
) -> Result<(), RequestError> {
    match current {
        None => {
            let body = json!({"metadata": {"name": probe},
                              "data": {"holder": me, "marks": "1", "history": me}});
            write(client, "POST", CONFIGMAPS.to_string(), body).await?;
        }
        Some(mut cm) => {
            let marks: u64 = cm["data"]["marks"]
                .as_str()
                .unwrap_or("0")
                .parse()
                .unwrap_or(0);
            let history = cm["data"]["history"].as_str().unwrap_or_default();
            let history = match history.rsplit(',').next() {
                Some(last) if last == me => history.to_string(),
                _ => format!("{history},{me}"),
            };
            cm["data"] = json!({"holder": me, "marks": (marks + 1).to_string(),
                                "history": history});
            let path = format!("{CONFIGMAPS}/{probe}");
            write(client, "PUT", path, cm).await?;
        }
    }
    Ok(())
}

/// The ConfigMap, `None` if there is none.
async fn read(client: &TestClient, name: &str) -> Result<Option<Value>, RequestError> {
    let answer = client
        .try_send(ApiRequest::new("GET", format!("{CONFIGMAPS}/{name}")))
        .await?;
    if answer.status == 404 {
        return Ok(None);
    }
    Ok(Some(answer.success()?.json()))
}

async fn read_object(client: &TestClient, name: &str) -> Option<Value> {
    let path = fixtures::kopfexample_path("default", name);
    let (status, object) = client.try_request("GET", &path, None).await.ok()?;
    status.is_success().then_some(object)
}

/// A write (a POST, or a PUT carrying the version read in its `metadata.resourceVersion`),
/// never retried; an answer that is not a success is an error.
async fn write(
    client: &TestClient,
    method: &str,
    path: String,
    body: Value,
) -> Result<Value, RequestError> {
    let request = ApiRequest::new(method, path).json(body);
    Ok(client.try_send(request).await?.success()?.json())
}
