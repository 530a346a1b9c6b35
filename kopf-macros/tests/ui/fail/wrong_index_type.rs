#![allow(unused_variables)]

use std::collections::BTreeMap;

#[kopf::index("v1", "pods")]
async fn pods_by_app(labels: BTreeMap<String, String>, name: String) -> Option<(String, String)> {
    Some((labels.get("app")?.clone(), name))
}

#[kopf::on_create("kopfexamples")]
async fn create_fn(pods_by_app: &kopf::Index<String, i32>) {}

#[kopf::on_update("kopfexamples")]
fn update_fn(pods_by_app: BTreeMap<String, String>) {}

// A handler is not an index.
#[kopf::on_delete("kopfexamples")]
async fn delete_fn(create_fn: &kopf::Index<String, String>) {}

#[kopf::index("v1", "pods")]
async fn no_entries(name: &str) {}

#[kopf::index("v1", "pods")]
async fn not_entries(name: &str) -> String {
    name.to_string()
}

fn main() {}
