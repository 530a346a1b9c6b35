#![allow(unused_variables)]

struct Operator;

impl Operator {
    #[kopf::on_create("kopfexamples")]
    async fn method(&self) {}
}

#[kopf::on_create("kopfexamples")]
async fn generic<T>(spec: T) {}

#[kopf::on_create("kopfexamples")]
async fn destructured((name, uid): (String, String)) {}

#[kopf::on_create("kopfexamples")]
const unsafe fn weird() {}

fn main() {}
