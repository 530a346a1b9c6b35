//! Resource names resolved through discovery, by the name a test used for them.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use kube::discovery::ApiResource;

/// Resource names resolved so far, by the name the test used.
#[derive(Debug, Default)]
pub(super) struct Resolutions(Mutex<HashMap<String, Resolved>>);

impl Resolutions {
    /// What `name` was resolved to, if it was.
    pub(super) fn get(&self, name: &str) -> Option<Resolved> {
        self.names().get(name).cloned()
    }

    /// Remembers what `name` resolves to.
    pub(super) fn insert(&self, name: String, resolved: Resolved) {
        self.names().insert(name, resolved);
    }

    /// The map, also after a test panicked while holding it (it is never left half-written).
    fn names(&self) -> std::sync::MutexGuard<'_, HashMap<String, Resolved>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A served resource.
#[derive(Debug, Clone)]
pub(super) struct Resolved {
    pub(super) resource: ApiResource,
    pub(super) namespaced: bool,
}
