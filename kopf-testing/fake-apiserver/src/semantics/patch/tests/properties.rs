//! Properties that hold for any input: no panic, idempotence, and applied values winning.

use super::*;

/// Keys that hit the list table.
const PLAIN_KEYS: &[&str] = &[
    "a",
    "b",
    "name",
    "uid",
    "type",
    "port",
    "containerPort",
    "spec",
    "metadata",
    "status",
    "template",
    "containers",
    "finalizers",
    "conditions",
    "ports",
    "env",
    "managedFields",
];

/// Directive keys.
const DIRECTIVE_KEYS: &[&str] = &[
    "$patch",
    "$retainKeys",
    "$setElementOrder/containers",
    "$setElementOrder/finalizers",
    "$deleteFromPrimitiveList/finalizers",
    "$deleteFromPrimitiveList/containers",
];

/// Arbitrary JSON over keys that hit the list table, with or without nulls and directives.
fn arb_json_with(directives: bool) -> impl Strategy<Value = Value> {
    let mut leaves = vec![
        any::<bool>().prop_map(Value::Bool).boxed(),
        (-5i64..5).prop_map(Value::from).boxed(),
        prop::sample::select(vec!["a", "b", "replace", "delete", "merge", "TCP", "name"])
            .prop_map(Value::from)
            .boxed(),
    ];
    let mut keys: Vec<&'static str> = PLAIN_KEYS.to_vec();
    if directives {
        leaves.push(Just(Value::Null).boxed());
        keys.extend_from_slice(DIRECTIVE_KEYS);
    }
    let leaf = prop::strategy::Union::new(leaves);
    leaf.prop_recursive(4, 48, 6, move |inner| {
        let keys = prop::sample::select(keys.clone());
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((keys, inner), 0..5).prop_map(|entries| Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect()
            )),
        ]
    })
}

/// Arbitrary JSON with nulls and directives.
fn arb_json() -> impl Strategy<Value = Value> {
    arb_json_with(true)
}

/// Null-free, directive-free maps.
fn arb_plain_map() -> impl Strategy<Value = Value> {
    prop::collection::vec(
        (
            prop::sample::select(PLAIN_KEYS.to_vec()),
            arb_json_with(false),
        ),
        0..5,
    )
    .prop_map(|entries| {
        Value::Object(
            entries
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        )
    })
}

/// Whether every list has distinct items, and distinct merge keys among its maps.
fn lists_are_sets(value: &Value) -> bool {
    match value {
        Value::Array(items) => {
            let distinct = items.iter().enumerate().all(|(i, item)| {
                items.iter().skip(i + 1).all(|other| {
                    other != item
                        && ["name", "uid", "type", "port", "containerPort"]
                            .iter()
                            .all(|key| item.get(key).is_none() || item.get(key) != other.get(key))
                })
            });
            distinct && items.iter().all(lists_are_sets)
        }
        Value::Object(map) => map.values().all(lists_are_sets),
        _ => true,
    }
}

/// A kind, built-in or not.
fn arb_kind() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "Pod",
        "Deployment",
        "Service",
        "ConfigMap",
        "KopfExample",
        "CronJob",
    ])
}

/// An object of `kind` with arbitrary metadata, spec and status.
fn arb_object(kind: &'static str) -> impl Strategy<Value = Value> {
    (arb_json(), arb_json(), arb_json()).prop_map(move |(meta, spec, status)| {
        let mut object = json!({"apiVersion": "v1", "kind": kind, "spec": spec, "status": status});
        let mut metadata = match meta {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        metadata.insert("name".into(), json!("x"));
        object["metadata"] = Value::Object(metadata);
        object
    })
}

/// Whether a value contains `null`.
fn has_null(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.iter().any(has_null),
        Value::Object(map) => map.values().any(has_null),
        _ => false,
    }
}

/// Whether a value contains a `$` key.
fn has_directive(value: &Value) -> bool {
    match value {
        Value::Array(items) => items.iter().any(has_directive),
        Value::Object(map) => map
            .iter()
            .any(|(key, value)| key.starts_with('$') || has_directive(value)),
        _ => false,
    }
}

/// Deployment apply configurations drawn from small pools, so that managers overlap.
fn arb_deployment_config() -> impl Strategy<Value = Value> {
    let container = (
        prop::sample::select(vec!["a", "b", "c"]),
        prop::option::of(prop::sample::select(vec!["i1", "i2"])),
        prop::collection::btree_set(prop::sample::select(vec![80, 443, 8080]), 0..3),
        prop::collection::btree_map(
            prop::sample::select(vec!["X", "Y"]),
            prop::sample::select(vec!["1", "2"]),
            0..3,
        ),
    );
    (
        prop::collection::vec(container, 0..3),
        prop::collection::btree_map(
            prop::sample::select(vec!["app", "tier"]),
            prop::sample::select(vec!["1", "2"]),
            0..3,
        ),
        prop::collection::btree_set(prop::sample::select(vec!["f1", "f2"]), 0..3),
        prop::option::of(1i64..3),
    )
        .prop_map(|(containers, labels, finalizers, replicas)| {
            let mut seen = BTreeSet::new();
            let containers: Vec<Value> = containers
                .into_iter()
                .filter(|(name, ..)| seen.insert(*name))
                .map(|(name, image, ports, env)| {
                    let mut container = json!({"name": name});
                    if let Some(image) = image {
                        container["image"] = json!(image);
                    }
                    if !ports.is_empty() {
                        let ports: Vec<Value> = ports
                            .into_iter()
                            .map(|port| json!({"containerPort": port}))
                            .collect();
                        container["ports"] = Value::Array(ports);
                    }
                    if !env.is_empty() {
                        let env: Vec<Value> = env
                            .into_iter()
                            .map(|(name, value)| json!({"name": name, "value": value}))
                            .collect();
                        container["env"] = Value::Array(env);
                    }
                    container
                })
                .collect();
            let mut metadata = json!({"name": "web"});
            if !labels.is_empty() {
                metadata["labels"] = json!(labels);
            }
            if !finalizers.is_empty() {
                metadata["finalizers"] = json!(finalizers);
            }
            let mut config =
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata});
            if let Some(replicas) = replicas {
                config["spec"]["replicas"] = json!(replicas);
            }
            if !containers.is_empty() {
                config["spec"]["template"]["spec"]["containers"] = Value::Array(containers);
            }
            config
        })
}

/// Checks that every value set by `config` is in `result`.
fn applied_values_win(config: &Value, result: &Value) -> Result<(), String> {
    let check = |ok: bool, what: &str| {
        if ok {
            Ok(())
        } else {
            Err(format!("{what}: {result}"))
        }
    };
    if let Some(replicas) = config.pointer("/spec/replicas") {
        check(
            result.pointer("/spec/replicas") == Some(replicas),
            "replicas",
        )?;
    }
    if let Some(Value::Object(labels)) = config.pointer("/metadata/labels") {
        for (key, value) in labels {
            check(
                result["metadata"]["labels"].get(key) == Some(value),
                "label",
            )?;
        }
    }
    if let Some(Value::Array(finalizers)) = config.pointer("/metadata/finalizers") {
        let live = result
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array);
        for finalizer in finalizers {
            check(
                live.is_some_and(|live| live.contains(finalizer)),
                "finalizer",
            )?;
        }
    }
    let live_containers = result
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array);
    for container in config
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let live = live_containers
            .and_then(|list| list.iter().find(|live| live["name"] == container["name"]))
            .ok_or_else(|| format!("container {} missing: {result}", container["name"]))?;
        if let Some(image) = container.get("image") {
            check(live.get("image") == Some(image), "image")?;
        }
        for port in container
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let ports = live.get("ports").and_then(Value::as_array);
            check(
                ports.is_some_and(|ports| {
                    ports
                        .iter()
                        .any(|p| p["containerPort"] == port["containerPort"])
                }),
                "port",
            )?;
        }
        for env in container
            .get("env")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let envs = live.get("env").and_then(Value::as_array);
            check(envs.is_some_and(|envs| envs.contains(env)), "env")?;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, max_global_rejects: 100_000, ..ProptestConfig::default() })]

    /// No function panics on arbitrary JSON.
    #[test]
    fn prop_nothing_panics(kind in arb_kind(), target in arb_json(), patch in arb_json(), force: bool) {
        let mut doc = target.clone();
        merge_patch(&mut doc, &patch);
        let mut doc = target.clone();
        let _ = json_patch(&mut doc, &patch);
        let mut doc = target.clone();
        if strategic_merge_patch(kind, &mut doc, &patch).is_err() {
            prop_assert_eq!(&doc, &target);
        }
        let _ = server_side_apply(Some(kind), Some(&target), &patch, "m", force, NOW);
        let _ = server_side_apply(None, None, &patch, "m", force, NOW);
    }

    /// Strategic merge patches on a realistic object never panic or leak directives.
    #[test]
    fn prop_smp_on_objects_never_panics(kind in arb_kind(), patch in arb_json()) {
        let live = json!({"metadata": {"finalizers": ["a", "b"], "ownerReferences": [{"uid": "a"}]},
            "spec": {"containers": [{"name": "a", "ports": [{"containerPort": 1}]}, {"name": "b"}],
                "template": {"spec": {"containers": [{"name": "a"}]}}, "ports": [{"port": 1}]},
            "status": {"conditions": [{"type": "a"}]}});
        let wrapped = json!({"spec": patch.clone(), "metadata": patch.clone(), "status": {"conditions": patch.clone()}});
        for candidate in [&patch, &wrapped] {
            let mut doc = live.clone();
            if strategic_merge_patch(kind, &mut doc, candidate).is_ok() {
                prop_assert!(!doc.to_string().contains("\"$"), "directive leaked: {}", doc);
            } else {
                prop_assert_eq!(&doc, &live);
            }
        }
    }

    /// Apply sequences on arbitrary objects never panic.
    #[test]
    fn prop_ssa_sequences_never_panic(
        kind in arb_kind(),
        first in arb_kind().prop_flat_map(arb_object),
        second in arb_kind().prop_flat_map(arb_object),
        forces in prop::collection::vec(any::<bool>(), 3),
    ) {
        let mut live: Option<Value> = None;
        for (index, (applied, manager)) in [(&first, "a"), (&second, "b"), (&first, "a")].into_iter().enumerate() {
            let mut applied = applied.clone();
            applied["kind"] = json!(kind);
            let force = forces.get(index).copied().unwrap_or(false);
            match server_side_apply(Some(kind), live.as_ref(), &applied, manager, force, NOW) {
                Ok(out) => {
                    prop_assert!(out.is_object());
                    live = Some(out);
                }
                Err(PatchError::Conflict { conflicts, .. }) => prop_assert!(!conflicts.is_empty()),
                Err(other) => prop_assert_eq!(other.code(), 400),
            }
        }
    }

    /// Re-applying what created an object changes nothing.
    #[test]
    fn prop_ssa_reapply_is_a_noop(kind in arb_kind(), applied in arb_kind().prop_flat_map(arb_object)) {
        let mut applied = applied;
        applied["kind"] = json!(kind);
        if let Ok(created) = server_side_apply(Some(kind), None, &applied, "m", false, NOW) {
            let again = server_side_apply(Some(kind), Some(&created), &applied, "m", false, LATER);
            prop_assert_eq!(again.ok(), Some(created));
        }
    }

    /// Managers taking turns: applied values win, re-applies are no-ops.
    #[test]
    fn prop_ssa_managers_take_turns(
        steps in prop::collection::vec(
            (arb_deployment_config(), prop::sample::select(vec!["alice", "bob", "carol"]), any::<bool>()),
            1..6,
        ),
        start_unmanaged: bool,
    ) {
        let mut live: Option<Value> = None;
        for (index, (config, manager, force)) in steps.iter().enumerate() {
            let now = format!("2024-05-01T10:00:0{index}Z");
            let result = server_side_apply(Some("Deployment"), live.as_ref(), config, manager, *force, &now);
            let out = match result {
                Ok(out) => out,
                Err(PatchError::Conflict { conflicts, .. }) => {
                    prop_assert!(!*force);
                    prop_assert!(!conflicts.is_empty());
                    continue;
                }
                Err(other) => return Err(TestCaseError::fail(format!("unexpected error {other}"))),
            };
            if let Err(message) = applied_values_win(config, &out) {
                return Err(TestCaseError::fail(message));
            }
            let entries = managed(&out);
            for entry in &entries {
                prop_assert!(entry["fieldsV1"].as_object().is_some_and(|fields| !fields.is_empty()), "{}", out);
            }
            let again = server_side_apply(Some("Deployment"), Some(&out), config, manager, false, "2030-01-01T00:00:00Z");
            prop_assert_eq!(again.as_ref().ok(), Some(&out), "re-apply is a no-op");
            let mut stored = out;
            if start_unmanaged
                && index == 0
                && let Some(Value::Object(meta)) = stored.get_mut("metadata")
            {
                meta.shift_remove("managedFields");
            }
            live = Some(stored);
        }
    }

    /// A sequence of writes by different managers: the owned fields are exactly the
    /// object's trackable fields, every entry decodes, and writing the same object again
    /// changes nothing.
    #[test]
    fn prop_update_owners_cover_the_object(
        kind in arb_kind(),
        objects in prop::collection::vec(arb_kind().prop_flat_map(arb_object), 1..5),
        managers in prop::collection::vec(prop::sample::select(vec!["alice", "bob", "carol"]), 5),
    ) {
        let mut live: Option<Value> = None;
        for (index, object) in objects.iter().enumerate() {
            let mut new = object.clone();
            new["kind"] = json!(kind);
            if let Some(Value::Object(meta)) = new.get_mut("metadata") {
                meta.shift_remove("managedFields");
            }
            let manager = managers.get(index).copied().unwrap_or("alice");
            let now = format!("2024-05-01T10:00:0{index}Z");
            record_update(Some(kind), live.as_ref(), &mut new, &updater(manager), &now);
            let items = managed(&new);
            let entries = decode_entry_list(&items, true);
            prop_assert!(entries.is_some(), "{}", new);
            let entries = entries.unwrap_or_default();
            prop_assert_eq!(entries.len(), items.len());
            let owned: FieldSet = entries.iter().flat_map(|e| e.set.iter().cloned()).collect();
            let mut content = new.clone();
            if let Some(Value::Object(meta)) = content.get_mut("metadata") {
                meta.shift_remove("managedFields");
            }
            let mut expected = FieldSet::new();
            Ssa { kind: Some(kind) }.all_paths(&content, &mut Vec::new(), &mut Vec::new(), &mut expected);
            expected.retain(|path| is_trackable(path));
            prop_assert_eq!(owned, expected);
            let mut again = new.clone();
            record_update(Some(kind), Some(&new), &mut again, &updater("dave"), "2030-01-01T00:00:00Z");
            prop_assert_eq!(&again, &new);
            live = Some(new);
        }
    }

    /// `merge_patch(x, x)` is `x` when `x` has no nulls.
    #[test]
    fn prop_merge_patch_with_itself_is_identity(value in arb_json_with(false)) {
        prop_assert!(!has_null(&value));
        let mut doc = value.clone();
        merge_patch(&mut doc, &value);
        prop_assert_eq!(doc, value);
    }

    /// An empty JSON patch is the identity.
    #[test]
    fn prop_json_patch_empty_is_identity(value in arb_json()) {
        let mut doc = value.clone();
        prop_assert!(json_patch(&mut doc, &json!([])).is_ok());
        prop_assert_eq!(doc, value);
    }

    /// Applying a null-free map twice is applying it once.
    #[test]
    fn prop_smp_null_free_map_is_idempotent(kind in arb_kind(), target in arb_json(), patch in arb_plain_map()) {
        prop_assert!(!has_null(&patch) && !has_directive(&patch));
        let mut once = target.clone();
        if strategic_merge_patch(kind, &mut once, &patch).is_ok() {
            let mut twice = once.clone();
            prop_assert!(strategic_merge_patch(kind, &mut twice, &patch).is_ok());
            prop_assert_eq!(&twice, &once);
        }
    }

    /// A null-free map patched with itself is unchanged.
    #[test]
    fn prop_smp_with_itself_is_identity(kind in arb_kind(), value in arb_plain_map()) {
        prop_assume!(lists_are_sets(&value));
        let mut doc = value.clone();
        if strategic_merge_patch(kind, &mut doc, &value).is_ok() {
            prop_assert_eq!(doc, value);
        }
    }
}
