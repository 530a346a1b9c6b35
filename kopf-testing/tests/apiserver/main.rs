//! Tests of the fake API server, with kube-rs, kubectl, and Python clients.

mod support;

mod api;
mod binary;
mod durability;
mod faults;
mod kube_runtime;
mod kubectl;
mod python;
mod rbac;
