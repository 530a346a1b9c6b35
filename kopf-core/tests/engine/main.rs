//! The engine against the fake API server: handlers called once with the right arguments,
//! retries, Kopf's on-object state, finalizers, sync handlers, and clean stops.

mod support;

mod blocking;
mod changes;
mod interop;
mod logs;
mod macros;
mod persistence;
mod posting;
mod robustness;
mod selectors;
mod stopping;
