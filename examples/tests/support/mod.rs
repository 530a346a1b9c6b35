//! An example operator as a child process of its test: this very test binary, started again
//! with an environment variable that makes it run the operator, and killed if the test ends
//! before the process does.

#![allow(
    dead_code,
    reason = "each test binary uses the part of it that its scenarios need"
)]

pub(crate) mod kubectl;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kopf_testing::FakeApiServer;

/// This test binary, with `child` set in its environment and `args` as its command line.
pub(crate) fn child_command(child: &str, args: &[&str]) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("the test binary's path"));
    command
        .args(args)
        .env(child, "1")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        // The command line only: none of Kopf's variables from the environment.
        .env_remove("KOPF_RUN_NAMESPACES")
        .env_remove("KOPF_RUN_NAMESPACE")
        .env_remove("KOPF_RUN_CLUSTERWIDE")
        .env_remove("KOPF_RUN_VERBOSE")
        .env_remove("KOPF_RUN_DEBUG")
        .env_remove("KOPF_RUN_QUIET")
        .env_remove("KOPF_RUN_LOG_FORMAT")
        // kube reads proxies from the environment; the fake server is local.
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy");
    command
}

/// A kubeconfig file for `server`, removed when dropped.
pub(crate) fn kubeconfig_for(server: &FakeApiServer) -> tempfile::TempPath {
    let kubeconfig = tempfile::NamedTempFile::new()
        .expect("a temporary file")
        .into_temp_path();
    server
        .write_kubeconfig(&kubeconfig)
        .expect("the kubeconfig is written");
    kubeconfig
}

/// This test binary as an operator's process against `server` (`KUBECONFIG` set to a
/// kubeconfig for it): `child` set, `args` as its command line, and whatever `configure` adds.
pub(crate) fn spawn_against(
    server: &FakeApiServer,
    child: &str,
    args: &[&str],
    configure: impl FnOnce(&mut Command),
) -> OperatorProcess {
    let kubeconfig = kubeconfig_for(server);
    let mut command = child_command(child, args);
    command.env("KUBECONFIG", &kubeconfig);
    configure(&mut command);
    OperatorProcess::spawn(command, vec![kubeconfig])
}

/// The example's operator in a child process, killed if the test ends before it exits (as
/// tokio's `kill_on_drop`, without needing tokio's `process` feature).
pub(crate) struct OperatorProcess {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
    /// Files the process reads while it runs (its kubeconfig), removed after it.
    _files: Vec<tempfile::TempPath>,
}

impl OperatorProcess {
    /// Starts the command, collecting its stderr as the operator's log.
    pub(crate) fn spawn(mut command: Command, files: Vec<tempfile::TempPath>) -> OperatorProcess {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the operator's process starts");
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("a piped stderr");
        let lines = log.clone();
        // Ends when the child's stderr closes, i.e. with the child.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        OperatorProcess {
            child,
            log,
            _files: files,
        }
    }

    pub(crate) fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Once it watches, it has also set up its signal handlers (before anything else).
    pub(crate) async fn wait_until_watching(&mut self, server: &FakeApiServer) {
        poll("the operator to watch", || {
            assert!(
                self.is_running(),
                "the operator exited early:\n{}",
                self.log()
            );
            (server.stats().open_watches > 0).then_some(())
        })
        .await;
    }

    pub(crate) async fn wait_for_log(&mut self, text: &str) {
        poll(&format!("{text:?} in the operator's log"), || {
            if self.log().contains(text) {
                return Some(());
            }
            assert!(
                self.is_running(),
                "the operator exited early:\n{}",
                self.log()
            );
            None
        })
        .await;
    }

    pub(crate) fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("the child's status").is_none()
    }

    /// Sends a signal, as `kill -TERM pid` does.
    pub(crate) fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{name} succeeded");
    }

    /// Waits for the process to exit; its exit code.
    pub(crate) async fn exit_code(&mut self) -> i32 {
        let status = poll("the operator to exit", || {
            self.child.try_wait().expect("the child's status")
        })
        .await;
        status
            .code()
            .unwrap_or_else(|| panic!("exited by a signal: {status:?}"))
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// As `kopf_testing::wait`, for conditions that need no `.await`.
pub(crate) async fn poll<T>(what: &str, mut condition: impl FnMut() -> Option<T>) -> T {
    let until = tokio::time::Instant::now() + kopf_testing::DEADLINE;
    loop {
        if let Some(value) = condition() {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
