//! Talking to the API server: watching, patching, scanning, posting events.

pub(crate) mod auth;
pub(crate) mod patching;
pub(crate) mod posting;
pub(crate) mod scanning;
pub(crate) mod watching;
