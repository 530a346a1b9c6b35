//! A protobuf body: the `k8s\\0` magic and the `runtime.Unknown` envelope that names the kind
//! of the object message inside.

use serde_json::{Map, Value};

use super::decoding::decode_message;
use super::error::ProtobufError;
use super::kinds::schema_of;
use super::wire::{expect_bytes, for_each_field, text};

/// The 4-byte prefix of every Kubernetes protobuf body.
pub(crate) const MAGIC: &[u8] = b"k8s\0";

/// The content type a `runtime.Unknown` envelope may name for its raw bytes (besides none).
pub(crate) const PROTOBUF_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Decodes a Kubernetes protobuf body: the 4-byte magic `k8s\0`, then a `runtime.Unknown` message (1: typeMeta {1: apiVersion, 2: kind}, 2: raw bytes, 3: contentEncoding, 4: contentType); `raw` is the object's message, decoded by the kind named in typeMeta. Returns the object as Kubernetes JSON, with "apiVersion" and "kind" first.
pub(crate) fn decode(body: &[u8]) -> std::result::Result<Value, ProtobufError> {
    let envelope = body.strip_prefix(MAGIC).ok_or(ProtobufError::BadMagic)?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    let mut content_encoding = String::new();
    let mut content_type = String::new();
    for_each_field(envelope, |number, wire| {
        match number {
            1 => {
                let type_meta = expect_bytes("Unknown", "typeMeta", wire)?;
                for_each_field(type_meta, |number, wire| {
                    match number {
                        1 => api_version = text(expect_bytes("TypeMeta", "apiVersion", wire)?),
                        2 => kind = text(expect_bytes("TypeMeta", "kind", wire)?),
                        _ => {}
                    }
                    Ok(())
                })?;
            }
            2 => raw = expect_bytes("Unknown", "raw", wire)?,
            3 => content_encoding = text(expect_bytes("Unknown", "contentEncoding", wire)?),
            4 => content_type = text(expect_bytes("Unknown", "contentType", wire)?),
            _ => {}
        }
        Ok(())
    })?;
    if api_version.is_empty() || kind.is_empty() {
        return Err(ProtobufError::MissingTypeMeta);
    }
    let Some(schema) = schema_of(&api_version, &kind) else {
        return Err(ProtobufError::UnsupportedKind { api_version, kind });
    };
    if !content_encoding.is_empty() {
        return Err(ProtobufError::UnsupportedContentEncoding(content_encoding));
    }
    if !content_type.is_empty() && content_type != PROTOBUF_CONTENT_TYPE {
        return Err(ProtobufError::UnsupportedContentType(content_type));
    }
    let fields = decode_message(schema, raw)?;
    let mut object = Map::new();
    object.insert("apiVersion".to_owned(), Value::String(api_version));
    object.insert("kind".to_owned(), Value::String(kind));
    object.extend(fields);
    Ok(Value::Object(object))
}
