//! Tests of the fake API server, with kube-rs, kubectl, and Python clients.

mod support;

mod api;
mod binary;
mod faults;
mod kube_runtime;
mod kubectl;
mod kubectl_cel;
mod python;
mod rbac;
