//! Tests of the fake API server, with kube-rs, kubectl, and Python clients.

mod support;

mod api;
mod authentication;
mod binary;
mod catalog;
mod client;
mod deletion;
mod durability;
mod faults;
mod kube_runtime;
mod kube_upstream;
mod kubectl;
mod kubectl_cel;
mod kubectl_protobuf;
mod kubelet;
mod limits;
mod lists;
mod metadata;
mod proxy;
mod python;
mod python_tls;
mod random_requests;
mod rbac;
mod real;
mod shards;
mod slow_clients;
mod tls;
mod webhook_matching;
mod webhook_requests;
mod webhook_server;
mod webhooks;
