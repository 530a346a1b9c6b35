#![allow(unused_variables)]

use std::collections::BTreeMap;

#[kopf::index("v1", "pods")]
async fn pods_by_app(labels: BTreeMap<String, String>, name: String) -> Option<(String, String)> {
    Some((labels.get("app")?.clone(), name))
}

#[kopf::on_create("kopfexamples")]
async fn create_fn(pods_by_ap: &kopf::Index<String, String>) {}

fn main() {
    let _ = kopf::handlers![pods_by_app, create_fn];
}
