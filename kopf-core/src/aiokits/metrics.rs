//! Prometheus metric series of one operator (served by the metrics endpoint, `--metrics URL`).
//!
//! The series, named after controller-runtime's and prefixed `kopf_`:
//!
//! | series | type | labels | what it counts |
//! |---|---|---|---|
//! | `kopf_handler_invocations_total` | counter | `handler`, `outcome` | handler attempts by how they ended: `success`, `retry` (failed temporarily, tried again later) or `failure` (failed for good, limits included) |
//! | `kopf_handler_errors_total` | counter | `handler` | attempts that failed (outcome `retry` or `failure`) |
//! | `kopf_handler_retries_total` | counter | `handler` | attempts that were retries (an earlier attempt had failed) |
//! | `kopf_handler_duration_seconds` | histogram | `handler` | how long attempts took |
//! | `kopf_watch_events_total` | counter | `resource`, `type` | objects received for per-object processing: `LISTED` (a listing's items), `ADDED`, `MODIFIED`, `DELETED` |
//! | `kopf_watch_starts_total` | counter | `resource` | watch streams opened: the first of each watcher and every reconnect |
//! | `kopf_workers` | gauge | `resource` | per-object workers alive (one at rest counts until its idle timeout ends it) |
//! | `kopf_queue_depth` | gauge | `resource` | events waiting for their object's worker |
//! | `kopf_in_flight` | gauge | | objects' states read from the watches and not yet done with (`settings.queueing.in_flight_limit`) |
//! | `kopf_in_flight_peak` | gauge | | the most states in flight at once since the operator started |
//! | `kopf_api_requests_total` | counter | `verb`, `code` | requests to the API server by Kubernetes verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`) and HTTP status code (`error` when no response came) |
//!
//! Handlers are labelled by their id: change, event, daemon, timer, index and login handlers
//! are counted (startup, cleanup and probe activities are not). Resources are labelled as in
//! the logs (`kopfexamples.v1.kopf.dev`, `v1/pods`). Every API request of the operator goes
//! through one client layer (the one that also logs in again on `401`), so the requests of
//! handlers through their `client` argument are counted too; a request retried after a
//! re-login counts twice.
//! Each operator has its own counters, so two operators in one process do not mix them.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HandlerLabels {
    handler: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    handler: String,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabels {
    resource: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    resource: String,
    r#type: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: &'static str,
    code: String,
}

type Durations = Family<HandlerLabels, Histogram, fn() -> Histogram>;

/// How a handler attempt ended, as counted (an attempt aborted by the operator's stop is not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// It succeeded.
    Success,
    /// It failed temporarily and will be tried again.
    Retry,
    /// It failed for good.
    Failure,
}

/// The metrics of one operator; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Metrics(Arc<Series>);

#[derive(Debug)]
struct Series {
    registry: Registry,
    invocations: Family<OutcomeLabels, Counter>,
    errors: Family<HandlerLabels, Counter>,
    retries: Family<HandlerLabels, Counter>,
    durations: Durations,
    events: Family<EventLabels, Counter>,
    watch_starts: Family<ResourceLabels, Counter>,
    workers: Family<ResourceLabels, Gauge>,
    queue_depth: Family<ResourceLabels, Gauge>,
    in_flight: Gauge,
    in_flight_peak: Gauge,
    api_requests: Family<RequestLabels, Counter>,
}

fn durations() -> Histogram {
    // 5 ms to about 80 s.
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

impl Metrics {
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::with_prefix("kopf");
        let invocations = Family::<OutcomeLabels, Counter>::default();
        let errors = Family::<HandlerLabels, Counter>::default();
        let retries = Family::<HandlerLabels, Counter>::default();
        let durations = Durations::new_with_constructor(durations);
        let events = Family::<EventLabels, Counter>::default();
        let watch_starts = Family::<ResourceLabels, Counter>::default();
        let workers = Family::<ResourceLabels, Gauge>::default();
        let queue_depth = Family::<ResourceLabels, Gauge>::default();
        let in_flight = Gauge::default();
        let in_flight_peak = Gauge::default();
        let api_requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "handler_invocations",
            "Handler attempts by outcome (success, retry, failure)",
            invocations.clone(),
        );
        registry.register(
            "handler_errors",
            "Handler attempts that failed",
            errors.clone(),
        );
        registry.register(
            "handler_retries",
            "Handler attempts that were retries",
            retries.clone(),
        );
        registry.register_with_unit(
            "handler_duration",
            "How long handler attempts took",
            Unit::Seconds,
            durations.clone(),
        );
        registry.register(
            "watch_events",
            "Objects received from lists and watches, by event type",
            events.clone(),
        );
        registry.register(
            "watch_starts",
            "Watch streams opened (the first and every reconnect)",
            watch_starts.clone(),
        );
        registry.register("workers", "Per-object workers alive", workers.clone());
        registry.register(
            "queue_depth",
            "Events waiting for their object's worker",
            queue_depth.clone(),
        );
        registry.register(
            "in_flight",
            "Objects' states read from the watches and not yet done with",
            in_flight.clone(),
        );
        registry.register(
            "in_flight_peak",
            "The most objects' states in flight at once",
            in_flight_peak.clone(),
        );
        registry.register(
            "api_requests",
            "Requests to the API server by verb and HTTP status code",
            api_requests.clone(),
        );
        Metrics(Arc::new(Series {
            registry,
            invocations,
            errors,
            retries,
            durations,
            events,
            watch_starts,
            workers,
            queue_depth,
            in_flight,
            in_flight_peak,
            api_requests,
        }))
    }

    /// Counts one handler attempt (`retry`: the failed attempts before it).
    pub(crate) fn handled(&self, handler: &str, retry: u32, ended: Ended, took: Duration) {
        let outcome = match ended {
            Ended::Success => "success",
            Ended::Retry => "retry",
            Ended::Failure => "failure",
        };
        let labels = HandlerLabels {
            handler: handler.to_string(),
        };
        self.0
            .invocations
            .get_or_create(&OutcomeLabels {
                handler: handler.to_string(),
                outcome,
            })
            .inc();
        if outcome != "success" {
            self.0.errors.get_or_create(&labels).inc();
        }
        if retry > 0 {
            self.0.retries.get_or_create(&labels).inc();
        }
        self.0
            .durations
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// Counts one request to the API server and, for a watch, the start of its stream.
    pub(crate) fn requested(&self, request: &RequestKind, code: Option<StatusCode>) {
        let code = code.map_or_else(|| "error".to_string(), |c| c.as_u16().to_string());
        self.0
            .api_requests
            .get_or_create(&RequestLabels {
                verb: request.verb,
                code,
            })
            .inc();
        if let (Some(resource), "watch") = (&request.resource, request.verb) {
            self.0
                .watch_starts
                .get_or_create(&ResourceLabels {
                    resource: resource.clone(),
                })
                .inc();
        }
    }

    /// The operator's states in flight, and their peak.
    pub(crate) fn in_flight(&self) -> (Gauge, Gauge) {
        (self.0.in_flight.clone(), self.0.in_flight_peak.clone())
    }

    /// The series of one served resource, resolved once.
    pub(crate) fn resource(&self, resource: &str) -> ResourceMetrics {
        let labels = ResourceLabels {
            resource: resource.to_string(),
        };
        let event = |r#type| {
            self.0.events.get_or_create_owned(&EventLabels {
                resource: resource.to_string(),
                r#type,
            })
        };
        ResourceMetrics {
            listed: event("LISTED"),
            added: event("ADDED"),
            modified: event("MODIFIED"),
            deleted: event("DELETED"),
            workers: self.0.workers.get_or_create_owned(&labels),
            queue_depth: self.0.queue_depth.get_or_create_owned(&labels),
        }
    }

    /// Everything, in the OpenMetrics text format.
    pub(crate) fn encode(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.0.registry);
        text
    }
}

/// The series of one served resource.
#[derive(Debug, Clone)]
pub(crate) struct ResourceMetrics {
    listed: Counter,
    added: Counter,
    modified: Counter,
    deleted: Counter,
    /// Per-object workers alive, at rest or not (until their idle timeout ends them).
    pub(crate) workers: Gauge,
    /// Events waiting for their worker.
    pub(crate) queue_depth: Gauge,
}

impl ResourceMetrics {
    /// Counts an object received: from a listing (`None`) or a watch event of this type.
    pub(crate) fn received(&self, event_type: Option<&str>) {
        match event_type {
            None => self.listed.inc(),
            Some("ADDED") => self.added.inc(),
            Some("MODIFIED") => self.modified.inc(),
            Some(_) => self.deleted.inc(),
        };
    }
}

/// What a request to the API server is, for the metrics: its Kubernetes verb and resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestKind {
    pub(crate) verb: &'static str,
    /// `plural.version.group` or `version/plural`, as `Resource` displays it; `None` for
    /// discovery and other non-resource paths.
    pub(crate) resource: Option<String>,
}

impl RequestKind {
    /// Reads the verb and resource from the method, path and query, as the API server does.
    pub(crate) fn of(method: &Method, path: &str, query: Option<&str>) -> RequestKind {
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (group, version, rest) = match segments.as_slice() {
            ["api", version, rest @ ..] => ("", *version, rest),
            ["apis", group, version, rest @ ..] => (*group, *version, rest),
            _ => ("", "", &[][..]),
        };
        let rest = match rest {
            ["namespaces", _, rest @ ..] if !rest.is_empty() => rest,
            rest => rest,
        };
        let resource = rest.first().map(|plural| {
            if group.is_empty() {
                format!("{version}/{plural}")
            } else {
                format!("{plural}.{version}.{group}")
            }
        });
        let collection = rest.len() == 1;
        let watching = query.is_some_and(|q| {
            q.split('&')
                .any(|pair| pair == "watch=true" || pair == "watch=1")
        });
        let verb = match *method {
            Method::GET if watching => "watch",
            Method::GET if collection => "list",
            Method::GET => "get",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE if collection => "deletecollection",
            Method::DELETE => "delete",
            _ => "other",
        };
        RequestKind { verb, resource }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_named_as_the_api_server_names_them() {
        let kind = |method: Method, path: &str, query: Option<&str>| {
            let kind = RequestKind::of(&method, path, query);
            (kind.verb, kind.resource)
        };
        let examples = Some("kopfexamples.v1.kopf.dev".to_string());
        let collection = "/apis/kopf.dev/v1/namespaces/default/kopfexamples";
        assert_eq!(
            kind(Method::GET, collection, None),
            ("list", examples.clone())
        );
        assert_eq!(
            kind(
                Method::GET,
                collection,
                Some("watch=true&resourceVersion=1")
            ),
            ("watch", examples.clone())
        );
        assert_eq!(
            kind(Method::PATCH, &format!("{collection}/x/status"), None),
            ("patch", examples.clone())
        );
        assert_eq!(
            kind(Method::GET, "/apis/kopf.dev/v1/kopfexamples", None),
            ("list", examples)
        );
        assert_eq!(
            kind(Method::GET, "/api/v1/namespaces", None),
            ("list", Some("v1/namespaces".into()))
        );
        assert_eq!(
            kind(Method::GET, "/api/v1/namespaces/default", None),
            ("get", Some("v1/namespaces".into()))
        );
        assert_eq!(
            kind(Method::POST, "/api/v1/namespaces/default/events", None),
            ("create", Some("v1/events".into()))
        );
        assert_eq!(kind(Method::GET, "/apis", None), ("get", None));
        assert_eq!(kind(Method::GET, "/apis/kopf.dev/v1", None), ("get", None));
    }

    #[test]
    fn counts_are_encoded_by_label() {
        let metrics = Metrics::new();
        metrics.handled("create_fn", 0, Ended::Success, Duration::from_millis(1));
        metrics.handled("create_fn", 0, Ended::Retry, Duration::from_millis(1));
        metrics.handled("create_fn", 1, Ended::Success, Duration::from_millis(1));
        metrics.requested(
            &RequestKind::of(&Method::GET, "/api/v1/pods", Some("watch=true")),
            Some(StatusCode::OK),
        );
        let text = metrics.encode();
        for line in [
            r#"kopf_handler_invocations_total{handler="create_fn",outcome="success"} 2"#,
            r#"kopf_handler_invocations_total{handler="create_fn",outcome="retry"} 1"#,
            r#"kopf_handler_errors_total{handler="create_fn"} 1"#,
            r#"kopf_handler_retries_total{handler="create_fn"} 1"#,
            r#"kopf_handler_duration_seconds_count{handler="create_fn"} 3"#,
            r#"kopf_api_requests_total{verb="watch",code="200"} 1"#,
            r#"kopf_watch_starts_total{resource="v1/pods"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
    }
}
