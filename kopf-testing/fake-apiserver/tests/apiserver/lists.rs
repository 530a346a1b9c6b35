//! Lists in pages: which objects each page holds, in one namespace among others, and what a
//! page says about the rest of the list (`continue`, `remainingItemCount`), as the real server.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kopf_fake_apiserver::FakeApiServer;
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};

/// A Secret named `name` with the label `tier`.
fn secret(name: &str, tier: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(BTreeMap::from([("tier".to_string(), tier.to_string())])),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn names(secrets: &[Secret]) -> Vec<String> {
    secrets.iter().map(|secret| secret.name_any()).collect()
}

/// Creates Secrets `s-0`, `s-1`, … in `namespace`, of the even and odd tier in turn.
async fn secrets(server: &FakeApiServer, namespace: &str, count: usize) -> Api<Secret> {
    let namespaces: Api<Namespace> = Api::all(server.client());
    if namespaces.get_opt(namespace).await.unwrap().is_none() {
        let created = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        namespaces
            .create(&PostParams::default(), &created)
            .await
            .unwrap();
    }
    let api: Api<Secret> = Api::namespaced(server.client(), namespace);
    for i in 0..count {
        let tier = if i % 2 == 0 { "even" } else { "odd" };
        api.create(&PostParams::default(), &secret(&format!("s-{i}"), tier))
            .await
            .unwrap();
    }
    api
}

#[tokio::test]
async fn a_page_counts_the_rest_only_when_nothing_filters_the_list() {
    let server = FakeApiServer::start().await.unwrap();
    let api = secrets(&server, "default", 6).await;

    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(names(&first.items), ["s-0", "s-1"]);
    assert_eq!(first.metadata.remaining_item_count, Some(4));
    assert!(first.metadata.continue_.is_some());

    // A count would include the objects a selector leaves out: the real server gives none.
    let even = ListParams::default().labels("tier=even").limit(2);
    let first = api.list(&even).await.unwrap();
    assert_eq!(names(&first.items), ["s-0", "s-2"]);
    assert_eq!(first.metadata.remaining_item_count, None);
    let token = first.metadata.continue_.expect("one more page");
    let rest = api.list(&even.continue_token(&token)).await.unwrap();
    assert_eq!(names(&rest.items), ["s-4"]);
    assert_eq!(rest.metadata.continue_, None);

    let named = ListParams::default().fields("metadata.name!=s-0").limit(2);
    let first = api.list(&named).await.unwrap();
    assert_eq!(names(&first.items), ["s-1", "s-2"]);
    assert_eq!(first.metadata.remaining_item_count, None);
    assert!(first.metadata.continue_.is_some());

    // A filtered page that takes the last matching objects says there is nothing more.
    let odd = api
        .list(&ListParams::default().labels("tier=odd").limit(3))
        .await
        .unwrap();
    assert_eq!(names(&odd.items), ["s-1", "s-3", "s-5"]);
    assert_eq!(odd.metadata.continue_, None);
    server.stop().await;
}

#[tokio::test]
async fn pages_of_one_namespace_hold_its_objects_only_whatever_lies_around_it() {
    let server = FakeApiServer::start().await.unwrap();
    for (namespace, count) in [("list-a", 3), ("list-c", 2)] {
        secrets(&server, namespace, count).await;
    }
    let api = secrets(&server, "list-b", 5).await;

    let mut listed = Vec::new();
    let mut counts = Vec::new();
    let mut params = ListParams::default().limit(2);
    loop {
        let page = api.list(&params).await.unwrap();
        listed.extend(names(&page.items));
        counts.push(page.metadata.remaining_item_count);
        match page.metadata.continue_ {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    assert_eq!(listed, ["s-0", "s-1", "s-2", "s-3", "s-4"]);
    assert_eq!(counts, [Some(3), Some(1), None]);
    server.stop().await;
}
