//! Requests at rest: what running replicas ask the API server for while there is nothing to
//! do (keep-alives, Lease renewals, looks at a ring, watch reconnects), counted by the server
//! over a window and given per minute per replica, less the runner's own. Scenarios 8 and 11.

use std::time::Duration;

use crate::cluster::{Cluster, Requests};
use crate::observe::Observer;

/// The resource that the runner's [`Observer`] lists and watches.
const OBSERVED: &str = "kopfexamples.kopf.dev";

/// The replicas' requests per minute each over `window`, by verb and resource, counted by the
/// server from now on. The runner's own are left out: the lists and watches of `observer`
/// (if any) during the window; its reads of the counters are not counted by the server. The
/// runner must send no other request meanwhile.
pub(crate) async fn requests(
    cluster: &Cluster,
    observer: Option<&Observer>,
    replicas: usize,
    window: Duration,
) -> Result<Requests, String> {
    let own_before = observer.map(Observer::own_requests).unwrap_or_default();
    let before = cluster.requests().await?;
    tokio::time::sleep(window).await;
    let after = cluster.requests().await?;
    let own_after = observer.map(Observer::own_requests).unwrap_or_default();
    let own = [
        ("list", (own_after.0 - own_before.0) as f64),
        ("watch", (own_after.1 - own_before.1) as f64),
    ];
    let per = replicas as f64 * window.as_secs_f64() / 60.0;
    let mut requests = Requests::new();
    for (key, count) in after {
        let mut count = count - before.get(&key).copied().unwrap_or(0.0);
        if key.1 == OBSERVED {
            count -= own
                .iter()
                .filter(|(verb, _)| *verb == key.0)
                .map(|(_, n)| n)
                .sum::<f64>();
        }
        if count > 0.0 {
            requests.insert(key, count / per);
        }
    }
    Ok(requests)
}

/// All the requests per minute per replica, whatever their verb and resource.
pub(crate) fn total(requests: &Requests) -> f64 {
    requests.values().fold(0.0, |sum, rate| sum + rate)
}
