//! Plain data, the bottom layer: errors, diffs, patches, resources and selectors, memos,
//! namespace patterns, filters, indexes, credentials.

pub(crate) mod credentials;
pub mod diff;
pub(crate) mod errors;
pub mod filters;
pub(crate) mod indexes;
pub(crate) mod memos;
pub(crate) mod namespaces;
pub(crate) mod patch;
pub(crate) mod resources;
