//! One API server process per measurement — `kopf-fake-apiserver`, or a real kube-apiserver
//! with etcd (`scripts/real-apiserver`) — with the KopfExample CRD, a few namespaces, and a
//! client for the runner's own requests. The fake server counts requests in `/_fake/stats`;
//! the real one in its Prometheus `/metrics`, read the same way here.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use futures::TryStreamExt as _;
use kopf_testing::{Answer, ApiRequest, TestClient, fixtures};
use serde_json::{Value, json};

use crate::metrics;
use crate::operators::Programs;
use crate::process::{Process, cpu_seconds};

/// The namespaces the objects are spread over.
pub(crate) const NAMESPACES: usize = 4;

/// How many requests the runner sends at once when it creates, patches or deletes objects.
pub(crate) const CONCURRENCY: usize = 16;

/// The requests by verb (summed over resources), as the server counts them.
pub(crate) type Verbs = BTreeMap<String, f64>;

/// The requests by verb and resource (`plural.group`, `-` for non-resource paths), as the
/// server counts them.
pub(crate) type Requests = BTreeMap<(String, String), f64>;

/// Which API server the operators run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ApiServer {
    /// `kopf-fake-apiserver`, over plain HTTP.
    Fake,
    /// kube-apiserver 1.36 with etcd (`scripts/real-apiserver --no-controllers`), over HTTPS
    /// with a client certificate.
    Real,
}

impl ApiServer {
    /// The name on the command line (`--apiserver`).
    pub(crate) fn parse(name: &str) -> Option<ApiServer> {
        match name {
            "fake" => Some(ApiServer::Fake),
            "real" => Some(ApiServer::Real),
            _ => None,
        }
    }

    /// What it is, for the report's titles.
    pub(crate) fn title(self) -> &'static str {
        match self {
            ApiServer::Fake => "the fake API server (kopf-fake-apiserver)",
            ApiServer::Real => "a real API server (kube-apiserver 1.36 with etcd)",
        }
    }
}

/// An API server in a process of its own.
pub(crate) struct Cluster {
    process: Option<Process>,
    /// Which server it is.
    server: ApiServer,
    /// Its port on 127.0.0.1.
    port: u16,
    /// The server's CPU seconds spent answering the runner's reads of `/metrics` (large:
    /// every metric of a kube-apiserver), which [`Cluster::server_cpu`] leaves out.
    metrics_cpu: std::sync::Mutex<f64>,
    /// The kubeconfig for clients.
    pub(crate) kubeconfig: PathBuf,
    /// The runner's client.
    pub(crate) client: TestClient,
    _dir: tempfile::TempDir,
}

impl Cluster {
    /// Starts the server (with the programs' server options) and sets up the CRD and
    /// namespaces.
    pub(crate) async fn start(programs: &Programs) -> Result<Cluster, String> {
        Cluster::start_with(programs, &[]).await
    }

    /// As [`Cluster::start`], with more options for the server (e.g. `--no-sharded-watches`).
    /// The fake server's `options` are not given to a real one.
    pub(crate) async fn start_with(
        programs: &Programs,
        options: &[&str],
    ) -> Result<Cluster, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
        let kubeconfig = dir.path().join("kubeconfig");
        let (label, mut command) = match programs.apiserver {
            ApiServer::Fake => {
                let mut command = Command::new(&programs.server);
                // Plain HTTP, as every round in HISTORY.md was measured: TLS would add the
                // same handshakes and encryption to every operator and the runner, and shift
                // the tables.
                command
                    .args(["--bind", "127.0.0.1:0", "--insecure-http", "--kubeconfig"])
                    .arg(&kubeconfig)
                    .args(&programs.server_options)
                    .args(options)
                    .stderr(Stdio::inherit());
                ("kopf-fake-apiserver", command)
            }
            ApiServer::Real => {
                let mut command = Command::new(&programs.real_server);
                // No controller manager: its own lists and watches (the garbage collector
                // watches every resource, KopfExamples too) would count as the operator's.
                // Its logs go to a file in the temporary directory, not amid the runner's.
                command
                    .arg("--no-controllers")
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .arg("--log-file")
                    .arg(dir.path().join("apiserver.log"))
                    .stderr(Stdio::inherit());
                ("kube-apiserver", command)
            }
        };
        command.stdin(Stdio::null()).stdout(Stdio::piped());
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {label} ({command:?}): {e}"))?;
        // Wait for "listening on ...", then hand the process to the watcher threads. (The
        // real server's script execs the server: the child's pid is the server's, whose CPU
        // time is counted, etcd's included.)
        let stdout = child.stdout.take().expect("a piped stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| format!("{label} said nothing: {e}"))?;
        let Some(port) = listening_port(&line) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{label} did not start: {line:?}"));
        };
        let process = Process::adopt(label, child);
        let client = client_for(&kubeconfig).await?;
        let cluster = Cluster {
            process: Some(process),
            server: programs.apiserver,
            port,
            metrics_cpu: std::sync::Mutex::new(0.0),
            kubeconfig,
            client,
            _dir: dir,
        };
        cluster.setup().await?;
        Ok(cluster)
    }

    async fn setup(&self) -> Result<(), String> {
        self.send(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            &fixtures::kopfexample_crd(),
        )
        .await?;
        for n in 0..NAMESPACES {
            let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": namespace(n)}});
            self.send("POST", "/api/v1/namespaces", &namespace).await?;
        }
        // A real server serves a new CRD's resource only once it is established, a moment
        // later (the fake one at once).
        let until = std::time::Instant::now() + Duration::from_secs(60);
        let collection = fixtures::kopfexamples_in(&namespace(0));
        while let Err(error) = self.send_get(&collection).await {
            if std::time::Instant::now() > until {
                return Err(format!("the KopfExample CRD is not served: {error}"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// An error if the server's process has exited.
    pub(crate) fn check_running(&self) -> Result<(), String> {
        self.process.as_ref().map_or(Ok(()), Process::check_running)
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> i32 {
        self.process.as_ref().map_or(0, Process::pid)
    }

    /// The server's CPU seconds so far, but for those its answers to the runner's reads of
    /// `/metrics` took.
    pub(crate) fn server_cpu(&self) -> f64 {
        let metrics = *self.metrics_cpu.lock().expect("the metrics CPU's lock");
        cpu_seconds(self.pid()) - metrics
    }

    /// Stops the server.
    pub(crate) fn stop(mut self) {
        if let Some(process) = self.process.take() {
            let _ = process.terminate(Duration::from_secs(10));
        }
    }

    /// Sends a request; its JSON answer.
    pub(crate) async fn send(
        &self,
        method: &str,
        path: &str,
        body: &Value,
    ) -> Result<Value, String> {
        send(&self.client, method, path, body).await
    }

    /// Gets a path; its JSON answer.
    pub(crate) async fn send_get(&self, path: &str) -> Result<Value, String> {
        send(&self.client, "GET", path, &Value::Null).await
    }

    /// The fake server's counters (`/_fake/stats`).
    async fn stats(&self) -> Result<Value, String> {
        self.only_fake("/_fake/stats")?;
        self.send_get("/_fake/stats").await
    }

    /// An error naming `what` if this is not the fake server.
    fn only_fake(&self, what: &str) -> Result<(), String> {
        match self.server {
            ApiServer::Fake => Ok(()),
            ApiServer::Real => Err(format!("{what} needs the fake API server")),
        }
    }

    /// The real server's metrics (`/metrics`, Prometheus' text format).
    async fn metrics(&self) -> Result<Vec<metrics::Sample>, String> {
        let cpu = cpu_seconds(self.pid());
        let answer = request(&self.client, "GET", "/metrics", &Value::Null).await;
        *self.metrics_cpu.lock().expect("the metrics CPU's lock") += cpu_seconds(self.pid()) - cpu;
        Ok(metrics::parse(&String::from_utf8_lossy(&answer?.body)))
    }

    /// Requests so far, by verb, to KopfExamples and everything else alike.
    pub(crate) async fn verbs(&self) -> Result<Verbs, String> {
        let mut verbs = Verbs::new();
        for ((verb, _), count) in self.requests().await? {
            *verbs.entry(verb).or_default() += count;
        }
        Ok(verbs)
    }

    /// Requests so far, by verb and resource. The control API's own (`/_fake/...`, such as
    /// these counters) are not counted by the fake server. On the real server, the requests
    /// of `apiserver_request_total` but for those that are not to resources (discovery,
    /// `/version`, and `/metrics` itself, which this reads) and the server's own renewals of
    /// its identity Lease (see [`metrics::requests`]).
    pub(crate) async fn requests(&self) -> Result<Requests, String> {
        if self.server == ApiServer::Real {
            return Ok(metrics::requests(&self.metrics().await?));
        }
        let stats = self.stats().await?;
        let mut requests = Requests::new();
        for (verb, resources) in stats["requests"].as_object().into_iter().flatten() {
            for (resource, count) in resources.as_object().into_iter().flatten() {
                let count = count.as_f64().unwrap_or(0.0);
                requests.insert((verb.clone(), resource.clone()), count);
            }
        }
        Ok(requests)
    }

    /// Watch requests to KopfExamples so far (the fake server only: see
    /// [`Cluster::watching_kopfexamples`]).
    pub(crate) async fn kopfexample_watches(&self) -> Result<u64, String> {
        let stats = self.stats().await?;
        Ok(stats["requests"]["watch"]["kopfexamples.kopf.dev"]
            .as_u64()
            .unwrap_or(0))
    }

    /// How long to wait between two reads of the counters when polling for a change: a
    /// real server's `/metrics` is large, and reading it costs the server CPU.
    pub(crate) fn poll_pause(&self) -> Duration {
        match self.server {
            ApiServer::Fake => Duration::from_millis(20),
            ApiServer::Real => Duration::from_millis(200),
        }
    }

    /// Whether someone besides the runner watches KopfExamples: more watches than the
    /// runner's `own` — `(started so far, open now)`. The fake server counts watches as they
    /// start; the real one counts them in `apiserver_request_total` only as they end, so its
    /// gauge of open watches (`apiserver_longrunning_requests`) is compared instead.
    pub(crate) async fn watching_kopfexamples(&self, own: (u64, u64)) -> Result<bool, String> {
        match self.server {
            ApiServer::Fake => Ok(self.kopfexample_watches().await? > own.0),
            ApiServer::Real => {
                let open =
                    metrics::open_watches(&self.metrics().await?, "kopf.dev", "kopfexamples");
                Ok(open > own.1)
            }
        }
    }

    /// The connections the server holds open now. The fake server counts them itself; for
    /// the real one, the TCP sockets on its port that it has not closed yet (established, or
    /// closed by the client only), from `/proc/net/tcp`.
    pub(crate) async fn open_connections(&self) -> Result<u64, String> {
        match self.server {
            ApiServer::Fake => Ok(self.stats().await?["open_connections"]
                .as_u64()
                .unwrap_or(0)),
            ApiServer::Real => metrics::server_sockets(self.port),
        }
    }

    /// Creates `count` objects, `CONCURRENCY` at a time; `then` runs after each creation.
    /// Stops at the first failure.
    pub(crate) async fn create_objects<F, Fut>(
        &self,
        count: usize,
        finalizer: Option<&str>,
        then: F,
    ) -> Result<(), String>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        each_object(count, |i| {
            let mut object = fixtures::kopfexample(&name(i), json!({"seq": 0}));
            if let Some(finalizer) = finalizer {
                object["metadata"]["finalizers"] = json!([finalizer]);
            }
            let then = &then;
            async move {
                // The answer is not read: parsing 100,000 of them would slow the runner.
                request(&self.client, "POST", &collection(i), &object).await?;
                then(i).await
            }
        })
        .await
    }

    /// Deletes `count` objects, `CONCURRENCY` at a time; `then` runs after each deletion.
    /// Stops at the first failure.
    pub(crate) async fn delete_objects<F, Fut>(&self, count: usize, then: F) -> Result<(), String>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        each_object(count, |i| {
            let then = &then;
            async move {
                request(&self.client, "DELETE", &path(i), &json!({})).await?;
                then(i).await
            }
        })
        .await
    }
}

/// Runs `job` for objects `0..count`, `CONCURRENCY` at a time, until the first failure.
pub(crate) async fn each_object<F, Fut>(count: usize, job: F) -> Result<(), String>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    futures::stream::iter((0..count).map(Ok))
        .try_for_each_concurrent(CONCURRENCY, job)
        .await
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(process) = self.process.take() {
            let _ = process.terminate(Duration::from_secs(10));
        }
    }
}

/// The port in the server's line `listening on http(s)://127.0.0.1:PORT`.
fn listening_port(line: &str) -> Option<u16> {
    let address = line.trim().strip_prefix("listening on ")?;
    address
        .rsplit_once(':')?
        .1
        .trim_end_matches('/')
        .parse()
        .ok()
}

/// The namespace of the `n`th namespace.
fn namespace(n: usize) -> String {
    format!("bench-{n}")
}

/// The name of the `i`th object.
pub(crate) fn name(i: usize) -> String {
    format!("example-{i}")
}

/// The collection URL of the `i`th object.
fn collection(i: usize) -> String {
    fixtures::kopfexamples_in(&namespace(i % NAMESPACES))
}

/// The URL of the `i`th object.
pub(crate) fn path(i: usize) -> String {
    format!("{}/{}", collection(i), name(i))
}

async fn client_for(kubeconfig: &Path) -> Result<TestClient, String> {
    let config = kube::config::Kubeconfig::read_from(kubeconfig)
        .map_err(|e| format!("the kubeconfig: {e}"))?;
    let mut config =
        kube::Config::from_custom_kubeconfig(config, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| format!("the kubeconfig: {e}"))?;
    config.proxy_url = None;
    config.read_timeout = Some(Duration::from_secs(600));
    let client = kube::Client::try_from(config).map_err(|e| format!("a client: {e}"))?;
    Ok(TestClient::new(client))
}

/// Sends a request with a JSON body (a merge patch for PATCH; `null`: none); its JSON answer.
pub(crate) async fn send(
    client: &TestClient,
    method: &str,
    path: &str,
    body: &Value,
) -> Result<Value, String> {
    Ok(request(client, method, path, body).await?.json())
}

/// Sends a request with a JSON body (a merge patch for PATCH); its answer, unread.
pub(crate) async fn request(
    client: &TestClient,
    method: &str,
    path: &str,
    body: &Value,
) -> Result<Answer, String> {
    let request = ApiRequest::new(method, path).json(body.clone());
    client
        .try_send(request)
        .await
        .and_then(Answer::success)
        .map_err(|error| error.to_string())
}
