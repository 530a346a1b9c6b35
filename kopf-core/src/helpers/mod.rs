//! Small helpers that know nothing of Kubernetes or operators.

pub(crate) mod deadlines;
pub(crate) mod freeing;
pub(crate) mod joined;
pub(crate) mod sync;
