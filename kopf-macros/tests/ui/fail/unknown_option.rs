#![allow(unused_variables)]

#[kopf::on_create("kopfexamples", timout = "10s", optional, errors = "fatal")]
async fn create_fn() {}

#[kopf::on_event("kopfexamples", retries = 3, field = "spec.x")]
async fn event_fn() {}

fn main() {}
