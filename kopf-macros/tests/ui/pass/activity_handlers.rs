//! Activity handlers: `on_startup` (which may change the settings), `on_cleanup`, `on_probe`;
//! async and sync, with every argument they get and every option they take.

use std::time::{Duration, SystemTime};

use serde_json::Value;

#[kopf::on_startup(id = "configure", errors = "permanent", timeout = "1m", retries = 3, backoff = 1.5, param = {"region": "eu-1"})]
async fn configure(
    settings: &mut kopf::Settings,
    memo: &kopf::Memo,
    activity: kopf::activities::Activity,
    logger: &kopf::Logger,
    retry: u32,
    started: SystemTime,
    runtime: Duration,
    param: Option<&Value>,
    client: &kube::Client,
) -> kopf::Result<()> {
    settings.queueing.idle_timeout = Duration::from_secs(30);
    memo.set("region", param.cloned().unwrap_or_default());
    logger.info(format_args!("{activity} attempt {retry} since {started:?} ({runtime:?})"));
    let _ = client;
    Ok(())
}

#[derive(serde::Deserialize)]
struct Param {
    region: String,
}

#[kopf::on_startup(param = {"region": "eu-1"})]
fn sync_startup(settings: kopf::Settings, param: Param, _logger: tracing::Span) {
    let _ = (settings.process.grace_period, param.region);
}

#[kopf::on_cleanup(timeout = 5)]
async fn farewell(memo: kopf::Memo, _client: kube::Client, _retry: u64) -> Result<(), std::io::Error> {
    let _ = memo.value_as::<String>("region");
    Ok(())
}

#[kopf::on_probe]
async fn connections(memo: &kopf::Memo) -> usize {
    memo.value_as::<usize>("connections").unwrap_or(0)
}

#[kopf::on_probe(id = "now")]
fn now() -> Option<Value> {
    Some(serde_json::json!("alive"))
}

fn main() {
    let registry = kopf::handlers![configure, sync_startup, farewell, connections, now];
    let _ = kopf::operator::Operator::new(registry).liveness("http://127.0.0.1:8080/healthz");
    let leader_only = |handler| matches!(handler, kopf::registry::AnyHandler::Activity(h) if h.is_leader_only());
    use kopf::__private::Descriptor as _;
    let one = |mut handlers: Vec<kopf::registry::AnyHandler>| handlers.remove(0);
    assert!(leader_only(one(migrate::handlers())) && leader_only(one(hand_over::handlers())));
    assert!(!leader_only(one(everywhere::handlers())) && !leader_only(one(configure::handlers())));
}

#[kopf::on_startup(leader_only)]
async fn migrate() -> kopf::Result<()> {
    Ok(())
}

#[kopf::on_cleanup(leader_only = true, timeout = 5)]
fn hand_over() {}

#[kopf::on_cleanup(leader_only = false)]
fn everywhere() {}
