//! Sub-handlers run in place (Kopf's `kopf.execute()`): a change handler awaits them within
//! its own call, and goes on once all of them have finished. Either those it gives
//! ([`execute`](crate::execute), Kopf's `kopf.execute(fns=...)`), or those it registered so far
//! ([`SubHandlers::execute`], Kopf's `kopf.execute()` without arguments).
//!
//! Invariants:
//! 1. The way to run them is the one the caller of the change handler set for this call
//!    ([`InPlace`]); it is taken when [`execute`](crate::execute) is called, so a task or
//!    thread that the handler started cannot run sub-handlers on its behalf.
//! 2. Each sub-handler keeps its progress on the object under `parent/child`, as the
//!    sub-handlers that a call registers do: one that finished is not called again, and the
//!    parent is retried (not failed) while some are unfinished.
//! 3. The registered ones run in place at most once per call: the first
//!    [`SubHandlers::execute`] awaited takes them and marks the call's sub-handlers executed,
//!    so neither a second one nor the run after the call runs any (as Kopf's
//!    `subexecuted_var`).

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;

use crate::actions::current::{Current, NoChangeHandler};
use crate::actions::invocation::{InPlace, SubHandler, SubHandlers};
use crate::configs::lifecycles::Lifecycle;
use crate::structs::errors::Result;

/// Runs sub-handlers of the change handler running now, in place, and waits for them (Kopf's
/// `await kopf.execute(fns=..., handlers=..., lifecycle=...)`).
///
/// Each sub-handler gets a progress record of its own on the object, under the id
/// `<parent id>/<its id>`, and its own retries, as sub-handlers registered with
/// [`register`](crate::register) do; results go to `status.<parent id>/<its id>`. The due ones
/// run now, in the operator's lifecycle order (or [`Execution::lifecycle`]'s):
///
/// - once all of them have finished, it returns `Ok(())` and the handler goes on; as in
///   Kopf, also when some failed for good (their failures are logged, and their records say
///   so; a failed sub-handler does not fail its parent);
/// - while some are unfinished (retried later, after a temporary error), it returns an error
///   that, returned from the handler with `?`, makes the framework retry the handler when the
///   first of them is due (Kopf's `HandlerChildrenRetry`): no failure is logged, and on the
///   handler's next call, those that finished are not called again. The code before the
///   call runs again on every retry, as in Kopf.
///
/// ```
/// # use kopf::registry::{ChangeHandler, Registry, SubHandler};
/// # use kopf::resources::Selector;
/// # use serde_json::json;
/// let registry = Registry::new().with(ChangeHandler::on_create(
///     Selector::new("kopf.dev", "v1", "kopfexamples"),
///     "create_fn",
///     |invocation| async move {
///         let replicas = invocation.spec()["replicas"].as_u64().unwrap_or(1);
///         let children = (0..replicas).map(|i| {
///             SubHandler::new(format!("replica-{i}"), move |child| async move {
///                 child.logger().info(format_args!("creating replica {i}"));
///                 Ok(Some(json!({"replica": i})))
///             })
///         });
///         // Progress of `create_fn/replica-0`, ... is kept on the object.
///         kopf::execute(children).await?;
///         // Here, all of them have finished.
///         Ok(Some(json!({"message": format!("{replicas} replicas created")})))
///     },
/// ));
/// ```
///
/// Async handlers await it; a [sync handler](crate::registry::blocking) may block on it with
/// `tokio::runtime::Handle::block_on` (it is taken as the call is made, on the handler's
/// thread).
///
/// # Errors
///
/// Besides the retry above: where no change handler is running on this task or thread
/// (outside of handlers, in tasks or threads a handler started, in event handlers, daemons,
/// timers or admission handlers), an error that says so ([`NoChangeHandler`]'s); once the
/// handler's call has ended, an error that says that.
pub fn execute(handlers: impl IntoIterator<Item = SubHandler>) -> Execution {
    let in_place =
        Current::with(|current| current.subhandlers.as_ref().and_then(SubHandlers::in_place))
            .flatten();
    Execution {
        handlers: Handlers::Given(handlers.into_iter().collect()),
        lifecycle: None,
        in_place,
    }
}

impl SubHandlers {
    /// Runs the sub-handlers registered so far in this call, in place, and waits for them
    /// (Kopf's `await kopf.execute()` without arguments); none of them runs again after the
    /// call.
    ///
    /// They run as with [`kopf::execute`](crate::execute): each with its progress record
    /// under `<parent id>/<its id>` and its own retries, the due ones now (in the operator's
    /// lifecycle order, or [`Execution::lifecycle`]'s); `Ok(())` once all have finished
    /// (some may have failed for good), the children retry that `?` returns while some are
    /// unfinished. On the handler's retry, it registers them again and calls this again:
    /// those that finished are not called again.
    ///
    /// As in Kopf, they run in place once per call: a second call returns `Ok(())` at once,
    /// and a sub-handler registered after the first one does not run at all (the operator
    /// warns about it after the call): register them all before.
    ///
    /// A method of the sub-handlers rather than a free function beside
    /// [`kopf::execute`](crate::execute): it runs what was registered here, and a handler
    /// that registers them has them at hand (`subhandlers`, or
    /// [`Invocation::subhandlers`](crate::Invocation::subhandlers)).
    ///
    /// ```
    /// # use kopf::registry::{ChangeHandler, Registry};
    /// # use kopf::resources::Selector;
    /// # use serde_json::json;
    /// let registry = Registry::new().with(ChangeHandler::on_create(
    ///     Selector::new("kopf.dev", "v1", "kopfexamples"),
    ///     "create_fn",
    ///     |invocation| async move {
    ///         let subhandlers = invocation.subhandlers();
    ///         for item in ["a", "b"] {
    ///             subhandlers.add(format!("item-{item}"), move |_child| async move {
    ///                 Ok(Some(json!({"item": item})))
    ///             });
    ///         }
    ///         subhandlers.execute().await?;
    ///         // Here, `create_fn/item-a` and `create_fn/item-b` have finished.
    ///         Ok(Some(json!({"message": "all items done"})))
    ///     },
    /// ));
    /// ```
    ///
    /// # Errors
    ///
    /// As [`kopf::execute`](crate::execute)'s: the children retry; [`NoChangeHandler`]'s
    /// error where these are not the sub-handlers of a change handler's call (those of other
    /// kinds of handlers, or made by hand); once the handler's call has ended, an error that
    /// says that.
    pub fn execute(&self) -> Execution {
        Execution {
            handlers: Handlers::Registered(self.clone()),
            lifecycle: None,
            in_place: self.in_place(),
        }
    }
}

/// Sub-handlers to run in place, made by [`execute`](crate::execute) or
/// [`SubHandlers::execute`]: `.await` it.
#[must_use = "the sub-handlers run only when it is awaited"]
pub struct Execution {
    handlers: Handlers,
    lifecycle: Option<Lifecycle>,
    in_place: Option<Arc<dyn InPlace>>,
}

/// Which sub-handlers an [`Execution`] runs.
#[derive(Debug)]
enum Handlers {
    /// Those given to [`execute`](crate::execute).
    Given(Vec<SubHandler>),
    /// Those the call registered, taken when it is awaited ([`SubHandlers::execute`]).
    Registered(SubHandlers),
}

impl Execution {
    /// Runs them in this lifecycle's order instead of the operator's
    /// ([`ExecutionSettings::lifecycle`](crate::settings::ExecutionSettings::lifecycle)), as
    /// Kopf's `kopf.execute(lifecycle=...)`.
    ///
    /// ```
    /// # async fn handler(_: kopf::Invocation) -> kopf::registry::HandlerResult {
    /// # let children: Vec<kopf::registry::SubHandler> = Vec::new();
    /// kopf::execute(children)
    ///     .lifecycle(kopf::settings::Lifecycle::AllAtOnce)
    ///     .await?;
    /// # Ok(None)
    /// # }
    /// ```
    pub fn lifecycle(mut self, lifecycle: Lifecycle) -> Self {
        self.lifecycle = Some(lifecycle);
        self
    }
}

impl std::fmt::Debug for Execution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Execution")
            .field("handlers", &self.handlers)
            .field("lifecycle", &self.lifecycle)
            .field("in_a_change_handler", &self.in_place.is_some())
            .finish()
    }
}

impl IntoFuture for Execution {
    type Output = Result<()>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<()>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        let Some(in_place) = self.in_place else {
            return Box::pin(std::future::ready(Err(NoChangeHandler.into())));
        };
        let handlers = match self.handlers {
            Handlers::Given(handlers) => handlers,
            Handlers::Registered(registered) => match registered.take_to_execute() {
                Some(handlers) => handlers,
                None => return Box::pin(std::future::ready(Ok(()))),
            },
        };
        in_place.run(handlers, self.lifecycle)
    }
}
