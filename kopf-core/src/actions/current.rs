//! The handler running now, for the toolkits' free functions (`kopf::info`,
//! `kopf::hierarchies::adopt_to_current`, ...) that act on its behalf, as Kopf's context variables
//! do.
//!
//! Invariants:
//! 1. The context is set only around a handler's attempt: its call and every poll of its
//!    future ([`Current::enter`]), and, for a sync handler, its run on an operator thread
//!    ([`Current::enter_sync`]). Nowhere else is there a current handler.
//! 2. It is not inherited by tasks or threads that a handler starts itself (tokio has no
//!    inheritance of task-locals); such code takes `invocation.events()` or the body along.

use std::future::Future;
use std::sync::Arc;

use crate::actions::invocation::{Invocation, SubHandler, SubHandlers};
use crate::clients::posting::Events;
use crate::structs::bodies::Body;

tokio::task_local! {
    static CURRENT: Current;
}

/// What the toolkits need of the handler running now.
#[derive(Clone)]
pub(crate) struct Current {
    /// Events about the handler's object, through its operator's poster.
    pub(crate) events: Events,
    /// The handler's object (Kopf's default owner).
    pub(crate) body: Arc<Body>,
    /// Where a change handler's sub-handlers go ([`register`](crate::register)); `None` for
    /// the other kinds of handlers, which have none.
    pub(crate) subhandlers: Option<SubHandlers>,
}

impl Current {
    /// The context of a handler about to be invoked.
    pub(crate) fn of(invocation: &Invocation) -> Current {
        // Only change handlers have sub-handlers: a reason, and no review under way.
        let changing = invocation.reason.is_some() && invocation.review.is_none();
        Current {
            events: invocation.events.clone(),
            body: invocation.body.clone(),
            subhandlers: changing.then(|| invocation.gathered.clone()),
        }
    }

    /// Starts a handler's attempt (`start` makes its future) and runs it as the current
    /// handler, including the synchronous part of the call.
    pub(crate) fn enter<F: Future>(
        self,
        start: impl FnOnce() -> F,
    ) -> impl Future<Output = F::Output> {
        let attempt = CURRENT.sync_scope(self.clone(), start);
        CURRENT.scope(self, attempt)
    }

    /// Runs a sync handler on this thread as the current handler.
    pub(crate) fn enter_sync<T>(self, run: impl FnOnce() -> T) -> T {
        CURRENT.sync_scope(self, run)
    }

    /// Calls `f` with the handler running now, if there is one on this task or thread.
    pub(crate) fn with<T>(f: impl FnOnce(&Current) -> T) -> Option<T> {
        CURRENT.try_with(f).ok()
    }
}

/// Registers a sub-handler of the change handler running now (Kopf's
/// `kopf.register(fn, id=...)`): the same as
/// [`SubHandlers::register`](crate::registry::SubHandlers::register) on its `subhandlers`, from anywhere in the handler's call,
/// without passing them along.
///
/// ```
/// # use kopf::registry::{ChangeHandler, Registry, SubHandler};
/// # use kopf::resources::Selector;
/// fn plan(items: &[&str]) -> Result<(), kopf::registry::NoChangeHandler> {
///     for item in items {
///         let item = item.to_string();
///         kopf::register(SubHandler::new(format!("item-{item}"), move |child| {
///             let item = item.clone();
///             async move {
///                 child.logger().info(format_args!("handling {item}"));
///                 Ok(None)
///             }
///         }))?;
///     }
///     Ok(())
/// }
///
/// let registry = Registry::new().with(ChangeHandler::on_create(
///     Selector::new("kopf.dev", "v1", "kopfexamples"),
///     "create_fn",
///     |_invocation| async move {
///         plan(&["a", "b"])?;
///         Ok(None)
///     },
/// ));
/// ```
///
/// # Errors
///
/// [`NoChangeHandler`] where no change handler is running on this task or thread (Kopf's
/// `LookupError`): outside of handlers, in tasks or threads a handler started, or in other
/// kinds of handlers (events, daemons, timers, admission), which have no sub-handlers.
pub fn register(handler: SubHandler) -> Result<(), NoChangeHandler> {
    let subhandlers = Current::with(|current| current.subhandlers.clone())
        .flatten()
        .ok_or(NoChangeHandler)?;
    subhandlers.register(handler);
    Ok(())
}

/// [`register`](crate::register), [`execute`](crate::execute) or
/// [`SubHandlers::execute`](crate::registry::SubHandlers::execute) was called where no change
/// handler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "kopf::register(), kopf::execute() or subhandlers.execute() was called where no change \
     handler runs: sub-handlers belong to the create/update/delete/resume handler whose call \
     registers or executes them (not to tasks or threads it started, nor to event handlers, \
     daemons, timers or admission handlers); call them in the handler's call, or use \
     invocation.subhandlers()"
)]
pub struct NoChangeHandler;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::posting::Poster;
    use crate::structs::resources::Resource;

    fn current(name: &str) -> Current {
        let body = Arc::new(Body::from(serde_json::json!({"metadata": {"name": name}})));
        Current {
            events: Poster::disabled().events(&body, &Resource::default()),
            body,
            subhandlers: None,
        }
    }

    fn name() -> Option<String> {
        Current::with(|c| c.body["metadata"]["name"].as_str().map(String::from)).flatten()
    }

    #[tokio::test]
    async fn the_context_is_set_around_the_call_and_the_polls_only() {
        assert_eq!(name(), None);
        let running = current("one").enter(|| {
            let called = name();
            async move {
                tokio::task::yield_now().await;
                (called, name())
            }
        });
        assert_eq!(running.await, (Some("one".into()), Some("one".into())));
        assert_eq!(name(), None);
        let spawned =
            tokio::spawn(current("two").enter(|| async { tokio::spawn(async { name() }).await }));
        assert_eq!(
            spawned.await.unwrap().unwrap(),
            None,
            "tasks started by a handler do not inherit it"
        );
    }

    #[test]
    fn sync_handlers_see_it_on_their_thread() {
        let seen = std::thread::spawn(|| current("three").enter_sync(name))
            .join()
            .unwrap();
        assert_eq!(seen.as_deref(), Some("three"));
        assert_eq!(name(), None);
    }
}
