//! kubectl against the fake API server: what a kubectl user does, with real kubectl processes.
//!
//! Each test starts its own server and gives kubectl a kubeconfig and a discovery cache of its
//! own in a temporary folder, so nothing leaks between tests. The tests take turns
//! (`support::serial`), since each runs many kubectl processes.

use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use kopf_fake_apiserver::{FakeApiServer, fixtures};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::SemaphorePermit;

use crate::support::{self, DEADLINE, wait};

/// kubectl pointed at one server, with its own kubeconfig, discovery cache and manifests in a
/// temporary folder, removed when it is dropped.
pub(crate) struct Kubectl {
    path: PathBuf,
    dir: PathBuf,
}

impl Kubectl {
    fn new(test: &str, path: PathBuf, server: &FakeApiServer) -> Kubectl {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let unique = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!(
            "kopf-kubectl-{test}-{}-{unique}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("cache")).expect("the temporary folder is made");
        server
            .write_kubeconfig(dir.join("kubeconfig"))
            .expect("the kubeconfig is written");
        Kubectl { path, dir }
    }

    /// A kubectl command with this test's kubeconfig and cache; killed if dropped.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.path);
        command
            .env("KUBECONFIG", self.dir.join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.join("cache"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    /// Starts kubectl in the background (for `get -w`, `delete --wait`).
    fn spawn(&self, args: &[&str]) -> Child {
        self.command(args).spawn().expect("kubectl starts")
    }

    /// Runs kubectl to its end (within the deadline).
    pub(crate) async fn run(&self, args: &[&str]) -> Output {
        let child = self.spawn(args);
        match tokio::time::timeout(DEADLINE, child.wait_with_output()).await {
            Ok(output) => output.expect("kubectl's output is read"),
            Err(_) => panic!(
                "`kubectl {}` did not finish within {DEADLINE:?}",
                args.join(" ")
            ),
        }
    }

    /// Runs kubectl, which must succeed; returns its stdout.
    pub(crate) async fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args).await;
        assert!(output.status.success(), "{}", describe(args, &output));
        String::from_utf8(output.stdout).expect("kubectl prints UTF-8")
    }

    /// Runs kubectl, which must fail; returns its stderr.
    pub(crate) async fn fails(&self, args: &[&str]) -> String {
        let output = self.run(args).await;
        assert!(
            !output.status.success(),
            "expected a failure: {}",
            describe(args, &output)
        );
        String::from_utf8(output.stderr).expect("kubectl prints UTF-8")
    }

    /// `kubectl ARGS -o json`, parsed.
    pub(crate) async fn json(&self, args: &[&str]) -> Value {
        let args: Vec<&str> = args.iter().copied().chain(["-o", "json"]).collect();
        let stdout = self.ok(&args).await;
        serde_json::from_str(&stdout).unwrap_or_else(|e| {
            panic!(
                "`kubectl {}` printed no JSON ({e}): {stdout}",
                args.join(" ")
            )
        })
    }

    /// Writes a manifest into the temporary folder; returns its path for `-f`.
    pub(crate) fn manifest(&self, name: &str, text: &str) -> String {
        let path = self.dir.join(name);
        std::fs::write(&path, text).expect("the manifest is written");
        path.to_string_lossy().into_owned()
    }

    /// Applies the KopfExample CRD and waits until it is established.
    async fn apply_crd(&self) {
        let crd = self.manifest("crd.yaml", &crd());
        let out = self.ok(&["apply", "-f", &crd]).await;
        assert_eq!(
            out.trim(),
            format!("customresourcedefinition.apiextensions.k8s.io/{CRD_NAME} created")
        );
        let out = self
            .ok(&[
                "wait",
                "--for=condition=established",
                &format!("crd/{CRD_NAME}"),
                "--timeout=30s",
            ])
            .await;
        assert_eq!(
            out.trim(),
            format!("customresourcedefinition.apiextensions.k8s.io/{CRD_NAME} condition met")
        );
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn describe(args: &[&str], output: &Output) -> String {
    format!(
        "`kubectl {}` exited with {}\n--- stdout:\n{}\n--- stderr:\n{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    )
}

/// kubectl's path (or a loud skip), the turn among slow tests, a fresh server, and kubectl
/// pointed at it.
pub(crate) async fn setup(
    test: &str,
) -> Option<(SemaphorePermit<'static>, FakeApiServer, Kubectl)> {
    let path = support::kubectl(test)?;
    let permit = support::serial().await;
    let server = FakeApiServer::start().await.expect("the server starts");
    let kubectl = Kubectl::new(test, path, &server);
    Some((permit, server, kubectl))
}

/// Lines that a background kubectl prints, read as they come.
struct LineReader(Lines<BufReader<ChildStdout>>);

impl LineReader {
    fn of(child: &mut Child) -> LineReader {
        LineReader(BufReader::new(child.stdout.take().expect("stdout is piped")).lines())
    }

    /// The next line; fails the test if none comes in time.
    async fn next(&mut self, what: &str) -> String {
        match tokio::time::timeout(DEADLINE, self.0.next_line()).await {
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None)) => panic!("kubectl's output ended while waiting for {what}"),
            Ok(Err(error)) => {
                panic!("reading kubectl's output failed while waiting for {what}: {error}")
            }
            Err(_) => panic!("timed out after {DEADLINE:?} waiting for {what}"),
        }
    }
}

const CRD_NAME: &str = "kopfexamples.kopf.dev";

/// Kopf's example CRD (the fixture: namespaced, with a status subresource, an open schema
/// for `spec` and `status`, printer columns), with two more printer columns: one only in
/// `-o wide`, and a date.
fn crd() -> String {
    let mut crd = fixtures::kopfexample_crd();
    let columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array_mut()
        .expect("the fixture has printer columns");
    columns.push(json!({"name": "Field", "type": "string", "priority": 1,
                        "jsonPath": ".spec.field", "description": "Only in the wide output."}));
    columns.push(json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}));
    serde_norway::to_string(&crd).expect("a CRD as YAML")
}

/// A KopfExample manifest; `extra` is more YAML, indented as top-level keys.
fn example(name: &str, duration: &str, extra: &str) -> String {
    format!(
        "apiVersion: kopf.dev/v1\nkind: KopfExample\nmetadata:\n  name: {name}\nspec:\n  duration: {duration}\n{extra}"
    )
}

/// The kube-rs view of KopfExamples in `default`.
fn examples(server: &FakeApiServer) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("kopf.dev", "v1", "KopfExample");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "kopfexamples");
    Api::namespaced_with(server.client(), "default", &resource)
}

/// `kubectl create namespace`: kubectl sends this one as a protobuf body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_namespace_imperatively() {
    let Some((_turn, server, kubectl)) = setup("create_namespace_imperatively").await else {
        return;
    };

    let out = kubectl
        .ok(&["create", "namespace", "kopf-imperative"])
        .await;
    assert_eq!(out.trim(), "namespace/kopf-imperative created");
    let phase = kubectl
        .ok(&[
            "get",
            "namespace",
            "kopf-imperative",
            "-o",
            "jsonpath={.status.phase}",
        ])
        .await;
    assert_eq!(phase, "Active");

    // It is a namespace like any other: things can be made in it (again a protobuf body).
    let out = kubectl
        .ok(&[
            "create",
            "configmap",
            "inside",
            "-n",
            "kopf-imperative",
            "--from-literal=key=value",
        ])
        .await;
    assert_eq!(out.trim(), "configmap/inside created");
    let configmap = kubectl
        .json(&["get", "configmap", "inside", "-n", "kopf-imperative"])
        .await;
    assert_eq!(configmap["data"], json!({"key": "value"}));

    let err = kubectl
        .fails(&["create", "namespace", "kopf-imperative"])
        .await;
    assert!(
        err.contains("AlreadyExists")
            && err.contains(r#"namespaces "kopf-imperative" already exists"#),
        "{err}"
    );

    drop(kubectl);
    server.stop().await;
}

/// `kubectl apply -f` of a Namespace manifest, twice, then with a change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_namespace_manifest() {
    let Some((_turn, server, kubectl)) = setup("apply_namespace_manifest").await else {
        return;
    };
    let manifest = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kopf-declarative\n";
    let path = kubectl.manifest("namespace.yaml", manifest);

    let out = kubectl.ok(&["apply", "-f", &path]).await;
    assert_eq!(out.trim(), "namespace/kopf-declarative created");
    let phase = kubectl
        .ok(&[
            "get",
            "ns",
            "kopf-declarative",
            "-o",
            "jsonpath={.status.phase}",
        ])
        .await;
    assert_eq!(phase, "Active");

    let out = kubectl.ok(&["apply", "-f", &path]).await;
    assert_eq!(out.trim(), "namespace/kopf-declarative unchanged");

    let labelled = format!("{manifest}  labels:\n    team: kopf\n");
    let path = kubectl.manifest("namespace.yaml", &labelled);
    let out = kubectl.ok(&["apply", "-f", &path]).await;
    assert_eq!(out.trim(), "namespace/kopf-declarative configured");
    let namespace = kubectl
        .json(&["get", "namespace", "kopf-declarative"])
        .await;
    assert_eq!(namespace["metadata"]["labels"]["team"], "kopf");
    assert_eq!(namespace["status"]["phase"], "Active");
    let applied =
        namespace["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .expect("kubectl keeps what it applied");
    let applied: Value = serde_json::from_str(applied).expect("the annotation is JSON");
    assert_eq!(applied["metadata"]["labels"]["team"], "kopf");

    drop(kubectl);
    server.stop().await;
}

/// A CRD applied with kubectl becomes established, and its resource is served at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_crd_and_wait_until_established() {
    let Some((_turn, server, kubectl)) = setup("apply_crd_and_wait_until_established").await else {
        return;
    };
    kubectl.apply_crd().await;

    let crd = kubectl.json(&["get", "crd", CRD_NAME]).await;
    let conditions = crd["status"]["conditions"]
        .as_array()
        .expect("the CRD has conditions");
    for kind in ["Established", "NamesAccepted"] {
        assert!(
            conditions
                .iter()
                .any(|c| c["type"] == kind && c["status"] == "True"),
            "no {kind}=True among {conditions:?}"
        );
    }
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "KopfExample");
    assert_eq!(crd["status"]["acceptedNames"]["plural"], "kopfexamples");
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));

    let output = kubectl.run(&["get", "kopfexamples"]).await;
    assert!(
        output.status.success(),
        "{}",
        describe(&["get", "kopfexamples"], &output)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        "No resources found in default namespace."
    );

    // `kubectl explain` reads the schema from the server's OpenAPI v3 documents.
    let explained = kubectl.ok(&["explain", "kopfexamples"]).await;
    assert!(
        explained.contains("KopfExample")
            && explained.contains("spec")
            && explained.contains("status"),
        "{explained}"
    );

    drop(kubectl);
    server.stop().await;
}

/// Client-side apply: created, configured, unchanged; fields others set are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_twice_with_a_change() {
    let Some((_turn, server, kubectl)) = setup("apply_twice_with_a_change").await else {
        return;
    };
    kubectl.apply_crd().await;

    let path = kubectl.manifest(
        "example.yaml",
        &example("kopf-example-1", "1m", "  field: value\n"),
    );
    let out = kubectl.ok(&["apply", "-f", &path]).await;
    assert_eq!(out.trim(), "kopfexample.kopf.dev/kopf-example-1 created");
    let first = kubectl
        .json(&["get", "kopfexample", "kopf-example-1"])
        .await;
    assert_eq!(first["spec"], json!({"duration": "1m", "field": "value"}));
    assert_eq!(first["metadata"]["generation"], 1);

    // Changed: a new duration, `field` removed, a label added.
    let changed = example("kopf-example-1", "2m", "")
        .replace("metadata:\n", "metadata:\n  labels:\n    app: kopf\n");
    let path = kubectl.manifest("example.yaml", &changed);
    let out = kubectl.ok(&["apply", "-f", &path]).await;
    assert_eq!(out.trim(), "kopfexample.kopf.dev/kopf-example-1 configured");
    let second = kubectl
        .json(&["get", "kopfexample", "kopf-example-1"])
        .await;
    assert_eq!(
        second["spec"],
        json!({"duration": "2m"}),
        "the removed field is gone"
    );
    assert_eq!(second["metadata"]["labels"], json!({"app": "kopf"}));
    assert_eq!(second["metadata"]["generation"], 2);
    assert_eq!(second["metadata"]["uid"], first["metadata"]["uid"]);
    let applied =
        second["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .expect("kubectl keeps what it applied");
    let applied: Value = serde_json::from_str(applied).expect("the annotation is JSON");
    assert_eq!(applied["spec"], json!({"duration": "2m"}));
    assert_eq!(applied["metadata"]["labels"], json!({"app": "kopf"}));

    let out = kubectl.ok(&["apply", "-f", &path]).await;
    assert_eq!(out.trim(), "kopfexample.kopf.dev/kopf-example-1 unchanged");
    let third = kubectl
        .json(&["get", "kopfexample", "kopf-example-1"])
        .await;
    assert_eq!(
        third["metadata"]["resourceVersion"],
        second["metadata"]["resourceVersion"]
    );

    // A field that someone else set and the manifest never had survives a re-apply.
    examples(&server)
        .patch(
            "kopf-example-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"other": "kept"}})),
        )
        .await
        .expect("the patch through kube-rs works");
    let out = kubectl.ok(&["apply", "-f", &path]).await;
    assert_eq!(out.trim(), "kopfexample.kopf.dev/kopf-example-1 unchanged");
    let fourth = kubectl
        .json(&["get", "kopfexample", "kopf-example-1"])
        .await;
    assert_eq!(fourth["spec"], json!({"duration": "2m", "other": "kept"}));

    drop(kubectl);
    server.stop().await;
}

/// `kubectl get -o yaml`, and the CRD's printer columns in the default and wide output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_as_yaml_and_with_printer_columns() {
    let Some((_turn, server, kubectl)) = setup("get_as_yaml_and_with_printer_columns").await else {
        return;
    };
    kubectl.apply_crd().await;
    let path = kubectl.manifest(
        "example.yaml",
        &example("kopf-example-1", "1m", "  field: wide-only\n"),
    );
    kubectl.ok(&["apply", "-f", &path]).await;
    let status = r#"{"status": {"create_fn": {"children": "3", "message": "hello"}}}"#;
    let out = kubectl
        .ok(&[
            "patch",
            "kopfexample",
            "kopf-example-1",
            "--subresource=status",
            "--type=merge",
            "-p",
            status,
        ])
        .await;
    assert_eq!(out.trim(), "kopfexample.kopf.dev/kopf-example-1 patched");

    let yaml = kubectl
        .ok(&["get", "kopfexample", "kopf-example-1", "-o", "yaml"])
        .await;
    let object: Value =
        serde_norway::from_str(&yaml).unwrap_or_else(|e| panic!("not YAML ({e}): {yaml}"));
    assert_eq!(object["apiVersion"], "kopf.dev/v1");
    assert_eq!(object["kind"], "KopfExample");
    assert_eq!(object["metadata"]["name"], "kopf-example-1");
    assert_eq!(object["metadata"]["namespace"], "default");
    assert_eq!(
        object["spec"],
        json!({"duration": "1m", "field": "wide-only"})
    );
    assert_eq!(object["status"]["create_fn"]["message"], "hello");

    let names = kubectl.ok(&["get", "kopfexamples", "-o", "name"]).await;
    assert_eq!(names.trim(), "kopfexample.kopf.dev/kopf-example-1");

    // PRINTER COLUMNS: these assertions depend on the server's Table output (table.rs):
    // kubectl asks for `as=Table` and prints the columns the server defines.
    let table = kubectl.ok(&["get", "kopfexamples"]).await;
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "a header and one row: {table}");
    assert_eq!(
        rows[0],
        ["NAME", "DURATION", "CHILDREN", "MESSAGE", "AGE"],
        "{table}"
    );
    assert_eq!(
        rows[1][..4],
        ["kopf-example-1", "1m", "3", "hello"],
        "{table}"
    );
    let wide = kubectl.ok(&["get", "kopfexamples", "-o", "wide"]).await;
    let rows: Vec<Vec<&str>> = wide
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        ["NAME", "DURATION", "CHILDREN", "MESSAGE", "FIELD", "AGE"],
        "{wide}"
    );
    assert_eq!(
        rows[1][..5],
        ["kopf-example-1", "1m", "3", "hello", "wide-only"],
        "{wide}"
    );

    drop(kubectl);
    server.stop().await;
}

/// `kubectl get -w` sees changes made meanwhile through kube-rs and through another kubectl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_sees_changes() {
    let Some((_turn, server, kubectl)) = setup("get_watch_sees_changes").await else {
        return;
    };
    kubectl.apply_crd().await;
    let path = kubectl.manifest("one.yaml", &example("kopf-example-1", "1m", ""));
    kubectl.ok(&["apply", "-f", &path]).await;

    let mut watcher = kubectl.spawn(&[
        "get",
        "kopfexamples",
        "--watch",
        "--output-watch-events",
        "-o",
        r#"jsonpath={.type} {.object.metadata.name}={.object.spec.duration}{"\n"}"#,
    ]);
    let mut lines = LineReader::of(&mut watcher);
    assert_eq!(
        lines.next("the existing object").await,
        "ADDED kopf-example-1=1m"
    );
    wait("kubectl's watch to open", || async {
        (server.stats().open_watches > 0).then_some(())
    })
    .await;

    examples(&server)
        .patch(
            "kopf-example-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"duration": "2m"}})),
        )
        .await
        .expect("the patch through kube-rs works");
    assert_eq!(
        lines.next("the change through kube-rs").await,
        "MODIFIED kopf-example-1=2m"
    );

    let path = kubectl.manifest("two.yaml", &example("kopf-example-2", "3m", ""));
    kubectl.ok(&["apply", "-f", &path]).await;
    assert_eq!(
        lines.next("the creation by another kubectl").await,
        "ADDED kopf-example-2=3m"
    );
    kubectl
        .ok(&["delete", "kopfexample", "kopf-example-2"])
        .await;
    assert_eq!(
        lines.next("the deletion by another kubectl").await,
        "DELETED kopf-example-2=3m"
    );

    assert!(
        watcher
            .try_wait()
            .expect("the watcher's state is known")
            .is_none(),
        "the watcher still runs"
    );
    watcher.start_kill().expect("the watcher is killed");
    let status = tokio::time::timeout(DEADLINE, watcher.wait())
        .await
        .expect("the killed watcher ends in time")
        .expect("the watcher's exit is known");
    assert!(!status.success());
    wait("the server to see the watch go", || async {
        (server.stats().open_watches == 0).then_some(())
    })
    .await;

    drop(kubectl);
    server.stop().await;
}

/// `kubectl patch` with merge and JSON patches, a failing JSON-patch test, and the status
/// subresource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_merge_and_json() {
    let Some((_turn, server, kubectl)) = setup("patch_merge_and_json").await else {
        return;
    };
    kubectl.apply_crd().await;
    let extra = "  field: value\n  items:\n    - item1\n    - item2\n";
    let path = kubectl.manifest("example.yaml", &example("kopf-example-1", "1m", extra));
    kubectl.ok(&["apply", "-f", &path]).await;
    let get = ["get", "kopfexample", "kopf-example-1"];

    let merge = r#"{"spec": {"field": "merged", "duration": null, "new": {"nested": true}}}"#;
    let out = kubectl
        .ok(&[
            "patch",
            "kopfexample",
            "kopf-example-1",
            "--type",
            "merge",
            "-p",
            merge,
        ])
        .await;
    assert_eq!(out.trim(), "kopfexample.kopf.dev/kopf-example-1 patched");
    let object = kubectl.json(&get).await;
    assert_eq!(
        object["spec"],
        json!({"field": "merged", "items": ["item1", "item2"], "new": {"nested": true}})
    );
    assert_eq!(object["metadata"]["generation"], 2);

    let json_patch = r#"[
        {"op": "add", "path": "/spec/items/-", "value": "item3"},
        {"op": "replace", "path": "/spec/field", "value": "replaced"},
        {"op": "remove", "path": "/spec/new"},
        {"op": "add", "path": "/metadata/labels", "value": {"patched": "yes"}}
    ]"#;
    let out = kubectl
        .ok(&[
            "patch",
            "kopfexample",
            "kopf-example-1",
            "--type",
            "json",
            "-p",
            json_patch,
        ])
        .await;
    assert_eq!(out.trim(), "kopfexample.kopf.dev/kopf-example-1 patched");
    let object = kubectl.json(&get).await;
    assert_eq!(
        object["spec"],
        json!({"field": "replaced", "items": ["item1", "item2", "item3"]})
    );
    assert_eq!(object["metadata"]["labels"], json!({"patched": "yes"}));
    assert_eq!(object["metadata"]["generation"], 3);

    // A failing `test` operation rejects the whole patch.
    let failing = r#"[{"op": "test", "path": "/spec/field", "value": "wrong"}, {"op": "remove", "path": "/spec/items"}]"#;
    kubectl
        .fails(&[
            "patch",
            "kopfexample",
            "kopf-example-1",
            "--type",
            "json",
            "-p",
            failing,
        ])
        .await;
    let after = kubectl.json(&get).await;
    assert_eq!(after["spec"], object["spec"]);
    assert_eq!(
        after["metadata"]["resourceVersion"],
        object["metadata"]["resourceVersion"]
    );

    // Status goes through its subresource, and does not change the generation; on the main
    // resource, status is ignored.
    let status = r#"{"status": {"phase": "done"}}"#;
    kubectl
        .ok(&[
            "patch",
            "kopfexample",
            "kopf-example-1",
            "--subresource=status",
            "--type=merge",
            "-p",
            status,
        ])
        .await;
    let object = kubectl.json(&get).await;
    assert_eq!(object["status"], json!({"phase": "done"}));
    assert_eq!(object["metadata"]["generation"], 3);
    let ignored = r#"{"status": {"phase": "ignored"}}"#;
    let out = kubectl
        .ok(&[
            "patch",
            "kopfexample",
            "kopf-example-1",
            "--type=merge",
            "-p",
            ignored,
        ])
        .await;
    assert_eq!(
        out.trim(),
        "kopfexample.kopf.dev/kopf-example-1 patched (no change)"
    );
    assert_eq!(kubectl.json(&get).await["status"], json!({"phase": "done"}));

    drop(kubectl);
    server.stop().await;
}

/// `kubectl api-resources` lists the CRD's resource with its short names, which then work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_resources_lists_the_crd() {
    let Some((_turn, server, kubectl)) = setup("api_resources_lists_the_crd").await else {
        return;
    };
    kubectl.apply_crd().await;

    let listed = kubectl.ok(&["api-resources", "--api-group=kopf.dev"]).await;
    let row: Vec<&str> = listed
        .lines()
        .find(|l| l.starts_with("kopfexamples "))
        .unwrap_or_else(|| panic!("no kopfexamples in: {listed}"))
        .split_whitespace()
        .collect();
    assert_eq!(
        row,
        [
            "kopfexamples",
            "kopfexes,kopfex,kexes,kex",
            "kopf.dev/v1",
            "true",
            "KopfExample"
        ]
    );

    let names = kubectl.ok(&["api-resources", "-o", "name"]).await;
    assert!(
        names.lines().any(|l| l == "kopfexamples.kopf.dev"),
        "{names}"
    );
    assert!(names.lines().any(|l| l == "configmaps"), "{names}");
    assert!(
        names
            .lines()
            .any(|l| l == "customresourcedefinitions.apiextensions.k8s.io"),
        "{names}"
    );

    let path = kubectl.manifest("example.yaml", &example("kopf-example-1", "1m", ""));
    kubectl.ok(&["apply", "-f", &path]).await;
    for alias in [
        "kex",
        "kexes",
        "kopfex",
        "kopfexes",
        "kopfexample",
        "kopfexamples.kopf.dev",
        "KopfExample",
    ] {
        let name = kubectl
            .ok(&["get", alias, "kopf-example-1", "-o", "name"])
            .await;
        assert_eq!(
            name.trim(),
            "kopfexample.kopf.dev/kopf-example-1",
            "via {alias}"
        );
    }

    drop(kubectl);
    server.stop().await;
}

/// `kubectl delete --wait` waits while a finalizer holds the object, and ends when it goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_waits_for_finalizers() {
    let Some((_turn, server, kubectl)) = setup("delete_waits_for_finalizers").await else {
        return;
    };
    kubectl.apply_crd().await;
    let held = example("kopf-example-1", "1m", "").replace(
        "metadata:\n",
        "metadata:\n  finalizers:\n    - kopf.dev/test\n",
    );
    let path = kubectl.manifest("example.yaml", &held);
    kubectl.ok(&["apply", "-f", &path]).await;

    server.reset_requests();
    let delete = ["delete", "kopfexample", "kopf-example-1", "--wait=true"];
    let mut deleter = kubectl.spawn(&delete);
    let object = wait("the deletion to be marked", || async {
        let object = kubectl
            .json(&["get", "kopfexample", "kopf-example-1"])
            .await;
        (!object["metadata"]["deletionTimestamp"].is_null()).then_some(object)
    })
    .await;
    assert_eq!(object["metadata"]["finalizers"], json!(["kopf.dev/test"]));
    // kubectl waits for the deletion with a watch on the object.
    wait("kubectl delete to watch the object", || async {
        server
            .requests()
            .iter()
            .any(|r| r.verb == "watch" && r.resource == "kopfexamples.kopf.dev")
            .then_some(())
    })
    .await;
    assert!(
        deleter
            .try_wait()
            .expect("the deleter's state is known")
            .is_none(),
        "kubectl delete ended while the finalizer was there"
    );

    let out = kubectl
        .ok(&[
            "patch",
            "kopfexample",
            "kopf-example-1",
            "--type",
            "merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ])
        .await;
    assert_eq!(out.trim(), "kopfexample.kopf.dev/kopf-example-1 patched");

    let output = tokio::time::timeout(DEADLINE, deleter.wait_with_output())
        .await
        .expect("kubectl delete ends once the finalizer is gone")
        .expect("kubectl delete's output is read");
    assert!(output.status.success(), "{}", describe(&delete, &output));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        r#"kopfexample.kopf.dev "kopf-example-1" deleted"#
    );

    let err = kubectl
        .fails(&["get", "kopfexample", "kopf-example-1"])
        .await;
    assert!(
        err.contains("NotFound")
            && err.contains(r#"kopfexamples.kopf.dev "kopf-example-1" not found"#),
        "{err}"
    );

    drop(kubectl);
    server.stop().await;
}

/// `kubectl apply --server-side`: creates, updates, records kubectl as the field manager, and
/// reports conflicts with other managers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply() {
    let Some((_turn, server, kubectl)) = setup("server_side_apply").await else {
        return;
    };
    kubectl.apply_crd().await;

    let path = kubectl.manifest(
        "example.yaml",
        &example("kopf-example-1", "1m", "  field: value\n"),
    );
    let out = kubectl.ok(&["apply", "--server-side", "-f", &path]).await;
    assert_eq!(
        out.trim(),
        "kopfexample.kopf.dev/kopf-example-1 serverside-applied"
    );
    let path = kubectl.manifest("example.yaml", &example("kopf-example-1", "2m", ""));
    let out = kubectl.ok(&["apply", "--server-side", "-f", &path]).await;
    assert_eq!(
        out.trim(),
        "kopfexample.kopf.dev/kopf-example-1 serverside-applied"
    );

    let object = kubectl
        .json(&[
            "get",
            "kopfexample",
            "kopf-example-1",
            "--show-managed-fields",
        ])
        .await;
    assert_eq!(
        object["spec"],
        json!({"duration": "2m"}),
        "the field no longer applied is gone"
    );
    assert_eq!(object["metadata"]["generation"], 2);
    assert!(
        object["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_null()
    );
    let managed = object["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields are there");
    let entry = managed
        .iter()
        .find(|m| m["manager"] == "kubectl")
        .unwrap_or_else(|| panic!("{managed:?}"));
    assert_eq!(entry["operation"], "Apply");
    assert_eq!(entry["apiVersion"], "kopf.dev/v1");
    assert_eq!(entry["fieldsType"], "FieldsV1");
    assert_eq!(entry["fieldsV1"]["f:spec"], json!({"f:duration": {}}));

    // Another manager that applies another value conflicts, unless it forces.
    let path = kubectl.manifest("alice.yaml", &example("kopf-example-1", "3m", ""));
    let alice = [
        "apply",
        "--server-side",
        "--field-manager=alice",
        "-f",
        &path,
    ];
    let err = kubectl.fails(&alice).await;
    assert!(
        err.contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.duration"#),
        "{err}"
    );
    let forced: Vec<&str> = alice.iter().copied().chain(["--force-conflicts"]).collect();
    kubectl.ok(&forced).await;
    let object = kubectl
        .json(&[
            "get",
            "kopfexample",
            "kopf-example-1",
            "--show-managed-fields",
        ])
        .await;
    assert_eq!(object["spec"], json!({"duration": "3m"}));
    let managers: Vec<&str> = object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert_eq!(managers, ["alice"], "the forced field moved to alice");

    drop(kubectl);
    server.stop().await;
}

/// `kubectl apply` of a ConfigMap (a built-in: kubectl sends strategic merge patches).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_builtin_twice_with_a_change() {
    let Some((_turn, server, kubectl)) = setup("apply_builtin_twice_with_a_change").await else {
        return;
    };
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  labels:\n    app: kopf\ndata:\n  one: \"1\"\n  two: \"2\"\n";
    let path = kubectl.manifest("configmap.yaml", manifest);
    let out = kubectl.ok(&["apply", "-f", &path]).await;
    assert_eq!(out.trim(), "configmap/settings created");

    let changed = manifest
        .replace("  one: \"1\"\n", "")
        .replace("two: \"2\"", "two: \"22\"\n  three: \"3\"");
    let path = kubectl.manifest("configmap.yaml", &changed);
    server.reset_requests();
    let out = kubectl.ok(&["apply", "-f", &path]).await;
    assert_eq!(out.trim(), "configmap/settings configured");
    let patches: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.verb == "patch")
        .collect();
    assert_eq!(patches.len(), 1, "{patches:?}");
    assert_eq!(patches[0].resource, "configmaps");
    assert_eq!(
        patches[0].content_type.as_deref(),
        Some("application/strategic-merge-patch+json")
    );
    assert_eq!(patches[0].code, 200);

    let configmap = kubectl.json(&["get", "configmap", "settings"]).await;
    assert_eq!(configmap["data"], json!({"two": "22", "three": "3"}));
    assert_eq!(configmap["metadata"]["labels"], json!({"app": "kopf"}));
    let out = kubectl.ok(&["apply", "-f", &path]).await;
    assert_eq!(out.trim(), "configmap/settings unchanged");

    drop(kubectl);
    server.stop().await;
}

/// `kubectl delete namespace` removes the namespace and everything in it, and waits while a
/// finalizer holds something inside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_namespace_with_contents() {
    let Some((_turn, server, kubectl)) = setup("delete_namespace_with_contents").await else {
        return;
    };
    kubectl.apply_crd().await;
    let before_namespace = server.stats().objects - 1;

    // Plain contents: gone with the namespace (and what the cluster put in it).
    kubectl.ok(&["create", "namespace", "kopf-doomed"]).await;
    let path = kubectl.manifest("example.yaml", &example("kopf-example-1", "1m", ""));
    kubectl
        .ok(&["apply", "-n", "kopf-doomed", "-f", &path])
        .await;
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  key: value\n";
    let cm = kubectl.manifest("configmap.yaml", cm);
    kubectl.ok(&["apply", "-n", "kopf-doomed", "-f", &cm]).await;
    let out = kubectl.ok(&["delete", "namespace", "kopf-doomed"]).await;
    assert_eq!(out.trim(), r#"namespace "kopf-doomed" deleted"#);
    let err = kubectl.fails(&["get", "namespace", "kopf-doomed"]).await;
    assert!(
        err.contains(r#"namespaces "kopf-doomed" not found"#),
        "{err}"
    );
    let leftovers = [
        "get",
        "kopfexamples,configmaps",
        "-n",
        "kopf-doomed",
        "-o",
        "name",
    ];
    let output = kubectl.run(&leftovers).await;
    assert!(output.status.success(), "{}", describe(&leftovers, &output));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "",
        "nothing is left in the namespace"
    );
    assert_eq!(
        server.stats().objects,
        before_namespace + 1,
        "what the cluster booted with and the CRD are left"
    );

    // A finalizer inside holds the namespace in Terminating until it is removed.
    kubectl.ok(&["create", "namespace", "kopf-held"]).await;
    let held = example("kopf-example-1", "1m", "").replace(
        "metadata:\n",
        "metadata:\n  finalizers:\n    - kopf.dev/test\n",
    );
    let path = kubectl.manifest("held.yaml", &held);
    kubectl.ok(&["apply", "-n", "kopf-held", "-f", &path]).await;
    kubectl.ok(&["apply", "-n", "kopf-held", "-f", &cm]).await;
    let mut deleter = kubectl.spawn(&["delete", "namespace", "kopf-held"]);
    wait("the namespace to terminate", || async {
        let phase = kubectl
            .ok(&[
                "get",
                "namespace",
                "kopf-held",
                "-o",
                "jsonpath={.status.phase}",
            ])
            .await;
        (phase == "Terminating").then_some(())
    })
    .await;
    let left = kubectl
        .ok(&[
            "get",
            "kopfexamples,configmaps",
            "-n",
            "kopf-held",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(
        left.trim(),
        "kopfexample.kopf.dev/kopf-example-1",
        "only the held object is left"
    );
    let object = kubectl
        .json(&["get", "kopfexample", "kopf-example-1", "-n", "kopf-held"])
        .await;
    assert!(
        !object["metadata"]["deletionTimestamp"].is_null(),
        "{object}"
    );
    assert!(
        deleter
            .try_wait()
            .expect("the deleter's state is known")
            .is_none(),
        "kubectl delete waits"
    );
    let new_cm = kubectl.manifest(
        "new.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: latecomer\ndata:\n  key: value\n",
    );
    let err = kubectl
        .fails(&["apply", "-n", "kopf-held", "-f", &new_cm])
        .await;
    assert!(err.contains("because it is being terminated"), "{err}");

    let unhold = r#"[{"op": "remove", "path": "/metadata/finalizers"}]"#;
    kubectl
        .ok(&[
            "patch",
            "kopfexample",
            "kopf-example-1",
            "-n",
            "kopf-held",
            "--type",
            "json",
            "-p",
            unhold,
        ])
        .await;
    let output = tokio::time::timeout(DEADLINE, deleter.wait_with_output())
        .await
        .expect("kubectl delete ends once the namespace is empty")
        .expect("kubectl delete's output is read");
    assert!(
        output.status.success(),
        "{}",
        describe(&["delete", "namespace", "kopf-held"], &output)
    );
    let err = kubectl.fails(&["get", "namespace", "kopf-held"]).await;
    assert!(err.contains(r#"namespaces "kopf-held" not found"#), "{err}");

    drop(kubectl);
    server.stop().await;
}

/// kubectl validates strictly by default: the server rejects unknown fields; valid manifests
/// never need `--validate=false`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_validation_of_unknown_fields() {
    let Some((_turn, server, kubectl)) = setup("strict_validation_of_unknown_fields").await else {
        return;
    };
    kubectl.apply_crd().await;
    let typo = "apiVersion: kopf.dev/v1\nkind: KopfExample\nmetadata:\n  name: kopf-typo\nspex:\n  duration: 1m\n";
    let path = kubectl.manifest("typo.yaml", typo);

    for verb in ["apply", "create"] {
        let err = kubectl.fails(&[verb, "-f", &path]).await;
        assert!(err.contains(r#"unknown field "spex""#), "{verb}: {err}");
        let err = kubectl.fails(&["get", "kopfexample", "kopf-typo"]).await;
        assert!(err.contains("NotFound"), "{verb}: {err}");
    }

    // Warned about, and pruned, when asked to warn.
    let output = kubectl
        .run(&["apply", "--validate=warn", "-f", &path])
        .await;
    assert!(
        output.status.success(),
        "{}",
        describe(&["apply", "--validate=warn"], &output)
    );
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains(r#"unknown field "spex""#), "{err}");
    let object = kubectl.json(&["get", "kopfexample", "kopf-typo"]).await;
    assert!(object.get("spex").is_none(), "pruned: {object}");
    kubectl.ok(&["delete", "kopfexample", "kopf-typo"]).await;

    // The same for built-ins.
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: typo\ndato:\n  key: value\n";
    let cm = kubectl.manifest("configmap.yaml", cm);
    let err = kubectl.fails(&["apply", "-f", &cm]).await;
    assert!(err.contains(r#"unknown field "dato""#), "{err}");

    // Correct manifests pass with the default strict validation, which the server was asked for.
    server.reset_requests();
    let path = kubectl.manifest(
        "example.yaml",
        &example("kopf-example-1", "1m", "  anything:\n    goes: here\n"),
    );
    let out = kubectl.ok(&["apply", "-f", &path]).await;
    assert_eq!(out.trim(), "kopfexample.kopf.dev/kopf-example-1 created");
    let creations: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.verb == "create")
        .collect();
    assert_eq!(creations.len(), 1, "{creations:?}");
    assert!(
        creations[0].query.contains("fieldValidation=Strict"),
        "{:?}",
        creations[0]
    );
    let object = kubectl
        .json(&["get", "kopfexample", "kopf-example-1"])
        .await;
    assert_eq!(
        object["spec"],
        json!({"duration": "1m", "anything": {"goes": "here"}})
    );

    drop(kubectl);
    server.stop().await;
}

/// `kubectl diff` and `--dry-run=server` go through the server's checks but store nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_dry_runs_store_nothing() {
    let Some((_turn, server, kubectl)) = setup("server_dry_runs_store_nothing").await else {
        return;
    };
    kubectl.apply_crd().await;
    let path = kubectl.manifest("example.yaml", &example("kopf-example-1", "1m", ""));
    kubectl.ok(&["apply", "-f", &path]).await;
    let applied = kubectl.manifest("applied.yaml", &example("kopf-example-2", "1m", ""));
    kubectl
        .ok(&["apply", "--server-side", "-f", &applied])
        .await;
    kubectl.ok(&["create", "namespace", "spare"]).await;
    let before = server.stats().resource_version;
    let get_duration = [
        "get",
        "kopfexample",
        "kopf-example-1",
        "-o",
        "jsonpath={.spec.duration}",
    ];

    let output = kubectl.run(&["diff", "-f", &path]).await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "no differences: {}",
        describe(&["diff"], &output)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");

    let changed = kubectl.manifest("changed.yaml", &example("kopf-example-1", "2m", ""));
    let output = kubectl.run(&["diff", "-f", &changed]).await;
    assert_eq!(
        output.status.code(),
        Some(1),
        "differences: {}",
        describe(&["diff"], &output)
    );
    let diff = String::from_utf8_lossy(&output.stdout);
    assert!(
        diff.contains("-  duration: 1m") && diff.contains("+  duration: 2m"),
        "{diff}"
    );
    let bumped = diff
        .lines()
        .any(|l| (l.starts_with("- ") || l.starts_with("+ ")) && l.contains("resourceVersion"));
    assert!(
        !bumped,
        "a dry run does not bump the resourceVersion: {diff}"
    );
    assert_eq!(kubectl.ok(&get_duration).await, "1m");

    let out = kubectl
        .ok(&["apply", "--dry-run=server", "-f", &changed])
        .await;
    assert_eq!(
        out.trim(),
        "kopfexample.kopf.dev/kopf-example-1 configured (server dry run)"
    );
    // Server-side apply: an update and a creation.
    let applied = kubectl.manifest("applied.yaml", &example("kopf-example-2", "2m", ""));
    let out = kubectl
        .ok(&["apply", "--server-side", "--dry-run=server", "-f", &applied])
        .await;
    assert_eq!(
        out.trim(),
        "kopfexample.kopf.dev/kopf-example-2 serverside-applied (server dry run)"
    );
    let duration = kubectl
        .ok(&[
            "get",
            "kopfexample",
            "kopf-example-2",
            "-o",
            "jsonpath={.spec.duration}",
        ])
        .await;
    assert_eq!(duration, "1m");
    let new = kubectl.manifest("new.yaml", &example("kopf-example-3", "1m", ""));
    let out = kubectl
        .ok(&["apply", "--server-side", "--dry-run=server", "-f", &new])
        .await;
    assert_eq!(
        out.trim(),
        "kopfexample.kopf.dev/kopf-example-3 serverside-applied (server dry run)"
    );
    let err = kubectl
        .fails(&["get", "kopfexample", "kopf-example-3"])
        .await;
    assert!(err.contains("NotFound"), "{err}");
    let patch = r#"{"spec": {"duration": "3m"}}"#;
    let out = kubectl
        .ok(&[
            "patch",
            "kopfexample",
            "kopf-example-1",
            "--type=merge",
            "-p",
            patch,
            "--dry-run=server",
        ])
        .await;
    // (kubectl patch does not say "(server dry run)", but it asks for one: dryRun=All.)
    assert!(
        out.starts_with("kopfexample.kopf.dev/kopf-example-1 patched"),
        "{out}"
    );
    let out = kubectl
        .ok(&[
            "delete",
            "kopfexample",
            "kopf-example-1",
            "--dry-run=server",
        ])
        .await;
    assert_eq!(
        out.trim(),
        r#"kopfexample.kopf.dev "kopf-example-1" deleted (server dry run)"#
    );
    assert_eq!(kubectl.ok(&get_duration).await, "1m");

    let created = kubectl
        .json(&[
            "create",
            "configmap",
            "dry",
            "--from-literal=key=value",
            "--dry-run=server",
        ])
        .await;
    assert_eq!(created["data"], json!({"key": "value"}));
    assert!(
        created["metadata"]["uid"].is_string(),
        "the server filled it in: {created}"
    );
    assert!(
        created["metadata"].get("resourceVersion").is_none(),
        "never stored: {created}"
    );
    let err = kubectl.fails(&["get", "configmap", "dry"]).await;
    assert!(err.contains("NotFound"), "{err}");

    // `default` itself may not be deleted, not even in a dry run (NamespaceLifecycle).
    let err = kubectl
        .fails(&["delete", "namespace", "default", "--dry-run=server"])
        .await;
    assert!(err.contains("this namespace may not be deleted"), "{err}");
    let out = kubectl
        .ok(&["delete", "namespace", "spare", "--dry-run=server"])
        .await;
    assert_eq!(out.trim(), r#"namespace "spare" deleted (server dry run)"#);
    let phase = kubectl
        .ok(&[
            "get",
            "namespace",
            "spare",
            "-o",
            "jsonpath={.status.phase}",
        ])
        .await;
    assert_eq!(phase, "Active");

    // Still checked: a dry run of an invalid object fails as the real thing would.
    let typo =
        "apiVersion: kopf.dev/v1\nkind: KopfExample\nmetadata:\n  name: kopf-typo\nspex: {}\n";
    let typo = kubectl.manifest("typo.yaml", typo);
    let err = kubectl
        .fails(&["apply", "--dry-run=server", "-f", &typo])
        .await;
    assert!(err.contains(r#"unknown field "spex""#), "{err}");

    assert_eq!(
        server.stats().resource_version,
        before,
        "nothing was stored"
    );

    drop(kubectl);
    server.stop().await;
}

/// Switching an object from client-side to server-side apply works as in a real cluster: the
/// client-side apply's `Update` entry (`kubectl-client-side-apply`) owns the fields it set, the
/// first server-side apply may take over those still equal to the last-applied annotation
/// (Kubernetes' `lastAppliedManager`), and kubectl then migrates the old entry into its
/// `Apply` entry and keeps the annotation with its own `kubectl-last-applied` manager.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switch_from_client_side_to_server_side_apply() {
    let Some((_turn, server, kubectl)) =
        setup("switch_from_client_side_to_server_side_apply").await
    else {
        return;
    };
    kubectl.apply_crd().await;
    let path = kubectl.manifest("example.yaml", &example("kopf-example-1", "1m", ""));
    kubectl.ok(&["apply", "-f", &path]).await;
    let get = [
        "get",
        "kopfexample",
        "kopf-example-1",
        "--show-managed-fields",
    ];
    let object = kubectl.json(&get).await;
    let managed = object["metadata"]["managedFields"].clone();
    assert_eq!(managed.as_array().map(Vec::len), Some(1), "{managed}");
    assert_eq!(managed[0]["manager"], "kubectl-client-side-apply");
    assert_eq!(managed[0]["operation"], "Update");
    assert_eq!(managed[0]["apiVersion"], "kopf.dev/v1");
    assert_eq!(
        managed[0]["fieldsV1"],
        json!({
            "f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}},
            "f:spec": {".": {}, "f:duration": {}},
        })
    );

    let path = kubectl.manifest("example.yaml", &example("kopf-example-1", "2m", ""));
    let out = kubectl.ok(&["apply", "--server-side", "-f", &path]).await;
    assert_eq!(
        out.trim(),
        "kopfexample.kopf.dev/kopf-example-1 serverside-applied"
    );
    let object = kubectl.json(&get).await;
    assert_eq!(object["spec"], json!({"duration": "2m"}));
    let annotation =
        object["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .expect("the annotation stays");
    let last: Value = serde_json::from_str(annotation).expect("JSON");
    assert_eq!(
        last["spec"],
        json!({"duration": "2m"}),
        "the server keeps the annotation up to date for kubectl"
    );
    let managers: Vec<(&str, &str, &Value)> = object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            (
                m["manager"].as_str().unwrap_or_default(),
                m["operation"].as_str().unwrap_or_default(),
                &m["fieldsV1"],
            )
        })
        .collect();
    assert_eq!(
        managers,
        [
            ("kubectl", "Apply", &json!({"f:spec": {"f:duration": {}}})),
            (
                "kubectl-last-applied",
                "Apply",
                &json!({"f:metadata": {"f:annotations": {"f:kubectl.kubernetes.io/last-applied-configuration": {}}}})
            ),
        ],
        "the client-side entry was migrated"
    );

    // From now on, another value by another manager conflicts with kubectl.
    let path = kubectl.manifest("alice.yaml", &example("kopf-example-1", "3m", ""));
    let err = kubectl
        .fails(&[
            "apply",
            "--server-side",
            "--field-manager=alice",
            "-f",
            &path,
        ])
        .await;
    assert!(
        err.contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.duration"#),
        "{err}"
    );

    drop(kubectl);
    server.stop().await;
}
