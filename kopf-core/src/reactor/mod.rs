//! The operator's core: observation of resources, per-object queues, the per-object cycle, the operator itself.

pub(crate) mod observation;
pub(crate) mod operator;
pub(crate) mod processing;
pub(crate) mod queueing;
