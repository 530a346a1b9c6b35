//! Keeping a crate's layers honest, from a test.
//!
//! A crate whose folders are layers (each using only the layers below it) keeps that rule
//! with a test that reads its sources into a [`ModuleGraph`] and checks it against its
//! [`Layers`]; every [`Violation`] says which module to move:
//!
//! ```no_run
//! let graph = layering::ModuleGraph::read(concat!(env!("CARGO_MANIFEST_DIR"), "/src")).unwrap();
//! let layers = layering::Layers::bottom_up(&["structs", "clients", "reactor"]).with_unlayered(&[""]);
//! let violations = layers.check(&graph);
//! assert!(
//!     violations.is_empty(),
//!     "{}",
//!     violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"),
//! );
//! ```
//!
//! The sources are read as tokens, not compiled: a path counts wherever code names it
//! (`use` lines, expressions, types, macro bodies, test modules). A glob import
//! (`use super::*`) counts as using the module it names; the names it brings into scope are
//! not followed further.

mod graph;
mod layers;
mod scan;
#[cfg(test)]
mod tests;

pub use graph::ModuleGraph;
pub use layers::{Layers, Violation};
