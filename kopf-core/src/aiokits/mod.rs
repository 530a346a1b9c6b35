//! Async building blocks: the cancellation tree, the operator's threads for sync code, HTTP
//! serving, metric series.

pub(crate) mod metrics;
pub(crate) mod serving;
pub(crate) mod tasks;
pub(crate) mod threads;
pub(crate) mod work;
