//! What the three benchmark operators share: the mode from the environment, the mark each
//! handler leaves, and the line each busy handler prints when it starts.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// Which handlers run (`BENCH_MODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A create handler.
    Create,
    /// A create and an update handler.
    Update,
    /// A create and a delete handler (so a finalizer).
    Delete,
    /// A create and a resume handler.
    Startup,
    /// An event handler that does nothing.
    Idle,
    /// A create handler that works until the operator stops.
    Busy,
    /// A daemon per object that runs until the operator stops.
    Daemon,
}

impl Mode {
    /// The mode that `BENCH_MODE` names (`create` if unset).
    pub(crate) fn from_env() -> Result<Mode, String> {
        let name = std::env::var("BENCH_MODE").unwrap_or_else(|_| "create".into());
        Ok(match name.as_str() {
            "create" => Mode::Create,
            "update" => Mode::Update,
            "delete" => Mode::Delete,
            "startup" => Mode::Startup,
            "idle" => Mode::Idle,
            "busy" => Mode::Busy,
            "daemon" => Mode::Daemon,
            other => {
                return Err(format!(
                    "BENCH_MODE={other:?} is not one of create, update, delete, startup, idle, busy, daemon"
                ));
            }
        })
    }
}

/// This process's run id (`BENCH_RUN`), written with every mark.
pub(crate) fn run_id() -> String {
    std::env::var("BENCH_RUN").unwrap_or_else(|_| "0".into())
}

/// What a handler leaves in the status: when it ran, in which run, for which `spec.seq`.
pub(crate) fn mark(seq: Option<&Value>) -> Value {
    let at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    let mut mark = json!({"at": at, "run": run_id()});
    if let Some(seq) = seq {
        mark["seq"] = seq.clone();
    }
    mark
}

/// Tells the runner that a busy handler or a daemon has started (one line on stdout).
pub(crate) fn started(name: &str) {
    println!("BENCH-STARTED {name}");
}
