//! The kopf-rs user guide, an mdBook (`docs/src/`, built with `scripts/mdbook build docs`).
//!
//! Each chapter is included here as the documentation of an empty module, so `cargo test -p
//! kopf-docs` compiles every Rust snippet of the book as a doctest and runs those not marked
//! `no_run` (they talk only to kopf-testing's fake API server on 127.0.0.1). mdBook and
//! rustdoc share the convention of hidden lines (`# `), so setup lines stay out of the book.
//! `tests/links.rs` checks the book's links, anchors, images and table of contents, and
//! `tests/log_lines.rs` that the log lines the troubleshooting chapter quotes are in the code.

macro_rules! chapters {
    ($($module:ident => $file:literal),* $(,)?) => {
        $(
            #[doc = include_str!(concat!("src/", $file))]
            pub mod $module {}
        )*
        /// Every chapter file, as `SUMMARY.md` lists them (checked by `tests/links.rs`).
        pub const CHAPTERS: &[&str] = &[$($file),*];
    };
}

chapters! {
    introduction => "introduction.md",
    getting_started => "getting-started.md",
    concepts => "concepts.md",
    handlers => "handlers.md",
    filters => "filters.md",
    errors => "errors.md",
    daemons => "daemons.md",
    indexes => "indexes.md",
    subhandlers => "subhandlers.md",
    activities => "activities.md",
    events => "events.md",
    admission => "admission.md",
    peering => "peering.md",
    configuration => "configuration.md",
    cli => "cli.md",
    deploying => "deploying.md",
    testing => "testing.md",
    migrating => "migrating.md",
    troubleshooting => "troubleshooting.md",
}
