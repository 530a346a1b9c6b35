//! What a piece of running work is: a handler on an object, named in the logs of a stop.

use std::fmt;
use std::sync::Arc;

use crate::helpers::joined::Joined;

/// What a piece of running work is, for the logs of a stop: a handler on an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Work {
    /// The handler's id, then the object (`namespace/name`, or `name` for cluster-scoped
    /// objects): one allocation for both, made for every handler's call and every daemon.
    names: Arc<str>,
    /// Where the handler's id ends in `names`.
    split: usize,
}

/// How long names are joined on the stack, then copied once into their allocation.
const JOINED_IN_PLACE: usize = 256;

impl Work {
    pub(crate) fn new(handler: &str, namespace: Option<&str>, name: &str) -> Work {
        let parts = match namespace {
            Some(namespace) => [handler, namespace, "/", name],
            None => [handler, "", "", name],
        };
        let names: Arc<str> = match Joined::<JOINED_IN_PLACE>::new(&parts) {
            Some(joined) => joined.as_str().into(),
            None => parts.concat().into(),
        };
        Work {
            names,
            split: handler.len(),
        }
    }

    /// The handler's id.
    pub(crate) fn handler(&self) -> &str {
        &self.names[..self.split]
    }

    /// The object: `namespace/name`, or `name` for cluster-scoped objects.
    pub(crate) fn object(&self) -> &str {
        &self.names[self.split..]
    }

    /// Whether this is the handler `handler` on that object (as [`Work::new`] would name it),
    /// compared without making one.
    pub(crate) fn is(&self, handler: &str, namespace: Option<&str>, name: &str) -> bool {
        if self.handler() != handler {
            return false;
        }
        let object = self.object();
        match namespace {
            Some(namespace) => {
                object
                    .strip_prefix(namespace)
                    .and_then(|rest| rest.strip_prefix('/'))
                    == Some(name)
            }
            None => object == name,
        }
    }
}

impl fmt::Display for Work {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "handler {} on {}", self.handler(), self.object())
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
        assert_eq!(
            (namespaced.handler(), namespaced.object()),
            ("create_fn", "ns/obj")
        );
        assert_eq!((cluster.handler(), cluster.object()), ("create_fn", "obj"));
        let long = "n".repeat(JOINED_IN_PLACE);
        let long = Work::new("ünïcödé_fn", Some(&long), "obj");
        assert_eq!(long.handler(), "ünïcödé_fn");
        assert_eq!(
            long.object(),
            format!("{}/obj", "n".repeat(JOINED_IN_PLACE))
        );
    }
}
