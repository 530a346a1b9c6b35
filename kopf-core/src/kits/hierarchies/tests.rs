//! Tests of the hierarchy helpers: owner references, labels, names and namespaces.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::ObjectMeta;
use serde_json::json;

use super::*;
use crate::clients::posting::Poster;
use crate::structs::resources::Resource;

fn parent() -> Value {
    json!({
        "apiVersion": "kopf.dev/v1",
        "kind": "KopfExample",
        "metadata": {
            "name": "parent",
            "namespace": "ns1",
            "uid": "uid-1",
            "labels": {"app": "db", "tier": "storage"},
        },
    })
}

fn kopfs_reference() -> Value {
    json!({
        "controller": true,
        "blockOwnerDeletion": true,
        "apiVersion": "kopf.dev/v1",
        "kind": "KopfExample",
        "name": "parent",
        "uid": "uid-1",
    })
}

#[test]
fn adopting_a_json_child_sets_what_it_lacks_and_keeps_what_it_has() {
    let mut bare = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    adopt(&mut bare, &parent()).unwrap();
    assert_eq!(
        bare,
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "ownerReferences": [kopfs_reference()],
                "generateName": "parent-",
                "namespace": "ns1",
                "labels": {"app": "db", "tier": "storage"},
            },
        })
    );
    assert_eq!(
        serde_json::to_string(&bare["metadata"]["ownerReferences"][0]).unwrap(),
        r#"{"controller":true,"blockOwnerDeletion":true,"apiVersion":"kopf.dev/v1","kind":"KopfExample","name":"parent","uid":"uid-1"}"#,
        "in Kopf's order of keys"
    );

    let mut own = json!({"metadata": {
        "name": "mine",
        "namespace": "ns2",
        "labels": {"tier": "cache"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Other", "name": "o", "uid": "uid-0"}],
    }});
    adopt(&mut own, &parent()).unwrap();
    adopt(&mut own, &parent()).unwrap();
    assert_eq!(
        own["metadata"],
        json!({
            "name": "mine",
            "namespace": "ns2",
            "labels": {"tier": "cache", "app": "db"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Other", "name": "o", "uid": "uid-0"},
                kopfs_reference(),
            ],
        }),
        "one reference per owner however often adopted; own name, namespace, labels kept"
    );
}

#[test]
fn many_children_of_every_form_are_adopted() {
    let owner = parent();
    let mut array = json!([{}, {"metadata": {"generateName": "x-"}}]);
    adopt(&mut array, &owner).unwrap();
    assert_eq!(array[0]["metadata"]["generateName"], "parent-");
    assert_eq!(array[1]["metadata"]["generateName"], "x-");
    assert_eq!(array[1]["metadata"]["ownerReferences"][0]["uid"], "uid-1");

    let mut values = vec![json!({}), json!({})];
    adopt(&mut values, &owner).unwrap();
    adopt(values.iter_mut(), &owner).unwrap();
    let mut pods = [Pod::default(), Pod::default()];
    adopt(&mut pods, &owner).unwrap();
    let (mut a, mut b) = (ConfigMap::default(), json!({}));
    adopt([&mut a], &owner).unwrap();
    adopt(&mut b, &owner).unwrap();
    let mut absent: Option<Pod> = None;
    adopt(&mut absent, &owner).unwrap();
    for meta in values
        .iter()
        .map(|v| &v["metadata"])
        .chain([&b["metadata"]])
    {
        assert_eq!(meta["ownerReferences"].as_array().map(Vec::len), Some(1));
        assert_eq!(meta["namespace"], "ns1");
    }
    for meta in pods.iter().map(|p| &p.metadata).chain([&a.metadata]) {
        assert_eq!(meta.owner_references.as_ref().map(Vec::len), Some(1));
        assert_eq!(meta.generate_name.as_deref(), Some("parent-"));
    }
}

#[test]
fn typed_children_are_adopted_as_kopf_adopts_kubernetes_models() {
    let mut pod = Pod {
        metadata: ObjectMeta {
            labels: Some(BTreeMap::from([("tier".into(), "cache".into())])),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    };
    adopt(&mut pod, &parent()).unwrap();
    assert_eq!(
        pod.metadata,
        ObjectMeta {
            generate_name: Some("parent-".into()),
            namespace: Some("ns1".into()),
            labels: Some(BTreeMap::from([
                ("app".into(), "db".into()),
                ("tier".into(), "cache".into()),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: "kopf.dev/v1".into(),
                kind: "KopfExample".into(),
                name: "parent".into(),
                uid: "uid-1".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        }
    );
    remove_owner_reference(&mut pod, &parent()).unwrap();
    assert_eq!(pod.metadata.owner_references, Some(vec![]));
}

#[derive(
    kube::CustomResource, serde::Serialize, serde::Deserialize, Clone, Debug, schemars::JsonSchema,
)]
#[kube(group = "kopf.dev", version = "v1", kind = "KopfChild", namespaced)]
struct KopfChildSpec {
    field: String,
}

#[test]
fn typed_owners_and_custom_resources_work_as_json_ones() {
    let owner = ConfigMap {
        metadata: ObjectMeta {
            name: Some("config".into()),
            namespace: Some("ns1".into()),
            uid: Some("uid-2".into()),
            labels: Some(BTreeMap::from([("app".into(), "db".into())])),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    let mut child = KopfChild::new("", KopfChildSpec { field: "x".into() });
    child.metadata.name = None;
    adopt(&mut child, &owner).unwrap();
    let body = serde_json::to_value(&child).unwrap();
    assert_eq!(
        body["metadata"],
        json!({
            "generateName": "config-",
            "namespace": "ns1",
            "labels": {"app": "db"},
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "config", "uid": "uid-2",
                "controller": true, "blockOwnerDeletion": true,
            }],
        })
    );
    // And a custom resource as the owner of a JSON child.
    child.metadata.name = Some("custom".into());
    child.metadata.uid = Some("uid-3".into());
    let mut json_child = json!({});
    append_owner_reference(&mut json_child, &child).unwrap();
    assert_eq!(
        json_child["metadata"]["ownerReferences"][0],
        json!({"controller": true, "blockOwnerDeletion": true, "apiVersion": "kopf.dev/v1", "kind": "KopfChild", "name": "custom", "uid": "uid-3"})
    );
}

#[test]
fn owner_references_are_removed_by_the_owners_uid_only() {
    let mut child = json!({"metadata": {"ownerReferences": [
        {"uid": "uid-0"}, {"uid": "uid-1", "name": "renamed"}, {"uid": "uid-2"},
    ]}});
    remove_owner_reference(&mut child, &parent()).unwrap();
    assert_eq!(
        child["metadata"]["ownerReferences"],
        json!([{"uid": "uid-0"}, {"uid": "uid-2"}])
    );
}

#[test]
fn labels_are_kept_unless_forced() {
    let mut children = [
        json!({"metadata": {"labels": {"app": "mine"}}}),
        json!({"metadata": {"labels": null}}),
    ];
    label(&mut children, [("app", "db")], false).unwrap();
    assert_eq!(children[0]["metadata"]["labels"], json!({"app": "mine"}));
    assert_eq!(children[1]["metadata"]["labels"], json!({"app": "db"}));
    let labels = BTreeMap::from([("app".to_string(), "db".to_string())]);
    label(&mut children, &labels, true).unwrap();
    assert_eq!(children[0]["metadata"]["labels"], json!({"app": "db"}));
    let mut pod = Pod::default();
    label(&mut pod, &labels, false).unwrap();
    assert_eq!(pod.metadata.labels, Some(labels));
}

#[test]
fn naming_is_a_prefix_or_strict_and_never_replaces_a_name() {
    let mut children = [
        json!({}),
        json!({"metadata": {"name": null}}),
        json!({"metadata": {"name": "mine"}}),
        json!({"metadata": {"generateName": "mine-"}}),
    ];
    harmonize_naming(&mut children, "parent", true).unwrap();
    assert_eq!(children[0]["metadata"], json!({"name": "parent"}));
    assert_eq!(children[1]["metadata"], json!({"name": "parent"}));
    assert_eq!(children[2]["metadata"], json!({"name": "mine"}));
    assert_eq!(children[3]["metadata"], json!({"generateName": "mine-"}));
    let mut pods = [Pod::default(), Pod::default()];
    harmonize_naming(&mut pods[..1], "parent", false).unwrap();
    harmonize_naming(&mut pods[1], "parent", true).unwrap();
    assert_eq!(pods[0].metadata.generate_name.as_deref(), Some("parent-"));
    assert_eq!(pods[0].metadata.name, None);
    assert_eq!(pods[1].metadata.name.as_deref(), Some("parent"));
    assert_eq!(pods[1].metadata.generate_name, None);
}

#[test]
fn namespaces_are_set_when_absent_or_forced_and_a_cluster_owner_sets_none() {
    let mut children = [json!({}), json!({"metadata": {"namespace": "mine"}})];
    adjust_namespace(&mut children, Some("ns1"), false).unwrap();
    assert_eq!(children[0]["metadata"]["namespace"], "ns1");
    assert_eq!(children[1]["metadata"]["namespace"], "mine");
    adjust_namespace(&mut children, Some("ns2"), true).unwrap();
    assert_eq!(children[1]["metadata"]["namespace"], "ns2");
    adjust_namespace(&mut children, None, false).unwrap();
    assert_eq!(children[1]["metadata"]["namespace"], "ns2");
    adjust_namespace(&mut children, None, true).unwrap();
    assert_eq!(children[1]["metadata"], json!({}));

    // A cluster-scoped owner: the namespaced child keeps what it has, or has none.
    let owner = Namespace {
        metadata: ObjectMeta {
            name: Some("team".into()),
            uid: Some("uid-9".into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    let mut children = [json!({}), json!({"metadata": {"namespace": "team"}})];
    adopt(&mut children, &owner).unwrap();
    assert_eq!(children[0]["metadata"].get("namespace"), None);
    assert_eq!(children[1]["metadata"]["namespace"], "team");
    assert_eq!(
        children[0]["metadata"]["ownerReferences"][0]["kind"],
        "Namespace"
    );
    let mut pod = Pod::default();
    adopt(&mut pod, &owner).unwrap();
    assert_eq!(pod.metadata.namespace, None);
}

#[test]
fn bad_owners_and_children_are_clear_errors_that_change_nothing_more() {
    let mut manifest = parent();
    manifest["metadata"].as_object_mut().unwrap().remove("uid");
    let mut child = json!({});
    let error = adopt(&mut child, &manifest).unwrap_err();
    assert_eq!(
        error,
        HierarchyError::IncompleteOwner {
            field: "metadata.uid"
        }
    );
    assert!(error.to_string().contains("the owner has no metadata.uid"));
    assert_eq!(child, json!({}), "nothing changed");
    assert_eq!(
        adopt(
            &mut Pod::default(),
            &json!({"metadata": {"name": "n", "uid": "u"}})
        ),
        Err(HierarchyError::IncompleteOwner {
            field: "apiVersion"
        })
    );
    assert_eq!(
        adopt(&mut Pod::default(), &Pod::default()),
        Err(HierarchyError::IncompleteOwner {
            field: "metadata.name"
        })
    );

    let mut children = [json!({}), json!("text")];
    assert_eq!(
        adopt(&mut children, &parent()),
        Err(HierarchyError::NotAnObject { found: "a string" })
    );
    assert_eq!(children[0]["metadata"]["generateName"], "parent-");
    let mut null = Value::Null;
    assert_eq!(
        label(&mut null, [("a", "b")], false),
        Err(HierarchyError::NotAnObject { found: "null" })
    );
    let mut malformed = json!({"metadata": {"labels": ["a"]}});
    let error = label(&mut malformed, [("a", "b")], false).unwrap_err();
    assert_eq!(
        error.to_string(),
        "a child's metadata.labels is an array, not an object"
    );
    let mut malformed = json!({"metadata": {"ownerReferences": {}}});
    assert_eq!(
        append_owner_reference(&mut malformed, &parent()),
        Err(HierarchyError::MalformedChild {
            field: "metadata.ownerReferences",
            expected: "an array",
            found: "an object"
        })
    );
    let mut malformed = json!({"metadata": 1});
    assert!(harmonize_naming(&mut malformed, "x", false).is_err());
}

#[tokio::test]
async fn adopting_to_the_current_object_works_only_within_a_handler() {
    let mut child = json!({});
    let error = adopt_to_current(&mut child).unwrap_err();
    assert_eq!(error, HierarchyError::NoCurrentObject);
    assert!(
        error
            .to_string()
            .contains("pass the owner to kopf::hierarchies::adopt()")
    );
    assert_eq!(child, json!({}));

    let body = Arc::new(crate::structs::bodies::Body::from(parent()));
    let current = Current {
        events: Poster::disabled().events(&body, &Resource::default()),
        body,
        subhandlers: None,
    };
    let adopted = current
        .clone()
        .enter(|| async {
            let mut child = json!({});
            adopt_to_current(&mut child).map(|()| child)
        })
        .await
        .unwrap();
    assert_eq!(adopted["metadata"]["ownerReferences"][0], kopfs_reference());
    let mut pod = Pod::default();
    std::thread::scope(|scope| {
        scope
            .spawn(|| current.clone().enter_sync(|| adopt_to_current(&mut pod)))
            .join()
            .unwrap()
    })
    .unwrap();
    assert_eq!(pod.metadata.namespace.as_deref(), Some("ns1"));

    let activity = Current {
        body: Arc::default(),
        ..current
    };
    let outside = activity.enter_sync(|| adopt_to_current(&mut json!({})));
    assert_eq!(outside, Err(HierarchyError::NoCurrentObject));
}

/// Kopf's `controller=` and `block_owner_deletion=`: `None` leaves the key out, as Kopf's
/// `build_owner_reference` does.
#[test]
fn owner_reference_options_are_kopfs() {
    let options = Options::default()
        .controller(Some(false))
        .block_owner_deletion(None);
    let mut child = json!({});
    append_owner_reference_with(&mut child, &parent(), &options).unwrap();
    let reference = &child["metadata"]["ownerReferences"][0];
    assert_eq!(reference["controller"], false);
    assert_eq!(reference.get("blockOwnerDeletion"), None);
    assert_eq!(reference["uid"], kopfs_reference()["uid"]);
    let mut pod = Pod::default();
    append_owner_reference_with(&mut pod, &parent(), &options).unwrap();
    let reference = &pod.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (reference.controller, reference.block_owner_deletion),
        (Some(false), None)
    );
    let mut defaults = json!({});
    adopt_with(&mut defaults, &parent(), &Options::default()).unwrap();
    assert_eq!(
        defaults["metadata"]["ownerReferences"][0],
        kopfs_reference()
    );
}

/// Kopf's `forced` and `strict`: forced names replace the children's own (the other of
/// `name`/`generateName` removed), and forced adoption replaces namespaces and labels.
#[test]
fn forced_adoption_replaces_names_namespaces_and_labels() {
    let mut child = json!({"metadata": {
        "name": "mine", "namespace": "elsewhere", "labels": {"app": "mine"},
    }});
    adopt_with(&mut child, &parent(), &Options::default().forced(true)).unwrap();
    let meta = &child["metadata"];
    let parent = parent();
    assert_eq!(meta.get("name"), None, "not strict: a generateName instead");
    assert_eq!(
        meta["generateName"],
        format!("{}-", parent["metadata"]["name"].as_str().unwrap())
    );
    assert_eq!(meta["namespace"], parent["metadata"]["namespace"]);
    for (key, value) in parent["metadata"]["labels"].as_object().unwrap() {
        assert_eq!(&meta["labels"][key], value, "{key}");
    }
    let mut typed = ConfigMap {
        metadata: ObjectMeta {
            generate_name: Some("mine-".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    let strict = Options::default().forced(true).strict(true);
    harmonize_naming_with(&mut typed, "exact", &strict).unwrap();
    assert_eq!(
        (typed.metadata.name.as_deref(), typed.metadata.generate_name),
        (Some("exact"), None)
    );
    let mut kept = json!({"metadata": {"name": "mine"}});
    harmonize_naming_with(&mut kept, "exact", &Options::default().strict(true)).unwrap();
    assert_eq!(kept["metadata"]["name"], "mine", "not forced: kept");
}

/// Kopf's `nested`: the objects in the fields are labelled too; absent fields are skipped;
/// a field that is not an object, or nested fields of a typed child, are clear errors; a
/// typed object's nested metadata is labelled as a child of its own.
#[test]
fn nested_objects_are_labelled_too() {
    let mut deployment = json!({"spec": {"template": {"spec": {}}}});
    let options = Options::default()
        .nested("spec.template")
        .nested("spec.missing.deeper");
    label_with(&mut deployment, [("app", "db")], &options).unwrap();
    assert_eq!(deployment["metadata"]["labels"]["app"], "db");
    assert_eq!(
        deployment["spec"]["template"]["metadata"]["labels"]["app"],
        "db"
    );
    assert_eq!(deployment["spec"].get("missing"), None, "nothing made");

    let mut odd = json!({"spec": {"template": 1}});
    let error = label_with(&mut odd, [("app", "db")], &options).unwrap_err();
    assert_eq!(
        error,
        HierarchyError::MalformedNested {
            field: "spec.template".into(),
            found: "a number"
        }
    );
    let error = label_with(&mut Pod::default(), [("app", "db")], &options).unwrap_err();
    assert!(
        matches!(&error, HierarchyError::NestedInTyped { field } if field == "spec.template"),
        "{error}"
    );
    assert!(error.to_string().contains("ObjectMeta"), "{error}");

    let mut template = ObjectMeta::default();
    let mut pod = Pod::default();
    label([&mut template, &mut pod.metadata], [("app", "db")], false).unwrap();
    assert_eq!(template.labels.unwrap()["app"], "db");
    assert_eq!(pod.metadata.labels.unwrap()["app"], "db");
}

/// Kopf's inferred owner: the object of the handler running now, its labels, name and
/// namespace; outside of one, a clear error.
#[tokio::test]
async fn the_current_object_is_the_owner_that_kopf_infers() {
    assert_eq!(CurrentObject.name(), Err(HierarchyError::NoCurrentObject));
    let mut child = json!({});
    assert_eq!(
        append_owner_reference(&mut child, &CurrentObject),
        Err(HierarchyError::NoCurrentObject)
    );
    let body = Arc::new(crate::structs::bodies::Body::from(parent()));
    let current = Current {
        events: Poster::disabled().events(&body, &Resource::default()),
        body,
        subhandlers: None,
    };
    let (reference, labels, name, namespace) = current
        .enter(|| async {
            let mut child = json!({});
            append_owner_reference(&mut child, &CurrentObject).unwrap();
            (
                child["metadata"]["ownerReferences"][0].clone(),
                CurrentObject.labels().unwrap(),
                CurrentObject.name().unwrap(),
                CurrentObject.namespace().unwrap(),
            )
        })
        .await;
    let parent = parent();
    assert_eq!(reference, kopfs_reference());
    assert_eq!(name, parent["metadata"]["name"].as_str().unwrap());
    assert_eq!(
        namespace.as_deref(),
        parent["metadata"]["namespace"].as_str()
    );
    let expected: BTreeMap<String, String> =
        serde_json::from_value(parent["metadata"]["labels"].clone()).unwrap();
    assert_eq!(labels, expected);
}

/// Kopf's `build_owner_reference`: the reference `append_owner_reference` adds, alone, with
/// Kopf's defaults and keys; an owner without a uid is an error (Kopf would drop the field, and
/// the API server refuse the reference).
#[test]
fn owner_references_are_built_as_kopf_builds_them() {
    let reference = build_owner_reference(&parent()).unwrap();
    assert_eq!(serde_json::to_value(&reference).unwrap(), kopfs_reference());
    let options = Options::default()
        .controller(None)
        .block_owner_deletion(Some(false));
    let reference = build_owner_reference_with(&parent(), &options).unwrap();
    assert_eq!(reference.controller, None);
    assert_eq!(reference.block_owner_deletion, Some(false));
    let mut typed = Namespace::default();
    typed.metadata.name = Some("ns1".into());
    typed.metadata.uid = Some("nsuid".into());
    let reference = build_owner_reference(&typed).unwrap();
    assert_eq!(
        (reference.api_version.as_str(), reference.kind.as_str()),
        ("v1", "Namespace")
    );
    let mut anonymous = parent();
    anonymous["metadata"].as_object_mut().unwrap().remove("uid");
    assert!(matches!(
        build_owner_reference(&anonymous),
        Err(HierarchyError::IncompleteOwner {
            field: "metadata.uid"
        })
    ));
}

/// Kopf's `build_object_reference`: what the body has, and nothing it lacks.
#[test]
fn object_references_keep_only_what_the_body_has() {
    let reference = build_object_reference(&parent());
    assert_eq!(
        serde_json::to_value(&reference).unwrap(),
        json!({
            "apiVersion": "kopf.dev/v1",
            "kind": "KopfExample",
            "name": "parent",
            "namespace": "ns1",
            "uid": "uid-1",
        })
    );
    let node = json!({"kind": "Node", "metadata": {"name": "n1", "namespace": ""}});
    assert_eq!(
        serde_json::to_value(build_object_reference(&node)).unwrap(),
        json!({"kind": "Node", "name": "n1"})
    );
    assert_eq!(
        build_object_reference(&json!(null)),
        ObjectReference::default()
    );
}
