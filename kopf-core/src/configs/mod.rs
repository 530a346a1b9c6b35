//! What the operator is configured with: settings, lifecycles, and the on-object storage formats.

pub(crate) mod lifecycles;
pub(crate) mod peering;
pub(crate) mod settings;
pub mod storage;
