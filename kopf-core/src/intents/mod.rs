//! What the operator is asked to do: handler declarations of every kind and the registry. No
//! runtime code.

pub(crate) mod activities;
pub(crate) mod admission;
pub(crate) mod daemons;
pub(crate) mod handlers;
pub(crate) mod indexing;
pub(crate) mod login;
pub(crate) mod registry;
