//! What runs each kind of handler outside the per-object cycle: activities, admission reviews,
//! daemons and timers, indexes, login, peering, the liveness and metrics endpoints, the
//! admission webhook server and its managed configurations (and their custody among
//! replicas).

pub(crate) mod activities;
pub(crate) mod admission;
pub(crate) mod authentication;
pub(crate) mod configurations;
pub(crate) mod custody;
pub(crate) mod daemons;
pub(crate) mod indexing;
pub(crate) mod leadership;
pub(crate) mod metrics;
pub(crate) mod ownership;
pub(crate) mod pausing;
pub(crate) mod peering;
pub(crate) mod probing;
pub(crate) mod sharding;
pub(crate) mod webhooks;
