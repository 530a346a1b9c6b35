//! Plain data: errors, diffs, patches, resources, memos, namespace patterns, filters.

pub(crate) mod credentials;
pub mod diff;
pub(crate) mod errors;
pub mod filters;
pub(crate) mod indexes;
pub(crate) mod memos;
pub(crate) mod namespaces;
pub(crate) mod patch;
pub(crate) mod resources;
