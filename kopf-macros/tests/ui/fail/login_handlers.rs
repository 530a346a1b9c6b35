#![allow(unused_variables)]

#[kopf::on_login("kopfexamples")]
async fn with_a_resource() -> Option<kopf::login::ConnectionInfo> {
    None
}

#[kopf::on_login]
async fn with_an_object(name: &str, client: &kube::Client) -> Option<kopf::login::ConnectionInfo> {
    None
}

#[kopf::on_login]
async fn without_credentials() {}

#[kopf::on_login]
async fn with_a_string() -> String {
    String::new()
}

fn main() {}
