//! What can go wrong with the state file; every message names the file and says what to do.

use std::path::PathBuf;

/// Why the state file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StateFileError {
    /// Reading failed (permissions, a directory in its place, ...).
    #[error("cannot read the state file {}: {error}", path.display())]
    Unreadable {
        path: PathBuf,
        error: std::io::Error,
    },
    /// Writing or fsyncing failed (a full disk, a read-only file system, ...).
    #[error("cannot write the state file {}: {error}", path.display())]
    Unwritable {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The file is damaged before its last batch: not the torn tail a crash leaves.
    #[error(
        "the state file {} is corrupt at line {line}: {reason}; restore it from a backup, \
         or move it away to start with an empty cluster",
        path.display()
    )]
    Corrupt {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    /// The file is neither a state log nor a snapshot of the older format.
    #[error(
        "{} is not a state file of kopf-fake-apiserver (neither its log nor an older snapshot): \
         {reason}; choose another path for the state file",
        path.display()
    )]
    Unrecognized { path: PathBuf, reason: String },
    /// The file was written by a newer version of the format.
    #[error(
        "the state file {} has format version {version}, and this kopf-fake-apiserver reads \
         only version {}: upgrade kopf-fake-apiserver",
        path.display(),
        super::format::VERSION
    )]
    TooNew { path: PathBuf, version: u64 },
}

impl From<StateFileError> for std::io::Error {
    fn from(error: StateFileError) -> Self {
        let kind = match &error {
            StateFileError::Unreadable { error, .. } | StateFileError::Unwritable { error, .. } => {
                error.kind()
            }
            _ => std::io::ErrorKind::InvalidData,
        };
        std::io::Error::new(kind, error)
    }
}
