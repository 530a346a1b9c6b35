//! Storage and history: the catalog of served resources, the objects, the global
//! resourceVersion and the change history watches replay, the state file's format, and the
//! files only their owner may read.

pub(super) mod builtins;
pub(super) mod catalog;
pub(super) mod columns;
pub(super) mod object;
pub(super) mod persist;
pub(super) mod private_files;
pub(super) mod state;
