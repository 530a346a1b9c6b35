//! Async building blocks: the cancellation tree, the operator's threads for sync code, its
//! clients' connections, HTTP(S) serving, metric series, the budget of objects in flight.

pub(crate) mod budget;
pub(crate) mod connections;
pub(crate) mod metrics;
pub(crate) mod serving;
pub(crate) mod slots;
pub(crate) mod tasks;
pub(crate) mod threads;
pub(crate) mod tls;
pub(crate) mod work;
