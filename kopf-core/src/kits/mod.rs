//! For users and their binaries: the command line, manifests, hierarchies.

pub(crate) mod cli;
pub mod hierarchies;
pub(crate) mod logging;
pub(crate) mod manifests;
