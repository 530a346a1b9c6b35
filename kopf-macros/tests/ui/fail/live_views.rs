#![allow(unused_variables)]

use serde_json::Value;

#[kopf::on_create("kopfexamples")]
async fn create_fn(spec: kopf::Live<Value>) {}

#[kopf::daemon("kopfexamples")]
async fn borrowed(spec: &kopf::Live<Value>) {}

#[kopf::timer("kopfexamples", interval = 1)]
async fn not_a_part(name: kopf::Live<String>) {}

#[derive(Debug)]
struct NotDeserializable;

#[kopf::daemon("kopfexamples")]
async fn untyped(spec: kopf::Live<NotDeserializable>) {}

fn main() {}
