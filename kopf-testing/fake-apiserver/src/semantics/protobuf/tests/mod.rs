//! Tests, with a tiny encoder that builds bodies the way client-go lays them out.

mod errors;
mod generated;
mod kinds;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::envelope::MAGIC;
use super::*;

/// A tiny protobuf encoder for building test bodies.
#[derive(Default)]
struct Enc(Vec<u8>);

impl Enc {
    /// An empty message.
    fn new() -> Self {
        Enc::default()
    }

    /// Appends a raw varint.
    fn raw_varint(&mut self, mut value: u64) {
        loop {
            let byte = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                self.0.push(byte);
                return;
            }
            self.0.push(byte | 0x80);
        }
    }

    /// Appends a tag.
    fn tag(&mut self, number: u64, wire_type: u64) {
        self.raw_varint(number << 3 | wire_type);
    }

    /// Appends a varint field.
    fn varint(mut self, number: u64, value: u64) -> Self {
        self.tag(number, 0);
        self.raw_varint(value);
        self
    }

    /// Appends a signed integer field (sign-extended, as Go writes int32 and int64).
    fn int(self, number: u64, value: i64) -> Self {
        self.varint(number, value as u64)
    }

    /// Appends a length-delimited field.
    fn bytes(mut self, number: u64, bytes: &[u8]) -> Self {
        self.tag(number, 2);
        self.raw_varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
        self
    }

    /// Appends a string field.
    fn str(self, number: u64, s: &str) -> Self {
        self.bytes(number, s.as_bytes())
    }

    /// Appends a nested message field.
    fn msg(self, number: u64, message: Enc) -> Self {
        self.bytes(number, &message.0)
    }

    /// Appends a map entry with a string key and a bytes value.
    fn entry(self, number: u64, key: &str, value: &[u8]) -> Self {
        self.msg(number, Enc::new().str(1, key).bytes(2, value))
    }

    /// Appends a 64-bit field.
    fn fixed64(mut self, number: u64, value: u64) -> Self {
        self.tag(number, 1);
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// Appends a 32-bit field.
    fn fixed32(mut self, number: u64, value: u32) -> Self {
        self.tag(number, 5);
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }
}

/// A whole body: magic plus a `runtime.Unknown` holding `raw`, as client-go writes it.
fn body(api_version: &str, kind: &str, raw: Enc) -> Vec<u8> {
    let unknown = Enc::new()
        .msg(1, Enc::new().str(1, api_version).str(2, kind))
        .msg(2, raw)
        .str(3, "")
        .str(4, "");
    let mut out = MAGIC.to_vec();
    out.extend(unknown.0);
    out
}

/// An ObjectMeta as gogo writes it: every non-pointer field present, zero or not.
fn meta(name: &str) -> Enc {
    Enc::new()
        .str(1, name)
        .str(2, "")
        .str(3, "")
        .str(4, "")
        .str(5, "")
        .str(6, "")
        .varint(7, 0)
        .msg(8, Enc::new())
}

/// An IntOrString holding an int.
fn int_or_string_int(value: i64) -> Enc {
    Enc::new().varint(1, 0).int(2, value).str(3, "")
}

/// An IntOrString holding a string.
fn int_or_string_str(value: &str) -> Enc {
    Enc::new().varint(1, 1).varint(2, 0).str(3, value)
}

/// Decodes and compares with `expected`, key order included.
fn check(body: &[u8], expected: Value) {
    let got = decode(body).expect("decodes");
    assert_eq!(
        serde_json::to_string_pretty(&got).expect("serializes"),
        serde_json::to_string_pretty(&expected).expect("serializes")
    );
}
