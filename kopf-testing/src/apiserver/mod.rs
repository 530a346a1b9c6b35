//! `FakeApiServer`: a Kubernetes API server in memory, real enough for kubectl, kube-rs, the
//! Python `kubernetes` client and Python Kopf.
//!
//! The request path, in module order: [`server`](self) accepts connections; `handler` counts,
//! authenticates and injects faults; `request` parses the route; `verbs` and `watch` serve
//! resources, after `admission` normalises and validates bodies (with `schema` for CRDs and
//! `patch` for PATCH bodies); `lifecycle` applies Kubernetes' rules for creation, updates,
//! deletion, finalizers and garbage collection to the `state`; `discovery` describes what is
//! served; `control` and `control_api` let tests look inside and inject faults.

mod admission;
mod catalog;
mod control;
mod control_api;
mod discovery;
mod handler;
mod lifecycle;
mod names;
mod object;
mod patch;
mod persist;
mod protobuf;
mod request;
mod schema;
mod selector;
mod server;
mod state;
mod status;
mod table;
mod verbs;
mod watch;

pub use control::{Fault, FaultAction, LoggedRequest, Stats};
pub use server::{FakeApiServer, FakeApiServerBuilder};
