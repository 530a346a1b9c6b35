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

use crate::actions::invocation::{Invocation, SubHandlers};
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
