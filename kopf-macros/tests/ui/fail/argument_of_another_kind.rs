#![allow(unused_variables)]

#[kopf::on_create("kopfexamples")]
async fn create_fn(stopped: bool, event_type: Option<&str>) {}

#[kopf::on_event("kopfexamples")]
async fn event_fn(diff: &kopf::diff::Diff, old: Option<&serde_json::Value>) {}

fn main() {}
