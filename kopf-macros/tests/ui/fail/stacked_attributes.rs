use kopf::Index;
use tokio_util::sync::CancellationToken;

// An argument of one kind only: each stacked kind is called with what it gets.
#[kopf::daemon("kopfexamples")]
#[kopf::on_create("kopfexamples")]
async fn daemon_or_create(_stopped: &CancellationToken, _reason: kopf::Reason) {}

// Only startup handlers change the settings.
#[kopf::on_startup]
#[kopf::on_cleanup]
async fn configure(_settings: &mut kopf::Settings) {}

// Kopf's `type` and `event` are for event handlers only.
#[kopf::on_event("kopfexamples")]
#[kopf::on_update("kopfexamples")]
async fn changed(_type: Option<&str>, _event: serde_json::Value) {}

// One function fills one index: two ids would be two.
#[kopf::index("v1", "pods", id = "pods")]
#[kopf::index("v1", "services", id = "services")]
fn by_name(name: String) -> (String, ()) {
    (name, ())
}

// A stacked attribute is checked as if alone.
#[kopf::on_create("kopfexamples")]
#[kopf::on_field("kopfexamples")]
#[kopf::timer("kopfexamples", interval = 1, optional)]
async fn misconfigured() {}

#[kopf::on_create("kopfexamples")]
#[kopf::on_update = "kopfexamples"]
async fn written_wrong() {}

fn main() {
    let _ = kopf::handlers![daemon_or_create, configure, changed, by_name, misconfigured, written_wrong];
    let _: Option<Index<String, ()>> = None;
}
