//! The versions that the README and the getting-started chapter tell a user to depend on are
//! the ones kopf-rs builds with: kube, k8s-openapi, schemars and serde must match kopf's, or
//! the types do not (a user would have to dig them out with `cargo tree -i`). Each `toml`
//! block's requirement of these crates must equal the workspace's, and the locked version
//! must satisfy it.

use std::path::Path;

/// The crates whose types a user's code shares with kopf's.
const SHARED: [&str; 4] = ["kube", "k8s-openapi", "schemars", "serde"];

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The version requirement of `name` in a dependency line (`name = "1"` or
/// `name = { version = "1", ... }`), if the line is that crate's.
fn requirement<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let rest = line
        .trim()
        .strip_prefix(name)?
        .trim_start()
        .strip_prefix('=')?;
    let rest = rest.trim_start();
    let quoted = match rest.strip_prefix('{') {
        Some(table) => table.split("version").nth(1)?.split_once('"')?.1,
        None => rest.strip_prefix('"')?,
    };
    quoted.split('"').next()
}

/// The lines of every ```toml block of a Markdown text.
fn toml_blocks(markdown: &str) -> Vec<Vec<&str>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim()) {
            (None, "```toml") => current = Some(Vec::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(block), _) => block.push(line),
            (None, _) => {}
        }
    }
    blocks
}

/// The locked version of a crate (its only one in the lockfile).
fn locked(lockfile: &str, name: &str) -> String {
    let versions: Vec<&str> = lockfile
        .split("[[package]]")
        .filter(|package| package.contains(&format!("\nname = \"{name}\"\n")))
        .filter_map(|package| package.split("\nversion = \"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(versions.len(), 1, "{name}: {versions:?} in Cargo.lock");
    versions[0].to_string()
}

/// Whether a caret requirement (`1`, `0.29`, `1.44`) admits this version.
fn admits(requirement: &str, version: &str) -> bool {
    let wanted: Vec<&str> = requirement.split('.').collect();
    let have: Vec<&str> = version.split('.').collect();
    let significant = wanted.iter().position(|part| *part != "0").unwrap_or(0);
    wanted.iter().enumerate().all(|(index, part)| {
        let Some(have) = have.get(index) else {
            return false;
        };
        if index <= significant {
            part == have
        } else {
            have.parse::<u64>().unwrap_or(0) >= part.parse().unwrap_or(0)
        }
    })
}

#[test]
fn the_guide_names_the_versions_of_kube_k8s_openapi_schemars_and_serde_that_kopf_uses() {
    let workspace = read("Cargo.toml");
    let lockfile = read("Cargo.lock");
    for page in ["README.md", "docs/src/getting-started.md"] {
        let text = read(page);
        let block = toml_blocks(&text)
            .into_iter()
            .find(|block| block.iter().any(|line| line.trim() == "[dependencies]"))
            .unwrap_or_else(|| panic!("{page} has no [dependencies] block"));
        for name in SHARED {
            let ours = workspace
                .lines()
                .find_map(|line| requirement(line, name))
                .unwrap_or_else(|| panic!("the workspace does not depend on {name}"));
            let told = block
                .iter()
                .find_map(|line| requirement(line, name))
                .unwrap_or_else(|| {
                    panic!("{page} does not say which {name} to use (kopf's: {ours})")
                });
            assert_eq!(
                told, ours,
                "{page} names {name} {told}; kopf-rs uses {ours}"
            );
            let version = locked(&lockfile, name);
            assert!(
                admits(told, &version),
                "{page} names {name} {told}, but {version} is locked"
            );
        }
    }
}

#[test]
fn requirements_are_read_and_matched_as_cargo_reads_them() {
    assert_eq!(
        requirement(r#"kube = { version = "5", features = ["derive"] }"#, "kube"),
        Some("5")
    );
    assert_eq!(requirement(r#"serde = "1""#, "serde"), Some("1"));
    assert_eq!(requirement(r#"serde_json = "1""#, "serde"), None);
    assert_eq!(requirement(r#"kube-core = "5""#, "kube"), None);
    assert!(admits("0.29", "0.29.3"));
    assert!(!admits("0.29", "0.30.0"));
    assert!(admits("1.44", "1.48.0"));
    assert!(!admits("1.44", "1.43.9"));
    assert!(!admits("5", "6.0.0"));
}
