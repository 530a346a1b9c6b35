//! Storage and history: the catalog of served resources, the objects, the global
//! resourceVersion and the change history watches replay, and the state file's format.

pub(super) mod builtins;
pub(super) mod catalog;
pub(super) mod columns;
pub(super) mod object;
pub(super) mod persist;
pub(super) mod state;
