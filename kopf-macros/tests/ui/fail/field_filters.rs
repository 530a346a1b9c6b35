#![allow(unused_variables)]
#![deny(deprecated)]

#[kopf::on_update("kopfexamples", field = "spec.size", value = 1, old = 2)]
async fn value_and_old() {}

#[kopf::timer("kopfexamples", interval = 1, value = present)]
async fn value_without_field() {}

#[kopf::daemon("kopfexamples", field = "spec.x", old = absent)]
async fn old_on_a_daemon() {}

#[kopf::on_startup(field = "spec.x")]
async fn field_on_an_activity() {}

#[kopf::on_validate("kopfexamples", operation = [CREATE])]
async fn operation_as_a_list() {}

#[kopf::on_validate("kopfexamples", operation = CREATE)]
async fn deprecated_operation() {}

fn main() {}
