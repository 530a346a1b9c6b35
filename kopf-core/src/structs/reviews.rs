//! What an admission review tells a handler besides the object (Kopf's `_cogs/structs/reviews`):
//! the operation, the subresource, who asks, whether it is a dry run, the caller's HTTP headers
//! and client certificate, and the warnings the handlers return.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::helpers::sync::lock;

/// An operation under admission (`request.operation` of an `AdmissionReview`), and what a
/// webhook's rule lists in `operations`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// `CREATE`: also an upsert through PATCH or PUT.
    Create,
    /// `UPDATE`: PUT and PATCH of an existing object, including the removal of finalizers.
    Update,
    /// `DELETE`: `object` is absent, `oldObject` is the object being deleted.
    Delete,
    /// `CONNECT`: `pods/exec`, `pods/attach`, `pods/portforward`, proxies.
    Connect,
}

impl Operation {
    /// Every operation, in Kubernetes' order.
    pub const ALL: [Operation; 4] = [
        Operation::Create,
        Operation::Update,
        Operation::Delete,
        Operation::Connect,
    ];

    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT`: as in reviews and webhook rules.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An operation name that is none of `CREATE`, `UPDATE`, `DELETE`, `CONNECT`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown admission operation {0:?}: expected CREATE, UPDATE, DELETE or CONNECT")]
pub struct UnknownOperation(pub(crate) String);

impl FromStr for Operation {
    type Err = UnknownOperation;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Operation::ALL
            .into_iter()
            .find(|operation| operation.as_str() == name)
            .ok_or_else(|| UnknownOperation(name.to_owned()))
    }
}

/// The warnings that admission handlers return to the API client (`kubectl` prints them as
/// `Warning: ...`), kept even when the request is denied. Clones share one list.
///
/// The API's guidance: at most 120 characters each, no line breaks; kube-apiserver truncates
/// long ones.
#[derive(Clone, Default)]
pub struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    /// Adds a warning.
    pub fn push(&self, warning: impl Into<String>) {
        lock(&self.0).push(warning.into());
    }

    /// The warnings so far, in the order they were added.
    pub fn to_vec(&self) -> Vec<String> {
        lock(&self.0).clone()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        lock(&self.0).is_empty()
    }
}

impl fmt::Debug for Warnings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(lock(&self.0).iter()).finish()
    }
}

/// The admission-only part of an invocation: what the review says besides the object.
#[derive(Debug, Clone)]
pub(crate) struct Review {
    pub(crate) operation: Operation,
    /// `None` for the main body (never `*`).
    pub(crate) subresource: Option<String>,
    pub(crate) dryrun: bool,
    /// `request.userInfo` as sent.
    pub(crate) userinfo: Value,
    /// The HTTP headers of the call, names lower-cased; values that are not text are left out.
    pub(crate) headers: BTreeMap<String, String>,
    /// The caller's client certificate, parsed; `None` when it sent none.
    pub(crate) sslpeer: Option<crate::structs::certificates::PeerCertificate>,
    pub(crate) warnings: Warnings,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_parse_from_and_print_as_the_reviews_names() {
        for operation in Operation::ALL {
            assert_eq!(operation.as_str().parse(), Ok(operation));
        }
        let error = "create".parse::<Operation>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown admission operation \"create\": expected CREATE, UPDATE, DELETE or CONNECT"
        );
    }

    #[test]
    fn warnings_are_shared_by_clones() {
        let warnings = Warnings::default();
        warnings.clone().push("one");
        warnings.push(String::from("two"));
        assert_eq!(warnings.to_vec(), ["one", "two"]);
    }
}
