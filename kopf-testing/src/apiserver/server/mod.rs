//! The server process: listening and connections, the handle tests hold, restarts, and the
//! saving of every write to the state file.

mod listener;
mod process;
mod saving;

pub use process::{Committed, FakeApiServer, FakeApiServerBuilder, RecreateError};
