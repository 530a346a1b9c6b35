//! `crate = path` for a renamed or re-exported kopf: generated code goes through that path.

extern crate kopf as renamed;

mod reexported {
    pub(crate) use renamed as kopf_again;
}

#[renamed::on_create("kopf.dev", "v1", "kopfexamples", crate = renamed)]
async fn create_fn(name: &str) -> renamed::Result<()> {
    let _ = name;
    Ok(())
}

#[renamed::on_event("kopfexamples", crate = crate::reexported::kopf_again)]
async fn event_fn() {}

fn main() {
    let _ = renamed::handlers![create_fn, event_fn];
}
