//! Kopf's free functions for events ([`info`](crate::info), [`warn`](crate::warn),
//! [`exception`](crate::exception), [`event`](crate::event)): Kubernetes Events about any
//! object, posted from anywhere in the operator, as Kopf's (whose context variables every
//! task of the operator inherits).
//!
//! Invariants:
//! 1. Within a handler (see `current`), they post through the operator running it.
//! 2. Anywhere else (a startup handler, a task or thread that a handler or the program
//!    started), through the operator running on the caller's tokio runtime, or, off any
//!    runtime, the only operator running in the process (`clients/posting/poster.rs`,
//!    `running`). Where none runs, or several run and which one is meant cannot be told,
//!    they post nothing, and say so once in the logs.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use crate::actions::current::Current;
use crate::clients::posting::Events;
use crate::clients::posting::poster::running::{self, Found};

/// Posts an event of type `Normal` about an object, through the operator running the
/// current handler (Kopf's `kopf.info`).
///
/// The object is anything that serializes to a Kubernetes object: a body as JSON (the
/// handler's own, or another's), a `k8s_openapi` type, a `kube::CustomResource` type; a JSON
/// array posts one event about each of its items. The event refers to the object by its
/// `apiVersion`, `kind`, `name`, `uid` and `namespace`; the message is cut to 1024 characters
/// as Kopf cuts it. Events about core `v1` Events are never posted.
///
/// Like [`Events::info`] (of which it is the free-standing form), it posts only when the
/// settings let it ([`PostingSettings::enabled`](crate::settings::PostingSettings::enabled), and
/// [`PostingSettings::level`](crate::settings::PostingSettings::level) at INFO or
/// more verbose), never waits, and never fails the handler.
///
/// **From anywhere in the operator**: within a handler, through the operator running it;
/// elsewhere (a startup handler, a task it started, a thread of the program's own), through
/// the operator running on the same tokio runtime, or the only one running in the process.
/// Where no operator runs (or several run on one runtime, and which one is meant cannot be
/// told), it posts nothing and warns once in the logs; there, take `invocation.events()`
/// along and post through it.
///
/// ```
/// # fn handler(invocation: kopf::Invocation) -> kopf::registry::HandlerResult {
/// use k8s_openapi::api::core::v1::ConfigMap;
///
/// kopf::info(invocation.body(), "Created", "the database is ready");
/// let child = ConfigMap {
///     metadata: kube::api::ObjectMeta {
///         name: Some("settings".into()),
///         namespace: Some("default".into()),
///         ..Default::default()
///     },
///     ..Default::default()
/// };
/// kopf::info(&child, "Adopted", format_args!("by {}", invocation.name()));
/// # Ok(None)
/// # }
/// ```
pub fn info<O: serde::Serialize + ?Sized>(object: &O, reason: &str, message: impl fmt::Display) {
    for_each_about("info", object, |events| events.info(reason, &message));
}

/// Posts an event of type `Warning` about an object, through the operator running the
/// current handler (Kopf's `kopf.warn`); as [`info`](crate::info) does, but at level WARN.
///
/// ```
/// # fn handler(invocation: kopf::Invocation) -> kopf::registry::HandlerResult {
/// if invocation.spec()["replicas"].as_u64() > Some(10) {
///     kopf::warn(invocation.body(), "TooMany", "more than 10 replicas requested");
/// }
/// # Ok(None)
/// # }
/// ```
pub fn warn<O: serde::Serialize + ?Sized>(object: &O, reason: &str, message: impl fmt::Display) {
    for_each_about("warn", object, |events| events.warn(reason, &message));
}

/// Posts an event of type `Error` about an object with the error as its message, through the
/// operator running the current handler (Kopf's `kopf.exception`); as [`info`](crate::info)
/// does, but at level ERROR.
///
/// ```
/// # fn handler(invocation: kopf::Invocation) -> kopf::registry::HandlerResult {
/// if let Err(error) = "many".parse::<u32>() {
///     kopf::exception(invocation.body(), "InvalidSize", &error);
/// }
/// # Ok(None)
/// # }
/// ```
pub fn exception<O: serde::Serialize + ?Sized>(object: &O, reason: &str, error: impl fmt::Display) {
    for_each_about("exception", object, |events| {
        events.exception(reason, &error);
    });
}

/// Posts an event of any type (`Normal`, `Warning`, ...) about an object, through the
/// operator running the current handler (Kopf's `kopf.event`); as [`info`](crate::info) does,
/// but whatever the level setting.
///
/// ```
/// # fn handler(invocation: kopf::Invocation) -> kopf::registry::HandlerResult {
/// kopf::event(invocation.body(), "Normal", "Scaled", "to 3 replicas");
/// # Ok(None)
/// # }
/// ```
pub fn event<O: serde::Serialize + ?Sized>(
    object: &O,
    kind: &str,
    reason: &str,
    message: impl fmt::Display,
) {
    for_each_about("event", object, |events| {
        events.event(kind, reason, &message);
    });
}

/// Posts through the current handler's operator (or the operator running here) about the
/// object, or each item of an array.
fn for_each_about<O: serde::Serialize + ?Sized>(
    function: &str,
    object: &O,
    post: impl Fn(&Events),
) {
    let about = |events: &dyn Fn(&Value) -> Events, enabled: bool| {
        if !enabled {
            return; // Posting is disabled: no need to look at the object.
        }
        match serde_json::to_value(object) {
            Ok(Value::Array(items)) => {
                for item in &items {
                    post(&events(item));
                }
            }
            Ok(body) => post(&events(&body)),
            Err(error) => {
                tracing::warn!(target: "kopf::posting", %error, "kopf::{function}() posted nothing: the object does not serialize to JSON");
            }
        }
    };
    let posted = Current::with(|current| {
        about(
            &|body| current.events.about_body(body),
            current.events.enabled(),
        );
    });
    if posted.is_some() {
        return;
    }
    match running::find() {
        Found::One(poster) => about(&|body| poster.about(body), poster.enabled()),
        Found::None => warn_once(format_args!(
            "kopf::{function}() was called where no operator runs (not in a handler, nor on the runtime of a running operator), so nothing was posted; post through `invocation.events()` taken along (this warning is logged once)"
        )),
        Found::Several(count) => warn_once(format_args!(
            "kopf::{function}() was called outside of a handler where {count} operators run, so nothing was posted: which one should post cannot be told; post through `invocation.events()` taken along (this warning is logged once)"
        )),
    }
}

/// Warns the first time, then only at DEBUG: a program that posts outside of any operator
/// does so on every call.
fn warn_once(message: fmt::Arguments<'_>) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if WARNED.swap(true, Ordering::Relaxed) {
        tracing::debug!(target: "kopf::posting", "{message}");
    } else {
        tracing::warn!(target: "kopf::posting", "{message}");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use tokio::sync::mpsc;
    use tracing::Level;

    use super::*;
    use crate::clients::posting::poster::Queued;
    use crate::clients::posting::{drain, test_poster};
    use crate::structs::resources::Resource;

    /// A poster whose queue the test reads, and a handler's context about a KopfExample
    /// listed without apiVersion and kind.
    fn handler(level: Level) -> (Current, mpsc::UnboundedReceiver<Queued>) {
        let (poster, receiver) = test_poster(level);
        let resource = Resource::kopf_examples();
        let body = json!({"metadata": {"name": "one", "namespace": "ns", "uid": "u1"}});
        let body = Arc::new(crate::structs::bodies::Body::from(body));
        let current = Current {
            events: poster.events(&body, &resource),
            body,
            subhandlers: None,
        };
        (current, receiver)
    }

    #[tokio::test]
    async fn the_free_functions_post_through_the_current_handlers_operator() {
        let (current, mut queue) = handler(Level::INFO);
        let own = current.body.clone();
        current
            .clone()
            .enter(|| async move {
                info(own.value(), "Created", "own");
                let child = k8s_openapi::api::core::v1::ConfigMap {
                    metadata: kube::api::ObjectMeta {
                        name: Some("child".into()),
                        namespace: Some("ns".into()),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                warn(&child, "Adopted", format_args!("by {}", 1));
                let many = json!([
                    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}},
                    {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}},
                ]);
                exception(&many, "Failed", "boom".parse::<u32>().unwrap_err());
                event(own.value(), "Custom", "Any", "whatever");
                tokio::task::yield_now().await;
            })
            .await;
        let own = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "name": "one", "uid": "u1", "namespace": "ns"});
        assert_eq!(
            drain(&mut queue),
            vec![
                json!({"object": own, "type": "Normal", "reason": "Created", "message": "own"}),
                json!({"object": {"apiVersion": "v1", "kind": "ConfigMap", "name": "child", "namespace": "ns"}, "type": "Warning", "reason": "Adopted", "message": "by 1"}),
                json!({"object": {"apiVersion": "v1", "kind": "Pod", "name": "a"}, "type": "Error", "reason": "Failed", "message": "invalid digit found in string"}),
                json!({"object": own, "type": "Custom", "reason": "Any", "message": "whatever"}),
            ],
            "the own object referred to as its resource says, nothing about the Event"
        );

        info(current.body.value(), "Outside", "not posted, not a panic");
        warn(current.body.value(), "Outside", "not posted, not a panic");
        assert_eq!(drain(&mut queue), Vec::<Value>::new());
    }

    #[test]
    fn the_free_functions_obey_the_level_on_sync_handlers_threads() {
        let (current, mut queue) = handler(Level::WARN);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                current.clone().enter_sync(|| {
                    let own = current.body.value();
                    info(own, "Info", "below the level");
                    warn(own, "Warn", "at the level");
                    exception(own, "Error", "above the level");
                    event(own, "Normal", "Event", "whatever the level");
                });
            });
        });
        let reasons: Vec<Value> = drain(&mut queue)
            .iter()
            .map(|e| e["reason"].clone())
            .collect();
        assert_eq!(reasons, [json!("Warn"), json!("Error"), json!("Event")]);
    }
}
