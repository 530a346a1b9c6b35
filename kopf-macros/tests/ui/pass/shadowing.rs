//! The generated code keeps working when the user's crate shadows names of the prelude.
#![allow(dead_code)]

struct Result;
struct Option;
struct Box;
struct String;
struct Vec;
struct Ok;
struct Err;
struct Some;
struct None;
struct Duration;
mod std {}
mod core {}
mod serde_json {}
mod inventory {}

#[kopf::on_create("kopf.dev", "v1", "kopfexamples", timeout = "1m", param = {"a": 1}, labels("app" = "web"))]
async fn create_fn(
    name: &str,
    old: ::std::option::Option<i64>,
) -> kopf::Result<::std::string::String> {
    let _ = old;
    ::std::result::Result::Ok(name.to_owned())
}

#[kopf::on_update("kopfexamples", field = "spec.x", value = "y")]
async fn update_fn(
    new: ::std::option::Option<::std::string::String>,
) -> ::std::option::Option<i64> {
    let _ = new;
    ::std::option::Option::None
}

fn main() {
    let _ = kopf::handlers![create_fn, update_fn];
}
