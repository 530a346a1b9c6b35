//! Patch application for the fake API server: RFC 7386 merge patch, RFC 6902 JSON patch,
//! Kubernetes strategic merge patch, a simplified server-side apply, and the managed-fields
//! bookkeeping of all other writes.
//!
//! All functions work on plain [`serde_json::Value`] documents and never panic on any input.
//! They are recursive in the nesting depth of their inputs; documents that come from
//! `serde_json::from_slice` are limited to 128 levels, which keeps the stack small.
//!
//! # Errors
//!
//! [`PatchError`] tells the caller which HTTP answer Kubernetes would give:
//! [`PatchError::BadRequest`] (400) for a malformed patch document,
//! [`PatchError::Invalid`] (422) for a well-formed patch that cannot be applied (a failed
//! JSON-patch `test`, a path that does not exist, a list of lists in a strategic merge patch),
//! [`PatchError::Conflict`] (409) for server-side apply conflicts.
//! [`PatchError::code`] and [`PatchError::reason`] give the status code and the
//! Kubernetes `reason`; the `Display` text is the Status `message`.
//!
//! Strategic merge patches are described in `strategic`, server-side apply in `apply`, the
//! bookkeeping of other writes in `update`.

mod apply;
mod error;
mod fields;
mod json;
mod lists;
mod managed_fields;
mod strategic;
mod structured;
#[cfg(test)]
mod tests;
mod update;

pub(crate) use apply::server_side_apply;
pub(crate) use error::PatchError;
pub(crate) use json::{json_patch, merge_patch};
pub(crate) use strategic::strategic_merge_patch;
pub(crate) use update::{Updater, manager_or_user_agent, record_update};
