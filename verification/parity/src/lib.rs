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
//! `cargo test -p kopf-parity` runs the scripted ones; with `KOPF_TESTING_APISERVER=real`,
//! each side's server is a real kube-apiserver behind the fake one (a proxy);
//! `cargo test -p kopf-parity --test generated -- --ignored` the generated ones
//! (`PARITY_SEED`, `PARITY_SCENARIOS`, `PARITY_STEPS`).
//!
//! Each run keeps its folder under the target's `tmp/parity*/<scenario>-<side>/`: the spec,
//! the calls, the operator's log, the server's requests and the outcome. To look into a
//! difference, `PARITY_VERBOSE=1` runs both operators with `--verbose` (the log lines then
//! differ by design), and `PARITY_RUST_LOG` sets kopf-rs' `RUST_LOG`.

pub mod driver;
pub mod operator;
pub mod outcome;
pub mod python;
pub mod scenarios;
pub mod spec;
