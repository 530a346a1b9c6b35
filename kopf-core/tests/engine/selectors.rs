//! Selectors of several resources (a category, everything, a predicate) and Kopf's name forms:
//! each matched resource is served once, with the handlers of every selector matching it,
//! including resources whose CRDs appear after the start. Namespace globs: one watcher per
//! matching namespace, started and stopped as namespaces come and go.

use kopf::Invocation;
use kopf::filters::MetaFilter;
use kopf::operator::Operator;
use kopf::registry::{ChangeHandler, EventHandler, HandlerResult, Registry};
use kopf::resources::{EVERYTHING, Selector};
use kopf_testing::{
    DEADLINE, FakeApiServer, Fault, OperatorHarness, TestClient, fixtures, test_settings, wait,
};
use serde_json::{Value, json};

use crate::support::Calls;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// A namespaced CRD `plural.group` (version `v1`, with a status subresource).
fn crd(group: &str, kind: &str, short_names: &[&str], categories: &[&str]) -> Value {
    let mut crd = fixtures::free_form_crd(group, kind);
    crd["spec"]["names"]["shortNames"] = json!(short_names);
    crd["spec"]["names"]["categories"] = json!(categories);
    crd
}

/// Creates the CRD and waits until discovery serves it.
async fn add_crd(client: &kube::Client, crd: Value) {
    let (status, created) = TestClient::new(client.clone())
        .request("POST", CRDS, crd)
        .await;
    assert_eq!(status, 201, "the CRD is created: {created}");
    let (group, plural) = (
        &created["spec"]["group"],
        &created["spec"]["names"]["plural"],
    );
    let (group, plural) = (group.as_str().unwrap(), plural.as_str().unwrap());
    crate::support::wait_served(client, group, "v1", plural).await;
}

/// A server with widgets (`a.example`, short name `wdg`, category `gadgets`), gizmos
/// (`b.example`, category `gadgets`) and sprockets (`a.example`, no category).
async fn server_with_crds() -> FakeApiServer {
    let server = crate::support::apiserver(FakeApiServer::builder()).await;
    let client = server.client();
    add_crd(&client, crd("a.example", "Widget", &["wdg"], &["gadgets"])).await;
    add_crd(&client, crd("b.example", "Gizmo", &[], &["gadgets"])).await;
    add_crd(&client, crd("a.example", "Sprocket", &[], &[])).await;
    server
}

/// Creates `name` of `kind` in `group` in the default namespace, with these labels.
async fn create(client: &kube::Client, group: &str, kind: &str, name: &str, labels: Value) {
    let plural = format!("{}s", kind.to_lowercase());
    let path = format!("/apis/{group}/v1/namespaces/default/{plural}");
    let body = json!({
        "apiVersion": format!("{group}/v1"), "kind": kind,
        "metadata": {"name": name, "labels": labels}, "spec": {},
    });
    let (status, created) = TestClient::new(client.clone())
        .request("POST", &path, body)
        .await;
    assert_eq!(status, 201, "{name} is created: {created}");
}

/// A handler recording what it saw: its id, the object's kind and name, the resource.
fn recording(
    calls: &Calls,
    id: &'static str,
) -> impl Fn(Invocation) -> std::future::Ready<HandlerResult> + Send + Sync + 'static {
    let calls = calls.clone();
    move |invocation| {
        calls.record(json!({
            "id": id,
            "kind": invocation.body()["kind"],
            "name": invocation.name(),
            "resource": invocation.resource().to_string(),
        }));
        std::future::ready(Ok(None))
    }
}

fn seen(calls: &Calls) -> Vec<(String, String)> {
    let mut seen: Vec<(String, String)> = calls
        .all()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap_or_default().to_string(),
                c["name"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    seen.sort();
    seen
}

async fn wait_seen(calls: &Calls, expected: &[(&str, &str)]) {
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(id, name)| (id.to_string(), name.to_string()))
        .collect();
    wait(&format!("the handler calls {expected:?}"), || async {
        let seen = seen(calls);
        expected.iter().all(|e| seen.contains(e)).then_some(())
    })
    .await;
}

/// Waits until the operator is quiet (no request to the server for a while), so that echoes,
/// retries and late events that should not happen have had their chance to happen.
async fn settle(server: &FakeApiServer) {
    let quiet = std::time::Duration::from_millis(500);
    assert!(
        server.wait_quiet(quiet, DEADLINE).await,
        "the operator did not quiet down within {DEADLINE:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_category_serves_every_crd_in_it_including_one_created_later() {
    let calls = Calls::default();
    let registry = Registry::new().with(ChangeHandler::on_create(
        Selector::category("gadgets"),
        "create_fn",
        recording(&calls, "create_fn"),
    ));
    let harness = OperatorHarness::start_on(
        server_with_crds().await,
        Operator::new(registry).settings(test_settings()),
    )
    .await;
    let client = harness.client();

    create(&client, "a.example", "Widget", "w1", json!({})).await;
    create(&client, "b.example", "Gizmo", "g1", json!({})).await;
    create(&client, "a.example", "Sprocket", "s1", json!({})).await;
    wait_seen(&calls, &[("create_fn", "w1"), ("create_fn", "g1")]).await;

    // A CRD of the category appears: it is served without a restart.
    add_crd(&client, crd("c.example", "Doohickey", &[], &["gadgets"])).await;
    let created = wait("the new resource to be served", || async {
        let path = "/apis/c.example/v1/namespaces/default/doohickeys";
        let body =
            json!({"apiVersion": "c.example/v1", "kind": "Doohickey", "metadata": {"name": "d1"}});
        let (status, created) = harness.request("POST", path, body).await;
        status.is_success().then_some(created)
    })
    .await;
    assert_eq!(created["metadata"]["name"], "d1");
    wait_seen(&calls, &[("create_fn", "d1")]).await;
    settle(harness.server()).await;
    harness.stop().await.expect("a clean stop");

    let mut resources: Vec<(String, String)> = calls
        .all()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["resource"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    resources.sort();
    assert_eq!(
        resources,
        [
            ("d1".into(), "doohickeys.v1.c.example".into()),
            ("g1".into(), "gizmos.v1.b.example".into()),
            ("w1".into(), "widgets.v1.a.example".into()),
        ],
        "each object handled once, and nothing outside the category"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_predicate_serves_the_resources_it_accepts() {
    let calls = Calls::default();
    let gizmos_and_sprockets =
        Selector::matching(|resource| resource.kind == "Gizmo" || resource.kind == "Sprocket");
    let registry = Registry::new().with(ChangeHandler::on_create(
        gizmos_and_sprockets,
        "create_fn",
        recording(&calls, "create_fn"),
    ));
    let harness = OperatorHarness::start_on(
        server_with_crds().await,
        Operator::new(registry).settings(test_settings()),
    )
    .await;
    let client = harness.client();

    create(&client, "a.example", "Widget", "w1", json!({})).await;
    create(&client, "b.example", "Gizmo", "g1", json!({})).await;
    create(&client, "a.example", "Sprocket", "s1", json!({})).await;
    wait_seen(&calls, &[("create_fn", "g1"), ("create_fn", "s1")]).await;
    settle(harness.server()).await;
    harness.stop().await.expect("a clean stop");

    assert_eq!(
        seen(&calls),
        [
            ("create_fn".to_string(), "g1".to_string()),
            ("create_fn".to_string(), "s1".to_string())
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kopfs_name_forms_select_one_resource_and_share_its_objects() {
    let calls = Calls::default();
    // Four selectors of one resource: one processor runs all four handlers on each object
    // (they would fight over the object's state if each had its own).
    let registry = Registry::new()
        .with(ChangeHandler::on_create(
            Selector::named("Widget"),
            "by_kind",
            recording(&calls, "by_kind"),
        ))
        .with(ChangeHandler::on_create(
            Selector::named("wdg"),
            "by_short_name",
            recording(&calls, "by_short_name"),
        ))
        .with(ChangeHandler::on_create(
            Selector::named("widgets.a.example"),
            "by_plural_and_group",
            recording(&calls, "by_plural_and_group"),
        ))
        .with(ChangeHandler::on_create(
            Selector::named_in("a.example/v1", "widget"),
            "by_group_version_and_singular",
            recording(&calls, "by_group_version_and_singular"),
        ))
        .with(ChangeHandler::on_create(
            Selector::named("Gizmo.b.example"),
            "by_kind_and_group",
            recording(&calls, "by_kind_and_group"),
        ));
    let harness = OperatorHarness::start_on(
        server_with_crds().await,
        Operator::new(registry).settings(test_settings()),
    )
    .await;
    let client = harness.client();

    create(&client, "a.example", "Widget", "w1", json!({})).await;
    create(&client, "b.example", "Gizmo", "g1", json!({})).await;
    create(&client, "a.example", "Sprocket", "s1", json!({})).await;
    let expected = [
        ("by_group_version_and_singular", "w1"),
        ("by_kind", "w1"),
        ("by_kind_and_group", "g1"),
        ("by_plural_and_group", "w1"),
        ("by_short_name", "w1"),
    ];
    wait_seen(&calls, &expected).await;
    settle(harness.server()).await;
    harness.stop().await.expect("a clean stop");

    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(id, name)| (id.to_string(), name.to_string()))
        .collect();
    assert_eq!(seen(&calls), expected, "each handler once, on its resource");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_serves_crds_and_builtins_but_not_events() {
    let calls = Calls::default();
    let registry = Registry::new().with(
        EventHandler::on_event(EVERYTHING, "event_fn", recording(&calls, "event_fn"))
            .label("selected", MetaFilter::Value("yes".into())),
    );
    let harness = OperatorHarness::start_on(
        server_with_crds().await,
        Operator::new(registry).settings(test_settings()),
    )
    .await;
    let client = harness.client();

    create(
        &client,
        "a.example",
        "Widget",
        "w1",
        json!({"selected": "yes"}),
    )
    .await;
    create(&client, "a.example", "Widget", "w2", json!({})).await;
    for (name, labels) in [("cm1", json!({"selected": "yes"})), ("cm2", json!({}))] {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {}});
        let (status, created) = harness
            .request("POST", "/api/v1/namespaces/default/configmaps", body)
            .await;
        assert_eq!(status, 201, "{created}");
    }
    wait_seen(&calls, &[("event_fn", "w1"), ("event_fn", "cm1")]).await;
    settle(harness.server()).await;

    let kinds: std::collections::BTreeSet<String> = calls
        .all()
        .iter()
        .map(|c| {
            format!(
                "{}/{}",
                c["kind"].as_str().unwrap(),
                c["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        ["ConfigMap/cm1", "Widget/w1"],
        "only the labelled objects"
    );
    let watched_events = harness
        .server()
        .requests()
        .iter()
        .any(|r| r.resource.starts_with("events") && (r.verb == "watch" || r.verb == "list"));
    assert!(!watched_events, "events are not part of everything");
    let watched_configmaps = harness
        .server()
        .requests()
        .iter()
        .any(|r| r.resource == "configmaps" && r.verb == "watch");
    assert!(watched_configmaps, "built-ins are part of everything");
    harness.stop().await.expect("a clean stop");
}

// Namespace globs.

/// A server with widgets (`a.example`) and these namespaces.
async fn server_with_widgets_in(namespaces: &[&str]) -> FakeApiServer {
    let server = crate::support::apiserver(FakeApiServer::builder()).await;
    let client = server.client();
    add_crd(&client, crd("a.example", "Widget", &[], &[])).await;
    for name in namespaces {
        create_namespace(&client, name).await;
    }
    server
}

async fn create_namespace(client: &kube::Client, name: &str) {
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    let created = TestClient::new(client.clone())
        .request("POST", "/api/v1/namespaces", body)
        .await
        .1;
    assert_eq!(created["metadata"]["name"], name, "{created}");
}

/// Creates the widget `name` in `namespace`.
async fn create_widget_in(client: &kube::Client, namespace: &str, name: &str) {
    let path = format!("/apis/a.example/v1/namespaces/{namespace}/widgets");
    let body = json!({"apiVersion": "a.example/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {}});
    let created = TestClient::new(client.clone())
        .request("POST", &path, body)
        .await
        .1;
    assert!(created["metadata"]["uid"].is_string(), "{created}");
}

/// An operator creating widgets, recording each one's namespace, for these patterns.
fn widgets_operator(calls: &Calls, patterns: &[&str]) -> Operator {
    let calls = calls.clone();
    let registry = Registry::new().with(ChangeHandler::on_create(
        Selector::new("a.example", "v1", "widgets"),
        "create_fn",
        move |invocation: Invocation| {
            calls.record(json!({"namespace": invocation.namespace(), "name": invocation.name()}));
            std::future::ready(Ok(None))
        },
    ));
    Operator::new(registry)
        .settings(test_settings())
        .namespaces(patterns.iter().copied())
}

/// The namespaces of the handled widgets, sorted.
fn handled_in(calls: &Calls) -> Vec<String> {
    let mut namespaces: Vec<String> = calls
        .all()
        .iter()
        .map(|c| c["namespace"].as_str().unwrap_or("(none)").to_string())
        .collect();
    namespaces.sort();
    namespaces
}

async fn wait_handled_in(calls: &Calls, expected: &[&str]) {
    wait(&format!("widgets handled in {expected:?}"), || async {
        let handled = handled_in(calls);
        expected
            .iter()
            .all(|ns| handled.iter().any(|h| h == ns))
            .then_some(())
    })
    .await;
}

/// The namespaces of the watch requests for widgets so far (`None`: cluster-wide).
fn widget_watches(server: &FakeApiServer) -> Vec<Option<String>> {
    server
        .requests()
        .iter()
        .filter(|r| r.resource == "widgets.a.example" && r.verb == "watch")
        .map(|r| r.namespace.clone())
        .collect()
}

async fn wait_open_watches(server: &FakeApiServer, expected: usize, what: &str) {
    wait(what, || async {
        (server.stats().open_watches == expected).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_globs_are_watched_per_namespace_as_namespaces_come_and_go() {
    let calls = Calls::default();
    let server = server_with_widgets_in(&["team-a", "team-b", "team-skip", "other"]).await;
    // One pattern: `team-*` narrowed by `!team-skip*`. (As separate `-n` values, `!team-skip*`
    // would serve every namespace but those, and `team-*` would serve them: Kopf serves a
    // namespace that any pattern matches.)
    let operator = widgets_operator(&calls, &["team-*,!team-skip*"]);
    let harness = OperatorHarness::start_on(server, operator).await;
    let client = harness.client();
    let server = harness.server();
    // Ready means that the watchers of the namespaces listed at the start have listed.
    let listed: Vec<Option<String>> = server
        .requests()
        .iter()
        .filter(|r| r.resource == "widgets.a.example" && r.verb == "list")
        .map(|r| r.namespace.clone())
        .collect();
    assert!(
        listed.contains(&Some("team-a".into())) && listed.contains(&Some("team-b".into())),
        "ready after listing in team-a and team-b: {listed:?}"
    );

    // The ones to skip first: when the served ones are handled, the others had their chance.
    for namespace in ["team-skip", "other", "team-a", "team-b"] {
        create_widget_in(&client, namespace, "w").await;
    }
    wait_handled_in(&calls, &["team-a", "team-b"]).await;
    // CRDs, namespaces, and widgets in team-a and team-b.
    wait_open_watches(server, 4, "four watches: CRDs, namespaces, two namespaces").await;

    // A matching namespace appears: its watcher starts, and its widgets are handled.
    create_namespace(&client, "team-new").await;
    wait("a watch of widgets in team-new", || async {
        widget_watches(server)
            .contains(&Some("team-new".into()))
            .then_some(())
    })
    .await;
    create_widget_in(&client, "team-new", "w").await;
    wait_handled_in(&calls, &["team-new"]).await;
    wait_open_watches(server, 5, "a fifth watch, in team-new").await;

    // The namespace is deleted: its watcher stops.
    let (status, deleted) = harness
        .request("DELETE", "/api/v1/namespaces/team-new", json!({}))
        .await;
    assert!(status.is_success(), "{deleted}");
    wait("team-new to be gone", || async {
        let (status, _) = harness
            .request("GET", "/api/v1/namespaces/team-new", None)
            .await;
        (status == 404).then_some(())
    })
    .await;
    wait_open_watches(server, 4, "the watch in team-new to close").await;

    // A namespace that the pattern excludes never gets a watcher.
    create_namespace(&client, "team-skip-2").await;
    create_namespace(&client, "team-c").await;
    create_widget_in(&client, "team-skip-2", "w").await;
    create_widget_in(&client, "team-c", "w").await;
    wait_handled_in(&calls, &["team-c"]).await;
    settle(harness.server()).await;

    assert_eq!(
        handled_in(&calls),
        ["team-a", "team-b", "team-c", "team-new"],
        "each widget of the matching namespaces once, nothing else"
    );
    let watches = widget_watches(server);
    assert!(
        !watches.contains(&None),
        "no cluster-wide watch of widgets: {watches:?}"
    );
    for namespace in ["team-skip", "other", "team-skip-2"] {
        assert!(
            !watches.contains(&Some(namespace.into())),
            "no watch in {namespace}: {watches:?}"
        );
    }
    harness.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_permission_to_list_namespaces_globs_filter_a_cluster_wide_watch() {
    let calls = Calls::default();
    let server = server_with_widgets_in(&["team-a", "team-skip", "other"]).await;
    server.inject(Fault::respond(403).verb("list").resource("namespaces"));
    let operator = widgets_operator(&calls, &["team-*,!team-skip"]);
    let harness = OperatorHarness::start_on(server, operator).await;
    let client = harness.client();

    for namespace in ["team-skip", "other", "team-a"] {
        create_widget_in(&client, namespace, "w").await;
    }
    wait_handled_in(&calls, &["team-a"]).await;
    settle(harness.server()).await;

    assert_eq!(handled_in(&calls), ["team-a"], "the patterns still apply");
    let server = harness.server();
    assert_eq!(
        widget_watches(server),
        [None],
        "one cluster-wide watch of widgets"
    );
    let namespace_watches = server
        .requests()
        .iter()
        .filter(|r| r.resource == "namespaces" && r.verb == "watch")
        .count();
    assert_eq!(namespace_watches, 0, "namespaces are not watched");
    harness.stop().await.expect("a clean stop");
}
