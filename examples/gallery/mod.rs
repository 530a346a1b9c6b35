//! Operators mirroring Kopf's own gallery of examples, one feature each. Their handlers live
//! here, in the library, so that both the example targets (`cargo run --example children`) and
//! the tests (`tests/gallery.rs`) use them: tests cannot import example targets.

pub mod admission;
pub mod children;
pub mod errors;
pub mod filters;
pub mod typed;
