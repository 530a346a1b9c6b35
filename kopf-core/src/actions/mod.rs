//! One handler call: the invocation and its arguments, the execution of one attempt, the
//! delivery of its results, the current handler, the sync adapters, sub-handlers run in place.

pub(crate) mod activity;
pub(crate) mod blocking;
pub(crate) mod current;
pub(crate) mod delivery;
pub(crate) mod execution;
pub(crate) mod extract;
pub(crate) mod indexing;
pub(crate) mod invocation;
pub(crate) mod live;
pub(crate) mod login;
pub(crate) mod newest;
pub(crate) mod posting;
pub(crate) mod subexecution;
