//! A program that installs a `tracing` subscriber of its own keeps it: `kopf::run` logs
//! through it, and starts no log thread of Kopf's stderr format (which would sleep for the
//! process's whole life with nothing to write).
//!
//! Without the libtest harness: it runs itself again as that program (with
//! `run --standalone`, and no cluster to reach, so the operator stops at its login), and
//! reads what the program says of its threads.

use std::process::{Command, ExitCode};

use tracing_subscriber::fmt::FormatFields as _;

/// Set in the program's environment: be the program.
const PROGRAM: &str = "KOPF_TEST_OWN_SUBSCRIBER_PROGRAM";

fn main() -> ExitCode {
    if std::env::var_os(PROGRAM).is_some() {
        return program();
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let output = Command::new(std::env::current_exe().expect("this test's path"))
        .args(["run", "--standalone", "--namespace", "nowhere"])
        .env(PROGRAM, "1")
        .env("KUBECONFIG", dir.path().join("no-kubeconfig"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("RUST_LOG")
        .output()
        .expect("the program runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let threads = stdout
        .lines()
        .find_map(|line| line.strip_prefix("threads: "))
        .unwrap_or_else(|| panic!("the program did not finish:\n{stdout}\n{stderr}"));
    assert!(
        !threads.split(' ').any(|thread| thread == "kopf-log"),
        "a log thread was started for a program with its own subscriber: {threads}"
    );
    assert!(
        stdout.contains("own-subscriber:"),
        "kopf-rs did not log through the program's subscriber:\n{stdout}\n{stderr}"
    );
    println!("own_subscriber: ok (threads: {threads})");
    ExitCode::SUCCESS
}

/// A program with a subscriber of its own, which marks its lines.
fn program() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stdout)
        .with_ansi(false)
        .event_format(Marked)
        .init();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let code = runtime.block_on(kopf::run_with(kopf::registry::Registry::default()));
    drop(runtime);
    let mut names: Vec<String> = std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .flatten()
                .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
                .map(|name| name.trim().to_string())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    println!("threads: {}", names.join(" "));
    code
}

/// Each line as `own-subscriber: LEVEL message`.
struct Marked;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for Marked
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        write!(writer, "own-subscriber: {} ", event.metadata().level())?;
        ctx.format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}
