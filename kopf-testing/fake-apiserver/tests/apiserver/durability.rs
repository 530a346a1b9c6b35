//! The state file keeps every write the `kopf-fake-apiserver` binary answered, across
//! `kill -9`: a scenario of writes (creates, patches, deletes, finalizer removals, cascades,
//! bursts from many clients at once), with the process killed right after each step's answers
//! and started again on the same file, which must then hold exactly what was answered, with
//! resourceVersions that keep growing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use kopf_fake_apiserver::{TestClient, fixtures};
use serde_json::{Value, json};

use crate::binary::start;
use crate::support::serial;

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const KEX: &str = fixtures::KOPFEXAMPLES;

/// The binary, running on a state file.
struct Process {
    child: tokio::process::Child,
    client: TestClient,
}

impl Process {
    async fn start(state: &Path) -> Process {
        // Plain HTTP: the state file is what is checked here, not the transport.
        let (child, url) = start(&[
            "--insecure-http".as_ref(),
            "--state-file".as_ref(),
            state.as_os_str(),
        ])
        .await;
        let mut config = kube::Config::new(url.parse().expect("a valid url"));
        config.default_retry = false;
        let client = kube::Client::try_from(config).expect("a plain-http client builds");
        Process {
            child,
            client: TestClient::new(client),
        }
    }

    /// `kill -9`, right away: no chance to save anything more.
    async fn kill(&mut self) {
        self.child.start_kill().expect("the process is running");
        self.child
            .wait()
            .await
            .expect("the killed process is reaped");
    }

    /// A write that must succeed; its answer.
    async fn write(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, answer) = self.client.request(method, path, body).await;
        assert!(status.is_success(), "{method} {path}: {status} {answer}");
        answer
    }

    async fn create(&self, collection: &str, object: Value) -> Value {
        self.write("POST", collection, Some(object)).await
    }

    async fn patch(&self, path: &str, patch: Value) -> Value {
        self.write("PATCH", path, Some(patch)).await
    }

    async fn delete(&self, path: &str) -> Value {
        self.write("DELETE", path, None).await
    }

    /// The object, or `None` when it is not found.
    async fn get(&self, path: &str) -> Option<Value> {
        match self.client.request("GET", path, None).await {
            (status, object) if status.is_success() => Some(object),
            (status, _) if status == 404 => None,
            (status, error) => panic!("GET {path}: {status} {error}"),
        }
    }
}

fn configmap(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}})
}

fn resource_version(object: &Value) -> u64 {
    let text = object["metadata"]["resourceVersion"].as_str();
    text.and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion in {object}"))
}

/// What an object must look like after a restart.
enum Expected {
    /// As answered: same uid, resourceVersion, data and deletion mark.
    Answered(Value),
    /// The same uid (a controller may have changed it since the answer, in the same write).
    Uid(Value),
    /// Not found.
    Gone,
}

/// Everything the server answered: the objects as they must be found, and the newest
/// resourceVersion answered.
#[derive(Default)]
struct Acknowledged {
    objects: BTreeMap<String, Expected>,
    newest: u64,
    /// The newest version answered before the step began: this step's answers are all newer.
    floor: u64,
}

impl Acknowledged {
    fn begin_step(&mut self) {
        self.floor = self.newest;
    }

    fn answered(&mut self, answer: &Value) {
        let rv = resource_version(answer);
        assert!(
            rv > self.floor,
            "resourceVersion {rv} answered after {} was: versions went backwards",
            self.floor
        );
        self.newest = self.newest.max(rv);
    }

    fn present(&mut self, path: String, answer: Value) {
        self.answered(&answer);
        self.objects.insert(path, Expected::Answered(answer));
    }

    fn present_by_uid(&mut self, path: String, answer: Value) {
        self.answered(&answer);
        self.objects.insert(path, Expected::Uid(answer));
    }

    fn gone(&mut self, path: String) {
        self.objects.insert(path, Expected::Gone);
    }

    /// A deletion's answer: the object as it was (pods, namespaces...), whose version counts,
    /// or a `Status` naming it (ConfigMaps, custom resources...), which carries no version.
    fn deleted(&mut self, path: String, answer: &Value) {
        if answer["kind"] != "Status" {
            self.answered(answer);
        }
        self.gone(path);
    }

    /// Every acknowledged write is there, and nothing deleted came back.
    async fn check(&self, server: &Process, kill_point: usize) {
        for (path, expected) in &self.objects {
            let found = server.get(path).await;
            match (expected, found) {
                (Expected::Gone, None) => {}
                (Expected::Gone, Some(found)) => {
                    panic!("kill point {kill_point}: {path} was deleted, but is back: {found}")
                }
                (_, None) => panic!("kill point {kill_point}: {path} was answered, but is lost"),
                (Expected::Uid(answer), Some(found)) => {
                    assert_eq!(
                        found["metadata"]["uid"], answer["metadata"]["uid"],
                        "{path}"
                    );
                }
                (Expected::Answered(answer), Some(found)) => {
                    for field in ["uid", "resourceVersion", "deletionTimestamp", "finalizers"] {
                        assert_eq!(
                            found["metadata"][field], answer["metadata"][field],
                            "kill point {kill_point}: {path}'s {field}"
                        );
                    }
                    assert_eq!(
                        found["data"], answer["data"],
                        "kill point {kill_point}: {path}"
                    );
                }
            }
        }
        let list = server.get(CONFIGMAPS).await.expect("configmaps are listed");
        let listed = resource_version(&list);
        assert!(
            listed >= self.newest,
            "kill point {kill_point}: the list is at version {listed}, older than {} answered \
             before the crash",
            self.newest
        );
    }
}

fn at(collection: &str, name: &str) -> String {
    format!("{collection}/{name}")
}

/// The binary on its state file, and what it answered so far.
struct Scenario {
    state: PathBuf,
    server: Process,
    ack: Acknowledged,
    kill_points: usize,
}

impl Scenario {
    /// Kills the process the moment the step's answers are in, starts it again, and checks
    /// that the file kept them.
    async fn crash_and_check(&mut self) {
        self.server.kill().await;
        self.kill_points += 1;
        self.server = Process::start(&self.state).await;
        self.ack.check(&self.server, self.kill_points).await;
        self.ack.begin_step();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answered_write_survives_a_kill_right_after_its_answer() {
    let _turn = serial().await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let mut scenario = Scenario {
        server: Process::start(&state).await,
        state,
        ack: Acknowledged::default(),
        kill_points: 0,
    };
    let s = &mut scenario;

    // Creates, patches and deletes, one at a time.
    for round in 0..8 {
        let name = format!("round-{round}");
        let path = at(CONFIGMAPS, &name);
        let created = s.server.create(CONFIGMAPS, configmap(&name, "1")).await;
        s.ack.present(path.clone(), created);
        s.crash_and_check().await;
        let patched = s.server.patch(&path, json!({"data": {"v": "2"}})).await;
        s.ack.present(path.clone(), patched);
        s.crash_and_check().await;
        if round % 2 == 0 {
            let deleted = s.server.delete(&path).await;
            s.ack.deleted(path, &deleted);
            s.crash_and_check().await;
        }
    }

    // Garbage collection: deleting an owner deletes its dependent in the same write.
    let owner = s.server.create(CONFIGMAPS, configmap("owner", "o")).await;
    s.ack.present(at(CONFIGMAPS, "owner"), owner.clone());
    let mut dependent = configmap("dependent", "d");
    dependent["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
        "name": "owner", "uid": owner["metadata"]["uid"]}]);
    let dependent = s.server.create(CONFIGMAPS, dependent).await;
    s.ack.present(at(CONFIGMAPS, "dependent"), dependent);
    s.crash_and_check().await;
    let deleted = s.server.delete(&at(CONFIGMAPS, "owner")).await;
    s.ack.deleted(at(CONFIGMAPS, "owner"), &deleted);
    s.ack.gone(at(CONFIGMAPS, "dependent"));
    s.crash_and_check().await;

    // A finalizer holds a deletion; removing it finishes the deletion.
    let mut held = configmap("held", "h");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let path = at(CONFIGMAPS, "held");
    let held = s.server.create(CONFIGMAPS, held).await;
    s.ack.present(path.clone(), held);
    s.crash_and_check().await;
    let marked = s.server.delete(&path).await;
    assert!(
        marked["metadata"]["deletionTimestamp"].is_string(),
        "{marked}"
    );
    s.ack.present(path.clone(), marked);
    s.crash_and_check().await;
    let released = s
        .server
        .patch(&path, json!({"metadata": {"finalizers": null}}))
        .await;
    s.ack.answered(&released);
    s.ack.gone(path);
    s.crash_and_check().await;

    // A namespace's deletion deletes what is in it, then the namespace.
    let namespaces = "/api/v1/namespaces";
    let namespace =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}});
    let namespace = s.server.create(namespaces, namespace).await;
    s.ack.present_by_uid(at(namespaces, "doomed"), namespace);
    let inside = "/api/v1/namespaces/doomed/configmaps";
    let created = s.server.create(inside, configmap("inside", "i")).await;
    s.ack.present(at(inside, "inside"), created);
    s.crash_and_check().await;
    let deleted = s.server.delete(&at(namespaces, "doomed")).await;
    s.ack.deleted(at(namespaces, "doomed"), &deleted);
    s.ack.gone(at(inside, "inside"));
    s.crash_and_check().await;

    // A CRD serves its resource after a restart; its deletion deletes its objects.
    let crd_path = at(CRDS, "kopfexamples.kopf.dev");
    let created = s.server.create(CRDS, fixtures::kopfexample_crd()).await;
    s.ack.present_by_uid(crd_path.clone(), created);
    let kex = fixtures::kopfexample("kex", json!({"field": "value"}));
    let kex = s.server.create(KEX, kex).await;
    s.ack.present_by_uid(at(KEX, "kex"), kex);
    s.crash_and_check().await;
    let deleted = s.server.delete(&crd_path).await;
    s.ack.deleted(crd_path.clone(), &deleted);
    s.ack.gone(at(KEX, "kex"));
    s.crash_and_check().await;
    // Served again, the resource has no objects: they went with the CRD.
    let created = s.server.create(CRDS, fixtures::kopfexample_crd()).await;
    s.ack.present_by_uid(crd_path, created);
    s.crash_and_check().await;

    // Bursts from many clients at once: their writes share fsyncs.
    let names: Vec<String> = (0..16).map(|i| format!("burst-{i}")).collect();
    let creates: FuturesUnordered<_> = names
        .iter()
        .map(|name| {
            let mut object = configmap(name, "1");
            object["metadata"]["labels"] = json!({"burst": "yes"});
            s.server.create(CONFIGMAPS, object)
        })
        .collect();
    for answer in creates.collect::<Vec<_>>().await {
        let name = answer["metadata"]["name"].as_str().unwrap().to_string();
        s.ack.present(at(CONFIGMAPS, &name), answer);
    }
    s.crash_and_check().await;
    let server = &s.server;
    let patches: FuturesUnordered<_> = names
        .iter()
        .map(|name| async move {
            let path = at(CONFIGMAPS, name);
            let answer = server.patch(&path, json!({"data": {"v": "2"}})).await;
            (path, answer)
        })
        .collect();
    for (path, answer) in patches.collect::<Vec<_>>().await {
        s.ack.present(path, answer);
    }
    s.crash_and_check().await;

    // Killed in the middle of a burst: what was answered is kept, the rest may or may not be.
    let mut creates: FuturesUnordered<_> = (0..16)
        .map(|i| {
            let object = configmap(&format!("cut-{i}"), "1");
            s.server.create(CONFIGMAPS, object)
        })
        .collect();
    let mut answers = Vec::new();
    while answers.len() < 4 {
        answers.push(creates.next().await.expect("the first answers come"));
    }
    drop(creates);
    for answer in answers {
        let name = answer["metadata"]["name"].as_str().unwrap().to_string();
        s.ack.present(at(CONFIGMAPS, &name), answer);
    }
    s.crash_and_check().await;

    // One request deleting many objects.
    let collection = format!("{CONFIGMAPS}?labelSelector=burst%3Dyes");
    let deleted = s.server.write("DELETE", &collection, None).await;
    let items = deleted["items"].as_array().expect("the deleted objects");
    assert_eq!(items.len(), 16, "{deleted}");
    for (item, name) in items.iter().zip(&names) {
        s.ack.answered(item);
        s.ack.gone(at(CONFIGMAPS, name));
    }
    s.crash_and_check().await;

    assert!(s.kill_points >= 30, "{} kill points", s.kill_points);
    s.server.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_on_a_state_file_see_every_change_in_order() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{PostParams, WatchEvent, WatchParams};

    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let server = kopf_fake_apiserver::FakeApiServer::builder()
        .state_file(&state)
        .start()
        .await
        .unwrap();
    let api: kube::Api<ConfigMap> = kube::Api::default_namespaced(server.client());
    let from = server.stats().resource_version.to_string();
    let mut events = api
        .watch(&WatchParams::default(), &from)
        .await
        .unwrap()
        .boxed();
    let creates: FuturesUnordered<_> = (0..20)
        .map(|i| {
            let object: ConfigMap =
                serde_json::from_value(configmap(&format!("w-{i}"), "1")).unwrap();
            let api = api.clone();
            async move { api.create(&PostParams::default(), &object).await.unwrap() }
        })
        .collect();
    let created = creates.collect::<Vec<_>>().await;
    let text = std::fs::read_to_string(&state).unwrap();
    for object in &created {
        let name = object.metadata.name.as_deref().unwrap();
        assert!(
            text.contains(&format!(r#""name":"{name}""#)),
            "{name} is in the file once answered"
        );
    }

    let mut seen = Vec::new();
    while seen.len() < created.len() {
        let event = tokio::time::timeout(crate::support::DEADLINE, events.next())
            .await
            .expect("every creation is seen in time")
            .expect("the watch goes on")
            .unwrap();
        match event {
            WatchEvent::Added(object) => seen.push(object.metadata.resource_version.unwrap()),
            other => panic!("unexpected {other:?}"),
        }
    }
    let versions: Vec<u64> = seen.iter().map(|rv| rv.parse().unwrap()).collect();
    assert!(
        versions.is_sorted(),
        "in resourceVersion order: {versions:?}"
    );
    server.stop().await;
}
