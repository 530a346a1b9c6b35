//! kubectl, the real one, pointed at a fake API server: a loud skip where it is not installed
//! (a failure under CI).

use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::Duration;

use kopf_testing::FakeApiServer;
use tokio::io::AsyncWriteExt as _;
use tokio::process::Command;

/// How long one kubectl command may take.
const DEADLINE: Duration = Duration::from_secs(60);

/// kubectl pointed at one server, with its kubeconfig and discovery cache in a folder of its
/// own.
pub(crate) struct Kubectl {
    path: PathBuf,
    dir: tempfile::TempDir,
}

/// What one kubectl command printed, and whether it succeeded.
pub(crate) struct Printed {
    pub(crate) success: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Kubectl {
    /// kubectl for `server`, or `None` after a loud skip of `test` (a panic under CI) when
    /// kubectl is not installed.
    pub(crate) fn for_server(test: &str, server: &FakeApiServer) -> Option<Kubectl> {
        let path = installed(test)?;
        let dir = tempfile::tempdir().expect("a temporary folder");
        server
            .write_kubeconfig(dir.path().join("kubeconfig"))
            .expect("the kubeconfig is written");
        Some(Kubectl { path, dir })
    }

    /// Runs kubectl to its end (within the deadline), which must succeed; returns its stdout.
    pub(crate) async fn ok(&self, args: &[&str]) -> String {
        let printed = self.run(args, None).await;
        assert!(
            printed.success,
            "kubectl {args:?} failed:\nstdout: {}\nstderr: {}",
            printed.stdout, printed.stderr
        );
        printed.stdout
    }

    /// Runs kubectl to its end (within the deadline) with `stdin` as its input, successful or
    /// not.
    pub(crate) async fn run(&self, args: &[&str], stdin: Option<&str>) -> Printed {
        let mut child = Command::new(&self.path)
            .env("KUBECONFIG", self.dir.path().join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("kubectl starts");
        if let Some(text) = stdin {
            let mut input = child.stdin.take().expect("kubectl's stdin");
            input
                .write_all(text.as_bytes())
                .await
                .expect("kubectl reads its input");
        }
        let output: Output = tokio::time::timeout(DEADLINE, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish within {DEADLINE:?}"))
            .expect("kubectl's output is read");
        Printed {
            success: output.status.success(),
            stdout: String::from_utf8(output.stdout).expect("kubectl prints UTF-8"),
            stderr: String::from_utf8(output.stderr).expect("kubectl prints UTF-8"),
        }
    }
}

/// Whether we run under CI, where a missing tool is a failure rather than a skip.
fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// The path of `kubectl`, or a loud skip (a failure under CI).
fn installed(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("kubectl"))
        .find(|path| path.is_file());
    if found.is_none() {
        let why = "kubectl is not installed (not found in PATH)";
        if in_ci() {
            panic!("{test}: {why} (CI is set, so this is a failure, not a skip)");
        }
        eprintln!("\n!!! SKIPPED {test}: {why}\n");
    }
    found
}
