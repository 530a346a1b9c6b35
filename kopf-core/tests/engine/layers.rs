//! kopf-core's layers (ARCHITECTURE.md): each folder of `src/` uses only the folders below it,
//! and no modules form an import circle.

use std::path::{Path, PathBuf};

use layering::{Layers, ModuleGraph, Violation};

/// The layers of kopf-core, bottom up; `lib.rs` (the public face) may use them all.
fn layers() -> Layers {
    Layers::bottom_up(&[
        "helpers", "structs", "configs", "aiokits", "clients", "actions", "intents", "engines",
        "reactor", "kits",
    ])
    .with_unlayered(&[""])
}

fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn shown(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_module_uses_only_the_layers_below_it_and_no_circle() {
    let graph = ModuleGraph::read(sources()).expect("kopf-core's sources");
    let violations = layers().check(&graph);
    assert!(violations.is_empty(), "{}", shown(&violations));
}

/// A copy of kopf-core's sources, with `line` added to the module file `file`.
fn planted(file: &str, line: &str) -> tempfile::TempDir {
    let copy = tempfile::tempdir().expect("a temporary folder");
    copy_tree(&sources(), copy.path());
    let path = copy.path().join(file);
    let text = std::fs::read_to_string(&path).expect("the module to plant into");
    std::fs::write(&path, format!("{text}\n{line}\n")).expect("the planted module");
    copy
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("a folder of the copy");
    for entry in std::fs::read_dir(from).expect("a folder of the sources") {
        let entry = entry.expect("an entry of the sources");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("its type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("a copied file");
        }
    }
}

#[test]
fn an_upward_import_planted_in_the_sources_is_caught() {
    let copy = planted(
        "structs/diff.rs",
        "#[allow(unused_imports)]\nuse crate::reactor::operator::Operator;",
    );
    let graph = ModuleGraph::read(copy.path()).expect("the planted sources");
    let violations = layers().check(&graph);
    assert!(
        violations
            .iter()
            .any(|v| matches!(v, Violation::Upward { from, to, .. }
            if from == "structs::diff" && to == "reactor::operator")),
        "the planted import is not reported: {}",
        shown(&violations)
    );
}

#[test]
fn a_circle_planted_in_the_sources_is_caught() {
    // The processor uses the memories; memories that used the processor back would close a
    // circle.
    let copy = planted(
        "reactor/memories.rs",
        "#[allow(unused_imports)]\nuse crate::reactor::processing::Processor;",
    );
    let graph = ModuleGraph::read(copy.path()).expect("the planted sources");
    let violations = layers().check(&graph);
    assert!(
        violations
            .iter()
            .any(|v| matches!(v, Violation::Circle { modules }
            if modules.iter().any(|m| m == "reactor::memories")
                && modules.iter().any(|m| m == "reactor::processing"))),
        "the planted circle is not reported: {}",
        shown(&violations)
    );
}
