//! A real kube-apiserver (Kubernetes 1.36 with etcd and the controller manager's garbage
//! collector and namespace controller) as a child process, for the tests that hold the fake
//! server against the real one and for running suites on the real thing.
//!
//! The server is the project's `scripts/real-apiserver`: built once per machine from a pinned
//! Go module (several minutes; the Go toolchain is needed then, not later) and started in
//! seconds after that. [`RealApiServer::start`] runs it with a kubeconfig of its own and waits
//! for its `listening on` line; [`RealApiServer::stop`] (or dropping it) sends SIGTERM, and the
//! server removes everything it made.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

use crate::server::{Behind, FakeApiServer, FakeApiServerBuilder};

/// The environment variable that names the real server's launcher: the
/// `scripts/real-apiserver` script or a binary it built. By default, the script of the
/// workspace this crate was built in.
pub const LAUNCHER_VARIABLE: &str = "KOPF_REAL_APISERVER";

/// How long a start may take: a first start builds the server (minutes on 2 cores), and a
/// start of a built server takes seconds, slower on a loaded machine.
const START_DEADLINE: Duration = Duration::from_secs(60 * 60);

/// How long a stop may take before the server is killed.
const STOP_DEADLINE: Duration = Duration::from_secs(30);

/// Why a real API server did not start.
#[derive(Debug, thiserror::Error)]
pub enum RealApiServerError {
    /// It cannot be built or run on this machine (no launcher, no Go toolchain); tests skip.
    #[error("no real API server on this machine: {0}")]
    Unavailable(String),
    /// It was started but did not come up.
    #[error("the real API server did not start: {reason}\n--- its log, last lines ---\n{log}")]
    Failed {
        /// What went wrong.
        reason: String,
        /// The end of its log.
        log: String,
    },
}

/// A real kube-apiserver run for a test, with a kubeconfig of an admin (`system:masters`).
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use kopf_fake_apiserver::RealApiServer;
/// let server = RealApiServer::start().await?;
/// let client = server.client().await;
/// let version = client.apiserver_version().await?;
/// assert_eq!(version.major, "1");
/// server.stop().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RealApiServer {
    child: Option<Child>,
    url: String,
    kubeconfig: PathBuf,
    log: PathBuf,
    // Removed with the server's files (the kubeconfig, the log) when the server is dropped.
    _dir: tempfile::TempDir,
}

impl RealApiServer {
    /// Starts a real API server (building it first if this machine never did) and waits until
    /// it is ready.
    ///
    /// # Errors
    ///
    /// [`RealApiServerError::Unavailable`] when it cannot run here (no launcher or no Go to
    /// build it with); [`RealApiServerError::Failed`] when it did not come up.
    pub async fn start() -> Result<RealApiServer, RealApiServerError> {
        let launcher = launcher()?;
        let dir = tempfile::Builder::new()
            .prefix("kopf-real-apiserver-")
            .tempdir()
            .map_err(|e| failed(format!("no temporary folder: {e}"), None))?;
        let kubeconfig = dir.path().join("kubeconfig");
        let log = dir.path().join("apiserver.log");
        let log_file =
            std::fs::File::create(&log).map_err(|e| failed(format!("no log file: {e}"), None))?;
        let mut child = Command::new(&launcher)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--log-file")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            // The build's progress (the first time) and anything before the log file opens.
            .stderr(log_file)
            .spawn()
            .map_err(|e| {
                RealApiServerError::Unavailable(format!("{} does not run: {e}", launcher.display()))
            })?;
        let stdout = child.stdout.take().expect("stdout is piped");
        // From here on, dropping `server` (a failure, a panic, a cancelled start) stops it.
        let mut server = RealApiServer {
            child: Some(child),
            url: String::new(),
            kubeconfig,
            log,
            _dir: dir,
        };
        let mut lines = BufReader::new(stdout).lines();
        let listening = tokio::time::timeout(START_DEADLINE, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(url) = line.strip_prefix("listening on ") {
                    return Some(url.trim().to_string());
                }
            }
            None
        })
        .await;
        match listening {
            Ok(Some(url)) => {
                server.url = url;
                Ok(server)
            }
            outcome => {
                let mut child = server.child.take().expect("the server's process is kept");
                let _ = child.start_kill();
                let status = child.wait().await.ok().and_then(|s| s.code());
                if status == Some(3) {
                    return Err(RealApiServerError::Unavailable(tail(&server.log)));
                }
                let reason = match outcome {
                    Err(_) => format!("no listening line within {START_DEADLINE:?}"),
                    _ => format!("it exited ({status:?}) before it listened"),
                };
                Err(failed(reason, Some(&server.log)))
            }
        }
    }

    /// Starts a real server for the test named `test`, or says loudly why it cannot and gives
    /// `None` (the test then skips). Where the `CI` environment variable is set, a machine
    /// that cannot run one fails the test instead, as a start that fails always does.
    ///
    /// # Panics
    ///
    /// When the server does not come up, or cannot run here under CI.
    pub async fn for_test(test: &str) -> Option<RealApiServer> {
        match RealApiServer::start().await {
            Ok(server) => Some(server),
            Err(RealApiServerError::Unavailable(why)) if !in_ci() => {
                eprintln!("\n!!! SKIPPED {test}: {why}\n");
                None
            }
            Err(error) => panic!("{test}: {error}"),
        }
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The admin kubeconfig's path (for kubectl: `KUBECONFIG=path`, or other clients).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The server's log (its stderr and its components' logs).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The kube-rs configuration of the admin kubeconfig, with `default` as the namespace.
    pub async fn config(&self) -> kube::Config {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig)
            .expect("the real server's kubeconfig reads");
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("the real server's kubeconfig is valid");
        config.default_namespace = "default".into();
        config
    }

    /// An admin kube-rs client for the server.
    pub async fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config().await).expect("a client of the real server builds")
    }

    /// Puts a fake server in front of this one as a proxy ([`FakeApiServerBuilder::upstream`]),
    /// started with `builder` on a runtime of its own, and hands this one over to it: stopping
    /// the proxy stops this server too. Requests to the proxy reach this server with the
    /// admin's certificate (or their own token), and the proxy's request log, counters and
    /// injected faults work as on the fake server.
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
    /// use kopf_fake_apiserver::{FakeApiServer, Fault, RealApiServer};
    /// let server = RealApiServer::start().await?.proxy(FakeApiServer::builder()).await?;
    /// server.inject(Fault::commit_then_fail(500).verb("patch").times(1));
    /// let client = server.client(); // through the proxy to the real server
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// When the proxy does not start: its port, or a setting that only a fake server of its
    /// own has (see [`FakeApiServerBuilder::upstream`]). This server is stopped then.
    pub async fn proxy(self, builder: FakeApiServerBuilder) -> std::io::Result<FakeApiServer> {
        let config = self.config().await;
        let mut proxy = builder.upstream(config).start_on_own_runtime().await?;
        proxy.keep(Box::new(self));
        Ok(proxy)
    }

    /// Stops the server (SIGTERM, then SIGKILL after 30 s) and waits until it has exited and
    /// removed its files.
    pub async fn stop(mut self) {
        if let Some(mut child) = self.child.take() {
            terminate(&child);
            if tokio::time::timeout(STOP_DEADLINE, child.wait())
                .await
                .is_err()
            {
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
        }
    }
}

impl Drop for RealApiServer {
    /// Asks the server to stop (SIGTERM) without waiting: it removes its own files, and a
    /// server killed instead leaves a folder that the next start removes.
    fn drop(&mut self) {
        // Not killed: SIGTERM lets it clean up, and tokio reaps it once it has exited.
        if let Some(child) = self.child.take() {
            terminate(&child);
        }
    }
}

impl Behind for RealApiServer {
    fn stop(self: Box<Self>) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(RealApiServer::stop(*self))
    }
}

/// Sends SIGTERM to the server (the crate forbids `unsafe`, so through `kill(1)`).
fn terminate(child: &Child) {
    if let Some(pid) = child.id() {
        let _ = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The launcher to run: the environment variable's, or the workspace's script.
fn launcher() -> Result<PathBuf, RealApiServerError> {
    if let Some(path) = std::env::var_os(LAUNCHER_VARIABLE) {
        return Ok(PathBuf::from(path));
    }
    let script = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/real-apiserver"
    ));
    if script.is_file() {
        Ok(script.to_path_buf())
    } else {
        Err(RealApiServerError::Unavailable(format!(
            "{LAUNCHER_VARIABLE} is not set and kopf-rs' scripts/real-apiserver is not beside this crate"
        )))
    }
}

/// Whether the tests run under CI, where a missing tool is a failure rather than a skip.
fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
}

fn failed(reason: String, log: Option<&Path>) -> RealApiServerError {
    RealApiServerError::Failed {
        reason,
        log: log.map(tail).unwrap_or_default(),
    }
}

/// The last lines of a log.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}
