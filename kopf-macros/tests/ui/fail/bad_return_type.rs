#![allow(unused_variables)]

struct NotSerializable;

#[derive(Debug)]
struct NotAnError;

#[kopf::on_create("kopfexamples")]
async fn not_serializable() -> NotSerializable {
    NotSerializable
}

#[kopf::on_create("kopfexamples")]
async fn not_an_error() -> Result<(), NotAnError> {
    Ok(())
}

fn main() {}
