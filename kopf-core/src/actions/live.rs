//! Live views for daemons and timers: what Kopf gives them as `body`, `spec`, `meta` and
//! `status`, views that follow the object's watch events, so that a daemon's loop reads the
//! newest state the operator has seen without a new attempt.
//!
//! The object's worker shows each state it processes to the object's
//! [`Newest`](crate::actions::newest::Newest); a [`Live`] reads it, deserialized on demand into
//! the handler's type, and waits for a change of its part ([`Live::changed`]). No lock is held
//! while a deserialization or user code runs.

use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::actions::invocation::Invocation;
use crate::actions::newest::Newest;
use crate::helpers::sync::lock;
use crate::structs::bodies::Body;
use crate::structs::errors::{PermanentError, Result};

/// Which part of the object a view shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Body,
    Spec,
    Meta,
    Status,
    Labels,
    Annotations,
}

impl Part {
    fn name(self) -> &'static str {
        match self {
            Part::Body => "body",
            Part::Spec => "spec",
            Part::Meta => "meta",
            Part::Status => "status",
            Part::Labels => "labels",
            Part::Annotations => "annotations",
        }
    }

    /// The part of a state of the object; absent labels and annotations are empty maps,
    /// as for the snapshot arguments.
    fn of<'a>(self, body: &'a Body) -> std::borrow::Cow<'a, Value> {
        use std::borrow::Cow;
        let part = match self {
            Part::Body => return Cow::Borrowed(body.whole()),
            Part::Meta => return Cow::Borrowed(&body.whole()["metadata"]),
            Part::Spec => &body["spec"],
            Part::Status => &body["status"],
            Part::Labels => &body["metadata"]["labels"],
            Part::Annotations => &body["metadata"]["annotations"],
        };
        match (self, part) {
            (Part::Labels | Part::Annotations, Value::Null) => {
                Cow::Owned(Value::Object(Map::new()))
            }
            _ => Cow::Borrowed(part),
        }
    }

    /// Whether this part differs between two states.
    fn differs(self, seen: &Arc<Body>, newest: &Arc<Body>) -> bool {
        !Arc::ptr_eq(seen, newest) && self.of(seen) != self.of(newest)
    }
}

/// A live view of a part of the object a daemon or timer serves (Kopf's live `body`, `spec`,
/// `meta`, `status` of daemons): each read gives the newest state the operator has seen,
/// deserialized into `T` on demand, without a new attempt of the handler.
///
/// Ask for one by its argument's name and type, in a `#[kopf::daemon]` or `#[kopf::timer]`:
/// `spec: kopf::Live<MySpec>`, `status: kopf::Live` (a `serde_json::Value`), `body`, `meta`,
/// `labels`, `annotations`. The same names with other types (`spec: MySpec`, `spec: &Value`)
/// stay snapshots: the state when the attempt started.
///
/// ```
/// use serde::Deserialize;
/// use std::time::Duration;
///
/// #[derive(Deserialize)]
/// struct Spec {
///     interval: u64,
/// }
///
/// #[kopf::daemon("kopf.dev", "v1", "kopfexamples")]
/// async fn poller(spec: kopf::Live<Spec>, stopped: kopf::Stopped) -> kopf::Result<()> {
///     while !stopped.is_cancelled() {
///         // The newest spec: a change made while the daemon runs is seen here.
///         let interval = spec.get()?.interval;
///         // ... poll something ...
///         tokio::select! {
///             _ = stopped.cancelled() => {}
///             _ = spec.changed() => {}
///             _ = tokio::time::sleep(Duration::from_secs(interval)) => {}
///         }
///     }
///     Ok(())
/// }
/// ```
///
/// A state that does not fit `T` is an error of [`get`](Self::get) (a
/// [`PermanentError`](crate::PermanentError) naming the part and the type), never a panic:
/// the daemon decides whether to return it, or to wait for the next change.
pub struct Live<T = Value> {
    newest: Arc<Newest>,
    part: Part,
    /// The state this view last returned or waited past: [`Live::changed`] waits for another.
    seen: Mutex<Arc<Body>>,
    _type: PhantomData<fn() -> T>,
}

impl<T> Live<T> {
    fn of(invocation: &Invocation, part: Part) -> Result<Live<T>> {
        let newest = invocation.live.clone().ok_or_else(|| {
            PermanentError::new(format!(
                "a live `{}` is given only to daemons and timers: take a snapshot (`{}: serde_json::Value` or a type of yours) instead",
                part.name(),
                part.name()
            ))
        })?;
        Ok(Live {
            seen: Mutex::new(invocation.body.clone()),
            newest,
            part,
            _type: PhantomData,
        })
    }

    /// A live view of the whole object (`metadata.managedFields` included).
    pub fn body(invocation: &Invocation) -> Result<Live<T>> {
        Live::of(invocation, Part::Body)
    }

    /// A live view of the object's `spec` (`null` when absent).
    pub fn spec(invocation: &Invocation) -> Result<Live<T>> {
        Live::of(invocation, Part::Spec)
    }

    /// A live view of the object's `metadata`.
    pub fn meta(invocation: &Invocation) -> Result<Live<T>> {
        Live::of(invocation, Part::Meta)
    }

    /// A live view of the object's `status` (`null` when absent).
    pub fn status(invocation: &Invocation) -> Result<Live<T>> {
        Live::of(invocation, Part::Status)
    }

    /// A live view of the object's labels (an empty map when absent).
    pub fn labels(invocation: &Invocation) -> Result<Live<T>> {
        Live::of(invocation, Part::Labels)
    }

    /// A live view of the object's annotations (an empty map when absent).
    pub fn annotations(invocation: &Invocation) -> Result<Live<T>> {
        Live::of(invocation, Part::Annotations)
    }

    /// Reads the newest state of the part as it is, without deserializing or copying it.
    /// `f` runs on a state that no lock holds: it may take its time.
    pub fn read<R>(&self, f: impl FnOnce(&Value) -> R) -> R {
        let newest = self.newest.body();
        let result = f(&self.part.of(&newest));
        *lock(&self.seen) = newest;
        result
    }

    /// Waits until the part differs from the state this view last returned (from
    /// [`get`](Self::get), [`read`](Self::read) or a `changed` before; at first, the state
    /// when the attempt started). Changes of other parts (a `status` written meanwhile, for a
    /// view of the `spec`) do not end the wait. It never ends once the object is gone: wait
    /// for `stopped` too.
    ///
    /// # Cancellation safety
    ///
    /// Cancel-safe: dropped before it resolves, it has marked nothing as seen, and the next
    /// call sees the same change.
    pub async fn changed(&self) {
        loop {
            // Registered before the state is read: a state shown between the two wakes it.
            let notify = self.newest.shown();
            let mut shown = std::pin::pin!(notify.notified());
            shown.as_mut().enable();
            let newest = self.newest.body();
            {
                let mut seen = lock(&self.seen);
                if self.part.differs(&seen, &newest) {
                    *seen = newest;
                    return;
                }
            }
            shown.await;
        }
    }
}

impl<T: DeserializeOwned> Live<T> {
    /// The newest state of the part, deserialized into `T`. A state that does not fit is a
    /// [`PermanentError`](crate::PermanentError) naming the part and the type.
    pub fn get(&self) -> Result<T> {
        self.read(|value| {
            T::deserialize(value).map_err(|error| {
                PermanentError::new(format!(
                    "the live `{}` does not fit {}: {error}",
                    self.part.name(),
                    std::any::type_name::<T>()
                ))
                .into()
            })
        })
    }
}

impl<T> Clone for Live<T> {
    fn clone(&self) -> Self {
        Live {
            newest: self.newest.clone(),
            part: self.part,
            seen: Mutex::new(lock(&self.seen).clone()),
            _type: PhantomData,
        }
    }
}

impl<T> fmt::Debug for Live<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Live")
            .field("part", &self.part.name())
            .field("type", &std::any::type_name::<T>())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn body(value: Value) -> Arc<Body> {
        Arc::new(Body::from(value))
    }

    fn view<T>(newest: &Arc<Newest>, part: Part) -> Live<T> {
        Live {
            newest: newest.clone(),
            part,
            seen: Mutex::new(newest.body()),
            _type: PhantomData,
        }
    }

    #[test]
    fn a_view_reads_the_newest_state_of_its_part() {
        let newest = Arc::new(Newest::new(body(json!({"spec": {"size": 1}}))));
        let spec: Live<Value> = view(&newest, Part::Spec);
        let labels: Live<std::collections::BTreeMap<String, String>> = view(&newest, Part::Labels);
        assert_eq!(spec.get().unwrap(), json!({"size": 1}));
        assert!(labels.get().unwrap().is_empty(), "absent labels are empty");
        newest.show(&body(
            json!({"spec": {"size": 2}, "metadata": {"labels": {"a": "b"}}}),
        ));
        assert_eq!(spec.read(|spec| spec["size"].clone()), json!(2));
        assert_eq!(labels.get().unwrap()["a"], "b");
    }

    #[test]
    fn a_state_that_does_not_fit_is_a_permanent_error_not_a_panic() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code, reason = "only deserialized")]
        struct Spec {
            size: u32,
        }
        let newest = Arc::new(Newest::new(body(json!({"spec": {"size": "big"}}))));
        let spec: Live<Spec> = view(&newest, Part::Spec);
        let error = spec.get().unwrap_err();
        assert!(error.is_permanent());
        assert!(
            error
                .to_string()
                .starts_with("the live `spec` does not fit "),
            "{error}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn changed_waits_for_a_change_of_its_own_part() {
        let newest = Arc::new(Newest::new(body(json!({"spec": {"size": 1}}))));
        let spec: Live<Value> = view(&newest, Part::Spec);
        let waiting = spec.changed();
        tokio::pin!(waiting);
        // A change of the status alone is not a change of the spec.
        newest.show(&body(json!({"spec": {"size": 1}, "status": {"x": 1}})));
        let timeout = tokio::time::timeout(Duration::from_secs(1), &mut waiting).await;
        assert!(timeout.is_err(), "no change of the spec yet");
        newest.show(&body(json!({"spec": {"size": 2}})));
        tokio::time::timeout(Duration::from_secs(1), &mut waiting)
            .await
            .expect("the change of the spec ends the wait");
        // Seen now: the next wait waits for another change.
        let again = tokio::time::timeout(Duration::from_secs(1), spec.changed()).await;
        assert!(again.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_before_the_wait_is_not_missed() {
        let newest = Arc::new(Newest::new(body(json!({"spec": {"size": 1}}))));
        let spec: Live<Value> = view(&newest, Part::Spec);
        newest.show(&body(json!({"spec": {"size": 2}})));
        tokio::time::timeout(Duration::from_secs(1), spec.changed())
            .await
            .expect("a change shown before the wait began ends it at once");
    }
}
