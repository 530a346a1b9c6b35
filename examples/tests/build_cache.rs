//! `scripts/prune-build-cache`, which CI runs first: a build cache over its budget loses this
//! workspace's own crates first, then the incremental caches and trybuild's build, and only
//! then everything; a cache within its budget is left alone. Tried on small made-up caches,
//! with budgets in MiB.

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

/// A file of this workspace's own (kopf-core's library, whose crate is `kopf`).
const OURS: &str = "debug/deps/libkopf-0123456789abcdef.rlib";
/// One of kopf-core's test binaries.
const OUR_TEST: &str = "debug/deps/engine-0123456789abcdef";
/// A dependency's library, from the registry.
const THEIRS: &str = "debug/deps/libserde-0123456789abcdef.rlib";
/// The incremental cache of one of this workspace's crates.
const OUR_INCREMENTAL: &str = "debug/incremental/kopf-0123456789abcdef/s-session/query-cache.bin";
/// The incremental cache of a crate that is no longer in the workspace.
const INCREMENTAL: &str = "debug/incremental/gone-0123456789abcdef/s-session/query-cache.bin";
const TRYBUILD: &str = "tests/trybuild/x86_64-unknown-linux-gnu/debug/deps/trybuild000-01234567";

/// A made-up cache with these files, each of so many MiB.
fn cache(files: &[(&str, usize)]) -> TempDir {
    let cache = tempfile::tempdir().expect("a temporary folder");
    for (path, mib) in files {
        let path = cache.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("creating its folder");
        std::fs::write(&path, vec![1u8; mib * 1024 * 1024]).expect("writing a file");
    }
    cache
}

/// Runs the script on the cache with this budget; returns what it printed.
fn prune(cache: &Path, budget: &str) -> String {
    prune_with(cache, budget, env!("CARGO"))
}

/// Runs the script on the cache with this budget and this cargo.
fn prune_with(cache: &Path, budget: &str, cargo: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/prune-build-cache");
    let output = Command::new("bash")
        .arg(script)
        .arg(cache)
        .arg(budget)
        .env("CARGO", cargo)
        .output()
        .expect("running bash");
    let printed = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "the script failed:\n{printed}");
    printed
}

fn left(cache: &Path, paths: &[&str]) -> Vec<String> {
    paths
        .iter()
        .filter(|path| cache.join(path).exists())
        .map(|path| path.to_string())
        .collect()
}

const ALL: [&str; 6] = [
    OURS,
    OUR_TEST,
    OUR_INCREMENTAL,
    THEIRS,
    INCREMENTAL,
    TRYBUILD,
];

#[test]
fn a_cache_within_its_budget_is_left_alone() {
    let cache = cache(&[
        (OURS, 2),
        (OUR_TEST, 2),
        (OUR_INCREMENTAL, 1),
        (THEIRS, 1),
        (INCREMENTAL, 1),
        (TRYBUILD, 1),
    ]);
    let printed = prune(cache.path(), "12M");
    assert_eq!(printed, "");
    assert_eq!(left(cache.path(), &ALL), ALL);
}

#[test]
fn our_own_crates_go_first() {
    let cache = cache(&[
        (OURS, 3),
        (OUR_TEST, 3),
        (OUR_INCREMENTAL, 1),
        (THEIRS, 1),
        (INCREMENTAL, 1),
        (TRYBUILD, 1),
    ]);
    let printed = prune(cache.path(), "5M");
    assert_eq!(
        left(cache.path(), &ALL),
        [THEIRS, INCREMENTAL, TRYBUILD],
        "{printed}"
    );
    assert!(printed.contains("after removing this workspace's own crates"));
}

#[test]
fn then_the_incremental_caches_and_trybuilds_build() {
    let cache = cache(&[(OURS, 1), (THEIRS, 2), (INCREMENTAL, 2), (TRYBUILD, 2)]);
    let printed = prune(cache.path(), "4M");
    assert_eq!(left(cache.path(), &ALL), [THEIRS], "{printed}");
    assert!(printed.contains("after removing the incremental caches and trybuild's build"));
}

#[test]
fn when_cargo_cannot_tell_the_workspace_the_next_steps_keep_the_budget() {
    let cache = cache(&[(OURS, 1), (THEIRS, 1), (INCREMENTAL, 2), (TRYBUILD, 2)]);
    let printed = prune_with(cache.path(), "3M", "false");
    assert_eq!(left(cache.path(), &ALL), [OURS, THEIRS], "{printed}");
}

#[test]
fn then_everything() {
    let cache = cache(&[(OURS, 1), (THEIRS, 3), (INCREMENTAL, 1)]);
    let printed = prune(cache.path(), "2M");
    assert!(!cache.path().exists(), "{printed}");
    assert!(printed.contains("removing it all"));
}

#[test]
fn a_budget_without_its_unit_is_refused() {
    let script: PathBuf = [env!("CARGO_MANIFEST_DIR"), "../scripts/prune-build-cache"]
        .iter()
        .collect();
    let cache = cache(&[(THEIRS, 1)]);
    let output = Command::new("bash")
        .arg(script)
        .arg(cache.path())
        .arg("30")
        .output()
        .expect("running bash");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("BUDGET as 30G or 500M"));
    assert_eq!(left(cache.path(), &[THEIRS]), [THEIRS]);
}
