//! kube-rs against the fake API server: watchers, reflectors, typed `Api` calls, the finalizer
//! helper, pagination, errors, and connection hygiene.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::fmt::Debug;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kopf_fake_apiserver::{FakeApiServer, Fault};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::controller::Action;
use kube::runtime::utils::Backoff;
use kube::runtime::{Controller, WatchStreamExt as _, finalizer, reflector, wait, watcher};
use kube::{CustomResource, CustomResourceExt as _, Resource, ResourceExt as _};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::support::{DEADLINE, NOT_ROOT_CA, client_without_retries, wait};

/// A custom resource with a status subresource, served once its CRD is created.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "example.kopf.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    derive = "PartialEq"
)]
struct WidgetSpec {
    size: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    color: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
struct WidgetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    phase: Option<String>,
}

const WIDGETS_CRD: &str = "widgets.example.kopf.dev";
const MANAGER: &str = "kube-runtime-test";

// 1. Watchers see every change, in order.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_watch_watcher_sees_every_change_in_order() {
    watcher_sees_every_change(watcher::Config::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_list_watcher_sees_every_change_in_order() {
    watcher_sees_every_change(watcher::Config::default().streaming_lists()).await;
}

async fn watcher_sees_every_change(config: watcher::Config) {
    let server = FakeApiServer::start().await.expect("the server starts");
    let client = server.client();
    install_widgets(&client).await;
    let configmaps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let widgets: Api<Widget> = Api::default_namespaced(client.clone());
    let before_cm = configmaps
        .create(&PostParams::default(), &configmap("before", &[("k", "v")]))
        .await
        .unwrap();
    let before_w = widgets
        .create(&PostParams::default(), &Widget::new("before", spec(1)))
        .await
        .unwrap();

    let mut cm_events = watcher(configmaps.clone(), config.clone().fields(NOT_ROOT_CA)).boxed();
    let mut w_events = watcher(widgets.clone(), config).boxed();
    assert_eq!(
        next_events(&mut cm_events, 3).await,
        [Seen::Init, Seen::init_apply(&before_cm), Seen::InitDone]
    );
    assert_eq!(
        next_events(&mut w_events, 3).await,
        [Seen::Init, Seen::init_apply(&before_w), Seen::InitDone]
    );

    // ConfigMaps: create, replace, patch, delete.
    let created = configmaps
        .create(&PostParams::default(), &configmap("cm", &[("k", "1")]))
        .await
        .unwrap();
    let mut changed = created.clone();
    changed.data = Some(data(&[("k", "2")]));
    let replaced = configmaps
        .replace("cm", &PostParams::default(), &changed)
        .await
        .unwrap();
    let patched = configmaps
        .patch(
            "cm",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "3"}})),
        )
        .await
        .unwrap();
    let gone = configmaps
        .delete("cm", &DeleteParams::default())
        .await
        .unwrap()
        .right()
        .expect("a Status naming the deleted ConfigMap");
    let events = next_events(&mut cm_events, 4).await;
    assert_eq!(
        events[..3],
        [
            Seen::apply(&created),
            Seen::apply(&replaced),
            Seen::apply(&patched),
        ]
    );
    assert_deleted_after(&events[3], &gone, &patched);
    assert_eq!(patched.data, Some(data(&[("k", "3")])));

    // Widgets: create, patch the spec, patch the status, delete.
    let created = widgets
        .create(&PostParams::default(), &Widget::new("w", spec(1)))
        .await
        .unwrap();
    let spec_patched = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    let status_patched = widgets
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}})),
        )
        .await
        .unwrap();
    let gone = widgets
        .delete("w", &DeleteParams::default())
        .await
        .unwrap()
        .right()
        .expect("a Status naming the deleted Widget");
    let events = next_events(&mut w_events, 4).await;
    assert_eq!(
        events[..3],
        [
            Seen::apply(&created),
            Seen::apply(&spec_patched),
            Seen::apply(&status_patched),
        ]
    );
    assert_deleted_after(&events[3], &gone, &status_patched);

    // Nothing else was queued before a last change: each watcher saw only its own resource.
    let after_cm = configmaps
        .create(&PostParams::default(), &configmap("after", &[]))
        .await
        .unwrap();
    let after_w = widgets
        .create(&PostParams::default(), &Widget::new("after", spec(3)))
        .await
        .unwrap();
    assert_eq!(
        next_events(&mut cm_events, 1).await,
        [Seen::apply(&after_cm)]
    );
    assert_eq!(next_events(&mut w_events, 1).await, [Seen::apply(&after_w)]);

    drop((cm_events, w_events));
    server.stop().await;
}

// 2. Reflectors survive dropped watches, restarts and expired resourceVersions.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_survives_dropped_watches_restarts_and_expired_versions() {
    let server = FakeApiServer::start().await.expect("the server starts");
    let client = server.client();
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for i in 0..3 {
        api.create(
            &PostParams::default(),
            &configmap(&format!("cm-{i}"), &[("n", "0")]),
        )
        .await
        .unwrap();
    }

    let (store, writer) = reflector::store();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = seen.clone();
    let stream = reflector(
        writer,
        watcher(api.clone(), watcher::Config::default()).backoff(Quick),
    );
    let task = tokio::spawn(stream.for_each(move |event| {
        if let Ok(event) = &event {
            recorder.lock().unwrap().push(Seen::of(event));
        }
        futures::future::ready(())
    }));
    tokio::time::timeout(DEADLINE, store.wait_until_ready())
        .await
        .expect("the store gets ready")
        .unwrap();
    converge(&api, &store, "after the initial list").await;
    let lists = watcher_lists(&server);

    // The server ends the watch streams, as on its own timeout.
    server.close_watches();
    churn(&api, "closed").await;
    converge(&api, &store, "after the watches were closed").await;

    // The server cuts the next watch streams after one event each.
    server.inject(
        Fault::close_watch_after(1)
            .verb("watch")
            .resource("configmaps")
            .times(3),
    );
    churn(&api, "cut").await;
    converge(&api, &store, "after the watches were cut").await;

    // The server drops every connection, as a restarted API server would.
    server.restart();
    wait("the client to reconnect", || async {
        client.apiserver_version().await.ok()
    })
    .await;
    churn(&api, "restarted").await;
    converge(&api, &store, "after a restart").await;
    assert_eq!(
        watcher_lists(&server),
        lists,
        "the watcher resumed from its resourceVersion without relisting"
    );

    // The watcher cannot reconnect while changes happen and the history is compacted: its
    // resourceVersion expires (410) and it relists.
    server.inject(Fault::respond(500).verb("watch").resource("configmaps"));
    server.close_watches();
    wait("a failed watch", || async {
        server
            .requests()
            .iter()
            .any(|r| r.verb == "watch" && r.code == 500)
            .then_some(())
    })
    .await;
    churn(&api, "expired").await;
    server.compact();
    server.clear_faults();
    converge(&api, &store, "after the resourceVersion expired").await;
    assert!(
        watcher_lists(&server) > lists,
        "the watcher relisted after 410 Gone"
    );

    // No event was replayed or reordered across the reconnections.
    let seen = seen.lock().unwrap().clone();
    let mut last = 0;
    for event in &seen {
        if let Seen::Apply(name, rv) | Seen::Delete(name, rv) = event {
            let rv: u64 = rv.parse().unwrap();
            assert!(rv > last, "{name}@{rv} came after {last}: {seen:?}");
            last = rv;
        }
    }

    task.abort();
    let _ = task.await;
    server.stop().await;
}

// 3. Bookmarks.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_carry_the_latest_resource_version() {
    let server = FakeApiServer::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .await
        .expect("the server starts");
    let client = server.client();
    let configmaps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let secrets: Api<Secret> = Api::default_namespaced(client.clone());
    let listed = configmaps.list(&ListParams::default()).await.unwrap();
    let from = listed
        .metadata
        .resource_version
        .expect("lists have a resourceVersion");
    let mut events = configmaps
        .watch(
            &WatchParams {
                bookmarks: true,
                ..WatchParams::default()
            },
            &from,
        )
        .await
        .unwrap()
        .boxed();

    let created = configmaps
        .create(&PostParams::default(), &configmap("a", &[]))
        .await
        .unwrap();
    // Bookmarks from before the creation may come first.
    let added = loop {
        match next_watch_event(&mut events).await {
            WatchEvent::Added(object) => break object,
            WatchEvent::Bookmark(bookmark) => assert_eq!(bookmark.metadata.resource_version, from),
            other => panic!("expected the creation, got {other:?}"),
        }
    };
    assert_eq!(added.resource_version(), created.resource_version());
    let latest = rv(&created);
    assert_eq!(latest, server.stats().resource_version.to_string());
    match next_watch_event(&mut events).await {
        WatchEvent::Bookmark(bookmark) => {
            assert_eq!(bookmark.metadata.resource_version, latest);
            assert_eq!(bookmark.types.kind, "ConfigMap");
        }
        other => panic!("expected a bookmark, got {other:?}"),
    }

    // A change to another resource moves the bookmarks on, with no event for this watch.
    let secret = secrets
        .create(&PostParams::default(), &secret("s", &[("k", "v")]))
        .await
        .unwrap();
    let latest = rv(&secret);
    let moved_on = async {
        loop {
            match next_watch_event(&mut events).await {
                WatchEvent::Bookmark(bookmark) if bookmark.metadata.resource_version == latest => {
                    return;
                }
                WatchEvent::Bookmark(_) => {}
                other => panic!("expected only bookmarks, got {other:?}"),
            }
        }
    };
    tokio::time::timeout(DEADLINE, moved_on)
        .await
        .expect("a bookmark at the secret's resourceVersion");

    drop(events);
    server.stop().await;
}

// 4. Typed CRUD.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configmaps_create_get_list_replace_delete() {
    let server = FakeApiServer::start().await.expect("the server starts");
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let a = api
        .create(
            &PostParams::default(),
            &labelled(configmap("cm-a", &[("k", "a")]), "app", "a"),
        )
        .await
        .unwrap();
    api.create(
        &PostParams::default(),
        &labelled(configmap("cm-b", &[("k", "b")]), "app", "b"),
    )
    .await
    .unwrap();
    assert_eq!(a.namespace().as_deref(), Some("default"));
    assert!(a.uid().is_some());
    assert!(a.creation_timestamp().is_some());

    let got = api.get("cm-a").await.unwrap();
    assert_eq!(got, a);
    assert_eq!(
        names(
            &api.list(&ListParams::default().labels("app=a"))
                .await
                .unwrap()
                .items
        ),
        ["cm-a"]
    );
    assert_eq!(
        names(
            &api.list(&ListParams::default().labels("app in (a,b)"))
                .await
                .unwrap()
                .items
        ),
        ["cm-a", "cm-b"]
    );
    assert_eq!(
        names(
            &api.list(&ListParams::default().fields("metadata.name=cm-b"))
                .await
                .unwrap()
                .items
        ),
        ["cm-b"]
    );
    assert_eq!(
        names(
            &api.list(
                &ListParams::default()
                    .fields("metadata.name!=cm-b,metadata.name!=kube-root-ca.crt")
            )
            .await
            .unwrap()
            .items
        ),
        ["cm-a"]
    );

    // A replace based on an outdated read conflicts.
    let mut first = got.clone();
    first.data = Some(data(&[("k", "first")]));
    let replaced = api
        .replace("cm-a", &PostParams::default(), &first)
        .await
        .unwrap();
    assert_eq!(replaced.data, first.data);
    assert_ne!(replaced.resource_version(), got.resource_version());
    let mut second = got.clone();
    second.data = Some(data(&[("k", "second")]));
    let status = api_error(api.replace("cm-a", &PostParams::default(), &second).await);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "Conflict"),
        "{status:?}"
    );
    assert_eq!(api.get("cm-a").await.unwrap().data, first.data);

    api.delete("cm-a", &DeleteParams::default()).await.unwrap();
    assert_eq!(api.get_opt("cm-a").await.unwrap(), None);
    assert_eq!(
        names(
            &api.list(&ListParams::default().fields(NOT_ROOT_CA))
                .await
                .unwrap()
                .items
        ),
        ["cm-b"]
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_turn_string_data_into_data() {
    let server = FakeApiServer::start().await.expect("the server starts");
    let api: Api<Secret> = Api::default_namespaced(server.client());
    let created = api
        .create(
            &PostParams::default(),
            &secret("s", &[("password", "hunter2")]),
        )
        .await
        .unwrap();
    for object in [created, api.get("s").await.unwrap()] {
        assert_eq!(object.string_data, None);
        let data = object.data.expect("stringData is moved into data");
        assert_eq!(data["password"].0, b"hunter2");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_are_created_listed_and_deleted_with_their_contents() {
    let server = FakeApiServer::start().await.expect("the server starts");
    let client = server.client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: meta("kube-rt"),
        ..Default::default()
    };
    let created = namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    assert_eq!(
        created.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Active")
    );
    assert_eq!(created.namespace(), None);
    let listed = namespaces
        .list(&ListParams::default().fields("metadata.name=kube-rt"))
        .await
        .unwrap();
    assert_eq!(names(&listed.items), ["kube-rt"]);
    let all = names(&namespaces.list(&ListParams::default()).await.unwrap().items);
    assert!(
        all.contains(&"default".to_string()) && all.contains(&"kube-rt".to_string()),
        "{all:?}"
    );

    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-rt");
    configmaps
        .create(&PostParams::default(), &configmap("inside", &[]))
        .await
        .unwrap();
    namespaces
        .delete("kube-rt", &DeleteParams::default())
        .await
        .unwrap();
    wait("the namespace to be gone", || async {
        namespaces
            .get_opt("kube-rt")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert_eq!(configmaps.get_opt("inside").await.unwrap(), None);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_create_get_list_replace_delete() {
    let server = FakeApiServer::start().await.expect("the server starts");
    let client = server.client();
    install_widgets(&client).await;
    let api: Api<Widget> = Api::default_namespaced(client);
    let mut small = Widget::new("small", spec(1));
    small.labels_mut().insert("size".into(), "small".into());
    let mut large = Widget::new("large", spec(9));
    large.labels_mut().insert("size".into(), "large".into());
    let small = api.create(&PostParams::default(), &small).await.unwrap();
    api.create(&PostParams::default(), &large).await.unwrap();
    assert_eq!(small.spec, spec(1));
    assert_eq!(small.meta().generation, Some(1));
    assert_eq!(api.get("small").await.unwrap(), small);
    assert_eq!(
        names(&api.list(&ListParams::default()).await.unwrap().items),
        ["large", "small"]
    );
    assert_eq!(
        names(
            &api.list(&ListParams::default().labels("size=large"))
                .await
                .unwrap()
                .items
        ),
        ["large"]
    );
    assert_eq!(
        names(
            &api.list(&ListParams::default().fields("metadata.name=small"))
                .await
                .unwrap()
                .items
        ),
        ["small"]
    );

    let mut first = small.clone();
    first.spec.size = 2;
    api.replace("small", &PostParams::default(), &first)
        .await
        .unwrap();
    let mut second = small.clone();
    second.spec.size = 3;
    let status = api_error(api.replace("small", &PostParams::default(), &second).await);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "Conflict"),
        "{status:?}"
    );
    assert_eq!(api.get("small").await.unwrap().spec.size, 2);

    let gone = api
        .delete("small", &DeleteParams::default())
        .await
        .unwrap()
        .right()
        .expect("a Status naming the deleted object, as for every custom resource");
    assert_eq!(gone.details.map(|d| d.name), Some("small".to_string()));
    let status = api_error(api.get("small").await);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (404, "NotFound"),
        "{status:?}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_and_json_patches() {
    let server = FakeApiServer::start().await.expect("the server starts");
    let client = server.client();
    install_widgets(&client).await;
    let configmaps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    configmaps
        .create(
            &PostParams::default(),
            &configmap("cm", &[("a", "1"), ("b", "2")]),
        )
        .await
        .unwrap();

    let merged = configmaps
        .patch(
            "cm",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "10", "b": null, "c": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.data, Some(data(&[("a", "10"), ("c", "3")])));

    let patch = json_patch(json!([
        {"op": "test", "path": "/data/a", "value": "10"},
        {"op": "add", "path": "/data/d", "value": "4"},
        {"op": "remove", "path": "/data/c"},
    ]));
    let patched = configmaps
        .patch("cm", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(patched.data, Some(data(&[("a", "10"), ("d", "4")])));

    // As in Kubernetes, `test` of null passes where the field is absent: kube-rs's finalizer
    // helper adds the first finalizer this way.
    let patch = json_patch(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["example.kopf.dev/x"]},
        {"op": "remove", "path": "/metadata/finalizers"},
    ]));
    let unchanged = configmaps
        .patch("cm", &PatchParams::default(), &patch)
        .await
        .unwrap_or_else(|e| panic!("test of null on an absent field: {e}"));
    assert_eq!(unchanged, patched);

    // A failing `test` leaves the object alone.
    let patch = json_patch(json!([
        {"op": "test", "path": "/data/a", "value": "wrong"},
        {"op": "add", "path": "/data/e", "value": "5"},
    ]));
    let status = api_error(
        configmaps
            .patch("cm", &PatchParams::default(), &patch)
            .await,
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (422, "Invalid"),
        "{status:?}"
    );
    assert_eq!(configmaps.get("cm").await.unwrap(), patched);

    // The same on a custom resource.
    let widgets: Api<Widget> = Api::default_namespaced(client.clone());
    let mut widget = Widget::new("w", spec(1));
    widget.spec.color = Some("red".into());
    widgets
        .create(&PostParams::default(), &widget)
        .await
        .unwrap();
    let merged = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2, "color": null}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.spec, spec(2));
    let patch = json_patch(json!([{"op": "replace", "path": "/spec/size", "value": 3}]));
    assert_eq!(
        widgets
            .patch("w", &PatchParams::default(), &patch)
            .await
            .unwrap()
            .spec,
        spec(3)
    );
    let patch = json_patch(json!([{"op": "test", "path": "/spec/size", "value": 2}]));
    let status = api_error(widgets.patch("w", &PatchParams::default(), &patch).await);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (422, "Invalid"),
        "{status:?}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_owns_and_removes_fields() {
    let server = FakeApiServer::start().await.expect("the server starts");
    let client = server.client();
    install_widgets(&client).await;
    let params = PatchParams::apply(MANAGER);

    // Applying creates; applying without a field the manager set removes it.
    let configmaps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"x": "1", "y": "2"}});
    let created = configmaps
        .patch("cm", &params, &Patch::Apply(applied))
        .await
        .unwrap();
    assert_eq!(created.data, Some(data(&[("x", "1"), ("y", "2")])));
    assert!(
        applied_by(&created, MANAGER),
        "{:?}",
        created.metadata.managed_fields
    );
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"x": "1"}});
    let reapplied = configmaps
        .patch("cm", &params, &Patch::Apply(applied))
        .await
        .unwrap();
    assert_eq!(reapplied.data, Some(data(&[("x", "1")])));
    assert_eq!(
        configmaps.get("cm").await.unwrap().data,
        Some(data(&[("x", "1")]))
    );

    let widgets: Api<Widget> = Api::default_namespaced(client.clone());
    let applied = json!({
        "apiVersion": "example.kopf.dev/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"size": 1, "color": "red"},
    });
    let created = widgets
        .patch("w", &params, &Patch::Apply(applied))
        .await
        .unwrap();
    assert_eq!(created.spec.color.as_deref(), Some("red"));
    assert!(
        applied_by(&created, MANAGER),
        "{:?}",
        created.metadata.managed_fields
    );
    let applied = json!({
        "apiVersion": "example.kopf.dev/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"size": 1},
    });
    let reapplied = widgets
        .patch("w", &params, &Patch::Apply(applied))
        .await
        .unwrap();
    assert_eq!(reapplied.spec, spec(1));
    assert_eq!(
        reapplied.meta().generation,
        Some(2),
        "removing a spec field is a spec change"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_subresource_and_generation() {
    let server = FakeApiServer::start().await.expect("the server starts");
    let client = server.client();
    install_widgets(&client).await;
    let api: Api<Widget> = Api::default_namespaced(client);

    // The main resource ignores the status it is given.
    let mut widget = Widget::new("w", spec(1));
    widget.status = Some(phase("Ignored"));
    let created = api.create(&PostParams::default(), &widget).await.unwrap();
    assert_eq!(created.status, None);
    assert_eq!(created.meta().generation, Some(1));

    // Status writes change only the status, and not the generation.
    let patched = api
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 5}, "status": {"phase": "Ready"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.status, Some(phase("Ready")));
    assert_eq!(patched.spec, spec(1));
    assert_eq!(patched.meta().generation, Some(1));
    let mut replacement = patched.clone();
    replacement.spec.size = 6;
    replacement.status = Some(phase("Done"));
    let replaced = api
        .replace_status("w", &PostParams::default(), &replacement)
        .await
        .unwrap();
    assert_eq!(replaced.status, Some(phase("Done")));
    assert_eq!(replaced.spec, spec(1));
    assert_eq!(replaced.meta().generation, Some(1));
    assert_eq!(
        api.get_status("w").await.unwrap().status,
        Some(phase("Done"))
    );

    // Main-resource writes leave the status alone; spec changes bump the generation.
    let patched = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}, "status": {"phase": "Lost"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec, spec(2));
    assert_eq!(patched.status, Some(phase("Done")));
    assert_eq!(patched.meta().generation, Some(2));
    let mut replacement = patched.clone();
    replacement.spec.size = 3;
    replacement.status = Some(phase("Lost"));
    let replaced = api
        .replace("w", &PostParams::default(), &replacement)
        .await
        .unwrap();
    assert_eq!(replaced.spec, spec(3));
    assert_eq!(replaced.status, Some(phase("Done")));
    assert_eq!(replaced.meta().generation, Some(3));

    // Metadata-only changes do not bump the generation.
    let labelled = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"l": "v"}}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.labels().get("l").map(String::as_str), Some("v"));
    assert_eq!(labelled.meta().generation, Some(3));
    assert_ne!(labelled.resource_version(), replaced.resource_version());

    api.delete("w", &DeleteParams::default())
        .await
        .unwrap()
        .right()
        .expect("a Status naming the deleted object, as for every custom resource");
    assert_eq!(api.get_opt("w").await.unwrap(), None);
    server.stop().await;
}

// 5. kube-runtime's finalizer helper in a controller.

/// What the controller's reconciler works with, and what it did (errors included).
struct Reconciled {
    api: Api<Widget>,
    events: Mutex<Vec<String>>,
}

impl Reconciled {
    fn record(&self, entry: String) {
        self.events.lock().unwrap().push(entry);
    }

    fn handled(&self) -> Vec<String> {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .filter(|e| !e.starts_with("error"))
            .cloned()
            .collect()
    }

    /// Waits like `wait`, but tells what the reconciler did when the deadline passes.
    async fn wait<F, Fut>(&self, what: &str, mut condition: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        let waited = tokio::time::timeout(DEADLINE, async {
            while !condition().await {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        if waited.is_err() {
            let mut events: Vec<(String, usize)> = Vec::new();
            for event in self.events.lock().unwrap().iter() {
                match events.last_mut() {
                    Some((last, count)) if last == event => *count += 1,
                    _ => events.push((event.clone(), 1)),
                }
            }
            panic!(
                "timed out after {DEADLINE:?} waiting for {what}; the reconciler did (event, repeats): {events:?}"
            );
        }
    }
}

const FINALIZER: &str = "example.kopf.dev/cleanup";

async fn reconcile(
    widget: Arc<Widget>,
    ctx: Arc<Reconciled>,
) -> Result<Action, finalizer::Error<Infallible>> {
    finalizer(&ctx.api, FINALIZER, widget, |event| async {
        let entry = match event {
            finalizer::Event::Apply(w) => format!("apply {}", w.name_any()),
            finalizer::Event::Cleanup(w) => format!("cleanup {}", w.name_any()),
        };
        ctx.record(entry);
        Ok::<_, Infallible>(Action::await_change())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizer_helper_adds_cleans_up_and_removes() {
    let server = FakeApiServer::start().await.expect("the server starts");
    let client = server.client();
    install_widgets(&client).await;
    let api: Api<Widget> = Api::default_namespaced(client.clone());
    let ctx = Arc::new(Reconciled {
        api: api.clone(),
        events: Mutex::new(Vec::new()),
    });
    let controller = Controller::new(api.clone(), watcher::Config::default()).run(
        reconcile,
        |_, error, ctx| {
            ctx.record(format!("error: {error}"));
            Action::requeue(Duration::from_millis(50))
        },
        ctx.clone(),
    );
    let task = tokio::spawn(controller.for_each(|_| futures::future::ready(())));

    api.create(&PostParams::default(), &Widget::new("w", spec(1)))
        .await
        .unwrap();
    ctx.wait("the finalizer and the apply", || async {
        let widget = api.get("w").await.unwrap();
        ctx.handled().contains(&"apply w".to_string()) && widget.finalizers() == [FINALIZER]
    })
    .await;

    let deleting = api
        .delete("w", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("the marked object");
    assert!(
        deleting.meta().deletion_timestamp.is_some(),
        "the finalizer holds the object"
    );
    ctx.wait("the cleanup and the deletion", || async {
        api.get_opt("w").await.unwrap().is_none()
    })
    .await;
    let events = ctx.handled();
    let first_cleanup = events
        .iter()
        .position(|e| e == "cleanup w")
        .expect("the cleanup ran");
    assert!(
        events[..first_cleanup].contains(&"apply w".to_string()),
        "{events:?}"
    );
    assert!(
        events[first_cleanup..].iter().all(|e| e == "cleanup w"),
        "{events:?}"
    );

    task.abort();
    let _ = task.await;
    server.stop().await;
}

// 6. Pagination.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_follows_continue_tokens_over_a_consistent_snapshot() {
    let server = FakeApiServer::start().await.expect("the server starts");
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut expected = BTreeMap::new();
    for i in 0..7 {
        let created = api
            .create(
                &PostParams::default(),
                &configmap(&format!("page-{i}"), &[]),
            )
            .await
            .unwrap();
        expected.insert(created.name_any(), rv(&created));
    }

    let first = api
        .list(&ListParams::default().fields(NOT_ROOT_CA).limit(2))
        .await
        .unwrap();
    let snapshot = first
        .metadata
        .resource_version
        .clone()
        .expect("lists have a resourceVersion");
    // The field selector filters the list: as the real server, no count of the rest.
    assert_eq!(first.metadata.remaining_item_count, None);
    let mut listed: Vec<(String, String)> =
        first.items.iter().map(|o| (o.name_any(), rv(o))).collect();
    let mut token = first.metadata.continue_.clone().expect("more pages");

    // Changes between pages are not in the snapshot.
    api.create(&PostParams::default(), &configmap("page-3a", &[]))
        .await
        .unwrap();
    api.delete("page-5", &DeleteParams::default())
        .await
        .unwrap();
    api.patch(
        "page-6",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"new": "yes"}})),
    )
    .await
    .unwrap();
    let mut pages = 1;
    loop {
        let page = api
            .list(
                &ListParams::default()
                    .fields(NOT_ROOT_CA)
                    .limit(2)
                    .continue_token(&token),
            )
            .await
            .unwrap();
        pages += 1;
        assert_eq!(
            page.metadata.resource_version.as_deref(),
            Some(snapshot.as_str())
        );
        assert!(page.items.len() <= 2);
        listed.extend(page.items.iter().map(|o| (o.name_any(), rv(o))));
        match page.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(next) => token = next,
            None => break,
        }
    }
    assert_eq!(pages, 4);
    assert_eq!(listed, expected.into_iter().collect::<Vec<_>>());
    let now = names(
        &api.list(&ListParams::default().fields(NOT_ROOT_CA))
            .await
            .unwrap()
            .items,
    );
    assert_eq!(
        now,
        [
            "page-0", "page-1", "page-2", "page-3", "page-3a", "page-4", "page-6"
        ]
    );

    // Once the history behind a token is compacted away, the token expires.
    let first = api
        .list(&ListParams::default().fields(NOT_ROOT_CA).limit(2))
        .await
        .unwrap();
    let token = first.metadata.continue_.expect("more pages");
    api.create(&PostParams::default(), &configmap("late", &[]))
        .await
        .unwrap();
    server.compact();
    let status = api_error(
        api.list(
            &ListParams::default()
                .fields(NOT_ROOT_CA)
                .limit(2)
                .continue_token(&token),
        )
        .await,
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (410, "Expired"),
        "{status:?}"
    );
    server.stop().await;
}

// 7. Errors are `Status` objects.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_status_objects_with_the_right_reason() {
    let server = FakeApiServer::start().await.expect("the server starts");
    let client = server.client();
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());

    let status = api_error(api.get("missing").await);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (404, "NotFound"),
        "{status:?}"
    );
    assert_eq!(status.message, "configmaps \"missing\" not found");
    let details = status.details.as_ref().expect("details");
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("missing", "configmaps")
    );

    let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), "nowhere");
    let status = api_error(
        elsewhere
            .create(&PostParams::default(), &configmap("cm", &[]))
            .await,
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (404, "NotFound"),
        "{status:?}"
    );
    assert_eq!(status.message, "namespaces \"nowhere\" not found");

    api.create(&PostParams::default(), &configmap("cm", &[]))
        .await
        .unwrap();
    let status = api_error(
        api.create(&PostParams::default(), &configmap("cm", &[]))
            .await,
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "AlreadyExists"),
        "{status:?}"
    );

    let status = api_error(
        api.create(&PostParams::default(), &configmap("Not_Valid", &[]))
            .await,
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (422, "Invalid"),
        "{status:?}"
    );
    let causes = status
        .details
        .as_ref()
        .map(|d| d.causes.clone())
        .unwrap_or_default();
    assert!(
        causes.iter().any(|c| c.field == "metadata.name"),
        "{status:?}"
    );

    server.inject(Fault::respond(500).times(1));
    let status = api_error(api.get("cm").await);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (500, "InternalError"),
        "{status:?}"
    );
    api.get("cm").await.expect("the fault fired once");

    // 429 with Retry-After, seen by a client that does not retry.
    let raw = client_without_retries(&server);
    server.inject(Fault::too_many_requests(2).times(2));
    let request = http::Request::get("/api/v1/namespaces/default/configmaps")
        .body(kube::client::Body::empty())
        .unwrap();
    let response = raw.send(request).await.unwrap();
    assert_eq!(response.status(), http::StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok()),
        Some("2")
    );
    let body: serde_json::Value =
        serde_json::from_slice(&response.into_body().collect_bytes().await.unwrap()).unwrap();
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["reason"], "TooManyRequests");
    assert_eq!(body["code"], 429);
    assert_eq!(body["details"]["retryAfterSeconds"], 2);
    let status = api_error(
        Api::<ConfigMap>::default_namespaced(raw)
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (429, "TooManyRequests"),
        "{status:?}"
    );
    assert_eq!(status.details.map(|d| d.retry_after_seconds), Some(2));

    // kube's default client waits as told and retries.
    server.inject(Fault::too_many_requests(1).times(1));
    server.reset_requests();
    let started = tokio::time::Instant::now();
    api.get("cm").await.expect("the client retries after 429");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "waited only {:?}",
        started.elapsed()
    );
    let codes: Vec<u16> = server.requests().iter().map(|r| r.code).collect();
    assert_eq!(codes, [429, 200]);
    server.stop().await;
}

// 8. Connections.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_close_with_their_clients_and_the_server() {
    let server = FakeApiServer::start().await.expect("the server starts");
    let addr = server.addr();
    let client = server.client();
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    api.create(&PostParams::default(), &configmap("cm", &[]))
        .await
        .unwrap();
    let task = tokio::spawn(
        watcher(api.clone(), watcher::Config::default()).for_each(|_| futures::future::ready(())),
    );
    wait("an open watch", || async {
        (server.stats().open_watches == 1).then_some(())
    })
    .await;
    assert!(server.stats().open_connections >= 1);

    task.abort();
    let _ = task.await;
    drop((api, client));
    wait("all connections to close", || async {
        let stats = server.stats();
        (stats.open_connections == 0 && stats.open_watches == 0).then_some(())
    })
    .await;

    server.stop().await;
    let refused = tokio::net::TcpStream::connect(addr)
        .await
        .expect_err("nothing listens after stop");
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
}

// Helpers.

/// What a watcher event was, comparably.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Init,
    InitApply(String, String),
    InitDone,
    Apply(String, String),
    Delete(String, String),
}

impl Seen {
    fn of<K: Resource>(event: &watcher::Event<K>) -> Seen {
        let key = |o: &K| {
            (
                o.meta().name.clone().unwrap_or_default(),
                o.meta().resource_version.clone().unwrap_or_default(),
            )
        };
        match event {
            watcher::Event::Init => Seen::Init,
            watcher::Event::InitDone => Seen::InitDone,
            watcher::Event::InitApply(o) => Seen::InitApply(key(o).0, key(o).1),
            watcher::Event::Apply(o) => Seen::Apply(key(o).0, key(o).1),
            watcher::Event::Delete(o) => Seen::Delete(key(o).0, key(o).1),
        }
    }

    fn init_apply<K: Resource>(o: &K) -> Seen {
        Seen::InitApply(
            o.meta().name.clone().unwrap(),
            o.meta().resource_version.clone().unwrap(),
        )
    }

    fn apply<K: Resource>(o: &K) -> Seen {
        Seen::Apply(
            o.meta().name.clone().unwrap(),
            o.meta().resource_version.clone().unwrap(),
        )
    }
}

/// `seen` is the deletion that `status` answered, after the `last` change of the object.
fn assert_deleted_after<K: Resource>(seen: &Seen, status: &kube::core::Status, last: &K) {
    let name = status.details.as_ref().map(|d| d.name.as_str());
    let version = |rv: &str| rv.parse::<u64>().expect("a numeric resourceVersion");
    match seen {
        Seen::Delete(deleted, rv) if Some(deleted.as_str()) == name => assert!(
            version(rv) > version(last.meta().resource_version.as_deref().unwrap()),
            "the deletion comes after the last change: {seen:?}"
        ),
        other => panic!("expected the deletion of {name:?}, got {other:?}"),
    }
}

/// The next `n` events of a watcher, each within the deadline.
async fn next_events<K: Resource>(
    stream: &mut (impl Stream<Item = watcher::Result<watcher::Event<K>>> + Unpin),
    n: usize,
) -> Vec<Seen> {
    let mut seen = Vec::new();
    while seen.len() < n {
        let event = tokio::time::timeout(DEADLINE, stream.next())
            .await
            .unwrap_or_else(|_| panic!("no watcher event within {DEADLINE:?} after {seen:?}"))
            .expect("the watcher never ends")
            .unwrap_or_else(|e| panic!("watcher error after {seen:?}: {e}"));
        seen.push(Seen::of(&event));
    }
    seen
}

/// The next event of a raw watch, within the deadline.
async fn next_watch_event<K>(
    stream: &mut (impl Stream<Item = kube::Result<WatchEvent<K>>> + Unpin),
) -> WatchEvent<K> {
    tokio::time::timeout(DEADLINE, stream.next())
        .await
        .expect("a watch event within the deadline")
        .expect("the watch stream goes on")
        .expect("a well-formed watch event")
}

/// Creates the CRD of [`Widget`] and waits until it is established.
async fn install_widgets(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &Widget::crd())
        .await
        .unwrap();
    let established =
        wait::await_condition(crds, WIDGETS_CRD, wait::conditions::is_crd_established());
    tokio::time::timeout(DEADLINE, established)
        .await
        .expect("the CRD is established in time")
        .unwrap();
}

/// Waits until the reflector's store holds exactly what the server lists.
async fn converge(api: &Api<ConfigMap>, store: &reflector::Store<ConfigMap>, when: &str) {
    let mut last = (BTreeSet::new(), BTreeSet::new());
    let result = tokio::time::timeout(DEADLINE, async {
        loop {
            let listed: BTreeSet<_> = api
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .iter()
                .map(key)
                .collect();
            let stored: BTreeSet<_> = store.state().iter().map(|o| key(o.as_ref())).collect();
            if listed == stored {
                return;
            }
            last = (listed, stored);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    if result.is_err() {
        panic!(
            "the store did not match the server {when}: listed {:?}, stored {:?}",
            last.0, last.1
        );
    }
}

/// A creation, an update and a deletion.
async fn churn(api: &Api<ConfigMap>, tag: &str) {
    api.create(
        &PostParams::default(),
        &configmap(&format!("cm-{tag}"), &[]),
    )
    .await
    .unwrap();
    let existing = api.list(&ListParams::default()).await.unwrap().items;
    let [first, second, ..] = existing.as_slice() else {
        panic!("at least two configmaps")
    };
    api.patch(
        &first.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"tag": tag}})),
    )
    .await
    .unwrap();
    api.delete(&second.name_any(), &DeleteParams::default())
        .await
        .unwrap();
}

/// How many lists the watcher made (its lists are paged by 500; the test's are not).
fn watcher_lists(server: &FakeApiServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.verb == "list" && r.query.contains("limit=500"))
        .count()
}

/// Reconnects quickly: the fake server is local.
struct Quick;

impl Iterator for Quick {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(Duration::from_millis(50))
    }
}

impl Backoff for Quick {
    fn reset(&mut self) {}
}

fn key<K: Resource>(object: &K) -> (String, String) {
    (
        object.meta().name.clone().unwrap_or_default(),
        object.meta().resource_version.clone().unwrap_or_default(),
    )
}

fn rv<K: Resource>(object: &K) -> String {
    object
        .meta()
        .resource_version
        .clone()
        .expect("stored objects have a resourceVersion")
}

fn names<K: Resource>(objects: &[K]) -> Vec<String> {
    objects
        .iter()
        .map(|o| o.meta().name.clone().unwrap_or_default())
        .collect()
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn configmap(name: &str, pairs: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: meta(name),
        data: Some(data(pairs)),
        ..Default::default()
    }
}

fn labelled<K: Resource>(mut object: K, key: &str, value: &str) -> K {
    object
        .meta_mut()
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(key.into(), value.into());
    object
}

fn secret(name: &str, pairs: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: meta(name),
        string_data: Some(data(pairs)),
        ..Default::default()
    }
}

fn spec(size: i64) -> WidgetSpec {
    WidgetSpec { size, color: None }
}

fn phase(phase: &str) -> WidgetStatus {
    WidgetStatus {
        phase: Some(phase.into()),
    }
}

fn json_patch(operations: serde_json::Value) -> Patch<serde_json::Value> {
    Patch::Json(serde_json::from_value(operations).expect("a valid JSON patch"))
}

fn applied_by<K: Resource>(object: &K, manager: &str) -> bool {
    object.meta().managed_fields.iter().flatten().any(|entry| {
        entry.manager.as_deref() == Some(manager) && entry.operation.as_deref() == Some("Apply")
    })
}

/// The `Status` of a failed call.
fn api_error<T: Debug>(result: kube::Result<T>) -> Box<kube::core::Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}
