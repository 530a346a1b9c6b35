//! The protobuf wire format: varints, tags, length-delimited fields.

use base64::Engine as _;
use serde_json::Value;

use super::error::{ProtobufError, Result};

// ---------------------------------------------------------------------------------------------
// Wire format
// ---------------------------------------------------------------------------------------------

/// One field value as it appears on the wire.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wire<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64,
    /// Wire type 2.
    Bytes(&'a [u8]),
    /// Wire type 5.
    Fixed32,
}

impl Wire<'_> {
    /// The wire type number of this value.
    pub(crate) fn wire_type(self) -> u8 {
        match self {
            Wire::Varint(_) => 0,
            Wire::Fixed64 => 1,
            Wire::Bytes(_) => 2,
            Wire::Fixed32 => 5,
        }
    }
}

/// A cursor over the bytes of one message.
pub(crate) struct Reader<'a> {
    /// The bytes not read yet.
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Starts reading `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { rest: buf }
    }

    /// Whether everything has been read.
    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// Reads a base-128 varint of at most 10 bytes (bits beyond 64 are dropped, as Go does).
    pub(crate) fn varint(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.rest.split_first().ok_or(ProtobufError::Truncated)?;
            self.rest = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(ProtobufError::VarintTooLong)
    }

    /// Reads the next `len` bytes.
    pub(crate) fn take(&mut self, len: u64) -> Result<&'a [u8]> {
        let len = usize::try_from(len).map_err(|_| ProtobufError::Truncated)?;
        let (head, rest) = self
            .rest
            .split_at_checked(len)
            .ok_or(ProtobufError::Truncated)?;
        self.rest = rest;
        Ok(head)
    }

    /// Reads `N` bytes as a little-endian array.
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let bytes = self.take(N as u64)?;
        <[u8; N]>::try_from(bytes).map_err(|_| ProtobufError::Truncated)
    }

    /// Reads the next field's number and value, or `None` at the end of the message.
    pub(crate) fn next_field(&mut self) -> Result<Option<(u64, Wire<'a>)>> {
        if self.is_empty() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let number = tag >> 3;
        if number == 0 {
            return Err(ProtobufError::InvalidFieldNumber);
        }
        let wire = match tag & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => {
                self.array::<8>()?;
                Wire::Fixed64
            }
            2 => {
                let len = self.varint()?;
                Wire::Bytes(self.take(len)?)
            }
            5 => {
                self.array::<4>()?;
                Wire::Fixed32
            }
            other => {
                return Err(ProtobufError::UnsupportedWireType {
                    field: number,
                    wire_type: other as u8,
                });
            }
        };
        Ok(Some((number, wire)))
    }
}

/// Calls `f` with each field of the message in `buf`, in wire order.
pub(crate) fn for_each_field<'a>(
    buf: &'a [u8],
    mut f: impl FnMut(u64, Wire<'a>) -> Result<()>,
) -> Result<()> {
    let mut reader = Reader::new(buf);
    while let Some((number, wire)) = reader.next_field()? {
        f(number, wire)?;
    }
    Ok(())
}

/// The bytes of a length-delimited field, or a wire type error naming `message.field`.
pub(crate) fn expect_bytes<'a>(
    message: &'static str,
    field: &'static str,
    wire: Wire<'a>,
) -> Result<&'a [u8]> {
    match wire {
        Wire::Bytes(bytes) => Ok(bytes),
        other => Err(ProtobufError::WrongWireType {
            message,
            field,
            got: other.wire_type(),
            expected: 2,
        }),
    }
}

/// The value of a varint field, or a wire type error naming `message.field`.
pub(crate) fn expect_varint(
    message: &'static str,
    field: &'static str,
    wire: Wire<'_>,
) -> Result<u64> {
    match wire {
        Wire::Varint(value) => Ok(value),
        other => Err(ProtobufError::WrongWireType {
            message,
            field,
            got: other.wire_type(),
            expected: 0,
        }),
    }
}

/// Bytes as a string; invalid UTF-8 becomes U+FFFD, as Go's JSON encoder does.
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Bytes as Kubernetes JSON encodes `[]byte`: standard base64 with padding.
pub(crate) fn base64(bytes: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
}
