#![allow(unused_variables)]

#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn create_fn(nmae: &str, spec: &serde_json::Value) {}

fn main() {
    let _ = kopf::handlers![create_fn];
}
