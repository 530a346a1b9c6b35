#![allow(unused_variables)]

#[kopf::on_create("kopfexamples", timeout = "10x")]
async fn create_fn() {}

#[kopf::on_update("kopfexamples", timeout = "1h 30m", backoff = -1, retries = "3")]
async fn update_fn() {}

fn main() {}
