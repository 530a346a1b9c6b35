//! Attribute macros of kopf-rs. Use them through the `kopf` crate (`#[kopf::on_create]`),
//! which re-exports them; generated code refers only to `::kopf::__private`.
