//! API semantics: Kubernetes' rules for what a request does to the stored objects, with no HTTP
//! in them: ServiceAccount tokens, RBAC authorization, lifecycles and the cluster's controllers, admission with
//! defaults and limits, schemas, patches, selectors, tables, protobuf bodies, and the `Status`
//! errors.

pub(super) mod admission;
pub(super) mod allocation;
pub(super) mod authorization;
pub(super) mod cluster;
pub(super) mod controllers;
pub(super) mod defaults;
pub(super) mod garbage;
pub(super) mod go_format;
pub(super) mod lifecycle;
pub(super) mod limits;
pub(super) mod names;
pub(super) mod patch;
pub(super) mod protobuf;
pub(super) mod schema;
pub(super) mod selector;
pub(super) mod status;
pub(super) mod table;
pub(super) mod tokens;
pub(super) mod webhooks;
