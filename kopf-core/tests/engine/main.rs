//! The engine against the fake API server: handlers called once with the right arguments,
//! retries, Kopf's on-object state, finalizers, and clean stops.

mod support;

mod changes;
mod interop;
mod robustness;
mod stopping;
