//! Sub-handlers: handlers that a change handler registers while it runs (Kopf's
//! `@kopf.subhandler`), each with a progress record of its own under the id `parent/child`.
//!
//! ```
//! # use kopf::{ChangeHandler, Registry, Selector};
//! let registry = Registry::new().with(ChangeHandler::on_create(
//!     Selector::new("kopf.dev", "v1", "kopfexamples"),
//!     "create_fn",
//!     |invocation| async move {
//!         for item in ["a", "b"] {
//!             // Progress of `create_fn/item-a` and `create_fn/item-b` is kept on the object.
//!             invocation.subhandlers().add(format!("item-{item}"), move |child| async move {
//!                 child.logger().info(format_args!("handling {item}"));
//!                 Ok(None)
//!             });
//!         }
//!         Ok(None)
//!     },
//! ));
//! ```
//!
//! As in Kopf, the parent function runs again on every processing cycle until all of its
//! sub-handlers have finished, and registers them again each time: a sub-handler that finished
//! (its record says so) is not called again, the others run in the operator's lifecycle order,
//! each retried on its own. The parent's record lists them in `subrefs`; the parent finishes
//! when all of them have: successfully if they all succeeded, as a permanent failure naming
//! those that failed otherwise. Results of sub-handlers go to `status.<parent>/<child>`.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};

use crate::actions::handlers::{HandlerFn, HandlerResult, Invocation, Options, boxed, option_setters};
use crate::helpers::sync::lock;

/// The sub-handlers registered by one call of a handler:
/// [`Invocation::subhandlers`](crate::Invocation::subhandlers), or a `subhandlers:
/// &kopf::SubHandlers` argument of an attributed handler.
#[derive(Clone, Default)]
pub struct SubHandlers(Arc<Mutex<Vec<SubHandler>>>);

impl SubHandlers {
    /// Registers a sub-handler with default options; its id is `<parent id>/<id>`.
    pub fn add<F, Fut>(&self, id: impl Into<String>, function: F)
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        self.register(SubHandler::new(id, function));
    }

    /// Registers a sub-handler with options of its own (`retries`, `timeout`, `backoff`,
    /// `errors`, `param`, filters).
    pub fn register(&self, handler: SubHandler) {
        let mut handlers = lock(&self.0);
        match handlers.iter_mut().find(|h| h.id == handler.id) {
            Some(existing) => *existing = handler,
            None => handlers.push(handler),
        }
    }

    /// Whether none is registered.
    pub(crate) fn is_empty(&self) -> bool {
        lock(&self.0).is_empty()
    }

    /// Takes the registered sub-handlers, in registration order.
    pub(crate) fn take(&self) -> Vec<SubHandler> {
        std::mem::take(&mut *lock(&self.0))
    }
}

impl fmt::Debug for SubHandlers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<String> = lock(&self.0).iter().map(|h| h.id.clone()).collect();
        f.debug_tuple("SubHandlers").field(&ids).finish()
    }
}

/// A sub-handler with its options, for [`SubHandlers::register`].
#[derive(Clone)]
pub struct SubHandler {
    pub(crate) id: String,
    pub(crate) function: HandlerFn,
    pub(crate) options: Options,
}

impl SubHandler {
    /// A sub-handler; its id is relative to its parent's.
    pub fn new<F, Fut>(id: impl Into<String>, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        SubHandler {
            id: id.into(),
            function: boxed(function),
            options: Options::default(),
        }
    }

    option_setters!();
}

impl fmt::Debug for SubHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubHandler")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
