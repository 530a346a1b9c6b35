//! The engine against the fake API server: handlers called once with the right arguments,
//! retries, Kopf's on-object state, finalizers, sync handlers, and clean stops.

mod support;

mod activities;
mod admission;
mod assigned;
mod backpressure;
mod blocking;
mod changes;
mod daemons;
mod execute;
mod filters;
mod indexes;
mod interop;
mod layers;
mod leadership;
mod lifecycles;
mod login;
mod logs;
mod macros;
mod metrics;
mod peering;
mod persistence;
mod posting;
mod rbac;
mod reliability;
mod robustness;
mod selectors;
mod serving;
mod settings;
mod shards;
mod stacking;
mod stopping;
mod subhandlers;
mod timeouts;
mod toolkit;
mod webhooks;
