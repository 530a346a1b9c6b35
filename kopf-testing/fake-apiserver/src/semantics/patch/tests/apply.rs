//! Server-side apply: field sets, conflicts, forcing, several managers, and malformed input.

use super::*;

/// Creating by apply records the Kubernetes FieldsV1 encoding.
#[test]
fn ssa_create_records_fieldsv1() {
    let out = server_side_apply(Some("Deployment"), None, &web(2), "kubectl", false, NOW)
        .expect("created");
    let entries = managed(&out);
    assert_eq!(entries.len(), 1);
    let expected_fields = json!({
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {
            "f:replicas": {},
            "f:selector": {"f:matchLabels": {"f:app": {}}},
            "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                    ".": {},
                    "f:image": {},
                    "f:name": {},
                    "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
                }}}
            }
        }
    });
    assert_eq!(
        entries[0],
        json!({"manager":"kubectl","operation":"Apply","apiVersion":"apps/v1","time":NOW,"fieldsType":"FieldsV1","fieldsV1":expected_fields})
    );
    // Key order as Kubernetes writes it: "." first, then sorted elements.
    let text = entries[0]["fieldsV1"].to_string();
    assert!(
        text.contains(r#"{".":{},"f:image":{},"f:name":{},"f:ports":"#),
        "{text}"
    );
    let mut without = out.clone();
    if let Some(Value::Object(meta)) = without.get_mut("metadata") {
        meta.shift_remove("managedFields");
    }
    assert_eq!(without, web(2));
}

/// Applied managedFields and server metadata are dropped; sets are `v:` items.
#[test]
fn ssa_create_drops_managed_fields_and_server_metadata_from_applied() {
    let mut applied = web(1);
    if let Some(Value::Object(meta)) = applied.get_mut("metadata") {
        meta.insert(
            "managedFields".into(),
            json!([{"manager":"forged","operation":"Apply"}]),
        );
        meta.insert("resourceVersion".into(), json!("99"));
        meta.insert("creationTimestamp".into(), Value::Null);
        meta.insert("finalizers".into(), json!(["a", "b"]));
    }
    let out = server_side_apply(None, None, &applied, "me", false, NOW).expect("created");
    assert_eq!(out["metadata"].get("resourceVersion"), None);
    assert_eq!(out["metadata"].get("creationTimestamp"), None);
    let entries = managed(&out);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["manager"], "me");
    assert_eq!(
        entries[0]["fieldsV1"]["f:metadata"]["f:finalizers"],
        json!({"v:\"a\"": {}, "v:\"b\"": {}})
    );
    // Without a kind (custom resource) the containers list is atomic.
    assert_eq!(
        entries[0]["fieldsV1"]["f:spec"]["f:template"]["f:spec"],
        json!({"f:containers": {}})
    );
}

/// Re-applying without a field removes it.
#[test]
fn ssa_reapply_removes_fields_no_longer_applied() {
    let mut first = web(2);
    first["spec"]["paused"] = json!(true);
    first["metadata"]["labels"]["tier"] = json!("front");
    first["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
        .push(json!({"name": "sidecar", "image": "envoy"}));
    let live = stored(
        server_side_apply(Some("Deployment"), None, &first, "kubectl", false, NOW)
            .expect("created"),
    );
    let out = server_side_apply(
        Some("Deployment"),
        Some(&live),
        &web(2),
        "kubectl",
        false,
        LATER,
    )
    .expect("applied");
    assert_eq!(out["spec"].get("paused"), None);
    assert_eq!(out["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(
        names(&out["spec"]["template"]["spec"]["containers"]),
        ["nginx"]
    );
    assert_eq!(
        out["metadata"]["resourceVersion"], "7",
        "server-owned metadata comes from live"
    );
    assert_eq!(out["metadata"]["uid"], "u-1");
    let entries = managed(&out);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["time"], LATER);
    assert_eq!(entries[0]["fieldsV1"]["f:spec"].get("f:paused"), None);
    // Removing a whole subtree removes its parent map too.
    let mut bare = web(2);
    if let Some(Value::Object(meta)) = bare.get_mut("metadata") {
        meta.shift_remove("labels");
    }
    let out = server_side_apply(
        Some("Deployment"),
        Some(&stored(out)),
        &bare,
        "kubectl",
        false,
        LATER,
    )
    .expect("applied");
    assert_eq!(out["metadata"].get("labels"), None);
}

/// A no-op apply leaves the object, times included, unchanged.
#[test]
fn ssa_noop_reapply_keeps_time_and_object() {
    let live = stored(
        server_side_apply(Some("Deployment"), None, &web(2), "kubectl", false, NOW)
            .expect("created"),
    );
    let out = server_side_apply(
        Some("Deployment"),
        Some(&live),
        &web(2),
        "kubectl",
        false,
        LATER,
    )
    .expect("applied");
    assert_eq!(out, live);
}

/// Changing another applier's field conflicts; equal values are shared.
#[test]
fn ssa_conflict_with_another_applier() {
    let live = stored(
        server_side_apply(Some("Deployment"), None, &web(2), "alice", false, NOW).expect("created"),
    );
    let error = server_side_apply(
        Some("Deployment"),
        Some(&live),
        &web(5),
        "bob",
        false,
        LATER,
    )
    .expect_err("conflict");
    assert_eq!(error.code(), 409);
    assert_eq!(error.reason(), "Conflict");
    assert_eq!(
        error.to_string(),
        "Apply failed with 1 conflict: conflict with \"alice\": .spec.replicas"
    );
    let PatchError::Conflict { conflicts, .. } = error else {
        panic!("not a conflict")
    };
    assert_eq!(
        conflicts,
        vec![ApplyConflict {
            manager: "alice".into(),
            message: "conflict with \"alice\"".into(),
            field: ".spec.replicas".into()
        }]
    );
    // Same values are shared, not conflicting.
    let out = server_side_apply(
        Some("Deployment"),
        Some(&live),
        &web(2),
        "bob",
        false,
        LATER,
    )
    .expect("shared");
    assert_eq!(managed(&out).len(), 2);
    assert_eq!(out["spec"]["replicas"], 2);
}

/// `force` moves ownership of conflicting fields.
#[test]
fn ssa_force_moves_ownership() {
    let live = stored(
        server_side_apply(Some("Deployment"), None, &web(2), "alice", false, NOW).expect("created"),
    );
    let out = server_side_apply(Some("Deployment"), Some(&live), &web(5), "bob", true, LATER)
        .expect("forced");
    assert_eq!(out["spec"]["replicas"], 5);
    let alice = entry_of(&out, "alice").expect("alice keeps other fields");
    assert_eq!(alice["fieldsV1"]["f:spec"].get("f:replicas"), None);
    assert!(alice["fieldsV1"]["f:spec"].get("f:template").is_some());
    assert_eq!(alice["time"], NOW);
    let bob = entry_of(&out, "bob").expect("bob");
    assert_eq!(bob["fieldsV1"]["f:spec"]["f:replicas"], json!({}));
    assert_eq!(bob["time"], LATER);
    // Now alice conflicts with bob.
    let error = server_side_apply(
        Some("Deployment"),
        Some(&stored(out)),
        &web(2),
        "alice",
        false,
        LATER,
    )
    .expect_err("conflict");
    assert_eq!(
        error.to_string(),
        "Apply failed with 1 conflict: conflict with \"bob\": .spec.replicas"
    );
}

/// Conflict messages for Update managers and for `null`s.
#[test]
fn ssa_conflict_with_update_manager_message() {
    let mut live = stored(web(3));
    live["metadata"]["managedFields"] = json!([{
        "manager": "kubectl-client-side-apply",
        "operation": "Update",
        "apiVersion": "apps/v1",
        "time": "2024-01-01T00:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:replicas": {}, "f:paused": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}}
    }]);
    let mut applied = web(5);
    applied["spec"]["paused"] = json!(true);
    let error = server_side_apply(
        Some("Deployment"),
        Some(&live),
        &applied,
        "kubectl",
        false,
        NOW,
    )
    .expect_err("conflict");
    assert_eq!(
        error.to_string(),
        "Apply failed with 2 conflicts: conflicts with \"kubectl-client-side-apply\" using apps/v1 at 2024-01-01T00:00:00Z:\n- .spec.paused\n- .spec.replicas"
    );
    // A null in the applied object removes the field: a conflict too.
    let mut applied = web(3);
    applied["spec"]["replicas"] = Value::Null;
    let error = server_side_apply(
        Some("Deployment"),
        Some(&live),
        &applied,
        "kubectl",
        false,
        NOW,
    )
    .expect_err("conflict");
    assert!(error.to_string().ends_with(".spec.replicas"), "{error}");
    let out = server_side_apply(
        Some("Deployment"),
        Some(&live),
        &applied,
        "kubectl",
        true,
        NOW,
    )
    .expect("forced");
    assert_eq!(out["spec"].get("replicas"), None);
}

/// Replacing a map owned field by field by another manager conflicts.
#[test]
fn ssa_replacing_a_map_owned_by_another_manager_conflicts() {
    let live = stored(
        server_side_apply(Some("Deployment"), None, &web(2), "alice", false, NOW).expect("created"),
    );
    let mut applied = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": null}});
    let error = server_side_apply(
        Some("Deployment"),
        Some(&live),
        &applied,
        "bob",
        false,
        LATER,
    )
    .expect_err("conflict");
    assert_eq!(
        error.to_string(),
        "Apply failed with 1 conflict: conflict with \"alice\": .metadata.labels.app"
    );
    applied["metadata"]["labels"] = json!("oops");
    let error = server_side_apply(
        Some("Deployment"),
        Some(&live),
        &applied,
        "bob",
        false,
        LATER,
    )
    .expect_err("conflict");
    assert!(
        error.to_string().ends_with(".metadata.labels.app"),
        "{error}"
    );
}

/// Two appliers own different fields and prune only their own.
#[test]
fn ssa_two_managers_owning_different_fields() {
    let live = stored(
        server_side_apply(Some("Deployment"), None, &web(2), "alice", false, NOW).expect("created"),
    );
    let bob_config = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"team": "b"}},
        "spec": {"paused": true, "template": {"spec": {"containers": [{"name": "sidecar", "image": "envoy"}]}}}
    });
    let both = stored(
        server_side_apply(
            Some("Deployment"),
            Some(&live),
            &bob_config,
            "bob",
            false,
            LATER,
        )
        .expect("bob"),
    );
    assert_eq!(
        both["metadata"]["labels"],
        json!({"app": "web", "team": "b"})
    );
    assert_eq!(
        names(&both["spec"]["template"]["spec"]["containers"]),
        ["nginx", "sidecar"]
    );
    assert_eq!(managed(&both).len(), 2);
    // Alice drops her containers and labels: bob's stay, hers go.
    let alice_config = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 4}});
    let out = server_side_apply(
        Some("Deployment"),
        Some(&both),
        &alice_config,
        "alice",
        false,
        LATER,
    )
    .expect("alice");
    assert_eq!(out["metadata"]["labels"], json!({"team": "b"}));
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([{"name": "sidecar", "image": "envoy"}])
    );
    assert_eq!(out["spec"]["paused"], true);
    assert_eq!(out["spec"]["replicas"], 4);
    assert_eq!(out["spec"].get("selector"), None);
    // Bob drops everything: he loses his entry and his fields.
    let bob_empty =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}});
    let out = server_side_apply(
        Some("Deployment"),
        Some(&stored(out)),
        &bob_empty,
        "bob",
        false,
        LATER,
    )
    .expect("bob");
    assert!(entry_of(&out, "bob").is_none());
    assert_eq!(out["spec"], json!({"replicas": 4}));
    assert_eq!(out["metadata"].get("labels"), None);
}

/// A shared field survives when one owner stops applying it.
#[test]
fn ssa_shared_field_survives_when_one_owner_leaves() {
    let live = stored(
        server_side_apply(Some("Deployment"), None, &web(2), "alice", false, NOW).expect("created"),
    );
    let shared = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 2}});
    let live = stored(
        server_side_apply(Some("Deployment"), Some(&live), &shared, "bob", false, NOW)
            .expect("bob"),
    );
    let mut without = web(2);
    if let Some(Value::Object(spec)) = without.get_mut("spec") {
        spec.shift_remove("replicas");
    }
    let out = server_side_apply(
        Some("Deployment"),
        Some(&live),
        &without,
        "alice",
        false,
        LATER,
    )
    .expect("alice");
    assert_eq!(out["spec"]["replicas"], 2);
}

/// Unmanaged live fields belong to `before-first-apply`.
#[test]
fn ssa_before_first_apply_owns_unmanaged_fields() {
    let live = stored(web(3));
    let error = server_side_apply(
        Some("Deployment"),
        Some(&live),
        &web(5),
        "kubectl",
        false,
        NOW,
    )
    .expect_err("conflict");
    assert_eq!(
        error.to_string(),
        format!(
            "Apply failed with 1 conflict: conflict with \"before-first-apply\" using apps/v1 at {NOW}: .spec.replicas"
        )
    );
    let out = server_side_apply(
        Some("Deployment"),
        Some(&live),
        &web(3),
        "kubectl",
        false,
        NOW,
    )
    .expect("same values");
    let before = entry_of(&out, "before-first-apply").expect("before-first-apply entry");
    assert_eq!(before["operation"], "Update");
    assert_eq!(
        before["fieldsV1"]["f:metadata"]["f:labels"],
        json!({".": {}, "f:app": {}})
    );
    assert_eq!(
        out["metadata"]["managedFields"][0]["manager"], "kubectl",
        "Apply entries sort first"
    );
}

/// Keyed and set lists merge item by item across managers.
#[test]
fn ssa_keyed_and_set_lists_merge_item_by_item() {
    let live = stored(
        server_side_apply(Some("Deployment"), None, &web(2), "alice", false, NOW).expect("created"),
    );
    let bob = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "finalizers": ["x"]},
        "spec": {"template": {"spec": {"containers": [{"name": "nginx", "ports": [{"containerPort": 443}], "env": [{"name": "A", "value": "1"}]}]}}}
    });
    let out =
        server_side_apply(Some("Deployment"), Some(&live), &bob, "bob", false, NOW).expect("bob");
    let container = &out["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "nginx:1.25");
    assert_eq!(
        container["ports"],
        json!([{"containerPort": 80}, {"containerPort": 443}])
    );
    assert_eq!(container["env"], json!([{"name": "A", "value": "1"}]));
    assert_eq!(out["metadata"]["finalizers"], json!(["x"]));
    let bob_fields = &entry_of(&out, "bob").expect("bob")["fieldsV1"];
    assert_eq!(
        bob_fields["f:metadata"]["f:finalizers"],
        json!({"v:\"x\"": {}})
    );
    assert_eq!(
        bob_fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"]["f:ports"],
        json!({"k:{\"containerPort\":443,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}})
    );
}

/// Malformed apply configurations are 400s.
#[test]
fn ssa_rejects_malformed_applied_objects() {
    let cases = [
        json!("nope"),
        json!({"kind": "Deployment", "metadata": {"name": "x"}}),
        json!({"apiVersion": "apps/v1", "metadata": {"name": "x"}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": {"containers": ["a"]}}}}),
    ];
    for applied in cases {
        let error = server_side_apply(Some("Deployment"), None, &applied, "m", false, NOW)
            .expect_err("malformed");
        assert_eq!(error.code(), 400, "{applied}: {error}");
    }
    let error = server_side_apply(Some("Deployment"), None, &web(1), "", false, NOW)
        .expect_err("no manager");
    assert_eq!(error.code(), 400);
    let error = server_side_apply(
        Some("Deployment"),
        None,
        &json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}}}),
        "m",
        false,
        NOW,
    )
    .expect_err("duplicate");
    assert_eq!(
        error.to_string(),
        ".spec.template.spec.containers: duplicate entries for key [name=\"a\"]"
    );
}

/// Malformed live managedFields entries are dropped.
#[test]
fn ssa_tolerates_malformed_live_managed_fields() {
    let mut live = stored(web(2));
    live["metadata"]["managedFields"] = json!([
        {"manager": "x", "operation": "Bogus", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {}},
        {"manager": "y", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1", "fieldsV1": {"zz": {}}},
        {"manager": "alice", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1", "time": NOW,
         "fieldsV1": {"f:spec": {"f:replicas": {}}}}
    ]);
    let out = server_side_apply(
        Some("Deployment"),
        Some(&live),
        &web(2),
        "bob",
        false,
        LATER,
    )
    .expect("applied");
    let managers: Vec<Value> = managed(&out)
        .iter()
        .map(|entry| entry["manager"].clone())
        .collect();
    assert_eq!(managers, vec![json!("alice"), json!("bob")]);
}

/// FieldsV1 decoding, encoding and path display.
#[test]
fn fieldsv1_round_trip_and_display() {
    let fields = json!({
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
        "f:spec": {"f:ports": {"k:{\"protocol\":\"TCP\",\"port\":80}": {".": {}, "f:port": {}}}, "f:list": {"i:3": {}}, "f:set": {"v:1": {}}}
    });
    let mut set = FieldSet::new();
    assert!(decode_fields(&fields, &mut Vec::new(), &mut set).is_some());
    let displayed: Vec<String> = set.iter().map(|path| display_path(path)).collect();
    assert!(
        displayed.contains(&".spec.ports[port=80,protocol=\"TCP\"].port".to_string()),
        "{displayed:?}"
    );
    assert!(
        displayed.contains(&".spec.list[3]".to_string()),
        "{displayed:?}"
    );
    assert!(
        displayed.contains(&".spec.set[=1]".to_string()),
        "{displayed:?}"
    );
    assert!(
        displayed.contains(&".metadata.labels".to_string()),
        "{displayed:?}"
    );
    let encoded = encode_fields(&set);
    assert_eq!(
        encoded["f:spec"]["f:ports"],
        json!({"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}}})
    );
    let mut again = FieldSet::new();
    assert!(decode_fields(&encoded, &mut Vec::new(), &mut again).is_some());
    assert_eq!(again, set);
    assert!(decode_fields(&json!({"x:1": {}}), &mut Vec::new(), &mut FieldSet::new()).is_none());
    assert!(decode_fields(&json!({"k:[1]": {}}), &mut Vec::new(), &mut FieldSet::new()).is_none());
}

/// The list table lookups.
#[test]
fn list_table_lookups() {
    let segs = |path: &str| path.split('.').map(str::to_string).collect::<Vec<_>>();
    assert_eq!(
        list_rule(Some("Job"), &segs("spec.template.spec.containers.env")).smp,
        SmpList::Keyed("name")
    );
    assert_eq!(
        list_rule(Some("Job"), &segs("spec.template.spec.containers.args")),
        ATOMIC
    );
    assert_eq!(list_rule(Some("Pod"), &segs("spec.tolerations")), ATOMIC);
    assert_eq!(list_rule(None, &segs("metadata.finalizers")), SET);
    assert_eq!(
        list_rule(Some("Pod"), &segs("spec.template.spec.containers")),
        ATOMIC
    );
    assert_eq!(
        list_rule(Some("Service"), &segs("spec.ports")).ssa,
        SsaList::Map(&["port", "protocol"])
    );
    assert_eq!(list_rule(None, &segs("status.conditions")), ATOMIC);
    assert_eq!(
        list_rule(Some("Lease"), &segs("status.conditions")).smp,
        SmpList::Keyed("type")
    );
}
