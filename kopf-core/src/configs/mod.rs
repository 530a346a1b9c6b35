//! What the operator is configured with: settings, lifecycles, and the on-object storage
//! formats (progress records, diff-bases) in Kopf's own keys, where admission webhooks are served.

pub(crate) mod leadership;
pub(crate) mod lifecycles;
pub(crate) mod peering;
pub(crate) mod settings;
pub(crate) mod sharding;
pub mod storage;
pub(crate) mod webhooks;
