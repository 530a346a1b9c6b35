//! Python clients against the fake API server over TLS: the official `kubernetes` client with
//! the server's CA and token, and Python Kopf's `WebhookAutoServer`, which reads the API
//! server's certificate to guess what cluster it runs next to.

use k8s_openapi::api::core::v1::ConfigMap;
use kopf_fake_apiserver::FakeApiServer;
use kube::api::{Api, DynamicObject, GroupVersionKind};
use serde_json::json;

use crate::python::{KOPF_DEADLINE, Python, scripts, server_errors, temp_dir};
use crate::support::{self, DEADLINE};

const TOKEN: &str = "s3cret";

/// A server that serves TLS and requires [`TOKEN`], its kubeconfig and its CA file in `dir`.
async fn tls_server(
    dir: &std::path::Path,
) -> (FakeApiServer, std::path::PathBuf, std::path::PathBuf) {
    let server = FakeApiServer::builder()
        .token(TOKEN)
        .start()
        .await
        .expect("starting the server");
    let kubeconfig = dir.join("kubeconfig");
    server
        .write_kubeconfig(&kubeconfig)
        .expect("writing the kubeconfig");
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, server.ca_pem().expect("a TLS server has a CA"))
        .expect("writing the CA file");
    (server, kubeconfig, ca_file)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_client_trusts_the_ca_and_sends_the_token() {
    let test = "python_tls::kubernetes_client_trusts_the_ca_and_sends_the_token";
    let Some(python) = support::python(test).await else {
        return;
    };
    let _turn = support::serial().await;
    let dir = temp_dir();
    let (server, kubeconfig, ca_file) = tls_server(dir.path()).await;

    let script = scripts().join("client_tls.py");
    let args = [script.to_str().unwrap(), ca_file.to_str().unwrap(), TOKEN];
    let mut py = Python::spawn(
        "client_tls.py",
        &python,
        &args,
        dir.path(),
        &kubeconfig,
        true,
    );

    let listed = py.next("listed").await;
    assert_eq!(listed["host"], server.url(), "{listed}");
    assert!(
        listed["namespaces"]
            .as_array()
            .is_some_and(|names| names.contains(&json!("default"))),
        "{listed}"
    );
    let created = py.next("created").await;
    assert_eq!(created["data"], json!({"over": "tls"}));
    let stored: Api<ConfigMap> = Api::default_namespaced(server.client());
    stored
        .get("from-python-tls")
        .await
        .expect("the ConfigMap Python created over TLS");

    let by_hand = py.next("by-hand").await;
    assert_eq!(by_hand["data"], json!({"over": "tls"}));
    assert!(
        by_hand["events"]
            .as_array()
            .is_some_and(|events| events.contains(&json!(["ADDED", "from-python-tls"]))),
        "{by_hand}"
    );

    let untrusted = py.next("untrusted").await;
    let error = untrusted["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("CERTIFICATE_VERIFY_FAILED"),
        "without the CA, the certificate is not trusted: {untrusted}"
    );

    let wrong = py.next("wrong-token").await;
    assert_eq!(wrong["status"], 401, "{wrong}");
    assert_eq!(wrong["body"]["reason"], "Unauthorized", "{wrong}");

    py.next("done").await;
    let status = py.exit(DEADLINE).await;
    assert!(status.success(), "the script failed: {status}");
    assert_eq!(server_errors(&server), Vec::<String>::new());
    py.stop().await;
    drop(stored);
    server.stop().await;
}

/// The ValidatingWebhookConfiguration Kopf manages in [`kopf_webhook_auto.py`].
const MANAGED: &str = "kopf-rs-tls.kopf.dev";

/// WebhookAutoServer fetches the API server's certificate, checks it for the server's
/// hostname, finds no k3s or minikube in it, reads `/version`, and then serves; on a plain-HTTP
/// server the fetch fails and Kopf never serves its webhooks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kopf_webhook_auto_server_reads_the_api_servers_certificate() {
    let test = "python_tls::kopf_webhook_auto_server_reads_the_api_servers_certificate";
    let Some(python) = support::python(test).await else {
        return;
    };
    let _turn = support::serial().await;
    let dir = temp_dir();
    let (server, kubeconfig, _) = tls_server(dir.path()).await;

    let script = scripts().join("kopf_webhook_auto.py");
    let args = [
        "-m",
        "kopf",
        "run",
        "--standalone",
        "--namespace",
        "default",
        "--verbose",
        script.to_str().unwrap(),
    ];
    let mut kopf = Python::spawn("kopf", &python, &args, dir.path(), &kubeconfig, false);

    // Kopf registers its webhook server once it is up: after the cluster detection.
    let gvk = GroupVersionKind::gvk(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
    );
    let (resource, _) = kube::discovery::pinned_kind(&server.client(), &gvk)
        .await
        .expect("the kind is served");
    let configurations: Api<DynamicObject> = Api::all_with(server.client(), &resource);
    let webhook = kopf
        .until(
            "Kopf's ValidatingWebhookConfiguration",
            KOPF_DEADLINE,
            || async {
                let managed = configurations.get(MANAGED).await.ok()?;
                let webhooks = managed.data["webhooks"].as_array()?.clone();
                webhooks
                    .into_iter()
                    .find(|webhook| webhook["clientConfig"]["caBundle"].is_string())
            },
        )
        .await;
    let log = kopf.log_text();
    assert!(
        log.contains("KOPF-WEBHOOK-CONFIGURED"),
        "the startup handler ran"
    );
    assert!(
        log.contains("Cluster detection failed, running a simple local server"),
        "the detection read the certificate, found no k3s or minikube, and went on:\n{log}"
    );
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.path == "/version" && r.code == 200),
        "the detection read /version after the certificate told it nothing"
    );
    let url = webhook["clientConfig"]["url"].as_str().expect("a url");
    assert!(url.starts_with("https://127.0.0.1:"), "{webhook}");

    // The fake server calls Kopf's webhooks: the mutating one labels what is created, the
    // validating one refuses forbidden data with Kopf's message and code.
    let mutating_gvk = GroupVersionKind::gvk(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
    );
    let (mutating, _) = kube::discovery::pinned_kind(&server.client(), &mutating_gvk)
        .await
        .expect("the kind is served");
    let mutating: Api<DynamicObject> = Api::all_with(server.client(), &mutating);
    kopf.until(
        "Kopf's MutatingWebhookConfiguration",
        KOPF_DEADLINE,
        || async {
            let managed = mutating.get(MANAGED).await.ok()?;
            managed.data["webhooks"]
                .as_array()?
                .iter()
                .find(|w| w["clientConfig"]["caBundle"].is_string())
                .cloned()
        },
    )
    .await;
    let config_maps: Api<ConfigMap> =
        Api::default_namespaced(support::client_without_retries(&server));
    let good: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "admitted"}, "data": {"k": "v"}}))
            .unwrap();
    // Kopf answers its webhooks once it has scanned the resources: until then, calls fail.
    let created = kopf
        .until("a ConfigMap admitted by Kopf", KOPF_DEADLINE, || async {
            config_maps.create(&Default::default(), &good).await.ok()
        })
        .await;
    let labels = created.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("mutated-by").map(String::as_str),
        Some("kopf"),
        "Kopf's mutation is stored"
    );
    let bad: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "refused"}, "data": {"forbidden": "yes"}}),
    )
    .unwrap();
    match config_maps.create(&Default::default(), &bad).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert_eq!(
                status.message,
                format!(
                    "admission webhook \"no-forbidden.{MANAGED}\" denied the request: forbidden data"
                )
            );
        }
        other => panic!("Kopf's validating handler refuses forbidden data: {other:?}"),
    }
    assert!(config_maps.get_opt("refused").await.unwrap().is_none());

    // Creations refused while Kopf did not answer yet (failurePolicy Fail) are the only 5xx.
    let errors: Vec<String> = server_errors(&server)
        .into_iter()
        .filter(|e| !e.starts_with("POST /api/v1/namespaces/default/configmaps?"))
        .collect();
    assert_eq!(errors, Vec::<String>::new());
    drop((configurations, mutating, config_maps));
    let status = kopf.terminate(KOPF_DEADLINE).await;
    assert!(status.success(), "Kopf exits cleanly on SIGTERM: {status}");
    kopf.stop().await;
    server.stop().await;
}
