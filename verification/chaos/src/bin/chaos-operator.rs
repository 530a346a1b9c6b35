//! The operator the chaos suite kills and restarts: two creation handlers (one fails
//! temporarily as often as `spec.failures` says), a field handler on `spec.size`, and a
//! deletion handler (so objects carry a finalizer). Every call is logged to the file
//! `CHAOS_CALLS` (see `kopf_chaos::calls`); a successful call stores its token in its result.
//!
//! It takes `kopf run`'s command line: the suite runs it with `--standalone -n default`.

use std::process::ExitCode;
use std::time::Duration;

use kopf::TemporaryError;
use kopf_chaos::calls::Recorder;
use serde_json::{Value, json};

#[kopf::on_create("kopf.dev", "v1", "chaosobjects")]
async fn first(uid: &str, name: &str, retry: u32) -> Value {
    let call = Recorder::start(uid, name, "first", "create", retry).await;
    let result = json!({"token": call.token()});
    call.finish("ok").await;
    result
}

#[kopf::on_create("kopf.dev", "v1", "chaosobjects")]
async fn second(uid: &str, name: &str, retry: u32, spec: &Value) -> kopf::Result<Value> {
    let call = Recorder::start(uid, name, "second", "create", retry).await;
    if u64::from(retry) < spec["failures"].as_u64().unwrap_or(0) {
        call.finish("temporary").await;
        return Err(TemporaryError::new("a planned failure")
            .delay(Duration::from_millis(50))
            .into());
    }
    let result = json!({"token": call.token()});
    call.finish("ok").await;
    Ok(result)
}

#[kopf::on_field("kopf.dev", "v1", "chaosobjects", field = "spec.size")]
async fn resize(uid: &str, name: &str, retry: u32, new: Option<u64>) -> Value {
    let size = new.unwrap_or_default();
    let call = Recorder::start(uid, name, "resize", &format!("size={size}"), retry).await;
    let result = json!({"token": call.token(), "size": size});
    call.finish("ok").await;
    result
}

#[kopf::on_delete("kopf.dev", "v1", "chaosobjects")]
async fn cleanup(uid: &str, name: &str, retry: u32) {
    let call = Recorder::start(uid, name, "cleanup", "delete", retry).await;
    call.finish("ok").await;
}

#[tokio::main]
async fn main() -> ExitCode {
    kopf::run().await
}
