//! What a piece of running work is: a handler on an object, named in the logs of a stop.

use std::fmt;
use std::sync::Arc;

/// What a piece of running work is, for the logs of a stop: a handler on an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Work {
    pub(crate) handler: Arc<str>,
    /// `namespace/name`, or `name` for cluster-scoped objects.
    pub(crate) object: Arc<str>,
}

impl Work {
    pub(crate) fn new(handler: &str, namespace: Option<&str>, name: &str) -> Work {
        let object = match namespace {
            Some(namespace) => [namespace, "/", name].concat(),
            None => name.to_string(),
        };
        Work {
            handler: handler.into(),
            object: object.into(),
        }
    }
}

impl fmt::Display for Work {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "handler {} on {}", self.handler, self.object)
    }
}
