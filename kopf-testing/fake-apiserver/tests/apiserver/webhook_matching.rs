//! Which requests reach which webhooks: rules (operations, resources and subresources,
//! scopes, equivalent versions), namespace and object selectors, and match conditions; and the
//! subresources whose objects are of another kind (`Scale`).

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kopf_fake_apiserver::FakeApiServer;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support;
use crate::webhook_server::{Answer, WebhookServer};
use crate::webhooks::{api_error, config_map, entry, mutating, script, unregister, validating};

#[tokio::test]
async fn rules_selectors_and_match_conditions_choose_the_requests_webhooks_see() {
    let webhook = WebhookServer::start(script(|_, review| Answer::deny(review, "no", 403))).await;
    let server = FakeApiServer::start().await.unwrap();
    let client = support::client_without_retries(&server);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for (name, label) in [("guarded", "on"), ("open", "off")] {
        let namespace = json!({"metadata": {"name": name, "labels": {"webhooks": label}}});
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(namespace).unwrap(),
            )
            .await
            .unwrap();
    }
    let by_namespace = entry(
        &webhook,
        "namespaces.example.com",
        "/ns",
        json!({
            "namespaceSelector": {"matchLabels": {"webhooks": "on"}},
            "rules": [{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps", "namespaces"]}],
        }),
    );
    let by_object = entry(
        &webhook,
        "objects.example.com",
        "/objects",
        json!({"objectSelector": {"matchLabels": {"check": "yes"}}}),
    );
    let by_condition = entry(
        &webhook,
        "conditions.example.com",
        "/conditions",
        json!({"matchConditions": [
            {"name": "guarded-names", "expression": "request.name.startsWith('guarded-')"},
        ]}),
    );
    validating(
        &server,
        "selective",
        vec![by_namespace, by_object, by_condition],
    )
    .await;
    let in_ns = |ns: &str| Api::<ConfigMap>::namespaced(client.clone(), ns);

    in_ns("open")
        .create(&PostParams::default(), &config_map("plain", json!({})))
        .await
        .unwrap();
    let error = api_error(
        in_ns("guarded")
            .create(&PostParams::default(), &config_map("plain", json!({})))
            .await,
    );
    assert!(
        error.message.contains("\"namespaces.example.com\" denied"),
        "{}",
        error.message
    );

    let mut labelled = config_map("labelled", json!({}));
    labelled.metadata.labels = Some([("check".to_string(), "yes".to_string())].into());
    let error = api_error(
        in_ns("open")
            .create(&PostParams::default(), &labelled)
            .await,
    );
    assert!(
        error.message.contains("\"objects.example.com\" denied"),
        "{}",
        error.message
    );

    let error = api_error(
        in_ns("open")
            .create(
                &PostParams::default(),
                &config_map("guarded-one", json!({})),
            )
            .await,
    );
    assert!(
        error.message.contains("\"conditions.example.com\" denied"),
        "{}",
        error.message
    );
    assert!(
        webhook
            .received("/conditions")
            .iter()
            .all(|r| r.review["request"]["name"] == "guarded-one")
    );

    // Namespaces are selected by their own labels; other cluster-scoped objects always.
    let error = api_error(
        namespaces
            .patch(
                "guarded",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"a": "b"}}})),
            )
            .await,
    );
    assert!(
        error.message.contains("\"namespaces.example.com\" denied"),
        "{}",
        error.message
    );
    unregister(&server, "selective").await;

    // A condition that cannot be evaluated refuses the request under Fail.
    let broken = entry(
        &webhook,
        "broken-condition.example.com",
        "/broken",
        json!({"matchConditions": [{"name": "broken", "expression": "object.nosuchfield == 1"}]}),
    );
    validating(&server, "broken", vec![broken]).await;
    let error = api_error(
        in_ns("open")
            .create(&PostParams::default(), &config_map("any", json!({})))
            .await,
    );
    assert_eq!(error.code, 403, "{}", error.message);
    assert!(webhook.received("/broken").is_empty());
    unregister(&server, "broken").await;

    // Subresources: `pods/status` is called for status writes only.
    let status_only = entry(
        &webhook,
        "status.example.com",
        "/status",
        json!({"rules": [{"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/status"]}]}),
    );
    validating(&server, "status", vec![status_only]).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "open");
    let pod =
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod).unwrap(),
    )
    .await
    .unwrap();
    pods.patch(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await
    .expect("the main resource is not matched by pods/status");
    let error = api_error(
        pods.patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {"sneaky": "yes"}}, "status": {"message": "hi"}}),
            ),
        )
        .await,
    );
    assert!(
        error.message.contains("\"status.example.com\" denied"),
        "{}",
        error.message
    );
    let request = &webhook.received("/status")[0].review["request"];
    assert_eq!(request["subResource"], "status");
    assert_eq!(request["requestSubResource"], "status");
    assert_eq!(request["kind"]["kind"], "Pod");
    assert_eq!(request["object"]["status"]["message"], "hi");
    assert_eq!(
        request["object"]["metadata"]["labels"],
        json!({"a": "b"}),
        "a status write changes only the status, and webhooks see it so"
    );
    server.stop().await;
}

#[tokio::test]
async fn equivalent_versions_match_and_are_reviewed_in_the_version_of_the_rule() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{ApiResource, DynamicObject};

    let webhook = WebhookServer::start(script(|_, review| Answer::allow(review))).await;
    let server = FakeApiServer::start().await.unwrap();
    let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    let crd = json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "scope": "Namespaced",
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema},
                {"name": "v2", "served": true, "storage": false, "schema": schema},
            ],
        },
    });
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(crd).unwrap(),
    )
    .await
    .unwrap();
    let rules = json!([{"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["widgets"]}]);
    let equivalent = entry(
        &webhook,
        "equivalent.example.com",
        "/equivalent",
        json!({"rules": rules}),
    );
    let exact = entry(
        &webhook,
        "exact.example.com",
        "/exact",
        json!({"rules": rules, "matchPolicy": "Exact"}),
    );
    validating(&server, "versions", vec![equivalent, exact]).await;

    let v2 = ApiResource {
        group: "example.com".into(),
        version: "v2".into(),
        api_version: "example.com/v2".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let widgets: Api<DynamicObject> = Api::default_namespaced_with(server.client(), &v2);
    let widget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1},
    }))
    .unwrap();
    support::wait("the v2 widgets are served", || async {
        widgets.create(&PostParams::default(), &widget).await.ok()
    })
    .await;
    assert!(
        webhook.received("/exact").is_empty(),
        "Exact matches the rule's versions only"
    );
    let request = &webhook.received("/equivalent")[0].review["request"];
    assert_eq!(
        request["kind"],
        json!({"group": "example.com", "version": "v1", "kind": "Widget"})
    );
    assert_eq!(
        request["requestKind"],
        json!({"group": "example.com", "version": "v2", "kind": "Widget"})
    );
    assert_eq!(request["resource"]["version"], "v1");
    assert_eq!(request["requestResource"]["version"], "v2");
    assert_eq!(request["object"]["apiVersion"], "example.com/v1");
    server.stop().await;
}

#[tokio::test]
async fn scale_subresource_webhooks_see_and_change_the_scale() {
    use k8s_openapi::api::apps::v1::Deployment;

    let webhook = WebhookServer::start(script(|path, review| {
        let replicas = review["request"]["object"]["spec"]["replicas"]
            .as_i64()
            .unwrap_or(0);
        match path.split('?').next().unwrap_or_default() {
            "/round-up" if replicas % 2 == 1 => Answer::patch(
                review,
                json!([{"op": "replace", "path": "/spec/replicas", "value": replicas + 1}]),
            ),
            "/at-most-ten" if replicas > 10 => Answer::deny(review, "at most 10 replicas", 422),
            _ => Answer::allow(review),
        }
    }))
    .await;
    let server = FakeApiServer::start().await.unwrap();
    let client = support::client_without_retries(&server);
    let deployments: Api<Deployment> = Api::default_namespaced(client);
    support::create_deployment(&deployments, Some(1)).await;
    let rules = json!([{"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments/scale"]}]);
    let round_up = entry(
        &webhook,
        "round-up.example.com",
        "/round-up",
        json!({"rules": rules}),
    );
    mutating(&server, "round-up", vec![round_up]).await;
    let at_most_ten = entry(
        &webhook,
        "at-most-ten.example.com",
        "/at-most-ten",
        json!({"rules": rules}),
    );
    validating(&server, "at-most-ten", vec![at_most_ten]).await;

    let scale = |replicas: i64| Patch::Merge(json!({"spec": {"replicas": replicas}}));
    let scaled = deployments
        .patch_scale("d", &PatchParams::default(), &scale(3))
        .await
        .unwrap();
    assert_eq!(
        scaled.spec.unwrap().replicas,
        Some(4),
        "the mutating webhook rounded up"
    );
    let stored = deployments.get("d").await.unwrap();
    assert_eq!(stored.spec.unwrap().replicas, Some(4));
    let request = &webhook.received("/round-up")[0].review["request"];
    assert_eq!(
        request["kind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    );
    assert_eq!(
        request["resource"],
        json!({"group": "apps", "version": "v1", "resource": "deployments"})
    );
    assert_eq!(request["subResource"], "scale");
    assert_eq!(request["oldObject"]["spec"]["replicas"], 1);

    let error = api_error(
        deployments
            .patch_scale("d", &PatchParams::default(), &scale(20))
            .await,
    );
    assert_eq!(error.code, 422);
    assert_eq!(
        error.message,
        "admission webhook \"at-most-ten.example.com\" denied the request: at most 10 replicas"
    );
    let stored = deployments.get("d").await.unwrap();
    assert_eq!(stored.spec.unwrap().replicas, Some(4), "nothing is stored");
    deployments
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 20}})),
        )
        .await
        .expect("the main resource is not matched by deployments/scale");
    server.stop().await;
}

#[tokio::test]
async fn removing_the_last_finalizer_is_an_update() {
    let webhook = WebhookServer::start(script(|_, review| Answer::allow(review))).await;
    let server = FakeApiServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(support::client_without_retries(&server));
    let mut held = config_map("held", json!({}));
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    let all = entry(&webhook, "all.example.com", "/all", json!({}));
    validating(&server, "all", vec![all]).await;

    api.delete("held", &Default::default()).await.unwrap();
    let patch = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    api.patch("held", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert!(api.get_opt("held").await.unwrap().is_none(), "gone");
    let operations: Vec<Value> = webhook
        .received("/all")
        .iter()
        .map(|r| r.review["request"]["operation"].clone())
        .collect();
    assert_eq!(operations, [json!("DELETE"), json!("UPDATE")]);
    let update = &webhook.received("/all")[1].review["request"];
    assert!(
        update["oldObject"]["metadata"]["deletionTimestamp"].is_string(),
        "{update}"
    );
    assert_eq!(
        update["object"]["metadata"].get("finalizers"),
        None,
        "{update}"
    );
    server.stop().await;
}
