//! The crate's architecture holds: the runner of `#[kopf_testing::test]` sits above the
//! harness, each imports only what is below it, and no modules import each other. (The fake
//! API server below both is a crate of its own, `kopf-fake-apiserver`, with its own layers.)

use layering::{Layers, ModuleGraph};

/// Bottom up.
const LAYERS: &[&str] = &["harness", "runner"];

#[test]
fn each_layer_imports_only_the_layers_below_it() {
    let graph =
        ModuleGraph::read(concat!(env!("CARGO_MANIFEST_DIR"), "/src")).expect("the sources read");
    let violations = Layers::bottom_up(LAYERS)
        .with_unlayered(&[""])
        .check(&graph);
    assert!(
        violations.is_empty(),
        "the layers do not hold:\n{}",
        violations
            .iter()
            .map(|v| format!("- {v}"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
}
