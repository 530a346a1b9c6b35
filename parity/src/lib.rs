//! The differential suite: the same operators in Python Kopf 1.45.2 and in kopf-rs, run
//! through the same scenarios on fresh fake API servers, must call the same handlers with the
//! same arguments, leave the same state on their objects, post the same Events and log the
//! same lines about them.
//!
//! - [`spec`]: an operator as data, which both sides interpret: `parity-operator` (kopf-rs,
//!   [`operator`]) and `python/parity_operator.py` (Kopf).
//! - [`driver`]: runs a [`Scenario`](driver::Scenario) with one side and collects its
//!   [`Outcome`](outcome::Outcome); [`outcome`] compares two.
//! - [`scenarios`]: the scripted scenarios, and seeded random ones.
//!
//! `cargo test -p kopf-parity` runs the scripted ones;
//! `cargo test -p kopf-parity --test generated -- --ignored` the generated ones
//! (`PARITY_SEED`, `PARITY_SCENARIOS`).

pub mod driver;
pub mod operator;
pub mod outcome;
pub mod python;
pub mod scenarios;
pub mod spec;
