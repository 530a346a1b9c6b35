//! Strategic merge patches: the list table, directives, and the examples of Kubernetes' docs.

use super::*;

/// A Deployment with the given containers.
fn deployment(containers: Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "patch-demo"},
        "spec": {"replicas": 2, "template": {"spec": {"containers": containers}}}
    })
}

/// Containers merge by name (kubectl patch documentation example).
#[test]
fn smp_containers_merge_by_name_docs_example() {
    // https://kubernetes.io/docs/tasks/manage-kubernetes-objects/update-api-object-kubectl-patch/
    let live = deployment(json!([{"name": "patch-demo-ctr", "image": "nginx"}]));
    let patch = json!({"spec":{"template":{"spec":{"containers":[{"name":"patch-demo-ctr-2","image":"redis"}]}}}});
    let out = smp("Deployment", live, patch);
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([{"name":"patch-demo-ctr-2","image":"redis"},{"name":"patch-demo-ctr","image":"nginx"}])
    );
    assert_eq!(out["spec"]["replicas"], 2);
}

/// Matching containers merge field by field, with their ports, env and mounts.
#[test]
fn smp_merges_fields_of_matching_container_and_nested_lists() {
    let live = json!({"spec":{"containers":[{
        "name":"app","image":"a:1",
        "ports":[{"containerPort":80,"name":"http"}],
        "env":[{"name":"A","value":"1"},{"name":"B","value":"2"}],
        "volumeMounts":[{"mountPath":"/data","name":"data"}],
        "args":["x","y"]
    }]}});
    let patch = json!({"spec":{"containers":[{
        "name":"app","image":"a:2",
        "ports":[{"containerPort":80,"protocol":"TCP"},{"containerPort":443}],
        "env":[{"name":"B","value":"3"}],
        "volumeMounts":[{"mountPath":"/data","readOnly":true}],
        "args":["z"]
    }]}});
    let out = smp("Pod", live, patch);
    let container = &out["spec"]["containers"][0];
    assert_eq!(container["image"], "a:2");
    assert_eq!(
        container["ports"],
        json!([{"containerPort":80,"name":"http","protocol":"TCP"},{"containerPort":443}])
    );
    assert_eq!(
        container["env"],
        json!([{"name":"A","value":"1"},{"name":"B","value":"3"}])
    );
    assert_eq!(
        container["volumeMounts"],
        json!([{"mountPath":"/data","name":"data","readOnly":true}])
    );
    assert_eq!(
        container["args"],
        json!(["z"]),
        "lists without a strategy are replaced"
    );
}

/// The pod spec table applies wherever the kind keeps its pod spec.
#[test]
fn smp_pod_spec_lists_by_kind() {
    let volumes = json!([{"name":"a","emptyDir":{}}]);
    for (kind, pointer, wrap) in [
        ("Pod", "/spec/volumes", json!({"spec":{"volumes":volumes}})),
        (
            "StatefulSet",
            "/spec/template/spec/volumes",
            json!({"spec":{"template":{"spec":{"volumes":volumes}}}}),
        ),
        (
            "CronJob",
            "/spec/jobTemplate/spec/template/spec/volumes",
            json!({"spec":{"jobTemplate":{"spec":{"template":{"spec":{"volumes":volumes}}}}}}),
        ),
    ] {
        let mut patch = wrap.clone();
        if let Some(list) = patch.pointer_mut(pointer) {
            *list = json!([{"name":"b","emptyDir":{}}]);
        }
        let out = smp(kind, wrap, patch);
        assert_eq!(
            names(out.pointer(pointer).expect("volumes")),
            ["b", "a"],
            "{kind}"
        );
    }
}

/// Tolerations are replaced (kubectl patch documentation example).
#[test]
fn smp_tolerations_are_replaced_docs_example() {
    let live = json!({"spec":{"template":{"spec":{
        "containers":[{"name":"c","image":"nginx"}],
        "tolerations":[{"effect":"NoSchedule","key":"dedicated","value":"test-team"}]}}}});
    let patch = json!({"spec":{"template":{"spec":{"tolerations":[{"effect":"NoSchedule","key":"disktype","value":"ssd"}]}}}});
    let out = smp("Deployment", live, patch);
    assert_eq!(
        out["spec"]["template"]["spec"]["tolerations"],
        json!([{"effect":"NoSchedule","key":"disktype","value":"ssd"}])
    );
}

/// `$retainKeys` clears other keys (kubectl patch documentation example).
#[test]
fn smp_retain_keys_docs_example() {
    let live = json!({"spec":{"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%","maxUnavailable":"25%"}}}});
    let patch = json!({"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate"}}});
    let out = smp("Deployment", live, patch);
    assert_eq!(out, json!({"spec":{"strategy":{"type":"Recreate"}}}));
}

/// `$retainKeys` must list every key of the patch and be a list.
#[test]
fn smp_retain_keys_rejects_unlisted_patch_keys() {
    let live = json!({"spec":{"strategy":{"type":"RollingUpdate"}}});
    let error = smp_err(
        "Deployment",
        live,
        json!({"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate","other":1}}}),
    );
    assert_eq!(error.code(), 400);
    let error = smp_err(
        "Deployment",
        json!({}),
        json!({"spec":{"$retainKeys":"type"}}),
    );
    assert_eq!(error.code(), 400);
}

/// `$retainKeys` inside a merged list item.
#[test]
fn smp_retain_keys_in_list_item() {
    // k8s: "retainKeys list of maps adds a field and clear a field", with volumes.
    let live = json!({"spec":{"volumes":[{"name":"bar"},{"name":"foo","other":"x"}]}});
    let patch = json!({"spec":{
        "$setElementOrder/volumes":[{"name":"bar"},{"name":"foo"}],
        "volumes":[{"$retainKeys":["name","value"],"name":"foo","value":"a"}]}});
    let out = smp("Pod", live, patch);
    assert_eq!(
        out,
        json!({"spec":{"volumes":[{"name":"bar"},{"name":"foo","value":"a"}]}})
    );
}

/// `$patch: replace` as a list item replaces the list.
#[test]
fn smp_patch_replace_in_list() {
    let live = json!({"spec":{"containers":[{"name":"a","image":"a"},{"name":"b","image":"b"}]}});
    let patch = json!({"spec":{"containers":[{"name":"c","image":"c","env":[{"name":"X","value":null}]},{"$patch":"replace"}]}});
    let out = smp("Pod", live, patch);
    assert_eq!(
        out,
        json!({"spec":{"containers":[{"name":"c","image":"c","env":[{"name":"X"}]}]}})
    );
}

/// `$patch: delete` in a list item deletes the matching item.
#[test]
fn smp_patch_delete_in_list() {
    let live = json!({"spec":{"containers":[{"name":"a","image":"a"},{"name":"b","image":"b"}]}});
    let patch = json!({"spec":{"containers":[{"name":"a","$patch":"delete"}]}});
    let out = smp("Pod", live, patch);
    assert_eq!(
        out,
        json!({"spec":{"containers":[{"name":"b","image":"b"}]}})
    );
    let error = smp_err(
        "Pod",
        out,
        json!({"spec":{"containers":[{"$patch":"delete"}]}}),
    );
    assert_eq!(error.code(), 400);
}

/// `$patch: replace|delete|merge` in maps, including the root.
#[test]
fn smp_patch_replace_and_delete_in_maps() {
    let live = json!({"metadata":{"labels":{"a":"1","b":"2"}},"spec":{"strategy":{"type":"RollingUpdate"}}});
    let patch = json!({
        "metadata":{"labels":{"$patch":"replace","c":"3"}},
        "spec":{"strategy":{"$patch":"delete"}}
    });
    let out = smp("Deployment", live, patch);
    assert_eq!(
        out,
        json!({"metadata":{"labels":{"c":"3"}},"spec":{"strategy":{}}})
    );
    // `$patch: delete` of an absent map adds nothing; `merge` is the explicit default.
    let out = smp(
        "Deployment",
        out,
        json!({"status":{"$patch":"delete"},"metadata":{"$patch":"merge","labels":{"d":"4"}}}),
    );
    assert_eq!(
        out,
        json!({"metadata":{"labels":{"c":"3","d":"4"}},"spec":{"strategy":{}}})
    );
    // The root itself.
    assert_eq!(
        smp("Pod", json!({"a":1}), json!({"$patch":"replace","b":2})),
        json!({"b":2})
    );
    assert_eq!(
        smp("Pod", json!({"a":1}), json!({"$patch":"delete"})),
        json!({})
    );
    assert_eq!(
        smp_err("Pod", json!({"a":1}), json!({"$patch":"frobnicate"})).code(),
        400
    );
    assert_eq!(
        smp_err(
            "Pod",
            json!({"a":[{"n":1}]}),
            json!({"spec":{"containers":[{"name":"x","$patch":"nope"}]}})
        )
        .code(),
        400
    );
}

/// Finalizers merge as a set; `$deleteFromPrimitiveList` removes items.
#[test]
fn smp_finalizers_merge_as_a_set_and_delete_from_primitive_list() {
    let live = json!({"metadata":{"finalizers":["a","b"]}});
    let out = smp(
        "ConfigMap",
        live.clone(),
        json!({"metadata":{"finalizers":["b","c"]}}),
    );
    assert_eq!(out["metadata"]["finalizers"], json!(["a", "b", "c"]));
    let out = smp(
        "ConfigMap",
        live.clone(),
        json!({"metadata":{"finalizers":["c"]}}),
    );
    assert_eq!(
        out["metadata"]["finalizers"],
        json!(["c", "a", "b"]),
        "new items first, as in Kubernetes"
    );
    let out = smp(
        "ConfigMap",
        live.clone(),
        json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["a","zzz"]}}),
    );
    assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
    // Works on lists without a strategy too, and never creates a list.
    let out = smp(
        "Pod",
        json!({"spec":{"containers":[{"name":"c","args":["1","2","3"]}]}}),
        json!({"spec":{"containers":[{"name":"c","$deleteFromPrimitiveList/args":["2"]}]}}),
    );
    assert_eq!(out["spec"]["containers"][0]["args"], json!(["1", "3"]));
    let out = smp(
        "Pod",
        json!({"metadata":{}}),
        json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["x"]}}),
    );
    assert_eq!(out, json!({"metadata":{}}));
    assert_eq!(
        smp_err(
            "Pod",
            live.clone(),
            json!({"metadata":{"$deleteFromPrimitiveList/finalizers":"a"}})
        )
        .code(),
        400
    );
    assert_eq!(
        smp_err(
            "Pod",
            live,
            json!({"metadata":{"$deleteFromPrimitiveList":["a"]}})
        )
        .code(),
        400
    );
}

/// Owner references merge by uid, conditions by type (built-in kinds only).
#[test]
fn smp_owner_references_by_uid_and_conditions_by_type() {
    let live = json!({
        "metadata":{"ownerReferences":[{"uid":"1","name":"a","kind":"X"}]},
        "status":{"conditions":[{"type":"Ready","status":"False"},{"type":"Available","status":"True"}]}
    });
    let patch = json!({
        "metadata":{"ownerReferences":[{"uid":"2","name":"b","kind":"X"},{"uid":"1","controller":true}]},
        "status":{"conditions":[{"type":"Ready","status":"True"}]}
    });
    let out = smp("Deployment", live.clone(), patch.clone());
    assert_eq!(
        out["metadata"]["ownerReferences"],
        json!([{"uid":"2","name":"b","kind":"X"},{"uid":"1","name":"a","kind":"X","controller":true}])
    );
    assert_eq!(
        out["status"]["conditions"],
        json!([{"type":"Ready","status":"True"},{"type":"Available","status":"True"}])
    );
    // A custom resource has no strategy for status.conditions: replaced.
    let out = smp("KopfExample", live, patch);
    assert_eq!(
        out["status"]["conditions"],
        json!([{"type":"Ready","status":"True"}])
    );
    assert_eq!(
        out["metadata"]["ownerReferences"].as_array().map(Vec::len),
        Some(2)
    );
}

/// Service ports merge by port, ServiceAccount secrets by name.
#[test]
fn smp_service_ports_and_service_account_secrets() {
    let live = json!({"spec":{"ports":[{"port":80,"targetPort":8080},{"port":443}],"selector":{"app":"a"}}});
    let patch = json!({"spec":{"ports":[{"port":80,"targetPort":9090}],"selector":{"tier":"web"}}});
    let out = smp("Service", live, patch);
    assert_eq!(
        out,
        json!({"spec":{"ports":[{"port":80,"targetPort":9090},{"port":443}],"selector":{"app":"a","tier":"web"}}})
    );
    let out = smp(
        "ServiceAccount",
        json!({"secrets":[{"name":"a"}]}),
        json!({"secrets":[{"name":"b"}]}),
    );
    assert_eq!(names(&out["secrets"]), ["b", "a"]);
    let out = smp(
        "ConfigMap",
        json!({"secrets":[{"name":"a"}]}),
        json!({"secrets":[{"name":"b"}]}),
    );
    assert_eq!(names(&out["secrets"]), ["b"]);
}

/// The other keyed lists of a pod spec.
#[test]
fn smp_pod_spec_other_keyed_lists() {
    let live = json!({"spec":{
        "imagePullSecrets":[{"name":"a"}],
        "hostAliases":[{"ip":"1.1.1.1","hostnames":["a"]}],
        "initContainers":[{"name":"init","image":"i"}],
        "ephemeralContainers":[{"name":"dbg","image":"d"}],
        "containers":[{"name":"c","volumeDevices":[{"devicePath":"/dev/x","name":"x"}]}]
    }});
    let patch = json!({"spec":{
        "imagePullSecrets":[{"name":"b"}],
        "hostAliases":[{"ip":"1.1.1.1","hostnames":["b"]}],
        "initContainers":[{"name":"init","image":"j"}],
        "ephemeralContainers":[{"name":"dbg2","image":"d"}],
        "containers":[{"name":"c","volumeDevices":[{"devicePath":"/dev/y","name":"y"}]}]
    }});
    let out = smp("Pod", live, patch);
    assert_eq!(names(&out["spec"]["imagePullSecrets"]), ["b", "a"]);
    assert_eq!(
        out["spec"]["hostAliases"],
        json!([{"ip":"1.1.1.1","hostnames":["b"]}])
    );
    assert_eq!(
        out["spec"]["initContainers"],
        json!([{"name":"init","image":"j"}])
    );
    assert_eq!(names(&out["spec"]["ephemeralContainers"]), ["dbg2", "dbg"]);
    assert_eq!(
        out["spec"]["containers"][0]["volumeDevices"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
}

/// Maps merge recursively and `null` deletes.
#[test]
fn smp_maps_merge_and_null_deletes() {
    let live =
        json!({"data":{"a":"1","b":"2"},"metadata":{"labels":{"x":"1"},"annotations":{"y":"2"}}});
    let patch = json!({"data":{"a":null,"c":"3"},"metadata":{"annotations":null,"labels":{"z":"3"}},"new":{"k":null,"v":1}});
    let out = smp("ConfigMap", live, patch);
    assert_eq!(
        out,
        json!({"data":{"b":"2","c":"3"},"metadata":{"labels":{"x":"1","z":"3"}},"new":{"v":1}})
    );
}

/// Directives inside new fields never reach the result.
#[test]
fn smp_directives_never_leak_into_new_fields() {
    let patch = json!({"spec":{
        "$setElementOrder/containers":[{"name":"b"},{"name":"a"}],
        "containers":[
            {"name":"b","env":[{"name":"X","$patch":"delete"}],"$deleteFromPrimitiveList/args":["q"]},
            {"name":"gone","$patch":"delete"},
            {"name":"a","image":"a","$retainKeys":["name","image"]}
        ],
        "volumes":[{"name":"v","$patch":"merge"}],
        "nodeSelector":{"$patch":"replace","disk":"ssd","bad":null}
    }});
    let out = smp("Pod", json!({}), patch);
    assert_eq!(
        out,
        json!({"spec":{
            "containers":[{"name":"b","env":[]},{"name":"a","image":"a"}],
            "volumes":[{"name":"v"}],
            "nodeSelector":{"disk":"ssd"}
        }})
    );
    let text = out.to_string();
    assert!(!text.contains('$'), "{text}");
}

/// `$setElementOrder` with live-only items (Kubernetes' own test cases).
#[test]
fn smp_set_element_order_kubernetes_cases() {
    // k8s strategicpatch tests "set elements order in a list with server-only items" 1-3
    // (Current + ThreeWay = Result), with `mergingList` as a Pod's containers.
    let cases = [
        (
            json!([{"name":"1","other":"a"},{"name":"3","value":"3"},{"name":"4","value":"4"},{"name":"2","value":"2"},{"name":"9"}]),
            json!(["4", "2", "3", "1"]),
            vec!["4", "2", "3", "1", "9"],
        ),
        (
            json!([{"name":"1","other":"a"},{"name":"2","value":"2"},{"name":"9"},{"name":"3","value":"3"},{"name":"4","value":"4"}]),
            json!(["2", "1", "4", "3"]),
            vec!["2", "1", "9", "4", "3"],
        ),
        (
            json!([{"name":"1","other":"a"},{"name":"2"},{"name":"7"},{"name":"9"},{"name":"8"},{"name":"3"},{"name":"4"}]),
            json!(["2", "1", "4", "3"]),
            vec!["2", "1", "7", "9", "8", "4", "3"],
        ),
    ];
    for (live, order, expected) in cases {
        let order_items: Vec<Value> = order
            .as_array()
            .into_iter()
            .flatten()
            .map(|name| json!({"name": name}))
            .collect();
        let out = smp(
            "Pod",
            json!({"spec":{"containers":live.clone()}}),
            json!({"spec":{"$setElementOrder/containers":order_items}}),
        );
        assert_eq!(names(&out["spec"]["containers"]), expected, "{live}");
        assert_eq!(
            out["spec"]["containers"][expected.iter().position(|n| *n == "1").unwrap_or(0)]["other"],
            "a"
        );
        // The same with a primitive list.
        let live_names: Vec<String> = names(&live);
        let out = smp(
            "Pod",
            json!({"metadata":{"finalizers":live_names}}),
            json!({"metadata":{"$setElementOrder/finalizers":order}}),
        );
        assert_eq!(names(&out["metadata"]["finalizers"]), expected);
    }
}

/// `$setElementOrder` together with patch items and deletions.
#[test]
fn smp_set_element_order_with_patch_items() {
    // k8s: "add an item in a list of primitives and preserve order".
    let out = smp(
        "Pod",
        json!({"metadata":{"finalizers":["1","4","2"]}}),
        json!({"metadata":{"$setElementOrder/finalizers":["3","1","2"],"finalizers":["3"]}}),
    );
    assert_eq!(out["metadata"]["finalizers"], json!(["3", "1", "4", "2"]));
    // k8s: "delete an item in a list of primitives and preserve order".
    let out = smp(
        "Pod",
        json!({"metadata":{"finalizers":["1","2","3"]}}),
        json!({"metadata":{"$setElementOrder/finalizers":["2","1"],"$deleteFromPrimitiveList/finalizers":["3"]}}),
    );
    assert_eq!(out["metadata"]["finalizers"], json!(["2", "1"]));
    // k8s: "$setElementOrder contains item that is not present in the list to be merged".
    let out = smp(
        "Pod",
        json!({"spec":{"containers":[{"name":"1"},{"name":"3"}]}}),
        json!({"spec":{
            "$setElementOrder/containers":[{"name":"3"},{"name":"2"},{"name":"1"}],
            "containers":[{"name":"3","value":"3"},{"name":"1","value":"1"}]}}),
    );
    assert_eq!(
        out["spec"]["containers"],
        json!([{"name":"3","value":"3"},{"name":"1","value":"1"}])
    );
}

/// A patch list out of `$setElementOrder` order is a 400.
#[test]
fn smp_set_element_order_must_match_patch_order() {
    let error = smp_err(
        "Pod",
        json!({"spec":{"containers":[{"name":"1"},{"name":"3"},{"name":"2"}]}}),
        json!({"spec":{
            "$setElementOrder/containers":[{"name":"1"},{"name":"2"},{"name":"3"}],
            "containers":[{"name":"3","value":"3"},{"name":"1","value":"1"}]}}),
    );
    assert_eq!(error.code(), 400);
    assert!(error.to_string().contains("doesn't match"), "{error}");
    let error = smp_err(
        "Pod",
        json!({"metadata":{"finalizers":["1","3","2"]}}),
        json!({"metadata":{"$setElementOrder/finalizers":["1","2","3"],"finalizers":["3","1"]}}),
    );
    assert!(error.to_string().contains("doesn't match"), "{error}");
    assert_eq!(
        smp_err(
            "Pod",
            json!({}),
            json!({"metadata":{"$setElementOrder/finalizers":"x"}})
        )
        .code(),
        400
    );
}

/// Malformed strategic merge patches are rejected without changes.
#[test]
fn smp_malformed_patches() {
    let live = json!({"spec":{"containers":[{"name":"a","image":"a"}]}});
    let error = smp_err(
        "Pod",
        live.clone(),
        json!({"spec":{"containers":[{"image":"b"}]}}),
    );
    assert_eq!(error.code(), 400);
    assert!(error.to_string().contains("merge key \"name\""), "{error}");
    let error = smp_err(
        "Pod",
        live.clone(),
        json!({"spec":{"containers":[["nested"]]}}),
    );
    assert_eq!(error.code(), 422);
    assert_eq!(error.reason(), "Invalid");
    let error = smp_err(
        "Pod",
        live.clone(),
        json!({"spec":{"containers":["a", {"name":"b"}]}}),
    );
    assert_eq!(error.code(), 400);
    let error = smp_err(
        "Pod",
        live.clone(),
        json!({"metadata":{"finalizers":[{"a":1}]}}),
    );
    assert!(error.to_string().contains("without merge key"), "{error}");
    let mut target = live.clone();
    let error = strategic_merge_patch("Pod", &mut target, &json!(["not", "a", "map"]))
        .expect_err("not a map");
    assert_eq!(error.code(), 400);
    assert_eq!(target, live);
}

/// Lists of unknown kinds are atomic.
#[test]
fn smp_unknown_lists_are_atomic_and_scalars_replace() {
    let live = json!({"spec":{"items":[1,2],"nested":{"list":[{"name":"a"}]},"replicas":1}});
    let patch = json!({"spec":{"items":[3],"nested":{"list":[{"name":"b"}]},"replicas":"two"}});
    let out = smp("KopfExample", live, patch);
    assert_eq!(
        out,
        json!({"spec":{"items":[3],"nested":{"list":[{"name":"b"}]},"replicas":"two"}})
    );
}
