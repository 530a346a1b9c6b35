//! Small helpers that know nothing of Kubernetes or operators.

pub(crate) mod sync;
