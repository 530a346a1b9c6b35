//! For users' binaries: the command line, Kopf's log format, CRD and RBAC manifests, and the
//! hierarchy helpers.

pub(crate) mod cli;
pub mod hierarchies;
pub(crate) mod logging;
pub(crate) mod manifests;
pub(crate) mod stderr;
