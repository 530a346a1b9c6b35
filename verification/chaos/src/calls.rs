//! The handler-call log: every call of the chaos operator's handlers, as a line of JSON when
//! it starts and another when it ends, appended to one file by every incarnation of the
//! operator. A call killed in the middle has a start and no end.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt as _;

/// The environment variable naming the log file.
pub const CALLS_ENV: &str = "CHAOS_CALLS";

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    /// The operator process.
    pub pid: u32,
    /// The call's token, unique across processes: `pid.sequence`. A successful call stores
    /// it in its result, so the journal shows whether (and when) that result landed.
    pub token: String,
    /// The object's uid.
    pub uid: String,
    /// The object's name.
    pub name: String,
    /// The handler's id.
    pub handler: String,
    /// What the call handles: `create`, `delete`, or `size=N` for the field handler.
    pub cause: String,
    /// The retry number the handler was given.
    pub retry: u32,
    /// `start`, or how the call ended: `ok` or `temporary` (a planned failure).
    pub phase: String,
    /// Nanoseconds since the Unix epoch.
    pub at: u128,
}

/// A call in progress, as the handler records it.
#[derive(Debug, Clone)]
pub struct Recorder {
    line: Line,
}

impl Recorder {
    /// Records the start of a call; `finish` records its end.
    pub async fn start(uid: &str, name: &str, handler: &str, cause: &str, retry: u32) -> Self {
        static SEQUENCE: AtomicU64 = AtomicU64::new(0);
        let pid = std::process::id();
        let line = Line {
            pid,
            token: format!("{pid}.{}", SEQUENCE.fetch_add(1, Ordering::SeqCst)),
            uid: uid.into(),
            name: name.into(),
            handler: handler.into(),
            cause: cause.into(),
            retry,
            phase: "start".into(),
            at: now(),
        };
        append(&line).await;
        Recorder { line }
    }

    /// The call's token.
    pub fn token(&self) -> &str {
        &self.line.token
    }

    /// Records how the call ended (`ok` or `temporary`).
    pub async fn finish(mut self, outcome: &str) {
        self.line.phase = outcome.into();
        self.line.at = now();
        append(&self.line).await;
    }
}

/// Nanoseconds since the Unix epoch.
pub fn now() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

/// Appends one line with one write (lines of concurrent calls never interleave). A call that
/// cannot be logged panics, so the handler fails and is retried: a call missing from the log
/// would void the suite's proof.
async fn append(line: &Line) {
    let Some(path) = std::env::var_os(CALLS_ENV) else {
        panic!("{CALLS_ENV} is not set: the chaos operator needs a file for its call log");
    };
    let mut text = serde_json::to_string(line).expect("a call line serializes");
    text.push('\n');
    let mut file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .await
        .unwrap_or_else(|e| panic!("opening the call log {}: {e}", Path::new(&path).display()));
    // tokio's files write in the background: only the flush says the line is in the file,
    // before the next line (of this call or another) is written.
    let written = match file.write_all(text.as_bytes()).await {
        Ok(()) => file.flush().await,
        Err(error) => Err(error),
    };
    written.unwrap_or_else(|e| panic!("writing the call log: {e}"));
}

/// Reads a log: the lines in the order written. A torn last line (a process killed in the
/// middle of writing it) is left out.
pub async fn read(path: &Path) -> std::io::Result<Vec<Line>> {
    let text = match tokio::fs::read_to_string(path).await {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => return Err(error),
    };
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect())
}
