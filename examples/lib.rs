//! Runnable kopf-rs operators; each lives in `examples/` and runs with `cargo run --example NAME`.
//!
//! [`gallery`] holds operators mirroring Kopf's gallery, as a library that their example
//! targets and their tests share.

pub mod gallery;
