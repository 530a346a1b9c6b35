#![allow(unused_variables)]

#[kopf::on_create(id = "no-resource")]
async fn no_resource() {}

#[kopf::on_create("kopf.dev", "v1", "kopfexamples", "extra")]
async fn too_many() {}

struct NotAResource;

#[kopf::on_create(NotAResource)]
async fn not_a_resource() {}

fn main() {}
