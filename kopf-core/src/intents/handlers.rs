//! Change and event handlers: what they react to and their options. This is the plain
//! registration API; the attribute macros generate the same descriptors.
//!
//! ```
//! use kopf::registry::{ChangeHandler, Registry};
//! use kopf::resources::Selector;
//! let registry = Registry::new().with(
//!     ChangeHandler::on_create(Selector::new("kopf.dev", "v1", "kopfexamples"), "create_fn", |invocation| async move {
//!         let name = invocation.name().to_string();
//!         Ok(Some(serde_json::json!({"message": format!("created {name}")})))
//!     }),
//! );
//! ```

use std::fmt;
use std::future::Future;

use crate::actions::invocation::{
    HandlerFn, HandlerResult, Invocation, Options, boxed, field_setters, option_setters,
};
use crate::structs::filters::ValueFilter;
use crate::structs::resources::Selector;

/// Which causes a change handler reacts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// `on_resume`; with `deleted`, also for objects already being deleted.
    Resume {
        /// Also resume objects marked for deletion.
        deleted: bool,
    },
    /// `on_create`.
    Create,
    /// `on_update`.
    Update,
    /// `on_delete`; an `optional` one does not add the finalizer.
    Delete {
        /// Do not block deletion for this handler.
        optional: bool,
    },
    /// `on_field`: any change of the handler's `field`.
    Field,
}

/// A handler of object changes: `on_resume`, `on_create`, `on_update`, `on_delete`, `on_field`.
#[derive(Clone)]
pub struct ChangeHandler {
    pub(crate) id: String,
    pub(crate) trigger: Trigger,
    pub(crate) selector: Selector,
    pub(crate) function: HandlerFn,
    pub(crate) options: Options,
}

impl ChangeHandler {
    fn new<F, Fut>(trigger: Trigger, selector: Selector, id: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        ChangeHandler {
            id: id.into(),
            trigger,
            selector,
            function: boxed(function),
            options: Options::default(),
        }
    }

    /// Called for objects created since the operator last handled them.
    pub fn on_create<F, Fut>(selector: Selector, id: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        Self::new(Trigger::Create, selector, id, function)
    }

    /// Called when an object's essence (spec, labels, annotations) changed.
    pub fn on_update<F, Fut>(selector: Selector, id: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        Self::new(Trigger::Update, selector, id, function)
    }

    /// Called when an object is deleted; the operator's finalizer holds the object until this
    /// handler succeeds (unless [`optional`](Self::optional)).
    pub fn on_delete<F, Fut>(selector: Selector, id: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        Self::new(Trigger::Delete { optional: false }, selector, id, function)
    }

    /// Called for objects found when the operator starts, that it handled before.
    pub fn on_resume<F, Fut>(selector: Selector, id: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        Self::new(Trigger::Resume { deleted: false }, selector, id, function)
    }

    /// Called when the dotted `field` changes (`old`, `new`, `diff` narrowed to it). The
    /// handler id gets `/field` appended, as in Kopf.
    pub fn on_field<F, Fut>(selector: Selector, id: &str, field: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        Self::new(Trigger::Field, selector, id, function).field(field)
    }

    /// Narrows the handler to a field: it runs only when the field changed, and its `old`,
    /// `new` and `diff` are the field's. The id gets `/field` appended.
    pub fn field(mut self, field: &str) -> Self {
        let path = crate::structs::diff::parse_field(field);
        if self.options.field.is_none() {
            self.id = format!("{}/{}", self.id, path.join("."));
        }
        self.options.field = Some(path);
        self
    }

    /// For `on_field` and `on_update` with a field: run only when the old or new value passes.
    pub fn value(mut self, filter: ValueFilter) -> Self {
        self.options.value = Some(filter);
        self
    }

    /// Run only when the field's old value passes.
    pub fn old(mut self, filter: ValueFilter) -> Self {
        self.options.old = Some(filter);
        self
    }

    /// Run only when the field's new value passes.
    pub fn new_value(mut self, filter: ValueFilter) -> Self {
        self.options.new = Some(filter);
        self
    }

    /// For `on_delete`: do not add the finalizer for this handler.
    pub fn optional(mut self) -> Self {
        if let Trigger::Delete { .. } = self.trigger {
            self.trigger = Trigger::Delete { optional: true };
        }
        self
    }

    /// For `on_resume`: also resume objects already marked for deletion.
    pub fn deleted(mut self) -> Self {
        if let Trigger::Resume { .. } = self.trigger {
            self.trigger = Trigger::Resume { deleted: true };
        }
        self
    }

    /// The handler's id (the key of its progress record and of its result in `status`).
    pub fn id(&self) -> &str {
        &self.id
    }

    option_setters!();

    pub(crate) fn requires_finalizer(&self) -> bool {
        self.trigger == Trigger::Delete { optional: false }
    }
}

impl fmt::Debug for ChangeHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChangeHandler")
            .field("id", &self.id)
            .field("trigger", &self.trigger)
            .field("selector", &self.selector)
            .finish_non_exhaustive()
    }
}

/// A handler of raw watch events (`on_event`): called for every event, errors only logged.
#[derive(Clone)]
pub struct EventHandler {
    pub(crate) id: String,
    pub(crate) selector: Selector,
    pub(crate) function: HandlerFn,
    pub(crate) options: Options,
}

impl EventHandler {
    /// Called for every event of the selected resource, including the initial listing.
    pub fn on_event<F, Fut>(selector: Selector, id: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        EventHandler {
            id: id.into(),
            selector,
            function: boxed(function),
            options: Options::default(),
        }
    }

    option_setters!();
    field_setters!(suffixed);
}

impl fmt::Debug for EventHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventHandler")
            .field("id", &self.id)
            .field("selector", &self.selector)
            .finish_non_exhaustive()
    }
}
