//! The crate's architecture holds: the fake API server's folders are layers (storage and
//! history, API semantics, HTTP endpoints, the server process, then the test's client and the
//! shared fixtures above it), each layer imports only the layers below it, and no modules
//! import each other.

use layering::{Layers, ModuleGraph};

/// Bottom up. Within the endpoints, the router (which takes every request to its endpoint)
/// sits above the endpoints for resources, which sit above what all endpoints share.
const LAYERS: &[&str] = &[
    "storage",
    "semantics",
    "endpoints",
    "endpoints::resources",
    "endpoints::router",
    "server",
    "real",
    "client",
    "fixtures",
];

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

#[test]
fn the_graph_sees_a_request_go_down_the_layers() {
    let graph =
        ModuleGraph::read(concat!(env!("CARGO_MANIFEST_DIR"), "/src")).expect("the sources read");
    let uses = |module: &str, used: &str| {
        graph
            .dependencies()
            .any(|(m, deps)| m == module && deps.contains(used))
    };
    assert!(uses("server::listener", "endpoints::router"));
    assert!(uses("endpoints::router", "endpoints::resources::verbs"));
    assert!(uses("endpoints::resources::writes", "semantics::lifecycle"));
    assert!(uses("semantics::lifecycle", "storage::state"));
}
