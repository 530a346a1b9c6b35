//! The endpoints for resources: the verbs on objects and their subresources, and watches.

mod admitting;
mod approval;
mod partial;
mod reads;
mod reviews;
mod scale;
mod selectors;
mod subresources;
mod target;
pub(super) mod verbs;
mod watch;
mod writes;

pub(crate) use subresources::service_account_token;
pub(crate) use writes::recreate;
