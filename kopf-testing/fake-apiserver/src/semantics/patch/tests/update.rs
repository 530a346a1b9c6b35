//! The bookkeeping of updates: who owns which fields after creations, updates and patches.

use super::*;

/// A ConfigMap with the given data.
fn config_map(data: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "default", "labels": {"app": "web"}},
        "data": data,
    })
}

/// `new` after `updater` wrote it over `live` (`None` to create it).
fn updated(live: Option<&Value>, mut new: Value, updater: &Updater, now: &str) -> Value {
    record_update(Some("ConfigMap"), live, &mut new, updater, now);
    new
}

/// The (manager, operation, subresource, time) of each entry, in order.
fn identities(object: &Value) -> Vec<(String, String, String, String)> {
    managed(object)
        .iter()
        .map(|entry| {
            let text = |key: &str| entry[key].as_str().unwrap_or_default().to_string();
            (
                text("manager"),
                text("operation"),
                text("subresource"),
                text("time"),
            )
        })
        .collect()
}

/// A creation gives the creator every field, maps included, but not the server's metadata.
#[test]
fn update_create_owns_every_field() {
    let mut new = config_map(json!({"x": "1", "y": "2"}));
    new["metadata"]["uid"] = json!("u-1");
    new["metadata"]["generation"] = json!(1);
    let out = updated(None, new.clone(), &updater("kubectl-create"), NOW);
    assert_eq!(
        managed(&out),
        [json!({
            "manager": "kubectl-create",
            "operation": "Update",
            "apiVersion": "v1",
            "time": NOW,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:data": {".": {}, "f:x": {}, "f:y": {}},
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            },
        })]
    );
    let text = managed(&out)[0]["fieldsV1"].to_string();
    assert!(text.starts_with(r#"{"f:data":{".":{},"#), "{text}");
    let mut without = out.clone();
    if let Some(Value::Object(meta)) = without.get_mut("metadata") {
        meta.shift_remove("managedFields");
    }
    assert_eq!(without, new, "nothing else changes");
}

/// Changed and added fields move to the writer; removed ones leave every owner; the
/// writer's entry takes the time, the others keep theirs.
#[test]
fn update_moves_changed_fields_and_forgets_removed_ones() {
    let live = updated(
        None,
        config_map(json!({"x": "1", "y": "2", "w": "0"})),
        &updater("alice"),
        NOW,
    );
    let out = updated(
        Some(&live),
        config_map(json!({"x": "changed", "z": "3", "w": "0"})),
        &updater("bob"),
        LATER,
    );
    assert_eq!(
        entry_of(&out, "alice").expect("alice")["fieldsV1"],
        json!({"f:data": {".": {}, "f:w": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
    );
    assert_eq!(
        entry_of(&out, "bob").expect("bob")["fieldsV1"],
        json!({"f:data": {"f:x": {}, "f:z": {}}})
    );
    assert_eq!(
        identities(&out),
        [
            ("alice".into(), "Update".into(), String::new(), NOW.into()),
            ("bob".into(), "Update".into(), String::new(), LATER.into()),
        ]
    );

    // The same manager again: one entry, the union of its fields, the new time.
    let later = "2024-05-01T12:00:00Z";
    let again = updated(
        Some(&out),
        config_map(json!({"x": "changed", "z": "3", "w": "1"})),
        &updater("bob"),
        later,
    );
    assert_eq!(
        entry_of(&again, "bob").expect("bob")["fieldsV1"],
        json!({"f:data": {"f:w": {}, "f:x": {}, "f:z": {}}})
    );
    assert_eq!(entry_of(&again, "bob").expect("bob")["time"], later);
    assert_eq!(
        entry_of(&again, "alice").expect("alice")["fieldsV1"],
        json!({"f:data": {}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}}),
        "alice still owns the map itself"
    );

    // A write that changes nothing changes no entry, not even a time.
    let noop = updated(
        Some(&again),
        again.clone(),
        &updater("carol"),
        "2025-01-01T00:00:00Z",
    );
    assert_eq!(noop, again);
    // Removing a whole map removes it, and everything below it, from its owners.
    let mut gone = config_map(json!({}));
    if let Value::Object(map) = &mut gone {
        map.shift_remove("data");
    }
    let out = updated(Some(&again), gone, &updater("carol"), later);
    assert_eq!(
        identities(&out),
        [("alice".into(), "Update".into(), String::new(), NOW.into())],
        "bob owned only data fields, carol changed nothing it could own"
    );
    assert_eq!(
        entry_of(&out, "alice").expect("alice")["fieldsV1"],
        json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
    );
}

/// Keyed lists: a changed item field moves, the item stays with its owner.
#[test]
fn update_tracks_keyed_list_items() {
    let live = stored(
        server_side_apply(Some("Deployment"), None, &web(2), "alice", false, NOW).expect("created"),
    );
    let mut new = live.clone();
    new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.26");
    new["spec"]["replicas"] = json!(3);
    let updater = Updater {
        manager: "kubectl-edit".into(),
        api_version: "apps/v1".into(),
        subresource: String::new(),
    };
    record_update(Some("Deployment"), Some(&live), &mut new, &updater, LATER);
    assert_eq!(
        entry_of(&new, "kubectl-edit").expect("edit")["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
            "k:{\"name\":\"nginx\"}": {"f:image": {}}
        }}}}})
    );
    let alice = &entry_of(&new, "alice").expect("alice")["fieldsV1"];
    assert_eq!(alice["f:spec"].get("f:replicas"), None);
    assert_eq!(
        alice["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"]
            .get("f:image"),
        None
    );
    assert!(
        alice["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"]
            .get(".")
            .is_some()
    );
    // The Apply entry sorts before the Update entry.
    assert_eq!(managed(&new)[0]["operation"], "Apply");

    // The applier now conflicts with the editor on the fields it changed.
    let error = server_side_apply(
        Some("Deployment"),
        Some(&stored(new.clone())),
        &web(2),
        "alice",
        false,
        LATER,
    )
    .expect_err("conflict");
    assert_eq!(
        error.to_string(),
        format!(
            "Apply failed with 2 conflicts: conflicts with \"kubectl-edit\" using apps/v1 at {LATER}:\n- .spec.replicas\n- .spec.template.spec.containers[name=\"nginx\"].image"
        )
    );
}

/// An existing object without managed fields stays untracked; a request's managed fields
/// replace the live ones, and an empty list resets them.
#[test]
fn update_decides_which_managed_fields_to_start_from() {
    let untracked = stored(config_map(json!({"x": "1"})));
    let out = updated(
        Some(&untracked),
        config_map(json!({"x": "2"})),
        &updater("bob"),
        LATER,
    );
    assert_eq!(out.pointer("/metadata/managedFields"), None);

    let live = updated(None, config_map(json!({"x": "1"})), &updater("alice"), NOW);
    // Given entries (as kubectl's client-side to server-side migration sends them).
    let mut new = live.clone();
    new["metadata"]["managedFields"] = json!([{
        "manager": "kubectl", "operation": "Apply", "apiVersion": "v1", "time": NOW,
        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:x": {}}},
    }]);
    let out = updated(Some(&live), new.clone(), &updater("kubectl"), LATER);
    assert_eq!(
        identities(&out),
        [("kubectl".into(), "Apply".into(), String::new(), NOW.into())]
    );
    // A malformed list is ignored: the live entries stay.
    new["metadata"]["managedFields"] = json!([{"manager": "x", "operation": "Sideways"}]);
    let out = updated(Some(&live), new.clone(), &updater("bob"), LATER);
    assert_eq!(managed(&out), managed(&live));
    // An empty list (or one empty entry) resets: the object is no longer tracked.
    for reset in [json!([]), json!([{}])] {
        new["metadata"]["managedFields"] = reset;
        let out = updated(Some(&live), new.clone(), &updater("bob"), LATER);
        assert_eq!(out.pointer("/metadata/managedFields"), None);
    }
    // A subresource write never takes the request's entries.
    new["metadata"]["managedFields"] = json!([]);
    new["data"]["x"] = json!("2");
    let status = Updater {
        subresource: "status".into(),
        ..updater("bob")
    };
    let out = updated(Some(&live), new, &status, LATER);
    assert_eq!(
        identities(&out),
        [
            ("alice".into(), "Update".into(), String::new(), NOW.into()),
            ("bob".into(), "Update".into(), "status".into(), LATER.into()),
        ]
    );
    assert_eq!(
        managed(&out)[1]["subresource"],
        "status",
        "subresource is written last"
    );
}

/// Identity of `Update` entries: manager, apiVersion and subresource; an empty manager is
/// left out of the entry.
#[test]
fn update_entries_are_per_manager_version_and_subresource() {
    let live = updated(None, config_map(json!({"x": "1"})), &updater("alice"), NOW);
    let other_version = Updater {
        api_version: "v2".into(),
        ..updater("alice")
    };
    let out = updated(
        Some(&live),
        config_map(json!({"x": "2"})),
        &other_version,
        LATER,
    );
    let versions: Vec<Value> = managed(&out)
        .iter()
        .map(|entry| entry["apiVersion"].clone())
        .collect();
    assert_eq!(versions, [json!("v1"), json!("v2")]);

    let anonymous = updated(None, config_map(json!({})), &updater(""), NOW);
    let entry = &managed(&anonymous)[0];
    assert_eq!(entry.get("manager"), None, "{entry}");
    assert_eq!(
        decode_entries(&anonymous)
            .first()
            .map(|e| e.manager.as_str()),
        Some("")
    );
}

/// Beyond ten `Update` entries the oldest ones merge, per apiVersion, into
/// `ancient-changes`; `Apply` entries do not count.
#[test]
fn update_caps_update_managers_at_ten() {
    let keys: Vec<String> = (0..11).map(|i| format!("k{i:02}")).collect();
    let mut object = server_side_apply(
        None,
        None,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"applied": "a"}}),
        "applier",
        false,
        NOW,
    )
    .expect("created");
    // Ten managers, the second oldest in another apiVersion.
    for (i, key) in keys.iter().take(10).enumerate() {
        let mut new = object.clone();
        new["data"][key.as_str()] = json!("1");
        let updater = Updater {
            api_version: if i == 1 { "v2" } else { "v1" }.into(),
            ..updater(&format!("m{i:02}"))
        };
        record_update(
            None,
            Some(&object),
            &mut new,
            &updater,
            &format!("2024-05-01T10:00:{i:02}Z"),
        );
        object = new;
    }
    assert_eq!(managed(&object).len(), 11, "ten updaters and the applier");
    let mut new = object.clone();
    new["data"]["k10"] = json!("1");
    record_update(
        None,
        Some(&object),
        &mut new,
        &updater("m10"),
        "2024-05-01T10:00:10Z",
    );
    let managers: Vec<(String, String)> = managed(&new)
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or_default().to_string(),
                e["apiVersion"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("applier", "v1"),
        ("m01", "v2"),
        ("ancient-changes", "v1"),
        ("m03", "v1"),
        ("m04", "v1"),
        ("m05", "v1"),
        ("m06", "v1"),
        ("m07", "v1"),
        ("m08", "v1"),
        ("m09", "v1"),
        ("m10", "v1"),
    ]
    .iter()
    .map(|(m, v)| (m.to_string(), v.to_string()))
    .collect();
    assert_eq!(managers, expected);
    let ancient = entry_of(&new, "ancient-changes").expect("bucket");
    assert_eq!(
        ancient["fieldsV1"],
        json!({"f:data": {"f:k00": {}, "f:k02": {}}})
    );
    assert_eq!(
        ancient["time"], "2024-05-01T10:00:02Z",
        "the time of the last entry merged"
    );
}

/// The manager of a write: `fieldManager`, or else the User-Agent's product name.
#[test]
fn managers_from_field_manager_or_user_agent() {
    let cases = [
        (Some("mine"), Some("kubectl/v1.32.4 (linux/amd64)"), "mine"),
        (Some(""), Some("kubectl/v1.32.4 (linux/amd64)"), "kubectl"),
        (None, Some("kube-rs/0.99.0"), "kube-rs"),
        (
            None,
            Some("OpenAPI-Generator/31.0.0/python"),
            "OpenAPI-Generator",
        ),
        (None, Some("my tool\t\u{7}x/1"), "my toolx"),
        (None, None, ""),
    ];
    for (field_manager, user_agent, expected) in cases {
        assert_eq!(
            manager_or_user_agent(field_manager, user_agent),
            expected,
            "{field_manager:?} {user_agent:?}"
        );
    }
    let long = "é".repeat(100);
    let manager = manager_or_user_agent(None, Some(&long));
    assert_eq!(manager.len(), 128);
    assert_eq!(manager, "é".repeat(64));
}
