//! `FakeApiServer`: a Kubernetes API server in memory, real enough for kubectl, kube-rs, the
//! Python `kubernetes` client and Python Kopf.

mod endpoints;
mod semantics;
mod server;
mod storage;

pub use endpoints::control::{Fault, FaultAction, LoggedRequest, Stats};
pub use server::{FakeApiServer, FakeApiServerBuilder};
