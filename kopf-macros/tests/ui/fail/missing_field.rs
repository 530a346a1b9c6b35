#![allow(unused_variables)]

#[kopf::on_field("kopf.dev", "v1", "kopfexamples")]
async fn field_fn(old: Option<i64>, new: Option<i64>) {}

#[kopf::on_update("kopfexamples", old = 1, new = present)]
async fn update_fn() {}

fn main() {}
