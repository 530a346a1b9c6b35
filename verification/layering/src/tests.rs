//! Planted source trees and what the graph and the layers make of them.

use std::collections::BTreeMap;

use crate::{Layers, ModuleGraph, Violation};

/// A crate's `src/` in a temporary folder, from (file, source) pairs.
fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (file, source) in files {
        let path = dir.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, source).unwrap();
    }
    dir
}

/// The module graph of a planted tree: each module and the modules it uses.
fn graph_of(files: &[(&str, &str)]) -> BTreeMap<String, Vec<String>> {
    let dir = tree(files);
    ModuleGraph::read(dir.path())
        .unwrap()
        .dependencies()
        .map(|(module, used)| (module.to_owned(), used.iter().cloned().collect()))
        .collect()
}

fn uses(graph: &BTreeMap<String, Vec<String>>, module: &str) -> Vec<String> {
    graph[module].clone()
}

const LAYERED: &[(&str, &str)] = &[
    (
        "lib.rs",
        "mod store;\nmod api;\nmod http;\npub use http::serve;\n",
    ),
    (
        "store/mod.rs",
        "pub(crate) mod state;\npub(crate) mod names;\n",
    ),
    (
        "store/state.rs",
        "use super::names::Name;\npub struct State(Name);\n",
    ),
    ("store/names.rs", "pub struct Name;\n"),
    ("api/mod.rs", "pub(crate) mod verbs;\n"),
    (
        "api/verbs.rs",
        "use crate::store::state::State;\npub fn get(_: &State) {}\n",
    ),
    (
        "http/mod.rs",
        "pub fn serve() { let _get = crate::api::verbs::get; }\n",
    ),
];

const LAYERS: &[&str] = &["store", "api", "http"];

#[test]
fn modules_are_named_by_their_path_from_the_root() {
    let graph = graph_of(LAYERED);
    let names: Vec<&str> = graph.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "",
            "api",
            "api::verbs",
            "http",
            "store",
            "store::names",
            "store::state"
        ]
    );
    assert_eq!(uses(&graph, ""), ["http"]);
    assert_eq!(uses(&graph, "store::state"), ["store::names"]);
    assert_eq!(uses(&graph, "http"), ["api::verbs"]);
}

/// The violations of the layered tree with `planted` files put in (or replacing) its own,
/// against `layers`, the crate root allowed outside them.
fn check(planted: &[(&'static str, &'static str)], layers: &[&str]) -> Vec<Violation> {
    let mut files = LAYERED.to_vec();
    for (path, source) in planted {
        files.retain(|(existing, _)| existing != path);
        files.push((path, source));
    }
    let dir = tree(&files);
    let graph = ModuleGraph::read(dir.path()).unwrap();
    Layers::bottom_up(layers)
        .with_unlayered(&[""])
        .check(&graph)
}

#[test]
fn a_clean_tree_keeps_its_layers() {
    assert_eq!(check(&[], LAYERS), []);
}

#[test]
fn an_upward_import_is_reported_with_both_layers() {
    let names = "pub struct Name;\nfn f() { let _ = crate::http::serve; }\n";
    let violations = check(&[("store/names.rs", names)], LAYERS);
    let upward = Violation::Upward {
        from: "store::names".into(),
        from_layer: "store".into(),
        to: "http".into(),
        to_layer: "http".into(),
    };
    assert!(violations.contains(&upward), "{violations:?}");
    assert_eq!(
        upward.to_string(),
        "upward import: `store::names` (layer `store`) uses `http` (layer `http`, higher); move \
         what it uses down to layer `store` or below, or pass it in from above",
    );
}

#[test]
fn a_circle_is_reported_with_its_modules() {
    let names = "pub struct Name;\nimpl Name { fn f(_: super::state::State) {} }\n";
    let violations = check(&[("store/names.rs", names)], LAYERS);
    let circle = Violation::Circle {
        modules: vec!["store::names".into(), "store::state".into()],
    };
    assert_eq!(violations, std::slice::from_ref(&circle));
    assert_eq!(
        circle.to_string(),
        "import circle between 2 modules: `store::names`, `store::state`; move what they share \
         into a module below them all",
    );
}

#[test]
fn a_module_in_no_layer_is_reported_unless_allowed() {
    let violations = check(&[], &["store", "api"]);
    assert_eq!(
        violations,
        [Violation::Unlayered {
            module: "http".into()
        }]
    );
    let dir = tree(LAYERED);
    let graph = ModuleGraph::read(dir.path()).unwrap();
    let violations = Layers::bottom_up(LAYERS).check(&graph);
    assert_eq!(
        violations,
        [Violation::Unlayered {
            module: String::new()
        }]
    );
    assert_eq!(
        violations[0].to_string(),
        "module `crate` (the root) sits in no layer; move it into one, or list it as unlayered",
    );
}

#[test]
fn using_an_unlayered_module_from_a_layer_is_upward() {
    let names = "pub struct Name;\nuse crate::serve;\n";
    let violations = check(&[("store/names.rs", names)], LAYERS);
    assert!(
        matches!(&violations[..], [Violation::Upward { from, to, .. }, ..] if from == "store::names" && to.is_empty()),
        "{violations:?}",
    );
}

#[test]
fn the_longest_prefix_decides_the_layer() {
    // `store::state` sits in a layer above the rest of `store`, so `store::names` may not use it.
    let planted = [
        (
            "store/names.rs",
            "pub struct Name;\nuse super::state::State;\n",
        ),
        ("store/state.rs", "pub struct State;\n"),
    ];
    let violations = check(&planted, &["store", "store::state", "api", "http"]);
    assert!(
        matches!(&violations[..], [Violation::Upward { to_layer, .. }] if to_layer == "store::state"),
        "{violations:?}",
    );
    // "api" is no prefix of "apiserver": a module of `api` in no layer but "apiserver" would be
    // reported.
    let violations = check(&[], &["store", "apiserver", "api", "http"]);
    assert_eq!(violations, []);
    let violations = check(&[], &["store", "apiserver", "http"]);
    assert_eq!(
        violations[..2],
        [
            Violation::Unlayered {
                module: "api".into()
            },
            Violation::Unlayered {
                module: "api::verbs".into()
            },
        ]
    );
}

#[test]
fn use_groups_resolve_each_leaf_across_lines() {
    let graph = graph_of(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\n"),
        (
            "a.rs",
            "pub(crate) use crate::{\n    b::X,\n    c::{self as see, Y},\n    d::{\n        inner::{Z, W},\n    },\n};\n",
        ),
        ("b.rs", ""),
        ("c.rs", ""),
        ("d/mod.rs", "pub mod inner;\n"),
        ("d/inner.rs", ""),
    ]);
    assert_eq!(uses(&graph, "a"), ["b", "c", "d::inner"]);
}

#[test]
fn super_and_self_resolve_relative_to_the_module() {
    let graph = graph_of(&[
        ("lib.rs", "mod top;\nmod x;\n"),
        ("x.rs", ""),
        ("top/mod.rs", "mod mid;\nmod y;\nuse self::y::Y;\n"),
        ("top/y.rs", ""),
        ("top/mid/mod.rs", "pub(super) mod leaf;\n"),
        (
            "top/mid/leaf.rs",
            "use super::super::y;\nfn f() { super::super::super::x::go(); self::g(); }\nfn g() {}\n",
        ),
    ]);
    assert_eq!(uses(&graph, "top"), ["top::y"]);
    assert_eq!(uses(&graph, "top::mid::leaf"), ["top::y", "x"]);
    assert_eq!(uses(&graph, "top::mid"), Vec::<String>::new());
}

#[test]
fn paths_in_code_macros_and_test_modules_count_and_comments_do_not() {
    let graph = graph_of(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\nmod e;\nmod f;\n"),
        (
            "a.rs",
            r#"//! Uses `crate::b` in its docs only.
/// See [`crate::c::Thing`].
fn f() -> String {
    // crate::d::nothing();
    /* crate::d::nothing(); */
    let s = "crate::d::nothing()";
    format!("{}", crate::e::name())
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::f::Helper;
}
"#,
        ),
        ("b.rs", ""),
        ("c.rs", ""),
        ("d.rs", ""),
        ("e.rs", ""),
        ("f.rs", ""),
    ]);
    assert_eq!(uses(&graph, "a"), ["e", "f"]);
}

#[test]
fn declared_modules_and_imported_modules_start_paths() {
    let graph = graph_of(&[
        ("lib.rs", "mod outer;\nmod far;\n"),
        ("far/mod.rs", "pub mod deep;\n"),
        ("far/deep.rs", ""),
        ("outer/mod.rs", "mod child;\npub use child::Thing;\n"),
        (
            "outer/child.rs",
            "use crate::far;\nfn f() { far::deep::go(); http::StatusCode::OK; }\n",
        ),
    ]);
    assert_eq!(uses(&graph, "outer"), ["outer::child"]);
    assert_eq!(uses(&graph, "outer::child"), ["far", "far::deep"]);
}

#[test]
fn bin_targets_are_crates_of_their_own() {
    let graph = graph_of(&[
        ("lib.rs", "mod a;\n"),
        ("a.rs", ""),
        ("main.rs", "mod z;\nfn main() { crate::z::go(); }\n"),
        ("bin/tool.rs", "fn main() {}\n"),
    ]);
    let names: Vec<&str> = graph.keys().map(String::as_str).collect();
    assert_eq!(names, ["", "a"]);
}

#[test]
fn an_unreadable_file_names_itself() {
    let dir = tree(&[("lib.rs", "fn f() { \"unterminated }\n")]);
    let error = ModuleGraph::read(dir.path()).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
    assert!(error.to_string().contains("lib.rs"), "{error}");
}
