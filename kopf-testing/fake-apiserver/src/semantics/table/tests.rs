//! Tables and JSONPath against the apiextensions-apiserver's behaviour, and inputs that must
//! never panic.

use proptest::prelude::*;
use serde_json::{Value, json};
use time::Duration;
use time::macros::datetime;

use super::build::*;
use super::json_path::*;
use crate::storage::columns::{CREATION_TIMESTAMP_DESCRIPTION, PrinterColumn};

fn fixture() -> Value {
    json!({
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {
            "name": "w1",
            "namespace": "default",
            "creationTimestamp": "2024-01-01T11:55:00Z",
            "labels": {"app.kubernetes.io/name": "demo", "tier": "web"},
        },
        "spec": {
            "replicas": 3,
            "ratio": 0.5,
            "enabled": true,
            "nothing": null,
            "tags": ["t1", "t2"],
            "items": [
                {"name": "a", "size": 1},
                {"name": "b", "size": 2},
                {"name": "c", "size": 3},
            ],
        },
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Synced", "status": "False"},
            ],
        },
    })
}

#[test]
fn json_path_table() {
    let object = fixture();
    let cases: &[(&str, Value)] = &[
        (".spec.replicas", json!([3])),
        ("{.spec.replicas}", json!([3])),
        (" { .spec.replicas } ", json!([3])),
        ("$.spec.replicas", json!([3])),
        ("{$.spec.ratio}", json!([0.5])),
        (".spec.enabled", json!([true])),
        (".spec.nothing", json!([null])),
        (".metadata.name", json!(["w1"])),
        (".spec.items[0].name", json!(["a"])),
        (".spec.items[2].name", json!(["c"])),
        (".spec.items[-1].name", json!(["c"])),
        (".spec.items[-3].name", json!(["a"])),
        (".spec.items[*].name", json!(["a", "b", "c"])),
        (".spec.items.*.size", json!([1, 2, 3])),
        (".spec.tags[*]", json!(["t1", "t2"])),
        (".spec.tags.*", json!(["t1", "t2"])),
        (".metadata.labels[*]", json!(["demo", "web"])),
        (".spec.items[0:2].name", json!(["a", "b"])),
        (".spec.items[1:].name", json!(["b", "c"])),
        (".spec.items[:-1].name", json!(["a", "b"])),
        (".spec.items[::2].name", json!(["a", "c"])),
        (".spec.items[0:100].name", json!(["a", "b", "c"])),
        (".spec.items[0,2].name", json!(["a", "c"])),
        (".spec.items[0]['name','size']", json!(["a", 1])),
        ("['spec']['replicas']", json!([3])),
        (
            ".metadata.labels['app.kubernetes.io/name']",
            json!(["demo"]),
        ),
        (
            ".metadata.labels[\"app.kubernetes.io/name\"]",
            json!(["demo"]),
        ),
        (
            ".metadata.labels.app\\.kubernetes\\.io/name",
            json!(["demo"]),
        ),
        (
            "{.metadata.labels.app\\.kubernetes\\.io/name}",
            json!(["demo"]),
        ),
        (
            ".status.conditions[?(@.type==\"Ready\")].status",
            json!(["True"]),
        ),
        (
            ".status.conditions[?(@.type=='Ready')].status",
            json!(["True"]),
        ),
        (
            ".status.conditions[?( @.type == \"Ready\" )].status",
            json!(["True"]),
        ),
        (
            ".status.conditions[?(@.type!=\"Ready\")].type",
            json!(["Synced"]),
        ),
        (
            ".status.conditions[?(@.type==\"Missing\")].status",
            json!([]),
        ),
        (".spec.items[?(@.size==2)].name", json!(["b"])),
        (".spec.items[?(@.size==2.0)].name", json!(["b"])),
        (".spec.items[?(@.size!=2)].name", json!(["a", "c"])),
        (".spec.items[?(@.size>1)].name", json!(["b", "c"])),
        (".spec.items[?(@.size<=2)].name", json!(["a", "b"])),
        (".spec.items[?(@.size)].name", json!(["a", "b", "c"])),
        (".spec.items[?(@.colour)].name", json!([])),
        (".spec.items[?(@.size==$.spec.replicas)].name", json!(["c"])),
        (".spec.tags[?(@=='t2')]", json!(["t2"])),
        (".spec.items[?(@.name==\"a\")].size", json!([1])),
        ("..name", json!(["w1", "a", "b", "c"])),
        ("..items[1].name", json!(["b"])),
        (
            "$..status",
            json!([{"conditions": [{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}]}, "True", "False"]),
        ),
        ("$", json!([object.clone()])),
        (".", json!([object.clone()])),
    ];
    for (path, expected) in cases {
        assert_eq!(
            Value::Array(json_path(&object, path)),
            *expected,
            "path {path:?}"
        );
    }
}

#[test]
fn json_path_missing_paths_are_empty() {
    let object = fixture();
    for path in [
        ".spec.missing",
        ".nope.deeper.still",
        ".spec.replicas.x",
        ".spec.replicas[0]",
        ".spec.items.name",
        ".spec.items[3]",
        ".spec.items[-4]",
        ".spec.items[3:]",
        ".spec.items[2:1]",
        ".spec.items[::-1]",
        ".spec.items[::0]",
        ".metadata.labels[0]",
        ".spec.tags['t1']",
        ".spec.items[0].name.first",
        ".metadata.labels.app.kubernetes.io/name",
        ".spec[?(@.replicas==3)]",
        "..missing",
    ] {
        assert_eq!(
            json_path(&object, path),
            Vec::<Value>::new(),
            "path {path:?}"
        );
    }
    assert_eq!(json_path(&json!(null), ".a"), Vec::<Value>::new());
    assert_eq!(json_path(&json!(5), "[0]"), Vec::<Value>::new());
}

#[test]
fn json_path_malformed_paths_are_empty() {
    let object = fixture();
    for path in [
        "",
        "   ",
        "{}",
        "spec.replicas",
        "{spec.replicas}",
        ".spec[",
        ".spec]",
        ".spec.items[abc]",
        ".spec.items[]",
        ".spec.items[1:2:3:4]",
        ".spec.items[0x1]",
        ".spec.items[99999999999999999999]",
        "{.spec",
        ".spec}",
        "{.spec}{.status}",
        "..",
        ".spec..",
        "...spec",
        ".spec.items[?(@.size==)]",
        ".spec.items[?(==1)]",
        ".spec.items[?(@.size<>1)]",
        ".spec.items[?(@.size===1)]",
        ".spec.items[?@.size==1]",
        ".spec.items[?(@.name==\"a)]",
        ".spec.items[?(@.name==a)]",
        ".spec.items[?(\"a\")]",
        ".metadata.labels['x]",
        ".metadata.labels['x'y]",
        ".spec\\",
        ".spec items",
        "@.spec",
        "$$",
    ] {
        assert_eq!(
            json_path(&object, path),
            Vec::<Value>::new(),
            "path {path:?}"
        );
    }
}

#[test]
fn json_path_nesting_limit() {
    let object = json!({"a": [{"a": [{"b": 1}]}]});
    assert_eq!(
        json_path(&object, ".a[?(@.a[?(@.b==1)])].a[0].b"),
        vec![json!(1)]
    );
    let mut deep = String::from("@.b");
    for _ in 0..100 {
        deep = format!("@.a[?({deep})]");
    }
    assert_eq!(
        json_path(&object, &format!(".a[?({deep})]")),
        Vec::<Value>::new()
    );
}

#[test]
fn human_duration_boundaries() {
    let cases: &[(Duration, &str)] = &[
        (Duration::MIN, "<invalid>"),
        (Duration::seconds(-2), "<invalid>"),
        (Duration::milliseconds(-1999), "0s"),
        (Duration::milliseconds(-1500), "0s"),
        (Duration::seconds(-1), "0s"),
        (Duration::milliseconds(-500), "0s"),
        (Duration::ZERO, "0s"),
        (Duration::milliseconds(999), "0s"),
        (Duration::seconds(1), "1s"),
        (Duration::seconds(59), "59s"),
        (Duration::seconds(60), "60s"),
        (Duration::milliseconds(119_999), "119s"),
        (Duration::seconds(120), "2m"),
        (Duration::seconds(121), "2m1s"),
        (Duration::seconds(9 * 60 + 59), "9m59s"),
        (Duration::minutes(10), "10m"),
        (Duration::seconds(10 * 60 + 30), "10m"),
        (Duration::seconds(179 * 60 + 59), "179m"),
        (Duration::minutes(180), "3h"),
        (Duration::minutes(181), "3h1m"),
        (Duration::minutes(7 * 60 + 59), "7h59m"),
        (Duration::hours(8), "8h"),
        (Duration::minutes(8 * 60 + 30), "8h"),
        (Duration::minutes(47 * 60 + 59), "47h"),
        (Duration::hours(48), "2d"),
        (Duration::hours(49), "2d1h"),
        (Duration::hours(7 * 24 + 23), "7d23h"),
        (Duration::hours(8 * 24), "8d"),
        (Duration::days(729), "729d"),
        (Duration::days(730), "2y"),
        (Duration::days(731), "2y1d"),
        (Duration::days(8 * 365 - 1), "7y364d"),
        (Duration::days(8 * 365), "8y"),
        (Duration::days(100 * 365), "100y"),
        (Duration::MAX, "292y"),
    ];
    for (duration, expected) in cases {
        assert_eq!(human_duration(*duration), *expected, "{duration:?}");
    }
}

fn column(name: &str, type_: &str, json_path: &str) -> PrinterColumn {
    PrinterColumn {
        name: name.into(),
        type_: type_.into(),
        format: String::new(),
        description: String::new(),
        priority: 0,
        json_path: json_path.into(),
    }
}

#[test]
fn build_table_without_columns_uses_age() {
    let now = datetime!(2024-01-01 12:00:00 UTC);
    let objects = [fixture(), json!({"metadata": {"name": "bare"}})];
    let table = build_table(&objects, &[], json!({"resourceVersion": "42"}), now);
    assert_eq!(
        table,
        json!({
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": "42"},
            "columnDefinitions": [
                {"name": "Name", "type": "string", "format": "name", "description": NAME_DESCRIPTION, "priority": 0},
                {"name": "Age", "type": "date", "format": "", "description": CREATION_TIMESTAMP_DESCRIPTION, "priority": 0},
            ],
            "rows": [
                {
                    "cells": ["w1", "5m"],
                    "object": {
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": fixture()["metadata"].clone(),
                    },
                },
                {
                    "cells": ["bare", null],
                    "object": {
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": {"name": "bare"},
                    },
                },
            ],
        })
    );
    // Key order is kept for serialisation.
    let keys: Vec<&String> = table.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "kind",
            "apiVersion",
            "metadata",
            "columnDefinitions",
            "rows"
        ]
    );
}

#[test]
fn build_table_with_every_column_type() {
    let now = datetime!(2024-01-03 12:00:00 UTC);
    let mut object = fixture();
    object["status"]["lastSeen"] = json!("2024-01-03T11:59:30.5Z");
    object["status"]["badDate"] = json!("yesterday");
    object["spec"]["float"] = json!(2.9);
    let columns = vec![
        PrinterColumn {
            name: "Replicas".into(),
            type_: "integer".into(),
            format: "int32".into(),
            description: "Desired replicas".into(),
            priority: 0,
            json_path: ".spec.replicas".into(),
        },
        column("Truncated", "integer", ".spec.float"),
        column("WrongInt", "integer", ".spec.tags"),
        column("Ratio", "number", ".spec.ratio"),
        column("IntAsNumber", "number", ".spec.replicas"),
        column("Enabled", "boolean", ".spec.enabled"),
        column("WrongBool", "boolean", ".metadata.name"),
        column(
            "Ready",
            "string",
            ".status.conditions[?(@.type==\"Ready\")].status",
        ),
        column("ReplicasText", "string", ".spec.replicas"),
        column("Labels", "string", ".metadata.labels"),
        column("Tags", "string", ".spec.tags[*]"),
        column("Sizes", "integer", ".spec.items[*].size"),
        column("Null", "string", ".spec.nothing"),
        column("Missing", "string", ".spec.missing"),
        column("Malformed", "string", ".spec["),
        column("Age", "date", ".metadata.creationTimestamp"),
        column("Seen", "date", ".status.lastSeen"),
        column("BadDate", "date", ".status.badDate"),
        column("NotADate", "date", ".spec.replicas"),
        column("Unknown", "object", ".spec"),
    ];
    let mut wide = column("Wide", "string", "{.metadata.namespace}");
    wide.priority = 1;
    let mut all = columns.clone();
    all.push(wide);
    let table = build_table(&[object.clone()], &all, json!({}), now);
    let definitions = table["columnDefinitions"].as_array().unwrap();
    assert_eq!(definitions.len(), all.len() + 1);
    assert_eq!(
        definitions[1],
        json!({"name": "Replicas", "type": "integer", "format": "int32", "description": "Desired replicas", "priority": 0})
    );
    assert_eq!(
        definitions[2],
        json!({
            "name": "Truncated", "type": "integer", "format": "",
            "description": "Custom resource definition column (in JSONPath format): .spec.float",
            "priority": 0,
        })
    );
    assert_eq!(definitions.last().unwrap()["priority"], json!(1));
    let rows = table["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0]["cells"],
        json!([
            "w1",
            3,
            2,
            null,
            0.5,
            3,
            true,
            null,
            "True",
            "3",
            "{\"app.kubernetes.io/name\":\"demo\",\"tier\":\"web\"}",
            "t1,t2",
            "1,2,3",
            null,
            null,
            null,
            "2d",
            "29s",
            "yesterday",
            null,
            null,
            "default",
        ])
    );
    assert_eq!(
        rows[0]["object"],
        json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": object["metadata"].clone(),
        })
    );
}

#[test]
fn build_table_edge_objects() {
    let now = datetime!(2024-01-01 00:00:00 UTC);
    let objects = [
        json!({}),
        json!(null),
        json!({"metadata": {"creationTimestamp": "2025-01-01T00:00:00Z"}}),
    ];
    let table = build_table(&objects, &[], json!({"continue": "x"}), now);
    let rows = table["rows"].as_array().unwrap();
    assert_eq!(rows[0]["cells"], json!(["", null]));
    assert_eq!(rows[0]["object"]["metadata"], json!({}));
    assert_eq!(rows[1]["cells"], json!(["", null]));
    assert_eq!(rows[2]["cells"], json!(["", "<invalid>"]));
    let empty = build_table(&[], &[], json!({}), now);
    assert_eq!(empty["rows"], json!([]));
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[a-c.]{0,3}".prop_map(Value::from),
        "20[0-9]{2}-0[1-9]-1[0-9]T1[0-9]:[0-5][0-9]:[0-5][0-9]Z".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec(("[a-c.]{1,2}", inner), 0..5)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

fn arb_path() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[.\\[\\]*?@()='\"\\\\a-c0-9 ,:${}!<>-]{0,40}",
        prop::collection::vec(
            prop_oneof![
                Just(".".to_owned()),
                Just("..".to_owned()),
                "\\.[a-c]{1,2}",
                Just("[*]".to_owned()),
                "\\[-?[0-9]{1,2}\\]",
                "\\[-?[0-9]?:-?[0-9]?(:-?[0-9])?\\]",
                "\\['[a-c.]{0,2}'\\]",
                "\\[\\?\\(@\\.[a-c]{1,2}(==|!=|<|>=)('[a-c]'|[0-9]|@\\.[a-c])\\)\\]",
                "\\[\\?\\(@(\\.[a-c])?\\)\\]",
                "\\\\.",
            ],
            0..8,
        )
        .prop_map(|parts| parts.concat()),
    ]
}

proptest! {
    #[test]
    fn json_path_never_panics(object in arb_json(), path in arb_path()) {
        let matches = json_path(&object, &path);
        prop_assert!(matches.len() <= MAX_RESULTS);
        let wrapped = json_path(&object, &format!("{{{path}}}"));
        prop_assert!(wrapped.len() <= MAX_RESULTS);
    }

    #[test]
    fn build_table_never_panics(
        objects in prop::collection::vec(arb_json(), 0..4),
        specs in prop::collection::vec(
            (prop::sample::select(vec!["string", "integer", "number", "boolean", "date", "other"]), arb_path()),
            0..4,
        ),
        offset in any::<i32>(),
    ) {
        let columns: Vec<PrinterColumn> = specs
            .iter()
            .map(|(type_, path)| column("C", type_, path))
            .collect();
        let now = datetime!(2024-06-01 00:00:00 UTC) + Duration::seconds(i64::from(offset));
        let table = build_table(&objects, &columns, json!({}), now);
        let rows = table["rows"].as_array().unwrap();
        prop_assert_eq!(rows.len(), objects.len());
        let width = columns.len().max(1) + 1;
        for row in rows {
            prop_assert_eq!(row["cells"].as_array().unwrap().len(), width);
        }
    }

    #[test]
    fn human_duration_never_panics(seconds in any::<i64>(), nanos in any::<i32>()) {
        let text = human_duration(Duration::new(seconds, nanos));
        prop_assert!(!text.is_empty());
    }
}
