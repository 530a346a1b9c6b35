#![allow(unused_variables)]

#[kopf::on_cleanup]
async fn farewell(settings: &mut kopf::Settings, name: &str) {}

#[kopf::on_startup("kopfexamples", labels(app = "web"))]
async fn configure() {}

#[kopf::on_probe]
async fn probe(memo: &mut kopf::Memo) {}

#[kopf::on_probe(leader_only)]
async fn leading() {}

fn main() {}
