#![allow(unused_variables)]

use serde::Deserialize;

#[derive(Deserialize)]
struct Spec {
    replicas: i64,
}

struct NotDeserializable;

#[kopf::on_create("kopfexamples")]
async fn create_fn(
    name: u32,
    spec: &Spec,
    patch: kopf::Patch,
    status: NotDeserializable,
    retry: &u32,
) {
}

fn main() {}
