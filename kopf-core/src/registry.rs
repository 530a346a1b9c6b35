//! The registry: the handlers an operator runs, grouped by the resources they serve.

use crate::handlers::{ChangeHandler, EventHandler};
use crate::resources::Selector;

/// The handlers of an operator. Tests and embedders build one explicitly, so each operator
/// runs exactly the handlers it names.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    pub(crate) changes: Vec<ChangeHandler>,
    pub(crate) events: Vec<EventHandler>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a handler.
    pub fn with(mut self, handler: impl Into<AnyHandler>) -> Self {
        self.add(handler);
        self
    }

    /// Adds a handler.
    pub fn add(&mut self, handler: impl Into<AnyHandler>) {
        match handler.into() {
            AnyHandler::Change(handler) => self.changes.push(handler),
            AnyHandler::Event(handler) => self.events.push(handler),
        }
    }

    /// Every resource selector that some handler uses, each once, in registration order.
    pub(crate) fn selectors(&self) -> Vec<Selector> {
        let mut selectors: Vec<Selector> = Vec::new();
        let all = self
            .changes
            .iter()
            .map(|h| &h.selector)
            .chain(self.events.iter().map(|h| &h.selector));
        for selector in all {
            if !selectors.contains(selector) {
                selectors.push(selector.clone());
            }
        }
        selectors
    }

    pub(crate) fn changes_for<'a>(
        &'a self,
        selector: &'a Selector,
    ) -> impl Iterator<Item = &'a ChangeHandler> {
        self.changes.iter().filter(move |h| &h.selector == selector)
    }

    pub(crate) fn events_for<'a>(
        &'a self,
        selector: &'a Selector,
    ) -> impl Iterator<Item = &'a EventHandler> {
        self.events.iter().filter(move |h| &h.selector == selector)
    }
}

/// Any kind of handler, for [`Registry::with`].
#[derive(Debug)]
pub enum AnyHandler {
    /// A change handler.
    Change(ChangeHandler),
    /// An event handler.
    Event(EventHandler),
}

impl From<ChangeHandler> for AnyHandler {
    fn from(handler: ChangeHandler) -> Self {
        AnyHandler::Change(handler)
    }
}

impl From<EventHandler> for AnyHandler {
    fn from(handler: EventHandler) -> Self {
        AnyHandler::Event(handler)
    }
}
