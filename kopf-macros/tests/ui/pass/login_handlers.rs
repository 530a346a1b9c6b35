//! Login handlers: async and sync, returning connection info, a kube-client configuration, or
//! an `Option` or `Result` of them, with every argument they get and every option they take.

use std::time::{Duration, SystemTime};

use serde_json::Value;

#[kopf::on_login(id = "vault", errors = "permanent", timeout = "1m", retries = 3, backoff = 1.5, param = {"path": "secret/k8s"})]
async fn from_vault(
    memo: &kopf::Memo,
    logger: &kopf::Logger,
    retry: u32,
    started: SystemTime,
    runtime: Duration,
    param: Option<&Value>,
) -> kopf::Result<kopf::login::ConnectionInfo> {
    logger.info(format_args!("attempt {retry} since {started:?} ({runtime:?}): {param:?}"));
    let token: String = memo.value_as("token").ok_or(kopf::TemporaryError::new("no token yet"))?;
    Ok(kopf::login::ConnectionInfo::new("https://10.0.0.1:6443").token(token))
}

#[kopf::on_login]
fn from_environment(_logger: tracing::Span) -> Option<kopf::login::ConnectionInfo> {
    let token = std::env::var("TOKEN").ok()?;
    Some(kopf::login::ConnectionInfo::new("https://10.0.0.1:6443").token(token))
}

#[kopf::on_login]
async fn from_a_config() -> Result<kube::Config, std::io::Error> {
    Ok(kube::Config::new("https://10.0.0.1:6443".parse().unwrap()))
}

// Kopf's `activity` of login handlers: always the authentication.
#[kopf::on_login(id = "activity")]
fn with_activity(activity: kopf::activities::Activity) -> Option<kopf::login::ConnectionInfo> {
    let _ = activity == kopf::activities::Activity::Authentication;
    kopf::login::login_with_kubeconfig().ok().flatten()
}

fn main() {
    let registry = kopf::handlers![from_vault, from_environment, from_a_config, with_activity];
    let _ = registry;
}
