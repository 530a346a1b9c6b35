//! Malformed bodies are rejected with the error that names the problem, and no input panics.

use super::*;
use crate::semantics::protobuf::envelope::PROTOBUF_CONTENT_TYPE;
use crate::semantics::protobuf::kinds::decodable;

/// Bodies without the magic are rejected.
#[test]
fn bad_magic() {
    for bad in [
        &b""[..],
        b"k8s",
        b"k8s\x01rest",
        b"{\"kind\":\"Namespace\"}",
    ] {
        let err = decode(bad).expect_err("bad magic");
        assert!(matches!(err, ProtobufError::BadMagic), "{err:?}");
    }
    assert!(ProtobufError::BadMagic.to_string().starts_with("bad magic"));
}

/// Every cut through the envelope or object is reported, as are overlong varints.
#[test]
fn truncated() {
    // Envelope with raw last, so every prefix longer than the typeMeta cuts into raw.
    let type_meta = Enc::new().msg(1, Enc::new().str(1, "v1").str(2, "Namespace"));
    let header_len = MAGIC.len() + type_meta.0.len();
    let mut full = MAGIC.to_vec();
    full.extend(type_meta.msg(2, Enc::new().msg(1, meta("demo"))).0);
    assert!(decode(&full).is_ok());
    for len in (MAGIC.len() + 1..header_len).chain(header_len + 1..full.len()) {
        let result = decode(full.get(..len).expect("in range"));
        assert!(result.is_err(), "prefix of {len} bytes decoded");
    }
    let mut long_length = MAGIC.to_vec();
    long_length.extend([0x12, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2]);
    assert!(matches!(
        decode(&long_length),
        Err(ProtobufError::Truncated)
    ));
    let mut cut_varint = MAGIC.to_vec();
    cut_varint.extend([0x08, 0x80]);
    assert!(matches!(decode(&cut_varint), Err(ProtobufError::Truncated)));
    assert_eq!(
        ProtobufError::Truncated.to_string(),
        "truncated protobuf message"
    );
    let mut long_varint = MAGIC.to_vec();
    long_varint.extend([
        0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01,
    ]);
    assert!(matches!(
        decode(&long_varint),
        Err(ProtobufError::VarintTooLong)
    ));
}

/// Kinds outside the table are rejected with a hint to use JSON.
#[test]
fn unsupported_kind() {
    for (api_version, kind) in [
        ("apps/v1", "ControllerRevision"),
        ("v1", "Deployment"),
        ("apps/v1beta1", "Deployment"),
    ] {
        let err = decode(&body(api_version, kind, Enc::new())).expect_err("unsupported");
        assert!(
            matches!(err, ProtobufError::UnsupportedKind { .. }),
            "{err:?}"
        );
    }
    let err =
        decode(&body("storage.k8s.io/v1", "StorageClass", Enc::new())).expect_err("unsupported");
    assert_eq!(
        err.to_string(),
        "unsupported kind \"StorageClass\" (apiVersion \"storage.k8s.io/v1\") in a protobuf body; send it as application/json"
    );
}

/// Envelope problems: missing kind, content encoding, foreign content type.
#[test]
fn envelope_errors() {
    let mut no_kind = MAGIC.to_vec();
    no_kind.extend(Enc::new().msg(1, Enc::new().str(1, "v1")).0);
    assert!(matches!(
        decode(&no_kind),
        Err(ProtobufError::MissingTypeMeta)
    ));
    let mut gzip = MAGIC.to_vec();
    gzip.extend(
        Enc::new()
            .msg(1, Enc::new().str(1, "v1").str(2, "Namespace"))
            .str(3, "gzip")
            .0,
    );
    assert!(matches!(
        decode(&gzip),
        Err(ProtobufError::UnsupportedContentEncoding(_))
    ));
    let mut json_type = MAGIC.to_vec();
    json_type.extend(
        Enc::new()
            .msg(1, Enc::new().str(1, "v1").str(2, "Namespace"))
            .str(4, "application/json")
            .0,
    );
    assert!(matches!(
        decode(&json_type),
        Err(ProtobufError::UnsupportedContentType(_))
    ));
    let mut explicit = MAGIC.to_vec();
    explicit.extend(
        Enc::new()
            .msg(1, Enc::new().str(1, "v1").str(2, "Namespace"))
            .str(4, PROTOBUF_CONTENT_TYPE)
            .0,
    );
    assert_eq!(
        decode(&explicit).expect("decodes"),
        json!({"apiVersion": "v1", "kind": "Namespace"})
    );
}

/// Field problems: wire type, IntOrString type, time range, fieldsV1, groups, field 0.
#[test]
fn field_errors() {
    let wrong_wire = body(
        "v1",
        "Namespace",
        Enc::new().msg(1, Enc::new().varint(1, 5)),
    );
    let err = decode(&wrong_wire).expect_err("wrong wire type");
    assert_eq!(
        err.to_string(),
        "field ObjectMeta.name has protobuf wire type 0, expected 2"
    );
    let bad_int_or_string = body(
        "apps/v1",
        "Deployment",
        Enc::new().msg(
            2,
            Enc::new().msg(
                4,
                Enc::new().msg(2, Enc::new().msg(1, Enc::new().varint(1, 2))),
            ),
        ),
    );
    assert!(matches!(
        decode(&bad_int_or_string),
        Err(ProtobufError::InvalidIntOrString { value: 2, .. })
    ));
    let bad_time = body(
        "v1",
        "Namespace",
        Enc::new().msg(1, Enc::new().msg(8, Enc::new().int(1, i64::MAX))),
    );
    assert!(matches!(
        decode(&bad_time),
        Err(ProtobufError::TimeOutOfRange { .. })
    ));
    let bad_fields = body(
        "v1",
        "Namespace",
        Enc::new().msg(
            1,
            Enc::new().msg(17, Enc::new().msg(7, Enc::new().str(1, "{"))),
        ),
    );
    assert!(matches!(
        decode(&bad_fields),
        Err(ProtobufError::InvalidFieldsV1 { .. })
    ));
    let mut group = MAGIC.to_vec();
    group.extend([0x0b]);
    assert!(matches!(
        decode(&group),
        Err(ProtobufError::UnsupportedWireType {
            field: 1,
            wire_type: 3
        })
    ));
    let mut zero = MAGIC.to_vec();
    zero.extend([0x00, 0x00]);
    assert!(matches!(
        decode(&zero),
        Err(ProtobufError::InvalidFieldNumber)
    ));
}

proptest! {
    /// Arbitrary bytes, with and without the magic, never panic.
    #[test]
    fn never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode(&bytes);
        let mut with_magic = MAGIC.to_vec();
        with_magic.extend(&bytes);
        let _ = decode(&with_magic);
    }

    /// Arbitrary raw bytes behind a valid envelope never panic, for every kind.
    #[test]
    fn never_panics_on_arbitrary_raw(
        kind in 0usize..decodable().count(),
        raw in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let &(api_version, kind, _) = decodable().nth(kind).expect("in range");
        let mut message = MAGIC.to_vec();
        message.extend(
            Enc::new()
                .msg(1, Enc::new().str(1, api_version).str(2, kind))
                .bytes(2, &raw)
                .0,
        );
        let _ = decode(&message);
    }

    /// A valid body with one byte changed never panics.
    #[test]
    fn never_panics_on_mutated_valid_body(
        index in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let mut valid = body("coordination.k8s.io/v1", "Lease", Enc::new()
            .msg(1, meta("leader"))
            .msg(2, Enc::new().str(1, "a").msg(3, Enc::new().varint(1, 5).varint(2, 7))));
        let at = index.index(valid.len());
        if let Some(slot) = valid.get_mut(at) {
            *slot = byte;
        }
        let _ = decode(&valid);
    }
}
