//! Talking to the API server: watching, patching, scanning, posting events, Leases, and the
//! operator's one client that logs in again on `401` and bounds every request in time.

pub(crate) mod answers;
pub(crate) mod auth;
pub(crate) mod leases;
pub(crate) mod patching;
pub(crate) mod posting;
pub(crate) mod reading;
pub(crate) mod retries;
pub(crate) mod scanning;
pub(crate) mod streaming;
pub(crate) mod timeouts;
pub(crate) mod watching;
