//! Tests of the progress records and their storages, against Kopf's formats.

use proptest::prelude::*;
use serde_json::json;
use time::macros::datetime;

use super::*;

const PREFIX: &str = "my-operator.example.com";

fn typical() -> ProgressRecord {
    ProgressRecord {
        started: Some(datetime!(2026-03-01 12:34:56.123456 UTC)),
        delayed: Some(datetime!(2026-03-01 12:35:56.123456 UTC)),
        purpose: Some("create".into()),
        retries: 1,
        message: Some("not ready: \"é\" — ✓ 😀\n\u{7f}".into()),
        ..ProgressRecord::default()
    }
}

/// What Kopf 1.45.2 writes for `typical()`: `AnnotationsProgressStorage().store(...)` of
/// `HandlerState(...).for_storage()`.
const TYPICAL_JSON: &str = r#"{"started":"2026-03-01T12:34:56.123456+00:00","delayed":"2026-03-01T12:35:56.123456+00:00","purpose":"create","retries":1,"success":false,"failure":false,"message":"not ready: \"\u00e9\" \u2014 \u2713 \ud83d\ude00\n\u007f"}"#;

#[test]
fn typical_record_written_exactly_as_kopf() {
    assert_eq!(typical().to_json(), TYPICAL_JSON);
    let mut patch = json!({});
    SmartProgressStorage::default().store(&"create_fn".into(), &typical(), &json!({}), &mut patch);
    assert_eq!(
        patch,
        json!({"metadata": {"annotations": {"kopf.zalando.org/create_fn": TYPICAL_JSON}}})
    );
}

/// Kopf 1.45.2, custom prefix, a finished record with sub-handlers: the marker is added and
/// the subrefs are sorted.
#[test]
fn finished_record_with_subrefs_written_exactly_as_kopf() {
    let record = ProgressRecord {
        started: Some(datetime!(2026-03-01 12:34:56.123456 UTC)),
        stopped: Some(datetime!(2026-03-01 12:34:56.123456 UTC)),
        purpose: Some("update".into()),
        retries: 3,
        success: true,
        subrefs: vec!["b/y".into(), "a/x".into()],
        ..ProgressRecord::default()
    };
    let mut patch = Value::Null;
    AnnotationsProgressStorage::new("my-op.example.com").store(
        &"parent/fn".into(),
        &record,
        &json!({}),
        &mut patch,
    );
    let expected = r#"{"metadata":{"annotations":{"my-op.example.com/parent.fn":"{\"started\":\"2026-03-01T12:34:56.123456+00:00\",\"stopped\":\"2026-03-01T12:34:56.123456+00:00\",\"purpose\":\"update\",\"retries\":3,\"success\":true,\"failure\":false,\"subrefs\":[\"a/x\",\"b/y\"]}","my-op.example.com/kopf-managed":"yes"}}}"#;
    assert_eq!(serde_json::to_string(&patch).unwrap(), expected);
}

#[test]
fn record_written_by_kopf_is_read() {
    let body = json!({"metadata": {"annotations": {"kopf.zalando.org/create_fn": TYPICAL_JSON}}});
    let record = SmartProgressStorage::default().fetch(&"create_fn".into(), &body);
    assert_eq!(record, Some(typical()));
}

/// Kopf's own test data: naive timestamps as old Kopf versions wrote them (read as UTC).
#[test]
fn legacy_naive_record_is_read() {
    let text = r#"{"started":"2020-01-01T00:00:00","stopped":"2020-12-31T23:59:59","delayed":"3000-01-01T00:00:00","retries":123,"success":false,"failure":false,"message":null,"subrefs":null}"#;
    let record = ProgressRecord::from_json(text).unwrap();
    assert_eq!(
        record,
        ProgressRecord {
            started: Some(datetime!(2020-01-01 0:00 UTC)),
            stopped: Some(datetime!(2020-12-31 23:59:59 UTC)),
            delayed: Some(datetime!(3000-01-01 0:00 UTC)),
            retries: 123,
            ..ProgressRecord::default()
        }
    );
}

#[test]
fn lenient_reading_of_odd_fields() {
    let text = r#"{"started":"not a time","purpose":"","retries":-1,"success":1,"failure":null,"message":5,"subrefs":["x",1],"extra":true}"#;
    let record = ProgressRecord::from_json(text).unwrap();
    assert_eq!(
        record,
        ProgressRecord {
            success: true,
            subrefs: vec!["x".into()],
            ..ProgressRecord::default()
        }
    );
    assert_eq!(ProgressRecord::from_json("[]"), None);
    assert_eq!(ProgressRecord::from_json("{"), None);
    assert_eq!(
        ProgressRecord::from_json("{}"),
        Some(ProgressRecord::default())
    );
}

#[test]
fn empty_record_keeps_the_always_present_keys() {
    assert_eq!(
        ProgressRecord::default().to_json(),
        r#"{"retries":0,"success":false,"failure":false}"#
    );
}

#[test]
fn written_record_parses_as_kopf_expects() {
    let parsed: Value = serde_json::from_str(&typical().to_json()).unwrap();
    let expected: Value = serde_json::from_str(TYPICAL_JSON).unwrap();
    assert_eq!(parsed, expected);
    let keys: Vec<&str> = parsed
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "started", "delayed", "purpose", "retries", "success", "failure", "message"
        ]
    );
}

#[test]
fn serde_goes_through_kopf_format() {
    let text = serde_json::to_string(&typical()).unwrap();
    let back: ProgressRecord = serde_json::from_str(&text).unwrap();
    assert_eq!(back, typical());
    assert!(serde_json::from_str::<ProgressRecord>("1").is_err());
}

#[test]
fn verbose_writes_nulls() {
    let storage = AnnotationsProgressStorage {
        verbose: true,
        ..AnnotationsProgressStorage::new(PREFIX)
    };
    let mut patch = json!({});
    storage.store(
        &"id1".into(),
        &ProgressRecord::default(),
        &json!({}),
        &mut patch,
    );
    assert_eq!(
        patch["metadata"]["annotations"][format!("{PREFIX}/id1")],
        r#"{"started":null,"stopped":null,"delayed":null,"purpose":null,"retries":0,"success":false,"failure":false,"message":null,"subrefs":null}"#
    );
}

/// Kopf's `test_annotations_hashing.py`: the keys used for fetching, storing, purging and
/// touching, for short, V1-cut and V2-cut ids.
#[test]
fn keys_normalized_in_all_operations() {
    let cases = [
        ("a_b.c-d/e".to_owned(), vec![format!("{PREFIX}/a_b.c-d.e")]),
        (
            "x".repeat(40),
            vec![
                format!("{PREFIX}/{}", "x".repeat(40)),
                format!("{PREFIX}/{}-tEokcg", "x".repeat(32)),
            ],
        ),
        (
            "x".repeat(64),
            vec![
                format!("{PREFIX}/{}-SItAqA", "x".repeat(56)),
                format!("{PREFIX}/{}-SItAqA", "x".repeat(32)),
            ],
        ),
    ];
    let storage = AnnotationsProgressStorage::new(PREFIX);
    for (id, expected_keys) in cases {
        let key = HandlerId::new(id.clone());
        for expected in &expected_keys {
            let body = json!({"metadata": {"annotations": {expected.clone(): TYPICAL_JSON}}});
            assert_eq!(
                storage.fetch(&key, &body),
                Some(typical()),
                "fetch {expected}"
            );

            let mut patch = json!({});
            storage.purge(&key, &body, &mut patch);
            assert_eq!(patch["metadata"]["annotations"][expected], Value::Null);
            assert!(
                patch["metadata"]["annotations"].get(expected).is_some(),
                "purge {expected}"
            );
        }

        let mut patch = json!({});
        storage.store(&key, &typical(), &json!({}), &mut patch);
        let written = written_keys(&patch);
        assert_eq!(
            written,
            expected_keys.iter().collect::<Vec<_>>(),
            "store {id}"
        );

        let touching = AnnotationsProgressStorage {
            touch_key: id.clone(),
            ..storage.clone()
        };
        let mut patch = json!({});
        touching.touch(&json!({}), &mut patch, Some("irrelevant"));
        let written = written_keys(&patch);
        assert_eq!(
            written,
            expected_keys.iter().collect::<Vec<_>>(),
            "touch {id}"
        );
    }
}

#[test]
fn v2_key_wins_over_v1_key_when_fetching() {
    let id = "x".repeat(64);
    let v2 = format!("{PREFIX}/{}-SItAqA", "x".repeat(56));
    let v1 = format!("{PREFIX}/{}-SItAqA", "x".repeat(32));
    let body = json!({"metadata": {"annotations": {
        v1: r#"{"retries":1,"success":false,"failure":false}"#,
        v2: r#"{"retries":2,"success":false,"failure":false}"#,
    }}});
    let record = AnnotationsProgressStorage::new(PREFIX).fetch(&id.as_str().into(), &body);
    assert_eq!(record.map(|r| r.retries), Some(2));
}

#[test]
fn v1_keys_not_written_when_off() {
    let storage = AnnotationsProgressStorage {
        v1: false,
        ..AnnotationsProgressStorage::new(PREFIX)
    };
    let mut patch = json!({});
    storage.store(
        &"x".repeat(40).as_str().into(),
        &typical(),
        &json!({}),
        &mut patch,
    );
    let written = written_keys(&patch);
    assert_eq!(written, [&format!("{PREFIX}/{}", "x".repeat(40))]);
}

#[test]
fn fetching_from_empty_or_null_returns_none() {
    let id: HandlerId = "id1".into();
    for storage in storages() {
        assert_eq!(storage.fetch(&id, &json!({})), None, "{storage:?}");
    }
    let body = json!({"metadata": {"annotations": {"kopf.zalando.org/id1": "null"}}});
    assert_eq!(
        AnnotationsProgressStorage::default().fetch(&id, &body),
        None
    );
}

#[test]
fn purging_already_empty_body_does_nothing() {
    for storage in storages() {
        let mut patch = json!({});
        storage.purge(&"id1".into(), &json!({}), &mut patch);
        assert_eq!(patch, json!({}), "{storage:?}");
    }
}

#[test]
fn purging_what_only_the_patch_has_drops_it_from_the_patch() {
    let writable = StatusProgressStorage {
        writable: true,
        ..StatusProgressStorage::default()
    };
    let storages: [Box<dyn ProgressStorage>; 3] = [
        Box::new(AnnotationsProgressStorage::default()),
        Box::new(writable.clone()),
        Box::new(SmartProgressStorage {
            status: writable,
            ..SmartProgressStorage::default()
        }),
    ];
    for storage in storages {
        let mut patch = json!({});
        storage.store(&"id1".into(), &typical(), &json!({}), &mut patch);
        assert_ne!(patch, json!({}), "{storage:?}");
        storage.purge(&"id1".into(), &json!({}), &mut patch);
        assert_eq!(patch, json!({}), "{storage:?}");
    }
}

#[test]
fn purging_annotations_nullifies_both_versions() {
    let id = "x".repeat(64);
    let v2 = keys::make_v2_key("kopf.zalando.org", &id);
    let v1 = keys::make_v1_key("kopf.zalando.org", &id);
    assert_ne!(v1, v2);
    let body = json!({"metadata": {"annotations": {v1.clone(): "{}", v2.clone(): "{}"}}});
    let mut patch = json!({});
    SmartProgressStorage::default().purge(&id.as_str().into(), &body, &mut patch);
    assert_eq!(
        patch,
        json!({"metadata": {"annotations": {v2: null, v1: null}}})
    );
}

#[test]
fn touching_annotations() {
    let storage = AnnotationsProgressStorage {
        touch_key: "my-dummy".into(),
        ..AnnotationsProgressStorage::new(PREFIX)
    };
    let key = format!("{PREFIX}/my-dummy");
    let marker = format!("{PREFIX}/kopf-managed");

    for body in [
        json!({}),
        json!({"metadata": {"annotations": {key.clone(): "something"}}}),
    ] {
        let mut patch = json!({});
        storage.touch(&body, &mut patch, Some("hello"));
        assert_eq!(
            patch,
            json!({"metadata": {"annotations": {key.clone(): "hello", marker.clone(): "yes"}}})
        );
    }

    let mut patch = json!({});
    storage.touch(&json!({}), &mut patch, None);
    assert_eq!(patch, json!({}));

    let body = json!({"metadata": {"annotations": {key.clone(): "hello"}}});
    storage.touch(&body, &mut patch, Some("hello"));
    assert_eq!(patch, json!({}));

    let body =
        json!({"metadata": {"annotations": {key.clone(): "something", marker.clone(): "yes"}}});
    storage.touch(&body, &mut patch, None);
    assert_eq!(patch, json!({"metadata": {"annotations": {key: null}}}));
}

#[test]
fn status_storage_reads_legacy_records() {
    let body = json!({"status": {"kopf": {"progress": {
        "create_fn": {"started": "2026-03-01T12:34:56.123456+00:00", "retries": 1, "success": false, "failure": false},
        "other": {"retries": 5},
    }}}});
    let record = StatusProgressStorage::default()
        .fetch(&"create_fn".into(), &body)
        .unwrap();
    assert_eq!(
        record.started,
        Some(datetime!(2026-03-01 12:34:56.123456 UTC))
    );
    assert_eq!(record.retries, 1);

    let custom = StatusProgressStorage {
        field: "status.my-operator".into(),
        ..StatusProgressStorage::default()
    };
    let body = json!({"status": {"my-operator": {"id1": {"retries": 7}}}});
    assert_eq!(
        custom.fetch(&"id1".into(), &body).map(|r| r.retries),
        Some(7)
    );
}

#[test]
fn status_storage_names() {
    let storage = StatusProgressStorage::new("my-operator");
    assert_eq!(storage.field, "status.my-operator.progress");
    assert_eq!(storage.touch_field, "status.my-operator.dummy");
    assert!(!storage.writable);
}

#[test]
fn status_storage_does_not_write_by_default() {
    let storage = StatusProgressStorage::default();
    let mut patch = json!({});
    storage.store(&"id1".into(), &typical(), &json!({}), &mut patch);
    storage.touch(&json!({}), &mut patch, Some("hello"));
    assert_eq!(patch, json!({}));
}

/// Kopf ≤ 1.43 (`StatusProgressStorage.store`): the full record, absent values as nulls.
#[test]
fn writable_status_storage_writes_full_records() {
    let storage = StatusProgressStorage {
        writable: true,
        ..StatusProgressStorage::default()
    };
    let mut patch = json!({});
    storage.store(&"create_fn".into(), &typical(), &json!({}), &mut patch);
    let expected = r#"{"status":{"kopf":{"progress":{"create_fn":{"started":"2026-03-01T12:34:56.123456+00:00","stopped":null,"delayed":"2026-03-01T12:35:56.123456+00:00","purpose":"create","retries":1,"success":false,"failure":false,"message":"not ready: \"\u00e9\" \u2014 \u2713 \ud83d\ude00\n\u007f","subrefs":null}}}}}"#;
    assert_eq!(patch, serde_json::from_str::<Value>(expected).unwrap());

    storage.touch(&json!({}), &mut patch, Some("hello"));
    assert_eq!(patch["status"]["kopf"]["dummy"], "hello");
    let mut patch = json!({});
    storage.touch(
        &json!({"status": {"kopf": {"dummy": "x"}}}),
        &mut patch,
        None,
    );
    assert_eq!(patch, json!({"status": {"kopf": {"dummy": null}}}));
}

#[test]
fn status_storage_purges_even_when_read_only() {
    let body = json!({"status": {"kopf": {"progress": {"id1": {"retries": 1}}}}});
    let mut patch = json!({});
    SmartProgressStorage::default().purge(&"id1".into(), &body, &mut patch);
    assert_eq!(
        patch,
        json!({"status": {"kopf": {"progress": {"id1": null}}}})
    );
}

#[test]
fn smart_storage_prefers_annotations_then_falls_back_to_status() {
    let storage = SmartProgressStorage::default();
    let both = json!({
        "metadata": {"annotations": {"kopf.zalando.org/id1": r#"{"retries":2}"#}},
        "status": {"kopf": {"progress": {"id1": {"retries": 1}}}},
    });
    assert_eq!(
        storage.fetch(&"id1".into(), &both).map(|r| r.retries),
        Some(2)
    );
    let status_only = json!({"status": {"kopf": {"progress": {"id1": {"retries": 1}}}}});
    assert_eq!(
        storage
            .fetch(&"id1".into(), &status_only)
            .map(|r| r.retries),
        Some(1)
    );
}

/// Kopf's `MultiProgressStorage`: the first storage that has the record is read; every
/// storage is written, purged, touched and cleared, in order. With Kopf's two default
/// storages it is the smart storage, write for write.
#[test]
fn multi_storage_reads_the_first_and_writes_all() {
    let writable = StatusProgressStorage {
        writable: true,
        ..StatusProgressStorage::default()
    };
    let smart = SmartProgressStorage {
        status: writable.clone(),
        ..SmartProgressStorage::default()
    };
    let multi = MultiProgressStorage {
        storages: vec![
            Box::new(AnnotationsProgressStorage::default()),
            Box::new(writable),
        ],
    };
    let body = json!({
        "metadata": {"annotations": {"kopf.zalando.org/id1": r#"{"retries":2}"#, "kopf.zalando.org/touch-dummy": "old"}},
        "status": {"kopf": {"progress": {"id1": {"retries": 1}, "id2": {"retries": 3}}}},
        "spec": {"x": 1},
    });
    for id in ["id1", "id2", "id3"] {
        assert_eq!(
            multi.fetch(&id.into(), &body).map(|r| r.retries),
            smart.fetch(&id.into(), &body).map(|r| r.retries),
            "{id}"
        );
    }
    type Write = fn(&dyn ProgressStorage, &Value, &mut Value);
    let writes: [Write; 4] = [
        |s, body, patch| s.store(&"id3".into(), &typical(), body, patch),
        |s, body, patch| s.purge(&"id1".into(), body, patch),
        |s, body, patch| s.touch(body, patch, Some("new")),
        |s, body, patch| s.touch(body, patch, None),
    ];
    for write in writes {
        let (mut ours, mut smarts) = (json!({}), json!({}));
        write(&multi, &body, &mut ours);
        write(&smart, &body, &mut smarts);
        assert_eq!(ours, smarts);
        assert_ne!(ours, json!({}));
    }
    let (mut ours, mut smarts) = (body.clone(), body.clone());
    multi.clear(&mut ours);
    smart.clear(&mut smarts);
    assert_eq!(ours, smarts);

    // Two operators' prefixes: read from either, written under both.
    let moved = MultiProgressStorage {
        storages: vec![
            Box::new(AnnotationsProgressStorage::new(PREFIX)),
            Box::new(AnnotationsProgressStorage::default()),
        ],
    };
    assert_eq!(
        moved.fetch(&"id1".into(), &body).map(|r| r.retries),
        Some(2)
    );
    let mut patch = json!({});
    moved.store(&"id1".into(), &typical(), &json!({}), &mut patch);
    let keys = written_keys(&patch);
    assert!(keys.contains(&&format!("{PREFIX}/id1")), "{keys:?}");
    assert!(
        keys.contains(&&"kopf.zalando.org/id1".to_string()),
        "{keys:?}"
    );
    assert!(
        MultiProgressStorage::default()
            .fetch(&"id1".into(), &body)
            .is_none()
    );
}

#[test]
fn clearing_removes_own_fields_from_essences() {
    let mut essence = json!({
        "spec": {"x": 1},
        "metadata": {"annotations": {
            "kopf.zalando.org/create_fn": "{}",
            "kopf.zalando.org/touch-dummy": "x",
            "kopf.zalando.org.other/x": "kept",
            "other": "kept",
        }},
        "status": {"kopf": {"progress": {"create_fn": {}}}},
    });
    SmartProgressStorage::default().clear(&mut essence);
    assert_eq!(
        serde_json::to_string(&essence).unwrap(),
        r#"{"spec":{"x":1},"metadata":{"annotations":{"kopf.zalando.org.other/x":"kept","other":"kept"}}}"#
    );

    let mut essence = json!({
        "metadata": {"annotations": {"kopf.zalando.org/create_fn": "{}"}},
        "status": {"kopf": {"progress": {}, "other": 1}},
    });
    SmartProgressStorage::default().clear(&mut essence);
    assert_eq!(essence, json!({"status": {"kopf": {"other": 1}}}));
}

/// The annotations written, except the marker (written for non-`kopf.` prefixes).
fn written_keys(patch: &Value) -> Vec<&String> {
    let annotations = patch["metadata"]["annotations"].as_object().unwrap();
    annotations
        .keys()
        .filter(|key| !key.ends_with("/kopf-managed"))
        .collect()
}

fn storages() -> Vec<Box<dyn ProgressStorage>> {
    vec![
        Box::new(AnnotationsProgressStorage::default()),
        Box::new(StatusProgressStorage::default()),
        Box::new(SmartProgressStorage::default()),
        Box::new(MultiProgressStorage {
            storages: vec![
                Box::new(AnnotationsProgressStorage::default()),
                Box::new(StatusProgressStorage::default()),
            ],
        }),
    ]
}

fn timestamps() -> impl Strategy<Value = Option<OffsetDateTime>> {
    proptest::option::of(
        (0i64..253_402_300_799, 0u32..1_000_000).prop_map(|(s, us)| {
            OffsetDateTime::from_unix_timestamp(s)
                .unwrap()
                .replace_microsecond(us)
                .unwrap()
        }),
    )
}

fn records() -> impl Strategy<Value = ProgressRecord> {
    (
        (timestamps(), timestamps(), timestamps()),
        proptest::option::of("[a-z]{1,8}"),
        any::<u32>(),
        any::<bool>(),
        any::<bool>(),
        proptest::option::of(any::<String>()),
        prop::collection::btree_set(any::<String>(), 0..4),
    )
        .prop_map(
            |(
                (started, stopped, delayed),
                purpose,
                retries,
                success,
                failure,
                message,
                subrefs,
            )| {
                ProgressRecord {
                    started,
                    stopped,
                    delayed,
                    purpose,
                    retries,
                    success,
                    failure,
                    message,
                    subrefs: subrefs.into_iter().map(HandlerId::from).collect(),
                }
            },
        )
}

proptest! {
    #[test]
    fn records_round_trip_through_annotations(record in records()) {
        let storage = SmartProgressStorage::default();
        let id = HandlerId::from("some/handler");
        let mut patch = json!({});
        storage.store(&id, &record, &json!({}), &mut patch);
        prop_assert_eq!(storage.fetch(&id, &patch), Some(record.clone()));
        let text = record.to_json();
        prop_assert!(text.is_ascii());
        prop_assert_eq!(ProgressRecord::from_json(&text), Some(record));
    }
}
