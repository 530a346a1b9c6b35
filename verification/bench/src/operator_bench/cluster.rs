//! One `kopf-fake-apiserver` process per measurement, with the KopfExample CRD, a few
//! namespaces, and a client for the runner's own requests.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use futures::TryStreamExt as _;
use kopf_testing::{Answer, ApiRequest, TestClient, fixtures};
use serde_json::{Value, json};

use crate::operators::Programs;
use crate::process::Process;

/// The namespaces the objects are spread over.
pub(crate) const NAMESPACES: usize = 4;

/// How many requests the runner sends at once when it creates, patches or deletes objects.
pub(crate) const CONCURRENCY: usize = 16;

/// The requests by verb (summed over resources), as the server counts them.
pub(crate) type Verbs = BTreeMap<String, f64>;

/// The requests by verb and resource (`plural.group`, `-` for non-resource paths), as the
/// server counts them.
pub(crate) type Requests = BTreeMap<(String, String), f64>;

/// A fake API server in a process of its own.
pub(crate) struct Cluster {
    process: Option<Process>,
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
    pub(crate) async fn start_with(
        programs: &Programs,
        options: &[&str],
    ) -> Result<Cluster, String> {
        let binary = &programs.server;
        let dir = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
        let kubeconfig = dir.path().join("kubeconfig");
        let mut command = Command::new(binary);
        // Plain HTTP, as every round in HISTORY.md was measured: TLS would add the same
        // handshakes and encryption to every operator and the runner, and shift the tables.
        command
            .args(["--bind", "127.0.0.1:0", "--insecure-http", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(&programs.server_options)
            .args(options)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        // Wait for "listening on ...", then hand the process to the watcher threads.
        let stdout = child.stdout.take().expect("a piped stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| format!("the fake API server said nothing: {e}"))?;
        if !line.starts_with("listening on") {
            let _ = child.kill();
            return Err(format!("the fake API server did not start: {line:?}"));
        }
        let process = Process::adopt("kopf-fake-apiserver", child);
        let client = client_for(&kubeconfig).await?;
        let cluster = Cluster {
            process: Some(process),
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

    /// The server's counters (`/_fake/stats`).
    pub(crate) async fn stats(&self) -> Result<Value, String> {
        self.send_get("/_fake/stats").await
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
    /// these counters) are not counted by the server.
    pub(crate) async fn requests(&self) -> Result<Requests, String> {
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

    /// Watch requests to KopfExamples so far.
    pub(crate) async fn kopfexample_watches(&self) -> Result<u64, String> {
        let stats = self.stats().await?;
        Ok(stats["requests"]["watch"]["kopfexamples.kopf.dev"]
            .as_u64()
            .unwrap_or(0))
    }

    /// Open TCP connections now.
    pub(crate) async fn open_connections(&self) -> Result<u64, String> {
        Ok(self.stats().await?["open_connections"]
            .as_u64()
            .unwrap_or(0))
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
