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

    /// Whether this is the handler `handler` on that object (as [`Work::new`] would name it),
    /// compared without making one.
    pub(crate) fn is(&self, handler: &str, namespace: Option<&str>, name: &str) -> bool {
        if *self.handler != *handler {
            return false;
        }
        match namespace {
            Some(namespace) => {
                self.object
                    .strip_prefix(namespace)
                    .and_then(|rest| rest.strip_prefix('/'))
                    == Some(name)
            }
            None => *self.object == *name,
        }
    }
}

impl fmt::Display for Work {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "handler {} on {}", self.handler, self.object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_work_is_the_handler_on_the_object_it_was_made_for() {
        let namespaced = Work::new("create_fn", Some("ns"), "obj");
        assert!(namespaced.is("create_fn", Some("ns"), "obj"));
        assert!(!namespaced.is("create_fn", Some("ns"), "other"));
        assert!(!namespaced.is("create_fn", Some("n"), "s/obj"));
        assert!(!namespaced.is("update_fn", Some("ns"), "obj"));
        let cluster = Work::new("create_fn", None, "obj");
        assert!(cluster.is("create_fn", None, "obj"));
        assert!(!cluster.is("create_fn", Some("ns"), "obj"));
    }
}
