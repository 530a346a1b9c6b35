#![allow(unused_variables)]

#[kopf::on_create("kopfexamples", owns = ["deployments"])]
async fn create_fn() {}

#[kopf::on_login(reads = [Secret])]
async fn login_fn() -> Option<kopf::login::ConnectionInfo> {
    None
}

#[kopf::on_create("kopfexamples", owns = [NotAResource])]
async fn update_fn() {}

struct NotAResource;

fn main() {}
