//! The server process: listening and connections (over TLS when asked), the handle tests
//! hold, restarts, and the saving of every write to the state file.

mod listener;
mod process;
mod saving;
mod slots;
mod tls;

pub(crate) use process::Behind;
pub use process::{Committed, FakeApiServer, FakeApiServerBuilder, RecreateError};
