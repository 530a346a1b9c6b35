//! The operator's core, in the order one watch event meets it: observation (watchers per
//! resource and namespace), queueing (a worker per object), processing (the per-object cycle,
//! in steps: memories, invocations, causes, progress, sub-handling, and the writes of what
//! the handlers did), the operator's admission webhooks, and the operator that runs them all.

pub(crate) mod admission;
pub(crate) mod causes;
pub(crate) mod invocations;
pub(crate) mod memories;
pub(crate) mod observation;
pub(crate) mod operator;
pub(crate) mod processing;
pub(crate) mod progress;
pub(crate) mod queueing;
pub(crate) mod subhandling;
pub(crate) mod writing;
