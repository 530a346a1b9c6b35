//! Resource names resolved through discovery, by the name a test used for them.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::discovery::ApiResource;

/// Resource names resolved so far, by the name the test used.
#[derive(Debug, Default)]
pub(super) struct Resolutions(pub(super) Mutex<HashMap<String, Resolved>>);

/// A served resource.
#[derive(Debug, Clone)]
pub(super) struct Resolved {
    pub(super) resource: ApiResource,
    pub(super) namespaced: bool,
}
