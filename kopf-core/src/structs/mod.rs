//! Plain data, the bottom layer: objects' bodies, errors, diffs, patches, resources and
//! selectors, memos, namespace patterns, filters, indexes, credentials, RBAC rules, admission
//! reviews, client certificates, and shard selectors.

pub(crate) mod bodies;
pub(crate) mod certificates;
pub(crate) mod credentials;
pub mod diff;
pub(crate) mod errors;
pub mod filters;
pub(crate) mod indexes;
pub(crate) mod memos;
pub(crate) mod namespaces;
pub(crate) mod outcomes;
pub(crate) mod patch;
pub(crate) mod rbac;
pub(crate) mod resources;
pub(crate) mod reviews;
pub(crate) mod shards;
