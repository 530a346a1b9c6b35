//! Table tests of shard selectors: parsing (with the real server's messages), FNV-1a, ranges.

use serde_json::json;

use super::shards::{ShardSelector, fnv1a_64};

const LOW: &str = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
const HIGH: &str = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')";

fn parse(input: &str) -> ShardSelector {
    ShardSelector::parse(input).unwrap_or_else(|e| panic!("{input:?} should parse: {e}"))
}

fn error(input: &str) -> String {
    match ShardSelector::parse(input) {
        Ok(selector) => panic!("{input:?} should fail, got {selector}"),
        Err(e) => e.to_string(),
    }
}

/// An object with this uid.
fn object_with_uid(uid: &str) -> serde_json::Value {
    json!({"metadata": {"name": "x", "namespace": "ns", "uid": uid}})
}

#[test]
fn fnv1a_64_matches_the_published_vectors() {
    assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a_64(b"foobar"), 0x8594_4171_f739_67e8);
}

#[test]
fn valid_selectors_parse_to_their_canonical_form() {
    let both = format!("{LOW} || {HIGH}");
    let cases: Vec<(String, String)> = vec![
        (LOW.into(), LOW.into()),
        (HIGH.into(), HIGH.into()),
        (both.clone(), both.clone()),
        (
            "shardRange(object.metadata.uid,'0x0000000000000000','0x8000000000000000')".into(),
            LOW.into(),
        ),
        (
            "  shardRange( object.metadata.uid ,\n '0x0000000000000000' ,\t'0x8000000000000000' )  "
                .into(),
            LOW.into(),
        ),
        // CEL's other string forms, and parentheses, read as the same selector.
        (
            r#"shardRange(object.metadata.uid, "0x0000000000000000", r'0x8000000000000000')"#
                .into(),
            LOW.into(),
        ),
        (
            r"shardRange(object.metadata.uid, '\x30x0000000000000000', '''0x8000000000000000''')"
                .into(),
            LOW.into(),
        ),
        (format!("({LOW}) || ({HIGH})"), both.clone()),
        (format!("{LOW}||{HIGH}"), both),
        (
            "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')"
                .into(),
            "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')"
                .into(),
        ),
    ];
    for (input, canonical) in cases {
        assert_eq!(parse(&input).to_string(), canonical, "for {input:?}");
    }
}

#[test]
fn invalid_selectors_fail_with_the_real_servers_messages() {
    let cases = [
        (
            "  ",
            "empty shard selector is not allowed; omit the parameter for unfiltered lists",
        ),
        (
            "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
            r#"hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean "0x0000000000000000"?)"#,
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0xff')",
            r#"hexEnd must be a 0x-prefixed 16-digit hex value, got "0xff" (did you mean "0x00000000000000ff"?)"#,
        ),
        (
            "shardRange(object.metadata.uid, '0000000000000000', '0x8000000000000000')",
            r#"hexStart must have '0x' prefix, got "0000000000000000""#,
        ),
        (
            "shardRange(object.metadata.uid, '0x', '0x8000000000000000')",
            "hexStart: hex value is required after '0x'",
        ),
        (
            "shardRange(object.metadata.uid, '0x000000000000000000', '0x8000000000000000')",
            r#"hexStart: hex value too long (18 chars, max 17): "000000000000000000""#,
        ),
        (
            "shardRange(object.metadata.uid, '0x000000000000000G', '0x8000000000000000')",
            r#"hexStart: invalid hex character "G" in "0x000000000000000G""#,
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x20000000000000000')",
            r#"hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64), got "0x20000000000000000""#,
        ),
        (
            "shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
            "shard range start 0x8000000000000000 must be less than end 0x8000000000000000",
        ),
        (
            "shardRange(object.metadata.uid, '0xffffffffffffffff', '0x0000000000000000')",
            "shard range start 0xffffffffffffffff must be less than end 0x0000000000000000",
        ),
        (
            "shardRange(object.metadata.uid, '0x10000000000000000', '0xffffffffffffffff')",
            "shard range start 0x10000000000000000 must be less than end 0xffffffffffffffff",
        ),
        (
            "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
            r#"unsupported field path "object.metadata.name"; supported: object.metadata.uid, object.metadata.namespace"#,
        ),
        (
            "shardRange(metadata.uid, '0x0000000000000000', '0x8000000000000000')",
            r#"unsupported field path "metadata.uid"; supported: object.metadata.uid, object.metadata.namespace"#,
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000')",
            "shardRange() requires exactly 3 arguments, got 2",
        ),
        (
            "shardRange('uid', '0x0000000000000000', '0x8000000000000000')",
            "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 1",
        ),
        (
            "shardRange(object.metadata.uid, 0, 8)",
            "hexStart must be a string literal, got int64",
        ),
        (
            "shardRange(object.metadata.uid, hex(0), '0x8000000000000000')",
            "hexStart must be a string literal (e.g. '0xff'), got expression kind 4",
        ),
        (
            "invalidFunc(object.metadata.uid, '0x00', '0x80')",
            r#"unsupported function "invalidFunc"; only shardRange() and || are allowed"#,
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') && shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
            r#"unsupported function "_&&_"; only shardRange() and || are allowed"#,
        ),
        (
            "object.metadata.uid > '0x0'",
            r#"unsupported function "_>_"; only shardRange() and || are allowed"#,
        ),
        (
            "object.metadata.uid",
            "unexpected expression kind 3; expected shardRange() call or || operator",
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')",
            r#"all shard ranges must use the same field, got "object.metadata.uid" and "object.metadata.namespace""#,
        ),
    ];
    for (input, detail) in cases {
        assert_eq!(
            error(input),
            format!("invalid shard selector: {detail}"),
            "for {input:?}"
        );
    }
}

#[test]
fn syntax_errors_are_cel_parse_errors() {
    for input in [
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000'",
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') ||",
        "shardRange(object.metadata.uid, '0x0000000000000000, '0x8000000000000000')",
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') | x",
        "shardRange(object.metadata.uid,, '0x0000000000000000', '0x8000000000000000')",
    ] {
        let message = error(input);
        assert!(
            message.starts_with("invalid shard selector: CEL parse error: Syntax error: "),
            "for {input:?}: {message}"
        );
    }
}

#[test]
fn objects_match_when_their_hash_is_in_a_range() {
    // FNV-1a("a") = 0xaf63dc4c8601ec8c: in the upper half, at the very bounds of tight ranges.
    let object = object_with_uid("a");
    assert!(!parse(LOW).matches(&object));
    assert!(parse(HIGH).matches(&object));
    assert!(parse(&format!("{LOW} || {HIGH}")).matches(&object));
    let starts_at = "shardRange(object.metadata.uid, '0xaf63dc4c8601ec8c', '0xaf63dc4c8601ec8d')";
    let ends_at = "shardRange(object.metadata.uid, '0x0000000000000000', '0xaf63dc4c8601ec8c')";
    assert!(parse(starts_at).matches(&object), "start is inclusive");
    assert!(!parse(ends_at).matches(&object), "end is exclusive");
    assert!(parse(&format!("{ends_at} || {starts_at}")).matches(&object));
}

#[test]
fn the_2_64_bound_closes_the_hash_space() {
    // A uid that hashes into the top 2^48 values: only a range up to 2^64 holds all of them.
    let value = (0..)
        .map(|i| format!("uid-{i}"))
        .find(|v| fnv1a_64(v.as_bytes()) >> 48 == 0xffff)
        .unwrap_or_default();
    let object = object_with_uid(&value);
    let to_top = "shardRange(object.metadata.uid, '0xffff000000000000', '0x10000000000000000')";
    let whole = "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')";
    assert!(parse(to_top).matches(&object));
    assert!(parse(whole).matches(&object));
    assert!(!parse(LOW).matches(&object));
}

#[test]
fn namespaces_hash_and_cluster_scoped_objects_hash_the_empty_string() {
    let selector = |start: u64| {
        parse(&format!(
            "shardRange(object.metadata.namespace, '0x{start:016x}', '0x{:016x}')",
            start + 1
        ))
    };
    let namespaced = json!({"metadata": {"namespace": "default", "uid": "u"}});
    let cluster = json!({"metadata": {"name": "node-1", "uid": "u"}});
    assert!(selector(fnv1a_64(b"default")).matches(&namespaced));
    assert!(!selector(fnv1a_64(b"default")).matches(&cluster));
    assert!(selector(fnv1a_64(b"")).matches(&cluster));
}
