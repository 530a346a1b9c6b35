//! The HTTP face: requests parsed into routes, who may do them (tokens, RBAC), replies, what request handlers share, the
//! endpoints for resources, discovery and the `/_fake/` control API, the proxy to a real API
//! server (for a server built in front of one), and the router that takes each request from
//! arrival to answer.

pub(super) mod access;
pub(super) mod control;
pub(super) mod control_api;
pub(super) mod discovery;
pub(super) mod holding;
pub(super) mod journal;
pub(super) mod proxy;
pub(super) mod recording;
pub(super) mod reply;
pub(super) mod request;
pub(super) mod resources;
pub(super) mod router;
pub(super) mod shared;
pub(super) mod upstream;
pub(super) mod webhooks;
