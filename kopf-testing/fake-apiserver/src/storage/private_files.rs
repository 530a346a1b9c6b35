//! Files only their owner may read or write (mode `0600` on Unix): the state file holds the
//! cluster's objects, Secrets included, and kubeconfigs hold the admin's token.

use std::fs::File;
use std::io::Write as _;
use std::path::Path;

/// Creates (or truncates) `path` for writing, readable by its owner only, whatever mode an
/// existing file had.
pub(crate) fn create(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        options.mode(0o600);
        let file = options.open(path)?;
        // The mode applies to new files only: an existing one is narrowed here.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        Ok(file)
    }
    #[cfg(not(unix))]
    options.open(path)
}

/// Writes `contents` to `path`, readable by its owner only.
pub(crate) fn write(path: &Path, contents: impl AsRef<[u8]>) -> std::io::Result<()> {
    create(path)?.write_all(contents.as_ref())
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn new_and_existing_files_are_the_owners_only() {
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("new");
        super::write(&new, "secret").unwrap();
        let existing = dir.path().join("existing");
        std::fs::write(&existing, "old").unwrap();
        std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o644)).unwrap();
        super::write(&existing, "secret").unwrap();
        for path in [new, existing] {
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", path.display());
            assert_eq!(std::fs::read_to_string(&path).unwrap(), "secret");
        }
    }
}
