#![allow(unused_variables)]

struct NotDeserializable;

#[kopf::on_create("kopfexamples")]
async fn create_fn(
    name: u32,
    spec: &NotDeserializable,
    diff: &String,
    patch: kopf::Patch,
    status: NotDeserializable,
    retry: &u32,
) {
}

fn main() {}
