//! Fixtures: the KopfExample CRD, objects, and reading what the operator wrote.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kopf::resources::Selector;
use kopf_testing::{
    ApiServer, DEADLINE, FakeApiServer, FakeApiServerBuilder, OperatorHarness, TestClient,
    fixtures, wait,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

pub(crate) const COLLECTION: &str = fixtures::KOPFEXAMPLES;

pub(crate) fn examples() -> Selector {
    Selector::new("kopf.dev", "v1", "kopfexamples")
}

/// The API server of a test: a fake one of `builder`, or, with `KOPF_TESTING_APISERVER=real`,
/// a real one started for the test with a fake one of `builder` in front as a proxy.
pub(crate) async fn apiserver(builder: FakeApiServerBuilder) -> FakeApiServer {
    ApiServer::from_env().start(builder).await
}

/// A server with the KopfExample CRD established.
pub(crate) async fn server_with_crd() -> FakeApiServer {
    let server = apiserver(FakeApiServer::builder()).await;
    install_crd(&server).await;
    server
}

/// Establishes the KopfExample CRD on the server.
pub(crate) async fn install_crd(server: &FakeApiServer) {
    server.apply(fixtures::KOPFEXAMPLE_CRD).await;
}

/// Waits until discovery serves a custom resource: a real API server serves a new CRD's
/// resources a moment after it is created (the fake one at once), and an operator that
/// starts before would not find them.
pub(crate) async fn wait_served(client: &kube::Client, group: &str, version: &str, plural: &str) {
    let path = format!("/apis/{group}/{version}");
    let client = TestClient::new(client.clone());
    wait(
        &format!("{plural}.{group}/{version} to be served"),
        || async {
            let (status, resources) = client.try_request("GET", &path, None).await.ok()?;
            let served = resources["resources"]
                .as_array()?
                .iter()
                .any(|r| r["name"] == plural);
            (status.is_success() && served).then_some(())
        },
    )
    .await;
}

/// Creates the KopfExample `name` in `default`; returns the answer (the object, or the error's
/// `Status`).
pub(crate) async fn create(client: &kube::Client, name: &str, spec: Value) -> Value {
    let object = fixtures::kopfexample(name, spec);
    TestClient::new(client.clone())
        .request("POST", COLLECTION, object)
        .await
        .1
}

/// Merge-patches the KopfExample `name` in `default`; returns the answer.
pub(crate) async fn patch(client: &kube::Client, name: &str, body: Value) -> Value {
    let path = fixtures::kopfexample_path("default", name);
    TestClient::new(client.clone())
        .request("PATCH", &path, body)
        .await
        .1
}

/// Deletes the KopfExample `name` in `default`; returns the answer.
pub(crate) async fn delete(client: &kube::Client, name: &str) -> Value {
    let path = fixtures::kopfexample_path("default", name);
    TestClient::new(client.clone())
        .request("DELETE", &path, json!({}))
        .await
        .1
}

/// The KopfExample `name` in `default`, if it is there.
pub(crate) async fn get(client: &kube::Client, name: &str) -> Option<Value> {
    let path = fixtures::kopfexample_path("default", name);
    let (status, object) = TestClient::new(client.clone())
        .try_request("GET", &path, None)
        .await
        .ok()?;
    status.is_success().then_some(object)
}

/// Waits until the object satisfies `condition`; returns it.
pub(crate) async fn wait_object(
    harness: &OperatorHarness,
    name: &str,
    what: &str,
    condition: impl Fn(&Value) -> bool,
) -> Value {
    let client = harness.client();
    wait(what, || async {
        get(&client, name).await.filter(|o| condition(o))
    })
    .await
}

/// Waits until the object is gone.
pub(crate) async fn wait_gone(harness: &OperatorHarness, name: &str) {
    let client = harness.client();
    wait("the object to be gone", || async {
        get(&client, name).await.is_none().then_some(())
    })
    .await;
}

/// Records what handlers saw, in order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Calls(Arc<Mutex<Vec<Value>>>);

impl Calls {
    pub(crate) fn record(&self, call: Value) {
        self.0.lock().unwrap().push(call);
    }

    pub(crate) fn all(&self) -> Vec<Value> {
        self.0.lock().unwrap().clone()
    }

    /// Waits until the calls so far satisfy `condition`; returns them.
    pub(crate) async fn wait_until(
        &self,
        what: &str,
        condition: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        wait(what, || async {
            let all = self.all();
            condition(&all).then_some(all)
        })
        .await
    }

    pub(crate) async fn wait_len(&self, n: usize) -> Vec<Value> {
        wait(&format!("{n} handler calls"), || async {
            let all = self.all();
            (all.len() >= n).then_some(all)
        })
        .await
    }
}

/// How many times kopfexamples were listed.
pub(crate) fn lists(server: &FakeApiServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.verb == "list" && r.resource.starts_with("kopfexamples"))
        .count()
}

/// Waits until the operator is quiet (no request to the server for a while), so that echoes,
/// retries and late events that should not happen have had their chance to happen.
pub(crate) async fn settle(server: &FakeApiServer) {
    let quiet = std::time::Duration::from_millis(500);
    assert!(
        server.wait_quiet(quiet, DEADLINE).await,
        "the operator did not quiet down within {DEADLINE:?}"
    );
}

/// The URL of the operator's metrics endpoint, once it listens.
pub(crate) async fn metrics_url(endpoint: &kopf::metrics::MetricsEndpoint) -> String {
    tokio::time::timeout(DEADLINE, endpoint.url())
        .await
        .expect("the metrics endpoint listens")
}

/// `GET url` over plain HTTP/1.1 (the operator's metrics endpoint): the status code and the
/// body.
pub(crate) async fn scrape(url: &str) -> (u16, String) {
    let rest = url.strip_prefix("http://").expect("an http url");
    let (address, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("the metrics endpoint accepts connections");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("sent");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .expect("a response");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status");
    (code, body.to_string())
}

/// The samples of a metrics exposition: `name{labels}` to value.
pub(crate) fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// The samples that the operator's metrics endpoint at `url` serves now.
pub(crate) async fn metrics(url: &str) -> BTreeMap<String, f64> {
    let (code, body) = scrape(url).await;
    assert_eq!(code, 200, "the metrics endpoint answers: {body}");
    samples(&body)
}
