//! The recording mode: with `KOPF_FAKE_APISERVER_RECORD=<folder>` set when a server starts,
//! every request it serves (method, path, query, the headers that matter, the body) and the
//! code it answered are written to a file of its own in that folder, one JSON line each. The
//! fidelity suite builds from such files the corpus of request sequences it replays against
//! a real API server.
//!
//! The file is `<folder>/<process id>-<n>.jsonl`. Its first line names the session: the name
//! of the thread that started the server (the test's name, under the test harness). Lines are
//! written by a thread of the recorder's own, so that no request waits for the disk; the
//! thread flushes whenever it has nothing more to write, and ends when the server is gone.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use base64::Engine as _;
use serde_json::{Value, json};

/// The environment variable that turns the recording on: the folder to write to.
pub(crate) const RECORD_VARIABLE: &str = "KOPF_FAKE_APISERVER_RECORD";

/// The request headers recorded: those that change what a server answers.
const HEADERS: &[&str] = &[
    "content-type",
    "accept",
    "user-agent",
    "impersonate-user",
    "impersonate-group",
];

/// Writes the requests of one server to its file.
#[derive(Debug)]
pub(crate) struct Recorder {
    lines: Mutex<mpsc::Sender<String>>,
}

/// One request as recorded.
pub(crate) struct Recorded<'a> {
    pub(crate) parts: &'a http::request::Parts,
    pub(crate) body: &'a [u8],
    pub(crate) code: u16,
    pub(crate) faults: &'a [String],
}

impl Recorder {
    /// A recorder when the environment asks for one; `None` otherwise, or (with a warning)
    /// when its file cannot be made. `session` names it (by default, the current thread).
    pub(crate) fn from_env(session: Option<&str>) -> Option<Recorder> {
        let folder = std::env::var_os(RECORD_VARIABLE).filter(|f| !f.is_empty())?;
        let session = session
            .or(std::thread::current().name())
            .unwrap_or("unnamed")
            .to_string();
        match Recorder::open(Path::new(&folder), session) {
            Ok(recorder) => Some(recorder),
            Err(error) => {
                tracing::warn!(
                    "{RECORD_VARIABLE}: cannot record into {}: {error}",
                    Path::new(&folder).display()
                );
                None
            }
        }
    }

    fn open(folder: &Path, session: String) -> std::io::Result<Recorder> {
        static SERVERS: AtomicUsize = AtomicUsize::new(0);
        std::fs::create_dir_all(folder)?;
        let n = SERVERS.fetch_add(1, Ordering::SeqCst);
        let path: PathBuf = folder.join(format!("{}-{n}.jsonl", std::process::id()));
        let file = std::fs::File::create(&path)?;
        let (sender, receiver) = mpsc::channel::<String>();
        sender
            .send(json!({"session": session}).to_string())
            .expect("the receiver is alive");
        std::thread::Builder::new()
            .name("kopf-fake-apiserver-recorder".into())
            .spawn(move || write_lines(file, receiver))?;
        Ok(Recorder {
            lines: Mutex::new(sender),
        })
    }

    /// Records one request and the code it got.
    pub(crate) fn record(&self, request: Recorded<'_>) {
        let mut headers = serde_json::Map::new();
        for name in HEADERS {
            let values: Vec<&str> = request
                .parts
                .headers
                .get_all(*name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .collect();
            if !values.is_empty() {
                headers.insert((*name).into(), values.join(", ").into());
            }
        }
        let credentials = request
            .parts
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(' ').next().unwrap_or_default().to_ascii_lowercase());
        let body = if request.body.is_empty() {
            Value::Null
        } else if let Ok(value) = serde_json::from_slice::<Value>(request.body) {
            json!({"json": value})
        } else if let Ok(text) = std::str::from_utf8(request.body) {
            json!({"text": text})
        } else {
            json!({"base64": base64::engine::general_purpose::STANDARD.encode(request.body)})
        };
        let line = json!({
            "method": request.parts.method.as_str(),
            "path": request.parts.uri.path(),
            "query": request.parts.uri.query().unwrap_or_default(),
            "headers": headers,
            "credentials": credentials,
            "body": body,
            "code": request.code,
            "faults": request.faults,
        });
        // The writer ends only when the recorder does, so a failed send loses nothing.
        let _ = self
            .lines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .send(line.to_string());
    }
}

/// The recorder's thread: writes each line, flushing whenever none is waiting, until the
/// recorder is dropped.
fn write_lines(file: std::fs::File, lines: mpsc::Receiver<String>) {
    let mut out = std::io::BufWriter::new(file);
    while let Ok(line) = lines.recv() {
        let mut next = Some(line);
        while let Some(line) = next {
            if writeln!(out, "{line}").is_err() {
                return;
            }
            next = lines.try_recv().ok();
        }
        if out.flush().is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_is_a_line_after_the_line_of_its_session() {
        let folder = tempfile::tempdir().unwrap();
        let recorder = Recorder::open(folder.path(), "a_test".into()).unwrap();
        let (parts, ()) = http::Request::builder()
            .method("PATCH")
            .uri("/api/v1/namespaces/default/configmaps/c?fieldManager=m")
            .header("content-type", "application/merge-patch+json")
            .header("authorization", "Bearer secret-token")
            .body(())
            .unwrap()
            .into_parts();
        recorder.record(Recorded {
            parts: &parts,
            body: br#"{"data":{"a":"b"}}"#,
            code: 200,
            faults: &[],
        });
        recorder.record(Recorded {
            parts: &parts,
            body: &[0xff, 0x00],
            code: 0,
            faults: &["cut".to_string()],
        });
        drop(recorder);

        let file = std::fs::read_dir(folder.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        // The writer thread ends once it wrote everything: wait for its last line.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let lines: Vec<Value> = loop {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let lines: Vec<Value> = text
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            if lines.len() == 3 || std::time::Instant::now() > deadline {
                break lines;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0], json!({"session": "a_test"}));
        assert_eq!(lines[1]["method"], "PATCH");
        assert_eq!(lines[1]["path"], "/api/v1/namespaces/default/configmaps/c");
        assert_eq!(lines[1]["query"], "fieldManager=m");
        assert_eq!(
            lines[1]["headers"]["content-type"],
            "application/merge-patch+json"
        );
        // The kind of credentials, never the credentials.
        assert_eq!(lines[1]["credentials"], "bearer");
        assert!(!lines[1].to_string().contains("secret-token"));
        assert_eq!(lines[1]["body"], json!({"json": {"data": {"a": "b"}}}));
        assert_eq!(lines[2]["body"], json!({"base64": "/wA="}));
        assert_eq!(lines[2]["code"], 0);
        assert_eq!(lines[2]["faults"], json!(["cut"]));
    }
}
