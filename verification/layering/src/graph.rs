//! A crate's module tree, read from its source files, with the modules each one uses.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use crate::scan;

/// A crate's module tree read from its sources: each module (one per file) and the
/// crate-internal modules it uses.
///
/// Modules are named by their path from the crate root: `lib.rs` (or, in a crate without
/// one, `main.rs`) is `""`, the root; `foo.rs` and `foo/mod.rs` are `"foo"`;
/// `reactor/processing/causes.rs` is `"reactor::processing::causes"`. Inline modules
/// (`mod tests { }`) are part of their file's module. Declaring a module (`mod foo;`) is not
/// using it; naming anything in it is.
#[derive(Debug, Clone, Default)]
pub struct ModuleGraph {
    modules: BTreeMap<String, BTreeSet<String>>,
}

impl ModuleGraph {
    /// Reads every `.rs` file under `src` (the crate's `src/` folder), naming modules by
    /// their path from the crate root ("structs::diff", "reactor::processing::causes";
    /// `lib.rs` is "" (the root), `foo/mod.rs` and `foo.rs` are "foo").
    ///
    /// Collects the internal paths each module uses: `crate::a::b::Item`, `super::x`,
    /// `self::x`, `use crate::{a::X, b::{c, d}}` groups, also paths written inline in code
    /// (not only `use` lines), resolving `super`/`self` relative to the module. Comments,
    /// doc comments and string literals are ignored. Files under `src/bin/`, and `main.rs`
    /// next to a `lib.rs`, are crates of their own and are left out.
    ///
    /// # Errors
    ///
    /// When a folder or file cannot be read, or a file does not tokenise as Rust
    /// ([`io::ErrorKind::InvalidData`], naming the file).
    pub fn read(src: impl AsRef<Path>) -> io::Result<ModuleGraph> {
        let src = src.as_ref();
        let mut files = BTreeMap::new();
        collect_files(src, src, &mut files)?;
        let names: BTreeSet<&str> = files.keys().map(String::as_str).collect();
        let mut modules = BTreeMap::new();
        for (module, file) in &files {
            let source = std::fs::read_to_string(file)?;
            let segments = segments(module);
            let children = children(&names, module);
            let paths = scan::internal_paths(&source, &segments, &children).map_err(|error| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {error}", file.display()),
                )
            })?;
            let used = paths
                .iter()
                .filter_map(|path| longest_module(&names, path))
                .filter(|used| used != module)
                .collect();
            modules.insert(module.clone(), used);
        }
        Ok(ModuleGraph { modules })
    }

    /// Every module's dependencies, resolved to the longest existing module path.
    pub fn dependencies(&self) -> impl Iterator<Item = (&str, &BTreeSet<String>)> {
        self.modules
            .iter()
            .map(|(module, used)| (module.as_str(), used))
    }
}

/// Adds the `.rs` files below `folder` to `files`, by module name.
fn collect_files(
    src: &Path,
    folder: &Path,
    files: &mut BTreeMap<String, PathBuf>,
) -> io::Result<()> {
    let mut entries = std::fs::read_dir(folder)?.collect::<io::Result<Vec<_>>>()?;
    entries.sort_by_key(std::fs::DirEntry::path);
    for entry in entries {
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            if path != src.join("bin") {
                collect_files(src, &path, files)?;
            }
        } else if path.extension().is_some_and(|extension| extension == "rs")
            && !(path == src.join("main.rs") && src.join("lib.rs").is_file())
        {
            let relative = path.strip_prefix(src).unwrap_or(&path);
            files.insert(module_name(relative), path);
        }
    }
    Ok(())
}

/// The module a file defines, from its path relative to `src/`.
fn module_name(relative: &Path) -> String {
    let mut segments: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|component| component.as_os_str().to_string_lossy().into_owned())
        .collect();
    if segments.last().is_some_and(|last| last == "mod")
        || (segments.len() == 1 && (segments[0] == "lib" || segments[0] == "main"))
    {
        segments.pop();
    }
    segments.join("::")
}

fn segments(module: &str) -> Vec<String> {
    if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(String::from).collect()
    }
}

/// The last segments of the modules directly below `module`.
fn children(names: &BTreeSet<&str>, module: &str) -> BTreeSet<String> {
    let prefix = if module.is_empty() {
        String::new()
    } else {
        format!("{module}::")
    };
    names
        .iter()
        .filter_map(|name| name.strip_prefix(prefix.as_str()))
        .filter(|rest| !rest.is_empty() && !rest.contains("::"))
        .map(String::from)
        .collect()
}

/// The longest module among `names` that `path` is in.
fn longest_module(names: &BTreeSet<&str>, path: &[String]) -> Option<String> {
    (0..=path.len())
        .rev()
        .map(|length| path[..length].join("::"))
        .find(|module| names.contains(module.as_str()))
}
