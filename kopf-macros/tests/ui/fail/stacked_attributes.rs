#[kopf::on_create("kopfexamples")]
#[kopf::on_update("kopfexamples")]
async fn create_or_update_fn() {}

fn main() {
    let _ = kopf::handlers![create_or_update_fn];
}
