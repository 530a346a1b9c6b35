//! Automatic registration needs no `unsafe` of the user's: a crate that forbids it compiles.
#![forbid(unsafe_code)]

#[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
async fn create_fn(name: &str) -> kopf::Result<serde_json::Value> {
    Ok(serde_json::json!({"message": format!("hello {name}")}))
}

mod nested {
    #[kopf::on_delete("kopfexamples", optional)]
    pub(crate) async fn delete_fn() {}
}

fn main() {
    let collected = kopf::registry::Registry::collected();
    let explicit = kopf::handlers![create_fn, nested::delete_fn];
    let _ = (collected, explicit);
}
