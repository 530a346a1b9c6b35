//! The operator's core: observation of resources, per-object queues, the per-object cycle, the operator itself.

pub(crate) mod causes;
pub(crate) mod invocations;
pub(crate) mod memories;
pub(crate) mod observation;
pub(crate) mod operator;
pub(crate) mod processing;
pub(crate) mod progress;
pub(crate) mod queueing;
pub(crate) mod subhandling;
