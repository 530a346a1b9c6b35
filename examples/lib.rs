//! Runnable kopf-rs operators; each lives in `examples/` and runs with `cargo run --example NAME`.
