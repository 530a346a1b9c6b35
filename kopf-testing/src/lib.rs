//! Testing kopf-rs operators without a cluster.
//!
//! [`FakeApiServer`] is a Kubernetes API server in memory on 127.0.0.1: discovery, CRDs,
//! CRUD, watches with bookmarks and `410 Gone`, selectors, all patch types, the status
//! subresource, finalizers and garbage collection. Unmodified kubectl, kube-rs, the Python
//! `kubernetes` client and Python Kopf work against it. Tests can count requests, inject
//! faults, close watches, compact the history, and restart it.
//!
//! [`OperatorHarness`] runs an operator against such a server in a test and checks that it
//! stops cleanly.
//!
//! The `kopf-fake-apiserver` binary runs the same server for kubectl and other processes.

mod apiserver;
mod harness;

pub use apiserver::{
    FakeApiServer, FakeApiServerBuilder, Fault, FaultAction, LoggedRequest, Stats,
};
pub use harness::{DEADLINE, OperatorHarness, test_settings, wait};

/// The README's code, compiled as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
