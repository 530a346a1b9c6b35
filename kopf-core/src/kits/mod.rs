//! For users' binaries: the command line, Kopf's log format, CRD and RBAC manifests, the
//! hierarchy helpers, and Kopf's minimal logins.

pub(crate) mod cli;
pub mod hierarchies;
pub(crate) mod logging;
pub(crate) mod logins;
pub(crate) mod manifests;
pub(crate) mod stderr;
