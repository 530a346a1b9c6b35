#![allow(unused_variables)]

#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn create_fn(size: i32, spce: &serde_json::Value) {}

#[kopf::timer("kopfexamples", interval = 60)]
async fn tick_fn(stoped: bool) {}

fn main() {
    let _ = kopf::handlers![create_fn, tick_fn];
}
